"""ksched.sim.gcpacing: the collector's young threshold is raised inside the block (never
lowered), the previous thresholds come back after it (also on an error, also nested), a
simulation runs and loads inside such a block, and ``ksched simulate`` and the
SimulateRealistic bench keep one block from the read to the report."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ksched.sim.gcpacing import BACKOFF, MAX_BACKOFF, SIMULATION_THRESHOLDS, fewer_collections
from ksched.sim.simulation import Simulation


@pytest.fixture(autouse=True)
def default_thresholds() -> Iterator[None]:
    old = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*old)


def test_thresholds_are_raised_in_the_block_and_restored_after() -> None:
    with fewer_collections():
        assert gc.get_threshold() == SIMULATION_THRESHOLDS == (1_000_000, 1000, 1000)
        with fewer_collections((5000, 2000, 5)):  # never lowered by an inner block
            assert gc.get_threshold() == (1_000_000, 2000, 1000)
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


def _record_phases(monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[int, int, int]]:
    """Patch the steps of ``ksched simulate`` outside a simulation's own blocks to record the
    thresholds each ran under."""
    import ksched.api.loader as loader
    import ksched.sim.report as report
    import ksched.sim.simulation as simulation

    seen: dict[str, tuple[int, int, int]] = {}
    for mod, name in ((report, "build_report"), (report, "write_json"), (loader, "build_objects")):
        real = getattr(mod, name)

        def spy(*a: object, _real: object = real, _name: str = name, **kw: object) -> object:
            seen[_name] = gc.get_threshold()
            return _real(*a, **kw)  # type: ignore[operator]

        monkeypatch.setattr(mod, name, spy)
    real_init = simulation.Simulation.__init__

    def init(self: Simulation, *a: object, **kw: object) -> None:
        seen["Simulation"] = gc.get_threshold()
        real_init(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(simulation.Simulation, "__init__", init)
    return seen


def test_simulate_keeps_one_block_from_read_to_report(tmp_path: object, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    from ksched.cli.main import main
    from ksched.sim.realistic import generate

    d = generate(Path(str(tmp_path)) / "m", nodes=3, pods=6, apps=2)
    seen = _record_phases(monkeypatch)
    assert main(["simulate", "--format", "json", "-q", str(d)]) == 0
    assert '"scheduled": 6' in capsys.readouterr().out
    assert seen == dict.fromkeys(("build_objects", "Simulation", "build_report", "write_json"),
                                 SIMULATION_THRESHOLDS)


def test_the_bench_keeps_one_block_from_read_to_report(monkeypatch: pytest.MonkeyPatch) -> None:
    from ksched.sim.realistic import run_simulate_realistic

    seen = _record_phases(monkeypatch)
    out = run_simulate_realistic(nodes=3, pods=6, apps=2)
    assert out["scheduled"] == 6
    assert seen == dict.fromkeys(("build_objects", "Simulation", "build_report", "write_json"),
                                 SIMULATION_THRESHOLDS)
    assert gc.get_threshold() == (700, 10, 10)


def _young_thresholds_after_collections(work: object) -> list[tuple[int, int]]:
    """(objects found, young threshold after) for each young collection while ``work`` runs."""
    seen: list[tuple[int, int]] = []

    def after(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 0:
            seen.append((info["collected"], gc.get_threshold()[0]))

    gc.callbacks.append(after)  # after the block's pacer: sees the threshold it set
    try:
        work()  # type: ignore[operator]
    finally:
        gc.callbacks.remove(after)
    return seen


def test_young_collections_that_find_nothing_back_off_and_garbage_brings_the_pace_back() -> None:
    kept: list[object] = []
    gc.collect()  # (no earlier garbage for the first collection to find)
    with fewer_collections((1000, 1000, 1000)):
        assert gc.get_threshold() == (1000, 1000, 1000)

        def survivors() -> None:
            for _ in range(40_000):
                kept.append([])  # acyclic and alive: nothing for the collector to find

        seen = _young_thresholds_after_collections(survivors)
        assert (BACKOFF, MAX_BACKOFF) == (4, 16)
        # After about 1,000, 5,000, 21,000 and 37,000 allocations: x4, then at most 16 times the block's.
        assert [t for _, t in seen][:3] == [4000, 16000, 16000] and {t for _, t in seen[2:]} == {16000}
        assert all(found == 0 for found, _ in seen)
        with fewer_collections():  # an inner block leaves the pace where it was
            pass
        assert gc.get_threshold() == (seen[-1][1], 1000, 1000)

        def cycles() -> None:
            for _ in range(40_000):
                a: list[object] = []
                a.append(a)  # cyclic garbage: only the collector frees it

        seen = _young_thresholds_after_collections(cycles)
        assert seen and seen[0][0] > 0 and seen[0][1] == 1000  # found: the block's own pace again
    assert gc.get_threshold() == (700, 10, 10)
    assert not any(type(cb).__name__ == "_Pacer" for cb in gc.callbacks)
