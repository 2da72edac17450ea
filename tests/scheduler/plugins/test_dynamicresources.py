"""DynamicResources in the default profile, end to end on a simulated cluster: allocation written
at PreBind (finalizer, allocation, reservedFor), in-flight tracking, shared claims, upstream's
Filter/PreFilter/PreEnqueue messages and the PostFilter part of every FitError, Score favouring
earlier firstAvailable subrequests, the hot path of pods without claims."""

from __future__ import annotations

from typing import Any

from ksched.api.pod import Pod
from ksched.api.resource import FINALIZER_DELETE_PROTECTION, ResourceClaim
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.sim.simulation import Simulation

DRV = "gpu.example.com"


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                                                        **labels}},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}


def gpu_slice(node_name: str, n: int, model: str = "A100", start: int = 0) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node_name}-gpus"},
            "spec": {"driver": DRV, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": model},
                                                                     "index": {"int": i}}}
                                 for i in range(start, start + n)]}}


def device_class(name: str = "gpu", expr: str = f'device.driver == "{DRV}"') -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expr}}]}}


def claim(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    reqs = list(requests) or [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": reqs}}}


def pod(name: str, *claims: str, cpu: str = "1") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}
    if claims:
        spec["resourceClaims"] = [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
        spec["containers"][0]["resources"]["claims"] = [{"name": f"c{i}"} for i in range(len(claims))]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def run(*objs: dict[str, Any]) -> Simulation:
    sim = Simulation(seed=1)
    errs = sim.load(objs)
    assert not errs, errs
    sim.run(max_seconds=120)
    return sim


def get_pod(sim: Simulation, name: str) -> Pod:
    p = sim.store.get("Pod", "default", name)
    assert isinstance(p, Pod)
    return p


def get_claim(sim: Simulation, name: str) -> ResourceClaim:
    c = sim.store.get("ResourceClaim", "default", name)
    assert isinstance(c, ResourceClaim)
    return c


def message(sim: Simulation, name: str) -> str:
    cond = get_pod(sim, name).condition("PodScheduled")
    assert cond is not None
    return str(cond["message"])


def test_claim_is_allocated_and_reserved_at_prebind() -> None:
    sim = run(node("n1"), node("n2"), gpu_slice("n2", 1), device_class(), claim("c1"), pod("p", "c1"))
    p = get_pod(sim, "p")
    assert p.node_name == "n2"
    c = get_claim(sim, "c1")
    assert FINALIZER_DELETE_PROTECTION in c.finalizers
    assert c.results == [{"request": "gpu", "driver": DRV, "pool": "n2", "device": "gpu-0"}]
    assert c.allocation is not None and c.allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0][
        "values"] == ["n2"]
    assert c.reserved_for == ({"resource": "pods", "name": "p", "uid": p.uid},)


def test_two_pods_never_get_the_same_device() -> None:
    sim = run(node("n1"), gpu_slice("n1", 2), device_class(), *(claim(f"c{i}") for i in range(3)),
              *(pod(f"p{i}", f"c{i}") for i in range(3)))
    devices = [get_claim(sim, f"c{i}").results for i in range(3)]
    taken = [r[0]["device"] for r in devices if r]
    assert sorted(taken) == ["gpu-0", "gpu-1"]
    pending = [f"p{i}" for i in range(3) if not get_pod(sim, f"p{i}").node_name]
    assert len(pending) == 1
    assert message(sim, pending[0]) == ("0/1 nodes are available: 1 cannot allocate all claims. still not "
                                        "schedulable, preemption: 0/1 nodes are available: 1 Preemption is not "
                                        "helpful for scheduling.")


def test_shared_claim_follows_its_allocation() -> None:
    sim = run(node("n1"), node("n2"), gpu_slice("n2", 1), device_class(), claim("shared"),
              pod("a", "shared"), pod("b", "shared"))
    assert get_pod(sim, "a").node_name == get_pod(sim, "b").node_name == "n2"
    c = get_claim(sim, "shared")
    assert {r["name"] for r in c.reserved_for} == {"a", "b"}
    assert len(c.results) == 1


def test_messages_of_pods_without_claims_carry_the_postfilter_part() -> None:
    sim = run(node("n1"), pod("big", cpu="100"))
    assert message(sim, "big") == ("0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, "
                                   "preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
                                   "scheduling.")


def test_missing_claim_and_class() -> None:
    sim = run(node("n1"), gpu_slice("n1", 1), claim("c1"), pod("no-class", "c1"), pod("no-claim", "nope"))
    # Rejected in its own PreFilter before it kept the claims: PostFilter has none to deallocate.
    assert message(sim, "no-class") == ("0/1 nodes are available: request gpu: device class gpu does not exist. "
                                        "no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption "
                                        "is not helpful for scheduling.")
    # PreEnqueue keeps the pod out of the active queue: it is never tried.
    p = get_pod(sim, "no-claim")
    assert not p.node_name and p.condition("PodScheduled") is None
    q = {x.pod.name: x for x in sim.scheduler.queue.pending_pods()}
    assert q["no-claim"].gated


def test_selector_and_prioritized_list_score() -> None:
    fa = {"name": "gpu", "firstAvailable": [
        {"name": "h100", "deviceClassName": "gpu", "selectors": [
            {"cel": {"expression": f'device.attributes["{DRV}"].model == "H100"'}}]},
        {"name": "a100", "deviceClassName": "gpu"}]}
    sim = run(node("n1"), node("n2"), gpu_slice("n1", 1, "A100"), gpu_slice("n2", 1, "H100"), device_class(),
              claim("c", fa), pod("p", "c"))
    # Both nodes fit; n2's H100 is the first subrequest: score 8 there, 7 on n1.
    assert get_pod(sim, "p").node_name == "n2"
    assert get_claim(sim, "c").results[0]["request"] == "gpu/h100"


def test_pods_without_claims_skip_prefilter_and_score_zero() -> None:
    sim = run(node("n1"))
    fw = next(iter(sim.scheduler.profiles.values()))
    plugin = fw.plugins["DynamicResources"]
    st = CycleState()
    p = Pod(pod("x"))
    _, status = plugin.pre_filter(st, p, [])
    assert status is not None and status.is_skip()
    assert plugin.pre_enqueue(p) is None
    import numpy as np
    assert plugin.score_nodes(st, p, None, np.arange(3)).tolist() == [0, 0, 0]  # type: ignore[arg-type]
