"""PodTopologySpread's per-domain sums refreshed for one changed row whose domain stayed
(``_index.ONE_ROW_REFRESH``: the domain's sum moved by the count difference on Python ints, the
PreFilter view touched only when the count changed) against the general row-by-row path (the
flag off) and a rebuild: random rows changed one at a time (count only, domain and count, a
new domain), with and without a PreFilter view kept along."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.scheduler.plugins.podtopologyspread import _index
from ksched.scheduler.plugins.podtopologyspread._index import _DomainSums, _PreFilterView


def _refresh(e: _DomainSums, dom: np.ndarray, cnt: np.ndarray, size: int, changed: np.ndarray | None,
             one_row: bool) -> None:
    saved = _index.ONE_ROW_REFRESH
    _index.ONE_ROW_REFRESH = one_row
    try:
        e.refresh(dom, cnt, size, changed)
    finally:
        _index.ONE_ROW_REFRESH = saved


def _view(v: _PreFilterView | None, size: int, limits: list[int]) -> Any:
    """What PreFilter reads of a view: counts, eligible domains, minimum, and the verdicts for
    ``limits`` (the kept ones, moved by the refreshes, where there are)."""
    if v is None:
        return None
    counts, present = v.lend(size)
    return (counts[:size].tolist(), present[:size].tolist(), v.n_present, v.min_match(0), v.min_match(size),
            [v.lend_fits(limit)[:size].tolist() for limit in limits])


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_one_row_refresh_agrees_with_the_general_path(data: st.DataObject) -> None:
    n = data.draw(st.integers(min_value=1, max_value=12))
    size = data.draw(st.integers(min_value=1, max_value=6))
    dom = np.array(data.draw(st.lists(st.integers(0, size - 1), min_size=n, max_size=n)), dtype=np.int64)
    cnt = np.array(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), dtype=np.int64)
    fast, ref = _DomainSums(), _DomainSums()
    _refresh(fast, dom, cnt, size, None, True)
    _refresh(ref, dom, cnt, size, None, False)
    with_view = data.draw(st.booleans())
    if with_view:
        fast.pre_filter_view()
        ref.pre_filter_view()
    limits = data.draw(st.lists(st.integers(0, 6), max_size=3))
    for _ in range(data.draw(st.integers(min_value=1, max_value=12))):
        r = data.draw(st.integers(0, n - 1))
        dom = dom.copy()
        cnt = cnt.copy()
        how = data.draw(st.sampled_from(["count", "count", "same", "domain", "grow"]))
        if how == "count":
            cnt[r] = data.draw(st.integers(0, 5))
        elif how == "domain":
            dom[r] = data.draw(st.integers(0, size - 1))
            cnt[r] = data.draw(st.integers(0, 5))
        elif how == "grow":
            size += 1
            dom[r] = size - 1
        changed = np.array([r], dtype=np.int64)
        # Arrays lent before the refresh (read-only for the states holding them).
        lent: list[tuple[np.ndarray, list[Any]]] = []
        for e in (fast, ref):
            if e.view is not None:
                counts, present = e.view.lend(len(e.view.counts))
                lent += [(counts, counts.tolist()), (present, present.tolist())]
                for limit in limits:
                    f = e.view.lend_fits(limit)
                    lent.append((f, f.tolist()))
        _refresh(fast, dom, cnt, size, changed, True)
        _refresh(ref, dom, cnt, size, changed, False)
        rebuilt = _DomainSums()
        rebuilt.refresh(dom, cnt, size, None)
        m = max(len(fast.sums), len(ref.sums), len(rebuilt.sums))
        for e in (fast, ref, rebuilt):
            e.grow(m)
        assert fast.sums.tolist() == ref.sums.tolist() == rebuilt.sums.tolist()
        assert fast.nodes.tolist() == ref.nodes.tolist() == rebuilt.nodes.tolist()
        assert fast.row_dom.tolist() == ref.row_dom.tolist() == dom.tolist()
        assert fast.row_cnt.tolist() == ref.row_cnt.tolist() == cnt.tolist()
        assert (fast.view is None) == (ref.view is None)
        if fast.view is not None:
            fresh = _PreFilterView(rebuilt.sums, rebuilt.nodes)
            assert _view(fast.view, m, limits) == _view(ref.view, m, limits) == _view(fresh, m, limits)
        for arr, before in lent:
            assert arr.tolist() == before


def test_one_row_same_domain_moves_only_its_sum() -> None:
    dom = np.array([1, 1, 2, 0], dtype=np.int64)
    cnt = np.array([2, 0, 3, 4], dtype=np.int64)
    e = _DomainSums()
    e.refresh(dom, cnt, 3, None)
    v = e.pre_filter_view()
    lent, _ = v.lend(3)
    assert e.sums.tolist() == [4, 2, 3] and e.nodes.tolist() == [1, 2, 1]
    cnt = cnt.copy()
    cnt[1] = 5
    e.refresh(dom, cnt, 3, np.array([1], dtype=np.int64))
    assert e.sums.tolist() == [4, 7, 3] and e.nodes.tolist() == [1, 2, 1]
    assert v.counts.tolist() == [0, 7, 3] and v.min_val == 3
    assert lent.tolist() == [0, 2, 3]  # the lent array was left as it was
    # Unchanged row: nothing moves.
    e.refresh(dom, cnt, 3, np.array([2], dtype=np.int64))
    assert e.sums.tolist() == [4, 7, 3]
