"""The scheduler_perf DRA workloads (dra/performance-config.yaml) at tiny sizes: the devices
bound what fits, as upstream's counts are chosen so the cluster fills up completely."""

from __future__ import annotations

from ksched.clock import VirtualClock
from ksched.sim.bench import WORKLOADS, allocate_claims, run_workload
from ksched.sim.cluster import EmbeddedCluster
from ksched.sim.workloads import (
    dra_claim,
    dra_device_class,
    dra_extended_resource_classes,
    dra_resource_slice,
    node_with_dra_test_driver,
    pod_with_claim_ref,
    pod_with_extended_resource,
)


def test_claim_template_pods_fill_the_devices_and_no_more() -> None:
    # 2 nodes x 10 devices: 10 init pods, then 11 measured for the 10 devices left.
    out = run_workload(WORKLOADS["SchedulingWithResourceClaimTemplate"](), "small", nodes=2, init=10, measured=11,
                       timeout=120)
    assert out["init_scheduled"] == 10
    assert out["measured_scheduled"] == 10
    assert out["cache_consistent"]


def test_five_pods_share_each_claim() -> None:
    # 2 nodes x 2 devices: 10 + 10 pods use 2 + 2 shared claims, one device each.
    out = run_workload(WORKLOADS["SchedulingWithResourceClaim"](), "small", nodes=2, init=10, measured=10,
                       timeout=120)
    assert (out["init_scheduled"], out["measured_scheduled"]) == (10, 10)
    # A sixth claim's pods would need a fifth device.
    out = run_workload(WORKLOADS["SchedulingWithResourceClaim"](), "small", nodes=2, init=10, measured=15,
                       timeout=120)
    assert out["measured_scheduled"] == 10


def test_templates_as_upstream() -> None:
    s = dra_resource_slice(3, 2)
    assert s["metadata"]["name"] == s["spec"]["nodeName"] == s["spec"]["pool"]["name"] == "scheduler-perf-dra-3"
    assert [d["name"] for d in s["spec"]["devices"]] == ["instance-0", "instance-1"]
    assert s["spec"]["devices"][1]["attributes"]["dra.example.com/numa"] == {"int": 1}
    first = pod_with_claim_ref("measured-10", "test")
    assert [o["kind"] for o in first] == ["ResourceClaim", "Pod"] and first[0]["metadata"]["name"] == "test-claim-2"
    later = pod_with_claim_ref("measured-14", "test")
    assert len(later) == 1 and later[0]["spec"]["resourceClaims"][0]["resourceClaimName"] == "test-claim-2"


def test_steady_state_frees_the_devices_of_each_batch() -> None:
    # 1 node x 10 devices, batches of 10: every batch needs the devices the previous one freed.
    out = run_workload(WORKLOADS["SteadyStateClusterResourceClaimTemplate"](), "small", nodes=1, timeout=120,
                       batches=3)
    assert (out["init_pods"], out["measured_pods"], out["measured_scheduled"]) == (0, 30, 30)
    assert out["cache_consistent"]


def test_steady_state_with_pre_allocated_claims() -> None:
    # 2 nodes x 10 devices, 15 claims allocated without pods: 5 devices left for each batch.
    out = run_workload(WORKLOADS["SteadyStateClusterResourceClaimTemplateFull"](), "small", nodes=2, init=15,
                       timeout=120, batches=2)
    assert (out["measured_pods"], out["measured_scheduled"]) == (20, 10)


def test_alloc_resource_claims_fills_nodes_in_name_order() -> None:
    w = WORKLOADS["SteadyStateClusterResourceClaimTemplateHalf"]()
    assert [p.count for p in w.init] == [2500] and w.small_init == [500] and w.steady is not None
    assert w.steady.duration == 10.0 and w.measured.count == 10 and w.nodes == 500 and w.small_nodes == 100
    cluster = EmbeddedCluster(VirtualClock(), controllers=(), auto_create_namespaces=True)
    store = cluster.store
    for i in range(2):
        store.create(node_with_dra_test_driver(i))
        store.create(dra_resource_slice(i, 10))
    store.create(dra_device_class())
    for i in range(12):
        store.create(dra_claim(f"claim-{i:02d}", "init"))
    assert allocate_claims(store, "init") == 12
    pools = [c.results[0]["pool"] for c in sorted(store.items("ResourceClaim"), key=lambda c: c.name)]
    assert pools == ["scheduler-perf-dra-0"] * 10 + ["scheduler-perf-dra-1"] * 2
    devices = {(c.results[0]["pool"], c.results[0]["device"]) for c in store.items("ResourceClaim")}
    assert len(devices) == 12
    assert all(not c.reserved_for for c in store.items("ResourceClaim"))


def test_extended_resource_pods_get_dra_devices() -> None:
    # 1 node x 10 devices, no example.com/gpu-<i> in its allocatable: 3 init pods, then 7 of 8.
    out = run_workload(WORKLOADS["SchedulingWithExtendedResource"](), "small", nodes=1, init=3, measured=8,
                       timeout=120)
    assert (out["init_scheduled"], out["measured_scheduled"]) == (3, 7)
    assert out["cache_consistent"]


def test_extended_resource_templates_as_upstream() -> None:
    classes = dra_extended_resource_classes(3)
    assert [(c["metadata"]["name"], c["spec"]["extendedResourceName"]) for c in classes] == [
        ("test-class-0", "example.com/gpu-0"), ("test-class-1", "example.com/gpu-1"),
        ("test-class-2", "example.com/gpu-2")]
    pod = pod_with_extended_resource("measured-7", "test")
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"example.com/gpu-7": "1"},
                                                         "limits": {"example.com/gpu-7": "1"}}
