"""``Snapshot._record_update`` giving a kept read-only array for a one-row update
(``snapshot.ONE_ROW_ARRAYS``) against an array made from the list every time (the reference):
over random batches of node additions and removals and pod assumptions and removals, two caches
driven alike with the flag on and off answer ``changed_rows_since`` alike for every earlier
generation, after every batch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.scheduler.cache import snapshot as snapshot_mod
from ksched.scheduler.cache.cache import Cache
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.testing import make_node, make_pod

NODES = [f"n{i}" for i in range(6)]
_OP = st.tuples(st.sampled_from(["add_node", "remove_node", "assume", "remove_pod"]),
                st.integers(0, len(NODES) - 1), st.integers(1, 4000))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.lists(_OP, min_size=1, max_size=3), min_size=1, max_size=20))
def test_one_row_arrays_answer_as_the_reference(batches: list[list[tuple[str, int, int]]]) -> None:
    caches = {True: Cache(), False: Cache()}
    snaps = {on: Snapshot() for on in caches}
    pods: dict[str, str] = {}
    n = 0
    saved = snapshot_mod.ONE_ROW_ARRAYS
    try:
        for batch in batches:
            for op, i, amount in batch:
                name = NODES[i]
                c0 = caches[True]
                present = name in c0.nodes and c0.nodes[name].node is not None
                if op == "add_node" and not present:
                    for c in caches.values():
                        c.add_node(make_node(name))
                elif op == "remove_node" and present:
                    for c in caches.values():
                        node = c.nodes[name].node
                        assert node is not None
                        c.remove_node(node)
                elif op == "assume" and present:
                    n += 1
                    p = make_pod(f"p{n}", uid=f"u{n}", node_name=name, requests={"cpu": f"{amount}m"})
                    for c in caches.values():
                        c.assume_pod(p)
                    pods[p.name] = name
                elif op == "remove_pod" and pods:
                    pname = sorted(pods)[amount % len(pods)]
                    node_name = pods.pop(pname)
                    p = make_pod(pname, uid=f"u{pname[1:]}", node_name=node_name)
                    for c in caches.values():
                        c.remove_pod(p)
            for on, c in caches.items():
                snapshot_mod.ONE_ROW_ARRAYS = on
                c.update_snapshot(snaps[on])
            a, b = snaps[True], snaps[False]
            assert a.generation == b.generation
            for g in range(-1, a.generation + 1):
                assert a.changed_rows_since(g).tolist() == b.changed_rows_since(g).tolist()
            last = a._last_update
            if last is not None and len(last[1]) == 1:
                assert not last[1].flags.writeable
    finally:
        snapshot_mod.ONE_ROW_ARRAYS = saved


def test_a_one_row_update_reuses_its_rows_array() -> None:
    snap = Snapshot()
    snap._record_update(3, [2])
    first = snap._last_update
    assert first is not None and first[1].tolist() == [2]
    snap._record_update(5, [2])
    again = snap._last_update
    assert again is not None and again[0] == 5 and again[1] is first[1]
    snap._record_update(6, [4])
    other = snap._last_update
    assert other is not None and other[1].tolist() == [4]
    with pytest.raises(ValueError):
        other[1][0] = 1
    snap._record_update(7, [1, 3])
    two = snap._last_update
    assert two is not None and np.array_equal(two[1], [1, 3])
