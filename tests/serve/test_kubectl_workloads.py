"""The real kubectl against ``ksched serve`` (controllers, scheduler and simulated kubelets in the
process, on the wall clock) for apps/v1 workloads: ``kubectl create deployment`` (a protobuf body),
``rollout status``, ``scale`` (the scale subresource), ``set image``, ``rollout history``,
``rollout undo``, ``rollout restart``, ``describe pod`` naming an existing ReplicaSet as its
controller, ``get`` through the ``all`` category; and a DaemonSet and a StatefulSet rolled out."""

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
from serve_helpers import Proc, free_port, ksched_cmd, node, subprocess_env, wait_http_ready

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (needed to drive it against "
                                                        "ksched serve)")


class Cluster:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.kubeconfig = tmp / "kubeconfig"
        self.env = subprocess_env(tmp)

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        cp = subprocess.run([KUBECTL, "--kubeconfig", str(self.kubeconfig), *args], input=stdin,
                            capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and cp.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {cp.returncode}\n{cp.stdout}\n{cp.stderr}")
        return cp

    def out(self, *args: str) -> str:
        return self.kubectl(*args).stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.out(*args, "-o", "json"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("workloads")
    manifests = tmp / "nodes.yaml"
    manifests.write_text(yaml.safe_dump_all([node("n1"), node("n2")]))
    port = free_port()
    c = Cluster(tmp)
    proc = Proc(ksched_cmd("serve", "--listen", f"127.0.0.1:{port}", "--load", str(manifests),
                           "--kubeconfig-out", str(c.kubeconfig)), tmp / "serve.log", c.env, tmp)
    try:
        wait_http_ready(port, proc=proc)
        proc.wait_log("kubeconfig:")
        yield c
        assert "Traceback" not in proc.log(), proc.log()
    finally:
        proc.stop()


def _rs_revisions(c: Cluster, name: str) -> dict[str, str]:
    rss = c.json("get", "rs", "-l", f"app={name}")["items"]
    return {r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: r["metadata"]["name"] for r in rss}


def _history(c: Cluster, ref: str) -> list[str]:
    out = c.out("rollout", "history", ref)
    return [line.split()[0] for line in out.splitlines()[2:] if line.strip()]


def test_deployment_lifecycle_with_kubectl(cluster: Cluster) -> None:
    c = cluster
    assert c.out("create", "deployment", "web", "--image=nginx:1.26", "--replicas=3", "--port=80").strip() == \
        "deployment.apps/web created"
    out = c.out("rollout", "status", "deployment/web", "--timeout=60s")
    assert out.strip().endswith('deployment "web" successfully rolled out')
    d = c.json("get", "deployment", "web")
    assert d["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert d["status"]["availableReplicas"] == 3 and d["status"]["observedGeneration"] == 1
    (rs_name,) = _rs_revisions(c, "web").values()
    pods = c.json("get", "pods", "-l", "app=web")["items"]
    assert len(pods) == 3 and all(p["metadata"]["name"].startswith(f"{rs_name}-") for p in pods)
    assert all(p["spec"].get("nodeName") in ("n1", "n2") for p in pods)
    described = c.out("describe", "pod", pods[0]["metadata"]["name"])
    assert re.search(rf"Controlled By:\s+ReplicaSet/{rs_name}\n", described), described
    assert c.json("get", "rs", rs_name)["metadata"]["name"] == rs_name  # the controller exists

    assert c.out("scale", "deployment/web", "--replicas=5").strip() == "deployment.apps/web scaled"
    c.out("rollout", "status", "deployment/web", "--timeout=60s")
    assert c.json("get", "deployment", "web")["status"]["readyReplicas"] == 5

    c.out("set", "image", "deployment/web", "nginx=nginx:1.27")
    c.out("rollout", "status", "deployment/web", "--timeout=60s")
    assert _history(c, "deployment/web") == ["1", "2"]
    revs = _rs_revisions(c, "web")
    images = {p["spec"]["containers"][0]["image"] for p in c.json("get", "pods", "-l", "app=web")["items"]
              if not p["metadata"].get("deletionTimestamp")}
    assert images == {"nginx:1.27"}

    assert c.out("rollout", "undo", "deployment/web").strip() == "deployment.apps/web rolled back"
    c.out("rollout", "status", "deployment/web", "--timeout=60s")
    # The first ReplicaSet is current again, as revision 3.
    assert _rs_revisions(c, "web")["3"] == revs["1"] and _history(c, "deployment/web") == ["2", "3"]
    d = c.json("get", "deployment", "web")
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.26"
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"

    assert c.out("rollout", "restart", "deployment/web").strip() == "deployment.apps/web restarted"
    c.out("rollout", "status", "deployment/web", "--timeout=60s")
    assert _history(c, "deployment/web") == ["2", "3", "4"]
    d = c.json("get", "deployment", "web")
    assert "kubectl.kubernetes.io/restartedAt" in d["spec"]["template"]["metadata"]["annotations"]
    assert d["status"]["updatedReplicas"] == 5 and d["status"]["availableReplicas"] == 5
    events = c.json("get", "events", "--field-selector", "involvedObject.kind=Deployment,involvedObject.name=web")
    assert {e["reason"] for e in events["items"]} == {"ScalingReplicaSet"}
    assert "deployment.apps/web" in c.out("get", "all")


def test_scale_errors_and_create_namespace(cluster: Cluster) -> None:
    c = cluster
    assert c.out("create", "namespace", "team-a").strip() == "namespace/team-a created"
    c.out("create", "deployment", "api", "--image=nginx", "--replicas=0", "-n", "team-a")
    assert c.json("get", "deployment", "api", "-n", "team-a")["spec"]["replicas"] == 0  # an explicit 0 kept
    cp = c.kubectl("scale", "deployment/nope", "--replicas=2", check=False)
    assert cp.returncode != 0 and 'deployments.apps "nope" not found' in cp.stderr
    cp = c.kubectl("rollout", "undo", "deployment/api", "-n", "team-a", check=False)
    assert cp.returncode != 0 and "no rollout history found" in cp.stderr


def test_daemonset_and_statefulset_roll_out(cluster: Cluster) -> None:
    c = cluster
    objs = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
         "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
             "metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "a", "image": "agent:1"}]}}}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
         "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": {
             "metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "d", "image": "db:1"}]}}}},
    ]
    c.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objs))
    assert 'daemon set "agent" successfully rolled out' in c.out("rollout", "status", "ds/agent", "--timeout=60s")
    assert "partitioned roll out complete: 2 new pods have been updated" in c.out(
        "rollout", "status", "sts/db", "--timeout=60s")
    agents = c.json("get", "pods", "-l", "app=agent")["items"]
    assert sorted(p["spec"]["nodeName"] for p in agents) == ["n1", "n2"]
    assert sorted(p["metadata"]["name"] for p in c.json("get", "pods", "-l", "app=db")["items"]) == ["db-0", "db-1"]
    assert _history(c, "ds/agent") == ["1"] and _history(c, "sts/db") == ["1"]
