"""Generate the bundled example cluster (examples/cluster/) deterministically.

    python scripts/make_example.py

A few dozen nodes over three zones (some tainted, one cordoned), a GPU pool with an extended
resource, a hugepages pool, and the workloads a real cluster runs, as its users write them:
Deployments (web frontends spread over zones with anti-affinity and a PodDisruptionBudget, a
cache that prefers their nodes, best-effort debug pods that a LimitRange gives default
requests), a StatefulSet with volumeClaimTemplates (Kafka on dynamically provisioned volumes),
a DaemonSet (a log agent on every node, tolerating every taint), Jobs (ETL batches at low
priority, GPU training under a ResourceQuota, hugepages packet processing), a CronJob whose
high-priority run preempts batch pods, a Service and a ConfigMap, a CustomResourceDefinition
with one of its objects; and single pods that cannot run: too big for any node, more GPUs
than a node has, one waiting at a scheduling gate.
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


def container(image: str, cpu: str | None, memory: str | None, *, limits: dict[str, str] | None = None,
              extra_requests: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    req: dict[str, str] = {}
    if cpu:
        req["cpu"] = cpu
    if memory:
        req["memory"] = memory
    req.update(extra_requests or {})
    c: dict[str, Any] = {"name": "main", "image": image, **extra}
    res: dict[str, Any] = {}
    if req:
        res["requests"] = req
    if limits:
        res["limits"] = limits
    if res:
        c["resources"] = res
    return c


def template(labels: dict[str, str], c: dict[str, Any], annotations: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"labels": labels}
    if annotations:
        md["annotations"] = annotations
    return {"metadata": md, "spec": {"containers": [c], **spec}}


def deployment(name: str, ns: str, replicas: int, tpl: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": tpl["metadata"]["labels"]["app"]}},
                     "template": tpl}}


def job(name: str, ns: str, parallelism: int, completions: int, tpl: dict[str, Any], **spec: Any) -> dict[str, Any]:
    tpl["spec"].setdefault("restartPolicy", "Never")
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"parallelism": parallelism, "completions": completions, "template": tpl, **spec}}


def pod(name: str, ns: str, labels: dict[str, str], c: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"containers": [c], **spec}}


def service(name: str, ns: str, app: str, port: int, headless: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"app": app}, "ports": [{"name": "main", "port": port, "targetPort": port}]}
    if headless:
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def zone_spread(app: str) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}}}


def one_per_node(app: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
GPU_POOL = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "accelerator", "operator": "In", "values": ["nvidia-a100"]}]}]}}}


def gpu_trainer(gpus: str) -> dict[str, Any]:
    return container("registry.example.com/ml/trainer:0.9", "4", "16Gi", extra_requests={"nvidia.com/gpu": gpus},
                     limits={"nvidia.com/gpu": gpus})


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
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "standard"},
         "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"},
        # Containers of the data team without requests get these (LimitRanger admission).
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": "data"},
         "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}]}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "ml"},
         "spec": {"hard": {"requests.nvidia.com/gpu": "32", "pods": "40"}}},
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
         "metadata": {"name": "backuppolicies.example.com"},
         "spec": {"group": "example.com", "scope": "Namespaced",
                  "names": {"plural": "backuppolicies", "singular": "backuppolicy", "kind": "BackupPolicy",
                            "shortNames": ["bp"]},
                  "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                      "type": "object", "properties": {"spec": {"type": "object", "required": ["schedule"],
                                                                "properties": {
                                                                    "schedule": {"type": "string"},
                                                                    "retentionDays": {"type": "integer", "minimum": 1},
                                                                    "target": {"type": "string"}}}}}}}]}},
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
    web: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frontend-config", "namespace": "web"},
         "data": {"LOG_LEVEL": "info", "CHECKOUT_URL": "http://checkout.web.svc:8080"}},
    ]
    # Replicated web frontends: spread over zones, at most one per node, behind Services.
    for app, replicas in (("frontend", 18), ("checkout", 9)):
        c = container(f"registry.example.com/web/{app}:2.4.1", "500m", "1Gi", limits={"cpu": "1", "memory": "1Gi"},
                      ports=[{"containerPort": 8080}])
        if app == "frontend":
            c["envFrom"] = [{"configMapRef": {"name": "frontend-config"}}]
        web.append(deployment(app, "web", replicas, template(
            {"app": app, "tier": "web"}, c, priorityClassName="critical-web",
            topologySpreadConstraints=[zone_spread(app)], affinity=one_per_node(app))))
        web.append(service(app, "web", app, 8080))
    web.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "frontend", "namespace": "web"},
                "spec": {"minAvailable": "80%", "selector": {"matchLabels": {"app": "frontend"}}}})
    # A cache that wants to be near the frontends.
    web.append(deployment("cache", "web", 6, template(
        {"app": "cache"}, container("registry.example.com/web/cache:7.2", "250m", "2Gi"),
        affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 50, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "frontend"}},
                                              "topologyKey": "kubernetes.io/hostname"}}]}})))
    batch: list[dict[str, Any]] = []
    # ETL Jobs: varied sizes, low priority, ten pods at a time for 10 to 30 minutes each; some
    # prefer SSD nodes.
    for i in range(12):
        cpu = rng.choice(["100m", "250m", "500m", "1", "2"])
        mem = rng.choice(["256Mi", "512Mi", "1Gi", "2Gi", "4Gi"])
        spec: dict[str, Any] = {"priorityClassName": "batch-low"}
        if i % 4 == 0:
            spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [
                    {"key": "disktype", "operator": "In", "values": ["ssd"]}]}}]}}
        run = str(rng.choice([600, 900, 1200, 1800]))
        batch.append(job(f"etl-{i:02d}", "batch", 10, 20, template(
            {"app": "etl"}, container("registry.example.com/batch/etl:1.9", cpu, mem),
            annotations={"ksched.io/run-seconds": run}, **spec), backoffLimit=4))
    # One waiting at a scheduling gate (a quota check that never answers here).
    batch.append(pod("waiting-for-quota", "batch", {"app": "etl"},
                     container("registry.example.com/batch/etl:1.9", "1", "1Gi"),
                     schedulingGates=[{"name": "example.com/quota-check"}]))
    ml: list[dict[str, Any]] = []
    # GPU training: a long run at training priority, a sweep of one-GPU trials at batch priority
    # that fills the rest of the pool, and a yearly retraining (00:05 on 1 January, when the simulation starts) that preempts trials
    # (the sweep's replacements cannot preempt back: batch-low never preempts).
    ml.append(job("train-resnet", "ml", 2, 2, template(
        {"app": "trainer"}, gpu_trainer("4"), priorityClassName="ml-training", tolerations=[GPU_TOLERATION],
        affinity=GPU_POOL)))
    ml.append(job("hparam-sweep", "ml", 8, 8, template(
        {"app": "sweep"}, gpu_trainer("1"), priorityClassName="batch-low", tolerations=[GPU_TOLERATION],
        affinity=GPU_POOL), backoffLimit=20))
    ml.append({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "retrain-yearly", "namespace": "ml"},
               "spec": {"schedule": "5 0 1 1 *", "concurrencyPolicy": "Forbid", "jobTemplate": {"spec": {
                   "template": template({"app": "retrain"}, gpu_trainer("4"), priorityClassName="ml-training",
                                        tolerations=[GPU_TOLERATION], affinity=GPU_POOL, restartPolicy="Never")}}}})
    ml.append(pod("too-many-gpus", "ml", {"app": "trainer"}, gpu_trainer("8"), tolerations=[GPU_TOLERATION]))
    data: list[dict[str, Any]] = []
    # Debug shells without requests: the namespace's LimitRange gives them default requests.
    data.append(deployment("debug", "data", 20, template({"app": "debug"}, {"name": "main", "image": "busybox:1.36"})))
    # Kafka: a StatefulSet with a volume per broker, provisioned when the broker is scheduled.
    kafka_c = container("registry.example.com/data/kafka:3.7", "1", "4Gi", limits={"cpu": "1", "memory": "4Gi"},
                        extra_requests={"ephemeral-storage": "10Gi"},
                        volumeMounts=[{"name": "data", "mountPath": "/var/lib/kafka"}])
    data.append({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "kafka", "namespace": "data"},
                 "spec": {"serviceName": "kafka", "replicas": 30, "podManagementPolicy": "Parallel",
                          "selector": {"matchLabels": {"app": "kafka"}},
                          "template": template({"app": "kafka"}, kafka_c),
                          "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                              "accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                              "resources": {"requests": {"storage": "100Gi"}}}}]}})
    data.append(service("kafka", "data", "kafka", 9092, headless=True))
    data.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "kafka", "namespace": "data"},
                 "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "kafka"}}}})
    # Packet processing on the hugepages pool (request == limit, with cpu and memory).
    for name, size, amount in (("dpdk-router", "hugepages-2Mi", "512Mi"), ("dpdk-gateway", "hugepages-1Gi", "1Gi")):
        data.append(deployment(name, "data", 6, template(
            {"app": name}, container("registry.example.com/net/dpdk:23.11", "2", "2Gi", extra_requests={size: amount},
                                     limits={size: amount, "cpu": "2", "memory": "2Gi"}),
            nodeSelector={"hugepages": "true"})))
    data.append(pod("giant-analytics", "data", {"app": "spark"},
                    container("registry.example.com/data/spark:3.5", "48", "64Gi")))
    infra: list[dict[str, Any]] = []
    # A log agent on every node: a DaemonSet tolerating every taint.
    infra.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "log-agent", "namespace": "infra"},
                  "spec": {"selector": {"matchLabels": {"app": "log-agent"}}, "template": template(
                      {"app": "log-agent"}, container("registry.example.com/infra/fluent-bit:3.1", "100m", "200Mi"),
                      tolerations=[{"operator": "Exists"}])}})
    # Ingress controllers on the dedicated nodes, each taking host port 443: more replicas than
    # dedicated nodes, so some wait.
    infra.append(deployment("ingress-nginx", "infra", 9, template(
        {"app": "ingress"}, container("registry.k8s.io/ingress-nginx/controller:v1.11", "500m", "512Mi",
                                      ports=[{"containerPort": 443, "hostPort": 443}]),
        nodeSelector={"dedicated": "infra"},
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}])))
    backup = {"apiVersion": "example.com/v1", "kind": "BackupPolicy", "metadata": {"name": "kafka-nightly",
                                                                                  "namespace": "data"},
              "spec": {"schedule": "0 2 * * *", "retentionDays": 14, "target": "statefulset/kafka"}}
    header = "# Generated by scripts/make_example.py; edit that script, not this file.\n"
    for old in OUT.glob("*.yaml"):
        old.unlink()
    (OUT / "00-cluster.yaml").write_text(header + yaml.safe_dump_all(cluster, sort_keys=False), encoding="utf-8")
    (OUT / "10-nodes.yaml").write_text(header + yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "items": nodes}, sort_keys=False), encoding="utf-8")
    workloads = [*web, *batch, *ml, *data, *infra]
    (OUT / "20-workloads.yaml").write_text(header + yaml.safe_dump_all(workloads, sort_keys=False),
                                           encoding="utf-8")
    (OUT / "30-backup-policy.yaml").write_text(header + yaml.safe_dump(backup, sort_keys=False), encoding="utf-8")
    print(f"{len(nodes)} nodes, {len(workloads)} workload objects -> {OUT}")


if __name__ == "__main__":
    main()
