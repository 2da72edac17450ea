"""``WatchCache.direct_fanout``: a commit's fan-out over the kind's watch list as it is (open and
remove replace the list, never change it in place) with each watch's kept ``not filtered``,
against the reference (a copy of the list, ``Watch.filtered`` asked per event). Hypothesis:
sequences of opens (unfiltered, by namespace, by label), commits (adds, label changes moving a
pod in and out of a selection, deletions), stops, and consumers whose ``notify`` opens or stops
a watch while a commit fans out; every watch's events equal."""

from __future__ import annotations

import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import mkpod
from ksched.api.labels import parse_label_selector
from ksched.api.pod import Pod
from ksched.apiserver.watch import WatchCache

_OPEN = st.tuples(st.just("open"), st.sampled_from([None, "default", "other"]),
                  st.sampled_from([None, "w=1"]), st.sampled_from([None, "open", "stop"]))
_COMMIT = st.tuples(st.just("commit"), st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
                    st.integers(0, 3), st.integers(0, 1))
_STOP = st.tuples(st.just("stop"), st.integers(0, 9), st.just(None), st.just(None))
_OPS = st.lists(st.one_of(_OPEN, _COMMIT, _STOP), max_size=30)


def _pod(i: int, w: int) -> Pod:
    p = mkpod(f"p{i}")
    p["metadata"]["labels"] = {"w": str(w)}
    return Pod(p)


def _run(direct: bool, ops: list[tuple[Any, ...]]) -> list[Any]:
    wc = WatchCache(["Pod"], threading.RLock(), 100, 1)
    wc.direct_fanout = direct
    watches: list[Any] = []
    current: dict[int, Pod] = {}
    rv = 1

    def opened(ns: str | None, sel: str | None, reaction: str | None) -> Any:
        w = wc.open("Pod", ns, parse_label_selector(sel) if sel else None, None, False, str(rv), [], rv)
        watches.append(w)
        if reaction is not None:
            fired = [False]

            def react() -> None:  # once: a consumer woken by its first event
                if fired[0]:
                    return
                fired[0] = True
                if reaction == "open":
                    opened(None, None, None)
                else:
                    w.stop()
            w.notify = react
        return w

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
                current[i] = new
                wc.commit("Pod", "ADDED" if old is None else "MODIFIED", old, new, rv)
    return [(w.closed, [(e.type, e.object.key if e.object is not None else None, e.object.labels if e.object
                         is not None else None, e.resource_version) for e in w.drain()]) for w in watches]


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_direct_fanout_is_the_copys(ops: list[tuple[Any, ...]]) -> None:
    assert _run(True, ops) == _run(False, ops)


def test_fanout_skips_a_watch_opened_during_the_commit_and_keeps_filters() -> None:
    wc = WatchCache(["Pod"], threading.RLock(), 100, 1)
    late: list[Any] = []
    a = wc.open("Pod", None, None, None, False, "1", [], 1)
    b = wc.open("Pod", None, parse_label_selector("w=1"), None, False, "1", [], 1)
    a.notify = lambda: late.append(wc.open("Pod", None, None, None, False, "1", [], 1)) if not late else None
    wc.commit("Pod", "ADDED", None, _pod(0, 0), 2)
    wc.commit("Pod", "MODIFIED", _pod(0, 0), _pod(0, 1), 3)
    assert [(e.type, e.resource_version) for e in a.drain()] == [("ADDED", 2), ("MODIFIED", 3)]
    assert [(e.type, e.resource_version) for e in b.drain()] == [("ADDED", 3)]  # moved into the selection
    # the history replays the commit it was opened in once; the fan-out does not add it again
    assert [(e.type, e.resource_version) for e in late[0].drain()] == [("ADDED", 2), ("MODIFIED", 3)]
