"""In-cluster configuration: with no kubeconfig, ``ksched run`` inside a pod talks to the API
server through the pod's service account (KUBERNETES_SERVICE_HOST/PORT, the token and the CA
mounted in the service-account directory), as client-go's InClusterConfig. Here the
"cluster" is ``ksched serve`` with TLS and a bearer token, and the directory is the test's
(the official client's loader paths are pointed at it; nothing is written to /var/run). Last,
deploy/scheduler applied with kubectl and its Deployment's replicas run as its pods would."""

from __future__ import annotations

import shutil
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_helpers import REPO, Http, Proc, free_port, ksched_cmd, node, pod, subprocess_env, wait_for

from ksched.api.errors import Unauthorized
from ksched.apiserver.tls import make_self_signed
from ksched.client import rest
from ksched.client.rest import RestClient, load_client_configuration

TOKEN = "in-cluster-token-0123456789"


class Cluster:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.crt, self.key = make_self_signed(tmp / "pki", ["127.0.0.1", "localhost"])
        self.sa = tmp / "serviceaccount"
        self.sa.mkdir()
        (self.sa / "token").write_text(TOKEN)
        (self.sa / "ca.crt").write_text(self.crt.read_text())
        (self.sa / "namespace").write_text("kube-system")
        self.env = subprocess_env(tmp)
        self.env.update(KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=str(self.port))
        self.procs: list[Proc] = []
        ctx = ssl.create_default_context(cafile=str(self.crt))
        self.api = Http("127.0.0.1", self.port, token=TOKEN, ssl_context=ctx)

    def start(self, name: str, cmd: list[str]) -> Proc:
        p = Proc(cmd, self.tmp / f"{name}.log", self.env, self.tmp)
        self.procs.append(p)
        return p

    def in_pod(self, *args: str) -> list[str]:
        """``python -m ksched.cli.main ARGS`` with the service-account paths of this test."""
        prog = ("import sys; import kubernetes.config.incluster_config as ic; "
                "ic.SERVICE_TOKEN_FILENAME, ic.SERVICE_CERT_FILENAME = sys.argv[1], sys.argv[2]; "
                "from ksched.cli.main import main; sys.exit(main(sys.argv[3:]))")
        return [sys.executable, "-c", prog, str(self.sa / "token"), str(self.sa / "ca.crt"), *args]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("incluster"))
    try:
        serve = c.start("serve", ksched_cmd("serve", "--no-scheduler", "--listen", f"127.0.0.1:{c.port}",
                                            "--tls-cert", str(c.crt), "--tls-key", str(c.key), "--token", TOKEN,
                                            "--kubeconfig-out", str(c.tmp / "admin.kubeconfig")))
        wait_http_ready_tls(c, serve)
        yield c
    finally:
        for p in reversed(c.procs):
            p.stop()


def _unverified() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def wait_http_ready_tls(c: Cluster, proc: Proc) -> None:
    def up() -> bool:
        if not proc.alive():
            raise AssertionError(proc.log())
        try:
            return c.api.get("/readyz")[0] == 200
        except OSError:
            return False

    wait_for(up, timeout=60, what="ksched serve over TLS")


def test_the_loader_reads_the_service_account(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.config import incluster_config as ic

    monkeypatch.setattr(ic, "SERVICE_TOKEN_FILENAME", str(cluster.sa / "token"))
    monkeypatch.setattr(ic, "SERVICE_CERT_FILENAME", str(cluster.sa / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(cluster.port))
    assert rest._in_cluster()
    cfg = load_client_configuration()
    assert cfg.host == f"https://127.0.0.1:{cluster.port}" and cfg.ssl_ca_cert == str(cluster.sa / "ca.crt")
    client = RestClient(cfg)
    items, _ = client.list("Namespace")
    assert "kube-system" in {n.name for n in items}
    # A kubeconfig given wins over the pod's identity.
    assert load_client_configuration(str(cluster.tmp / "admin.kubeconfig")).ssl_ca_cert != str(cluster.sa / "ca.crt")
    # Not in a pod: no service host, or no token mounted.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert not rest._in_cluster()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setattr(ic, "SERVICE_TOKEN_FILENAME", str(cluster.sa / "missing"))
    assert not rest._in_cluster()


def test_a_wrong_token_is_refused(cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.config import incluster_config as ic

    (tmp_path / "token").write_text("not-the-token")
    monkeypatch.setattr(ic, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(ic, "SERVICE_CERT_FILENAME", str(cluster.sa / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(cluster.port))
    with pytest.raises(Unauthorized):
        RestClient().list("Pod")


def test_ksched_run_in_a_pod(cluster: Cluster) -> None:
    c = cluster
    assert c.api.post("/api/v1/nodes", node("n1"))[0] == 201
    port = free_port()
    run = c.start("run", c.in_pod("run", "--bind-address", "127.0.0.1", "--secure-port", str(port), "--id", "pod-1"))
    run.wait_log("ksched scheduling pods of default-scheduler on https://127.0.0.1:", timeout=60)
    assert c.api.post("/api/v1/namespaces/default/pods", pod("in-cluster"))[0] == 201

    def bound() -> Any:
        st, _, body = c.api.get("/api/v1/namespaces/default/pods/in-cluster")
        return st == 200 and body["spec"].get("nodeName")

    assert wait_for(bound, timeout=60, what="the pod bound") == "n1"
    st, _, lease = c.api.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler")
    assert st == 200 and lease["spec"]["holderIdentity"] == "pod-1"
    h = Http("127.0.0.1", port, ssl_context=_unverified())
    wait_for(lambda: h.get("/readyz")[0] == 200, timeout=60, what="ready")
    cz = h.get("/configz")[2]["componentconfig"]
    assert cz["ClientConnection"]["Kubeconfig"] == ""  # the service account, not a file
    run.p.send_signal(signal.SIGTERM)
    assert run.p.wait(60) == 0
    assert "Traceback" not in run.log()


def test_no_kubeconfig_outside_a_pod_is_an_error(cluster: Cluster) -> None:
    env = dict(cluster.env)
    del env["KUBERNETES_SERVICE_HOST"]
    cp = subprocess.run(ksched_cmd("run", "--secure-port", "0"), capture_output=True, text=True, env=env,
                        cwd=cluster.tmp, timeout=60)
    assert cp.returncode == 1 and "error: cannot configure a client" in cp.stderr
    assert "ksched scheduling" not in cp.stdout



def test_the_scheduler_deployment_runs_in_pods(cluster: Cluster) -> None:
    """deploy/scheduler applied with kubectl, then its Deployment's two replicas as its pods would
    run them: the container's arguments, the ConfigMap's configuration as the API server stored
    it at the mount path, the service account. One leads on kube-system/ksched and binds the pods
    that choose ksched; both answer the manifest's probes."""
    c = cluster
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    docs = [d for f in sorted((REPO / "deploy" / "scheduler").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())
            if d]
    env = {**c.env, "KUBECONFIG": str(c.tmp / "admin.kubeconfig")}
    env.pop("KUBERNETES_SERVICE_HOST")
    served = [d for d in docs if d["kind"] != "Deployment"]  # its replicas are the processes started below
    cp = subprocess.run([kubectl, "apply", "-f", "-"], input=yaml.safe_dump_all(served), env=env, capture_output=True,
                        text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    st, _, cm = c.api.get("/api/v1/namespaces/kube-system/configmaps/ksched-config")
    assert st == 200
    mount = c.tmp / "etc-ksched"
    mount.mkdir()
    for key, text in cm["data"].items():
        (mount / key).write_text(text)
    (deployment,) = (d for d in docs if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (config_mount,) = (m for m in container["volumeMounts"] if m["name"] == "config")
    probes = {p: container[p]["httpGet"] for p in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert {h["port"] for h in probes.values()} == {10259} and {h["scheme"] for h in probes.values()} == {"HTTPS"}

    replicas: list[tuple[Proc, Http]] = []
    for i in range(deployment["spec"]["replicas"]):
        port = free_port()
        args = [a.replace(config_mount["mountPath"], str(mount)) for a in container["args"]]
        # Each replica on its own loopback port instead of 0.0.0.0:10259 in its own pod.
        args = [{"--bind-address=0.0.0.0": "--bind-address=127.0.0.1",
                 "--secure-port=10259": f"--secure-port={port}"}.get(a, a) for a in args]
        assert str(port) in " ".join(args) and str(mount) in " ".join(args)
        replicas.append((c.start(f"replica-{i}", c.in_pod(*args)), Http("127.0.0.1", port, ssl_context=_unverified())))
    try:
        for proc, _ in replicas:
            proc.wait_log("ksched scheduling pods of ksched on https://127.0.0.1:", timeout=90)

        def holder() -> str:
            st, _, lease = c.api.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ksched")
            return str(st == 200 and (lease["spec"].get("holderIdentity") or ""))

        leader = wait_for(holder, timeout=90, what="a leader on kube-system/ksched")
        assert leader.startswith(socket.gethostname() + "_")
        assert c.api.post("/api/v1/nodes", node("deployed-n1"))[0] in (201, 409)
        assert c.api.post("/api/v1/namespaces/default/pods", pod("chooses-ksched", schedulerName="ksched"))[0] == 201

        def bound() -> Any:
            st, _, body = c.api.get("/api/v1/namespaces/default/pods/chooses-ksched")
            return st == 200 and body["spec"].get("nodeName")

        assert wait_for(bound, timeout=90, what="the pod bound")
        for _, h in replicas:
            for probe in probes.values():
                wait_for(lambda h=h, path=probe["path"]: h.get(path)[0] == 200, timeout=60, what=probe["path"])
    finally:
        for proc, _ in replicas:
            if proc.alive():
                proc.p.send_signal(signal.SIGTERM)
        for proc, _ in replicas:
            assert proc.p.wait(60) == 0, proc.log()
            assert "Traceback" not in proc.log()
