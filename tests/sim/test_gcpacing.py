"""ksched.sim.gcpacing: the collector's young threshold is raised inside the block (never
lowered), the previous thresholds come back after it (also on an error, also nested), and a
simulation runs and loads inside such a block."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ksched.sim.gcpacing import SIMULATION_THRESHOLDS, fewer_collections
from ksched.sim.simulation import Simulation


@pytest.fixture(autouse=True)
def default_thresholds() -> Iterator[None]:
    old = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*old)


def test_thresholds_are_raised_in_the_block_and_restored_after() -> None:
    with fewer_collections():
        assert gc.get_threshold() == SIMULATION_THRESHOLDS == (100_000, 50, 1000)
        with fewer_collections((5000, 100, 5)):  # never lowered by an inner block
            assert gc.get_threshold() == (100_000, 100, 1000)
        assert gc.get_threshold() == SIMULATION_THRESHOLDS
    assert gc.get_threshold() == (700, 10, 10)
    with pytest.raises(RuntimeError), fewer_collections((5000, 10, 10)):
        assert gc.get_threshold() == (5000, 10, 10)
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)


def test_a_simulation_loads_and_runs_with_fewer_collections(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int, int]] = []
    sim = Simulation(kubelet=False)
    real_load = sim.store.create

    def create(*a: object, **kw: object) -> object:
        seen.append(gc.get_threshold())
        return real_load(*a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sim.store, "create", create)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "5"}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    assert sim.load([node, pod]) == []
    steps: list[tuple[int, int, int]] = []
    real_step = sim.scheduler.run_until_idle
    monkeypatch.setattr(sim.scheduler, "run_until_idle", lambda: steps.append(gc.get_threshold()) or real_step())
    assert sim.run().scheduled == 1
    assert len(seen) >= 2 and set(seen) == {SIMULATION_THRESHOLDS}
    assert steps and set(steps) == {SIMULATION_THRESHOLDS}
    assert gc.get_threshold() == (700, 10, 10)
