"""The store's compact Events (``ksched.api.event.CompactEvent``): the manifest built on each
read is equal to the one the Event was made from, key order included (so it serializes to the
same bytes), whatever its nesting, lists and empty dicts; the typed fields equal a plain
Event's; copies and pickles keep it; one shape object serves every Event built alike."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.event import CompactEvent, Event

_FIELDS = ("name", "namespace", "key", "uid", "resource_version", "labels", "annotations", "creation_timestamp",
           "deletion_timestamp", "deletion_grace_period_seconds", "generation", "finalizers", "owner_references",
           "involved_object", "reason", "message", "type", "count", "source")

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
_json = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                     max_leaves=12)


def _fields(e: Event) -> list[str]:
    return [repr(getattr(e, f)) for f in _FIELDS]


@st.composite
def _events(draw: st.DrawFn) -> dict[str, Any]:
    md: dict[str, Any] = {"name": draw(st.sampled_from(["p.1", "p.2"])), "namespace": "default"}
    if draw(st.booleans()):
        md["uid"] = "u-1"
    if draw(st.booleans()):
        md["resourceVersion"] = draw(st.sampled_from(["7", "12"]))
    if draw(st.booleans()):
        md["generation"] = draw(st.integers(0, 3))
    if draw(st.booleans()):
        md["labels"] = draw(st.dictionaries(st.sampled_from("abc"), st.sampled_from(["x", "y"]), max_size=2))
    if draw(st.booleans()):
        md["creationTimestamp"] = "2024-05-01T10:00:00Z"
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Event", "metadata": md}
    extra = draw(st.dictionaries(st.sampled_from(["involvedObject", "source", "series", "related", "note", "x"]),
                                 _json, max_size=4))
    raw.update(extra)
    raw.update(draw(st.dictionaries(st.sampled_from(["reason", "message", "type"]), st.text(max_size=5), max_size=3)))
    if draw(st.booleans()):
        raw["count"] = draw(st.integers(1, 9))
    keys = list(raw)
    order = draw(st.permutations(keys))
    return {k: raw[k] for k in order}


@settings(max_examples=200, deadline=None)
@given(_events())
def test_the_manifest_read_back_is_the_one_given(raw: dict[str, Any]) -> None:
    want = json.dumps(raw)
    plain = Event(copy.deepcopy(raw))
    for e in (CompactEvent(copy.deepcopy(raw)), CompactEvent.of(plain)):
        assert json.dumps(e.raw) == want
        assert e.raw == raw and e.raw is not e.raw  # a fresh manifest each read
        assert _fields(e) == _fields(plain)
        for again in (copy.copy(e), copy.deepcopy(e), pickle.loads(pickle.dumps(e)), e.shallow_copy()):
            assert type(again) is CompactEvent
            assert json.dumps(again.raw) == want and _fields(again) == _fields(plain)


def test_a_readers_change_stays_its_own_and_shapes_are_shared() -> None:
    raw = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p.1", "namespace": "default"},
           "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Scheduled", "source": {"component": "s"}}
    e = CompactEvent(copy.deepcopy(raw))
    got = e.raw
    got["metadata"]["name"] = "changed"
    got["involvedObject"]["name"] = "q"
    e.involved_object["name"] = "r"
    assert e.raw == raw and e.name == "p.1" and e.involved_object == {"kind": "Pod", "name": "p"}
    other = copy.deepcopy(raw)
    other["metadata"]["name"] = "p.2"
    f = CompactEvent(other)
    assert f._shape is e._shape
    assert e.labels == {} and e.finalizers == [] and e.labels is f.labels
