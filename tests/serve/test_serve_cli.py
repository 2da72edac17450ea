"""The ``ksched serve`` command: the default mode (scheduler and simulated kubelets in the same
process), --load, TLS with a bearer token written into the generated kubeconfig, bad
arguments, and a clean stop on Ctrl-C."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import yaml
from serve_helpers import (
    Http,
    Proc,
    free_port,
    ksched_cmd,
    node,
    pod,
    subprocess_env,
    wait_for,
    wait_http_ready,
)

from ksched.apiserver.tls import make_self_signed
from ksched.client.rest import RestClient

PODS = "/api/v1/namespaces/default/pods"


def test_default_serve_schedules_and_runs_pods(tmp_path: Path) -> None:
    manifests = tmp_path / "cluster.yaml"
    manifests.write_text(yaml.safe_dump_all([node("n1"), node("n2"), pod("preloaded")]))
    port = free_port()
    kc = tmp_path / "kc"
    proc = Proc(ksched_cmd("serve", "--listen", f"127.0.0.1:{port}", "--load", str(manifests),
                           "--kubeconfig-out", str(kc)), tmp_path / "serve.log", subprocess_env(tmp_path), tmp_path)
    try:
        wait_http_ready(port, proc=proc)
        proc.wait_log(f"listening on http://127.0.0.1:{port}; kubeconfig: {kc}")
        cfg = yaml.safe_load(kc.read_text())
        assert cfg["clusters"][0]["cluster"]["server"] == f"http://127.0.0.1:{port}"
        api = Http("127.0.0.1", port)
        assert api.post(PODS, pod("created"))[0] == 201

        def running(name: str) -> bool:
            p = api.get(f"{PODS}/{name}")[2]
            return bool(p["spec"].get("nodeName")) and p["status"].get("phase") == "Running"

        wait_for(lambda: running("preloaded") and running("created"), timeout=20, what="pods to run")
        events = api.get("/api/v1/namespaces/default/events?fieldSelector=reason%3DScheduled")[2]["items"]
        assert {e["involvedObject"]["name"] for e in events} >= {"preloaded", "created"}
        assert proc.interrupt(timeout=15) == 0
        assert "Traceback" not in proc.log()
    finally:
        proc.stop()


def test_serve_with_tls_and_token_on_loopback(tmp_path: Path) -> None:
    crt, key = make_self_signed(tmp_path / "pki", ["127.0.0.1"])
    port = free_port()
    kc = tmp_path / "kc"
    proc = Proc(ksched_cmd("serve", "--listen", f"127.0.0.1:{port}", "--no-scheduler", "--no-kubelet",
                           "--tls-cert", str(crt), "--tls-key", str(key), "--token", "abc123",
                           "--kubeconfig-out", str(kc)), tmp_path / "serve.log", subprocess_env(tmp_path), tmp_path)
    try:
        proc.wait_log("kubeconfig:")
        assert f"listening on https://127.0.0.1:{port}" in proc.log()
        cfg = yaml.safe_load(kc.read_text())
        assert cfg["clusters"][0]["cluster"]["server"] == f"https://127.0.0.1:{port}"
        assert cfg["clusters"][0]["cluster"]["certificate-authority-data"]
        assert cfg["users"][0]["user"] == {"token": "abc123"}
        assert kc.stat().st_mode & 0o077 == 0  # the kubeconfig holds a secret
        # The generated kubeconfig is all a client needs.
        client = RestClient(kubeconfig=str(kc))
        client.create(pod("a"))
        assert [p.name for p in client.list("Pod")[0]] == ["a"]
        ctx = ssl.create_default_context(cafile=str(crt))
        st, _, body = Http("127.0.0.1", port, ssl_context=ctx).get(PODS)
        assert st == 401 and body["reason"] == "Unauthorized"
        assert Http("127.0.0.1", port, ssl_context=ctx).get("/healthz")[0] == 200
    finally:
        proc.stop()


def test_bad_arguments_and_manifests_are_refused(tmp_path: Path) -> None:
    env = subprocess_env(tmp_path)
    cp = subprocess.run(ksched_cmd("serve", "--listen", "127.0.0.1:http"), capture_output=True, text=True, env=env,
                        cwd=tmp_path, timeout=30)
    assert cp.returncode == 2 and "expected HOST:PORT" in cp.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(pod("Not_Valid")))
    cp = subprocess.run(ksched_cmd("serve", "--listen", f"127.0.0.1:{free_port()}", "--load", str(bad),
                                   "--no-scheduler", "--no-kubelet"),
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30)
    assert cp.returncode == 2 and "Not_Valid" in cp.stderr
    # Listening on a port that is taken fails with a message, not a traceback.
    port = free_port()
    first = Proc(ksched_cmd("serve", "--listen", f"127.0.0.1:{port}", "--no-scheduler", "--no-kubelet",
                            "--kubeconfig-out", str(tmp_path / "kc1")), tmp_path / "first.log", env, tmp_path)
    try:
        wait_http_ready(port, proc=first)
        cp = subprocess.run(ksched_cmd("serve", "--listen", f"127.0.0.1:{port}", "--no-scheduler", "--no-kubelet",
                                       "--kubeconfig-out", str(tmp_path / "kc2")),
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30)
        assert cp.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in cp.stderr
        assert "Traceback" not in cp.stderr
    finally:
        first.stop()


def test_serve_loads_a_cluster_dump(tmp_path: Path) -> None:
    """--load takes what simulate takes: an exported pod stays on its node, a kind ksched does not
    know is skipped with a warning, the objects a fresh cluster has are merged."""
    exported = pod("old", nodeName="n1")
    exported["metadata"].update(uid="u-old", resourceVersion="77", creationTimestamp="2024-01-01T00:00:00Z")
    exported["status"] = {"phase": "Running"}
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"env": "prod"},
                                                              "resourceVersion": "1"}}
    manifests = tmp_path / "dump.yaml"
    manifests.write_text(yaml.safe_dump_all([ns, node("n1"), exported, hpa]))
    port = free_port()
    proc = Proc(ksched_cmd("serve", "--listen", f"127.0.0.1:{port}", "--load", str(manifests), "--no-scheduler",
                           "--kubeconfig-out", str(tmp_path / "kc")), tmp_path / "serve.log",
                subprocess_env(tmp_path), tmp_path)
    try:
        wait_http_ready(port, proc=proc)
        api = Http("127.0.0.1", port)
        got = api.get(f"{PODS}/old")[2]
        assert got["spec"]["nodeName"] == "n1" and got["metadata"]["uid"] == "u-old"
        assert got["status"]["phase"] == "Running"
        assert api.get("/api/v1/namespaces/default")[2]["metadata"]["labels"]["env"] == "prod"
        assert "skipping 1 object(s) of kind HorizontalPodAutoscaler (autoscaling/v2)" in proc.log()
    finally:
        proc.stop()
    cp = subprocess.run(ksched_cmd("serve", "--listen", f"127.0.0.1:{free_port()}", "--disable-admission-plugins",
                                   "Nope"), capture_output=True, text=True, env=subprocess_env(tmp_path), cwd=tmp_path,
                        timeout=30)
    assert cp.returncode == 2 and "unknown admission plugin(s): Nope" in cp.stderr
