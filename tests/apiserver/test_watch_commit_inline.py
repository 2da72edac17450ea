"""``ksched.apiserver.watch.FAST_COMMIT`` (``WatchCache.commit`` with the history event made and
each unfiltered watch's ``_push`` inline) commits exactly what the reference does (False): the
same events (type, object, version, previous object) to every watch, open or stopped, filtered or
not, the same history and compacted versions (with and without a delivered history), whatever
the opens, commits, stops and consumers whose ``notify`` opens or stops a watch mid fan-out; and
a consumer blocked in ``Watch.next`` is woken by a commit."""

from __future__ import annotations

import threading
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.apiserver.test_watch_fanout import _COMMIT, _STOP, _pod

from ksched.api.labels import parse_label_selector
from ksched.api.pod import Pod
from ksched.apiserver import watch as watch_module
from ksched.apiserver.watch import WatchCache

# The fan-out test's operations, with consumers whose first event also stops every other watch
# (later ones in the list being fanned out to: closed while still in it).
_OPEN = st.tuples(st.just("open"), st.sampled_from([None, "default", "other"]),
                  st.sampled_from([None, "w=1"]), st.sampled_from([None, "open", "stop", "stop others"]))
_OPS = st.lists(st.one_of(_OPEN, _COMMIT, _STOP), max_size=30)


def _run(fast: bool, ops: list[tuple[Any, ...]], delivered: int | None, direct: bool) -> list[Any]:
    watch_module.FAST_COMMIT = fast
    try:
        return _ops_on_cache(ops, delivered, direct)
    finally:
        watch_module.FAST_COMMIT = True


def _ops_on_cache(ops: list[tuple[Any, ...]], delivered: int | None, direct: bool) -> list[Any]:
    wc = WatchCache(["Pod"], threading.RLock(), 6, 1, delivered)
    wc.direct_fanout = direct
    watches: list[Any] = []
    current: dict[int, Pod] = {}
    rv = 1
    notified: list[int] = []

    def opened(ns: str | None, sel: str | None, reaction: str | None) -> Any:
        w = wc.open("Pod", ns, parse_label_selector(sel) if sel else None, None, False, str(rv), [], rv)
        watches.append(w)
        idx = len(watches) - 1
        fired = [False]

        def react() -> None:
            notified.append(idx)
            if fired[0] or reaction is None:
                return
            fired[0] = True  # once: a consumer woken by its first event
            if reaction == "open":
                opened(None, None, None)
            elif reaction == "stop others":
                for other in list(watches):
                    if other is not w:
                        other.stop()
            else:
                w.stop()
        w.notify = react
        return w

    made: dict[int, int] = {}  # id -> the how-manieth object made (each kept alive in ``keep``)
    keep: list[Pod] = []

    def seen(o: Any) -> Any:
        return None if o is None else (o.key, o.labels, made[id(o)])

    for op in ops:
        if op[0] == "open":
            opened(op[1], op[2], op[3])
        elif op[0] == "stop":
            if watches:
                watches[op[1] % len(watches)].stop()
        else:
            _, etype, i, w = op
            rv += 1
            old = current.get(i)
            if etype == "DELETED":
                if old is None:
                    continue
                del current[i]
                wc.commit("Pod", "DELETED", old, None, rv)
            else:
                new = _pod(i, w)
                made[id(new)] = len(keep)
                keep.append(new)
                current[i] = new
                wc.commit("Pod", "ADDED" if old is None else "MODIFIED", old, new, rv)
            if watches and i == 3:
                watches[0].drain()  # a consumer that takes its events (what a trim keeps)
    out: list[Any] = [(w.closed, w.taken_rv, [(type(e).__name__, e.type, seen(e.object), e.resource_version,
                                               seen(e.prev)) for e in w.drain()]) for w in watches]
    out.append([(e.type, seen(e.object), e.resource_version, seen(e.prev)) for e in wc._history["Pod"]])
    out.append((wc._compacted, wc._since_trim, notified))
    return out


@settings(max_examples=300, deadline=None)
@given(_OPS, st.sampled_from([None, 1, 3]), st.booleans())
@example([("open", None, None, "stop others"), ("open", None, None, None), ("commit", "ADDED", 0, 0)], None, True)
def test_inline_commit_is_the_references(ops: list[tuple[Any, ...]], delivered: int | None, direct: bool) -> None:
    assert _run(True, ops, delivered, direct) == _run(False, ops, delivered, direct)


def test_a_waiting_consumer_is_woken_by_an_inline_commit() -> None:
    wc = WatchCache(["Pod"], threading.RLock(), 100, 1)
    w = wc.open("Pod", None, None, None, False, "1", [], 1)
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(w.next(timeout=30)))
    t.start()
    while not w._waiting and t.is_alive():
        threading.Event().wait(0.001)
    wc.commit("Pod", "ADDED", None, _pod(0, 0), 2)
    t.join(30)
    assert not t.is_alive() and got and got[0] is not None and got[0].resource_version == 2
