"""The restart benchmark builds the cache from a full list and makes the first decision."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ksched.cli.main import EXIT_INVALID_INPUT, main
from ksched.sim.restart import run_restart


def test_restart_on_a_small_cluster() -> None:
    out = run_restart(nodes=50, pods=400)
    assert out["cache_pods"] == 401  # every running pod, plus the pending one once bound
    assert out["first_pod_bound_to"] is not None
    assert out["cache_consistent"]
    assert 0 < out["cache_ready_seconds"] <= out["first_decision_seconds"]
    assert 0 < out["cache_ready_cpu_seconds"] <= out["first_decision_cpu_seconds"]


def test_ksched_bench_restart_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--restart", "--nodes", "20", "--pods", "100"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["benchmark"] == "Restart" and out["nodes"] == 20 and out["bound_pods"] == 100
    assert out["cache_pods"] == 101 and out["first_pod_bound_to"] and out["cache_consistent"]
    assert main(["bench", "--restart", "SchedulingBasic"]) == EXIT_INVALID_INPUT
    assert "alone" in capsys.readouterr().err


def test_remote_restart_times_a_new_ksched_run_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ksched bench --restart --remote``: the embedded API server serves the cluster, a new
    ``ksched run`` process lists it and binds the pending pod; the marks come in order."""
    import os
    from pathlib import Path

    from ksched.sim.restart import run_restart_remote

    src = str(Path(__file__).resolve().parents[2] / "src")
    monkeypatch.setenv("PYTHONPATH", src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = run_restart_remote(nodes=20, pods=60)
    assert "error" not in out, out
    assert out["transport"] == "http" and out["nodes"] == 20 and out["bound_pods"] == 60
    assert out["first_pod_bound_to"] and out["first_pod_bound_to"].startswith("node-")
    assert 0 < out["first_request_seconds"] <= out["informers_watching_seconds"] <= out["first_decision_seconds"]
    assert out["scheduler_cpu_seconds"] > 0 and out["scheduler_peak_rss_mib"] > 0
    at = out["scheduler_cpu_seconds_at"]
    assert 0 < at["first_request"] <= at["informers_watching"] <= out["scheduler_cpu_seconds"]
    assert out["exit_codes"] == {"scheduler": 0}


def test_ksched_bench_restart_repeat_reports_the_median(capsys: pytest.CaptureFixture[str]) -> None:
    from ksched.cli.bench import median_restart

    runs = [{"first_decision_seconds": s, "n": i} for i, s in enumerate((0.9, 0.5, 0.7, 0.6))]
    m = median_restart(runs)
    assert m["n"] == 2 and m["runs_first_decision_seconds"] == [0.9, 0.5, 0.7, 0.6]
    assert median_restart([*runs, {"error": "x"}]) == {"error": "x"}
    assert main(["bench", "--restart", "--nodes", "0"]) == EXIT_INVALID_INPUT
    assert main(["bench", "--restart", "--repeat", "0"]) == EXIT_INVALID_INPUT


def test_ksched_run_starts_without_the_modules_its_first_decision_does_not_need(tmp_path: Any) -> None:
    """``ksched run --secure-port 0`` against a plain-HTTP API server schedules a pod without
    ever importing aiohttp (only the secure serving needs it), urllib3 (only TLS and proxies
    need it) or rich; the modules are read at exit, after it has bound a pod."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from ksched.apiserver.http import ApiServer
    from ksched.apiserver.kubeconfig import write_kubeconfig
    from ksched.apiserver.store import Store
    from ksched.sim.workloads import node_default, pod_default

    store = Store(auto_create_namespaces=True)
    store.create(node_default(0), owned=True)
    store.create(pod_default("p"), owned=True)
    server = ApiServer(store, "127.0.0.1", 0)
    server.start()
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print('LOADED', sorted(m for m in ('aiohttp', 'urllib3', 'rich') "
             "if m in sys.modules), flush=True))\n"
             "from ksched.cli.main import main\n"
             "sys.exit(main(sys.argv[1:]))\n")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url)
    p = subprocess.Popen([sys.executable, "-c", probe, "run", "--kubeconfig", str(kubeconfig), "--secure-port", "0",
                          "--leader-elect=false"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not store.get("Pod", "default", "p").node_name:  # type: ignore[attr-defined]
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        server.stop()
    assert p.returncode == 0, err
    assert "LOADED []" in out, (out, err)


def test_ksched_run_collects_no_cycles_until_its_handlers_have_synced() -> None:
    """The cyclic collector is off from the informers' start until the scheduler's handlers have
    the initial objects, then on again; with no scheduler yet (built on becoming leader) it is
    not paused at all."""
    import gc
    import threading
    import time

    from ksched.cli.run import _pause_gc, _resume_gc

    synced = threading.Event()
    try:
        _pause_gc()
        assert not gc.isenabled() and gc.get_freeze_count() > 0
        _resume_gc(synced)
        assert not gc.isenabled()
        synced.set()
        deadline = time.monotonic() + 30
        while not gc.isenabled():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        _pause_gc()
        _resume_gc(None)
        assert gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_ksched_runs_numpy_with_one_openblas_thread_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenBLAS's spinning threads cost a second core ~0.12 CPU s at every start and ksched makes
    no BLAS call that would use them: ``main`` asks for one thread before NumPy is imported,
    leaving an explicit setting alone."""
    import os

    from ksched.cli.main import _single_threaded_blas

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    _single_threaded_blas()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    _single_threaded_blas()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"
