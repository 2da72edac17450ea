"""The event recorder's new Events handed to the store as their values
(``Store.create_recorded_event``: no manifest built, read back and checked) are stored, committed
and seen exactly as the recorder's manifests through ``create`` store them
(``Store.direct_recorded_events = False``, the reference): the same objects (type, manifest
bytes and key order, every typed attribute by type and value, the interned shape), the same
resourceVersions, watch events (unfiltered and field-selected), errors and recorder state,
whatever the namespace, quota, name collision, involved object and values; where the store
would not take the recorder's layout the values are declined and the manifest is created."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ksched.api.errors import ApiError
from ksched.api.event import _RECORDER_SHAPE, RECORDER_VALUES, CompactEvent
from ksched.api.labels import parse_field_selector
from ksched.api.meta import KubeObject, _slot_names
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.record import EventRecorder
from ksched.clock import VirtualClock


def _objects() -> list[KubeObject]:
    """Involved objects: pods in existing, later created and missing namespaces, a node (its
    Events go to "default"), and pods with odd metadata the recorder copies as they are."""
    def pod(md: dict[str, Any]) -> Pod:
        return Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": md,
                              "spec": {"containers": [{"name": "c", "image": "i"}]}})
    return [
        pod({"name": "p0", "namespace": "default", "uid": "u0", "resourceVersion": "3"}),
        pod({"name": "p1", "namespace": "other", "uid": "u1", "resourceVersion": "4"}),
        pod({"name": "p2", "namespace": "gone"}),  # no uid: keyed by namespace/name
        Node.from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0", "uid": "un"}}),
        pod({"name": "p4", "namespace": {}, "uid": "u4"}),  # a falsy namespace: the Event in "default"
        pod({"name": "p5", "namespace": {"a": "b"}, "uid": "u5"}),  # a dict namespace: neither path takes it
        pod({"name": {"k": "v"}, "namespace": "default", "uid": "u6"}),  # a dict name: in the Event's as text
        pod({"name": "p7", "namespace": "default", "uid": 7}),  # an int uid (not a dict: a leaf as any)
    ]


_ops = st.lists(st.one_of(
    st.tuples(st.just("event"), st.integers(0, 7), st.sampled_from(["Normal", "Warning", ""]),
              st.sampled_from(["Scheduled", "FailedScheduling", ""]), st.sampled_from(["m", "", "0/3 nodes"]),
              st.sampled_from([0, 1])),
    st.tuples(st.just("collide"), st.integers(0, 7), st.sampled_from([0, 1])),
    st.tuples(st.just("namespace"), st.sampled_from(["other", "gone"])),
    st.tuples(st.just("terminate"), st.sampled_from(["other", "gone"])),
    st.tuples(st.just("quota"), st.sampled_from(["default", "other"])),
    st.tuples(st.just("tick"))), max_size=16)

_COMPONENTS = ("default-scheduler", "kubelet")


def _describe(ev: Any) -> tuple[Any, ...]:
    slots = [(s, type(getattr(ev, s)).__name__, repr(getattr(ev, s))) for s in _slot_names(type(ev))
             if s not in ("raw", "_values")]
    return (type(ev).__name__, ev.key, json.dumps(ev.raw), list(ev.raw), slots,
            getattr(ev, "_shape", None) is _RECORDER_SHAPE,
            [(type(v).__name__, repr(v)) for v in getattr(ev, "_values", ())])


def _run(values: bool, ops: list[tuple[Any, ...]]) -> list[Any]:
    clock = VirtualClock(1000.0)
    store = Store(clock)
    store.direct_recorded_events = values
    objs = _objects()
    recs = [EventRecorder(InProcessClient(store), clock, component=c) for c in _COMPONENTS]
    watch = store.watch("Event")
    selected = store.watch("Event", field_selector=parse_field_selector("involvedObject.name=p0"))
    out: list[Any] = []
    for op in ops:
        try:
            if op[0] == "event":
                rec, obj = recs[op[5]], objs[op[1]]
                rec.event(obj, op[2], op[3], "Binding", op[4])
                out.append(("seen", rec.recorded, list(rec._seen.items()), rec._counter))
            elif op[0] == "collide":
                # An Event already named as the recorder's next one for this object.
                rec, obj = recs[op[2]], objs[op[1]]
                name = f"{obj.name}.{rec._tag:04x}{rec._counter + 1:012x}"
                store.create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
                              "involvedObject": {"kind": "Pod", "name": "x"}})
            elif op[0] == "namespace":
                store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": op[1]}})
            elif op[0] == "terminate":
                store.delete("Namespace", "", op[1])
            elif op[0] == "quota":
                store.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": op[1]},
                              "spec": {"hard": {"count/events": "3"}}})
            else:
                clock.advance(0.75)
        except ApiError as e:
            out.append(("error", type(e).__name__, str(e)))
        except TypeError as e:  # (a dict namespace: unhashable, both ways)
            out.append(("raised", type(e).__name__, str(e)))
    out.append(("rv", store.resource_version))
    out.append(("watch", [(e.type, e.resource_version, _describe(e.object)) for e in watch.drain()]))
    out.append(("selected", [(e.type, e.resource_version, json.dumps(e.object.raw)) for e in selected.drain()]))
    out.append(("events", sorted(_describe(o) for o in store.items("Event"))))
    return out


@settings(max_examples=200, deadline=None)
@given(_ops)
@example([("event", 0, "Normal", "Scheduled", "m", 0)])
@example([("event", 0, "Normal", "Scheduled", "m", 0), ("event", 0, "Normal", "Scheduled", "m", 0),
          ("tick",), ("event", 0, "Normal", "Scheduled", "m", 0)])
@example([("quota", "default"), ("event", 0, "Normal", "Scheduled", "m", 0)])
@example([("collide", 0, 0), ("event", 0, "Normal", "Scheduled", "m", 0), ("event", 0, "", "", "", 0)])
@example([("event", 1, "Normal", "Scheduled", "m", 1), ("namespace", "other"), ("event", 1, "Warning", "", "m", 1),
          ("terminate", "other"), ("event", 1, "Normal", "x", "m", 1)])
@example([("event", i, "Warning", "FailedScheduling", "0/3 nodes", 1) for i in range(8)])
def test_recorded_values_store_what_the_recorders_manifests_store(ops: list[tuple[Any, ...]]) -> None:
    assert _run(True, ops) == _run(False, ops)


def test_the_values_path_is_taken_and_declines_what_the_layout_path_would_not(monkeypatch: Any) -> None:
    manifests: list[str] = []
    create = EventRecorder._create

    def counted(self: EventRecorder, obj: KubeObject, *args: Any) -> None:
        manifests.append(obj.name)
        create(self, obj, *args)

    monkeypatch.setattr(EventRecorder, "_create", counted)
    clock = VirtualClock(1000.0)
    store = Store(clock)
    objs = _objects()
    rec = EventRecorder(InProcessClient(store), clock)
    rec.event(objs[0], "Normal", "Scheduled", "Binding", "Successfully assigned default/p0 to n1")
    rec.event(objs[3], "Normal", "Scheduled", "Binding", "m")  # a node: its Event in "default"
    assert manifests == []
    assert [type(e) for e in store.items("Event")] == [CompactEvent, CompactEvent]
    rec.event(objs[1], "Normal", "Scheduled", "Binding", "m")  # no namespace "other": refused
    assert manifests == ["p1"] and len(store.items("Event")) == 2
    rec.event(objs[7], "Normal", "Scheduled", "Binding", "m")  # an int uid: a leaf like any
    assert manifests == ["p1"] and len(store.items("Event")) == 3
    rec.event(objs[6], "Normal", "Scheduled", "Binding", "m")  # a dict name: a dict leaf in involvedObject
    assert manifests == ["p1", {"k": "v"}] and len(store.items("Event")) == 4
    store.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "default"},
                  "spec": {"hard": {"pods": "3"}}})
    rec.event(objs[0], "Normal", "Scheduled", "Binding", "another")  # a quota anywhere: the generic path
    assert manifests[2:] == ["p0"] and len(store.items("Event")) == 5
    store.direct_recorded_events = False
    store.delete("ResourceQuota", "default", "q")
    rec.event(objs[0], "Normal", "Scheduled", "Binding", "a third")
    assert manifests[2:] == ["p0", "p0"]


def test_a_client_without_the_values_path_gets_the_manifest() -> None:
    created: list[dict[str, Any]] = []

    class Client:
        def create(self, obj: dict[str, Any]) -> None:
            created.append(obj)

    rec = EventRecorder(Client(), VirtualClock(1000.0))
    rec.event(_objects()[0], "Normal", "Scheduled", "Binding", "m")
    assert [c["metadata"]["namespace"] for c in created] == ["default"]


@pytest.mark.parametrize("i", range(len(RECORDER_VALUES)))
def test_recorder_values_name_the_shapes_leaves_in_order(i: int) -> None:
    leaves = [(k if isinstance(k, str) else k[0], e) for k in _RECORDER_SHAPE
              for e in ((None,) if isinstance(k, str) else k[1])]
    paths = [("", k) if e is None else (k, e) for k, e in leaves]
    assert len(paths) == len(RECORDER_VALUES)
    assert paths[i] == RECORDER_VALUES[i]


def test_a_wrapper_that_delegates_gets_manifests_and_a_replaced_client_is_looked_up_again() -> None:
    """A client whose class does not define ``create_recorded_event`` (a wrapper handing other
    attributes to an in-process client, which records or refuses creates) sees every new Event
    as a manifest through its own ``create``; replacing the recorder's client switches paths."""
    store = Store(VirtualClock(1000.0))
    inner = InProcessClient(store)
    created: list[str] = []

    class Wrapper:
        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

        def create(self, obj: dict[str, Any], **kw: Any) -> Any:
            created.append(obj["metadata"]["name"])
            return inner.create(obj, **kw)

    objs = _objects()
    rec = EventRecorder(Wrapper(), store.clock)
    rec.event(objs[0], "Normal", "Scheduled", "Binding", "m1")
    assert len(created) == 1 and len(store.items("Event")) == 1
    rec.client = inner
    rec.event(objs[0], "Normal", "Scheduled", "Binding", "m2")
    assert len(created) == 1 and len(store.items("Event")) == 2
    rec.client = Wrapper()
    rec.event(objs[0], "Normal", "Scheduled", "Binding", "m3")
    assert len(created) == 2 and len(store.items("Event")) == 3
