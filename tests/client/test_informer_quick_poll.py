"""``InformerFactory.quick_poll``: the factory's poll asks each informer's watch whether anything
arrived before calling its poll, over a kept tuple of the informers; the reference (False) calls
every informer's poll over a copy of the map. Both deliver the same events in the same order,
including an informer made by a handler during a poll (not polled in that round either way) and
after the server closed a watch (the informer watches again)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api_objects import mknode, mkpod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import EventHandler, InformerFactory
from ksched.clock import VirtualClock

_OPS = st.lists(st.tuples(st.sampled_from(["pod", "node", "label", "poll", "late", "stop"]), st.integers(0, 3)),
                max_size=25)


def _run(quick: bool, ops: list[tuple[str, int]]) -> list[Any]:
    store = Store(VirtualClock())
    f = InformerFactory(InProcessClient(store))
    f.quick_poll = quick
    log: list[Any] = []

    def watch(kind: str) -> None:
        f.informer(kind).add_handler(EventHandler(
            on_add=lambda o: log.append(("add", kind, o.key)),
            on_update=lambda a, b: log.append(("update", kind, b.key, b.resource_version)),
            on_delete=lambda o: log.append(("delete", kind, o.key))))

    def late(o: Any) -> None:
        # A handler that makes another informer while the factory polls.
        log.append(("late-seen", o.key))
        if "Namespace" not in f.informers:
            watch("Namespace")

    watch("Pod")
    watch("Node")
    f.informer("ConfigMap")  # an informer without handlers
    made: set[str] = set()
    for op, i in ops:
        if op == "pod" and f"p{i}" not in made:
            made.add(f"p{i}")
            store.create(mkpod(f"p{i}"))
        elif op == "node" and f"n{i}" not in made:
            made.add(f"n{i}")
            store.create(mknode(f"n{i}"))
        elif op == "label" and f"p{i}" in made:
            store.patch("Pod", "default", f"p{i}", {"metadata": {"labels": {"x": str(len(log))}}})
        elif op == "late" and "Secret" not in f.informers:
            f.informer("Secret")
            f.informers["Pod"].add_handler(EventHandler(on_add=late))
        elif op == "stop":  # the server closes a watch: the informer must watch again
            w = f.informers[("Pod", "Node")[i % 2]].reflector.watch
            if w is not None:
                w.stop()
        elif op == "poll":
            log.append(("polled", f.poll(), sorted(f.informers)))
    log.append(("polled", f.poll(), sorted(f.informers)))
    log.append(("polled", f.poll(), sorted(f.informers)))
    return log


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(_OPS)
def test_quick_poll_delivers_what_every_informers_poll_does(ops: list[tuple[str, int]]) -> None:
    assert _run(True, ops) == _run(False, ops)


def test_quick_poll_keeps_up_with_new_informers() -> None:
    store = Store(VirtualClock())
    f = InformerFactory(InProcessClient(store))
    seen: list[str] = []
    f.informer("Pod").add_handler(EventHandler(on_add=lambda o: seen.append(o.key)))
    assert f.poll() == 0 and len(f._polled) == 1
    f.informer("Node").add_handler(EventHandler(on_add=lambda o: seen.append(o.name)))
    store.create(mknode("n"))
    store.create(mkpod("p"))
    assert f.poll() == 2 and len(f._polled) == 2
    assert seen == ["n", "default/p"] or seen == ["default/p", "n"]
    assert f.poll() == 0
