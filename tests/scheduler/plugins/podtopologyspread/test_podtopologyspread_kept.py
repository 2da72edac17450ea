"""PodTopologySpread's PreFilter from the per-domain sums' kept view (``filtering.KEPT_COUNTS``,
``_index._PreFilterView``: per-domain counts, eligible domains and the global minimum moved by
the rows that changed, the arrays lent read-only to the states) against the per-cycle arrays
(the flag off), on random clusters changed step by step: pods added, removed, relabelled and
marked terminating, nodes added, relabelled and removed. Both must give the same PreFilter
state (per-domain counts, eligible domains, global minimum, per-domain verdicts) and the same
vectorized Filter verdicts; states of earlier cycles must not see later changes."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.scheduler.plugins.podtopologyspread.test_podtopologyspread_counts import (
    NAMESPACES,
    TAINT,
    _Cluster,
    incoming,
    node_labels,
    pod_labels,
)

from ksched.scheduler.plugins.podtopologyspread import PRE_FILTER_STATE_KEY, filtering
from ksched.scheduler.plugins.podtopologyspread._index import _domain_index, _DomainSums
from ksched.testing import PluginRunner, make_node, make_pod


def _pre_filter(r: PluginRunner, pod: Any, kept: bool) -> tuple[Any, Any]:
    saved = filtering.KEPT_COUNTS
    filtering.KEPT_COUNTS = kept
    try:
        state, _, status = r.pre_filter(pod)
    finally:
        filtering.KEPT_COUNTS = saved
    return state, status and (status.code, status.reasons)


def _read(r: PluginRunner, pod: Any, state: Any) -> list[Any]:
    """The state's per-constraint values (over the domains interned so far) and Filter verdicts."""
    s = state.get(PRE_FILTER_STATE_KEY)
    if s is None:
        return []
    # Filter first: it interns the domain ids of every row (the sizes read below).
    pl = r.fw.plugins["PodTopologySpread"]
    out: list[Any] = [pl.filter_nodes(state, pod, r.snapshot, r.snapshot.order).tolist()]  # type: ignore[attr-defined]
    for i, c in enumerate(s.constraints):
        size = len(_domain_index(c.topology_key))
        pres = np.flatnonzero(s.present[i][:size]).tolist()
        out.append((s.domain_counts(i), pres, s.min_match(i), s.fits(i, size)[:size].tolist()))
    return out


def _frozen(s: Any) -> list[Any]:
    """Copies of what a state holds: per-domain counts, eligible domains and verdicts."""
    return [(c.tolist(), p.tolist(), None if f is None else f.tolist())
            for c, p, f in zip(s.counts, s.present, s._fits, strict=True)]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_kept_view_and_per_cycle_arrays_agree(data: Any) -> None:
    scalar_rows, touch_max = _DomainSums.SCALAR_ROWS, _DomainSums.VIEW_TOUCH_MAX
    # Changed rows one by one or in bulk; a bulk refresh's domains moved in the view or rebuilt.
    _DomainSums.SCALAR_ROWS = data.draw(st.sampled_from([0, scalar_rows]))
    _DomainSums.VIEW_TOUCH_MAX = data.draw(st.sampled_from([0, touch_max]))
    try:
        _check(data)
    finally:
        _DomainSums.SCALAR_ROWS, _DomainSums.VIEW_TOUCH_MAX = scalar_rows, touch_max


def _check(data: Any) -> None:
    nodes = [make_node(f"n{i}", labels=data.draw(node_labels), taints=[TAINT] if data.draw(st.booleans()) else None)
             for i in range(data.draw(st.integers(1, 10)))]
    pods = [make_pod(f"e{j}", data.draw(st.sampled_from(NAMESPACES)), labels=data.draw(pod_labels),
                     node_name=data.draw(st.sampled_from([n.name for n in nodes])))
            for j in range(data.draw(st.integers(0, 30)))]
    r = PluginRunner(["PodTopologySpread"], nodes, pods,
                     args={"PodTopologySpread": {"defaultingType": "List", "defaultConstraints": []}})
    assert r.fw.vectorize
    cluster = _Cluster(r, nodes, pods)
    asked = data.draw(st.lists(incoming(), min_size=1, max_size=3))
    held: list[tuple[Any, list[Any]]] = []
    for _ in range(data.draw(st.integers(1, 8))):
        for _ in range(data.draw(st.integers(0, 5))):
            cluster.step(data)
        r.refresh()
        for pod in [*(p for p in asked if data.draw(st.booleans())), data.draw(incoming())]:
            fast, fast_status = _pre_filter(r, pod, True)
            ref, ref_status = _pre_filter(r, pod, False)
            assert fast_status == ref_status
            # Read after both (the domain ids are interned as rows are first seen).
            assert _read(r, pod, fast) == _read(r, pod, ref)
            s = fast.get(PRE_FILTER_STATE_KEY)
            if s is not None:
                held.append((s, _frozen(s)))
    # The arrays lent to earlier cycles' states were not changed by the later refreshes.
    for s, before in held:
        assert _frozen(s) == before


def test_update_after_kept_pre_filter_copies() -> None:
    # A state built from the view and then updated (PreFilterExtensions) works on its own copy:
    # the next cycle's state sees the cluster's counts, not the update.
    nodes = [make_node(f"n{i}", labels={"zone": f"z{i % 2}"}) for i in range(4)]
    pods = [make_pod(f"e{j}", labels={"app": "a"}, node_name=f"n{j % 4}") for j in range(3)]
    r = PluginRunner(["PodTopologySpread"], nodes, pods)
    pod = make_pod("in", labels={"app": "a"}, topology_spread_constraints=[
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "a"}}}])
    state, _ = _pre_filter(r, pod, True)
    first = _read(r, pod, state)
    s = state.get(PRE_FILTER_STATE_KEY)
    assert s._shared
    assert s.min_match(0) == 0
    s.update(0, int(np.flatnonzero((s.counts[0] == 0) & s.present[0])[0]), 1)
    assert s.min_match(0) == 1
    state2, _ = _pre_filter(r, pod, True)
    assert _read(r, pod, state2) == first
    assert state2.get(PRE_FILTER_STATE_KEY).min_match(0) == 0


def test_kept_minimum_rises_and_falls() -> None:
    # The global minimum moves up when the last domain holding it gains a pod, and down when a
    # pod leaves or an empty node comes; the kept view follows, cycle by cycle.
    nodes = [make_node(f"n{i}") for i in range(3)]
    r = PluginRunner(["PodTopologySpread"], nodes, [])
    pod = make_pod("in", labels={"app": "a"}, topology_spread_constraints=[
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "a"}}}])
    seen = []
    placed = []
    for j in range(7):
        state, _ = _pre_filter(r, pod, True)
        ref, _ = _pre_filter(r, pod, False)
        assert _read(r, pod, state) == _read(r, pod, ref)
        seen.append(state.get(PRE_FILTER_STATE_KEY).min_match(0))
        p = make_pod(f"e{j}", labels={"app": "a"}, node_name=f"n{j % 3}")
        r.cache.add_pod(p)
        placed.append(p)
        r.refresh()
    assert seen == [0, 0, 0, 1, 1, 1, 2]
    r.cache.remove_pod(placed[1])
    r.cache.add_node(make_node("n9"))
    r.refresh()
    state, _ = _pre_filter(r, pod, True)
    ref, _ = _pre_filter(r, pod, False)
    assert _read(r, pod, state) == _read(r, pod, ref)
    assert state.get(PRE_FILTER_STATE_KEY).min_match(0) == 0


def test_kept_view_follows_a_node_moving_domains() -> None:
    # A relabelled node's row moves from one domain to another: both domains' counts and
    # eligibility change in the view (the old domain loses its only node and its pods).
    nodes = [make_node("n0", labels={"zone": "z0"}), make_node("n1", labels={"zone": "z1"}),
             make_node("n2", labels={"zone": "z1"})]
    pods = [make_pod(f"e{j}", labels={"app": "a"}, node_name=f"n{j % 2}") for j in range(4)]
    r = PluginRunner(["PodTopologySpread"], nodes, pods)
    pod = make_pod("in", labels={"app": "a"}, topology_spread_constraints=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "a"}}}])
    for zone in ("z2", "z1", "z0"):
        state, _ = _pre_filter(r, pod, True)
        ref, _ = _pre_filter(r, pod, False)
        assert _read(r, pod, state) == _read(r, pod, ref)
        old = nodes[0]
        new = make_node("n0", labels={"zone": zone})
        r.cache.update_node(old, new)
        nodes[0] = new
        r.refresh()
    state, _ = _pre_filter(r, pod, True)
    ref, _ = _pre_filter(r, pod, False)
    assert _read(r, pod, state) == _read(r, pod, ref)
    assert state.get(PRE_FILTER_STATE_KEY).domain_counts(0) == {"z0": 2, "z1": 2}
