"""Watch: from a resourceVersion, ADDED/MODIFIED/DELETED, BOOKMARK, filtered watches, bounded
history and 410 Gone, compaction, closing."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import mkpod
from ksched.api.errors import BadRequest, Gone
from ksched.api.labels import parse_field_selector, parse_label_selector
from ksched.api.watch import ADDED, BOOKMARK, DELETED, MODIFIED, WatchEvent
from ksched.apiserver.store import Store
from ksched.apiserver.watch import history_event
from ksched.clock import VirtualClock


def mknode(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def summary(evs: list[WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.object.name if e.object is not None else "") for e in evs]


@pytest.fixture
def store(store: Store) -> Store:
    """The conftest's empty store, with node n1."""
    store.create(mknode("n1"))
    return store


def test_watch_from_now_sees_added_modified_deleted(store: Store) -> None:
    w = store.watch("Pod", resource_version=store.resource_version)
    store.create(mkpod("a"))
    store.patch("Pod", "default", "a", {"metadata": {"labels": {"x": "1"}}})
    store.delete("Pod", "default", "a")
    evs = w.drain()
    assert summary(evs) == [(ADDED, "a"), (MODIFIED, "a"), (DELETED, "a")]
    rvs = [e.resource_version for e in evs]
    assert rvs == sorted(rvs) and rvs[-1] == store.resource_version
    assert [int(e.object.resource_version) for e in evs] == rvs  # type: ignore[union-attr]
    assert evs[1].object.labels == {"x": "1"}  # type: ignore[union-attr]


def test_watch_without_version_starts_with_synthetic_adds(store: Store) -> None:
    store.create(mkpod("a"))
    store.create(mkpod("b"))
    w = store.watch("Pod")
    assert sorted(summary(w.drain())) == [(ADDED, "a"), (ADDED, "b")]
    w0 = store.watch("Pod", resource_version="0")
    assert len(w0.drain()) == 2


def test_watch_from_an_older_version_replays_history(store: Store) -> None:
    rv0 = store.resource_version
    store.create(mkpod("a"))
    rv1 = store.resource_version
    store.create(mkpod("b"))
    store.delete("Pod", "default", "a")
    assert summary(store.watch("Pod", resource_version=rv0).drain()) == [(ADDED, "a"), (ADDED, "b"), (DELETED, "a")]
    assert summary(store.watch("Pod", resource_version=rv1).drain()) == [(ADDED, "b"), (DELETED, "a")]
    assert store.watch("Pod", resource_version=store.resource_version).drain() == []


def test_watch_is_per_kind(store: Store) -> None:
    w = store.watch("Node", resource_version=store.resource_version)
    store.create(mkpod("a"))
    assert w.drain() == []
    store.patch("Node", "", "n1", {"metadata": {"labels": {"a": "b"}}})
    assert summary(w.drain()) == [(MODIFIED, "n1")]


def test_noop_update_sends_no_event(store: Store) -> None:
    p = store.create(mkpod("a"))
    w = store.watch("Pod", resource_version=store.resource_version)
    store.update(p.deepcopy_raw())
    assert w.drain() == []


def test_bookmarks_only_for_watches_that_ask(store: Store) -> None:
    wb = store.watch("Pod", resource_version=store.resource_version, bookmarks=True)
    wn = store.watch("Pod", resource_version=store.resource_version)
    store.create(mknode("n2"))  # another kind moves the global resourceVersion
    store.send_bookmarks()
    evs = wb.drain()
    assert [(e.type, e.object, e.resource_version) for e in evs] == [(BOOKMARK, None, store.resource_version)]
    assert wn.drain() == []


def test_invalid_resource_versions(store: Store) -> None:
    with pytest.raises(BadRequest):
        store.watch("Pod", resource_version="abc")
    with pytest.raises(Gone) as ei:
        store.watch("Pod", resource_version=store.resource_version + 10)
    assert ei.value.code == 410


# ---------------------------------------------------------------- filtered watches


def test_label_filtered_watch_turns_moves_into_added_and_deleted(store: Store) -> None:
    store.create(mkpod("a", labels={"app": "web"}))
    w = store.watch("Pod", resource_version=store.resource_version, label_selector=parse_label_selector("app=web"))
    store.create(mkpod("b", labels={"app": "db"}))  # not selected
    store.patch("Pod", "default", "a", {"metadata": {"labels": {"v": "2"}}})  # still selected
    store.patch("Pod", "default", "a", {"metadata": {"labels": {"app": "db"}}})  # leaves
    store.patch("Pod", "default", "b", {"metadata": {"labels": {"app": "web"}}})  # enters
    store.delete("Pod", "default", "a")  # not selected any more: nothing
    store.delete("Pod", "default", "b")
    evs = w.drain()
    assert summary(evs) == [(MODIFIED, "a"), (DELETED, "a"), (ADDED, "b"), (DELETED, "b")]
    # The DELETED for a change out of the selection carries the new state and version.
    assert evs[1].object.labels["app"] == "db"  # type: ignore[union-attr]
    assert int(evs[1].object.resource_version) == evs[1].resource_version  # type: ignore[union-attr]


def test_field_filtered_watch_of_unscheduled_pods(store: Store) -> None:
    w = store.watch("Pod", resource_version=store.resource_version,
                    field_selector=parse_field_selector("spec.nodeName="))
    store.create(mkpod("a"))
    store.bind("default", "a", "n1")
    store.patch("Pod", "default", "a", {"metadata": {"labels": {"x": "y"}}})  # bound: not seen
    assert summary(w.drain()) == [(ADDED, "a"), (DELETED, "a")]


def test_filtered_watch_resumed_from_history_sees_moves_too(store: Store) -> None:
    """A watch started from an older resourceVersion replays the history as a live watch would
    have seen it: a pod bound meanwhile leaves the unscheduled-pods selection as a DELETED."""
    rv0 = store.resource_version
    store.create(mkpod("a"))
    store.create(mkpod("b"))
    rv1 = store.resource_version
    store.bind("default", "a", "n1")
    fs = parse_field_selector("spec.nodeName=")
    assert summary(store.watch("Pod", resource_version=rv0, field_selector=fs).drain()) == [
        (ADDED, "a"), (ADDED, "b"), (DELETED, "a")]
    assert summary(store.watch("Pod", resource_version=rv1, field_selector=fs).drain()) == [(DELETED, "a")]
    bound = parse_field_selector("spec.nodeName=n1")
    assert summary(store.watch("Pod", resource_version=rv1, field_selector=bound).drain()) == [(ADDED, "a")]


def test_namespace_filtered_watch(store: Store) -> None:
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    rv = store.resource_version
    w = store.watch("Pod", namespace="team-a", resource_version=rv)
    store.create(mkpod("a"))
    store.create(mkpod("b", ns="team-a"))
    assert summary(w.drain()) == [(ADDED, "b")]
    assert summary(store.watch("Pod", namespace="team-a", resource_version=rv).drain()) == [(ADDED, "b")]
    assert summary(store.watch("Pod", namespace="team-a").drain()) == [(ADDED, "b")]


# ---------------------------------------------------------------- history, Gone, compaction


def test_bounded_history_answers_gone_for_old_versions() -> None:
    st = Store(VirtualClock(), history=3)
    rv0 = st.resource_version
    for i in range(5):
        st.create(mkpod(f"p{i}"))
    with pytest.raises(Gone) as ei:
        st.watch("Pod", resource_version=rv0)
    assert ei.value.code == 410 and ei.value.reason == "Expired"
    # The last three pod events are still there.
    w = st.watch("Pod", resource_version=st.resource_version - 3)
    assert summary(w.drain()) == [(ADDED, "p2"), (ADDED, "p3"), (ADDED, "p4")]
    with pytest.raises(Gone):
        st.watch("Pod", resource_version=st.resource_version - 4)


def test_compact_drops_history(store: Store) -> None:
    rv0 = store.resource_version
    store.create(mkpod("a"))
    store.compact()
    with pytest.raises(Gone):
        store.watch("Pod", resource_version=rv0)
    w = store.watch("Pod", resource_version=store.resource_version)  # the current version is fine
    store.create(mkpod("b"))
    assert summary(w.drain()) == [(ADDED, "b")]


def test_compact_one_kind(store: Store) -> None:
    rv0 = store.resource_version
    store.create(mkpod("a"))
    store.create(mknode("n2"))
    store.compact("Pod")
    with pytest.raises(Gone):
        store.watch("Pod", resource_version=rv0)
    assert summary(store.watch("Node", resource_version=rv0).drain()) == [(ADDED, "n2")]


# ---------------------------------------------------------------- closing and blocking


def test_stop_and_close_watches(store: Store) -> None:
    w1 = store.watch("Pod", resource_version=store.resource_version)
    w2 = store.watch("Node", resource_version=store.resource_version)
    w1.stop()
    assert w1.closed
    store.create(mkpod("a"))
    assert w1.drain() == [] and w1.next(timeout=0) is None
    store.close_watches()
    assert w2.closed
    store.create(mknode("n2"))
    assert w2.drain() == []


def test_next_blocks_until_an_event_or_close(store: Store) -> None:
    w = store.watch("Pod", resource_version=store.resource_version)
    notified: list[int] = []
    w.notify = lambda: notified.append(1)
    t = threading.Thread(target=lambda: store.create(mkpod("a")))
    t.start()
    ev = w.next(timeout=5)
    t.join()
    assert ev is not None and ev.type == ADDED and notified
    assert w.next(timeout=0.01) is None
    threading.Timer(0.05, w.stop).start()
    assert w.next(timeout=5) is None and w.closed


def test_watch_iterates_until_closed(store: Store) -> None:
    w = store.watch("Pod", resource_version=store.resource_version)
    store.create(mkpod("a"))
    store.create(mkpod("b"))
    w.stop()
    store.create(mkpod("c"))  # after the stream closed: not delivered
    # What was received before the close is still read, then the iteration ends.
    assert [e.object.name for e in w] == ["a", "b"]  # type: ignore[union-attr]


@given(etype=st.sampled_from([ADDED, MODIFIED, DELETED, BOOKMARK, "ERROR"]),
       rv=st.integers(min_value=0, max_value=2**63), has_obj=st.booleans(), has_prev=st.booleans())
@settings(max_examples=50, deadline=None)
def test_history_event_is_the_dataclass_event(etype: str, rv: int, has_obj: bool, has_prev: bool) -> None:
    """The store's history events, made through the slots, are the dataclass's events: equal,
    the same hash and repr, and frozen."""
    from ksched.api.pod import Pod
    obj = Pod.from_dict(mkpod("a")) if has_obj else None
    prev = Pod.from_dict(mkpod("b")) if has_prev else None
    fast, ref = history_event(etype, obj, rv, prev), WatchEvent(etype, obj, rv, prev)
    assert type(fast) is WatchEvent
    assert fast == ref and hash(fast) == hash(ref) and repr(fast) == repr(ref)
    assert (fast.type, fast.object, fast.resource_version, fast.prev) == (etype, obj, rv, prev)
    with pytest.raises(AttributeError):
        fast.type = "X"  # type: ignore[misc]


def test_commit_gives_watches_the_history_event(store: Store) -> None:
    w = store.watch("Pod", resource_version=store.resource_version)
    store.create(mkpod("a"))
    store.patch("Pod", "default", "a", {"metadata": {"labels": {"x": "1"}}})
    evs = w.drain()
    hist = list(store.watch_cache._history["Pod"])[-2:]
    assert [e is h for e, h in zip(evs, hist, strict=True)] == [True, True]
    assert evs[1] == WatchEvent(MODIFIED, hist[1].object, hist[1].resource_version, hist[0].object)
