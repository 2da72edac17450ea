"""A binding's and a recorded Event's own commit steps (``Store._commit_binding``,
``Store.direct_binding_commit``; the Event's in ``Store.create_recorded_event``,
``Store.direct_event_commit``) change exactly what the generic ``Store._commit`` changes (both
flags False, the reference): the same stored objects, resourceVersions, errors, watch events
(unfiltered and filtered), persistence-hook calls (and a hook's refusal changing nothing), node
ledger, terminating set and the conflict resolver's bound pods, whatever the pods (requests,
host ports, anti-affinity, terminal phases) and the order of bindings, status writes, deletions
and Events."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ksched.api.errors import ApiError
from ksched.api.labels import LabelSelector
from ksched.api.meta import KubeObject
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock

_ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}

_pods = st.sampled_from(["a", "b", "c"])
_shapes = st.sampled_from(["plain", "cpu", "big", "port", "anti", "failed", "pending"])
_nodes = st.sampled_from(["n1", "n2", "missing"])
_ops = st.lists(st.one_of(
    st.tuples(st.just("pod"), _pods, _shapes),
    st.tuples(st.just("bind"), _pods, _nodes),
    st.tuples(st.just("status"), _pods, st.sampled_from(["Running", "Failed", "Succeeded"])),
    st.tuples(st.just("delete"), _pods, st.sampled_from([None, 0])),
    st.tuples(st.just("event"), _pods, st.sampled_from(["default", "gone", ""])),
    st.tuples(st.just("refuse")),  # the persistence hook refuses the next write
    st.tuples(st.just("tick"))), max_size=16)


def _pod(name: str, shape: str) -> dict[str, Any]:
    """A pod manifest of one of the shapes (``gpu``: used by test_store_write_fast_paths)."""
    ct: dict[str, Any] = {"name": "c", "image": "i"}
    if shape == "cpu":
        ct["resources"] = {"requests": {"cpu": "3", "memory": "1Gi"}}
    elif shape == "big":
        ct["resources"] = {"requests": {"cpu": "7"}}
    elif shape == "gpu":
        ct["resources"] = {"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}}
    elif shape == "port":
        ct["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    spec: dict[str, Any] = {"containers": [ct]}
    if shape == "anti":
        spec["affinity"] = copy.deepcopy(_ANTI)
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": "default", "labels": {"app": "x"}},
                           "spec": spec}
    if shape == "failed":
        raw["status"] = {"phase": "Failed"}
    elif shape == "pending":
        raw["status"] = {"phase": "Pending", "nominatedNodeName": "n1",
                         "conditions": [{"type": "PodScheduled", "status": "False"}]}
    return raw


def _seen(obj: KubeObject | None) -> Any:
    if obj is None:
        return None
    return (type(obj).__name__, obj.key, json.dumps(obj.raw), obj.resource_version,
            getattr(obj, "node_name", None), getattr(obj, "nominated_node_name", None))


def store_under_test(conflicts: bool, prepare: Callable[[Store], None] = lambda s: None,
                     ) -> tuple[VirtualClock, Store, list[Any], list[bool], list[Any]]:
    """A store with two small nodes (``prepare`` runs on it first), the conflict resolver's pod
    checks when ``conflicts``, a persistence hook that records each commit and refuses the next
    write once ``refuse[0]`` is set, and four watches (Pods, Pods of ``app=x``, Events, Events of
    ``default``). Returns (clock, store, hooked, refuse, watches); shared with
    test_store_write_fast_paths."""
    clock = VirtualClock(1000.0)
    store = Store(clock)
    prepare(store)
    for name, cpu in (("n1", "8"), ("n2", "4")):
        store.create({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                      "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "2"}}})
    if conflicts:
        store.enable_pod_conflicts()
    hooked: list[Any] = []
    refuse = [False]

    def hook(etype: str, kind: str, obj: KubeObject, rv: int) -> None:
        if refuse[0]:
            refuse[0] = False
            raise RuntimeError("not persisted")
        hooked.append((etype, kind, obj.key, rv))

    store.on_commit.append(hook)
    watches = [store.watch("Pod"), store.watch("Pod", label_selector=LabelSelector.from_dict(
        {"matchLabels": {"app": "x"}})), store.watch("Event"), store.watch("Event", namespace="default")]
    return clock, store, hooked, refuse, watches


def store_books(store: Store) -> list[Any]:
    """The node ledger, the terminating set and the conflict resolver's bound pods, comparable."""
    out: list[Any] = [("ledger", sorted((n, sorted(u.requested.items()), u.pods, sorted(u.ports), sorted(u.pod_keys))
                                        for n, u in store.accounting.usage.items())),
                      ("terminating", sorted(store._terminating.items()))]
    bp = store.pod_conflicts
    if bp is not None:
        out.append(("bound pods", sorted((ns, sorted(p)) for ns, p in bp.by_namespace.items()),
                    sorted(bp.with_anti_affinity)))
    return out


def _direct(on: bool) -> Callable[[Store], None]:
    def prepare(store: Store) -> None:
        store.direct_binding_commit = on
        store.direct_event_commit = on
    return prepare


def _run(direct: bool, ops: list[tuple[Any, ...]], conflicts: bool) -> list[Any]:
    clock, store, hooked, refuse, watches = store_under_test(conflicts, _direct(direct))
    out: list[Any] = []
    for op in ops:
        try:
            if op[0] == "pod":
                out.append(("created", _seen(store.create(_pod(op[1], op[2])))))
            elif op[0] == "bind":
                out.append(("bound", _seen(store.bind("default", op[1], op[2]))))
            elif op[0] == "status":
                out.append(("status", _seen(store.patch("Pod", "default", op[1], {"status": {"phase": op[2]}},
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
        out.append(("watch", [(e.type, e.resource_version, _seen(e.object)) for e in w.drain()]))
    for kind in ("Pod", "Event"):
        out.append((kind, sorted(json.dumps(_seen(o)) for o in store.items(kind))))
    out += store_books(store)
    return out


@settings(max_examples=250, deadline=None)
@given(_ops, st.booleans())
@example([("pod", "a", "cpu"), ("pod", "b", "big"), ("bind", "a", "n2"), ("bind", "b", "n2"),
          ("status", "a", "Failed"), ("bind", "b", "n2")], False)
@example([("pod", "a", "anti"), ("pod", "b", "anti"), ("bind", "a", "n1"), ("bind", "b", "n1"),
          ("bind", "b", "n2"), ("delete", "a", None), ("bind", "b", "n1")], True)
@example([("pod", "a", "port"), ("pod", "b", "port"), ("refuse",), ("bind", "a", "n1"), ("bind", "a", "n1"),
          ("bind", "b", "n1"), ("refuse",), ("event", "a", "default"), ("event", "a", "default")], True)
@example([("pod", "a", "pending"), ("bind", "a", "n1"), ("delete", "a", None), ("bind", "a", "n1"),
          ("event", "b", "gone"), ("event", "b", "")], False)
def test_own_commit_steps_change_what_the_generic_commit_changes(ops: list[tuple[Any, ...]],
                                                                 conflicts: bool) -> None:
    assert _run(True, ops, conflicts) == _run(False, ops, conflicts)


def test_bindings_and_recorded_events_take_their_own_commit(monkeypatch: Any) -> None:
    calls: list[str] = []
    generic = Store._commit

    def counted(self: Store, cls: Any, etype: str, old: Any, new: Any, rv: int) -> None:
        calls.append(cls.KIND)
        generic(self, cls, etype, old, new, rv)

    monkeypatch.setattr(Store, "_commit", counted)
    for direct in (True, False):
        calls.clear()
        store = Store(VirtualClock(1000.0))
        store.direct_binding_commit = store.direct_event_commit = direct
        store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                      "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}}})
        store.create(_pod("a", "cpu"))
        calls.clear()
        bound = store.bind("default", "a", "n1")
        ev = store.create_recorded_event("a.1", "default", ("v1", "Pod", "default", "a", bound.uid, "1"),
                                         "Scheduled", "m", "Normal", "Binding", "2026-01-01T00:00:00Z", "s")
        assert ev is not None and store.get("Event", "default", "a.1") is ev
        assert store.get("Pod", "default", "a") is bound
        assert store.accounting.usage["n1"].requested == {"cpu": 3000, "memory": 1 << 30}
        assert calls == ([] if direct else ["Pod", "Event"])
