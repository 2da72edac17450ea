"""``ksched bench`` runs every workload (tiny sizes here; the real figures come from
`ksched bench`, see docs/benchmarks.md) and reports what it promises."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from ksched.cli.main import main
from ksched.sim.bench import WORKLOADS, run_workload


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_workload_runs_on_a_tiny_cluster(name: str) -> None:
    w = WORKLOADS[name]()
    # Preemption workloads fill every node with 4 low-priority pods first; a PreemptionBasic
    # node then holds one high-priority pod.
    nodes, init, measured = {"PreemptionBasic": (10, 40, 10), "PreemptionAsync": (10, 40, 20)}.get(name, (40, 20, 20))
    # A steady-state workload: one batch of the measured pods (not 10 s of batches).
    out = run_workload(w, "small", nodes=nodes, measured=measured, init=init, timeout=60,
                       batches=1 if w.steady is not None else None)
    assert out["workload"] == name
    assert out["measured_scheduled"] == measured, out
    assert out["pods_per_second"] and out["pods_per_second"] > 0
    assert out["cache_consistent"]
    assert out["p99_attempt_ms"] >= out["p50_attempt_ms"] > 0
    assert out["peak_rss_mib"] > 0
    assert out["measured_cpu_seconds"] > 0
    assert out["pods_per_cpu_second"] == pytest.approx(measured / out["measured_cpu_seconds"], rel=0.02)


def test_preemption_basic_preempts() -> None:
    """Each measured high-priority pod (3 CPU) needs 3 of a node's 4 low-priority pods gone."""
    w = WORKLOADS["PreemptionBasic"]()
    out = run_workload(w, "small", nodes=5, measured=5, init=20, timeout=60)
    assert out["init_scheduled"] == 20
    assert out["measured_scheduled"] == 5


def test_cli_lists_and_prints_json() -> None:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["bench", "--list"]) == 0
    listed = buf.getvalue()
    for name in WORKLOADS:
        assert name in listed
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["bench", "SchedulingBasic", "--nodes", "20", "--pods", "30", "--init-pods", "10"]) == 0
    d = json.loads(buf.getvalue().strip().splitlines()[-1])
    assert d["workload"] == "SchedulingBasic" and d["nodes"] == 20 and d["measured_scheduled"] == 30
    assert set(d) >= {"pods_per_second", "p50_attempt_ms", "p99_attempt_ms", "peak_rss_mib", "config"}
    # Targets are for upstream's full counts: a resized run says neither met nor missed.
    assert d["target"] == 5000 and d["target_met"] is None


@pytest.mark.parametrize("name, target", [
    ("SchedulingBasic", 5000), ("SchedulingPodAntiAffinity", 600), ("SchedulingPodAffinity", 350),
    ("SchedulingPreferredPodAffinity", 900), ("SchedulingNodeAffinity", 2200), ("TopologySpreading", 4600),
    ("SchedulingCSIPVs", 1000), ("MixedSchedulingBasePod", 1400), ("PreemptionAsync", 5700),
    ("Unschedulable", 5900), ("PreemptionBasic", None),
])
def test_targets(name: str, target: float | None) -> None:
    """10x upstream's threshold, at least 1000 pods/s where that threshold is above 100."""
    assert WORKLOADS[name]().target == target


def test_unknown_workload_is_an_error() -> None:
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["bench", "NoSuchWorkload"]) == 2


def test_breakdown_times_the_phases_and_restores_the_methods() -> None:
    from ksched.scheduler.schedule_one import ScheduleOne

    before = ScheduleOne.__dict__["schedule_one"]
    out = run_workload(WORKLOADS["SchedulingBasic"](), "small", nodes=30, measured=40, init=10, phases=True)
    assert ScheduleOne.__dict__["schedule_one"] is before
    b = out["breakdown_us_per_pod"]
    assert set(b) >= {"schedule_one", "schedule_pod", "find_feasible", "score", "bindings", "bind", "event",
                      "informers"}
    assert all(v > 0 for v in b.values())
    # Nested phases take no longer than the phase around them.
    assert b["schedule_pod"] <= b["schedule_one"] and b["bind"] <= b["bindings"]
    assert "breakdown_us_per_pod" not in run_workload(WORKLOADS["SchedulingBasic"](), "small", nodes=30, measured=10,
                                                      init=0)


def test_median_run_picks_the_middle_figure_and_keeps_them_all() -> None:
    from ksched.sim.bench import median_run

    runs = [{"workload": "W", "pods_per_second": v, "seconds": s} for v, s in ((300.0, 1), (100.0, 3), (200.0, 2))]
    out = median_run(runs)
    assert out["pods_per_second"] == 200.0 and out["seconds"] == 2
    assert out["runs_pods_per_second"] == [300.0, 100.0, 200.0]
    assert median_run([*runs, {"workload": "W", "error": "boom"}])["error"] == "boom"


def test_cli_repeat_reports_every_run() -> None:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["bench", "SchedulingBasic", "--nodes", "10", "--pods", "10", "--init-pods", "0",
                     "--repeat", "2"]) == 0
    d = json.loads(buf.getvalue().strip().splitlines()[-1])
    assert len(d["runs_pods_per_second"]) == 2 and d["pods_per_second"] == min(d["runs_pods_per_second"])
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["bench", "SchedulingBasic", "--repeat", "0"]) == 2


def test_batching_places_one_pod_per_node_workload_on_hints_and_can_be_turned_off() -> None:
    """OnePodPerNodeHostPort is batching's case: every pod after the first is placed on the
    previous pod's remaining nodes; with --no-batching none is, and every pod still binds."""
    outs = {}
    for flag in ([], ["--no-batching"]):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["bench", "OnePodPerNodeHostPort", "--nodes", "30", "--pods", "30", *flag]) == 0
        outs[bool(flag)] = json.loads(buf.getvalue().strip().splitlines()[-1])
    assert outs[False]["measured_scheduled"] == outs[True]["measured_scheduled"] == 30
    assert outs[False]["batched_pods"] == 29
    assert outs[True]["batched_pods"] == 0
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["bench", "OnePodPerNodeHostPort", "--remote", "--no-batching"]) == 2
