"""Trace loading, the paper's protocol, the timeline protocol, ``ksched replay``, and the replay
engine against the ordinary scheduler with the same plugins."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gpu_traces import OPENB, synthetic, write_csv

from ksched.api.gpu import MILLI, GpuRequest
from ksched.cli.main import main
from ksched.scheduler.config import parse_configuration
from ksched.scheduler.plugins.gpushare.frag import typical_pods
from ksched.sim.replay import ReplayOptions, curve_columns, pod_shape, replay, tune_pods
from ksched.sim.simulation import Simulation
from ksched.sim.trace import TraceError, TracePod, load_nodes, load_pods
from ksched.sim.trace_objects import node_object, pod_object, policy_configuration

POLICIES = ("FGD", "BestFit", "DotProd", "GpuPacking", "GpuClustering", "Random", "FGDPack")


def test_generic_and_openb_formats(tmp_path: Path) -> None:
    nodes, pods = synthetic(times=True)
    nf, pf = write_csv(nodes, pods, tmp_path)
    assert load_nodes(nf) == nodes
    got = load_pods(pf)
    assert [p.name for p in got] == [p.name for p in pods]
    assert got[5].gpu == pods[5].gpu and got[5].arrival == pytest.approx(pods[5].arrival)
    jl = tmp_path / "pods.jsonl"
    jl.write_text('{"name": "a", "arrival": 1, "departure": 5, "cpu_milli": 2000, "memory_mib": 10, '
                  '"num_gpu": 1, "gpu_milli": 250, "gpu_models": "T4|P100"}\n\n{"name": "b", "cpu_milli": 1000}\n')
    a, b = load_pods(jl)
    assert a.gpu == GpuRequest(250, 1, frozenset({"T4", "P100"})) and a.departure == 5
    assert b.gpu is None and b.arrival is None


@pytest.mark.parametrize(("text", "row", "column", "what"), [
    ("name,cpu_milli,num_gpu,gpu_milli\na,1000,1,abc\n", 2, "gpu_milli", "not an integer"),
    ("name,cpu_milli,num_gpu,gpu_milli\na,1000,2,500\n", 2, "gpu_milli", "whole GPUs"),
    ("name,cpu_milli,num_gpu,gpu_milli\na,1000,1,1200\n", 2, "gpu_milli", "0..1000"),
    ("name,cpu_milli\na,1\na,2\n", 3, "name", "duplicate"),
    ("name,cpu_milli\na,1,2,3\n", 2, "", "fields"),
    ("name,cpu_milli,creation_time,deletion_time\na,1,10,5\n", 2, "departure", "before arrival"),
    ("name,cpu_milli,num_gpu\na,1,-1\n", 2, "num_gpu", "below 0"),
])
def test_malformed_pod_rows_name_file_row_and_column(tmp_path: Path, text: str, row: int, column: str,
                                                     what: str) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(TraceError) as e:
        load_pods(f)
    assert (e.value.row, e.value.column) == (row, column)
    assert what in str(e.value) and str(f) in str(e.value)


def test_malformed_node_rows(tmp_path: Path) -> None:
    f = tmp_path / "n.csv"
    f.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,lots,1,0,nan\n")
    with pytest.raises(TraceError, match=r"row 2, column cpu_milli: \"lots\" is not an integer"):
        load_nodes(f)
    j = tmp_path / "n.jsonl"
    j.write_text("{not json}\n")
    with pytest.raises(TraceError, match="row 1: invalid JSON"):
        load_nodes(j)
    with pytest.raises(TraceError, match="cannot open"):
        load_nodes(tmp_path / "missing.csv")


def test_tune_inflates_to_the_target_with_the_per_gpu_quirk() -> None:
    pods = [TracePod(f"p{i}", 1000, 1, GpuRequest.make(1000, 2)) for i in range(5)] + \
        [TracePod("c", 1000, 1, None)]
    out = tune_pods(pods, 10 * MILLI, 1.3, np.random.default_rng(1))
    total = sum(p.gpu_total for p in out)
    # The check adds the per-GPU milli (1000) while the total grows by 2000: it may end at 14000.
    assert 12000 <= total <= 14000 and total - 2000 <= 13000
    assert sorted(p.name for p in out[:6]) == sorted(p.name for p in pods)
    assert all("-tuned-" in p.name for p in out[6:])
    # Above the target: random pods are removed until the total is at or below it.
    out = tune_pods(pods, 4 * MILLI, 1.3, np.random.default_rng(1))
    assert sum(p.gpu_total for p in out) <= 5200


def test_curve_columns_use_neighbours_when_a_column_is_empty() -> None:
    arrived = np.asarray([0.2, 0.9, 2.6, 3.1])
    curve = curve_columns(arrived, {"v": np.asarray([1.0, 2.0, 3.0, 4.0])}, 3)
    assert curve == [{"arrived_pct": 0.0, "v": 1.0}, {"arrived_pct": 1.0, "v": 2.0},
                     {"arrived_pct": 2.0, "v": 3.0}, {"arrived_pct": 3.0, "v": 3.5}]


@pytest.mark.parametrize("policy", POLICIES)
def test_replay_engine_places_pods_as_the_scheduler_does(policy: str) -> None:
    """The same placements and GPU indices as the ordinary scheduler (GpuShare + the policy,
    the artifact's configuration) in an embedded cluster, with ksched's tie-break."""
    nodes, pods = synthetic(n_pods=70)
    seed = 7
    r = replay(nodes, pods, ReplayOptions(policy=policy, seed=seed, tune=0, shuffle=False, tie_break="scheduler"),
               record_placements=True)
    typ = typical_pods(pod_shape(p) for p in pods)
    sim = Simulation(parse_configuration(policy_configuration(policy, typ, seed)), seed=seed, record_events=False)
    sim.load([node_object(n) for n in nodes])
    for p in pods:
        sim.store.create(pod_object(p))
    sim.run()
    got = {p.name: (p.node_name, p.annotations.get("alibabacloud.com/gpu-index", ""))
           for p in sim.store.items("Pod") if p.node_name}
    want = {n: (node, "-".join(map(str, g))) for n, node, g in r.placements}
    assert len(want) > 40
    assert got == want


def test_replay_is_deterministic_and_policies_differ() -> None:
    nodes, pods = synthetic(n_nodes=20, n_pods=200, seed=5)
    a = replay(nodes, pods, ReplayOptions("FGD", seed=1), record_placements=True)
    b = replay(nodes, pods, ReplayOptions("FGD", seed=1), record_placements=True)
    assert a.placements == b.placements
    c = replay(nodes, pods, ReplayOptions("FGD", seed=2), record_placements=True)
    assert a.placements != c.placements
    assert 115 <= a.curve[-1]["arrived_pct"] <= 130 and 0 < a.final["gpu_alloc_pct"] <= 100


def test_timeline_protocol_frees_gpus_on_departure() -> None:
    nodes, pods = synthetic(n_nodes=4, n_pods=150, seed=9, times=True)
    r = replay(nodes, pods, ReplayOptions("FGD", protocol="timeline"), record_placements=True)
    once = replay(nodes, [TracePod(p.name, p.cpu_milli, p.memory_mib, p.gpu, p.arrival, None) for p in pods],
                  ReplayOptions("FGD", protocol="timeline"))
    assert r.scheduled > once.scheduled  # departures make room for later pods
    assert r.timeline and r.timeline[-1]["time_s"] > 0
    assert r.final["gpu_alloc_pct"] < once.final["gpu_alloc_pct"] + 1e-9 or r.scheduled > once.scheduled


def test_replay_cli_json_table_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nf, pf = write_csv(*synthetic(n_nodes=10, n_pods=60), tmp_path)
    plot = tmp_path / "curve.png"
    assert main(["replay", "--nodes", str(nf), "--pods", str(pf), "--policy", "FGD", "--seed", "3",
                 "--plot", str(plot), "--placements"]) == 0
    d = json.loads(capsys.readouterr().out)
    for k in ("policy", "seed", "tune", "pods", "scheduled", "final", "curve", "seconds"):
        assert k in d
    assert d["policy"] == "FGD" and d["seed"] == 3 and d["tune"] == 1.3
    assert {"arrived_pct", "gpu_alloc_pct"} <= set(d["curve"][0]) and "gpu_alloc_pct" in d["final"]
    assert len(d["placements"]) == d["scheduled"]
    assert plot.stat().st_size > 1000
    assert main(["replay", "--nodes", str(nf), "--pods", str(pf), "--policy", "BestFit", "--format", "table"]) == 0
    assert "GPU allocation" in capsys.readouterr().out
    bad = tmp_path / "bad.csv"
    bad.write_text("name,cpu_milli,num_gpu,gpu_milli\nx,1,1,2000\n")
    assert main(["replay", "--nodes", str(nf), "--pods", str(bad)]) == 2
    assert "row 2, column gpu_milli" in capsys.readouterr().err
    assert main(["replay", "--nodes", str(nf), "--pods", str(pf), "--policy", "Nope"]) == 2


@pytest.mark.skipif(not OPENB.is_dir(), reason="the openb trace (../shared/data/openb) is not present")
def test_replay_cli_on_an_openb_subset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real openb files, read in place: the first 60 nodes and 400 pods of the default trace."""
    nodes = (OPENB / "openb_node_list_gpu_node.csv").read_text().splitlines()
    pods = (OPENB / "openb_pod_list_default.csv").read_text().splitlines()
    (tmp_path / "n.csv").write_text("\n".join(nodes[:61]) + "\n")
    (tmp_path / "openb_pod_list_default.csv").write_text("\n".join(pods[:401]) + "\n")
    assert main(["replay", "--nodes", str(tmp_path / "n.csv"), "--pods",
                 str(tmp_path / "openb_pod_list_default.csv"), "--policy", "FGD"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["workload"] == "default" and d["pods"] > 400 and 50 < d["final"]["gpu_alloc_pct"] <= 100


def test_bench_gpu_replay_reports_each_policy_over_seeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nf, pf = write_csv(*synthetic(n_nodes=10, n_pods=60), tmp_path)
    nf.rename(tmp_path / "openb_node_list_gpu_node.csv")
    pf.rename(tmp_path / "openb_pod_list_tiny.csv")
    assert main(["bench", "--gpu-replay", "--trace-dir", str(tmp_path), "--trace-workload", "tiny",
                 "--policy", "FGD,BestFit", "--repeat", "2", "--seed", "3"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [d["policy"] for d in lines] == ["FGD", "BestFit"]
    for d in lines:
        assert d["seeds"] == [3, 4] and d["nodes"] == 10 and len(d["seconds"]) == 2
        assert d["seconds_median"] > 0 and d["peak_rss_mib"] > 0
        # The figures are the replay's own: the same seeds replayed directly give the same allocation.
        nodes, pods = load_nodes(tmp_path / "openb_node_list_gpu_node.csv"), load_pods(tmp_path / "openb_pod_list_tiny.csv")
        want = [round(replay(nodes, pods, ReplayOptions(policy=d["policy"], seed=s)).final["gpu_alloc_pct"], 2)
                for s in (3, 4)]
        assert d["gpu_alloc_pct"] == want
    assert main(["bench", "--gpu-replay", "--trace-dir", str(tmp_path), "--policy", "Nope"]) == 2
    assert main(["bench", "--gpu-replay", "--trace-dir", str(tmp_path / "none")]) == 2
    assert "error:" in capsys.readouterr().err
