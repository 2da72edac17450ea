"""``Cache.update_snapshot`` after a few changed rows (one to four: the per-row branches of
``NodeTable.copy_rows_from`` and of the generation array) and after many (the bulk branches):
the incrementally updated snapshot's table rows, generations and changed rows are those of a
snapshot built afresh from the cache, over random sequences of node additions, removals,
pod assumptions (with new resource columns) and removals."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.scheduler.cache.cache import Cache
from ksched.scheduler.cache.node_table import NodeTable
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.testing import make_node, make_pod

NODES = [f"n{i}" for i in range(8)]

_OP = st.tuples(st.sampled_from(["add_node", "remove_node", "assume", "remove_pod"]),
                st.integers(0, len(NODES) - 1), st.integers(1, 4000), st.booleans())


def _check(cache: Cache, snap: Snapshot, before: int) -> None:
    t = cache.table
    fresh = NodeTable(t.cols)  # each row written afresh from its NodeInfo (the same columns)
    cache_rows = cache._row_info  # the rows the cache keeps
    for r, ni in enumerate(cache_rows):
        if ni is None:
            continue
        assert snap.infos[r] is not None and snap.infos[r].name == ni.name
        assert snap.generations[r] == ni.generation == int(snap.gen_array[r])
        w = t.alloc.shape[1]
        assert np.array_equal(snap.table.alloc[r, :w], t.alloc[r])
        assert np.array_equal(snap.table.req[r, :w], t.req[r])
        assert np.array_equal(snap.table.nz[r], t.nz[r])
        fresh.write(r, ni)
        k = min(w, fresh.req.shape[1])
        assert np.array_equal(fresh.req[r, :k], snap.table.req[r, :k])
        assert np.array_equal(fresh.alloc[r, :k], snap.table.alloc[r, :k])
        assert np.array_equal(fresh.nz[r], snap.table.nz[r])
    # The rows changed since ``before`` are those whose NodeInfo changed or that were freed since.
    want = [r for r in range(len(snap.infos))
            if (cache_rows[r] is not None and cache_rows[r].generation > before)
            or (cache_rows[r] is None and int(snap.gen_array[r]) > before)]
    assert snap.changed_rows_since(before).tolist() == want


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_OP, min_size=1, max_size=8), min_size=1, max_size=12))
def test_incremental_snapshot_rows_and_generations(batches: list[list[tuple[str, int, int, bool]]]) -> None:
    cache = Cache()
    snap = Snapshot()
    pods: dict[str, str] = {}  # pod name -> node
    n = 0
    for batch in batches:
        before = snap.generation
        for op, i, amount, extended in batch:
            name = NODES[i]
            present = name in cache.nodes and cache.nodes[name].node is not None
            if op == "add_node" and not present:
                cache.add_node(make_node(name, cpu="64", memory="256Gi", pods=110))
            elif op == "remove_node" and present and not any(v == name for v in pods.values()):
                cache.remove_node(cache.nodes[name].node)
            elif op == "assume" and present:
                n += 1
                req = {"cpu": f"{amount}m", "memory": str(amount * 1000)}
                if extended:
                    req[f"example.com/r{amount % 3}"] = str(amount % 5 + 1)
                p = make_pod(f"p{n}", uid=f"u{n}", node_name=name, requests=req)
                cache.assume_pod(p)
                pods[p.name] = name
            elif op == "remove_pod" and pods:
                pname = sorted(pods)[amount % len(pods)]
                node = pods.pop(pname)
                cache.remove_pod(make_pod(pname, uid=f"u{pname[1:]}", node_name=node))
        cache.update_snapshot(snap)
        _check(cache, snap, before)
