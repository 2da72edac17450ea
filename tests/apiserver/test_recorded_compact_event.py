"""The store's compact Events built straight from the event recorder's layout
(``CompactEvent.of_recorded``, taken where ``recorder_layout`` holds) are the ones the reference
builds (``Store.direct_compact_events = False``: the typed Event first, then
``CompactEvent.of``): the same shape object, the same leaf values (by type), every typed
attribute, the same manifest bytes and key order, watch events and resourceVersions, for the
recorder's manifests and for any change of their layout or values (which the reference then
takes alone)."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ksched.api.event import CompactEvent, Event, _shape_of, recorder_layout
from ksched.api.meta import _slot_names
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.record import EventRecorder
from ksched.clock import VirtualClock

_SOURCE = {"component": "default-scheduler"}


def _recorded(i: int = 0) -> dict[str, Any]:
    """A manifest as ``EventRecorder.event`` hands it over."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"p{i}.17", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": f"p{i}",
                           "uid": f"u{i}", "resourceVersion": "3"},
        "reason": "Scheduled",
        "message": f"Successfully assigned default/p{i} to n1",
        "type": "Normal",
        "action": "Binding",
        "count": 1,
        "firstTimestamp": "1970-01-01T00:16:40Z",
        "lastTimestamp": "1970-01-01T00:16:40Z",
        "source": _SOURCE,
        "reportingComponent": "default-scheduler",
        "reportingInstance": "default-scheduler",
    }


_LEAVES = st.one_of(st.none(), st.just(""), st.just("x"), st.integers(-1, 2), st.booleans(), st.just({}),
                    st.just({"k": "v"}), st.just([1]), st.just(1.5))
_TOP = list(_recorded())
_MD = ["name", "namespace", "uid", "labels", "generateName"]
_IO = list(_recorded()["involvedObject"])

# One change of the recorder's manifest: a key's value, a key dropped, a key added, the keys
# reordered (at the top, in the metadata, in involvedObject or in source).
_change = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(["top", "md", "io", "source"]),
              st.sampled_from(_TOP + _MD + _IO + ["component", "extra"]), _LEAVES),
    st.tuples(st.just("drop"), st.sampled_from(["top", "md", "io", "source"]),
              st.sampled_from(_TOP + _MD + _IO + ["component"])),
    st.tuples(st.just("reverse"), st.sampled_from(["top", "md", "io"])),
    st.tuples(st.just("same"),))


def _apply(raw: dict[str, Any], change: tuple[Any, ...]) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    if change[0] == "same":
        return raw
    where = change[1]
    if where == "top":
        d = raw
    elif where == "md":
        d = raw["metadata"]
    elif where == "io":
        d = raw["involvedObject"]
    else:
        d = raw["source"] = dict(raw["source"])
    if not isinstance(d, dict):
        return raw
    if change[0] == "set":
        d[change[2]] = change[3]
    elif change[0] == "drop":
        d.pop(change[2], None)
    else:
        items = list(d.items())[::-1]
        d.clear()
        d.update(items)
    return raw


def _store(direct: bool) -> Store:
    store = Store(VirtualClock(1000.0))
    store.direct_compact_events = direct
    return store


def _stored(store: Store, raws: list[dict[str, Any]]) -> list[Any]:
    watch = store.watch("Event")
    out: list[Any] = []
    for raw in raws:
        try:
            ev = store.create(copy.deepcopy(raw), owned=True, validated=True)
        except Exception as e:  # (the same error both ways)
            out.append(("error", type(e).__name__, str(e)))
            continue
        assert isinstance(ev, Event)
        slots = [(s, type(getattr(ev, s)), repr(getattr(ev, s))) for s in _slot_names(type(ev)) if s != "raw"]
        out.append((type(ev).__name__, json.dumps(ev.raw), list(ev.raw), repr(ev.involved_object),
                    repr(ev.source), slots, getattr(ev, "_shape", None)))
        store.clock.advance(0.5)
    out.append(("rv", store.resource_version))
    out.append(("watch", [(e.type, e.resource_version, json.dumps(e.object.raw)) for e in watch.drain()]))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(_change, min_size=1, max_size=4))
@example([("same",)])
@example([("set", "top", "count", True)])
@example([("set", "md", "uid", "")])
@example([("reverse", "io")])
@example([("set", "io", "uid", {"k": "v"})])
@example([("set", "source", "component", {})])
@example([("set", "top", "reason", None), ("set", "top", "type", ""), ("set", "top", "count", 0)])
def test_direct_compact_events_are_the_references(changes: list[tuple[Any, ...]]) -> None:
    raws = [_recorded(0)]
    for i, change in enumerate(changes):
        raws.append(_apply(_recorded(i + 1), change))
    assert _stored(_store(True), raws) == _stored(_store(False), raws)


@settings(max_examples=300, deadline=None)
@given(_change)
@example(("same",))
def test_of_recorded_builds_what_of_builds(change: tuple[Any, ...]) -> None:
    """Where ``recorder_layout`` holds, ``of_recorded`` gives ``CompactEvent.of``'s object of the
    typed Event: the very shape ``_shape_of`` interns, equal values of the same types, every
    attribute."""
    raw = _apply(_recorded(), change)
    md = raw.get("metadata")
    if not isinstance(md, dict):
        return
    md["uid"] = "uid-1"
    if not recorder_layout(raw, md):
        return
    md["creationTimestamp"] = "1970-01-01T00:16:40Z"
    md["resourceVersion"] = "12"
    direct = CompactEvent.of_recorded(raw, 1000.0)
    typed = Event.from_dict(raw)
    ref = CompactEvent.of(typed)
    values: list[Any] = []
    assert direct._shape is ref._shape and direct._shape == _shape_of(raw, values)
    assert [(type(v), v) for v in direct._values] == [(type(v), v) for v in ref._values]
    for s in _slot_names(CompactEvent):
        if s not in ("raw", "involved_object", "source"):
            a, b = getattr(direct, s), getattr(ref, s)
            assert (type(a), a) == (type(b), b), s
    assert json.dumps(direct.raw) == json.dumps(raw) and direct.key == ref.key
    assert direct.involved_object == typed.involved_object and direct.source == typed.source


def test_layout_declines_what_differs() -> None:
    def held(change: tuple[Any, ...]) -> bool:
        raw = _apply(_recorded(), change)
        raw["metadata"]["uid"] = "u"
        return recorder_layout(raw, raw["metadata"])

    assert held(("same",))
    assert held(("set", "md", "uid", ""))  # an empty uid: a string, taken (as Event.from_dict)
    assert not held(("reverse", "top"))
    assert not held(("reverse", "io"))
    assert not held(("set", "md", "labels", {"a": "b"}))
    assert not held(("set", "top", "count", True))
    assert not held(("set", "top", "message", {}))
    assert not held(("set", "io", "name", {"k": "v"}))
    assert not held(("set", "source", "component", {}))
    assert not held(("drop", "top", "action"))
    assert not held(("set", "md", "namespace", ""))


def test_the_recorders_events_take_the_layout_path(monkeypatch: Any) -> None:
    built: list[str] = []
    of_recorded = CompactEvent.of_recorded.__func__  # type: ignore[attr-defined]

    def counted(cls: type[CompactEvent], raw: dict[str, Any], created: float | None) -> CompactEvent:
        built.append(raw["metadata"]["name"])
        return of_recorded(cls, raw, created)  # type: ignore[no-any-return]

    monkeypatch.setattr(CompactEvent, "of_recorded", classmethod(counted))
    out = []
    for direct in (True, False):
        store = _store(direct)
        # The recorder's manifests (its Events as values: tests/apiserver/test_recorded_event_values.py).
        store.direct_recorded_events = False
        pod = store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                            "spec": {"containers": [{"name": "c", "image": "i"}]}})
        rec = EventRecorder(InProcessClient(store), store.clock, component="default-scheduler")
        rec.event(pod, "Normal", "Scheduled", "Binding", "Successfully assigned default/p to n1")
        rec.event(pod, "Warning", "FailedScheduling", "Scheduling", "0/1 nodes are available")
        rec.event(pod, "Warning", "FailedScheduling", "Scheduling", "0/1 nodes are available")  # a patch
        out.append(sorted((type(e).__name__, json.dumps(e.raw)) for e in store.items("Event")))
    assert len(built) == 2  # the two creates with the direct path, none with the reference
    assert out[0] == out[1]
