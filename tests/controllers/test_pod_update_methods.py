"""The taint-eviction, PodGC and disruption controllers' Pod update handlers (``_on_pod_update``,
called by the informer with ``(old, new)``) do what their add handler does with the new pod,
which is what they registered before (``lambda old, new: self._on_pod(new)``): on two clusters
built alike, random pod updates (node tainted NoExecute, clean, unknown or none; phase; deletion;
with and without a PodDisruptionBudget; PodGC's terminated-pod threshold reached or not) leave
each controller's state and work queue the same. The ResourceQuota controller's Pod update
handler (which reads the new pod's phase before the old one's) queues the namespace's quotas
exactly when the written-out condition says so."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.controllers.test_pod_update_skip import _state

from api_objects import mknode, mkpdb, mkpod
from ksched.api.pod import Pod
from ksched.clock import VirtualClock
from ksched.sim.cluster import EmbeddedCluster

_NAMES = ("taint-eviction-controller", "pod-garbage-collector", "disruption")


def _cluster(pdb: bool) -> EmbeddedCluster:
    c = EmbeddedCluster(VirtualClock())
    c.store.create(mknode("clean"))
    tainted = mknode("tainted")
    tainted["spec"] = {"taints": [{"key": "k", "effect": "NoExecute"}, {"key": "s", "effect": "NoSchedule"}]}
    c.store.create(tainted)
    soft = mknode("soft")
    soft["spec"] = {"taints": [{"key": "s", "effect": "NoSchedule"}]}
    c.store.create(soft)
    if pdb:
        c.store.create(mkpdb("budget", {"matchLabels": {"app": "a"}}, minAvailable=1))
    c.controllers.settle()
    return c


def _pod(name: str, node: str, phase: str, deleting: bool, rv: int) -> Pod:
    raw = mkpod(name, labels={"app": "a"}, nodeName=node)
    raw["metadata"].update(uid=f"u-{name}", resourceVersion=str(rv))
    if deleting:
        raw["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    raw["status"] = {"phase": phase}
    return Pod(raw)


_UPDATES = st.lists(st.tuples(st.sampled_from(["p", "q"]), st.sampled_from(["", "clean", "tainted", "soft", "gone"]),
                              st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]), st.booleans()),
                    min_size=1, max_size=12)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(_UPDATES, st.booleans(), st.sampled_from([None, 0, 1]))
@example([("p", "clean", "Succeeded", False), ("q", "clean", "Failed", False), ("p", "clean", "Running", False),
          ("q", "gone", "Running", True)], False, 1)  # the threshold passed, then not; a missing node
def test_update_methods_do_what_the_add_handler_does_with_the_new_pod(updates: list[tuple[str, str, str, bool]],
                                                                       pdb: bool, threshold: int | None) -> None:
    a, b = _cluster(pdb), _cluster(pdb)
    ca = {c.name: c for c in a.controllers.controllers if c.name in _NAMES}
    cb = {c.name: c for c in b.controllers.controllers if c.name in _NAMES}
    assert set(ca) == set(_NAMES)
    if threshold is not None:  # (None: the default threshold, far above these few pods)
        ca["pod-garbage-collector"].threshold = cb["pod-garbage-collector"].threshold = threshold  # type: ignore[attr-defined]
    last: dict[str, Pod] = {}
    for rv, (name, node, phase, deleting) in enumerate(updates, 1):
        new = _pod(name, node, phase, deleting, rv)
        old = last.get(name, _pod(name, "", "Pending", False, 0))
        last[name] = new
        for n in _NAMES:
            ca[n]._on_pod(new)  # type: ignore[attr-defined]
            cb[n]._on_pod_update(old, new)  # type: ignore[attr-defined]
            assert _state(vars(cb[n])) == _state(vars(ca[n])), n


def test_registered_update_handlers_are_the_methods() -> None:
    c = _cluster(True)
    pods = c.controllers.informers.informer("Pod")
    by_owner: dict[str, Any] = {getattr(h.on_update, "__self__", None).__class__.__name__: h.on_update
                                for h in pods.handlers}
    for cls in ("TaintEvictionController", "PodGCController", "DisruptionController"):
        assert by_owner[cls].__name__ == "_on_pod_update"


_PHASES = st.sampled_from(["Pending", "Running", "Succeeded", "Failed"])


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(_PHASES, _PHASES, st.sampled_from(["pod", "old-not-pod", "new-not-pod"])),
                min_size=1, max_size=10))
def test_resourcequota_pod_update_queues_exactly_on_a_pod_turning_terminal(
        updates: list[tuple[str, str, str]]) -> None:
    c = EmbeddedCluster(VirtualClock())
    c.store.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "quota", "namespace": "default"},
                    "spec": {"hard": {"pods": "10", "cpu": "4"}}})
    c.controllers.settle()
    rq = next(x for x in c.controllers.controllers if x.name == "resourcequota")
    replenished: list[Any] = []
    real = rq._replenish
    rq._replenish = lambda o: (replenished.append(o), real(o))  # type: ignore[method-assign]
    for rv, (before, after, shape) in enumerate(updates, 1):
        old: Any = _pod("p", "clean", before, False, rv)
        new: Any = _pod("p", "clean", after, False, rv + 1)
        if shape == "old-not-pod":
            old = object()
        elif shape == "new-not-pod":
            new = object()
        replenished.clear()
        rq._on_update(old, new)
        want = isinstance(new, Pod) and isinstance(old, Pod) and not old.is_terminal and new.is_terminal
        assert replenished == ([new] if want else [])
