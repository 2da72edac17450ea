"""The scheduler_perf DRA workloads (dra/performance-config.yaml) at tiny sizes: the devices
bound what fits, as upstream's counts are chosen so the cluster fills up completely."""

from __future__ import annotations

from ksched.sim.bench import WORKLOADS, run_workload
from ksched.sim.workloads import dra_resource_slice, pod_with_claim_ref


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
