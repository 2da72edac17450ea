"""``batch.FAST_BOOKKEEPING``: the opportunistic batch's bookkeeping of a cycle without a state
to hint from, and of a decision without a hint that leaves no state, counted inline. With the
flag on and off, random batching workloads (test_batching_agrees') under the default profile
(every pod unsignable) and with PodTopologySpread's system defaults cleared (many pods placed
on hints) give the same placements and the same batching metrics: attempts and flushes by
label, and (with a stepping clock in place of ``time.perf_counter``) the same histogram buckets
and sums."""

from __future__ import annotations

import random
import time
import types
from typing import Any

import pytest
from tests.scheduler.test_batching_agrees import _cluster, _config, _workload

from ksched.scheduler.config import parse_configuration
from ksched.scheduler.framework import batch
from ksched.sim.simulation import Simulation
from ksched.testing import make_node, make_pod


def _stepping_clock() -> types.SimpleNamespace:
    """``time`` for batch.py whose perf_counter moves on by varying steps (several buckets)."""
    now = [0.0]
    steps = [3e-6, 2.5e-5, 1.1e-4, 7e-6, 4e-4, 5e-5, 0.03]
    i = [0]

    def perf_counter() -> float:
        now[0] += steps[i[0] % len(steps)]
        i[0] += 1
        return now[0]

    return types.SimpleNamespace(perf_counter=perf_counter, monotonic=time.monotonic)


def _run(config: dict[str, Any] | None, seed: int, nodes: list[dict[str, Any]],
         waves: list[list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(batch, "time", _stepping_clock())
    sim = Simulation(parse_configuration(config) if config is not None else None, seed=seed, kubelet=False,
                     record_events=False, disable_admission_plugins=("Priority",))
    assert not sim.load(nodes)
    for wave in waves:
        for p in wave:
            sim.store.create(p)
        sim.run()
    stats = sim.scheduler.metrics.batch  # type: ignore[attr-defined]
    out: dict[str, Any] = {"attempts": dict(stats.attempts), "flushed": dict(stats.flushed),
                           "hints": {k: list(v) for k, v in stats.hint_seconds.items()},
                           "stores": {k: list(v) for k, v in stats.store_seconds.items()},
                           "batched": sum(fw.batch.batched_pods for fw in sim.scheduler.profiles.values()),
                           "start": sim.scheduler.algorithm.next_start_node_index}
    for p in sim.store.items("Pod"):
        cond = p.condition("PodScheduled") or {}  # type: ignore[attr-defined]
        out[p.name] = (p.node_name or None, str(cond.get("message") or ""))  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("defaults", [False, True])
def test_fast_bookkeeping_counts_the_same(seed: int, defaults: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(9400 + seed)
    nodes = _cluster(rng, rng.randint(4, 60))
    second = rng.random() < 0.3 and not defaults
    waves = _workload(rng, second)
    config = None if defaults else _config(second)
    monkeypatch.setattr(batch, "FAST_BOOKKEEPING", True)
    on = _run(config, seed, nodes, waves, monkeypatch)
    monkeypatch.setattr(batch, "FAST_BOOKKEEPING", False)
    off = _run(config, seed, nodes, waves, monkeypatch)
    assert on == off
    assert on["attempts"]  # there was bookkeeping to compare


@pytest.mark.parametrize("fast", [True, False])
def test_unbatchable_pods_flush_reasons(fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default profile's one-per-node replicas on a small cluster (every node evaluated):
    each decision flushes as not batchable, each cycle is a no-hint attempt."""
    monkeypatch.setattr(batch, "FAST_BOOKKEEPING", fast)
    nodes = [make_node(f"n{i}").raw for i in range(12)]
    pods = [make_pod(f"p{i}", uid="", requests={"cpu": "100m"}, host_ports=[8080]).raw for i in range(10)]
    out = _run(None, 1, nodes, [pods], monkeypatch)
    assert out["flushed"] == {("default-scheduler", "pod_not_batchable"): 10}
    assert out["attempts"] == {("default-scheduler", "no_hint"): 10}
    assert sum(out["hints"][("no_hint", "default-scheduler")][:-1]) == 10
    assert sum(out["stores"][("default-scheduler",)][:-1]) == 10


def test_not_all_nodes_evaluated_flushes_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 100 nodes a cycle stops its walk early: ksched's not_all_nodes_evaluated reason,
    counted before (and without) signing, with the flag on and off."""
    nodes = [make_node(f"n{i}").raw for i in range(130)]
    pods = [make_pod(f"p{i}", uid="", requests={"cpu": "100m"}).raw for i in range(6)]
    monkeypatch.setattr(batch, "FAST_BOOKKEEPING", True)
    on = _run(None, 2, nodes, [pods], monkeypatch)
    monkeypatch.setattr(batch, "FAST_BOOKKEEPING", False)
    off = _run(None, 2, nodes, [pods], monkeypatch)
    assert on == off
    assert on["flushed"] == {("default-scheduler", "not_all_nodes_evaluated"): 6}
