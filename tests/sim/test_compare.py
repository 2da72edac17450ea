"""``ksched compare``: policies and scheduler configurations on the same workload, the files it
writes, and the HTML report loaded in a real headless browser (Debian's chromium; `make test`
installs it when it can, otherwise that test skips)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from gpu_traces import synthetic, write_csv

from ksched.cli.compare import parse_seeds
from ksched.cli.main import main
from ksched.scheduler.plugins.gpushare.frag import typical_pods
from ksched.sim.replay import pod_shape
from ksched.sim.trace_objects import node_object, pod_object, policy_configuration

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def test_parse_seeds() -> None:
    assert parse_seeds("42-44,50") == [42, 43, 44, 50]
    with pytest.raises(ValueError):
        parse_seeds("5-3")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cmp")
    nf, pf = write_csv(*synthetic(n_nodes=14, n_pods=120, seed=4), d)
    out = d / "out"
    assert main(["compare", "--nodes", str(nf), "--pods", str(pf), "--policy", "FGD,BestFit,Random",
                 "--seeds", "1-2", "--jobs", "2", "--out", str(out), "--title", "tiny"]) == 0
    return out


def test_compare_writes_results_summary_and_html(report: Path) -> None:
    results = json.loads((report / "results.json").read_text())
    assert len(results) == 6 and {r["label"] for r in results} == {"FGD", "BestFit", "Random"}
    rows = list(csv.DictReader((report / "summary.csv").open()))
    assert {r["policy"] for r in rows} == {"FGD", "BestFit", "Random"} and all(r["seeds"] == "2" for r in rows)
    html = (report / "report.html").read_text()
    assert 'id="plot-alloc-0"' in html and 'id="plot-frag-0"' in html and "<script" not in html
    assert "unallocated GPUs" in html


def test_compare_scheduler_configurations_on_manifests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, pods = synthetic(n_nodes=6, n_pods=30, seed=2)
    man = tmp_path / "cluster"
    man.mkdir()
    docs = [node_object(n) for n in nodes] + [pod_object(p) for p in pods]
    (man / "all.yaml").write_text(yaml.safe_dump_all(docs))
    typ = typical_pods(pod_shape(p) for p in pods)
    for pol in ("FGD", "GpuPacking"):
        (tmp_path / f"{pol}.yaml").write_text(yaml.safe_dump(policy_configuration(pol, typ)))
    out = tmp_path / "out"
    assert main(["compare", "--manifests", str(man), "--config", f"fgd={tmp_path / 'FGD.yaml'}",
                 "--config", str(tmp_path / "GpuPacking.yaml"), "--jobs", "1", "--out", str(out)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert {s["policy"] for s in d["summary"]} == {"fgd", "GpuPacking"}
    assert all(0 < s["gpu_alloc_mean"] <= 100 and s["cpu_alloc_mean"] > 0 for s in d["summary"])
    assert (out / "report.html").exists()


def test_compare_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--pods", "x.csv", "--out", str(tmp_path)]) == 2
    assert main(["compare", "--nodes", str(tmp_path / "none.csv"), "--pods", "x.csv", "--out", str(tmp_path)]) == 2
    nf, pf = write_csv(*synthetic(n_nodes=3, n_pods=5), tmp_path)
    assert main(["compare", "--nodes", str(nf), "--pods", str(pf), "--policy", "Best", "--out", str(tmp_path)]) == 2
    assert "unknown GPU policy" in capsys.readouterr().err


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs Debian's chromium "
                                              "when run as root or with sudo)")
def test_report_renders_in_headless_chromium(report: Path) -> None:
    """Chromium loads the report from disk and its DOM has the plots (SVG with curves) and the
    summary tables; a screenshot is taken too."""
    with tempfile.TemporaryDirectory() as profile:
        flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}"]
        url = (report / "report.html").resolve().as_uri()
        dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
        shot = report / "shot.png"
        subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,1600", url], capture_output=True,
                       timeout=120)
    assert '<svg id="plot-alloc-0"' in dom and '<svg id="plot-frag-0"' in dom
    assert dom.count("<path") > 10  # the curves and axes were drawn
    assert '<table class="summary">' in dom and "FGD" in dom
    assert shot.exists() and shot.stat().st_size > 10_000
