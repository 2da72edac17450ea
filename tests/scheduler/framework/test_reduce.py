"""``ksched.scheduler.framework.reduce``: the ufuncs' ``reduce`` of a one-dimensional array
gives what the array's ``max``/``min``/``all``/``any`` give, value and type, and the same error
on an empty array."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ksched.scheduler.framework.reduce import all_1d, any_1d, max_1d, min_1d

_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def _arrays(dtype: type) -> st.SearchStrategy[np.ndarray]:
    elements = _INT64 if dtype is np.int64 else (st.booleans() if dtype is bool else st.floats(allow_nan=True))
    return hnp.arrays(dtype, st.integers(0, 40), elements=elements)


def _same(got: object, want: object) -> None:
    assert type(got) is type(want)
    if isinstance(want, np.floating) and np.isnan(want):
        assert np.isnan(got)  # type: ignore[call-overload]
    else:
        assert got == want


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([np.int64, bool, np.float64]).flatmap(_arrays), st.booleans())
def test_reductions_equal_the_methods(a: np.ndarray, strided: bool) -> None:
    if strided:
        a = a[::2]  # a view that is not contiguous
    _same(all_1d(a), a.all())
    _same(any_1d(a), a.any())
    _same(all_1d(a), np.all(a))
    if len(a) == 0:
        for fn, method in ((max_1d, a.max), (min_1d, a.min)):
            with pytest.raises(ValueError) as want:
                method()
            with pytest.raises(ValueError) as got:
                fn(a)
            assert str(got.value) == str(want.value)
        return
    _same(max_1d(a), a.max())
    _same(min_1d(a), a.min())
    # schedule_pod's best total: the value at argmax is the maximum.
    if a.dtype == np.int64:
        _same(a[a.argmax()], a.max())
        assert np.array_equal((a == a[a.argmax()]).nonzero()[0], (a == a.max()).nonzero()[0])


def test_examples() -> None:
    a = np.asarray([3, -7, 12, 12, 0], dtype=np.int64)
    assert max_1d(a) == 12 and min_1d(a) == -7
    assert not all_1d(a) and any_1d(a)
    assert all_1d(np.ones(0, dtype=bool)) and not any_1d(np.ones(0, dtype=bool))
    assert all_1d(np.asarray([True, True])) and not all_1d(np.asarray([True, False]))
