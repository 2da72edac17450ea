"""End to end: ``ksched serve --no-scheduler`` in one process, ``ksched run`` in another,
pods created with kubectl. Schedulable pods get bound through pods/binding; an unschedulable
one carries upstream's FailedScheduling message in ``kubectl describe pod`` and its PodScheduled
condition, and is scheduled once a fitting node appears; pods of other schedulers are left
alone; Ctrl-C stops ``ksched run`` cleanly."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
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

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (the end-to-end test drives "
                                                        "it against ksched serve)")
PODS = "/api/v1/namespaces/default/pods"


class Cluster:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.kubeconfig = tmp / "kubeconfig"
        self.env = subprocess_env(tmp)
        self.procs: list[Proc] = []
        self.api = Http("127.0.0.1", self.port)

    def start(self, name: str, *args: str) -> Proc:
        p = Proc(ksched_cmd(*args), self.tmp / f"{name}.log", self.env, self.tmp)
        self.procs.append(p)
        return p

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        cp = subprocess.run([KUBECTL, "--kubeconfig", str(self.kubeconfig), *args], input=stdin,
                            capture_output=True, text=True, env=self.env, timeout=30)
        if check and cp.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {cp.returncode}\n{cp.stdout}\n{cp.stderr}")
        return cp

    def get_pod(self, name: str) -> dict[str, Any]:
        st, _, body = self.api.get(f"{PODS}/{name}")
        assert st == 200, body
        return body  # type: ignore[no-any-return]

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("e2e"))
    try:
        serve = c.start("serve", "serve", "--no-scheduler", "--listen", f"127.0.0.1:{c.port}",
                        "--kubeconfig-out", str(c.kubeconfig))
        wait_http_ready(c.port, proc=serve)
        serve.wait_log("kubeconfig:")
        yield c
    finally:
        c.stop()


def _manifest(*objs: dict[str, Any]) -> str:
    return yaml.safe_dump_all(objs)


def _condition(p: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((c for c in (p.get("status") or {}).get("conditions") or () if c["type"] == ctype), {})


def test_serve_plus_run_binds_pods_and_explains_failures(cluster: Cluster) -> None:
    c = cluster
    nodes = [node(f"n{i}", cpu="2", memory="4Gi") for i in range(3)]
    pods = [pod(f"web-{i}", cpu="500m") for i in range(4)]
    picky = pod("picky", nodeSelector={"disk": "ssd"})
    other = pod("other-scheduler", schedulerName="someone-else")
    c.kubectl("apply", "-f", "-", stdin=_manifest(*nodes))
    # Created before the scheduler runs: it must pick them up from its initial list.
    c.kubectl("create", "-f", "-", stdin=_manifest(pods[0], other))

    run = c.start("run", "run", "--kubeconfig", str(c.kubeconfig), "--secure-port", "0")
    run.wait_log("ksched scheduling pods of default-scheduler")
    c.kubectl("create", "-f", "-", stdin=_manifest(*pods[1:], picky))

    def bound() -> bool:
        return all(c.get_pod(p["metadata"]["name"])["spec"].get("nodeName") for p in pods)

    wait_for(bound, timeout=20, what="the web pods to be bound")
    for p in pods:
        got = c.get_pod(p["metadata"]["name"])
        assert got["spec"]["nodeName"] in {"n0", "n1", "n2"}
        assert _condition(got, "PodScheduled").get("status") == "True"
    # Spread by the default scoring: no node has more than two of the four.
    placed = [c.get_pod(p["metadata"]["name"])["spec"]["nodeName"] for p in pods]
    assert max(placed.count(n) for n in set(placed)) <= 2

    msg = ("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, preemption: 0/3 nodes "
           "are available: 3 Preemption is not helpful for scheduling.")
    wait_for(lambda: _condition(c.get_pod("picky"), "PodScheduled").get("reason") == "Unschedulable",
             timeout=20, what="picky's PodScheduled condition")
    cond = _condition(c.get_pod("picky"), "PodScheduled")
    assert cond["status"] == "False" and cond["message"] == msg
    assert not c.get_pod("picky")["spec"].get("nodeName")

    def described() -> str | None:
        out = c.kubectl("describe", "pod", "picky").stdout
        return out if "FailedScheduling" in out else None

    out = wait_for(described, timeout=10, what="the FailedScheduling event")
    assert re.search(r"Warning\s+FailedScheduling\s+\S+\s+default-scheduler\s+" + re.escape(msg), out), out
    out = c.kubectl("describe", "pod", pods[0]["metadata"]["name"]).stdout
    name = pods[0]["metadata"]["name"]
    node_name = c.get_pod(name)["spec"]["nodeName"]
    assert re.search(rf"Normal\s+Scheduled\s+\S+\s+default-scheduler\s+Successfully assigned default/{name} "
                     rf"to {node_name}$", out, re.M), out

    # kubectl get shows the placements (-o wide: the NODE column).
    wide = c.kubectl("get", "pods", "-o", "wide").stdout
    rows = {ln.split()[0]: ln.split() for ln in wide.splitlines()[1:]}
    assert rows[name][6] == node_name and rows["picky"][6] == "<none>"

    # A node that fits arrives: the pod is scheduled there (node-add events requeue it).
    c.kubectl("apply", "-f", "-", stdin=_manifest(node("fast", labels={"disk": "ssd"})))
    wait_for(lambda: c.get_pod("picky")["spec"].get("nodeName") == "fast", timeout=20, what="picky on fast")

    # The pod of another scheduler is not ours to touch.
    other_pod = c.get_pod("other-scheduler")
    assert not other_pod["spec"].get("nodeName") and not _condition(other_pod, "PodScheduled")
    ev = json.loads(c.kubectl("get", "events", "-o", "json",
                              "--field-selector", "involvedObject.name=other-scheduler").stdout)
    assert ev["items"] == []

    # Ctrl-C stops it cleanly.
    assert run.interrupt(timeout=15) == 0
    log = run.log()
    assert "Traceback" not in log, log


def test_run_with_config_schedules_only_its_profiles(cluster: Cluster) -> None:
    c = cluster
    cfg = c.tmp / "sched.yaml"
    cfg.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "my-scheduler"}]}))
    run = c.start("run-config", "run", "--kubeconfig", str(c.kubeconfig), "--config", str(cfg),
                  "--leader-elect-resource-name", "my-scheduler", "--id", "e2e-1", "--secure-port", "0")
    run.wait_log("ksched scheduling pods of my-scheduler")
    # Its own node, so the test does not lean on nodes an earlier test created.
    c.kubectl("apply", "-f", "-", stdin=_manifest(node("cfg-node", cpu="2", memory="4Gi")))
    c.kubectl("create", "-f", "-", stdin=_manifest(pod("mine", schedulerName="my-scheduler"),
                                                   pod("default-one")))
    wait_for(lambda: c.get_pod("mine")["spec"].get("nodeName"), timeout=20, what="mine to be bound")
    out = c.kubectl("describe", "pod", "mine").stdout
    assert re.search(r"Normal\s+Scheduled\s+\S+\s+my-scheduler\s+Successfully assigned default/mine to ", out), out
    # No default-scheduler runs now: that pod stays pending, untouched.
    assert not c.get_pod("default-one")["spec"].get("nodeName")
    # It holds the lease while it runs.
    lease = json.loads(c.kubectl("get", "lease", "my-scheduler", "-n", "kube-system", "-o", "json").stdout)
    assert lease["spec"]["holderIdentity"] == "e2e-1"
    assert run.interrupt(timeout=15) == 0
    assert "Traceback" not in run.log()
    # A bad configuration is refused up front.
    bad = c.tmp / "bad.yaml"
    bad.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                   "profiles:\n- schedulerName: x\n  plugins: {score: {enabled: [{name: NoSuchPlugin}]}}\n")
    cp = subprocess.run(ksched_cmd("run", "--kubeconfig", str(c.kubeconfig), "--config", str(bad),
                                   "--secure-port", "0"),
                        capture_output=True, text=True, env=c.env, timeout=30)
    assert cp.returncode != 0 and "NoSuchPlugin" in cp.stderr


def test_run_survives_an_api_server_crash(tmp_path: Path) -> None:
    """The API server is SIGKILLed and restarted from its data directory: ``ksched run``'s
    informers come back (rewatch or relist) and it goes on scheduling new pods."""
    c = Cluster(tmp_path)
    data = tmp_path / "data"
    serve_args = ("serve", "--no-scheduler", "--no-kubelet", "--data", str(data), "--listen",
                  f"127.0.0.1:{c.port}", "--kubeconfig-out", str(c.kubeconfig))
    try:
        serve = c.start("serve1", *serve_args)
        wait_http_ready(c.port, proc=serve)
        serve.wait_log("kubeconfig:")
        run = c.start("run", "run", "--kubeconfig", str(c.kubeconfig), "--secure-port", "0")
        run.wait_log("ksched scheduling pods")
        c.kubectl("create", "-f", "-", stdin=_manifest(node("n1"), pod("before")))
        wait_for(lambda: c.get_pod("before")["spec"].get("nodeName") == "n1", timeout=40, what="before bound")
        serve.kill()
        serve = c.start("serve2", *serve_args)
        wait_http_ready(c.port, proc=serve)
        c.kubectl("create", "-f", "-", stdin=_manifest(node("n2", labels={"disk": "ssd"}),
                                                       pod("after", nodeSelector={"disk": "ssd"})))
        wait_for(lambda: c.get_pod("after")["spec"].get("nodeName") == "n2", timeout=60, what="after bound")
        assert c.get_pod("before")["spec"]["nodeName"] == "n1"
        assert run.alive()
        assert run.interrupt(timeout=15) == 0
        assert "Traceback" not in run.log()
    finally:
        c.stop()
