"""The restart benchmark builds the cache from a full list and makes the first decision."""

from __future__ import annotations

from ksched.sim.restart import run_restart


def test_restart_on_a_small_cluster() -> None:
    out = run_restart(nodes=50, pods=400)
    assert out["cache_pods"] == 401  # every running pod, plus the pending one once bound
    assert out["first_pod_bound_to"] is not None
    assert out["cache_consistent"]
    assert 0 < out["cache_ready_seconds"] <= out["first_decision_seconds"]
