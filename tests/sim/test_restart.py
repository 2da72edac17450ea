"""The restart benchmark builds the cache from a full list and makes the first decision."""

from __future__ import annotations

import json

import pytest

from ksched.cli.main import EXIT_INVALID_INPUT, main
from ksched.sim.restart import run_restart


def test_restart_on_a_small_cluster() -> None:
    out = run_restart(nodes=50, pods=400)
    assert out["cache_pods"] == 401  # every running pod, plus the pending one once bound
    assert out["first_pod_bound_to"] is not None
    assert out["cache_consistent"]
    assert 0 < out["cache_ready_seconds"] <= out["first_decision_seconds"]


def test_ksched_bench_restart_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--restart", "--nodes", "20", "--pods", "100"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["benchmark"] == "Restart" and out["nodes"] == 20 and out["bound_pods"] == 100
    assert out["cache_pods"] == 101 and out["first_pod_bound_to"] and out["cache_consistent"]
    assert main(["bench", "--restart", "SchedulingBasic"]) == EXIT_INVALID_INPUT
    assert "alone" in capsys.readouterr().err
