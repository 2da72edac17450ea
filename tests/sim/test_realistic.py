"""``ksched bench SimulateRealistic``: the generator writes what it promises, and a tiny run goes
through the whole ``ksched simulate`` path (sizes here are tiny; real figures: docs/benchmarks.md)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import yaml

from ksched.cli.main import main
from ksched.sim.realistic import STYLES, generate, run_simulate_realistic


def test_generator_is_seeded_and_writes_every_style(tmp_path: Path) -> None:
    a = generate(tmp_path / "a", nodes=6, pods=23, apps=5, seed=3)
    b = generate(tmp_path / "b", nodes=6, pods=23, apps=5, seed=3)
    files = sorted(p.name for p in a.iterdir())
    assert files == ["app-0000.yaml", "app-0001.yaml", "app-0002.yaml", "app-0003.yaml", "app-0004.yaml",
                     "nodes.yaml"]
    for f in files:
        assert (a / f).read_text() == (b / f).read_text()
    nodes = list(yaml.safe_load_all((a / "nodes.yaml").read_text()))
    assert len(nodes) == 6
    assert {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes} == {"zone-a", "zone-b", "zone-c"}
    pods = [p for f in files if f.startswith("app-") for p in yaml.safe_load_all((a / f).read_text())]
    assert len(pods) == 23
    assert {p["metadata"]["labels"]["style"] for p in pods} == set(STYLES)
    spread = [p for p in pods if p["metadata"]["labels"]["style"] == "hostname-spread"]
    assert spread[0]["spec"]["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "DoNotSchedule"


def test_tiny_run_schedules_every_pod(tmp_path: Path) -> None:
    out = run_simulate_realistic("small", nodes=9, pods=60, apps=10, directory=str(tmp_path))
    assert out["errors"] == []
    assert out["scheduled"] == 60 and out["pending"] == 0
    assert out["total_seconds"] >= out["load_seconds"] > 0
    assert out["schedule_seconds"] > 0 and out["peak_rss_mib"] > 0
    phases = out["read_cpu_seconds"] + out["build_cpu_seconds"] + out["create_cpu_seconds"]
    assert abs(phases - out["load_cpu_seconds"]) < 0.01 and min(
        out["read_cpu_seconds"], out["build_cpu_seconds"], out["create_cpu_seconds"]) >= 0
    assert out["report_bytes"] > 0


def test_cli_prints_json() -> None:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["bench", "SimulateRealistic", "--nodes", "6", "--pods", "20", "--apps", "5"]) == 0
    d = json.loads(buf.getvalue().strip().splitlines()[-1])
    assert d["workload"] == "SimulateRealistic" and d["nodes"] == 6 and d["pods"] == 20
    assert d["scheduled"] == 20
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["bench", "SimulateRealistic", "SchedulingBasic"]) != 0
        assert main(["bench", "SchedulingBasic", "--size", "large"]) != 0
