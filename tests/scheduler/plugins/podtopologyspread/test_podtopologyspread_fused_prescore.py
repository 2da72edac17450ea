"""PodTopologySpread's PreScore with a few domains' counts, terms and rounded terms worked out in
one Python pass (``scoring.FUSED_PRESCORE``, ``_fused_terms``) against the reference (``np.where``
for the counts, then ``_terms`` and ``_round_half_away``): bit for bit on random sums, and as the
framework runs PreScore, Score and NormalizeScore on random clusters changed step by step, with
Score taking the candidates' domain ids PreScore gathered (``scoring.CANDIDATE_DOMAINS``) or
gathering them again."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.scheduler.plugins.podtopologyspread.test_podtopologyspread_domain_normalize import (
    random_cycles_agree,
    score_cycle,
)

from ksched.scheduler.plugins.podtopologyspread import scoring
from ksched.testing import PluginRunner

_weights = st.one_of(st.integers(min_value=0, max_value=5000).map(scoring.topology_normalizing_weight),
                     st.floats(min_value=0.0, max_value=1e6, allow_nan=False))


@given(st.lists(st.tuples(st.integers(min_value=0, max_value=10**6), st.booleans()), min_size=1, max_size=32),
       _weights, st.integers(min_value=1, max_value=50), st.booleans())
def test_fused_terms_agree_with_the_reference(pairs: list[tuple[int, bool]], weight: float, max_skew: int,
                                              rounded: bool) -> None:
    sums = np.array([p[0] for p in pairs], dtype=np.int64)
    seeded = np.array([p[1] for p in pairs], dtype=bool)
    skew = float(max_skew - 1)
    cnt, terms, rnd = scoring._fused_terms(sums.tolist(), seeded.tolist(), weight, skew, rounded)
    ref_cnt = np.where(seeded, sums, -1)
    ref_terms = scoring._terms(ref_cnt, weight, skew)
    assert cnt.dtype == ref_cnt.dtype and cnt.tolist() == ref_cnt.tolist()
    assert terms.dtype == ref_terms.dtype and terms.tobytes() == ref_terms.tobytes()  # bit for bit
    if rounded:
        ref_rnd = scoring._round_half_away(ref_terms)
        assert rnd is not None and rnd.dtype == ref_rnd.dtype and rnd.tolist() == ref_rnd.tolist()
    else:
        assert rnd is None


def test_fused_terms_rounds_half_away() -> None:
    w = 0.25
    _, terms, rnd = scoring._fused_terms([9, 2, 1, 6], [True, True, False, True], w, 0.0, True)
    assert terms.tolist() == [0.0, 0.5, 0.0, 1.5]
    assert rnd is not None and rnd.tolist() == [0, 1, 0, 2]
    assert math.floor(0.5) == 0  # (0.5 rounds up, as Go's math.Round)


def _cycle(r: PluginRunner, pod: Any, rows: np.ndarray, on: bool) -> Any:
    saved = scoring.FUSED_PRESCORE, scoring.CANDIDATE_DOMAINS
    scoring.FUSED_PRESCORE = scoring.CANDIDATE_DOMAINS = on
    try:
        got = score_cycle(r, pod, rows)
        if got[0] == "status":
            return got
        s, raw_list, per, raw, per_arr = got
        return (per_arr, [None if c is None else (c.dtype.str, c.tolist()) for c in s.counts],
                [None if t is None else (t.dtype.str, t.tobytes()) for t in s.terms],
                None if s.rounded is None else (s.rounded.dtype.str, s.rounded.tolist()),
                s.weights, sorted(s.ignored_names), s.any_ignored, raw_list, per, raw)
    finally:
        scoring.FUSED_PRESCORE, scoring.CANDIDATE_DOMAINS = saved


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_fused_prescore_agrees_with_the_reference(data: Any) -> None:
    random_cycles_agree(data, _cycle)
