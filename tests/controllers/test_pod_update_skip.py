"""``unowned_pod_update`` (``ksched.controllers.podupdates``): the Pod updates that the owner-driven
controllers' handlers (ReplicaSet, DaemonSet, StatefulSet, Job, ResourceClaim, garbage collector)
skip through ``EventHandler.skip_update``. Whatever the predicate lets the informer skip, each of
those handlers would have done nothing with: on random pod pairs near the bare-pod case, calling
every skipping handler leaves the whole controller manager's state and work queues as they were.
The informer's dispatch: a skipped handler is not called, the others are, and one predicate is
evaluated once per update."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api_objects import mkds, mkpod, mkrs, mksts
from ksched.api.meta import KubeObject
from ksched.api.pod import Pod
from ksched.client.informer import EventHandler, InformerFactory, SharedInformer
from ksched.client.record import EventRecorder
from ksched.clock import VirtualClock
from ksched.controllers.podupdates import unowned_pod_update
from ksched.sim.cluster import EmbeddedCluster

_INFRA = (SharedInformer, InformerFactory, VirtualClock, EventRecorder)


def _state(x: Any, depth: int = 0) -> Any:
    """A comparable picture of a controller's own state (not its informers, client or clock)."""
    if depth > 8 or callable(x) or isinstance(x, _INFRA):
        return None
    if x is None or isinstance(x, (str, int, float, bool, bytes)):
        return x
    if isinstance(x, KubeObject):
        return ("object", x.KIND, x.key, x.resource_version, x.uid)
    if isinstance(x, dict):
        return {k: _state(v, depth + 1) for k, v in x.items()}
    if isinstance(x, (list, tuple, deque)):
        return [_state(v, depth + 1) for v in x]
    if isinstance(x, (set, frozenset)):
        return frozenset(x)
    fields = getattr(x, "__dict__", None)
    if fields is None:
        fields = {s: getattr(x, s, None) for s in getattr(type(x), "__slots__", ())}
    if not fields:
        return type(x).__name__
    return (type(x).__name__, {k: _state(v, depth + 1) for k, v in fields.items() if k not in ("client", "_seq")})


def _manager_state(cluster: EmbeddedCluster) -> list[Any]:
    return [(c.name, _state(vars(c))) for c in cluster.controllers.controllers]


@pytest.fixture(scope="module")
def cluster() -> EmbeddedCluster:
    """Every controller, and owners that select ``app=a`` (none of them makes pods: no replicas,
    no nodes, a suspended Job)."""
    c = EmbeddedCluster(VirtualClock())
    c.store.create(mkrs("rs", replicas=0, labels={"app": "a"}))
    c.store.create(mksts("sts", replicas=0, labels={"app": "a"}))
    c.store.create(mkds("ds", labels={"app": "a"}))
    c.store.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job", "namespace": "default"},
                    "spec": {"suspend": True, "selector": {"matchLabels": {"app": "a"}}, "manualSelector": True,
                             "template": {"metadata": {"labels": {"app": "a"}},
                                          "spec": {"restartPolicy": "Never",
                                                   "containers": [{"name": "c", "image": "img"}]}}}})
    c.controllers.settle()
    return c


def _owners(cluster: EmbeddedCluster) -> list[dict[str, Any]]:
    out = []
    for kind, name in (("ReplicaSet", "rs"), ("StatefulSet", "sts"), ("DaemonSet", "ds"), ("Job", "job")):
        o = cluster.store.get(kind, "default", name)
        out.append({"apiVersion": o.API_VERSION, "kind": kind, "name": name, "uid": o.uid, "controller": True,
                    "blockOwnerDeletion": True})
    out.append({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "uid": "no-such-uid",
                "controller": True})
    return out


# One feature each: the bare pod has none of them; a change turns one on or off.
_FEATURES = ("owner", "finalizer", "foreground", "deleting", "labels", "other-labels", "claim", "claim-status",
             "extended-claim", "uid", "node", "phase", "no-status")


def _pod(features: frozenset[str], rv: int, owner: dict[str, Any]) -> Pod:
    raw = mkpod("p", {"app": "a"} if "labels" in features else ({"app": "b"} if "other-labels" in features else {}))
    md = raw["metadata"]
    md["uid"] = "uid-2" if "uid" in features else "uid-1"
    md["resourceVersion"] = str(rv)
    md["creationTimestamp"] = "2026-01-01T00:00:00Z"
    if "owner" in features:
        md["ownerReferences"] = [owner]
    fin = [f for f, on in (("batch.kubernetes.io/job-tracking", "finalizer"), ("foregroundDeletion", "foreground"))
           if on in features]
    if fin:
        md["finalizers"] = fin
    if "deleting" in features:
        md["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    spec = raw["spec"]
    if "claim" in features:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "claim-1"}]
    if "node" in features:
        spec["nodeName"] = "n1"
    if "no-status" not in features:
        status: dict[str, Any] = {"phase": "Running" if "phase" in features else "Pending"}
        if "claim-status" in features:
            status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "claim-2"}]
        if "extended-claim" in features:
            status["extendedResourceClaimStatus"] = {"resourceClaimName": "claim-3"}
        raw["status"] = status
    return Pod(raw)


def _skipping_handlers(cluster: EmbeddedCluster) -> list[EventHandler]:
    hs = [h for h in cluster.controllers.informers.informer("Pod").handlers if h.skip_update is unowned_pod_update]
    assert len(hs) == 6  # ReplicaSet, DaemonSet, StatefulSet, Job, ResourceClaim, garbage collector
    return hs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(old_features=st.frozensets(st.sampled_from(_FEATURES), max_size=2),
       flips=st.frozensets(st.sampled_from(_FEATURES), max_size=2),
       owner=st.integers(0, 4), same_rv=st.booleans())
def test_skipped_updates_change_nothing(cluster: EmbeddedCluster, old_features: frozenset[str],
                                        flips: frozenset[str], owner: int, same_rv: bool) -> None:
    owners = _owners(cluster)
    old = _pod(old_features, 10, owners[owner])
    new = _pod(old_features ^ flips, 10 if same_rv else 11, owners[owner])
    handlers = _skipping_handlers(cluster)
    for h in handlers:
        h.add(old)
    before = _manager_state(cluster)
    skip = unowned_pod_update(old, new)
    for h in handlers:
        h.update(old, new)
    if skip:
        assert _manager_state(cluster) == before
    # Leave the controllers as they were for the next example.
    for h in handlers:
        h.delete(new)
        h.delete(old)
    for c in cluster.controllers.controllers:
        while c.queue.pop() is not None:
            pass


def test_the_predicate_is_not_vacuous(cluster: EmbeddedCluster) -> None:
    """An update the predicate lets through is one some handler acts on: labels that start to
    match the ReplicaSet queue it; the bare pod's status write is skipped."""
    owners = _owners(cluster)
    bare, bare2 = _pod(frozenset(), 20, owners[0]), _pod(frozenset({"phase"}), 21, owners[0])
    assert unowned_pod_update(bare, bare2)
    labelled = _pod(frozenset({"labels"}), 21, owners[0])
    assert not unowned_pod_update(bare, labelled)
    rs = cluster.controllers.controller("replicaset")
    while rs.queue.pop() is not None:
        pass
    for h in _skipping_handlers(cluster):
        h.update(bare, labelled)
    assert rs.queue.pop() == "default/rs"
    for c in cluster.controllers.controllers:
        while c.queue.pop() is not None:
            pass
    for f in _FEATURES:
        if f not in ("phase", "node", "no-status"):
            assert not unowned_pod_update(bare, _pod(frozenset({f}), 21, owners[0])), f
            if not f.startswith(("claim", "extended")):  # the claims handler reads the new pod only
                assert not unowned_pod_update(_pod(frozenset({f}), 20, owners[0]), bare), f


class _Counting:
    def __init__(self, result: bool) -> None:
        self.calls = 0
        self.result = result

    def __call__(self, old: Any, new: Any) -> bool:
        self.calls += 1
        return self.result


@pytest.mark.parametrize("result", [True, False])
def test_informer_skips_handlers_by_their_predicate(result: bool) -> None:
    cluster = EmbeddedCluster(VirtualClock(), controllers=[])
    informers = InformerFactory(cluster.client)
    inf = informers.informer("Pod")
    pred = _Counting(result)
    seen: list[tuple[str, Hashable]] = []
    inf.add_handler(EventHandler(on_update=lambda o, n: seen.append(("a", n.resource_version)), skip_update=pred))
    inf.add_handler(EventHandler(on_update=lambda o, n: seen.append(("b", n.resource_version))))
    inf.add_handler(EventHandler(on_update=lambda o, n: seen.append(("c", n.resource_version)), skip_update=pred))
    cluster.store.create(mkpod("p"))
    inf.poll()
    pod = cluster.store.get("Pod", "default", "p")
    raw = dict(pod.raw)
    raw["metadata"] = {**raw["metadata"], "labels": {"x": "y"}}
    updated = cluster.store.update(raw)
    inf.poll()
    rv = updated.resource_version
    assert pred.calls == 1
    assert seen == ([("b", rv)] if result else [("a", rv), ("b", rv), ("c", rv)])
