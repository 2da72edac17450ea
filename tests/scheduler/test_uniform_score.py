"""UniformScore (framework/interface.py): a Score plugin whose normalized score is the same on
every node this cycle is added once to every total instead of scored node by node. The totals
must be exactly those of scoring it (the reference path), cycle by cycle, on random clusters
with and without PreferNoSchedule taints, and the shortcut must really be taken."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from tests.scheduler.test_fast_paths_agree import _cluster

from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import MAX_NODE_SCORE
from ksched.scheduler.framework.runtime import Framework
from ksched.scheduler.plugins.tainttoleration import TaintToleration
from ksched.sim.simulation import Simulation


def _strip_prefer_no_schedule(nodes: list[dict[str, Any]]) -> None:
    for n in nodes:
        spec = n.get("spec") or {}
        taints = [t for t in spec.get("taints") or () if t.get("effect") != "PreferNoSchedule"]
        if "taints" in spec:
            spec["taints"] = taints


@pytest.mark.parametrize("seed", range(6))
def test_uniform_scores_added_once_give_the_scored_totals(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(4000 + seed)
    nodes, pods = _cluster(rng)
    if seed % 2 == 0:
        _strip_prefer_no_schedule(nodes)
    original_score = Framework.run_score
    original_uniform = TaintToleration.uniform_score
    seen = {"cycles": 0, "uniform": 0, "scored": 0}

    def counted_uniform(self: TaintToleration, state: CycleState, pod: Any) -> int | None:
        v = original_uniform(self, state, pod)
        seen["uniform" if v is not None else "scored"] += 1
        return v

    def both(self: Framework, state: CycleState, pod: Any, snapshot: Any, nodes: Any, record: Any = None,
             keep: Any = None) -> Any:
        got, st = original_score(self, state, pod, snapshot, nodes, record, keep)
        with monkeypatch.context() as m:
            m.setattr(TaintToleration, "uniform_score", lambda self, state, pod: None)
            want, want_st = original_score(self, state, pod, snapshot, nodes, record, keep)
        assert st == want_st
        assert got.tolist() == want.tolist()
        seen["cycles"] += 1
        return got, st

    monkeypatch.setattr(TaintToleration, "uniform_score", counted_uniform)
    monkeypatch.setattr(Framework, "run_score", both)
    # Without opportunistic batching: a cycle that keeps its scores per node for the next pod
    # scores the plugin node by node anyway.
    sim = Simulation(seed=seed, kubelet=False, record_events=False, batching=False)
    assert not sim.load([*nodes, *pods])
    sim.run()
    assert seen["cycles"] > 0
    if seed % 2 == 0:
        assert seen["uniform"] > 0 and seen["scored"] == 0
    else:
        assert seen["scored"] > 0


def test_uniform_score_is_the_maximum_only_without_intolerable_prefer_no_schedule_taints() -> None:
    from ksched.testing import make_node, make_pod

    plain = [make_node(f"n{i}").raw for i in range(3)]
    tainted = make_node("t", taints=[{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]).raw
    tolerating = make_pod("tol", tolerations=[{"key": "spot", "operator": "Exists"}]).raw
    for nodes, pod, want in ((plain, make_pod("p").raw, MAX_NODE_SCORE),
                             ([*plain, tainted], make_pod("p").raw, None),
                             ([*plain, tainted], tolerating, MAX_NODE_SCORE)):
        sim = Simulation(seed=0, kubelet=False, record_events=False)
        assert not sim.load(nodes)
        sim.run()
        sched = sim.scheduler
        fw = next(iter(sched.profiles.values()))
        sched.cache.update_snapshot(sched.snapshot)
        plugin = fw.plugins["TaintToleration"]
        state = CycleState()
        from ksched.api.pod import Pod

        p = Pod(pod)
        assert plugin.pre_score(state, p, sched.snapshot.all_nodes()) is None
        assert plugin.uniform_score(state, p) == want
        # The reference: the normalized per-node scores.
        scores = np.asarray(plugin.score_nodes(state, p, sched.snapshot, sched.snapshot.order), dtype=np.int64)
        assert plugin.normalize_score(state, p, sched.snapshot.all_nodes(), scores) is None
        if want is not None:
            assert scores.tolist() == [want] * len(scores)
        else:
            assert len(set(scores.tolist())) > 1
