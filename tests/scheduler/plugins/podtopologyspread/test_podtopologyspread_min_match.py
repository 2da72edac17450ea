"""PodTopologySpread's global minimum (``_PreFilterState.min_match``) by the slice when every
domain but id 0 is eligible (``filtering.MIN_BY_SLICE``) against the boolean-mask gather, over
random per-domain counts, eligible domains, minDomains and PreFilterExtensions updates
(hypothesis); and the Filter verdicts derived from it (``fits``) the same."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.scheduler.plugins.podtopologyspread import filtering
from ksched.scheduler.plugins.podtopologyspread.filtering import _PreFilterState


@st.composite
def _states(draw: st.DrawFn) -> tuple[list[int], list[bool], int, int, list[tuple[int, int]]]:
    size = draw(st.integers(1, 40))
    counts = draw(st.lists(st.integers(-3, 50), min_size=size, max_size=size))
    counts[0] = 0
    everywhere = draw(st.booleans())
    present = [False] + ([True] * (size - 1) if everywhere else draw(
        st.lists(st.booleans(), min_size=size - 1, max_size=size - 1)))
    min_domains = draw(st.integers(1, 5))
    max_skew = draw(st.integers(1, 3))
    updates = draw(st.lists(st.tuples(st.integers(1, size + 3), st.sampled_from([-1, 1])), max_size=6))
    return counts, present, min_domains, max_skew, updates


def _mins_and_fits(monkeypatch: pytest.MonkeyPatch, by_slice: bool,
                   case: tuple[list[int], list[bool], int, int, list[tuple[int, int]]]) -> list[tuple[int, list[bool]]]:
    counts, present, min_domains, max_skew, updates = case
    monkeypatch.setattr(filtering, "MIN_BY_SLICE", by_slice)
    c = SimpleNamespace(min_domains=min_domains, max_skew=max_skew)
    s = _PreFilterState((c,), [np.asarray(counts, dtype=np.int64)],  # type: ignore[arg-type]
                        [np.asarray(present, dtype=bool)], [1])
    out = [(s.min_match(0), s.fits(0, len(counts)).tolist())]
    for domain, delta in updates:
        s.update(0, domain, delta)
        out.append((s.min_match(0), s.fits(0, len(s.counts[0])).tolist()))
    return out


@settings(max_examples=400, deadline=None)
@given(_states())
def test_min_by_slice_is_the_gathered_minimum(case: tuple[list[int], list[bool], int, int, list[tuple[int, int]]]
                                              ) -> None:
    with pytest.MonkeyPatch.context() as mp:
        fast = _mins_and_fits(mp, True, case)
        ref = _mins_and_fits(mp, False, case)
    assert fast == ref
    counts, present, min_domains, _, _ = case
    eligible = [n for n, p in zip(counts, present, strict=True) if p]
    want = 0 if len(eligible) < min_domains else (2**31 - 1 if not eligible else min(eligible))
    assert fast[0][0] == want
