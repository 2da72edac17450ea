"""Review 7: the store's compact Events (``CompactEvent``) intern the shape of their manifest
(its keys and nesting) by equality, but a loaded Event (a YAML directory's, created ``owned``
and ``validated`` as ``ksched simulate`` does) may have keys that are not strings: ``1``,
``True`` and ``1.0`` are equal keys with equal hashes, so one Event's shape served another's and
its manifest came back with the other's keys (``{True: "a"}`` read as ``{1: "a"}``). Each
Event must read back with its own keys, as the reference (``direct_events = False``) does."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.validation import validate
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock

_KEYS = st.sampled_from([1, True, 1.0, 0, False, 0.0, "1", None])


def _event(name: str, extra: dict[Any, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}, "reason": "R",
            "message": "m", "extra": extra}


def _read_back(direct: bool, raws: list[dict[str, Any]]) -> list[str]:
    store = Store(VirtualClock(1000.0))
    store.direct_events = direct
    for raw in raws:
        assert validate(copy.deepcopy(raw)) == []
        store.create(copy.deepcopy(raw), owned=True, validated=True)
    return [repr(store.get("Event", "default", r["metadata"]["name"]).raw) for r in raws]


def test_equal_keys_of_other_types_read_back_as_written() -> None:
    raws = [_event("e1", {1: "a"}), _event("e2", {True: "a"}), _event("e3", {1.0: "a"})]
    assert _read_back(True, raws) == _read_back(False, raws)


@settings(max_examples=40, deadline=None)
@given(st.lists(_KEYS, min_size=1, max_size=4))
def test_loaded_event_keys_are_the_references(keys: list[Any]) -> None:
    raws = [_event(f"e{i}", {k: "a"}) for i, k in enumerate(keys)]
    assert _read_back(True, raws) == _read_back(False, raws)
