"""The node's own fit check at pod admission, as upstream's ``pkg/kubelet/lifecycle/predicate.go``
(``predicateAdmitHandler``): the kubelet re-checks what a scheduler decided, against the pods the
node has already admitted, and refuses a pod that does not fit.

In order: the node must be known (``InvalidNodeInfo``); the pod's ``kubernetes.io/os`` label and
``spec.os.name`` must match the node's OS; then the scheduler's ``AdmissionCheck`` -- resources
(pod count, cpu, memory, ephemeral-storage, then scalar resources; only requests above zero,
extended resources the node has none of are dropped first: the node lacks them, or DRA devices
provide them (DRAExtendedResource, as upstream's check without a DRA manager)), required node affinity and
nodeSelector, ``spec.nodeName``, host ports, and NoExecute taints (static pods skip the taint
check). Only the first failure is reported: ``OutOf<resource>`` with "Node didn't have enough
resource: ..." for resources, ``<Predicate>`` with "Predicate <Predicate> failed: ..." for the rest.

``PredicateAdmitHandler.admit_without_pods`` answers from how many pods the node runs and the sum
of their requests (the kubelet keeps both, ``ksched.kubelet.admitted``) for a pod without host
ports, whose check is the only one that reads the other pods themselves: the same checks in the
same order (``_fits_counted`` is ``_fits`` without going over the pods; ``_fits`` stays the
reference). With ``ADMIT_BY_TEMPLATE`` (False: ``admit_each_check`` for every pod, the reference)
it answers through ``admit_by_template``: a pod whose template (its parsed containers, overhead,
pod-level requests, affinity and node selector, shared by the replicas of one template, and its
OS label and field) asks for native resources only, has no OS label or field, no node selector
or required node affinity, on a node without NoExecute taints, has its OS and after-resources
checks pass by construction, so only the pod count and the template's requests (kept with the
resource names in the fit check's order) are checked (``tests/kubelet/test_admit_by_template.py``);
with ``PARSED_OS_NAME`` it reads the OS field as parsed with the pod (``Pod.os_name``), not from
the manifest (``tests/kubelet/test_parsed_os_name.py``).

Divergences: critical-pod preemption (``pkg/kubelet/preemption``) is not simulated (a critical
pod that does not fit is refused like any other); the node's OS is its ``kubernetes.io/os`` label
(``linux`` without one); the NodeAffinity retry against a fresh Node is moot (the informer's Node
is the API's); SupplementalGroupsPolicy and plugin-resource checks do not apply.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ksched.api.accounting import host_port_conflict
from ksched.api.node import Node
from ksched.api.pod import OS_NAME_UNPARSED, Pod
from ksched.api.resource import is_dra_extended_resource_name
from ksched.api.resources import pod_requests
from ksched.api.taints import NO_EXECUTE, find_untolerated_taint
from ksched.kubelet.lifecycle import ADMITTED, PodAdmitAttributes, PodAdmitResult

__all__ = [
    "ERR_NODE_AFFINITY",
    "ERR_NODE_NAME",
    "ERR_NODE_PORTS",
    "ERR_TAINTS",
    "PredicateAdmitHandler",
    "general_predicates",
]

LABEL_OS = "kubernetes.io/os"
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"

# (predicate name, reason) as the scheduler plugins report them (``AdmissionCheck``).
ERR_NODE_AFFINITY = ("NodeAffinity", "node(s) didn't match Pod's node affinity/selector")
ERR_NODE_NAME = ("NodeName", "node(s) didn't match the requested node name")
ERR_NODE_PORTS = ("NodePorts", "node(s) didn't have free ports for the requested pod ports")
ERR_TAINTS = ("TaintToleration", "node(s) had taints that the pod didn't tolerate")

_NATIVE_ORDER = ("cpu", "memory", "ephemeral-storage")
_NATIVE_OR_PODS = frozenset((*_NATIVE_ORDER, "pods"))


def _node_os(node: Node) -> str:
    return node.labels.get(LABEL_OS) or "linux"


def _is_static(pod: Pod) -> bool:
    src = pod.annotations.get(CONFIG_SOURCE_ANNOTATION, "")
    return bool(src) and src != "api"


def _insufficient(resource: str, requested: int, used: int, capacity: int) -> PodAdmitResult:
    return PodAdmitResult(False, f"OutOf{resource}",
                          f"Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, "
                          f"capacity: {capacity}")


def _fits(pod: Pod, node: Node, others: Iterable[Pod], others_requested: Mapping[str, int] | None = None
          ) -> PodAdmitResult:
    """noderesources.Fits against the admitted pods: the first insufficient resource.
    ``others_requested``: the sum of the others' requests, when the caller keeps it."""
    alloc = node.allocatable
    others = list(others)
    max_pods = alloc.get("pods", 0)
    if len(others) + 1 > max_pods:
        return _insufficient("pods", 1, len(others), max_pods)
    # Extended resources the node has none of are cluster-level or DRA-backed: not the node's concern.
    request = {k: v for k, v in pod_requests(pod).items()
               if v > 0 and k != "pods" and not (is_dra_extended_resource_name(k) and alloc.get(k, 0) <= 0)}
    if not request:
        return ADMITTED
    if others_requested is not None:
        used: Mapping[str, int] = others_requested
    else:
        summed: dict[str, int] = {}
        for o in others:
            for k, v in pod_requests(o).items():
                summed[k] = summed.get(k, 0) + v
        used = summed
    names = [r for r in _NATIVE_ORDER if r in request] + sorted(r for r in request if r not in _NATIVE_ORDER)
    for r in names:
        have = alloc.get(r, 0)
        if request[r] > have - used.get(r, 0):
            return _insufficient(r, request[r], used.get(r, 0), have)
    return ADMITTED


def _fits_counted(pod: Pod, node: Node, other_count: int, used: Mapping[str, int]) -> PodAdmitResult:
    """:func:`_fits` for ``other_count`` other pods whose requests sum to ``used``: the same
    first insufficient resource, the native ones looked up by name rather than the requests
    filtered and sorted (only a pod with other resources has those filtered and sorted)."""
    alloc = node.allocatable
    max_pods = alloc.get("pods", 0)
    if other_count + 1 > max_pods:
        return _insufficient("pods", 1, other_count, max_pods)
    req = pod_requests(pod)
    names = [r for r in _NATIVE_ORDER if req.get(r, 0) > 0]
    if len(req) > len(names):
        extra = [k for k, v in req.items() if k not in _NATIVE_OR_PODS and v > 0
                 and not (is_dra_extended_resource_name(k) and alloc.get(k, 0) <= 0)]
        if extra:
            extra.sort()
            names += extra
    for r in names:
        have = alloc.get(r, 0)
        if req[r] > have - used.get(r, 0):
            return _insufficient(r, req[r], used.get(r, 0), have)
    return ADMITTED


def _ports_conflict(pod: Pod, others: Iterable[Pod]) -> bool:
    if not pod.host_ports():
        return False  # nothing to conflict with
    used: dict[tuple[str, int], set[str]] = {}
    for o in others:
        for p in o.host_ports():
            used.setdefault((p.protocol, p.host_port), set()).add(p.host_ip or "0.0.0.0")
    for p in pod.host_ports():
        if host_port_conflict(used, p.host_ip or "0.0.0.0", p.protocol, p.host_port):
            return True
    return False


def general_predicates(pod: Pod, node: Node, others: list[Pod],
                       others_requested: Mapping[str, int] | None = None) -> PodAdmitResult:
    """The scheduler's ``AdmissionCheck`` as the kubelet runs it: the first failure.
    ``others_requested``: the sum of the others' requests, when the caller keeps it."""
    fit = _fits(pod, node, others, others_requested)
    if not fit.admit:
        return fit
    return _other_predicates(pod, node, others)


def _other_predicates(pod: Pod, node: Node, others: Iterable[Pod]) -> PodAdmitResult:
    """The checks after the resources' (``others`` read only when the pod has host ports)."""
    failure: tuple[str, str] | None = None
    if not pod.matches_node_affinity(node.name, node.labels):
        failure = ERR_NODE_AFFINITY
    elif pod.node_name and pod.node_name != node.name:
        failure = ERR_NODE_NAME
    elif _ports_conflict(pod, others):
        failure = ERR_NODE_PORTS
    elif not _is_static(pod) and find_untolerated_taint(node.taints, pod.tolerations, (NO_EXECUTE,)) is not None:
        failure = ERR_TAINTS
    if failure is None:
        return ADMITTED
    name, reason = failure
    return PodAdmitResult(False, name, f"Predicate {name} failed: {reason}")


class _Template:
    """What :meth:`PredicateAdmitHandler.admit_by_template` needs of a pod's template: the
    parsed parts its checks read (by identity: the replicas of one template share them; its OS
    label and field by value), its requests and the names the fit check goes through, and
    whether the checks after the resources' pass on any node without NoExecute taints."""

    __slots__ = ("affinity", "containers", "host_ports", "init_containers", "names", "node_selector", "os_label",
                 "os_name", "overhead", "plain", "pod_level_requests", "request")

    def __init__(self, pod: Pod, os_label: str | None, os_name: Any) -> None:
        self.containers = pod.containers
        self.init_containers = pod.init_containers
        self.overhead = pod.overhead
        self.pod_level_requests = pod.pod_level_requests
        self.affinity = pod.affinity
        self.node_selector = pod.node_selector
        self.os_label = os_label
        self.os_name = os_name
        self.host_ports = bool(pod.host_ports())  # (read from the containers and init containers)
        req = self.request = pod_requests(pod)
        names = tuple(r for r in _NATIVE_ORDER if req.get(r, 0) > 0)
        # Only native resources (no other name the node's allocatable would filter), no OS
        # label or field (no OS check), no node selector or required node affinity: the checks
        # after the resources' pass on any node without NoExecute taints (host ports are not
        # asked about here).
        na = pod.affinity.node_affinity if pod.affinity is not None else None
        self.plain = (all(k in _NATIVE_OR_PODS or v <= 0 for k, v in req.items()) and os_label is None
                      and not os_name and not pod.node_selector and (na is None or na.required is None))
        self.names = names

    def matches(self, pod: Pod, os_label: str | None, os_name: Any) -> bool:
        # (``same_map`` inline: a call less per map and pod)
        a, b = self.overhead, pod.overhead
        if not (a is b or (not a and not b)):
            return False
        a, b = self.pod_level_requests, pod.pod_level_requests
        if not (a is b or (not a and not b)):
            return False
        a, b = self.node_selector, pod.node_selector
        return ((a is b or (not a and not b)) and self.containers is pod.containers
                and self.init_containers is pod.init_containers and self.affinity is pod.affinity
                and self.os_label == os_label and self.os_name == os_name)


# The predicate handler answers a pod of a template it has seen, on a node without NoExecute
# taints, from what it worked out for the template (``admit_by_template``); False: every check
# for every pod (``admit_each_check``, the reference).
ADMIT_BY_TEMPLATE = True
# ``admit_by_template`` reads the pod's ``spec.os.name`` as parsed with its spec (``Pod.os_name``)
# rather than from the manifest: by the time the kubelet starts a pod, the manifest's spec map
# was last read at the binding, thousands of pods earlier (two cold maps a pod, ~1 us). The
# manifest still where the parsed value is ``OS_NAME_UNPARSED``. False: the manifest (the
# reference; tests/kubelet/test_parsed_os_name.py).
PARSED_OS_NAME = True
_TEMPLATES_MAX = 4096  # templates kept: forgotten all at once when full
_templates: dict[int, _Template] = {}  # id(pod.containers) -> its template (which holds them)


def _template(pod: Pod, os_label: str | None, os_name: Any) -> _Template:
    t = _templates.get(id(pod.containers))
    if t is None or not t.matches(pod, os_label, os_name):
        if len(_templates) >= _TEMPLATES_MAX:
            _templates.clear()
        t = _templates[id(pod.containers)] = _Template(pod, os_label, os_name)
    return t


def _no_execute_free(node: Node) -> bool:
    return all(t.effect != NO_EXECUTE for t in node.taints)


class PredicateAdmitHandler:
    """Admits a pod that fits the node beside the pods it already runs."""

    def __init__(self, get_node: Callable[[], Node | None]) -> None:
        self.get_node = get_node
        self._memo_node: Node | None = None  # the node last seen, and whether it has no NoExecute taint
        self._memo_plain = False

    def admit(self, attrs: PodAdmitAttributes) -> PodAdmitResult:
        node = self.get_node()
        if node is None:
            return PodAdmitResult(False, "InvalidNodeInfo", "Kubelet cannot get node info.")
        pod = attrs.pod
        refused = self._os_refusal(pod, node)
        if refused is not None:
            return refused
        return general_predicates(pod, node, list(attrs.other_pods), attrs.other_requests)

    def admit_without_pods(self, pod: Pod, other_count: int, other_requests: Mapping[str, int] | None
                           ) -> PodAdmitResult | None:
        """:meth:`admit` from the number of other pods and the sum of their requests; None (ask
        :meth:`admit`) without that sum or for a pod with host ports. With ``ADMIT_BY_TEMPLATE``
        through :meth:`admit_by_template`."""
        if ADMIT_BY_TEMPLATE:
            return self.admit_by_template(pod, other_count, other_requests)
        return self.admit_each_check(pod, other_count, other_requests)

    def admit_each_check(self, pod: Pod, other_count: int, other_requests: Mapping[str, int] | None
                         ) -> PodAdmitResult | None:
        """:meth:`admit_without_pods` checking everything for every pod (the reference)."""
        if other_requests is None or pod.host_ports():
            return None
        node = self.get_node()
        if node is None:
            return PodAdmitResult(False, "InvalidNodeInfo", "Kubelet cannot get node info.")
        refused = self._os_refusal(pod, node)
        if refused is not None:
            return refused
        fit = _fits_counted(pod, node, other_count, other_requests)
        if not fit.admit:
            return fit
        return _other_predicates(pod, node, ())

    def admit_by_template(self, pod: Pod, other_count: int, other_requests: Mapping[str, int] | None,
                          node: Node | None = None) -> PodAdmitResult | None:
        """:meth:`admit_without_pods`; for a pod whose template is plain (``_Template``) on a
        node without NoExecute taints, from the template: the OS checks and the checks after
        the resources' pass (node affinity, the node's name, no host ports, no taint to
        tolerate), so only the pod count and the template's requests against the others' sum
        are checked, in the same order with the same messages. ``node``: what ``get_node()``
        returns now, when the caller has just looked it up (None: asked here)."""
        if other_requests is None:
            return None
        os_label = pod.labels.get(LABEL_OS)
        if PARSED_OS_NAME:
            os_name = pod.os_name
            if os_name is OS_NAME_UNPARSED:
                os_name = ((pod.raw.get("spec") or {}).get("os") or {}).get("name")
        else:
            os_name = ((pod.raw.get("spec") or {}).get("os") or {}).get("name")
        t = _template(pod, os_label, os_name)
        if t.host_ports:
            return None
        if node is None:
            node = self.get_node()
        if node is None:
            return PodAdmitResult(False, "InvalidNodeInfo", "Kubelet cannot get node info.")
        if node is not self._memo_node:
            self._memo_node = node
            self._memo_plain = _no_execute_free(node)
        if not (t.plain and self._memo_plain and pod.node_name == node.name):
            return self.admit_each_check(pod, other_count, other_requests)
        alloc = node.allocatable
        max_pods = alloc.get("pods", 0)
        if other_count + 1 > max_pods:
            return _insufficient("pods", 1, other_count, max_pods)
        req = t.request
        for r in t.names:
            have = alloc.get(r, 0)
            used = other_requests.get(r, 0)
            if req[r] > have - used:
                return _insufficient(r, req[r], used, have)
        return ADMITTED

    @staticmethod
    def _os_refusal(pod: Pod, node: Node) -> PodAdmitResult | None:
        os_label = pod.labels.get(LABEL_OS)
        if os_label is not None and os_label != _node_os(node):
            return PodAdmitResult(False, "PodOSSelectorNodeLabelDoesNotMatch",
                                  f"Failed to admit pod as the `{LABEL_OS}` label doesn't match node label")
        os_name = ((pod.raw.get("spec") or {}).get("os") or {}).get("name")
        if os_name and os_name != _node_os(node):
            return PodAdmitResult(False, "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")
        return None
