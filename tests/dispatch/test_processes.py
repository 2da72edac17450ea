"""Separate processes: ``ksched serve --schedulers 2`` (dispatcher and instances as child
processes over HTTP), an instance killed with SIGKILL, a clean stop; ``ksched bench
--schedulers``; and the command-line checks of the new options."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dispatch_harness import node, pod

from ksched.api.pod import Pod
from ksched.cli.main import EXIT_INVALID_INPUT, main
from ksched.client.rest import RestClient
from ksched.dispatch.instance import INSTANCE_ANNOTATION, instance_from_lease

REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def wait_for(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], RestClient, dict[str, int]]]:
    kc = tmp_path / "kc"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ksched.cli.main", "serve", "--listen", "127.0.0.1:0", "--schedulers", "2",
         "--no-kubelet", "--instance-lease-duration", "2", "--kubeconfig-out", str(kc)],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    pids: dict[str, int] = {}
    try:
        assert proc.stdout is not None
        for _ in range(2):
            line = proc.stdout.readline()
            if line.startswith("started "):
                for part in line[len("started "):].strip().split(", "):
                    name, _, rest = part.partition(" (pid ")
                    pids[name] = int(rest.rstrip(")"))
        assert set(pids) == {"sched-0", "sched-1", "dispatcher"}, pids
        yield proc, RestClient(kubeconfig=str(kc)), pids
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pid in pids.values():  # never leave a child behind, whatever happened
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _pods(client: RestClient) -> list[Pod]:
    items, _ = client.list("Pod", "default")
    return [p for p in items if isinstance(p, Pod)]


def test_serve_with_two_scheduler_processes_survives_one_being_killed(
        served: tuple[subprocess.Popen[str], RestClient, dict[str, int]]) -> None:
    proc, client, pids = served

    def live_instances() -> set[str]:
        items, _ = client.list("Lease", "kube-system")
        return {i.name for i in map(instance_from_lease, items) if i is not None and not i.released}  # type: ignore[arg-type]

    wait_for(lambda: live_instances() == {"sched-0", "sched-1"}, 30, "both instances to register")
    for i in range(3):
        client.create(node(f"n{i}", cpu="4"))
    for i in range(12):
        client.create(pod(f"a{i}", cpu="500m"))
    wait_for(lambda: all(p.node_name for p in _pods(client)), 30, "the first pods to be bound")
    first = Counter(p.annotations.get(INSTANCE_ANNOTATION) for p in _pods(client))
    # Least loaded = fewest dispatched and not yet bound: both get work (not necessarily 6 and 6,
    # as one may bind faster than the other).
    assert set(first) == {"sched-0", "sched-1"} and sum(first.values()) == 12
    # sched-0 dies without a word; pods created now may first be given to it, then, once its
    # 2 s lease runs out, to sched-1.
    os.kill(pids["sched-0"], signal.SIGKILL)
    for i in range(8):
        client.create(pod(f"b{i}", cpu="500m"))
    wait_for(lambda: all(p.node_name for p in _pods(client)), 30, "the pods of the dead instance to be bound")
    pods = _pods(client)
    assert Counter(p.annotations[INSTANCE_ANNOTATION] for p in pods if p.name.startswith("b")) == {"sched-1": 8}
    per_node = Counter(p.node_name for p in pods)
    assert sum(per_node.values()) == 20 and max(per_node.values()) <= 8  # 4 CPUs of 500m pods
    # A clean stop: serve stops the dispatcher and the remaining instance, which releases its lease.
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    for name in ("sched-1", "dispatcher"):
        with pytest.raises(ProcessLookupError):
            os.kill(pids[name], 0)


def test_bench_over_http_with_two_schedulers(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ksched.cli.main", "bench", "SchedulingBasic", "--schedulers", "2", "--nodes", "20",
         "--init-pods", "10", "--pods", "60"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert "error" not in r, r
    assert r["transport"] == "http" and r["schedulers"] == 2
    assert r["measured_scheduled"] == 60 and r["pods_per_second"] > 0
    assert r["overcommitted_nodes"] == 0
    assert r["conflicts"] >= 0 and r["retries"] >= 0 and r["binding_requests"] == 60 + r["conflicts"]
    assert set(r["per_instance"]) == {"sched-0", "sched-1"}
    assert sum(v["scheduled"] for v in r["per_instance"].values()) == 60
    assert all(v["scheduled"] > 0 for v in r["per_instance"].values())
    assert r["exit_codes"] == {"sched-0": 0, "sched-1": 0, "dispatcher": 0}


def test_bench_remote_runs_one_plain_scheduler_over_http(tmp_path: Path) -> None:
    """``ksched bench --remote``: the API server in the bench process, one ``ksched run`` (no
    dispatcher) in another; every measured pod bound through pods/binding, none over-committed."""
    out = subprocess.run(
        [sys.executable, "-m", "ksched.cli.main", "bench", "SchedulingBasic", "--remote", "--nodes", "20",
         "--init-pods", "10", "--pods", "60"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert "error" not in r, r
    assert r["transport"] == "http" and r["schedulers"] == 1 and r["dispatcher"] is False
    assert r["measured_scheduled"] == 60 and r["pods_per_second"] > 0
    assert r["binding_requests"] == 60 and r["conflicts"] == 0 and r["overcommitted_nodes"] == 0
    assert r["exit_codes"] == {"scheduler": 0} and r["cpu_seconds"]["scheduler"] > 0
    assert r["peak_rss_mib"]["scheduler"] > 0 and r["peak_rss_mib"]["apiserver"] > 0


@pytest.mark.parametrize("argv, message", [
    (["run", "--instance", "a"], "--instance NAME and --dispatch go together"),
    (["run", "--dispatch"], "--instance NAME and --dispatch go together"),
    (["run", "--dispatch", "--instance", "Bad_Name"], "must consist of lower case"),
    (["run", "--dispatch", "--instance", "a", "--partition-label", "zone"], "go together"),
    (["run", "--dispatch", "--instance", "a", "--instance-label", "novalue"], "expected KEY=VALUE"),
    (["run", "--dispatch", "--instance", "a", "--leader-elect"], "does not apply"),
    (["serve", "--schedulers", "2", "--partition-label", "zone", "--partitions", "a"], "one partition per instance"),
    (["serve", "--partitions", "a,b"], "--partitions needs --partition-label"),
    (["serve", "--partition-label", "zone"], "--partition-label needs --schedulers"),
    (["bench", "--schedulers", "-1"], "at least 1"),
    (["bench", "--schedulers", "2", "--remote"], "choose one"),
])
def test_command_line_checks(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == EXIT_INVALID_INPUT
    assert message in capsys.readouterr().err


def test_dispatch_refuses_a_bad_policy_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("rules: [{pods: {}}]\n")
    assert main(["dispatch", "--policy", str(f)]) == EXIT_INVALID_INPUT
    assert "'instances' is required" in capsys.readouterr().err


def test_ksched_webhook_serves_admission_reviews_over_https(tmp_path: Path) -> None:
    import ssl
    import urllib.request

    from ksched.apiserver.http import ApiServer
    from ksched.apiserver.kubeconfig import write_kubeconfig
    from ksched.apiserver.store import Store

    store = Store()
    store.create(node("n1", cpu="1"))
    store.create(pod("a", cpu="1"))
    store.create(pod("b", cpu="1"))
    server = ApiServer(store, "127.0.0.1", 0)
    server.start()
    kc = write_kubeconfig(tmp_path / "kc", server.url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ksched.cli.main", "webhook", "--kubeconfig", str(kc), "--listen", "127.0.0.1:0",
         "--cert-dir", str(tmp_path / "pki")], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("ksched binding webhook on https://127.0.0.1:"), line
        url = line.split()[4]
        ctx = ssl.create_default_context(cafile=str(tmp_path / "pki" / "tls.crt"))

        def review(name: str, uid: str) -> dict[str, object]:
            body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Binding"},
                "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "binding",
                "name": name, "namespace": "default", "operation": "CREATE",
                "object": {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                           "target": {"kind": "Node", "name": "n1"}}}}
            req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                return json.loads(r.read())["response"]  # type: ignore[no-any-return]

        assert review("a", "u1") == {"uid": "u1", "allowed": True}
        denied = review("b", "u2")
        assert denied["allowed"] is False and denied["status"]["code"] == 409  # type: ignore[index]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            server.stop()
