"""``informer.FAST_DELIVERY``: the direct delivery of a polled batch applies each add and update
in its own loop (the indexer's upsert inline, the key read once) instead of through
``SharedInformer._apply`` and ``Indexer.upsert``; the reference (False) goes through them. Both
must leave the same indexer (objects and built indices) and make the same handler calls in the
same order: with batches of one and of many events, a key twice in a batch and a list (the
FIFO's ``process``, which applies adds and updates the same way under the flag),
deletions, an index built before the run or by a handler in the middle of a batch, and
handlers that read the indexer while it is delivered."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from api_objects import mkpod
from ksched.api.errors import AlreadyExists
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client import informer
from ksched.client.informer import EventHandler, SharedInformer
from ksched.clock import VirtualClock

# Ops: ("create", i, w) / ("label", i, w) / ("node", i, n) / ("delete", i, 0) / ("poll", 0, 0) /
# ("index", 0, 0): a handler builds the "w" index on its next call.
_OPS = st.lists(st.one_of(
    st.tuples(st.just("create"), st.integers(0, 5), st.integers(0, 2)),
    st.tuples(st.sampled_from(["label", "node"]), st.integers(0, 5), st.integers(0, 2)),
    st.tuples(st.just("delete"), st.integers(0, 5), st.just(0)),
    st.tuples(st.sampled_from(["poll", "index"]), st.just(0), st.just(0))), max_size=40)


def _snapshot(inf: SharedInformer) -> Any:
    ix = inf.indexer
    return (sorted((k, o.resource_version) for k, o in ix.items.items()),
            {name: {v: list(keys) for v, keys in idx.items()} for name, idx in sorted(ix._indices.items())})


def _run(fast: bool, prebuilt: bool, ops: list[tuple[str, int, int]], listed: int = 0) -> list[Any]:
    saved = informer.FAST_DELIVERY
    informer.FAST_DELIVERY = fast
    try:
        store = Store(VirtualClock())
        inf = SharedInformer(InProcessClient(store), "Pod",
                             indexers={"w": lambda o: [o.labels.get("w", "")], "node": lambda o: [o.node_name]})
        log: list[Any] = []
        build = [False]

        def seen(tag: str, o: Any) -> None:
            log.append((tag, o.key, o.resource_version, [p.key for p in inf.indexer.by_index("node", "n1")]))
            if build[0]:
                build[0] = False
                log.append(("built", [p.key for p in inf.indexer.by_index("w", "1")]))

        inf.add_handler(EventHandler(on_add=lambda o: seen("add", o),
                                     on_update=lambda a, b: seen("update", b),
                                     on_delete=lambda o: log.append(("delete", o.key))))
        inf.add_handler(EventHandler(on_add=lambda o: log.append(("add2", o.key)),
                                     on_update=lambda a, b: log.append(("update2", a.resource_version, b.key)),
                                     skip_update=lambda a, b: a.labels == b.labels))
        if prebuilt:
            inf.indexer.by_index("w", "0")
        alive: set[str] = set()
        for i in range(listed):  # pods the informer's list finds (Replaced deltas, the FIFO's way)
            p = mkpod(f"p{i}")
            p["metadata"]["labels"] = {"w": str(i % 2)}
            if i % 2:
                p["spec"]["nodeName"] = "n1"
            store.create(p)
            alive.add(f"p{i}")
        log.append(("listed", inf.poll(), _snapshot(inf)))
        for op, i, v in ops:
            name = f"p{i}"
            if op == "create":
                if name not in alive:
                    alive.add(name)  # (a bound pod's deletion is graceful: it stays, terminating)
                    p = mkpod(name)
                    p["metadata"]["labels"] = {"w": str(v)}
                    if v:
                        p["spec"]["nodeName"] = f"n{v}"
                    try:
                        store.create(p)
                    except AlreadyExists:
                        log.append(("exists", name))
            elif op == "label":
                if name in alive:
                    store.patch("Pod", "default", name, {"metadata": {"labels": {"w": str(v)}}})
            elif op == "node":
                if name in alive:
                    store.patch("Pod", "default", name, {"metadata": {"annotations": {"a": str(v)}}})
            elif op == "delete":
                if name in alive:
                    alive.discard(name)
                    store.delete("Pod", "default", name)
            elif op == "index":
                build[0] = True
            else:
                log.append(("polled", inf.poll(), inf.reflector.last_rv, _snapshot(inf)))
        log.append(("polled", inf.poll(), inf.reflector.last_rv, _snapshot(inf)))
        return log
    finally:
        informer.FAST_DELIVERY = saved


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(_OPS, st.booleans(), st.integers(0, 3))
# A batch of several pods while a handler builds an index in its middle.
@example([("create", 0, 1), ("create", 1, 0), ("poll", 0, 0), ("index", 0, 0), ("label", 0, 1), ("label", 1, 1),
          ("node", 2, 0), ("create", 2, 2), ("poll", 0, 0)], False, 2)
def test_fast_delivery_is_the_reference(ops: list[tuple[str, int, int]], prebuilt: bool, listed: int) -> None:
    assert _run(True, prebuilt, ops, listed) == _run(False, prebuilt, ops, listed)


@pytest.mark.parametrize("fast", [True, False])
def test_fast_delivery_takes_the_direct_path(fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # The fast loop (not the FIFO's) delivers a batch of distinct pods, with and without the flag.
    monkeypatch.setattr(informer, "FAST_DELIVERY", fast)
    store = Store(VirtualClock())
    inf = SharedInformer(InProcessClient(store), "Pod")
    inf.poll()
    calls: list[str] = []
    monkeypatch.setattr(inf, "_put_fast", lambda *a: calls.append("fast"))
    monkeypatch.setattr(inf, "_apply", lambda *a: calls.append("apply") or 1)
    store.create(mkpod("a"))
    store.create(mkpod("b"))
    assert inf.poll() == 2
    assert calls == (["fast", "fast"] if fast else ["apply", "apply"])
