"""The pods each simulated node runs, kept as they change: what the kubelet's pod manager and
its ``filterOutInactivePods`` give upstream (``pkg/kubelet/kubelet.go`` HandlePodAdditions,
``GetActivePods``), without going over the node's pods again at every admission.

A pod is *admitted* on its node when it is bound there, not terminal, and either past Pending
or let in by the node's admit handlers. The kubelet puts every pod version its informer
delivers (and a pod whose admission it has just granted) and drops deleted ones; besides the
pods (in the order they became admitted), each node keeps the sum of their requests
(``ksched.api.resources.pod_requests``) and how many declare usage (``ksched.io/usage-*``),
which the fit check at admission and the eviction manager's pass scheduler read.

``FakeKubelet(admitted_index=False)`` is the reference: the node's pods are looked up in the
informer's index and filtered at every use (tests/kubelet/test_admitted.py holds the two
equal; ``tests/sim/test_node_fast_paths_agree.py`` whole simulations).

Divergences: none in what is admitted; the order of a node's pods is the order they became
admitted (the reference's is the informer index's, which is arbitrary).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ksched.api.pod import Pod
from ksched.api.resources import pod_requests
from ksched.kubelet.usage import has_usage

__all__ = ["AdmittedPods", "same_map", "template_requests"]


class _NodePods:
    __slots__ = ("pods", "requested", "uids", "with_usage")

    def __init__(self) -> None:
        self.pods: dict[str, Pod] = {}  # pod key -> the pod as last delivered
        self.uids: set[str] = set()
        self.requested: dict[str, int] = {}
        self.with_usage = 0


class AdmittedPods:
    """Node name -> its admitted pods; ``is_admitted(pod)`` says whether a pod version counts
    (the kubelet's rule, which reads what it remembers of the pod's run)."""

    def __init__(self, is_admitted: Callable[[Pod], bool]) -> None:
        self._is_admitted = is_admitted
        self._nodes: dict[str, _NodePods] = {}
        self._node_of: dict[str, str] = {}  # pod key -> its node here

    def put(self, pod: Pod) -> None:
        """The current version of ``pod`` (from the informer, or just admitted)."""
        key = pod.key
        node = self._node_of.get(key)
        if not self._is_admitted(pod):
            if node is not None:
                self.discard(key)
            return
        if node is not None and node != pod.node_name:
            self.discard(key)
            node = None
        entry = self._nodes.get(pod.node_name)
        if entry is None:
            entry = self._nodes[pod.node_name] = _NodePods()
        old = entry.pods.get(key)
        entry.pods[key] = pod  # an update keeps the pod's place
        if old is None or old.uid != pod.uid:
            if old is not None:
                entry.uids.discard(old.uid)
            entry.uids.add(pod.uid)
        if old is not None and old.containers is pod.containers and old.init_containers is pod.init_containers \
                and old.overhead is pod.overhead and old.pod_level_requests is pod.pod_level_requests \
                and old.annotations is pod.annotations:
            # The very parsed parts requests and usage are read from: a status write shares
            # them (``Pod.with_status``), so it charges the same.
            return
        if old is not None:
            _charge(entry, old, -1)
        self._node_of[key] = pod.node_name
        _charge(entry, pod, 1)

    def discard(self, key: str) -> None:
        """The pod ``key`` is gone (deleted, or no longer admitted)."""
        node = self._node_of.pop(key, None)
        if node is None:
            return
        entry = self._nodes[node]
        old = entry.pods.pop(key)
        entry.uids.discard(old.uid)
        _charge(entry, old, -1)
        if not entry.pods:
            del self._nodes[node]

    def pods(self, node_name: str, but: str = "") -> list[Pod]:
        """The node's admitted pods but the one whose uid is ``but``."""
        entry = self._nodes.get(node_name)
        if entry is None:
            return []
        if but and but in entry.uids:
            return [p for p in entry.pods.values() if p.uid != but]
        return list(entry.pods.values())

    def count(self, node_name: str, but: str = "") -> int:
        """``len(self.pods(node_name, but))``, without the list when no pod has uid ``but``."""
        entry = self._nodes.get(node_name)
        if entry is None:
            return 0
        if but and but in entry.uids:
            return sum(1 for p in entry.pods.values() if p.uid != but)
        return len(entry.pods)

    def others(self, node_name: str, key: str, uid: str) -> tuple[int, dict[str, int] | None]:
        """``(count(node_name, but=uid), None if key in self else requested(node_name))``: what the
        kubelet's admission of pod ``key`` (of uid ``uid``) on ``node_name`` reads of the node's
        other pods, in one call (``ksched.kubelet.fake.ONE_OTHERS_LOOKUP``)."""
        entry = self._nodes.get(node_name)
        if entry is None:
            return 0, None if key in self._node_of else {}
        if uid and uid in entry.uids:
            count = sum(1 for p in entry.pods.values() if p.uid != uid)
        else:
            count = len(entry.pods)
        return count, None if key in self._node_of else entry.requested

    def requested(self, node_name: str) -> dict[str, int]:
        """The sum of the node's admitted pods' requests (resources summing to 0 may be absent)."""
        entry = self._nodes.get(node_name)
        return entry.requested if entry is not None else {}

    def any_usage(self, node_name: str) -> bool:
        """Whether any admitted pod of the node declares usage."""
        entry = self._nodes.get(node_name)
        return entry is not None and entry.with_usage > 0

    def __contains__(self, key: str) -> bool:
        return key in self._node_of


# ``_charge`` reads a pod's requests from its template: the replicas of a template share their
# parsed containers, init containers, overhead and pod-level requests (what ``pod_requests``
# reads), so the sum is worked out once per template rather than once (and kept) per pod
# version. False: ``pod_requests`` of each pod (the reference; the same values).
TEMPLATE_REQUESTS = True
_TEMPLATES_MAX = 4096  # templates kept: forgotten all at once when full
# id(pod.containers) -> (the containers, init containers, overhead, pod-level requests, the sum).
_templates: dict[int, tuple[Any, Any, Mapping[str, int], Mapping[str, int], dict[str, int]]] = {}


def template_requests(pod: Pod) -> dict[str, int]:
    """``pod_requests(pod)`` (the same values; do not change it), from a memo per template."""
    if not TEMPLATE_REQUESTS:
        return pod_requests(pod)
    c = pod._cache
    if c is not None:
        r = c.get("requests")
        if r is not None:
            return r  # type: ignore[no-any-return]
    containers = pod.containers
    t = _templates.get(id(containers))
    if t is None or t[0] is not containers or t[1] is not pod.init_containers \
            or not same_map(t[2], pod.overhead) or not same_map(t[3], pod.pod_level_requests):
        if len(_templates) >= _TEMPLATES_MAX:
            _templates.clear()
        # (the entry holds the parts: while it is kept, no other object has their ids)
        t = _templates[id(containers)] = (containers, pod.init_containers, pod.overhead, pod.pod_level_requests,
                                          pod_requests(pod, cache=False))
    return t[4]


def same_map(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """The same map, or both empty (a pod without one has an empty map of its own)."""
    return a is b or (not a and not b)


def _charge(entry: _NodePods, pod: Pod, sign: int) -> None:
    req = entry.requested
    for k, v in template_requests(pod).items():
        n = req.get(k, 0) + sign * v
        if n:
            req[k] = n
        else:
            req.pop(k, None)
    if has_usage(pod):
        entry.with_usage += sign
