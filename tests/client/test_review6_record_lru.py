"""Review of the event recorder's LRU of repeats against a model of upstream's eventLogger
(client-go tools/record/events_cache.go: ``lastEventObservationFromCache`` is an ``lru.Cache``
Get, which makes the key the most recent; ``eventObserve`` then Adds the observation, which
moves an existing key to the front or inserts a new one and evicts the least recently used key
past ``maxLruCacheEntries``): on random streams of events over more keys than the cache holds,
every event is a repeat of the same stored Event, or a new one, exactly where the model says,
and the stored counts are the model's."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import mkpod
from ksched.api.event import Event
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.record import EventRecorder
from ksched.clock import VirtualClock


class _UpstreamLogger:
    """events_cache.go's eventLogger over golang-lru (key -> [name, count])."""

    def __init__(self, max_entries: int) -> None:
        self.max = max_entries
        self.cache: OrderedDict[Any, list[Any]] = OrderedDict()

    def observe(self, key: Any, new_name: Any) -> tuple[Any, int]:
        last = self.cache.get(key)
        if last is not None:
            self.cache.move_to_end(key)  # Get: the most recently used
            name, count = last[0], last[1] + 1
        else:
            name, count = new_name, 1
        # Add: an existing key moves to the front; a new one may evict the oldest.
        self.cache[key] = [name, count]
        self.cache.move_to_end(key)
        if len(self.cache) > self.max:
            self.cache.popitem(last=False)
        return name, count


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4),
       st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["Scheduled", "FailedScheduling"]),
                          st.sampled_from(["ok", "no nodes"]), st.booleans()), max_size=30))
def test_repeats_follow_upstreams_lru(size: int, stream: list[tuple[int, str, str, bool]]) -> None:
    clock = VirtualClock(1000.0)
    store = Store(clock)
    pods = [store.create(mkpod(f"p{i}")) for i in range(5)]
    rec = EventRecorder(InProcessClient(store), clock)
    rec.max_keys = size
    model = _UpstreamLogger(size)
    expected: dict[Any, int] = {}  # model's event identity -> count
    created_order: list[Any] = []
    for i, (p, reason, message, tick) in enumerate(stream):
        if tick:
            clock.advance(1.0)
        before = {e.name for e in store.items("Event")}
        rec.event(pods[p], "Normal", reason, "Binding", message)
        after = {e.name: e for e in store.items("Event") if isinstance(e, Event)}
        new = set(after) - before
        name, count = model.observe((pods[p].uid, reason, message), ("event", i))
        if count == 1:
            assert len(new) == 1, (i, "the model creates an Event here")
            created_order.append(name)
            expected[name] = 1
        else:
            assert not new, (i, "the model counts a repeat here")
            expected[name] = count
    # The stored Events, in creation order, carry the model's counts.
    stored = sorted((e for e in store.items("Event") if isinstance(e, Event)), key=lambda e: e.name)
    assert sorted(e.count for e in stored) == sorted(expected[n] for n in created_order)
    assert len(rec._seen) == len(model.cache)
    assert [k for k in rec._seen] == list(model.cache)
