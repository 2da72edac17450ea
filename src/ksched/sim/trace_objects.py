"""Trace rows as Kubernetes objects, and a KubeSchedulerConfiguration that runs one GPU policy
as the FGD paper's experiments do, so that a trace can go through the ordinary scheduler
(``ksched simulate``, ``serve``, ``run``) as well as through ``ksched replay``.

Nodes: capacity cpu, memory (MiB), pods and ``alibabacloud.com/gpu-count``; the GPU model as
the ``alibabacloud.com/gpu-card-model`` label. Pods: one container requesting the CPU and
memory, the GPU request as the openb annotations. The configuration: GpuShare (Filter, Reserve,
Bind before DefaultBinder), NodeResourcesFit's Filter, the policy as the only Score plugin with
weight 1000, every other default plugin disabled, percentageOfNodesToScore 100 (artifact
``scripts/generate_config_and_run.py``).
"""

from __future__ import annotations

from typing import Any

from ksched.api.gpu import (
    ANNOTATION_GPU_COUNT,
    ANNOTATION_GPU_MILLI,
    ANNOTATION_GPU_MODEL,
    LABEL_GPU_MODEL,
    RESOURCE_GPU_COUNT,
)
from ksched.scheduler.plugins.gpushare.frag import TypicalPods
from ksched.sim.trace import TraceNode, TracePod

__all__ = ["node_object", "pod_object", "policy_configuration"]


def node_object(n: TraceNode) -> dict[str, Any]:
    res = {"cpu": f"{n.cpu_milli}m", "memory": f"{n.memory_mib}Mi", "pods": str(n.max_pods)}
    labels = {"kubernetes.io/hostname": n.name}
    if n.gpus:
        res[RESOURCE_GPU_COUNT] = str(n.gpus)
        if n.model:
            labels[LABEL_GPU_MODEL] = n.model
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name, "labels": labels},
            "status": {"capacity": dict(res), "allocatable": dict(res),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_object(p: TracePod, namespace: str = "default", scheduler_name: str | None = None) -> dict[str, Any]:
    ann: dict[str, str] = {}
    if p.gpu is not None:
        ann[ANNOTATION_GPU_MILLI] = str(p.gpu.milli)
        ann[ANNOTATION_GPU_COUNT] = str(p.gpu.count)
        if p.gpu.models:
            ann[ANNOTATION_GPU_MODEL] = p.gpu.models_text
    req: dict[str, str] = {}
    if p.cpu_milli:
        req["cpu"] = f"{p.cpu_milli}m"
    if p.memory_mib:
        req["memory"] = f"{p.memory_mib}Mi"
    md: dict[str, Any] = {"name": p.name, "namespace": namespace}
    if ann:
        md["annotations"] = ann
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                            "resources": {"requests": req} if req else {}}]}
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def policy_configuration(policy: str, typical: TypicalPods | None = None, seed: int = 0,
                         gpu_sel_method: str | None = None) -> dict[str, Any]:
    """A KubeSchedulerConfiguration (as a dict) running ``policy`` the artifact's way."""
    args: list[dict[str, Any]] = []
    if policy in ("FGD", "FGDPack") and typical is not None:
        args.append({"name": policy, "args": {"typicalPods": typical.to_dicts()}})
    if policy == "Random":
        args.append({"name": "Random", "args": {"seed": seed}})
    method = gpu_sel_method or ("random" if policy == "Random" else "best")
    args.append({"name": "GpuShare", "args": {"gpuSelMethod": method, "seed": seed}})
    pre_filter = ["NodeResourcesFit", "GpuShare"] + ([policy] if policy in ("FGD", "FGDPack", "Random") else [])
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": 100,
        "profiles": [{
            "schedulerName": "default-scheduler",
            "plugins": {
                "multiPoint": {"disabled": [{"name": "*"}]},
                "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                "preFilter": {"enabled": [{"name": n} for n in pre_filter]},
                "filter": {"enabled": [{"name": "NodeResourcesFit"}, {"name": "GpuShare"}]},
                "preScore": {"enabled": [{"name": policy}]},
                "score": {"enabled": [{"name": policy, "weight": 1000}]},
                "reserve": {"enabled": [{"name": "GpuShare"}]},
                "bind": {"enabled": [{"name": "GpuShare"}, {"name": "DefaultBinder"}]},
            },
            "pluginConfig": args,
        }],
    }
