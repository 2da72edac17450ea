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


def test_repeats_are_recognized_in_an_lru_cache_of_upstreams_size(store: Store) -> None:
    """As upstream's eventLogger (events_cache.go, maxLruCacheEntries = 4096): a repeat refreshes
    its key; the least recently seen key is forgotten when the cache is full, and a repeat of it
    is a new Event."""
    from ksched.client.record import MAX_LRU_CACHE_ENTRIES

    assert MAX_LRU_CACHE_ENTRIES == 4096
    pods = [store.create(mkpod(f"p{i}")) for i in range(4)]
    rec = EventRecorder(InProcessClient(store), store.clock)
    assert rec.max_keys == 4096
    rec.max_keys = 3
    for p in pods[:3]:
        rec.event(p, "Normal", "Scheduled", "Binding", "ok")
    rec.event(pods[0], "Normal", "Scheduled", "Binding", "ok")  # p0 refreshed: p1 is now the oldest
    rec.event(pods[3], "Normal", "Scheduled", "Binding", "ok")  # the cache is full: p1 forgotten
    rec.event(pods[0], "Normal", "Scheduled", "Binding", "ok")  # still known: counted
    rec.event(pods[1], "Normal", "Scheduled", "Binding", "ok")  # forgotten: a new Event (p2 forgotten)
    rec.event(pods[2], "Normal", "Scheduled", "Binding", "ok")  # forgotten too: a new Event
    counts: dict[str, list[int]] = {}
    for e in store.items("Event"):
        assert isinstance(e, Event)
        counts.setdefault(e.involved_object["name"], []).append(e.count)
    assert {k: sorted(v) for k, v in counts.items()} == {"p0": [3], "p1": [1, 1], "p2": [1, 1], "p3": [1]}
    assert len(rec._seen) == 3


def test_a_repeat_in_a_later_instant_carries_that_instants_time(store: Store) -> None:
    from ksched.api.meta import format_time

    pod = store.create(mkpod("web"))
    rec = EventRecorder(InProcessClient(store), store.clock)
    rec.event(pod, "Normal", "Scheduled", "Binding", "ok")
    first = format_time(store.clock.now())
    store.clock.advance(90)
    rec.event(pod, "Normal", "Scheduled", "Binding", "ok")
    (e,) = store.items("Event")
    assert e.raw["firstTimestamp"] == first
    assert e.raw["lastTimestamp"] == format_time(store.clock.now()) != first


def test_one_source_dict_for_a_recorders_events_and_nothing_changes_it(store: Store) -> None:
    """A recorder's Events share its source dict (memory), on the direct path and on the generic
    one (a ResourceQuota in the namespace), through repeats; each reads back as written."""
    import json

    client = InProcessClient(store)
    rec = EventRecorder(client, store.clock, component="kubelet")
    pods = [store.create(mkpod(f"p{i}")) for i in range(3)]
    rec.event(pods[0], "Normal", "Scheduled", "Binding", "a")
    rec.event(pods[1], "Normal", "Scheduled", "Binding", "b")
    store.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "default"},
                  "spec": {"hard": {"count/events": "10"}}})
    rec.event(pods[2], "Normal", "Scheduled", "Binding", "c")  # the generic create
    rec.event(pods[0], "Normal", "Scheduled", "Binding", "a")  # a repeat: a patch
    events = sorted(store.items("Event"), key=lambda e: e.raw["message"])
    assert [json.dumps(e.raw["source"]) for e in events] == ['{"component": "kubelet"}'] * 3
    assert events[0].raw["count"] == 2
    # The generic create keeps the recorder's dict; the direct path keeps Events compact (their
    # manifest built on each read, so equal); the repeat's patch copies the manifest (equal).
    generic = next(e for e in events if e.raw["message"] == "c")
    assert generic.raw["source"] is rec._source
    assert rec._source == {"component": "kubelet"}
