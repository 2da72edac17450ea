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
from tests.scheduler.plugins.podtopologyspread.test_podtopologyspread_counts import (
    NAMESPACES,
    _Cluster,
    pod_labels,
)
from tests.scheduler.plugins.podtopologyspread.test_podtopologyspread_domain_normalize import (
    _incoming,
    _node_labels,
)

from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.plugins.podtopologyspread import PRE_SCORE_STATE_KEY, scoring
from ksched.testing import PluginRunner, make_node, make_pod

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
        pl = r.fw.plugins["PodTopologySpread"]
        nodes = r.snapshot.node_list(rows)
        state = CycleState()
        st_ = pl.pre_score(state, pod, nodes)  # type: ignore[attr-defined]
        if st_ is not None:
            return ("status", st_.code, st_.reasons)
        s = state.get(PRE_SCORE_STATE_KEY)
        raw = pl.score_nodes(state, pod, r.snapshot, nodes.rows)  # type: ignore[attr-defined]
        per = [pl.score(state, pod, ni)[0] for ni in nodes]  # type: ignore[attr-defined]
        raw_list = np.asarray(raw).tolist()
        pl.normalize_score(state, pod, nodes, raw)  # type: ignore[attr-defined]
        per_arr = np.asarray(per, dtype=np.int64)
        pl.normalize_score(state, pod, nodes, per_arr)  # type: ignore[attr-defined]
        return (per_arr.tolist(), [None if c is None else (c.dtype.str, c.tolist()) for c in s.counts],
                [None if t is None else (t.dtype.str, t.tobytes()) for t in s.terms],
                None if s.rounded is None else (s.rounded.dtype.str, s.rounded.tolist()),
                s.weights, sorted(s.ignored_names), s.any_ignored, raw_list, per, np.asarray(raw).tolist())
    finally:
        scoring.FUSED_PRESCORE, scoring.CANDIDATE_DOMAINS = saved


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_fused_prescore_agrees_with_the_reference(data: Any) -> None:
    keyed = data.draw(st.booleans())
    nodes = [make_node(f"n{i}", labels=data.draw(_node_labels(keyed))) for i in range(data.draw(st.integers(1, 10)))]
    pods = [make_pod(f"e{j}", data.draw(st.sampled_from(NAMESPACES)), labels=data.draw(pod_labels),
                     node_name=data.draw(st.sampled_from([n.name for n in nodes])))
            for j in range(data.draw(st.integers(0, 30)))]
    defaulting = data.draw(st.sampled_from(["System", "List"]))
    args = {"PodTopologySpread": {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}} \
        if defaulting == "List" else None
    r = PluginRunner(["PodTopologySpread"], nodes, pods, args=args)
    cluster = _Cluster(r, nodes, pods)
    for _ in range(data.draw(st.integers(1, 6))):
        for _ in range(data.draw(st.integers(0, 4))):
            cluster.step(data)
        r.refresh()
        order = r.snapshot.order
        if len(order) == 0:
            continue
        for _ in range(data.draw(st.integers(1, 3))):
            pod = data.draw(_incoming())
            picked = data.draw(st.lists(st.integers(0, len(order) - 1), min_size=1, max_size=len(order),
                                        unique=True))
            rows = order[np.asarray(sorted(picked), dtype=np.int64)]
            fast = _cycle(r, pod, rows, True)
            ref = _cycle(r, pod, rows, False)
            assert fast == ref
