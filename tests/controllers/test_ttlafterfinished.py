"""The TTL-after-finished controller: a finished Job with ttlSecondsAfterFinished is deleted
(Foreground: its pods first) that long after its Complete or Failed condition; a TTL changed
before it runs out counts from the same finish time; Jobs without a TTL stay."""

from __future__ import annotations

from typing import Any

from api_objects import mknode
from ksched.api.batch import Job
from ksched.clock import DEFAULT_EPOCH
from ksched.controllers.ttlafterfinished import time_left
from ksched.sim.simulation import Simulation

T0 = DEFAULT_EPOCH


def mkjob(name: str, ttl: int | None, code: int = 0) -> dict[str, Any]:
    ann = {"ksched.io/run-seconds": "10"}
    if code:
        ann["ksched.io/exit-code"] = str(code)
    spec: dict[str, Any] = {"backoffLimit": 0, "template": {"metadata": {"annotations": ann}, "spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def world(*jobs: dict[str, Any]) -> Simulation:
    sim = Simulation()
    assert sim.load([mknode("n1"), *jobs]) == []
    return sim


def until(sim: Simulation, t: float) -> None:
    sim.run(max_seconds=t - (sim.store.now() - T0))
    sim.clock.advance_to(T0 + t)
    sim.run(max_seconds=0)


def test_a_finished_job_goes_its_ttl_after_finishing() -> None:
    sim = world(mkjob("done", 60), mkjob("failed", 30, code=1), mkjob("kept", None))
    # All finish at 11 s (the sync a second after the pods exit).
    until(sim, 40.9)
    assert sim.store.try_get("Job", "default", "failed") is not None
    until(sim, 41)
    assert sim.store.try_get("Job", "default", "failed") is None
    until(sim, 70.9)
    assert sim.store.get("Job", "default", "done") is not None
    until(sim, 71)
    assert sim.store.try_get("Job", "default", "done") is None
    # Foreground: its pods went first; the Job without a TTL and its pod stay.
    assert [p.name.rsplit("-", 1)[0] for p in sim.store.items("Pod")] == ["kept"]
    until(sim, 10_000)
    assert sim.store.get("Job", "default", "kept") is not None


def test_a_ttl_of_zero_deletes_at_once() -> None:
    sim = world(mkjob("now", 0))
    until(sim, 11)
    assert sim.store.try_get("Job", "default", "now") is None


def test_a_changed_ttl_counts_from_the_finish() -> None:
    sim = world(mkjob("j", 60))
    until(sim, 20)
    raw = sim.store.get("Job", "default", "j").deepcopy_raw()
    raw["spec"]["ttlSecondsAfterFinished"] = 100
    sim.store.update(raw)
    until(sim, 110.9)
    assert sim.store.get("Job", "default", "j") is not None
    until(sim, 111)
    assert sim.store.try_get("Job", "default", "j") is None


def test_time_left() -> None:
    job = Job({"metadata": {"name": "j"}, "spec": {"ttlSecondsAfterFinished": 30}, "status": {"conditions": [
        {"type": "Complete", "status": "True", "lastTransitionTime": "2025-01-01T00:01:00Z"}]}})
    assert time_left(job, T0 + 70) == (20, T0 + 90)
