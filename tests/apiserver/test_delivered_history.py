"""The watch history bounded by what the open watches still have to take
(``Store(delivered_history=N)``, what a simulation uses): every open watch can still be resumed
from the last change it took, with exactly the changes it has not taken yet; of the changes
every open watch has taken, only about the last N stay; a watch from further back is 410 Gone.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import mkpod
from ksched.api.errors import Gone
from ksched.api.labels import parse_label_selector
from ksched.api.watch import WatchEvent
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock


def _ids(evs: list[WatchEvent]) -> list[tuple[str, str, int]]:
    return [(e.type, e.object.key if e.object is not None else "", e.resource_version) for e in evs]


def test_history_keeps_what_an_open_watch_has_not_taken() -> None:
    s = Store(VirtualClock(), delivered_history=2)
    w = s.watch("Pod", resource_version=s.resource_version)
    start = s.resource_version
    for i in range(10):
        s.create(mkpod(f"p{i}"))
    # Nothing taken yet: the whole history is there, and a watch from the start replays it.
    replay = s.watch("Pod", resource_version=start)
    assert _ids(replay.drain()) == _ids(list(w._events))
    replay.stop()
    w.drain()
    for i in range(10, 14):
        s.create(mkpod(f"p{i}"))
    # Everything up to p9 was taken: only the last two changes (and what came after) are kept.
    with pytest.raises(Gone):
        s.watch("Pod", resource_version=start)
    rv = s.resource_version
    assert len(s.watch_cache._history["Pod"]) <= 2 + 2 + 4
    w2 = s.watch("Pod", resource_version=rv - 2)
    assert [e.object.name for e in w2.drain()] == ["p12", "p13"]


def test_without_it_the_history_is_bounded_by_size_only() -> None:
    s = Store(VirtualClock())
    start = s.resource_version
    w = s.watch("Pod", resource_version=start)
    for i in range(20):
        s.create(mkpod(f"p{i}"))
    w.drain()
    assert len(s.watch("Pod", resource_version=start).drain()) == 20


def _store_and_informer(pods: int) -> tuple[Store, Any]:
    """A store keeping 3 changes beyond its watches' and a Pod informer that has taken ``pods``
    created pods (p0, p1, ...)."""
    from ksched.apiserver.inprocess import InProcessClient
    from ksched.client.informer import InformerFactory

    s = Store(VirtualClock(), delivered_history=3)
    inf = InformerFactory(InProcessClient(s)).informer("Pod")
    inf.poll()
    for i in range(pods):
        s.create(mkpod(f"p{i}"))
    inf.poll()
    return s, inf


def test_an_informer_whose_watch_closes_resumes_without_a_relist() -> None:
    s, inf = _store_and_informer(20)
    s.close_watches("Pod")
    for i in range(20, 30):
        s.create(mkpod(f"p{i}"))
    inf.poll()
    reflector = inf.reflector
    assert reflector.rewatches == 1 and reflector.relists == 0
    assert sorted(o.name for o in inf.list()) == sorted(f"p{i}" for i in range(30))


_OPS = st.lists(st.one_of(
    st.tuples(st.just("create"), st.integers(0, 7)),
    st.tuples(st.just("label"), st.integers(0, 7)),
    st.tuples(st.just("delete"), st.integers(0, 7)),
    st.tuples(st.just("take"), st.integers(0, 2), st.integers(0, 5)),
), max_size=60)


@settings(max_examples=80, deadline=None)
@given(_OPS, st.integers(1, 4))
def test_every_open_watch_resumes_from_where_it_is(ops: list[Any], keep: int) -> None:
    """Whatever the writes and however far each watch (one filtered) has read, a watch opened
    from the last change a watch took replays exactly the changes that watch has not taken."""
    s = Store(VirtualClock(), delivered_history=keep)
    sel = parse_label_selector("tier=web")
    watches = [s.watch("Pod", resource_version=s.resource_version),
               s.watch("Pod", resource_version=s.resource_version),
               s.watch("Pod", resource_version=s.resource_version, label_selector=sel)]
    taken = [s.resource_version] * len(watches)
    for op in ops:
        name = f"p{op[1]}"
        present = s.try_get("Pod", "default", name)
        if op[0] == "create" and present is None:
            s.create(mkpod(name))
        elif op[0] == "label" and present is not None:
            raw = present.deepcopy_raw()
            labels = raw["metadata"].setdefault("labels", {})
            labels["tier"] = "db" if labels.get("tier") == "web" else "web"
            s.update(raw)
        elif op[0] == "delete" and present is not None:
            s.delete("Pod", "default", name)
        elif op[0] == "take":
            w = watches[op[1]]
            for _ in range(op[2]):
                ev = w.next(timeout=0)
                if ev is None:
                    break
                taken[op[1]] = ev.resource_version
    for i, w in enumerate(watches):
        resumed = s.watch("Pod", resource_version=taken[i], label_selector=sel if i == 2 else None)
        assert _ids(resumed.drain()) == _ids(list(w._events))
        resumed.stop()


def test_a_watch_resumed_at_the_current_version_releases_its_pin() -> None:
    """A consumer whose watch the server closed comes back before anything changed (it resumes
    from the current version): its pin is released, so the history is bounded again after."""
    s, inf = _store_and_informer(5)
    s.close_watches("Pod")
    inf.poll()  # watches again from the version of p4, still the current one
    assert inf.reflector.rewatches == 1 and inf.reflector.relists == 0
    assert s.watch_cache._pins["Pod"] == []
    for i in range(5, 40):
        s.create(mkpod(f"p{i}"))
        inf.poll()
    assert len(s.watch_cache._history["Pod"]) <= 3 + 3
    assert sorted(o.name for o in inf.list()) == sorted(f"p{i}" for i in range(40))
