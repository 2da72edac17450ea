"""``ksched serve --scenario FILE --kubelet-config FILE``: a scenario timeline on the wall clock
against the live cluster (times from serve's start), the kubelets' eviction settings per node
pool, what the API shows of it, and malformed files refused before anything is served."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml
from serve_helpers import Http, Proc, free_port, ksched_cmd, node, subprocess_env, wait_for, wait_http_ready

PODS = "/api/v1/namespaces/default/pods"


def _web() -> dict[str, Any]:
    """A ReplicaSet of one BestEffort pod that prefers the web pool and, 2 s after it starts,
    uses 1900Mi."""
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["web"]}]}}]}}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"},
                                               "annotations": {"ksched.io/usage-memory": "0s: 50Mi, 2s: 1900Mi"}},
                                  "spec": {"affinity": affinity, "containers": [{"name": "app", "image": "app"}]}}}}


def test_a_usage_change_evicts_and_the_replacement_goes_elsewhere(tmp_path: Path) -> None:
    """At 1 s the scenario creates a ReplicaSet whose pod lands on n1 (2000Mi) and, 2 s after it
    starts, uses 1900Mi: under the web pool's hard threshold (500Mi, from --kubelet-config;
    upstream's default 100Mi would not be crossed), so n1's kubelet reports MemoryPressure and
    evicts it; the node lifecycle controller taints n1, and the replacement runs on n2."""
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([
        node("n1", labels={"pool": "web"}, memory="2000Mi"), node("n2", labels={"pool": "batch"}, memory="8Gi")]))
    (tmp_path / "kubelet.yaml").write_text(yaml.safe_dump_all([
        {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "nodeSelector": {"pool": "web"},
         "evictionHard": {"memory.available": "500Mi"}}]))
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump({
        "apiVersion": "ksched.io/v1alpha1", "kind": "Timeline", "events": [
            {"at": "1s", "apply": [_web()]},
            {"at": "1s", "setUsage": {"node": "n2", "memory": "1Gi"}}]}))
    port = free_port()
    proc = Proc(ksched_cmd("serve", "--listen", f"127.0.0.1:{port}", "--load", "cluster.yaml", "--scenario",
                           "scenario.yaml", "--kubelet-config", "kubelet.yaml", "--kubeconfig-out", "kc"),
                tmp_path / "serve.log", subprocess_env(tmp_path), tmp_path)
    try:
        wait_http_ready(port, timeout=60, proc=proc)
        api = Http("127.0.0.1", port, timeout=30)
        proc.wait_log("scenario: done (2 actions, 0 failed)", timeout=120)
        log = proc.log()
        assert "apply ReplicaSet/web" in log and "setUsage node n2: memory=1Gi" in log

        def pods() -> list[dict[str, Any]]:
            return list(api.get(PODS)[2]["items"])

        first = wait_for(lambda: [p for p in pods() if p["status"].get("phase") in ("Running", "Failed")],
                         timeout=120, what="the ReplicaSet's pod to run")[0]
        assert first["spec"]["nodeName"] == "n1"

        def evicted() -> dict[str, Any] | None:
            got = api.get(f"{PODS}/{first['metadata']['name']}")[2]
            return got if got["status"].get("phase") == "Failed" else None

        gone = wait_for(evicted, timeout=180, what="the pod on n1 to be evicted")["status"]
        assert gone["reason"] == "Evicted"
        assert gone["message"] == ("The node was low on resource: memory. Threshold quantity: 500Mi, available: 100Mi. "
                                   "Container app was using 1900Mi, request is 0, has larger consumption of memory. ")
        target = [c for c in gone["conditions"] if c["type"] == "DisruptionTarget"]
        assert target and target[0]["reason"] == "TerminationByKubelet"
        n1 = api.get("/api/v1/nodes/n1")[2]
        pressure = [c for c in n1["status"]["conditions"] if c["type"] == "MemoryPressure"]
        assert pressure and pressure[0]["status"] == "True"
        wait_for(lambda: any(t["key"] == "node.kubernetes.io/memory-pressure"
                             for t in (api.get("/api/v1/nodes/n1")[2].get("spec") or {}).get("taints") or ()),
                 timeout=120, what="n1's memory-pressure taint")
        wait_for(lambda: [p for p in pods() if p["spec"].get("nodeName") == "n2"
                          and p["status"].get("phase") == "Running"], timeout=180,
                 what="the replacement to run on n2")
        events = api.get("/api/v1/namespaces/default/events?fieldSelector=reason%3DEvicted")[2]["items"]
        assert any(e["involvedObject"]["name"] == first["metadata"]["name"] for e in events)
        assert proc.interrupt(timeout=30) == 0
        assert "Traceback" not in proc.log()
    finally:
        proc.stop()


def test_a_malformed_scenario_or_kubelet_config_is_refused_before_serving(tmp_path: Path) -> None:
    env = subprocess_env(tmp_path)
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump({
        "kind": "Timeline", "events": [{"at": "1s", "cordon": "n1"},
                                       {"at": "2s", "scale": {"kind": "Job", "name": "j", "replicas": -1}}]}))
    cp = subprocess.run(ksched_cmd("serve", "--listen", f"127.0.0.1:{free_port()}", "--scenario", "scenario.yaml",
                                   "--kubeconfig-out", "kc"),
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert cp.returncode == 2
    assert "scenario.yaml: events[1].scale.replicas: want a non-negative integer" in cp.stderr
    assert "listening" not in cp.stdout and not (tmp_path / "kc").exists()
    (tmp_path / "kubelet.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "evictionHard": {"memory.available": "lots"}}))
    cp = subprocess.run(ksched_cmd("serve", "--listen", f"127.0.0.1:{free_port()}", "--kubelet-config",
                                   "kubelet.yaml", "--kubeconfig-out", "kc"),
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert cp.returncode == 2 and "kubelet.yaml" in cp.stderr and "evictionHard" in cp.stderr
    assert not (tmp_path / "kc").exists()
    cp = subprocess.run(ksched_cmd("serve", "--listen", f"127.0.0.1:{free_port()}", "--scenario", "missing.yaml"),
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert cp.returncode == 2 and "missing.yaml" in cp.stderr
