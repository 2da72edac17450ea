"""The pod write path's fast paths (``ksched.apiserver.store``: ``FAST_BIND``, a binding in one
body with the node ledger read once; ``FAST_STATUS_COMMIT``, a status write's own commit steps;
``FAST_RECORDED_EVENT``, a recorded Event's uid, stamp and version inline) change exactly what
their references change (the flags False): the same returned and stored objects, manifests,
resourceVersions, uids, errors, watch events (unfiltered and filtered), persistence-hook calls
(and a hook's refusal changing nothing), node ledger, terminating set and the conflict resolver's
bound pods, whatever the pods (requests, host ports, anti-affinity, terminal phases, nominated,
annotations on the binding) and the order of bindings, status writes, deletions and Events, on a
virtual clock (deterministic uids) or a real one."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.apiserver.test_binding_event_commits import _pod, store_books, store_under_test

from ksched.api.errors import ApiError
from ksched.api.meta import KubeObject
from ksched.apiserver import store as store_module
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock

FLAGS = ("FAST_BIND", "FAST_STATUS_COMMIT", "FAST_RECORDED_EVENT")

_pods = st.sampled_from(["a", "b", "c"])
_shapes = st.sampled_from(["plain", "cpu", "big", "port", "anti", "failed", "pending", "gpu"])
_nodes = st.sampled_from(["n1", "n2", "missing", ""])
_phases = st.sampled_from(["Running", "Failed", "Succeeded", "Pending", None])
_ops = st.lists(st.one_of(
    st.tuples(st.just("pod"), _pods, _shapes),
    st.tuples(st.just("bind"), _pods, _nodes, st.booleans(), st.sampled_from([None, "", "wrong"])),
    st.tuples(st.just("status"), _pods, _phases, st.booleans()),
    st.tuples(st.just("delete"), _pods, st.sampled_from([None, 0])),
    st.tuples(st.just("event"), _pods, st.sampled_from(["default", "gone", ""])),
    st.tuples(st.just("refuse")),  # the persistence hook refuses the next write
    st.tuples(st.just("tick"))), max_size=18)


def _seen(obj: KubeObject | None) -> Any:
    if obj is None:
        return None
    return (type(obj).__name__, obj.key, json.dumps(obj.raw), obj.resource_version, obj.uid,
            getattr(obj, "node_name", None), getattr(obj, "nominated_node_name", None),
            getattr(obj, "phase", None), getattr(obj, "conditions", None), obj.annotations,
            obj.creation_timestamp, getattr(obj, "start_time", None))


def _run(fast: bool, ops: list[tuple[Any, ...]], conflicts: bool, virtual: bool) -> list[Any]:
    for f in FLAGS:
        setattr(store_module, f, fast)
    try:
        return _ops_on_store(ops, conflicts, virtual)
    finally:
        for f in FLAGS:
            setattr(store_module, f, True)


def _random_uids(store: Store) -> None:
    # Random uids (a real clock's): each run its own, so compared by their shape only.
    store.deterministic_uids = False


def _ops_on_store(ops: list[tuple[Any, ...]], conflicts: bool, virtual: bool) -> list[Any]:
    clock, store, hooked, refuse, watches = store_under_test(conflicts, (lambda s: None) if virtual else _random_uids)
    out: list[Any] = []
    for op in ops:
        try:
            if op[0] == "pod":
                out.append(("created", _seen(store.create(_pod(op[1], op[2])))))
            elif op[0] == "bind":
                uid = None
                if op[4] is not None:
                    uid = op[4] or store.get("Pod", "default", op[1]).uid
                out.append(("bound", _seen(store.bind("default", op[1], op[2], uid=uid,
                                                      annotations={"k": "v"} if op[3] else None))))
            elif op[0] == "status":
                status: dict[str, Any] = {"phase": op[2], "hostIP": "10.0.0.1"}
                if op[3]:
                    status["startTime"] = "2026-01-01T00:00:00Z"
                    status["conditions"] = [{"type": "Ready", "status": "True"}]
                out.append(("status", _seen(store.patch("Pod", "default", op[1], {"status": status},
                                                        "application/merge-patch+json", "status", owned=True))))
            elif op[0] == "delete":
                out.append(("deleted", _seen(store.delete("Pod", "default", op[1], grace_period_seconds=op[2]))))
            elif op[0] == "event":
                got = store.create_recorded_event(
                    f"{op[1]}.{len(out):x}", op[2], ("v1", "Pod", op[2], op[1], "u", "1"), "Scheduled",
                    f"assigned {op[1]}", "Normal", "Binding", "2026-01-01T00:00:00Z", "default-scheduler")
                out.append(("event", _seen(got)))
            elif op[0] == "refuse":
                refuse[0] = True
            else:
                clock.advance(1.5)
        except (ApiError, RuntimeError) as e:
            out.append(("error", type(e).__name__, str(e)))
    out.append(("rv", store.resource_version))
    out.append(("hooked", hooked))
    for w in watches:
        out.append(("watch", [(e.type, e.resource_version, _seen(e.object), _seen(e.prev)) for e in w.drain()]))
    for kind in ("Pod", "Event"):
        out.append((kind, sorted(json.dumps(_seen(o)) for o in store.items(kind))))
    out += store_books(store)
    if not virtual:
        return json.loads(_UIDS.sub("<uid>", json.dumps(out, default=str)))
    return out


_UIDS = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


@settings(max_examples=300, deadline=None)
@given(_ops, st.booleans(), st.booleans())
@example([("pod", "a", "cpu"), ("pod", "b", "big"), ("bind", "a", "n2", False, None),
          ("bind", "b", "n2", True, ""), ("status", "a", "Failed", True), ("bind", "b", "n2", False, None)],
         False, True)
@example([("pod", "a", "anti"), ("pod", "b", "anti"), ("bind", "a", "n1", False, None),
          ("bind", "b", "n1", False, None), ("bind", "b", "n2", False, "wrong"), ("delete", "a", None),
          ("status", "a", "Succeeded", False), ("bind", "b", "n1", False, None)], True, True)
@example([("pod", "a", "port"), ("pod", "b", "port"), ("refuse",), ("bind", "a", "n1", False, None),
          ("bind", "a", "n1", False, None), ("bind", "b", "n1", False, None), ("refuse",),
          ("event", "a", "default"), ("event", "a", "default"), ("tick",), ("event", "b", "default")], True, True)
@example([("pod", "a", "pending"), ("pod", "c", "gpu"), ("bind", "c", "n1", False, None),
          ("bind", "a", "", False, None), ("bind", "a", "missing", False, None), ("bind", "a", "n1", True, None),
          ("status", "a", "Running", True), ("refuse",), ("status", "a", "Failed", False),
          ("status", "a", "Failed", False), ("status", "a", "Running", False), ("delete", "a", None),
          ("status", "a", "Running", False), ("event", "b", "gone"), ("event", "b", "")], False, False)
def test_fast_write_paths_change_what_their_references_change(ops: list[tuple[Any, ...]], conflicts: bool,
                                                              virtual: bool) -> None:
    assert _run(True, ops, conflicts, virtual) == _run(False, ops, conflicts, virtual)


@pytest.mark.parametrize("fast", [True, False])
def test_the_flags_choose_the_path(monkeypatch: Any, fast: bool) -> None:
    """Each flag selects its path: the reference's own steps run only with the flag off."""
    calls: list[str] = []
    for name in ("_commit", "_commit_binding", "_new_uid", "_event_stamp"):
        orig = getattr(Store, name)

        def counted(self: Store, *a: Any, _orig: Any = orig, _name: str = name) -> Any:
            calls.append(_name)
            return _orig(self, *a)

        monkeypatch.setattr(Store, name, counted)
    for f in FLAGS:
        monkeypatch.setattr(store_module, f, fast)
    store = Store(VirtualClock(1000.0))
    store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                  "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}}})
    store.create(_pod("a", "cpu"))
    calls.clear()
    bound = store.bind("default", "a", "n1")
    store.patch("Pod", "default", "a", {"status": {"phase": "Running"}}, "application/merge-patch+json", "status",
                owned=True)
    store.create_recorded_event("a.1", "default", ("v1", "Pod", "default", "a", bound.uid, "1"),
                                "Scheduled", "m", "Normal", "Binding", "2026-01-01T00:00:00Z", "s")
    assert calls == ([] if fast else ["_commit_binding", "_commit", "_new_uid", "_event_stamp"])
