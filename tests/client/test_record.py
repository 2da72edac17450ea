"""The event recorder (ksched.client.record): one event per (object, reason, message), repeats
counted; deterministic names on a virtual clock, distinct between recorders of different components."""

from __future__ import annotations

import pytest

from api_objects import mkpod
from ksched.api.event import Event
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.record import EventRecorder


def test_events_are_counted_and_names_do_not_collide(store: Store) -> None:
    pod = store.create(mkpod("web"))
    client = InProcessClient(store)
    a = EventRecorder(client, store.clock, component="scheduler")
    b = EventRecorder(client, store.clock, component="controller")
    a.event(pod, "Normal", "Scheduled", "Binding", "ok")
    a.event(pod, "Normal", "Scheduled", "Binding", "ok")
    b.event(pod, "Warning", "Other", "Act", "hm")  # the same counter as a's first: another name
    events = sorted((e for e in store.items("Event") if isinstance(e, Event)), key=lambda e: e.reason)
    assert [(e.reason, e.count, e.source["component"]) for e in events] == [
        ("Other", 1, "controller"),
        ("Scheduled", 2, "scheduler"),
    ]
    assert all(e.name.startswith("web.") for e in events) and events[0].name != events[1].name
    assert events[1].involved_object["kind"] == "Pod" and events[1].involved_object["uid"] == pod.uid


def test_the_recorders_events_are_valid_and_not_validated_again(store: Store,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process store takes the recorder's Events as valid (validated=True): none is
    validated again, and each one would pass validation."""
    from ksched.api.scheme import Scheme
    from ksched.api.validation import validate

    seen: list[str] = []
    real = Scheme.validate
    monkeypatch.setattr(Scheme, "validate", lambda self, raw, cls=None: seen.append(raw.get("kind")) or real(
        self, raw, cls))
    pod = store.create(mkpod("web"))
    rec = EventRecorder(InProcessClient(store), store.clock)
    rec.event(pod, "Normal", "Scheduled", "Binding", "ok")
    nameless = store.create(mkpod("x")).shallow_copy()
    nameless.name = ""
    rec.event(nameless, "Warning", "Odd", "Act", "no name")
    assert seen == ["Pod", "Pod"]
    events = store.items("Event")
    assert len(events) == 2 and all(validate(e.raw) == [] for e in events)
