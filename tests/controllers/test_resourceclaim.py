"""The resourceclaim controller: claims from templates with upstream's naming, annotation,
labels and owner; the pod's resourceClaimStatuses; reservedFor cleanup that frees devices for
the next pod; generated claims of finished pods deleted, those of deleted pods left to the
garbage collector."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.pod import Pod
from ksched.api.resource import ANNOTATION_POD_CLAIM_NAME, ResourceClaim
from ksched.clock import VirtualClock
from ksched.controllers.resourceclaim import generate_name
from ksched.sim.cluster import EmbeddedCluster
from ksched.sim.simulation import Simulation

DRV = "gpu.example.com"


def objs(n_gpus: int = 1) -> list[dict[str, Any]]:
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
         "spec": {"metadata": {"labels": {"team": "ml"}},
                  "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}},
    ]


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}}


def claims(sim: Simulation) -> list[ResourceClaim]:
    return [c for c in sim.store.list("ResourceClaim")[0] if isinstance(c, ResourceClaim)]


def get_pod(sim: Simulation, name: str) -> Pod:
    p = sim.store.get("Pod", "default", name)
    assert isinstance(p, Pod)
    return p


@pytest.mark.parametrize(("pod_name", "claim", "want"), [
    ("p", "gpu", "p-gpu-"),
    ("a" * 40, "b" * 40, "a" * 28 + "-" + "b" * 28 + "-"),
    ("a" * 60, "c", "a" * 56 + "-"),  # the claim part is cut to nothing and the trailing '-' dropped
])
def test_generate_name(pod_name: str, claim: str, want: str) -> None:
    assert generate_name(pod_name, claim) == want


def test_claim_from_template_is_created_reported_and_allocated() -> None:
    sim = Simulation(seed=1)
    assert not sim.load([*objs(), pod("p")])
    sim.run(max_seconds=60)
    p = get_pod(sim, "p")
    [c] = claims(sim)
    assert c.name.startswith("p-gpu-") and len(c.name) == len("p-gpu-") + 5
    assert c.annotations[ANNOTATION_POD_CLAIM_NAME] == "gpu" and c.labels == {"team": "ml"}
    [owner] = c.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Pod", "p", p.uid, True)
    assert p.raw["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": c.name}]
    assert p.node_name == "n1"
    assert c.results[0]["device"] == "gpu-0" and c.reserved_for[0]["uid"] == p.uid


def test_deleted_pod_frees_its_device_for_the_next() -> None:
    sim = Simulation(seed=1)
    assert not sim.load([*objs(), pod("first"), pod("second")])
    sim.run(max_seconds=60)
    bound = [n for n in ("first", "second") if get_pod(sim, n).node_name]
    assert len(bound) == 1
    waiting = "second" if bound == ["first"] else "first"
    sim.store.delete("Pod", "default", bound[0], grace_period_seconds=0)
    sim.run(max_seconds=600)
    assert get_pod(sim, waiting).node_name == "n1"
    # The first pod's claim went with it; the second's holds the device.
    [c] = claims(sim)
    assert c.owner_references[0].name == waiting and c.results[0]["device"] == "gpu-0"


def test_reserved_for_cleanup_deallocates_a_shared_claim() -> None:
    sim = Simulation(seed=1)
    shared = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
              "metadata": {"name": "shared", "namespace": "default"},
              "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}
    users = []
    for n in ("a", "b"):
        p = pod(n)
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
        users.append(p)
    assert not sim.load([*objs(), shared, *users])
    sim.run(max_seconds=60)
    c = sim.store.get("ResourceClaim", "default", "shared")
    assert isinstance(c, ResourceClaim) and len(c.reserved_for) == 2
    sim.store.delete("Pod", "default", "a", grace_period_seconds=0)
    sim.run(max_seconds=60)
    c = sim.store.get("ResourceClaim", "default", "shared")
    assert isinstance(c, ResourceClaim) and [r["name"] for r in c.reserved_for] == ["b"] and c.allocation
    sim.store.delete("Pod", "default", "b", grace_period_seconds=0)
    sim.run(max_seconds=60)
    c = sim.store.get("ResourceClaim", "default", "shared")
    assert isinstance(c, ResourceClaim) and not c.reserved_for and c.allocation is None and not c.finalizers


def _cluster(*controllers: str) -> EmbeddedCluster:
    c = EmbeddedCluster(VirtualClock(0.0), controllers=controllers, auto_create_namespaces=True)
    for o in objs():
        c.store.create(o)
    c.store.create(pod("p"))
    return c


def _generated(c: EmbeddedCluster) -> list[ResourceClaim]:
    return [o for o in c.store.list("ResourceClaim")[0] if isinstance(o, ResourceClaim)]


def test_a_deleted_pods_claim_is_left_to_the_garbage_collector() -> None:
    """As upstream: the resourceclaim controller does not delete a claim whose pod it cannot
    find (it may not have seen the pod yet); the garbage collector deletes the pod's dependents."""
    alone = _cluster("resourceclaim")
    assert len(_generated(alone)) == 1
    alone.store.delete("Pod", "default", "p", grace_period_seconds=0)
    assert len(_generated(alone)) == 1
    with_gc = _cluster("resourceclaim", "garbage-collector")
    assert len(_generated(with_gc)) == 1
    with_gc.store.delete("Pod", "default", "p", grace_period_seconds=0)
    with_gc.store.finalize_expired()
    assert _generated(with_gc) == []


def test_a_finished_pods_claim_is_deleted_by_the_resourceclaim_controller() -> None:
    c = _cluster("resourceclaim")
    assert len(_generated(c)) == 1
    raw = c.store.get("Pod", "default", "p").deepcopy_raw()
    raw.setdefault("status", {})["phase"] = "Succeeded"
    c.store.update_status(raw)
    assert _generated(c) == []
