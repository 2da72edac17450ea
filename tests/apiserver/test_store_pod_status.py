"""A pod's status handed to the store as a merge patch of plain values (the kubelet's
``pods/status`` writes: ``patch(..., owned=True)``) is written directly
(``Store._patch_pod_status``), exactly as the generic patch and update path writes it
(``Store.direct_pod_status = False``, the reference): the same objects (manifests with their key
order, parsed attributes), the same errors, the same resourceVersions and watch events, whatever
the pod's state and the patch's values."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ksched.api.errors import ApiError
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock

_ATTRS = ("name", "namespace", "uid", "resource_version", "labels", "annotations", "deletion_timestamp",
          "node_name", "phase", "conditions", "nominated_node_name", "start_time")

_COND = {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:00Z"}
_values = st.sampled_from([
    ("phase", "Running"), ("phase", "Failed"), ("phase", None), ("phase", "Running"),
    ("startTime", "2026-01-01T00:00:00Z"), ("startTime", "not a time"), ("startTime", None),
    ("conditions", [_COND]), ("conditions", []), ("conditions", None),
    ("containerStatuses", [{"name": "c", "ready": True, "restartCount": 0, "state": {"running": {}}}]),
    ("qosClass", "BestEffort"), ("reason", "Evicted"), ("message", None), ("nominatedNodeName", "n1"),
    ("extra", {"nested": 1}),  # an object: merged recursively, the generic path's
])
_status = st.lists(_values, max_size=5).map(dict)

_initial = st.sampled_from([None, {}, {"phase": "Pending"}, {"phase": "Running", "conditions": [_COND]}, "odd"])
_ops = st.lists(st.one_of(
    st.tuples(st.just("pod"), st.sampled_from(["a", "b"]), _initial),
    st.tuples(st.just("bind"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("status"), st.sampled_from(["a", "a", "b", "c"]), _status,
              st.sampled_from(["Pod", "Pod", "Pod", "pods"])),
    st.tuples(st.just("status"), st.sampled_from(["a", "b"]), _status, st.just("Pod")),
    st.tuples(st.just("patch"), st.sampled_from(["a", "b"]), st.sampled_from([
        {"status": {"phase": "Running"}, "metadata": {"labels": {"x": "y"}}}, {"status": "x"}, {}])),
    st.tuples(st.just("delete"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("tick"))), max_size=14)


def _pod(name: str, status: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    if status is not None:
        raw["status"] = status
    return raw


def _seen(obj: Any) -> Any:
    return (type(obj).__name__, json.dumps(obj.raw), [repr(getattr(obj, a, None)) for a in _ATTRS])


def _run(direct: bool, ops: list[tuple[Any, ...]], initial: Any = None) -> list[Any]:
    clock = VirtualClock(1000.0)
    store = Store(clock)
    store.direct_pod_status = direct
    store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                  "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}})
    watch = store.watch("Pod")
    out: list[Any] = []
    if initial is not None:
        try:
            store.create(_pod("a", copy.deepcopy(initial)))
        except ApiError as e:
            out.append(("error", type(e).__name__, str(e)))
    for op in ops:
        try:
            if op[0] == "pod":
                out.append(("created", _seen(store.create(_pod(op[1], copy.deepcopy(op[2]))))))
            elif op[0] == "bind":
                out.append(("bound", _seen(store.bind("default", op[1], "n1"))))
            elif op[0] == "status":
                got = store.patch(op[3], "default", op[1], {"status": copy.deepcopy(op[2])},
                                  "application/merge-patch+json", "status", owned=True)
                out.append(("status", _seen(got)))
            elif op[0] == "patch":
                got = store.patch("Pod", "default", op[1], copy.deepcopy(op[2]), "application/merge-patch+json",
                                  "status", owned=True)
                out.append(("patched", _seen(got)))
            elif op[0] == "delete":
                out.append(("deleted", _seen(store.delete("Pod", "default", op[1]))))
            else:
                clock.advance(1.5)
        except ApiError as e:
            out.append(("error", type(e).__name__, str(e)))
    out.append(("rv", store.resource_version))
    out.append(("watch", [(e.type, e.resource_version, _seen(e.object)) for e in watch.drain()]))
    out.append(("pods", sorted(_seen(o) for o in store.items("Pod"))))
    out.append(("nodes", [json.dumps(n.raw) for n in store.items("Node") if isinstance(n, Node)]))
    return out


@settings(max_examples=200, deadline=None)
@given(_ops, st.one_of(st.none(), _initial))
@example([("pod", "a", None), ("bind", "a"), ("status", "a", {"phase": "Running", "conditions": [_COND]}, "Pod"),
          ("status", "a", {"phase": "Running", "conditions": [_COND]}, "Pod"), ("delete", "a"),
          ("status", "a", {"phase": "Failed"}, "Pod")], None)
@example([("pod", "a", {"phase": "Pending"}), ("status", "a", {"phase": None, "conditions": [_COND]}, "Pod")], None)
@example([("pod", "a", "odd"), ("status", "a", {"qosClass": "BestEffort"}, "Pod")], None)
@example([("pod", "a", {}), ("status", "a", {}, "Pod"), ("status", "a", {"startTime": "not a time"}, "Pod")], None)
@example([("pod", "a", {"phase": "Pending"}), ("status", "a", {"phase": None, "extra": {"nested": 1}}, "pods")], None)
def test_direct_status_writes_store_what_the_generic_path_stores(ops: list[tuple[Any, ...]], initial: Any) -> None:
    assert _run(True, ops, initial) == _run(False, ops, initial)


def test_the_kubelets_status_writes_take_the_direct_path_and_the_rest_do_not(monkeypatch: Any) -> None:
    clock = VirtualClock(1000.0)
    store = Store(clock)
    taken: list[bool] = []
    direct = Store._patch_pod_status

    def counted(self: Store, namespace: str, name: str, status: dict[str, Any]) -> Pod | None:
        got = direct(self, namespace, name, status)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(Store, "_patch_pod_status", counted)
    store.create(_pod("p", None))
    running = {"phase": "Running", "startTime": "1970-01-01T00:16:40Z", "conditions": [_COND]}
    new = store.patch("Pod", "default", "p", {"status": running}, "application/merge-patch+json", "status",
                      owned=True)
    assert taken == [True] and isinstance(new, Pod) and new.phase == "Running" and new.start_time == 1000.0
    assert store.get("Pod", "default", "p") is new
    same = store.patch("Pod", "default", "p", {"status": dict(running)}, "application/merge-patch+json", "status",
                       owned=True)
    assert taken == [True, True] and same is new  # unchanged: no write
    store.patch("Pod", "default", "p", {"status": {"phase": "Failed"}}, "application/merge-patch+json", "status")
    assert taken == [True, True]  # not handed over: the generic path
    store.patch("Pod", "default", "p", {"status": {"x": {"y": 1}}}, "application/merge-patch+json", "status",
                owned=True)
    assert taken == [True, True, False]  # an object value: the generic path merges it
