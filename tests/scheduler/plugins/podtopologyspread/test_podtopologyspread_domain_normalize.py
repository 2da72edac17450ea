"""PodTopologySpread's PreScore without the ignored-candidate masks when every node carries the
keys (``scoring.KEYED_CANDIDATES``, ``_RowCache.all_keyed``) and NormalizeScore worked out per
domain for one domain-scoped constraint (``scoring.DOMAIN_NORMALIZE``), against the reference
(both flags off), on random clusters changed step by step (pods added, removed, relabelled,
marked terminating; nodes added, relabelled, removed), for random candidate subsets: the same
PreScore state (per-domain counts, weights, ignored nodes), raw scores and normalized scores, as
the framework runs them (NormalizeScore on the array Score returned) and per node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.scheduler.plugins.podtopologyspread.test_podtopologyspread_counts import (
    KEYS,
    NAMESPACES,
    SELECTORS,
    _Cluster,
    pod_labels,
)

from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.plugins.podtopologyspread import PRE_SCORE_STATE_KEY, scoring
from ksched.testing import PluginRunner, make_node, make_pod

_ZONES = ["z0", "z1", "z2", "z3"]


@st.composite
def _node_labels(draw: Any, keyed: bool) -> dict[str, str]:
    labels = {}
    for k, vals in (("zone", _ZONES), ("rack", ["r0", "r1", "r2", "r3", "r4"]), ("pool", ["a", "b"])):
        if keyed or draw(st.integers(0, 5)) > 0:
            labels[k] = draw(st.sampled_from(vals))
    return labels


@st.composite
def _soft(draw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"maxSkew": draw(st.integers(1, 3)), "topologyKey": draw(st.sampled_from(KEYS)),
                         "whenUnsatisfiable": draw(st.sampled_from(["ScheduleAnyway", "ScheduleAnyway",
                                                                    "DoNotSchedule"]))}
    sel = draw(st.sampled_from(SELECTORS))
    if sel is not None:
        d["labelSelector"] = sel
    return d


@st.composite
def _incoming(draw: Any) -> Any:
    kw: dict[str, Any] = {}
    if draw(st.integers(0, 4)) > 0:
        kw["topology_spread_constraints"] = draw(st.lists(_soft(), min_size=1, max_size=2))
    return make_pod("incoming", draw(st.sampled_from(NAMESPACES)), labels=draw(pod_labels), **kw)


def _set(on: bool) -> None:
    scoring.KEYED_CANDIDATES = on
    scoring.DOMAIN_NORMALIZE = on


def score_cycle(r: PluginRunner, pod: Any, rows: np.ndarray) -> Any:
    """PreScore, Score and NormalizeScore as the framework runs them (NormalizeScore on the
    array Score returned, the NodeList PreScore had), and per node: ("status", code, reasons)
    when PreScore returns a status, else (PreScore's state, the raw scores as Score returned
    them, the per-node scores, the normalized array, the normalized per-node array). Shared with
    test_podtopologyspread_fused_prescore."""
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
    return s, raw_list, per, np.asarray(raw).tolist(), per_arr.tolist()


def _cycle(r: PluginRunner, pod: Any, rows: np.ndarray, on: bool) -> Any:
    saved = scoring.KEYED_CANDIDATES, scoring.DOMAIN_NORMALIZE
    _set(on)
    try:
        got = score_cycle(r, pod, rows)
        if got[0] == "status":
            return got
        s, raw_list, per, raw, per_arr = got
        return ([s.domain_counts(i) for i in range(len(s.constraints))], s.weights, sorted(s.ignored_names),
                np.flatnonzero(s.ignored_rows).tolist(), s.any_ignored, raw_list, per, raw, per_arr)
    finally:
        scoring.KEYED_CANDIDATES, scoring.DOMAIN_NORMALIZE = saved


def random_cycles_agree(data: Any, cycle: Callable[[PluginRunner, Any, np.ndarray, bool], Any]) -> None:
    """On a random cluster changed step by step (System or List defaulting, nodes with or
    without the keys), ``cycle(runner, pod, rows, on)`` gives the same with the flags on and off
    for random incoming pods and candidate rows. Shared with test_podtopologyspread_fused_prescore."""
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
            fast = cycle(r, pod, rows, True)
            ref = cycle(r, pod, rows, False)
            assert fast == ref


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_keyed_and_domain_normalize_agree_with_the_reference(data: Any) -> None:
    random_cycles_agree(data, _cycle)


def test_domain_normalize_is_taken_and_agrees() -> None:
    # A zone spread on zoned nodes: the per-domain NormalizeScore runs (Score's array, PreScore's
    # candidates) and gives the reference's scores; a copy of the scores takes the reference.
    nodes = [make_node(f"n{i}", labels={"zone": _ZONES[i % 3]}) for i in range(9)]
    pods = [make_pod(f"e{j}", labels={"app": "a"}, node_name=f"n{j % 4}") for j in range(7)]
    r = PluginRunner(["PodTopologySpread"], nodes, pods)
    pod = make_pod("in", labels={"app": "a"}, topology_spread_constraints=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "a"}}}])
    rows = r.snapshot.order[[0, 1, 2, 4, 5]]
    pl = r.fw.plugins["PodTopologySpread"]
    nodes_l = r.snapshot.node_list(rows)
    state = CycleState()
    assert pl.pre_score(state, pod, nodes_l) is None  # type: ignore[attr-defined]
    s = state.get(PRE_SCORE_STATE_KEY)
    assert s.candidates is not None and not s.any_ignored
    raw = pl.score_nodes(state, pod, r.snapshot, nodes_l.rows)  # type: ignore[attr-defined]
    assert s.scored is not None and s.scored[2] is raw
    copy = raw.copy()
    pl.normalize_score(state, pod, nodes_l, raw)  # type: ignore[attr-defined]
    pl.normalize_score(state, pod, nodes_l, copy)  # type: ignore[attr-defined]
    assert raw.tolist() == copy.tolist() == _cycle(r, pod, rows, False)[-2]
    # z0 holds e0, e3, e4 (n0, n3 and n0 again...): the emptiest zone scores 100.
    assert max(raw.tolist()) == 100


def test_all_keyed_follows_the_nodes() -> None:
    nodes = [make_node("n0", labels={"zone": "z0"}), make_node("n1", labels={"zone": "z1"})]
    r = PluginRunner(["PodTopologySpread"], nodes, [])
    rc = r.fw.plugins["PodTopologySpread"]._rows  # type: ignore[attr-defined]
    assert rc.all_keyed(r.snapshot, ("zone",))
    assert not rc.all_keyed(r.snapshot, ("rack", "zone"))
    r.cache.add_node(make_node("n2"))
    r.refresh()
    assert not rc.all_keyed(r.snapshot, ("zone",))
    r.cache.remove_node(r.snapshot.get("n2").node)  # type: ignore[union-attr]
    r.refresh()
    assert rc.all_keyed(r.snapshot, ("zone",))
    r.cache.update_node(nodes[0], make_node("n0", labels={"rack": "r0"}))
    r.refresh()
    assert not rc.all_keyed(r.snapshot, ("zone",))
