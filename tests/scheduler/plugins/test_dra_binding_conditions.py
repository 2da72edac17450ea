"""Device binding conditions (DRADeviceBindingConditions, beta and on in 1.36), on the virtual
clock: PreBind writes the allocation (with ``allocationTimestamp``), records
``BindingConditionsPending`` and waits while the pod is nominated to the node
(NominatedNodeNameForExpectation) until the simulated driver reports the device attached; a True
failure condition or the 600 s binding timeout fails the binding, after which Filter finds the
claim unavailable and PostFilter deallocates it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.scheduler.plugins.test_dynamicresources import DRV, claim, get_claim, get_pod, pod

from ksched.api.gpu import GPU_DRIVER as DRIVER
from ksched.api.meta import parse_time
from ksched.api.resource import ResourceClaim
from ksched.kubelet.dradriver import ANNOTATION_BINDING, ANNOTATION_DEVICES
from ksched.scheduler.plugins.dynamicresources.plugin import _BindError, claim_ready_for_binding
from ksched.sim.simulation import Simulation


def gpu_node(name: str, binding: dict[str, Any] | None = None, n: int = 1) -> dict[str, Any]:
    devices = [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}},
                "bindingConditions": ["attached"], "bindingFailureConditions": ["attach-failed"]} for i in range(n)]
    ann = {ANNOTATION_DEVICES: json.dumps(devices)}
    if binding is not None:
        ann[ANNOTATION_BINDING] = json.dumps(binding)
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}, "annotations": ann},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}


def gpu_class() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def sim_with(*objs: dict[str, Any]) -> Simulation:
    sim = Simulation(seed=1)
    assert not sim.load(objs)
    return sim


def events(sim: Simulation, reason: str) -> list[str]:
    return [str(e.raw.get("message")) for e in sim.store.items("Event") if e.raw.get("reason") == reason]


def test_prebind_waits_for_the_driver_to_attach_the_device() -> None:
    sim = sim_with(gpu_node("n1", {"delay": 30}), gpu_class(), claim("c1"), pod("p", "c1"))
    start = sim.clock.now()
    # Until the device is attached the pod waits in PreBind, nominated to its node.
    sim.run(max_seconds=20)
    p = get_pod(sim, "p")
    assert (p.node_name, p.nominated_node_name) == ("", "n1")
    c = get_claim(sim, "c1")
    assert [r["device"] for r in c.results] == ["gpu-0"]
    assert c.results[0]["bindingConditions"] == ["attached"]
    assert c.results[0]["bindingFailureConditions"] == ["attach-failed"]
    assert parse_time(c.allocation["allocationTimestamp"]) == start  # type: ignore[index]
    assert c.device_statuses == ()
    assert events(sim, "BindingConditionsPending") == ["waiting for binding conditions for device on node n1"]
    sim.run(max_seconds=600)
    p = get_pod(sim, "p")
    assert p.node_name == "n1"
    # Bound at the first poll (every 5 s) after the driver reported the device attached (30 s).
    cond = p.condition("PodScheduled")
    assert cond is not None and parse_time(cond["lastTransitionTime"]) == start + 30
    [ds] = get_claim(sim, "c1").device_statuses
    assert [(x["type"], x["status"]) for x in ds["conditions"]] == [("attached", "True")]


def test_poll_interval_rounds_up_to_the_next_five_seconds() -> None:
    sim = sim_with(gpu_node("n1", {"delay": 12}), gpu_class(), claim("c1"), pod("p", "c1"))
    start = sim.clock.now()
    sim.run(max_seconds=600)
    cond = get_pod(sim, "p").condition("PodScheduled")
    assert cond is not None and parse_time(cond["lastTransitionTime"]) == start + 15


def test_failure_condition_fails_the_binding_and_the_claim_is_deallocated() -> None:
    sim = sim_with(gpu_node("bad", {"delay": 5, "fail": True}), gpu_class(), claim("c1"), pod("p", "c1"))
    sim.run(max_seconds=40)
    failed = events(sim, "FailedScheduling")
    assert failed[0] == ('running PreBind plugin "DynamicResources": claim c1 binding failed: reason=BindingFailed, '
                         'message="device gpu-0 could not be attached"')
    # The next attempt finds the failed allocation unusable and deallocates it.
    assert ("0/1 nodes are available: 1 resourceclaim not available on the node. deallocation of ResourceClaim "
            "completed, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.") in failed
    assert not get_pod(sim, "p").node_name


def test_a_failing_node_is_left_for_one_that_attaches() -> None:
    sim = sim_with(gpu_node("a-bad", {"delay": 0, "fail": True}), gpu_node("b-good", {"delay": 0}), gpu_class(),
                   claim("c1"), pod("p", "c1"))
    sim.run(max_seconds=3600)
    assert get_pod(sim, "p").node_name == "b-good"
    c = get_claim(sim, "c1")
    assert [r["pool"] for r in c.results] == ["b-good"]


def test_binding_timeout() -> None:
    sim = sim_with(gpu_node("n1", {"delay": 100000}), gpu_class(), claim("c1"), pod("p", "c1"))
    start = sim.clock.now()
    sim.run(max_seconds=700)
    failed = [(e.raw.get("message"), parse_time(e.raw.get("firstTimestamp") or e.raw.get("eventTime")))
              for e in sim.store.items("Event") if e.raw.get("reason") == "FailedScheduling"]
    assert failed[0][0] == 'running PreBind plugin "DynamicResources": device binding timeout'
    assert failed[0][1] == start + 600
    assert not get_pod(sim, "p").node_name


@pytest.mark.parametrize(("results", "statuses", "want"), [
    pytest.param([{}], [], True, id="no binding conditions"),
    pytest.param([{"bindingConditions": ["a"]}], [], False, id="no device status yet"),
    pytest.param([{"bindingConditions": ["a"]}], [[("a", "False")]], False, id="condition false"),
    pytest.param([{"bindingConditions": ["a", "b"]}], [[("a", "True")]], False, id="one condition missing"),
    pytest.param([{"bindingConditions": ["a", "b"]}], [[("a", "True"), ("b", "True")]], True, id="all true"),
    pytest.param([{"bindingConditions": ["a"], "bindingFailureConditions": ["f"]}], [[("a", "True"), ("f", "False")]],
                 True, id="failure condition false"),
    pytest.param([{"bindingConditions": ["a"], "bindingFailureConditions": ["f"]}], [[("a", "False"), ("f", "True")]],
                 "claim c binding failed: reason=Broken, message=\"gone\"", id="failure condition true"),
])
def test_claim_ready_for_binding(results: list[dict[str, Any]], statuses: list[list[tuple[str, str]]],
                                 want: bool | str) -> None:
    res = [{"request": "r", "driver": DRV, "pool": "p", "device": f"d{i}", **r} for i, r in enumerate(results)]
    devs = [{"driver": DRV, "pool": "p", "device": f"d{i}",
             "conditions": [{"type": t, "status": s, "reason": "Broken", "message": "gone"} for t, s in conds]}
            for i, conds in enumerate(statuses)]
    c = ResourceClaim({"metadata": {"name": "c", "namespace": "default"},
                       "status": {"allocation": {"devices": {"results": res}}, "devices": devs}})
    if isinstance(want, str):
        with pytest.raises(_BindError) as e:
            claim_ready_for_binding(c)
        assert str(e.value) == want
    else:
        assert claim_ready_for_binding(c) is want
