"""InterPodAffinity's Score and NormalizeScore with fewer arrays (``plugin.FEWER_SCORE_ARRAYS``:
the first key's gather as the result, unchecked gathers where the per-domain array covers every
interned domain, the rescale in place) and PreScore's first term per key as a weighted copy
(``_index.ADD_INTO_COPY``) against the reference (both flags off): random clusters changed step
by step (pods with and without terms bound, assumed, forgotten, removed; nodes relabelled, added,
removed), incoming pods with preferred terms of their own and without, on random candidate
subsets: the same PreScore arrays, raw scores (vectorized and per node) and normalized scores.
Also ``add_into`` and the rescale on random arrays."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.scheduler.plugins.interpodaffinity.test_interpodaffinity_index import _informers
from tests.scheduler.plugins.interpodaffinity.test_interpodaffinity_kept_score import (
    _node_labels,
    _pod,
    random_change,
)

from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.plugins.interpodaffinity import _index, plugin
from ksched.scheduler.plugins.interpodaffinity._index import add_into, dom_of, dom_size
from ksched.testing import PluginRunner, make_node


def _set(on: bool) -> tuple[bool, bool]:
    saved = plugin.FEWER_SCORE_ARRAYS, _index.ADD_INTO_COPY
    plugin.FEWER_SCORE_ARRAYS = _index.ADD_INTO_COPY = on
    return saved


def _cycle(r: PluginRunner, pod: Any, rows: np.ndarray, on: bool) -> Any:
    saved = _set(on)
    try:
        pl = r.fw.plugins["InterPodAffinity"]
        nodes = r.snapshot.node_list(rows)
        state = CycleState()
        st_ = pl.pre_score(state, pod, nodes)  # type: ignore[attr-defined]
        if st_ is not None:
            return ("status", st_.code)
        s = state.get(plugin.PRE_SCORE_STATE_KEY)
        # Per key, the nonzero scores by domain id: an array may be shorter (made before a
        # domain was interned), its missing entries reading 0, as Score reads them.
        arrays = {k: (a.dtype.str, {i: v for i, v in enumerate(a.tolist()) if v}) for k, a in s.score.items()}
        raw = pl.score_nodes(state, pod, r.snapshot, nodes.rows)  # type: ignore[attr-defined]
        per = [pl.score(state, pod, ni)[0] for ni in nodes]  # type: ignore[attr-defined]
        raw_list = (raw.dtype.str, raw.tolist())
        pl.normalize_score(state, pod, nodes, raw)  # type: ignore[attr-defined]
        # The state's arrays were not written through the scores.
        assert {k: (a.dtype.str, {i: v for i, v in enumerate(a.tolist()) if v})
                for k, a in s.score.items()} == arrays
        return arrays, raw_list, per, raw.tolist()
    finally:
        plugin.FEWER_SCORE_ARRAYS, _index.ADD_INTO_COPY = saved


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_fewer_score_arrays_agree_with_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    hard = rng.choice([0, 1, 5])
    nodes = {}
    for i in range(rng.randint(1, 12)):
        name = f"n{i}"
        nodes[name] = make_node(name, labels=_node_labels(rng, name))
    pods = [_pod(rng, rng.choice(list(nodes)), p_terms=0.4) for _ in range(rng.randint(0, 30))]
    r = PluginRunner(["InterPodAffinity"], list(nodes.values()), pods, informers=_informers(),
                     args={"InterPodAffinity": {"hardPodAffinityWeight": hard}})
    c = r.cache
    bound = {x.uid: x for x in pods}
    assumed: dict[str, Any] = {}
    for _ in range(12):
        order = r.snapshot.order
        for _ in range(3):
            pod = _pod(rng, p_terms=rng.choice([0.3, 0.8]), preferred=rng.random() < 0.8)
            picked = sorted(rng.sample(range(len(order)), rng.randint(1, len(order))))
            rows = order[np.asarray(picked, dtype=np.int64)]
            assert _cycle(r, pod, rows, True) == _cycle(r, pod, rows, False)
        random_change(rng, c, nodes, bound, assumed, (0.35, 0.5, 0.6, 0.65, 0.8, 0.92), [0.0, 0.5], 2)
        r.refresh()


@settings(max_examples=200)
@given(st.lists(st.integers(-(10**9), 10**9), min_size=1, max_size=60))
def test_rescale_in_place_agrees(vals: list[int]) -> None:
    out = []
    for on in (True, False):
        saved = _set(on)
        try:
            scores = np.array(vals, dtype=np.int64)
            pl = plugin.InterPodAffinity({}, None)
            state = CycleState()
            state.write(plugin.PRE_SCORE_STATE_KEY, plugin._PreScoreState({"k": np.zeros(1, dtype=np.int64)}))
            assert pl.normalize_score(state, None, None, scores) is None  # type: ignore[arg-type]
            out.append((scores.dtype.str, scores.tolist()))
        finally:
            plugin.FEWER_SCORE_ARRAYS, _index.ADD_INTO_COPY = saved
    assert out[0] == out[1]


# A key of its own with six values interned (dom_size 7): aggregates shorter than, as long as and
# longer than that.
_KEY = "test.fewer-arrays/key"
for _v in range(6):
    dom_of(_KEY, f"v{_v}")


@settings(max_examples=200)
@given(st.data())
def test_add_into_copy_agrees(data: st.DataObject) -> None:
    key = _KEY
    assert dom_size(key) == 7
    adds = data.draw(st.lists(st.tuples(st.integers(1, 9),
                                        st.sampled_from([1, -1, 5, -100]), st.integers(0, 10**6)),
                              min_size=1, max_size=4))
    got = []
    for on in (True, False):
        saved = _set(on)
        try:
            acc: dict[str, np.ndarray] = {}
            sources = []
            for n, mult, seed in adds:
                arr = np.random.default_rng(seed).integers(-50, 50, size=n).astype(np.int64)
                before = arr.tolist()
                sources.append((arr, before))
                add_into(acc, key, arr, mult)
                assert acc[key] is not arr
            acc[key][:] += 1  # never aliasing an aggregate's array
            for arr, before in sources:
                assert arr.tolist() == before
            got.append((acc[key].dtype.str, acc[key].tolist()))
        finally:
            plugin.FEWER_SCORE_ARRAYS, _index.ADD_INTO_COPY = saved
    assert got[0] == got[1]
