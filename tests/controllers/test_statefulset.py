"""The StatefulSet controller (ksched.controllers.statefulset) in a simulated cluster, against
upstream's pkg/controller/statefulset: ordinal names, identity (hostname, subdomain, labels),
claims ``<template>-<set>-<ordinal>`` bound by the PV controller and the scheduler's volume
binding, OrderedReady (one pod at a time, each waiting for its predecessors to be Running and
Ready) and Parallel, scaling down from the highest ordinal, failed pods re-created under their
name, rolling updates from the highest ordinal down to the partition, OnDelete, revisions and
status, upstream's events, the PVC retention policy's owner references."""

from __future__ import annotations

from typing import Any

from api_objects import events_of, mknode, mksts, pods_of, sc
from ksched.api.apps import ControllerRevision, StatefulSet
from ksched.api.pod import Pod
from ksched.api.storage import PersistentVolumeClaim
from ksched.sim.simulation import Simulation


def sim_with_nodes(n: int = 3, startup: float = 0.0) -> Simulation:
    sim = Simulation(seed=0)
    assert sim.kubelet is not None
    sim.kubelet.startup_delay = startup
    for i in range(n):
        sim.store.create(mknode(f"n{i + 1}"))
    return sim


def sts(sim: Simulation, name: str = "db") -> StatefulSet:
    s = sim.store.get("StatefulSet", "default", name)
    assert isinstance(s, StatefulSet)
    return s


def with_claims(raw: dict[str, Any], cls: str = "fast") -> dict[str, Any]:
    raw["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data", "labels": {"tier": "storage"}}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": cls, "resources": {"requests": {"storage": "1Gi"}}}}]
    return raw


def names(sim: Simulation, owner: str = "db", live: bool = False) -> list[str]:
    return [p.name for p in pods_of(sim.store, owner, "StatefulSet", live=live)]


def update(sim: Simulation, change: Any, name: str = "db") -> None:
    raw = sts(sim, name).deepcopy_raw()
    change(raw)
    sim.store.update(raw)


def test_pods_have_ordinal_identities_and_claims() -> None:
    sim = sim_with_nodes()
    sim.store.create(sc("fast", mode="WaitForFirstConsumer", provisioner="csi.example.com"))
    sim.store.create(with_claims(mksts("db", replicas=3)))
    sim.run()
    assert names(sim) == ["db-0", "db-1", "db-2"]
    s = sts(sim)
    for i, p in enumerate(pods_of(sim.store, "db")):
        spec = p.raw["spec"]
        assert (spec["hostname"], spec["subdomain"]) == (f"db-{i}", "db")
        assert {k: p.labels[k] for k in ("statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index")} == {
            "statefulset.kubernetes.io/pod-name": f"db-{i}", "apps.kubernetes.io/pod-index": str(i)}
        assert p.labels["controller-revision-hash"] == s.update_revision
        assert spec["volumes"][0] == {"name": "data", "persistentVolumeClaim": {"claimName": f"data-db-{i}"}}
        claim = sim.store.get("PersistentVolumeClaim", "default", f"data-db-{i}")
        assert isinstance(claim, PersistentVolumeClaim)
        assert claim.labels == {"tier": "storage", "app": "db"} and claim.phase == "Bound"
        assert claim.owner_references == ()  # Retain/Retain
        # WaitForFirstConsumer: provisioned for the node the scheduler chose.
        assert claim.annotations["volume.kubernetes.io/selected-node"] == p.node_name
        assert sim.store.get("PersistentVolume", "", claim.volume_name).raw["status"]["phase"] == "Bound"
        assert p.phase == "Running"
    (rev,) = [r for r in sim.store.items("ControllerRevision") if isinstance(r, ControllerRevision)]
    assert rev.name == s.update_revision == s.current_revision and rev.revision == 1
    assert rev.name.startswith("db-") and rev.labels["controller.kubernetes.io/hash"] == rev.name[3:]
    assert rev.data["spec"]["template"]["$patch"] == "replace"
    assert s.raw["status"] == {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "currentReplicas": 3,
                               "updatedReplicas": 3, "currentRevision": rev.name, "updateRevision": rev.name,
                               "collisionCount": 0, "availableReplicas": 3}
    assert events_of(sim.store, "db", "StatefulSet")[:2] == [
        ("Normal", "SuccessfulCreate", "create Claim data-db-0 Pod db-0 in StatefulSet db success"),
        ("Normal", "SuccessfulCreate", "create Pod db-0 in StatefulSet db successful")]


def test_ordered_ready_creates_one_pod_at_a_time() -> None:
    sim = sim_with_nodes(startup=5.0)
    seen: list[tuple[float, list[str]]] = []
    sim.store.after_write.append(lambda: seen.append((sim.clock.now(), names(sim))) if not seen or
                                 seen[-1][1] != names(sim) else None)
    sim.store.create(mksts("db", replicas=3))
    sim.run()
    t0 = seen[0][0]
    # Each pod is created once its predecessor is Running and Ready (5 s each).
    assert [(t - t0, n) for t, n in seen if n] == [(0.0, ["db-0"]), (5.0, ["db-0", "db-1"]),
                                                  (10.0, ["db-0", "db-1", "db-2"])]


def test_parallel_creates_all_at_once_and_start_ordinals() -> None:
    sim = sim_with_nodes(startup=5.0)
    sim.store.create(mksts("db", replicas=3, podManagementPolicy="Parallel", ordinals={"start": 5}))
    sim.run(max_seconds=1.0)
    assert names(sim) == ["db-5", "db-6", "db-7"]


def test_scale_down_from_the_highest_ordinal_one_at_a_time() -> None:
    sim = sim_with_nodes()
    sim.store.create(mksts("db", replicas=4))
    sim.run()
    deleted: list[str] = []
    sim.store.after_write.append(lambda: deleted.extend(
        p.name for p in pods_of(sim.store, "db") if p.deletion_timestamp is not None and p.name not in deleted))
    sim.store.patch_scale("StatefulSet", "default", "db", {"spec": {"replicas": 1}})
    sim.run()
    assert deleted == ["db-3", "db-2", "db-1"] and names(sim) == ["db-0"]
    assert [m for _, r, m in events_of(sim.store, "db") if r == "SuccessfulDelete"] == [
        "delete Pod db-3 in StatefulSet db successful", "delete Pod db-2 in StatefulSet db successful",
        "delete Pod db-1 in StatefulSet db successful"]


def test_a_failed_pod_is_recreated_under_its_name() -> None:
    sim = sim_with_nodes()
    sim.store.create(mksts("db", replicas=2))
    sim.run()
    p = sim.store.get("Pod", "default", "db-1")
    raw = p.deepcopy_raw()
    raw["status"]["phase"] = "Failed"
    sim.store.update_status(raw)
    sim.run()
    again = sim.store.get("Pod", "default", "db-1")
    assert isinstance(again, Pod) and again.uid != p.uid and again.phase == "Running"


def test_rolling_update_from_the_highest_ordinal_down_to_the_partition() -> None:
    sim = sim_with_nodes()
    sim.store.create(mksts("db", replicas=4, updateStrategy={"type": "RollingUpdate",
                                                             "rollingUpdate": {"partition": 1}}))
    sim.run()
    old_rev = sts(sim).current_revision
    order: list[str] = []
    sim.store.after_write.append(lambda: order.extend(
        p.name for p in pods_of(sim.store, "db") if p.deletion_timestamp is not None and p.name not in order))

    def image(raw: dict[str, Any]) -> None:
        raw["spec"]["template"]["spec"]["containers"][0]["image"] = "img:2"

    update(sim, image)
    sim.run()
    s = sts(sim)
    assert order == ["db-3", "db-2", "db-1"]  # db-0 is below the partition
    revs = {p.name: p.labels["controller-revision-hash"] for p in pods_of(sim.store, "db")}
    assert revs == {"db-0": old_rev, "db-1": s.update_revision, "db-2": s.update_revision,
                    "db-3": s.update_revision}
    assert (s.current_revision, s.updated_replicas, s.current_replicas) == (old_rev, 3, 1)
    # Partition 0 finishes the rollout: the current revision becomes the update revision.
    update(sim, lambda raw: raw["spec"]["updateStrategy"]["rollingUpdate"].update(partition=0))
    sim.run()
    s = sts(sim)
    assert s.current_revision == s.update_revision and s.current_replicas == 4 and s.updated_replicas == 4
    revisions = sorted((r.revision, r.name) for r in sim.store.items("ControllerRevision"))
    assert [n for _, n in revisions] == [old_rev, s.update_revision]


def test_on_delete_leaves_pods_until_they_are_deleted() -> None:
    sim = sim_with_nodes()
    sim.store.create(mksts("db", replicas=2, updateStrategy={"type": "OnDelete"}))
    sim.run()
    old = sts(sim).current_revision

    def image(raw: dict[str, Any]) -> None:
        raw["spec"]["template"]["spec"]["containers"][0]["image"] = "img:2"

    update(sim, image)
    sim.run()
    s = sts(sim)
    assert {p.labels["controller-revision-hash"] for p in pods_of(sim.store, "db")} == {old}
    assert s.update_revision != old
    sim.store.delete("Pod", "default", "db-1")
    sim.run()
    assert sim.store.get("Pod", "default", "db-1").labels["controller-revision-hash"] == s.update_revision


def test_rolling_back_reuses_the_earlier_revision() -> None:
    sim = sim_with_nodes()
    sim.store.create(mksts("db", replicas=1))
    sim.run()
    first = sts(sim).update_revision

    def image(v: str) -> Any:
        def change(raw: dict[str, Any]) -> None:
            raw["spec"]["template"]["spec"]["containers"][0]["image"] = v
        return change

    update(sim, image("img:2"))
    sim.run()
    update(sim, image("img"))
    sim.run()
    s = sts(sim)
    assert s.update_revision == first
    rev = sim.store.get("ControllerRevision", "default", first)
    assert isinstance(rev, ControllerRevision) and rev.revision == 3


def test_retention_policy_owner_references() -> None:
    sim = sim_with_nodes()
    sim.store.create(sc("fast", mode="Immediate", provisioner="csi.example.com"))
    raw = with_claims(mksts("db", replicas=2, persistentVolumeClaimRetentionPolicy={
        "whenDeleted": "Delete", "whenScaled": "Delete"}))
    sim.store.create(raw)
    sim.run()
    s = sts(sim)
    for i in (0, 1):
        c = sim.store.get("PersistentVolumeClaim", "default", f"data-db-{i}")
        assert [(r.kind, r.name, r.uid, r.controller) for r in c.owner_references] == [
            ("StatefulSet", "db", s.uid, True)]
    sim.store.patch_scale("StatefulSet", "default", "db", {"spec": {"replicas": 1}})
    # The condemned pod's claim is handed to the pod (still terminating) ...
    c = sim.store.get("PersistentVolumeClaim", "default", "data-db-1")
    doomed = [p for p in pods_of(sim.store, "db") if p.name == "db-1"]
    assert [(r.kind, r.name) for r in c.owner_references] == [("Pod", "db-1")]
    assert doomed and doomed[0].deletion_timestamp is not None and c.owner_references[0].uid == doomed[0].uid
    # ... and the garbage collector deletes it once the pod is gone; the kept ordinal's stays.
    sim.run()
    claims = sorted(c.name for c in sim.store.items("PersistentVolumeClaim"))
    assert claims == ["data-db-0"]
