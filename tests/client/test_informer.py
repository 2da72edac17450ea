"""Informers over the in-process client: delivery, broken watches, expired history and relists,
indexers, filters, and a randomized check that the cache always converges to the store."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api_objects import mkpod
from ksched.api.errors import ApiError
from ksched.api.labels import parse_field_selector, parse_label_selector
from ksched.api.meta import KubeObject
from ksched.api.pod import Pod
from ksched.api.watch import WatchEvent
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import (
    DeletedFinalStateUnknown,
    DeltaFIFO,
    EventHandler,
    Indexer,
    InformerFactory,
    Reflector,
    SharedInformer,
)
from ksched.client.interface import ClusterClient
from ksched.clock import VirtualClock


def mknode(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "1000"}}}


class Recorder:
    """Handler callbacks recorded, plus a mirror of what the handlers say exists."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.mirror: dict[str, KubeObject] = {}
        self.tombstones: list[DeletedFinalStateUnknown] = []

    def handler(self, flt: Any = None) -> EventHandler:
        return EventHandler(on_add=self.add, on_update=self.update, on_delete=self.delete, filter=flt)

    def add(self, o: KubeObject) -> None:
        assert o.key not in self.mirror, f"add of known {o.key}"
        self.events.append(("add", o.key))
        self.mirror[o.key] = o

    def update(self, old: KubeObject, new: KubeObject) -> None:
        assert old.key == new.key
        self.events.append(("update", new.key))
        self.mirror[new.key] = new

    def delete(self, o: Any) -> None:
        if isinstance(o, DeletedFinalStateUnknown):
            self.tombstones.append(o)
            key = o.key
        else:
            key = o.key
        self.events.append(("delete", key))
        self.mirror.pop(key, None)


def state(objs: Any) -> dict[str, str]:
    return {o.key: o.resource_version for o in objs}


@pytest.fixture
def store(store: Store) -> Store:
    """The conftest's empty store, with nodes n1 and n2."""
    store.create(mknode("n1"))
    store.create(mknode("n2"))
    return store


def make(store: Store, **kw: Any) -> tuple[SharedInformer, Recorder]:
    inf = SharedInformer(InProcessClient(store), "Pod", **kw)
    rec = Recorder()
    inf.add_handler(rec.handler())
    return inf, rec


def test_in_process_client_satisfies_the_interface(store: Store) -> None:
    assert isinstance(InProcessClient(store), ClusterClient)


def test_informer_delivers_add_update_delete(store: Store) -> None:
    store.create(mkpod("pre"))
    inf, rec = make(store)
    assert not inf.has_synced()
    inf.poll()
    assert inf.has_synced()
    assert rec.events == [("add", "default/pre")]
    store.create(mkpod("a"))
    store.patch("Pod", "default", "a", {"metadata": {"labels": {"x": "1"}}})
    store.delete("Pod", "default", "pre")
    inf.poll()
    assert rec.events[1:] == [("add", "default/a"), ("update", "default/a"), ("delete", "default/pre")]
    assert state(inf.list()) == state(store.items("Pod")) == state(rec.mirror.values())
    assert inf.get("default/a").labels == {"x": "1"}  # type: ignore[union-attr]
    assert inf.poll() == 0  # nothing new


def test_handler_added_late_sees_existing_objects(store: Store) -> None:
    store.create(mkpod("a"))
    inf, _ = make(store)
    inf.poll()
    late = Recorder()
    inf.add_handler(late.handler())
    assert late.events == [("add", "default/a")]


@pytest.mark.parametrize("how", ["stop", "close_watches"])
def test_broken_watch_resumes_without_missing_anything(store: Store, how: str) -> None:
    inf, rec = make(store)
    store.create(mkpod("a"))
    store.create(mkpod("b"))
    inf.poll()
    if how == "stop":
        inf.reflector.watch.stop()  # type: ignore[union-attr]
    else:
        store.close_watches()
    # Changes while nobody watches.
    store.create(mkpod("c"))
    store.patch("Pod", "default", "a", {"metadata": {"labels": {"v": "2"}}})
    store.delete("Pod", "default", "b")
    inf.poll()
    assert inf.reflector.rewatches == 1 and inf.reflector.relists == 0  # resumed from the last version
    assert rec.events[2:] == [("add", "default/c"), ("update", "default/a"), ("delete", "default/b")]
    assert state(inf.list()) == state(store.items("Pod")) == state(rec.mirror.values())
    # And the new watch is live.
    store.create(mkpod("d"))
    inf.poll()
    assert "default/d" in state(inf.list())


@pytest.mark.parametrize("expire", ["compact", "small_history"])
def test_expired_history_relists_and_reports_missed_deletions(expire: str) -> None:
    st_ = Store(VirtualClock(), history=3 if expire == "small_history" else 100_000)
    inf, rec = make(st_)
    for n in "abcd":
        st_.create(mkpod(n))
    inf.poll()
    inf.reflector.watch.stop()  # type: ignore[union-attr]
    st_.delete("Pod", "default", "a")
    st_.delete("Pod", "default", "b")
    st_.patch("Pod", "default", "c", {"metadata": {"labels": {"v": "2"}}})
    st_.create(mkpod("e"))
    if expire == "compact":
        st_.compact()
    else:
        for i in range(5):  # push the pods' history past its bound
            st_.create(mkpod(f"f{i}"))
    inf.poll()
    assert inf.reflector.relists == 1
    assert state(inf.list()) == state(st_.items("Pod")) == state(rec.mirror.values())
    assert sorted(t.key for t in rec.tombstones) == ["default/a", "default/b"]
    assert all(t.obj.name in ("a", "b") for t in rec.tombstones)
    assert ("update", "default/c") in rec.events and ("add", "default/e") in rec.events


def test_objects_queued_but_not_processed_when_the_relist_happens(store: Store) -> None:
    """An ADDED taken from the watch but not yet processed, then deleted while the watch is down
    and the history expired: the relist must queue its deletion (client-go's DeltaFIFO.Replace)."""
    inf, rec = make(store)
    inf.poll()
    store.create(mkpod("x"))
    store.create(mkpod("y"))
    inf.reflector.poll()  # ADDED x, y are in the FIFO, not in the indexer
    inf.reflector.watch.stop()  # type: ignore[union-attr]
    store.delete("Pod", "default", "x")
    store.compact()
    inf.poll()
    assert state(inf.list()) == state(store.items("Pod")) == {"default/y": store.get("Pod", "default", "y")
                                                              .resource_version}
    assert "default/x" not in rec.mirror


def test_filtered_informer_sees_pods_leave_its_selection(store: Store) -> None:
    inf, rec = make(store, field_selector=parse_field_selector("spec.nodeName="))
    store.create(mkpod("a"))
    store.create(mkpod("b"))
    inf.poll()
    store.bind("default", "a", "n1")
    inf.poll()
    assert list(rec.mirror) == ["default/b"] and rec.events[-1] == ("delete", "default/a")
    # The same across a broken watch resumed from history.
    inf.reflector.watch.stop()  # type: ignore[union-attr]
    store.bind("default", "b", "n2")
    store.create(mkpod("c"))
    inf.poll()
    assert inf.reflector.relists == 0
    assert list(rec.mirror) == ["default/c"] == [o.key for o in inf.list()]


def test_label_filtered_informer(store: Store) -> None:
    inf, rec = make(store, label_selector=parse_label_selector("app=web"))
    store.create(mkpod("a", labels={"app": "web"}))
    store.create(mkpod("b", labels={"app": "db"}))
    inf.poll()
    assert list(rec.mirror) == ["default/a"]
    store.patch("Pod", "default", "b", {"metadata": {"labels": {"app": "web"}}})
    store.patch("Pod", "default", "a", {"metadata": {"labels": {"app": "db"}}})
    inf.poll()
    assert list(rec.mirror) == ["default/b"]


def test_event_handler_filter_turns_moves_into_add_and_delete(store: Store) -> None:
    inf = SharedInformer(InProcessClient(store), "Pod")
    rec = Recorder()
    inf.add_handler(rec.handler(flt=lambda p: not p.node_name))
    store.create(mkpod("a"))
    inf.poll()
    store.bind("default", "a", "n1")
    inf.poll()
    assert rec.events == [("add", "default/a"), ("delete", "default/a")]
    assert inf.get("default/a") is not None  # the informer itself still has it


def test_indexers(store: Store) -> None:
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    inf = SharedInformer(InProcessClient(store), "Pod",
                         indexers={"node": lambda o: [o.node_name] if o.node_name else []})  # type: ignore[attr-defined]
    store.create(mkpod("a"))
    store.create(mkpod("b", ns="team-a"))
    store.create(mkpod("c", ns="team-a"))
    inf.poll()
    idx = inf.indexer
    assert sorted(o.name for o in idx.by_index("namespace", "team-a")) == ["b", "c"]
    assert [o.name for o in idx.by_index("namespace", "default")] == ["a"]
    assert idx.by_index("node", "n1") == []
    store.bind("team-a", "b", "n1")
    store.bind("default", "a", "n1")
    store.bind("team-a", "c", "n2")
    inf.poll()
    assert sorted(o.name for o in idx.by_index("node", "n1")) == ["a", "b"]
    assert [o.name for o in idx.by_index("node", "n2")] == ["c"]
    store.delete("Pod", "team-a", "b", grace_period_seconds=0)
    inf.poll()
    assert [o.name for o in idx.by_index("node", "n1")] == ["a"]
    assert [o.name for o in idx.by_index("namespace", "team-a")] == ["c"]
    # An index added later covers what is already there.
    idx.add_indexer("phase", lambda o: [o.phase])  # type: ignore[attr-defined]
    assert sorted(o.name for o in idx.by_index("phase", "Pending")) == ["a", "c"]


def test_indexer_unit() -> None:
    from ksched.api.pod import Pod
    ix = Indexer({"label": lambda o: list(o.labels.values())})
    p1 = Pod(mkpod("a", labels={"k": "x"}))
    p2 = Pod(mkpod("a", labels={"k": "y"}))
    assert ix.upsert(p1) is None
    assert ix.upsert(p2) is p1
    assert ix.by_index("label", "x") == [] and ix.by_index("label", "y") == [p2]
    assert ix.remove("default/a") is p2 and ix.remove("default/a") is None
    assert len(ix) == 0 and ix.by_index("label", "y") == []


def test_delta_fifo_deduplicates_deletions() -> None:
    from ksched.api.pod import Pod
    known: dict[str, KubeObject] = {}
    fifo = DeltaFIFO(lambda: list(known), known.get)
    p = Pod(mkpod("a"))
    fifo.add(p)
    fifo.delete(p)
    fifo.delete(p)
    (key, deltas), = fifo.pop_all()
    assert key == "default/a" and [d for d, _ in deltas] == ["Added", "Deleted"]
    assert len(fifo) == 0


def test_informer_factory_shares_informers(store: Store) -> None:
    f = InformerFactory(InProcessClient(store))
    pods = f.informer("Pod")
    assert f.informer("Pod") is pods
    nodes = f.informer("Node")
    assert f.pending()  # nothing listed yet
    store.create(mkpod("a"))
    f.poll()
    assert not f.pending()
    assert len(pods.list()) == 1 and len(nodes.list()) == 2
    store.create(mkpod("b"))
    assert f.pending()
    assert f.poll() >= 1 and len(pods.list()) == 2


def test_background_reflector(store: Store) -> None:
    f = InformerFactory(InProcessClient(store))
    inf = f.informer("Pod")
    f.start()
    try:
        store.create(mkpod("a"))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and inf.get("default/a") is None:
            f.process()
            time.sleep(0.01)
        assert inf.get("default/a") is not None
        store.close_watches()
        store.create(mkpod("b"))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and inf.get("default/b") is None:
            f.process()
            time.sleep(0.01)
        assert inf.get("default/b") is not None
    finally:
        f.stop()


# ---------------------------------------------------------------- randomized convergence

OPS = ["create", "create", "update", "label", "bind", "delete", "delete_now", "status", "break", "compact",
       "poll", "reflector_poll", "bookmark"]


def run_sequence(seed: int, steps: int, history: int, selector: str | None) -> None:
    rnd = random.Random(seed)
    st_ = Store(VirtualClock(), history=history)
    for n in ("n1", "n2"):
        st_.create(mknode(n))
    fs = parse_field_selector(selector) if selector else None
    inf = SharedInformer(InProcessClient(st_), "Pod", field_selector=fs,
                         indexers={"node": lambda o: [o.node_name]})  # type: ignore[attr-defined]
    rec = Recorder()
    inf.add_handler(rec.handler())
    counter = 0
    for _ in range(steps):
        op = rnd.choice(OPS)
        pods = sorted(o.key for o in st_.items("Pod"))
        victim = rnd.choice(pods).split("/")[1] if pods else None
        try:
            if op == "create" or victim is None:
                counter += 1
                st_.create(mkpod(f"p{counter}", labels={"g": str(counter % 3)}))
            elif op == "update":
                st_.patch("Pod", "default", victim, {"metadata": {"annotations": {"n": str(rnd.random())}}})
            elif op == "label":
                st_.patch("Pod", "default", victim, {"metadata": {"labels": {"g": str(rnd.randint(0, 2))}}})
            elif op == "bind":
                st_.bind("default", victim, rnd.choice(["n1", "n2"]))
            elif op == "delete":
                st_.delete("Pod", "default", victim)
            elif op == "delete_now":
                st_.delete("Pod", "default", victim, grace_period_seconds=0)
            elif op == "status":
                st_.patch("Pod", "default", victim, {"status": {"phase": rnd.choice(["Running", "Succeeded"])}},
                          subresource="status")
            elif op == "break":
                if rnd.random() < 0.5:
                    st_.close_watches()
                elif inf.reflector.watch is not None:
                    inf.reflector.watch.stop()
            elif op == "compact":
                st_.compact()
            elif op == "poll":
                inf.poll()
            elif op == "reflector_poll":
                inf.reflector.poll()  # into the FIFO only
            elif op == "bookmark":
                st_.send_bookmarks()
        except ApiError:
            pass
    inf.poll()
    expected = st_.items("Pod")
    if fs is not None:
        from ksched.apiserver.fields import field_values
        expected = [o for o in expected if fs.matches(field_values(o))]
    assert state(inf.list()) == state(expected)
    assert state(rec.mirror.values()) == state(expected)
    by_node: dict[str, set[str]] = {}
    for o in expected:
        by_node.setdefault(o.node_name, set()).add(o.key)  # type: ignore[attr-defined]
    for node, keys in by_node.items():
        assert {o.key for o in inf.indexer.by_index("node", node)} == keys


@pytest.mark.parametrize("seed", range(12))
def test_random_sequences_converge(seed: int) -> None:
    run_sequence(seed, steps=150, history=[5, 50, 100_000][seed % 3],
                 selector=[None, "spec.nodeName=", "spec.nodeName=n1"][seed % 3 if seed < 6 else 0])


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32), st.sampled_from([2, 7, 1000]), st.sampled_from([None, "spec.nodeName=",
                                                                               "status.phase!=Succeeded"]))
def test_random_sequences_converge_hypothesis(seed: int, history: int, selector: str | None) -> None:
    run_sequence(seed, steps=60, history=history, selector=selector)


def test_bookmarks_move_the_resume_point_and_avoid_a_relist(store: Store) -> None:
    inf, _ = make(store)
    store.create(mkpod("a"))
    inf.poll()
    for i in range(3):
        store.create(mknode(f"other{i}"))  # other kinds move the global resourceVersion
    store.send_bookmarks()
    inf.poll()
    assert inf.reflector.last_rv == str(store.resource_version)
    inf.reflector.watch.stop()  # type: ignore[union-attr]
    store.compact()  # history starts at the bookmarked version
    inf.poll()
    assert inf.reflector.relists == 0 and inf.reflector.rewatches == 1
    # Without a bookmark the last version seen is older than the compaction: a relist.
    store.create(mknode("other9"))
    inf.reflector.watch.stop()  # type: ignore[union-attr]
    store.compact()
    inf.poll()
    assert inf.reflector.relists == 1
    assert state(inf.list()) == state(store.items("Pod"))


def test_in_process_client_operations(store: Store) -> None:
    c = InProcessClient(store)
    p = c.create(mkpod("a", labels={"app": "web"}))
    items, rv = c.list("Pod", label_selector=parse_label_selector("app=web"))
    assert [o.key for o in items] == ["default/a"] and rv == str(store.resource_version)
    assert c.get("Pod", "default", "a") is p
    raw = p.deepcopy_raw()
    raw["metadata"]["labels"]["v"] = "1"
    p = c.update(raw)
    raw = p.deepcopy_raw()
    raw["status"]["phase"] = "Running"
    assert c.update_status(raw).phase == "Running"  # type: ignore[attr-defined]
    c.patch("Pod", "default", "a", {"metadata": {"labels": {"v": "2"}}})
    c.bind(store.get("Pod", "default", "a"), "n1")  # type: ignore[arg-type]
    assert store.get("Pod", "default", "a").node_name == "n1"  # type: ignore[attr-defined]
    w = c.watch("Pod", resource_version=str(store.resource_version))
    c.evict("default", "a", grace_period_seconds=0)
    assert [e.type for e in w.drain()] == ["DELETED"]
    c.create(mkpod("b"))
    assert c.delete("Pod", "default", "b") is not None
    assert store.count("Pod") == 0


def test_indices_built_on_first_use_agree_with_a_scan() -> None:
    """Each index is built when first asked for and kept current afterwards: at any point of a
    random sequence of upserts and removals, by_index equals a scan of the objects held."""
    import random

    from ksched.api.pod import Pod

    rng = random.Random(3)
    ix = Indexer({"node": lambda o: [o.node_name] if o.node_name else [],
                  "label": lambda o: sorted(o.labels.values())})
    asked: set[str] = set()
    for step in range(400):
        name = f"p{rng.randrange(30)}"
        if rng.random() < 0.25:
            ix.remove(f"ns{rng.randrange(3)}/{name}")
        else:
            m = mkpod(name, ns=f"ns{rng.randrange(3)}", labels={"a": f"v{rng.randrange(4)}", "b": "w"})
            if rng.random() < 0.6:
                m["spec"]["nodeName"] = f"n{rng.randrange(4)}"
            ix.upsert(Pod(m))
        if step in (50, 120, 300) or rng.random() < 0.05:
            index = rng.choice(["namespace", "node", "label"])
            asked.add(index)
        for index in asked:
            fn = ix._indexers[index]
            for value in {v for o in ix.items.values() for v in fn(o)} | {"nothing"}:
                want = sorted(o.key for o in ix.items.values() if value in fn(o))
                assert sorted(o.key for o in ix.by_index(index, value)) == want, (step, index, value)
    assert asked == {"namespace", "node", "label"}
    assert set(ix._indices) == asked
    with pytest.raises(KeyError):
        ix.by_index("no-such-index", "x")


def test_a_list_delivered_page_by_page_gives_the_deltas_of_one_replace() -> None:
    """replace_page + replace_done give the same deltas as replace of the whole list, and with
    pages processed as they arrive the indexer ends the same."""
    import random

    from ksched.api.pod import Pod

    rng = random.Random(11)
    for _ in range(20):
        known = {f"default/k{i}": Pod(mkpod(f"k{i}")) for i in range(rng.randrange(0, 30)) if rng.random() < 0.7}
        listed = [Pod(mkpod(f"k{i}", labels={"v": str(rng.randrange(3))})) for i in range(rng.randrange(0, 30))
                  if rng.random() < 0.6]
        queued = [Pod(mkpod(f"k{i}")) for i in range(30) if rng.random() < 0.1]

        def fifo(known: dict[str, Any] = known, queued: list[Any] = queued) -> DeltaFIFO:
            f = DeltaFIFO(lambda: list(known), known.get)
            for q in queued:
                f.add(q)
            return f

        whole = fifo()
        whole.replace(listed)
        paged = fifo()
        keys: set[str] = set()
        size = rng.randrange(1, 8)
        for i in range(0, len(listed), size):
            paged.replace_page(listed[i:i + size], keys)
        paged.replace_done(keys)

        def shape(f: DeltaFIFO) -> list[Any]:
            return [(k, [(t, o.key, getattr(o, "resource_version", None)) for t, o in ds]) for k, ds in f.pop_all()]

        # Reference: the per-object delta (``_add``) the inlined page path stands for.
        ref = fifo()
        for o in listed:
            ref._add("Replaced", o)
        ref._replace_done({o.key for o in listed})
        assert shape(paged) == shape(whole) == shape(ref)


def test_an_index_built_by_a_reader_while_another_thread_adds_misses_nothing() -> None:
    """The informer applies deltas in one thread while a controller, in another, asks for an
    index the first time: the index, built then, still ends up with every object."""
    import sys
    import threading

    from ksched.api.pod import Pod

    ix = Indexer({"node": lambda o: [o.node_name] if o.node_name else []})
    pods = []
    for i in range(6000):
        m = mkpod(f"p{i}", ns=f"ns{i % 3}")
        m["spec"]["nodeName"] = f"n{i % 7}"
        pods.append(Pod(m))
    for p in pods[:1000]:
        ix.upsert(p)
    started = threading.Event()

    def writer() -> None:
        started.set()
        for p in pods[1000:]:
            ix.upsert(p)
        for p in pods[:500]:
            ix.remove(p.key)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns often: the build and the adds interleave
    try:
        t = threading.Thread(target=writer)
        t.start()
        started.wait(5)
        ix.by_index("node", "n0")  # built while the writer runs
        ix.by_index("namespace", "ns1")
        t.join(30)
    finally:
        sys.setswitchinterval(interval)
    assert not t.is_alive()
    held = list(ix.items.values())
    assert len(held) == 5500
    for index, fn in (("node", lambda o: o.node_name), ("namespace", lambda o: o.namespace)):
        for value in {fn(o) for o in held}:
            assert sorted(o.key for o in ix.by_index(index, value)) == sorted(o.key for o in held if fn(o) == value)


def test_a_reflector_notifies_once_it_has_listed(store: Store) -> None:
    """The scheduler waits for every informer to have listed; the reflector wakes it when it
    has (not only when objects or pages arrive), so no poll interval is waited out."""
    store.create(mkpod("a"))
    inf = SharedInformer(InProcessClient(store), "Pod")
    seen: list[bool] = []
    inf.reflector.notify = lambda: seen.append(inf.reflector.listed)
    inf.reflector.list_and_watch()
    assert seen and seen[-1] is True
    inf.reflector.stop()



def _watch_event(t: str, name: str, rv: int, with_rv: bool) -> WatchEvent:
    if t == "BOOKMARK":
        return WatchEvent("BOOKMARK", None, rv)
    md: dict[str, Any] = {"name": name, "namespace": "default"}
    if with_rv:
        md["resourceVersion"] = str(rv)
    return WatchEvent(t, Pod({"apiVersion": "v1", "kind": "Pod", "metadata": md,
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}), rv)


_WATCH_EVENTS = st.lists(st.builds(_watch_event, st.sampled_from(["ADDED", "MODIFIED", "DELETED", "DELETED", "BOOKMARK"]),
                                   st.sampled_from(["a", "b", "c"]), st.integers(1, 50), st.booleans()), max_size=12)


def _reflector_state(r: Reflector) -> Any:
    return (r.last_rv, list(r.fifo._queue),
            {k: [(t, o.resource_version) for t, o in d] for k, d in r.fifo._items.items()})


@settings(max_examples=150, deadline=None)
@given(_WATCH_EVENTS)
def test_a_polled_batch_of_watch_events_fills_the_fifo_as_one_at_a_time(evs: list[WatchEvent]) -> None:
    """``Reflector._handle_all`` (a poll's batch, one lock) leaves the FIFO and the last
    resourceVersion as ``_handle`` of each event in turn does."""
    one = Reflector(None, "Pod", DeltaFIFO(lambda: [], lambda k: None))  # type: ignore[arg-type]
    batch = Reflector(None, "Pod", DeltaFIFO(lambda: [], lambda k: None))  # type: ignore[arg-type]
    for ev in evs:
        one._handle(ev)
    batch._handle_all(evs)
    assert _reflector_state(batch) == _reflector_state(one)


# ---------------------------------------------------------------- direct delivery against the FIFO

_DIRECT_OPS = st.lists(st.tuples(
    st.sampled_from(["create", "create", "label", "status", "status", "delete", "delete_now", "bind", "poll", "poll",
                     "reflector_poll", "break", "close", "compact", "bookmark", "burst"]),
    st.integers(0, 5)), max_size=40)


def _direct_run(direct: bool, ops: list[tuple[str, int]], history: int, selector: str | None) -> list[Any]:
    """The same operations on a fresh store, an informer with or without direct delivery: every
    handler call (with the versions it saw), every poll's count, the indexer and the reflector's
    resume point after each step. A handler writes too (a pod labelled w=1 added gets an
    annotation), so deliveries nest with writes."""
    st_ = Store(VirtualClock(), history=history)
    for n in ("n1", "n2"):
        st_.create(mknode(n))
    inf = SharedInformer(InProcessClient(st_), "Pod", indexers={"node": lambda o: [o.node_name]},  # type: ignore[attr-defined]
                         field_selector=parse_field_selector(selector) if selector else None)
    inf.direct_delivery = direct
    log: list[Any] = []

    def on_add(o: Any) -> None:
        log.append(("add", o.key, o.resource_version))
        if o.labels.get("w") == "1" and not o.annotations:
            try:
                st_.patch("Pod", o.namespace, o.name, {"metadata": {"annotations": {"seen": "1"}}})
            except ApiError as e:  # (deleted since this version)
                log.append(("handler-error", type(e).__name__))

    def on_update(a: Any, b: Any) -> None:
        log.append(("update", b.key, a.resource_version, b.resource_version))

    def on_delete(o: Any) -> None:
        log.append(("delete", o.key, type(o).__name__))

    inf.add_handler(EventHandler(on_add, on_update, on_delete))
    inf.add_handler(EventHandler(on_add=lambda o: log.append(("bound-add", o.key)),
                                 on_update=lambda a, b: log.append(("bound-update", b.key)),
                                 on_delete=lambda o: log.append(("bound-delete", o.key)),
                                 filter=lambda o: bool(getattr(o, "node_name", ""))))
    counter = 0
    for op, arg in ops:
        pods = sorted(o.name for o in st_.items("Pod"))
        victim = pods[arg % len(pods)] if pods else None
        try:
            if op == "create" or victim is None:
                counter += 1
                st_.create(mkpod(f"p{counter}", labels={"w": str(arg % 2)}))
            elif op == "burst":  # several writes of one pod and others in one batch
                counter += 1
                st_.create(mkpod(f"p{counter}", labels={"w": "0"}))
                st_.patch("Pod", "default", f"p{counter}", {"metadata": {"labels": {"x": "1"}}})
                st_.patch("Pod", "default", victim, {"metadata": {"labels": {"x": str(arg)}}})
            elif op == "label":
                st_.patch("Pod", "default", victim, {"metadata": {"labels": {"w": str(arg % 2)}}})
            elif op == "status":
                st_.patch("Pod", "default", victim, {"status": {"message": f"m{arg}"}}, subresource="status")
            elif op == "bind":
                st_.bind("default", victim, ["n1", "n2"][arg % 2])
            elif op == "delete":
                st_.delete("Pod", "default", victim)
            elif op == "delete_now":
                st_.delete("Pod", "default", victim, grace_period_seconds=0)
            elif op == "poll":
                log.append(("polled", inf.poll()))
            elif op == "reflector_poll":
                log.append(("reflector-polled", inf.reflector.poll()))
            elif op == "break":
                if inf.reflector.watch is not None:
                    inf.reflector.watch.stop()
            elif op == "close":
                st_.close_watches()
            elif op == "compact":
                st_.compact()
            else:
                st_.send_bookmarks()
        except ApiError as e:
            log.append(("error", type(e).__name__))
        log.append((state(inf.list()), inf.reflector.last_rv, len(inf.fifo),
                    sorted(o.key for o in inf.indexer.by_index("node", "n1"))))
    log.append(("polled", inf.poll()))
    log.append((state(inf.list()), inf.reflector.last_rv))
    return log


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(_DIRECT_OPS, st.sampled_from([3, 100_000]), st.sampled_from([None, "spec.nodeName=n1"]))
def test_direct_delivery_is_the_fifos(ops: list[tuple[str, int]], history: int, selector: str | None) -> None:
    """A polled batch delivered without the DeltaFIFO (``SharedInformer.direct_delivery``, when
    its objects are distinct) gives the same handler calls in the same order, the same indexer,
    counts and resume points as through the FIFO (the reference), whatever the batches hold:
    repeated keys, deletions, bookmarks, closed watches, relists, writes from handlers."""
    assert _direct_run(True, ops, history, selector) == _direct_run(False, ops, history, selector)


def test_direct_delivery_takes_distinct_batches_and_leaves_the_rest_to_the_fifo(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    inf, rec = make(store)
    inf.poll()
    fifo_adds: list[str] = []
    add = DeltaFIFO._add

    def counted(self: DeltaFIFO, dtype: str, obj: Any) -> None:
        fifo_adds.append(obj.key)
        add(self, dtype, obj)

    monkeypatch.setattr(DeltaFIFO, "_add", counted)
    store.create(mkpod("a"))
    store.create(mkpod("b"))
    assert inf.poll() == 2 and fifo_adds == []  # distinct: direct
    store.patch("Pod", "default", "a", {"metadata": {"labels": {"x": "1"}}})
    store.patch("Pod", "default", "a", {"metadata": {"labels": {"x": "2"}}})
    assert inf.poll() == 2 and fifo_adds == ["default/a", "default/a"]  # a twice: the FIFO's way
    assert rec.events[-2:] == [("update", "default/a"), ("update", "default/a")]
    assert inf.get("default/a").labels == {"x": "2"}  # type: ignore[union-attr]
