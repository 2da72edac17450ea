"""Generate the bundled example cluster (examples/cluster/) deterministically.

    python scripts/make_example.py

A few dozen nodes over three zones (some tainted, one cordoned), a GPU pool with an extended
resource, a hugepages pool, and a few hundred varied pods: replicated web pods with topology
spread and anti-affinity, batch jobs, GPU training pods, hugepages pods, infra pods pinned to
tainted nodes, best-effort pods, a gated pod, and pods too large to fit anywhere.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).resolve().parent.parent / "examples" / "cluster"
ZONES = ("zone-a", "zone-b", "zone-c")


def node(name: str, zone: str, cpu: str, memory: str, pods: int = 110, labels: dict[str, str] | None = None,
         taints: list[dict[str, Any]] | None = None, extra: dict[str, str] | None = None,
         unschedulable: bool = False, images: list[tuple[str, int]] | None = None) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"}
    alloc.update(extra or {})
    n: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                              "topology.kubernetes.io/region": "eu-west",
                                              "topology.kubernetes.io/zone": zone, **(labels or {})}},
        "spec": {},
        "status": {"capacity": dict(alloc), "allocatable": dict(alloc),
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }
    if taints:
        n["spec"]["taints"] = taints
    if unschedulable:
        n["spec"]["unschedulable"] = True
    if images:
        n["status"]["images"] = [{"names": [i], "sizeBytes": s} for i, s in images]
    return n


def pod(name: str, ns: str, image: str, cpu: str | None, memory: str | None, *, labels: dict[str, str] | None = None,
        limits: dict[str, str] | None = None, extra_requests: dict[str, str] | None = None,
        spec: dict[str, Any] | None = None, owner: str | None = None) -> dict[str, Any]:
    req: dict[str, str] = {}
    if cpu:
        req["cpu"] = cpu
    if memory:
        req["memory"] = memory
    req.update(extra_requests or {})
    c: dict[str, Any] = {"name": "main", "image": image}
    res: dict[str, Any] = {}
    if req:
        res["requests"] = req
    if limits:
        res["limits"] = limits
    if res:
        c["resources"] = res
    md: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
    if owner:
        md["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                                  "uid": f"{owner}-uid", "controller": True}]
    p: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": {"containers": [c]}}
    p["spec"].update(spec or {})
    return p


def main() -> None:
    rng = random.Random(20261121)
    OUT.mkdir(parents=True, exist_ok=True)
    cluster: list[dict[str, Any]] = []
    for ns in ("web", "batch", "ml", "infra", "data"):
        cluster.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": ns}}})
    cluster += [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "critical-web"},
         "value": 100000, "description": "customer-facing services"},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch-low"},
         "value": -100, "preemptionPolicy": "Never", "description": "best-effort batch; never preempts"},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "ml-training"},
         "value": 5000, "description": "GPU training jobs"},
    ]
    nodes: list[dict[str, Any]] = []
    for zone in ZONES:
        for i in range(8):
            labels = {"node.kubernetes.io/instance-type": "m5.2xlarge"}
            if i % 2 == 0:
                labels["disktype"] = "ssd"
            taints = None
            if i == 7:
                taints = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
                labels["dedicated"] = "infra"
            elif i == 6 and zone == "zone-b":
                taints = [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]
            images = [("registry.example.com/web/frontend:2.4.1", 310 * 1024 * 1024)] if i < 3 else None
            nodes.append(node(f"general-{zone[-1]}-{i}", zone, "8", "32Gi", labels=labels, taints=taints,
                              unschedulable=(zone == "zone-c" and i == 5), images=images))
    for i in range(4):
        nodes.append(node(f"gpu-{i}", ZONES[i % 3], "32", "128Gi", labels={"accelerator": "nvidia-a100"},
                          taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                          extra={"nvidia.com/gpu": "4"}))
    for i in range(3):
        nodes.append(node(f"hugepages-{i}", ZONES[i], "16", "64Gi", labels={"hugepages": "true"},
                          extra={"hugepages-2Mi": "2Gi", "hugepages-1Gi": "4Gi"}))
    pods: list[dict[str, Any]] = []
    # Replicated web frontends: spread over zones, at most one per node.
    for rs, replicas in (("frontend-7d4b9", 18), ("checkout-5c8f2", 9)):
        app = rs.split("-")[0]
        for i in range(replicas):
            pods.append(pod(f"{rs}-{i:02d}", "web", f"registry.example.com/web/{app}:2.4.1", "500m", "1Gi",
                            labels={"app": app, "tier": "web"}, owner=rs,
                            limits={"cpu": "1", "memory": "1Gi"},
                            spec={"priorityClassName": "critical-web",
                                  "topologySpreadConstraints": [{
                                      "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                      "whenUnsatisfiable": "DoNotSchedule",
                                      "labelSelector": {"matchLabels": {"app": app}}}],
                                  "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                                      "labelSelector": {"matchLabels": {"app": app}},
                                      "topologyKey": "kubernetes.io/hostname"}]}}}))
    # A cache that wants to be near the frontends.
    for i in range(6):
        pods.append(pod(f"cache-{i}", "web", "registry.example.com/web/cache:7.2", "250m", "2Gi",
                        labels={"app": "cache"},
                        spec={"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                            "weight": 50, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "frontend"}},
                                                              "topologyKey": "kubernetes.io/hostname"}}]}}}))
    # Batch jobs: varied sizes, low priority, some preferring SSD nodes.
    for i in range(120):
        cpu = rng.choice(["100m", "250m", "500m", "1", "2"])
        mem = rng.choice(["256Mi", "512Mi", "1Gi", "2Gi", "4Gi"])
        spec: dict[str, Any] = {"priorityClassName": "batch-low", "restartPolicy": "Never"}
        if i % 4 == 0:
            spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [
                    {"key": "disktype", "operator": "In", "values": ["ssd"]}]}}]}}
        pods.append(pod(f"etl-{i:03d}", "batch", "registry.example.com/batch/etl:1.9", cpu, mem,
                        labels={"job": f"etl-{i // 10}"}, spec=spec))
    # Best-effort pods (no requests).
    for i in range(20):
        pods.append(pod(f"debug-{i:02d}", "data", "busybox:1.36", None, None, labels={"app": "debug"}))
    # Data services with memory limits (Burstable / Guaranteed) and ephemeral storage.
    for i in range(30):
        pods.append(pod(f"kafka-{i:02d}", "data", "registry.example.com/data/kafka:3.7", "1", "4Gi",
                        limits={"cpu": "1", "memory": "4Gi"}, extra_requests={"ephemeral-storage": "10Gi"},
                        labels={"app": "kafka"}))
    # GPU training: extended resources, tolerations, node affinity to the GPU pool.
    for i in range(14):
        gpus = rng.choice(["1", "2", "4"])
        pods.append(pod(f"train-{i:02d}", "ml", "registry.example.com/ml/trainer:0.9", "4", "16Gi",
                        extra_requests={"nvidia.com/gpu": gpus}, limits={"nvidia.com/gpu": gpus},
                        labels={"app": "trainer"},
                        spec={"priorityClassName": "ml-training",
                              "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                               "effect": "NoSchedule"}],
                              "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                  "nodeSelectorTerms": [{"matchExpressions": [
                                      {"key": "accelerator", "operator": "In", "values": ["nvidia-a100"]}]}]}}}}))
    # Hugepages consumers (request == limit, with cpu and memory).
    for i in range(12):
        size = "hugepages-2Mi" if i % 2 == 0 else "hugepages-1Gi"
        amount = "512Mi" if size == "hugepages-2Mi" else "1Gi"
        pods.append(pod(f"dpdk-{i:02d}", "data", "registry.example.com/net/dpdk:23.11", "2", "2Gi",
                        extra_requests={size: amount}, limits={size: amount, "cpu": "2", "memory": "2Gi"},
                        labels={"app": "dpdk"}, spec={"nodeSelector": {"hugepages": "true"}}))
    # Infra agents pinned to the dedicated nodes.
    for i in range(9):
        pods.append(pod(f"ingress-{i}", "infra", "registry.k8s.io/ingress-nginx/controller:v1.11", "500m", "512Mi",
                        labels={"app": "ingress"},
                        spec={"nodeSelector": {"dedicated": "infra"},
                              "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra",
                                               "effect": "NoSchedule"}],
                              "containers": [{"name": "main", "image": "registry.k8s.io/ingress-nginx/controller:v1.11",
                                              "ports": [{"containerPort": 443, "hostPort": 443}],
                                              "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}))
    # Pods that cannot fit anywhere, and one waiting at a scheduling gate.
    pods.append(pod("giant-analytics", "data", "registry.example.com/data/spark:3.5", "48", "64Gi",
                    labels={"app": "spark"}))
    pods.append(pod("too-many-gpus", "ml", "registry.example.com/ml/trainer:0.9", "4", "16Gi",
                    extra_requests={"nvidia.com/gpu": "8"}, limits={"nvidia.com/gpu": "8"},
                    spec={"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}))
    pods.append(pod("waiting-for-quota", "batch", "registry.example.com/batch/etl:1.9", "1", "1Gi",
                    spec={"schedulingGates": [{"name": "example.com/quota-check"}]}))
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "frontend", "namespace": "web"},
           "spec": {"minAvailable": "80%", "selector": {"matchLabels": {"app": "frontend"}}}}
    header = "# Generated by scripts/make_example.py; edit that script, not this file.\n"
    (OUT / "00-cluster.yaml").write_text(header + yaml.safe_dump_all(cluster, sort_keys=False), encoding="utf-8")
    (OUT / "10-nodes.yaml").write_text(header + yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "items": nodes}, sort_keys=False), encoding="utf-8")
    (OUT / "20-pods.yaml").write_text(header + yaml.safe_dump_all([*pods, pdb], sort_keys=False), encoding="utf-8")
    print(f"{len(nodes)} nodes, {len(pods)} pods -> {OUT}")


if __name__ == "__main__":
    main()
