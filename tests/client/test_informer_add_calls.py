"""``SharedInformer.direct_add_calls``: an add calls each unfiltered handler's ``on_add`` itself
(and skips a handler without one) instead of going through ``EventHandler.add``; the reference
(False) goes through every handler. Both must make the same calls in the same order, through
the direct delivery and the DeltaFIFO, with filters, handlers without ``on_add``, handlers added
after objects exist (their replay) and a handler appended to ``handlers`` directly (the direct
calls then step aside). Also the indexer's lock-free empty answer of ``by_index``."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api_objects import mkpod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import EventHandler, SharedInformer
from ksched.clock import VirtualClock

# A handler: (has on_add, filter: None / label w=1 / never).
_HANDLER = st.tuples(st.booleans(), st.sampled_from([None, "w", "never"]))
# Ops: ("create", i, w) / ("label", i, w) / ("delete", i, 0) / ("poll", 0, 0) / ("handler", h, 0) / ("append", h, 0)
_OPS = st.lists(st.one_of(
    st.tuples(st.just("create"), st.integers(0, 5), st.integers(0, 1)),
    st.tuples(st.just("label"), st.integers(0, 5), st.integers(0, 1)),
    st.tuples(st.just("delete"), st.integers(0, 5), st.just(0)),
    st.tuples(st.just("poll"), st.just(0), st.just(0)),
    st.tuples(st.sampled_from(["handler", "append"]), st.integers(0, 5), st.just(0))), max_size=30)


def _run(direct_adds: bool, direct_delivery: bool, handlers: list[tuple[bool, str | None]],
         ops: list[tuple[str, int, int]]) -> list[Any]:
    store = Store(VirtualClock())
    inf = SharedInformer(InProcessClient(store), "Pod")
    inf.direct_add_calls = direct_adds
    inf.direct_delivery = direct_delivery
    log: list[Any] = []

    def make(n: int, spec: tuple[bool, str | None]) -> EventHandler:
        has_add, flt = spec
        f = None if flt is None else (lambda o: o.labels.get("w") == "1") if flt == "w" else (lambda o: False)
        return EventHandler(on_add=(lambda o: log.append(("add", n, o.key, o.resource_version))) if has_add else None,
                            on_update=lambda a, b: log.append(("update", n, b.key, b.resource_version)),
                            on_delete=lambda o: log.append(("delete", n, o.key)), filter=f)

    for n, spec in enumerate(handlers):
        inf.add_handler(make(n, spec))
    inf.poll()
    alive: set[str] = set()
    for op, i, w in ops:
        name = f"p{i}"
        if op == "create":
            if name not in alive:
                alive.add(name)
                p = mkpod(name)
                p["metadata"]["labels"] = {"w": str(w)}
                store.create(p)
        elif op == "label":
            if name in alive:
                store.patch("Pod", "default", name, {"metadata": {"labels": {"w": str(w)}}})
        elif op == "delete":
            if name in alive:
                alive.discard(name)
                store.delete("Pod", "default", name)
        elif op == "poll":
            log.append(("polled", inf.poll()))
        else:
            h = make(100 + len(inf.handlers), handlers[i % len(handlers)] if handlers else (True, None))
            if op == "handler":
                inf.add_handler(h)
            else:
                inf.handlers.append(h)  # not through add_handler: no replay, no direct calls
    log.append(("polled", inf.poll()))
    log.append(sorted(inf.indexer.keys()))
    return log


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_HANDLER, max_size=4), _OPS, st.booleans())
def test_direct_add_calls_are_the_handlers(handlers: list[tuple[bool, str | None]],
                                           ops: list[tuple[str, int, int]], direct_delivery: bool) -> None:
    assert _run(True, direct_delivery, handlers, ops) == _run(False, direct_delivery, handlers, ops)


def test_direct_add_calls_skip_handlers_without_on_add_and_step_aside_for_appended_ones() -> None:
    store = Store(VirtualClock())
    inf = SharedInformer(InProcessClient(store), "Pod")
    seen: list[str] = []
    inf.add_handler(EventHandler(on_add=None, on_update=lambda a, b: None))
    inf.add_handler(EventHandler(on_add=lambda o: seen.append("plain:" + o.name)))
    inf.add_handler(EventHandler(on_add=lambda o: seen.append("filtered:" + o.name), filter=lambda o: o.name != "b"))
    assert len(inf._adds) == 2 and inf._adds_of == len(inf.handlers)  # the handler without on_add: no call
    store.create(mkpod("a"))
    store.create(mkpod("b"))
    inf.poll()
    assert seen == ["plain:a", "filtered:a", "plain:b"]
    inf.handlers.append(EventHandler(on_add=lambda o: seen.append("appended:" + o.name)))
    assert inf._adds_of != len(inf.handlers)  # kept calls no longer used: through each handler
    store.create(mkpod("c"))
    inf.poll()
    assert seen[3:] == ["plain:c", "filtered:c", "appended:c"]


def test_by_index_empty_answer_of_a_built_index() -> None:
    store = Store(VirtualClock())
    inf = SharedInformer(InProcessClient(store), "Pod", indexers={"w": lambda o: [o.labels.get("w", "")]})
    store.create(mkpod("a"))
    inf.poll()
    assert inf.indexer.by_index("w", "1") == []  # builds the index
    out = inf.indexer.by_index("w", "1")  # the built index's empty answer
    assert out == [] and out is not inf.indexer.by_index("w", "1")
    store.patch("Pod", "default", "a", {"metadata": {"labels": {"w": "1"}}})
    inf.poll()
    assert [p.key for p in inf.indexer.by_index("w", "1")] == ["default/a"]
    assert inf.indexer.by_index("w", "") == []
