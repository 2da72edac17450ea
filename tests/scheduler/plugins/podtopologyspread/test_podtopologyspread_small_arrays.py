"""PodTopologySpread's small-array paths (branch cycle6): the PreScore per-domain terms worked out
on Python floats for a few domains, and the per-domain sums moved row by row on Python ints,
against their NumPy references."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.scheduler.plugins.podtopologyspread._index import _DomainSums
from ksched.scheduler.plugins.podtopologyspread.scoring import (
    _round_half_away,
    _terms,
    _terms_numpy,
    topology_normalizing_weight,
)

_counts = st.lists(st.integers(min_value=-1, max_value=10**6), min_size=1, max_size=40)


@given(_counts, st.one_of(st.integers(min_value=0, max_value=5000).map(topology_normalizing_weight),
                          st.floats(min_value=0.0, max_value=1e6, allow_nan=False)),
       st.integers(min_value=1, max_value=50))
def test_terms_agree_with_numpy(counts: list[int], weight: float, max_skew: int) -> None:
    arr = np.array(counts, dtype=np.int64)
    fast = _terms(arr, weight, float(max_skew - 1))
    ref = _terms_numpy(arr, weight, float(max_skew - 1))
    assert fast.dtype == ref.dtype == np.float64
    assert fast.tobytes() == ref.tobytes()  # bit for bit
    assert fast[0] == 0.0
    assert np.array_equal(_round_half_away(fast), _round_half_away(ref))


def test_terms_value() -> None:
    t = _terms(np.array([7, -1, 0, 3], dtype=np.int64), math.log(5), 1.0)
    assert t.tolist() == [0.0, 1.0, 1.0, 3 * math.log(5) + 1.0]


@settings(max_examples=60)
@given(st.data())
def test_domain_sums_scalar_bulk_and_rebuild_agree(data: st.DataObject) -> None:
    n = data.draw(st.integers(min_value=1, max_value=30))
    size = data.draw(st.integers(min_value=1, max_value=8))
    dom = np.array(data.draw(st.lists(st.integers(0, size - 1), min_size=n, max_size=n)), dtype=np.int64)
    cnt = np.array(data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)), dtype=np.int64)
    scalar, bulk = _DomainSums(), _DomainSums()
    scalar.refresh(dom, cnt, size, None)
    bulk.refresh(dom, cnt, size, None)
    for _ in range(data.draw(st.integers(min_value=1, max_value=6))):
        changed = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1), max_size=min(n, 4)))), dtype=np.int64)
        grown = data.draw(st.integers(min_value=size, max_value=size + 3))
        dom = dom.copy()
        cnt = cnt.copy()
        for r in changed.tolist():
            dom[r] = data.draw(st.integers(0, grown - 1))
            cnt[r] = data.draw(st.integers(0, 9))
        size = grown
        old = _DomainSums.SCALAR_ROWS
        scalar.refresh(dom, cnt, size, changed)
        try:
            _DomainSums.SCALAR_ROWS = 0
            bulk.refresh(dom, cnt, size, changed)
        finally:
            _DomainSums.SCALAR_ROWS = old
        ref = _DomainSums()
        ref.refresh(dom, cnt, size, None)
        m = max(len(ref.sums), len(scalar.sums), len(bulk.sums))
        for e in (scalar, bulk):
            e.grow(m)
            assert e.sums.dtype == np.int64
            assert e.row_dom.tolist() == dom.tolist() and e.row_cnt.tolist() == cnt.tolist()
        ref.grow(m)
        assert scalar.sums.tolist() == bulk.sums.tolist() == ref.sums.tolist()
        assert scalar.nodes.tolist() == bulk.nodes.tolist() == ref.nodes.tolist()
