"""The bundled example (examples/cluster) end to end against ``ksched serve`` (scheduler,
controllers and simulated kubelets on the wall clock): the directory applied with the real
``kubectl apply -f`` and no extra flags makes the pods ``ksched simulate`` makes (compared per
owner and phase, the placements that do not depend on tie-breaking compared node for node);
``rollout status``, ``scale``, ``rollout undo``, ``get all``, ``get events``, ``explain`` and
``auth can-i`` work on it; the official Python client lists, creates and patches a Deployment and
reads its status and scale; and a ``kubectl get all,nodes,pc,pdb,pv,pvc,sc -A -o yaml`` dump of
it re-simulates with every bound pod on its node.

Only the first minute of the example is compared: on the wall clock the ETL Jobs run for 10 to 30
minutes and the CronJob's time (00:05 on 1 January) does not come."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_helpers import REPO, Proc, free_port, ksched_cmd, wait_http_ready
from test_kubectl_workloads import KUBECTL, Cluster

from ksched.cli.main import main

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

EXAMPLE = REPO / "examples" / "cluster"


def wait_until(pred: Callable[[], bool], what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def simulate(*paths: Path, max_time: str = "60") -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["simulate", *map(str, paths), "--seed", "1", "--format", "json", "--quiet",
                     "--max-time", max_time]) == 0
    r: dict[str, Any] = json.loads(out.getvalue())
    return r


def owner_of(p: dict[str, Any]) -> tuple[str, str]:
    for r in p["metadata"].get("ownerReferences") or ():
        if r.get("controller"):
            return r["kind"], r["name"]
    return "", ""


def key(ns: str, kind: str, owner: str, name: str, phase: str) -> tuple[str, str, str, str]:
    """Pods by owner and phase: a Deployment's ReplicaSet without its hash, a bare pod by name."""
    if kind == "ReplicaSet":
        owner = owner.rsplit("-", 1)[0]
    return ns, kind, owner or name, phase


def sim_key(p: dict[str, Any]) -> tuple[str, str, str, str]:
    kind, _, owner = (p.get("owner") or "").partition("/")
    return key(p["namespace"], kind, owner, p["name"], p["phase"])


def live_key(p: dict[str, Any]) -> tuple[str, str, str, str]:
    kind, owner = owner_of(p)
    return key(p["metadata"]["namespace"], kind, owner, p["metadata"]["name"], p["status"].get("phase", ""))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("example")
    port = free_port()
    c = Cluster(tmp)
    proc = Proc(ksched_cmd("serve", "--listen", f"127.0.0.1:{port}",
                           "--kubeconfig-out", str(c.kubeconfig)), tmp / "serve.log", c.env, tmp)
    try:
        wait_http_ready(port, proc=proc)
        proc.wait_log("kubeconfig:")
        # kubectl maps every object before applying any: the custom object waits for its CRD
        # (as against any cluster), so the directory is applied twice, without extra flags.
        first = c.kubectl("apply", "-f", str(EXAMPLE), check=False, timeout=300)
        assert first.returncode == 1 and 'no matches for kind "BackupPolicy"' in first.stderr, first.stderr
        again = c.kubectl("apply", "-f", str(EXAMPLE), timeout=300).stdout
        assert "backuppolicy.example.com/kafka-nightly created" in again
        yield c
        assert "Traceback" not in proc.log(), proc.log()
    finally:
        proc.stop()


def live_pods(c: Cluster) -> list[dict[str, Any]]:
    return c.json("get", "pods", "-A")["items"]  # type: ignore[no-any-return]


def test_serve_makes_the_pods_simulate_makes(served: Cluster) -> None:
    want = Counter(sim_key(p) for p in simulate(EXAMPLE)["pods"])
    assert want[("ml", "Job", "hparam-sweep", "Running")] == 8  # the first minute: no preemption yet
    state: dict[str, Any] = {}

    def same() -> bool:
        state["pods"] = live_pods(served)
        state["got"] = Counter(live_key(p) for p in state["pods"])
        return state["got"] == want

    try:
        wait_until(same, "the served cluster's pods to match the simulation's")
    except AssertionError:
        raise AssertionError(f"simulated {sorted(want.items())}\nserved {sorted(state['got'].items())}") from None
    pods = state["pods"]
    # Placements that do not depend on tie-breaking: one log agent per node, the ingress
    # controllers on the three dedicated nodes, the frontends spread 6/6/6 over the zones.
    agents = sorted(p["spec"]["nodeName"] for p in pods if p["metadata"]["name"].startswith("log-agent-"))
    assert agents == sorted(n["metadata"]["name"] for n in served.json("get", "nodes")["items"])
    ingress = sorted(p["spec"].get("nodeName", "") for p in pods if p["metadata"]["name"].startswith("ingress-nginx-"))
    assert [n for n in ingress if n] == ["general-a-7", "general-b-7", "general-c-7"]
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"]
             for n in served.json("get", "nodes")["items"]}
    zones = Counter(nodes[p["spec"]["nodeName"]] for p in pods if owner_of(p)[1].startswith("frontend-"))
    assert sorted(zones.values()) == [6, 6, 6]
    kafka = sorted(p["metadata"]["name"] for p in pods if owner_of(p) == ("StatefulSet", "kafka"))
    assert kafka == sorted(f"kafka-{i}" for i in range(30))
    claims = served.json("get", "pvc", "-n", "data")["items"]
    assert sorted(c["metadata"]["name"] for c in claims) == sorted(f"data-kafka-{i}" for i in range(30))
    wait_until(lambda: all(c["status"].get("phase") == "Bound" for c in served.json("get", "pvc", "-n", "data")["items"]),
               "the claims to be bound")
    # The LimitRange gave the debug shells its default requests.
    debug = next(p for p in pods if owner_of(p)[1].startswith("debug-"))
    assert debug["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}


def test_kubectl_commands_on_the_example(served: Cluster) -> None:
    c = served
    assert "successfully rolled out" in c.out("rollout", "status", "deployment/frontend", "-n", "web",
                                              "--timeout=300s")
    assert c.out("scale", "deployment/cache", "-n", "web", "--replicas=3").strip() == "deployment.apps/cache scaled"
    wait_until(lambda: len([p for p in live_pods(c) if owner_of(p)[1].startswith("cache-")
                            and not p["metadata"].get("deletionTimestamp")]) == 3, "three cache pods")
    c.out("set", "image", "deployment/checkout", "-n", "web", "main=registry.example.com/web/checkout:2.5.0")
    assert "successfully rolled out" in c.out("rollout", "status", "deployment/checkout", "-n", "web",
                                              "--timeout=300s")
    assert c.out("rollout", "undo", "deployment/checkout", "-n", "web").strip() == "deployment.apps/checkout rolled back"
    assert "successfully rolled out" in c.out("rollout", "status", "deployment/checkout", "-n", "web",
                                              "--timeout=300s")
    image = c.json("get", "deployment", "checkout", "-n", "web")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "registry.example.com/web/checkout:2.4.1"
    everything = c.out("get", "all", "-n", "web")
    for line in ("deployment.apps/frontend", "service/frontend", "replicaset.apps/frontend-", "pod/frontend-"):
        assert line in everything, everything
    assert "daemonset.apps/log-agent" in c.out("get", "all", "-n", "infra")
    assert "cronjob.batch/retrain-yearly" in c.out("get", "all", "-n", "ml")
    events = c.out("get", "events", "-n", "web").splitlines()
    assert events[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert any("ScalingReplicaSet" in e and "deployment/cache" in e for e in events), events
    assert "maxSurge" in c.out("explain", "deployment.spec.strategy.rollingUpdate")
    assert "retentionDays" in c.out("explain", "backuppolicy.spec")
    assert c.out("auth", "can-i", "create", "deployments", "-n", "web").strip() == "yes"


def test_the_official_python_client(served: Cluster) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    client = kubernetes.config.new_client_from_config(config_file=str(served.kubeconfig))
    apps = kubernetes.client.AppsV1Api(client)
    names = sorted(d.metadata.name for d in apps.list_namespaced_deployment("web").items)
    assert names == ["cache", "checkout", "frontend"]
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "api"}},
                     "template": {"metadata": {"labels": {"app": "api"}}, "spec": {"containers": [
                         {"name": "main", "image": "registry.example.com/web/api:1.0",
                          "resources": {"requests": {"cpu": "100m"}}}]}}}}
    created = apps.create_namespaced_deployment("web", body)
    assert created.metadata.generation == 1 and created.spec.strategy.type == "RollingUpdate"
    apps.patch_namespaced_deployment("api", "web", {"metadata": {"labels": {"team": "web"}}})
    wait_until(lambda: apps.read_namespaced_deployment_status("api", "web").status.available_replicas == 2,
               "two available replicas")
    d = apps.read_namespaced_deployment("api", "web")
    assert d.metadata.labels == {"team": "web"} and d.status.observed_generation == d.metadata.generation
    assert {c.type for c in d.status.conditions} == {"Available", "Progressing"}
    scale = apps.read_namespaced_deployment_scale("api", "web")
    assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (2, 2, "app=api")
    apps.patch_namespaced_deployment_scale("api", "web", {"spec": {"replicas": 4}})
    wait_until(lambda: apps.read_namespaced_deployment("api", "web").status.ready_replicas == 4, "four ready")


def test_a_dump_re_simulates_with_its_bound_pods_in_place(served: Cluster, tmp_path: Path) -> None:
    # A rollout (the kubectl test's undo) is done when the new pods are ready; its old pods may
    # still be terminating, and a terminating pod in a dump goes away in the re-simulation too.
    wait_until(lambda: not any(p["metadata"].get("deletionTimestamp") for p in live_pods(served)),
               "no pod terminating")
    dump = served.out("get", "all,nodes,pc,pdb,pv,pvc,sc", "-A", "-o", "yaml")
    path = tmp_path / "dump.yaml"
    path.write_text(dump)
    bound = {(p["metadata"]["namespace"], p["metadata"]["name"]): p["spec"]["nodeName"]
             for p in yaml.safe_load(dump)["items"] if p["kind"] == "Pod" and p["spec"].get("nodeName")}
    assert len(bound) > 250
    report = simulate(path)
    placed = {(p["namespace"], p["name"]): p["node"] for p in report["pods"]}
    assert {k: placed.get(k) for k in bound} == bound
