"""``ksched.client.record.FAST_EVENT`` (a new Event's name, stamp and values path with the
recorder's helpers inline) records exactly what the reference does (False): the same stored
Events, resourceVersions, watch events, errors and recorder state, whatever the namespaces,
quotas, name collisions, involved objects and values (the values-path agreement test's
operations, with the store's values path on and off), with deterministic names or with
time-based ones, and with the client replaced between events."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.apiserver.test_recorded_event_values import _ops
from tests.apiserver.test_recorded_event_values import _run as _values_run

from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client import record
from ksched.client.record import EventRecorder
from ksched.clock import VirtualClock


def _run(fast: bool, values: bool, ops: list[tuple[Any, ...]]) -> list[Any]:
    record.FAST_EVENT = fast
    try:
        return _values_run(values, ops)
    finally:
        record.FAST_EVENT = True


@settings(max_examples=150, deadline=None)
@given(_ops, st.booleans())
def test_fast_event_records_what_the_reference_records(ops: list[tuple[Any, ...]], values: bool) -> None:
    assert _run(True, values, ops) == _run(False, values, ops)


class _WallClock:
    """A clock that is not virtual (time-based Event names), reading a settable time."""
    virtual = False

    def __init__(self) -> None:
        self.t = 1_700_000_000.25

    def now(self) -> float:
        return self.t


def _wall(fast: bool, steps: list[tuple[int, int, bool]]) -> list[Any]:
    record.FAST_EVENT = fast
    try:
        clock = _WallClock()
        stores = [Store(VirtualClock(1000.0)), Store(VirtualClock(1000.0))]
        rec = EventRecorder(InProcessClient(stores[0]), clock)
        pods = [Pod.from_dict({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"u{i}"},
                               "spec": {"containers": [{"name": "c", "image": "i"}]}}) for i in range(3)]
        out: list[Any] = []
        for pod, dt, switch in steps:
            if switch:  # another client: its values path looked up again
                rec.client = InProcessClient(stores[1] if rec.client.store is stores[0] else stores[0])
            clock.t += dt * 0.25
            rec.event(pods[pod], "Normal", "Scheduled", "Binding", f"m{pod % 2}")
            out.append((rec._counter, list(rec._seen.items()), rec._stamp))
        for s in stores:
            out.append(sorted((e.key, str(e.raw)) for e in s.items("Event")))
        return out
    finally:
        record.FAST_EVENT = True


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.booleans()), max_size=12))
def test_fast_event_time_based_names_and_replaced_clients(steps: list[tuple[int, int, bool]]) -> None:
    assert _wall(True, steps) == _wall(False, steps)
