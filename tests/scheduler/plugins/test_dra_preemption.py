"""Preemption and devices. kube-scheduler 1.36 does not preempt for DRA devices (its
DynamicResources Filter says UnschedulableAndUnresolvable, so preemption is not even tried: a
documented limitation); the DRAPreemption feature (alpha after 1.36, off by default; here the
plugin's ``draPreemption`` arg) makes the Filter's verdict Unschedulable and gives the plugin
AddPod/RemovePod: a dry run that removes every user of an allocated claim frees its devices, so
the victims are chosen and, once gone, their claims deallocated and the preemptor placed."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.errors import NotFound
from ksched.api.pod import Pod
from ksched.api.resource import ResourceClaim
from ksched.scheduler.config import parse_configuration
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.scheduler.plugins.dynamicresources.plugin import STATE_KEY
from ksched.sim.simulation import Simulation

DRV = "gpu.example.com"


def cluster(n_gpus: int = 1) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
         "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu"},
         "spec": {"driver": DRV, "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": f"gpu-{i}"} for i in range(n_gpus)]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRV}"'}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "one-gpu", "namespace": "default"},
         "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}},
        *({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
          for n, v in (("low", 0), ("high", 1000))),
    ]


def pod(name: str, priority: str, claim: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"priorityClassName": priority, "terminationGracePeriodSeconds": 5,
                     "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}],
                     "resourceClaims": [{"name": "gpu", **(claim or {"resourceClaimTemplateName": "one-gpu"})}]}}


def simulation(dra_preemption: bool) -> Simulation:
    config = None
    if dra_preemption:
        config = parse_configuration({"profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
            {"name": "DynamicResources", "args": {"draPreemption": True}}]}]})
    return Simulation(config, seed=1)


def get_pod(sim: Simulation, name: str) -> Pod | None:
    try:
        p = sim.store.get("Pod", "default", name)
    except NotFound:
        return None
    return p if isinstance(p, Pod) else None


def test_without_dra_preemption_a_device_is_not_preempted_as_in_1_36() -> None:
    sim = simulation(False)
    assert not sim.load([*cluster(), pod("low", "low")])
    sim.run(max_seconds=60)
    assert not sim.load([pod("high", "high")])
    sim.run(max_seconds=600)
    low, high = get_pod(sim, "low"), get_pod(sim, "high")
    assert low is not None and low.node_name == "n1"
    assert high is not None and not high.node_name and not high.nominated_node_name
    cond = next(c for c in high.raw["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["message"] == ("0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, "
                               "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")


def test_with_dra_preemption_the_victims_device_goes_to_the_preemptor() -> None:
    sim = simulation(True)
    assert not sim.load([*cluster(), pod("low", "low")])
    sim.run(max_seconds=60)
    assert not sim.load([pod("high", "high")])
    sim.run(max_seconds=600)
    assert get_pod(sim, "low") is None
    high = get_pod(sim, "high")
    assert high is not None and high.node_name == "n1"
    [claim] = [c for c in sim.store.list("ResourceClaim")[0] if isinstance(c, ResourceClaim)]
    assert claim.owner_references[0].name == "high" and claim.results[0]["device"] == "gpu-0"


def test_a_shared_claim_is_freed_only_when_all_its_users_are_victims() -> None:
    """Two low-priority pods share a claim on the only GPU; a preemptor with a claim of its own
    must evict both (the dry run frees the device only when both are removed)."""
    sim = simulation(True)
    shared = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
              "metadata": {"name": "shared", "namespace": "default"},
              "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}
    assert not sim.load([*cluster(), shared, pod("a", "low", {"resourceClaimName": "shared"}),
                         pod("b", "low", {"resourceClaimName": "shared"})])
    sim.run(max_seconds=60)
    assert get_pod(sim, "a").node_name == get_pod(sim, "b").node_name == "n1"  # type: ignore[union-attr]
    assert not sim.load([pod("high", "high")])
    sim.run(max_seconds=600)
    assert get_pod(sim, "a") is None and get_pod(sim, "b") is None
    assert get_pod(sim, "high").node_name == "n1"  # type: ignore[union-attr]
    c = sim.store.get("ResourceClaim", "default", "shared")
    assert isinstance(c, ResourceClaim) and c.allocation is None and not c.reserved_for


@pytest.mark.parametrize("ops, fits", [
    ([], False),
    ([("remove", "a")], False),  # b still uses the shared device
    ([("remove", "a"), ("remove", "b")], True),
    ([("remove", "a"), ("remove", "b"), ("add", "b")], False),  # put back: the device is in use again
    ([("remove", "b"), ("remove", "a"), ("add", "a"), ("remove", "a")], True),
])
def test_remove_and_add_pod_are_symmetric(ops: list[tuple[str, str]], fits: bool) -> None:
    """As upstream's TestPreemptionEndToEnd: the Filter after a sequence of dry-run removals and
    additions; the state the scheduling cycle keeps is never changed by a clone's removals."""
    sim = simulation(True)
    shared = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
              "metadata": {"name": "shared", "namespace": "default"},
              "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}
    assert not sim.load([*cluster(), shared, pod("a", "low", {"resourceClaimName": "shared"}),
                         pod("b", "low", {"resourceClaimName": "shared"})])
    sim.run(max_seconds=60)
    assert not sim.load([pod("high", "high")])
    # The controller made the preemptor's claim; the scheduler's informers take it in, then
    # PreFilter runs by hand (not the scheduling cycle).
    sim.informers.poll()
    sim.informers.process()
    high = get_pod(sim, "high")
    assert high is not None
    plugin: Any = sim.scheduler.profiles["default-scheduler"].plugins["DynamicResources"]
    state = CycleState()
    _, st = plugin.pre_filter(state, high, [])
    assert st is None
    node_info = NodeInfo()
    node_info.set_node(sim.store.get("Node", "", "n1"))
    dry = state.clone()
    victims = {n: PodInfo(get_pod(sim, n)) for n in ("a", "b")}
    for op, name in ops:
        (plugin.remove_pod if op == "remove" else plugin.add_pod)(dry, high, victims[name], node_info)
    status = plugin.filter(dry, high, node_info)
    assert (status is None) == fits
    assert status is None or status.message() == "cannot allocate all claims"
    assert plugin.filter(state, high, node_info) is not None  # the original state still sees the device taken
    assert state.get(STATE_KEY).released == set()
