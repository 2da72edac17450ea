"""``Cache.update_snapshot`` leaving the allocatable row of a row copied under the same Node
object alone (``cache.SKIP_UNCHANGED_ALLOC``) against copying every changed row whole (the
reference): over random batches of node additions, updates (new allocatable, new extended
resources), removals (with pods left on them: ghosts) and re-additions of the same Node object,
pod assumptions (new resource columns) and removals, the snapshot's table is the cache's with
the flag on, and equal to the reference snapshot's, after every batch."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ksched.api.node import Node
from ksched.scheduler.cache import cache as cache_mod
from ksched.scheduler.cache.cache import Cache
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.testing import make_node, make_pod

NODES = [f"n{i}" for i in range(5)]
_OP = st.tuples(st.sampled_from(["add_node", "update_node", "remove_node", "readd_node", "assume", "remove_pod"]),
                st.integers(0, len(NODES) - 1), st.integers(1, 4000), st.booleans())


def _node(name: str, amount: int, extended: bool) -> Node:
    extra = {f"example.com/n{amount % 3}": str(amount % 7 + 1)} if extended else {}
    return make_node(name, cpu=str(8 + amount % 56), memory=f"{amount % 200 + 1}Gi", pods=110, allocatable=extra)


def _tables_agree(cache: Cache, snap: Snapshot) -> None:
    t = cache.table
    w = t.alloc.shape[1]
    for r, ni in enumerate(cache._row_info):
        if ni is None:
            continue
        assert np.array_equal(snap.table.alloc[r, :w], t.alloc[r]), (r, ni.name)
        assert np.array_equal(snap.table.req[r, :w], t.req[r])
        assert np.array_equal(snap.table.nz[r], t.nz[r])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_OP, min_size=1, max_size=6), min_size=1, max_size=14))
@example([[("add_node", 0, 5, False)], [("assume", 0, 7, False)], [("update_node", 0, 9, True)],
          [("assume", 0, 3, False)]])
@example([[("add_node", 0, 5, False), ("assume", 0, 7, False)], [("remove_node", 0, 1, False)],
          [("readd_node", 0, 1, False), ("assume", 0, 2, False)], [("assume", 0, 3, False)]])
def test_alloc_skip_agrees_with_whole_row_copies(batches: list[list[tuple[str, int, int, bool]]]) -> None:
    caches = {True: Cache(), False: Cache()}
    snaps = {on: Snapshot() for on in caches}
    removed: dict[str, Node] = {}  # a removed node's object, for a re-addition of the very same object
    pods: dict[str, str] = {}
    n = 0
    saved = cache_mod.SKIP_UNCHANGED_ALLOC
    try:
        for batch in batches:
            for op, i, amount, extended in batch:
                name = NODES[i]
                c0 = caches[True]
                present = name in c0.nodes and c0.nodes[name].node is not None
                for c in caches.values():
                    if op == "add_node" and not present:
                        c.add_node(_node(name, amount, extended))
                    elif op == "update_node" and present:
                        cur = c.nodes[name].node
                        assert cur is not None
                        c.update_node(cur, _node(name, amount, extended))
                    elif op == "remove_node" and present:
                        cur = c.nodes[name].node
                        assert cur is not None
                        removed[name] = cur
                        c.remove_node(cur)
                    elif op == "readd_node" and not present and name in removed:
                        c.add_node(removed[name])
                if op == "assume" and present:
                    n += 1
                    req = {"cpu": f"{amount}m", "memory": str(amount * 1000)}
                    if extended:
                        req[f"example.com/r{amount % 3}"] = str(amount % 5 + 1)
                    p = make_pod(f"p{n}", uid=f"u{n}", node_name=name, requests=req)
                    for c in caches.values():
                        c.assume_pod(p)
                    pods[p.name] = name
                elif op == "remove_pod" and pods:
                    pname = sorted(pods)[amount % len(pods)]
                    node = pods.pop(pname)
                    p = make_pod(pname, uid=f"u{pname[1:]}", node_name=node)
                    for c in caches.values():
                        c.remove_pod(p)
                elif op == "readd_node" and not present and name in removed:
                    del removed[name]
            for on, c in caches.items():
                cache_mod.SKIP_UNCHANGED_ALLOC = on
                c.update_snapshot(snaps[on])
                _tables_agree(c, snaps[on])
            a, b = snaps[True].table, snaps[False].table
            assert a.alloc.shape == b.alloc.shape
            assert np.array_equal(a.alloc, b.alloc) and np.array_equal(a.req, b.req) and np.array_equal(a.nz, b.nz)
    finally:
        cache_mod.SKIP_UNCHANGED_ALLOC = saved
