"""The simulated DRA driver: a node's declared devices become its ResourceSlice (the JSON device
list, the GPU shorthand, or the trace-replay GPU model), republished with a new pool generation
when they change and deleted with the node; devices handed to a pod appear in the claim's
status.devices; a malformed annotation names the node and publishes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ksched.api.node import Node
from ksched.api.resource import ResourceClaim, ResourceSlice
from ksched.kubelet.dradriver import DeviceSpecError, node_devices
from ksched.sim.simulation import Simulation


def node(name: str, annotations: dict[str, str] | None = None, **capacity: str) -> dict[str, Any]:
    cap = {"cpu": "8", "memory": "8Gi", "pods": "10", **capacity}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations or {},
                                                             "labels": {"alibabacloud.com/gpu-card-model": "V100"}},
            "status": {"allocatable": cap, "capacity": cap}}


def slices(sim: Simulation) -> dict[str, ResourceSlice]:
    return {s.name: s for s in sim.store.items("ResourceSlice") if isinstance(s, ResourceSlice)}


def test_shorthand_and_trace_model_and_lifecycle() -> None:
    sim = Simulation(seed=1)
    gpus = json.dumps({"count": 2, "model": "A100", "memory": "40Gi", "numa": [0, 1], "shared": True})
    assert not sim.load([node("a", {"dra.ksched.io/gpus": gpus}), node("b", **{"alibabacloud.com/gpu-count": "4"}),
                         node("cpu")])
    sim.run(max_seconds=10)
    got = slices(sim)
    assert sorted(got) == ["a-gpu.ksched.io", "b-gpu.ksched.io"]
    a = got["a-gpu.ksched.io"]
    assert (a.node_name, a.pool_name, a.pool_generation, a.resource_slice_count) == ("a", "a", 1, 1)
    d1 = a.devices[1]
    assert d1.attributes == {"gpu.ksched.io/index": 1, "gpu.ksched.io/model": "A100", "gpu.ksched.io/numa": 1}
    assert d1.allow_multiple_allocations and d1.capacity["gpu.ksched.io/milli"].value == 1000 * 10**9
    b = got["b-gpu.ksched.io"]
    assert [d.name for d in b.devices] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert b.devices[0].attributes["gpu.ksched.io/model"] == "V100"
    # A change republishes with the next generation; a deleted node loses its slice.
    raw = sim.store.get("Node", "", "a").deepcopy_raw()
    raw["metadata"]["annotations"]["dra.ksched.io/gpus"] = json.dumps({"count": 3, "model": "A100"})
    sim.store.update(raw)
    sim.store.delete("Node", "", "b")
    sim.run(max_seconds=10)
    got = slices(sim)
    assert sorted(got) == ["a-gpu.ksched.io"]
    assert got["a-gpu.ksched.io"].pool_generation == 2 and len(got["a-gpu.ksched.io"].devices) == 3


def test_claim_status_lists_the_devices_handed_out() -> None:
    sim = Simulation(seed=1)
    objs = [node("a", {"dra.ksched.io/gpus": json.dumps({"count": 1, "shared": True})}),
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
             "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.ksched.io"'}}]}},
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "g", "exactly": {
                 "deviceClassName": "gpu", "capacity": {"requests": {"milli": "500"}}}}]}}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
             "spec": {"containers": [{"name": "c", "image": "i"}],
                      "resourceClaims": [{"name": "g", "resourceClaimName": "c"}]}}]
    assert not sim.load(objs)
    sim.run(max_seconds=10)
    c = sim.store.get("ResourceClaim", "default", "c")
    assert isinstance(c, ResourceClaim)
    [st] = c.device_statuses
    assert (st["driver"], st["pool"], st["device"]) == ("gpu.ksched.io", "a", "gpu-0")
    assert st["shareID"] == c.results[0]["shareID"] and st["conditions"][0]["type"] == "Ready"


@pytest.mark.parametrize(("ann", "msg"), [
    ({"dra.ksched.io/devices": "{nope"}, "node x: annotation dra.ksched.io/devices is not JSON"),
    ({"dra.ksched.io/devices": '[{"attributes": {}}]'}, "must be a list of devices with names"),
    ({"dra.ksched.io/gpus": '{"count": -1}'}, "non-negative integer count"),
])
def test_malformed_annotations_name_the_node(ann: dict[str, str], msg: str) -> None:
    with pytest.raises(DeviceSpecError, match=msg):
        node_devices(Node(node("x", ann)))
