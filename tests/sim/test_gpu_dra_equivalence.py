"""One GPU device model, two ways of asking: the same cluster and workload described with the
GPU-sharing annotations of the trace-replay work (GpuShare, ``gpuSelMethod: first``) and with
DRA claims on the simulated driver's shared GPUs (consumable capacity ``milli``) give the same
placements and the same GPU indices."""

from __future__ import annotations

import random
from typing import Any

import pytest

from ksched.api.gpu import (
    ANNOTATION_GPU_COUNT,
    ANNOTATION_GPU_MILLI,
    ANNOTATION_GPU_MODEL,
    GPU_DRIVER,
    LABEL_GPU_MODEL,
    RESOURCE_GPU_COUNT,
    GpuRequest,
    claim_gpu_assignment,
    gpu_claim_spec,
    parse_gpu_index,
    pod_gpu_assignment,
)
from ksched.api.pod import Pod
from ksched.api.resource import ResourceClaim
from ksched.scheduler.config import parse_configuration
from ksched.sim.simulation import Simulation

MODELS = ("A100", "V100")


def nodes(rng: random.Random, n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        gpus = rng.choice((1, 2, 4))
        cap = {"cpu": "32", "memory": "128Gi", "pods": "110", RESOURCE_GPU_COUNT: str(gpus)}
        out.append({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": f"node-{i}", "labels": {LABEL_GPU_MODEL: MODELS[i % 2]}},
                    "status": {"allocatable": cap, "capacity": cap}})
    return out


def workload(rng: random.Random, n: int) -> list[tuple[str, GpuRequest, str]]:
    out = []
    for i in range(n):
        if rng.random() < 0.7:
            req = GpuRequest.make(rng.choice((100, 250, 300, 500, 700)), 1)
        else:
            req = GpuRequest.make(1000, rng.choice((1, 2)))
        models = rng.choice((None, None, "A100", "V100|A100"))
        if models:
            req = GpuRequest.make(req.milli, req.count, models)
        out.append((f"p{i:02d}", req, rng.choice(("1", "2"))))
    return out


def annotated_pod(name: str, req: GpuRequest, cpu: str) -> dict[str, Any]:
    ann = {ANNOTATION_GPU_MILLI: str(req.milli), ANNOTATION_GPU_COUNT: str(req.count)}
    if req.models:
        ann[ANNOTATION_GPU_MODEL] = req.models_text
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "annotations": ann},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}}


def claim_pod(name: str, req: GpuRequest, cpu: str) -> list[dict[str, Any]]:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"{name}-gpu", "namespace": "default"}, "spec": gpu_claim_spec(req)}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu},
                                                                           "claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]}}
    return [claim, pod]


DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU_DRIVER},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU_DRIVER}" && '
                                                              "device.allowMultipleAllocations"}}]}}

GPUSHARE_CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "profiles": [{"plugins": {"preFilter": {"enabled": [{"name": "GpuShare"}]},
                              "filter": {"enabled": [{"name": "GpuShare"}]},
                              "reserve": {"enabled": [{"name": "GpuShare"}]},
                              "bind": {"enabled": [{"name": "GpuShare"}, {"name": "DefaultBinder"}],
                                       "disabled": [{"name": "DefaultBinder"}]}},
                  "pluginConfig": [{"name": "GpuShare", "args": {"gpuSelMethod": "first"}}]}],
}


def placements(sim: Simulation, by_claims: bool) -> dict[str, tuple[str, tuple[int, ...]]]:
    out = {}
    for p in sim.store.items("Pod"):
        assert isinstance(p, Pod)
        if not p.node_name:
            out[p.name] = ("", ())
            continue
        if by_claims:
            c = sim.store.get("ResourceClaim", "default", f"{p.name}-gpu")
            assert isinstance(c, ResourceClaim)
            a = claim_gpu_assignment(c.results)
        else:
            a = pod_gpu_assignment(p)
        out[p.name] = (p.node_name, a.indices if a else ())
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_annotations_and_claims_place_the_same(seed: int) -> None:
    rng = random.Random(seed)
    cluster = nodes(rng, 6)
    pods = workload(rng, 40)
    a = Simulation(parse_configuration(GPUSHARE_CONFIG), seed=seed)
    assert not a.load([*cluster, *(annotated_pod(*p) for p in pods)])
    a.run(max_seconds=60)
    b = Simulation(seed=seed)
    assert not b.load([*cluster, DEVICE_CLASS, *(o for p in pods for o in claim_pod(*p))])
    b.run(max_seconds=60)
    got_a, got_b = placements(a, False), placements(b, True)
    assert got_a == got_b
    bound = sum(1 for v in got_a.values() if v[0])
    assert 0 < bound < len(pods), "the workload should fill the cluster past its GPUs"


def test_translation_round_trip() -> None:
    spec = gpu_claim_spec(GpuRequest.make(250, 1, "V100|A100"))
    ex = spec["devices"]["requests"][0]["exactly"]
    assert ex["capacity"] == {"requests": {"milli": "250"}} and ex["count"] == 1
    assert ex["selectors"][0]["cel"]["expression"] == f'device.attributes["{GPU_DRIVER}"].model in ["A100", "V100"]'
    a = claim_gpu_assignment([{"driver": GPU_DRIVER, "pool": "n", "device": "gpu-3", "shareID": "x",
                               "consumedCapacity": {"milli": "250"}}])
    assert a is not None and a.indices == (3,) and a.milli == 250
    assert parse_gpu_index("3") == (3,)
