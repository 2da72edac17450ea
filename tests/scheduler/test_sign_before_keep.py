"""``schedule_one.SIGN_BEFORE_KEEP``: a cycle that could leave an opportunistic-batching state
signs its pod before Score and keeps its scores node by node only when the pod has a signature.
An unsignable pod's state is dropped by ``store_schedule_results`` anyway (pod_not_batchable),
so with the flag on and off every pod lands on the same node with the same message, the same
pods are placed on hints, the batching metrics count the same, and the walk's start index and
random source end the same; and with the default profile (every pod unsignable) no scored nodes
are built with the flag on."""

from __future__ import annotations

import random
from typing import Any

import pytest
from tests.scheduler.test_batching_agrees import _cluster, _config, _workload

from ksched.scheduler import schedule_one
from ksched.scheduler.config import parse_configuration
from ksched.scheduler.framework import batch
from ksched.sim.simulation import Simulation
from ksched.testing import make_node, make_pod


def _batch_metrics(sim: Simulation) -> dict[str, Any]:
    stats = sim.scheduler.metrics.batch  # type: ignore[attr-defined]
    return {"attempts": dict(stats.attempts), "flushed": dict(stats.flushed),
            # (the durations' buckets depend on the wall clock: only how many were observed)
            "hints": {k: sum(v[:-1]) for k, v in stats.hint_seconds.items()},
            "stores": {k: sum(v[:-1]) for k, v in stats.store_seconds.items()}}


def _run(config: dict[str, Any] | None, seed: int, nodes: list[dict[str, Any]],
         waves: list[list[dict[str, Any]]]) -> dict[str, Any]:
    sim = Simulation(parse_configuration(config) if config is not None else None, seed=seed, kubelet=False,
                     record_events=False, disable_admission_plugins=("Priority",))
    assert not sim.load(nodes)
    after = []
    for wave in waves:
        for p in wave:
            sim.store.create(p)
        sim.run()
        after.append((sim.scheduler.algorithm.next_start_node_index, sim.scheduler.rng.getstate()))
    out: dict[str, Any] = {"after waves": after, "metrics": _batch_metrics(sim),
                           "batched": sum(fw.batch.batched_pods for fw in sim.scheduler.profiles.values())}
    for p in sim.store.items("Pod"):
        cond = p.condition("PodScheduled") or {}  # type: ignore[attr-defined]
        out[p.name] = (p.node_name or None, str(cond.get("message") or ""),  # type: ignore[attr-defined]
                       p.nominated_node_name)  # type: ignore[attr-defined]
    return out


def _counting_scored_nodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    made = [0]
    original = batch.ScoredNodes.__init__

    def counted(self: Any, *a: Any, **k: Any) -> None:
        made[0] += 1
        original(self, *a, **k)

    monkeypatch.setattr(batch.ScoredNodes, "__init__", counted)
    return made


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("defaults", [False, True])
def test_signing_first_changes_nothing(seed: int, defaults: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random batching workloads (test_batching_agrees'), with PodTopologySpread's system
    defaults cleared (signable pods, many placed on hints) and with the default profile
    (unsignable pods): the flag on and off give the same run."""
    rng = random.Random(7100 + seed)
    nodes = _cluster(rng, rng.randint(4, 60))
    second = rng.random() < 0.3 and not defaults
    waves = _workload(rng, second)
    config = None if defaults else _config(second)
    made = _counting_scored_nodes(monkeypatch)
    monkeypatch.setattr(schedule_one, "SIGN_BEFORE_KEEP", True)
    on = _run(config, seed, nodes, waves)
    made_on = made[0]
    monkeypatch.setattr(schedule_one, "SIGN_BEFORE_KEEP", False)
    off = _run(config, seed, nodes, waves)
    assert on == off
    if defaults:
        assert on["batched"] == 0
        assert made_on == 0  # nothing kept for unsignable pods
    else:
        # Signable pods keep their scores as before; unsignable ones (some templates here) no more.
        assert made_on <= made[0] - made_on
        if on["batched"]:
            assert made_on > 0


def test_unsignable_pods_keep_no_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    """One-per-node replicas under the default profile: every cycle evaluates every node (the
    condition for keeping scores), yet with the flag on none are kept; off, every cycle keeps
    them and drops them as not batchable."""
    nodes = [make_node(f"n{i}").raw for i in range(12)]
    pods = [make_pod(f"p{i}", uid="", requests={"cpu": "100m"}, host_ports=[8080]).raw for i in range(10)]
    made = _counting_scored_nodes(monkeypatch)
    monkeypatch.setattr(schedule_one, "SIGN_BEFORE_KEEP", True)
    on = _run(None, 1, nodes, [pods])
    assert made[0] == 0
    monkeypatch.setattr(schedule_one, "SIGN_BEFORE_KEEP", False)
    off = _run(None, 1, nodes, [pods])
    assert made[0] == 10
    assert on == off
    assert on["metrics"]["flushed"] == {("default-scheduler", "pod_not_batchable"): 10}
