"""The ReplicaSet controller (ksched.controllers.replicaset) in an embedded cluster, against
upstream's replica_set.go: pods from the template with generateName ``<rs>-`` and a controller
reference, upstream's events, status (replicas, fully labeled, ready, available after
minReadySeconds on the cluster's clock, terminating, observedGeneration), surplus pods deleted
in ActivePodsWithRanks order, orphans adopted instead of new pods made, pods that no longer
match released, the ReplicaFailure condition, the burst limit."""

from __future__ import annotations

import re
from typing import Any

import pytest

from api_objects import events_of, mknode, mkpod, mkrs, pods_of
from ksched.api.apps import ReplicaSet
from ksched.api.meta import format_time
from ksched.api.pod import Pod
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.controllers import replicaset
from ksched.sim.cluster import EmbeddedCluster


@pytest.fixture
def store(store: Store) -> Store:
    for n in ("n1", "n2"):
        store.create(mknode(n))
    return store


def start(store: Store, pod: Pod, node: str = "n1", ready: bool = True) -> Pod:
    """What the scheduler and kubelet do: bind, then Running (and Ready) now."""
    if not pod.node_name:
        store.bind(pod.namespace, pod.name, node)
    raw = store.get("Pod", pod.namespace, pod.name).deepcopy_raw()
    ts = format_time(store.clock.now())
    raw["status"]["phase"] = "Running"
    raw["status"]["conditions"] = [c for c in raw["status"]["conditions"] if c["type"] != "Ready"] + [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ts}]
    out = store.update_status(raw)
    assert isinstance(out, Pod)
    return out


def rs(store: Store, name: str = "web") -> ReplicaSet:
    out = store.get("ReplicaSet", "default", name)
    assert isinstance(out, ReplicaSet)
    return out


def events(store: Store, name: str = "web") -> list[tuple[str, str, str]]:
    return events_of(store, name)


def test_creates_its_pods_with_a_controller_reference(store: Store) -> None:
    r = store.create(mkrs("web", replicas=3))
    pods = pods_of(store, "web")
    assert len(pods) == 3
    for p in pods:
        assert re.fullmatch(r"web-[bcdfghjklmnpqrstvwxz2456789]{5}", p.name)
        assert p.labels == {"app": "web"}
        ref = p.raw["metadata"]["ownerReferences"]
        assert ref == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": r.uid,
                        "controller": True, "blockOwnerDeletion": True}]
    assert events(store) == [("Normal", "SuccessfulCreate", f"Created pod: {p.name}") for p in
                             sorted(pods, key=lambda p: int(p.resource_version))]
    got = rs(store)
    assert got.raw["status"] == {"replicas": 3, "fullyLabeledReplicas": 3, "terminatingReplicas": 0,
                                 "observedGeneration": 1}


def test_status_counts_ready_and_available_pods_after_min_ready_seconds(
        store: Store, clock: VirtualClock, embedded_cluster: EmbeddedCluster) -> None:
    store.create(mkrs("web", replicas=2, minReadySeconds=10))
    a, b = pods_of(store, "web")
    start(store, a)
    start(store, b, ready=False)
    got = rs(store)
    assert (got.ready_replicas, got.available_replicas) == (1, 0)
    # The ReplicaSet re-syncs itself when the ready pod turns available.
    due = embedded_cluster.next_wakeup()
    assert due is not None and clock.now() + 10 <= due <= clock.now() + 11
    clock.advance_to(due)
    embedded_cluster.controllers.settle()
    assert (rs(store).ready_replicas, rs(store).available_replicas) == (1, 1)


def test_scale_down_deletes_in_rank_order(store: Store) -> None:
    store.create(mkrs("web", replicas=4))
    p = pods_of(store, "web")
    start(store, p[0], "n1")
    start(store, p[1], "n2", ready=False)
    start(store, p[2], "n2")
    # p[3] stays unscheduled.
    raw = rs(store).deepcopy_raw()
    raw["spec"]["replicas"] = 1
    store.update(raw)
    deleted = [m.removeprefix("Deleted pod: ") for _, reason, m in events(store) if reason == "SuccessfulDelete"]
    # Unscheduled first, then not ready, then (both ready) the one doubled up on n2.
    assert deleted == [p[3].name, p[1].name, p[2].name]
    live = [x for x in pods_of(store, "web") if x.deletion_timestamp is None]
    assert [x.name for x in live] == [p[0].name]
    got = rs(store)
    assert (got.status_replicas, got.terminating_replicas) == (1, 2)  # bound pods terminate gracefully


def test_adopts_orphans_instead_of_creating_pods(store: Store) -> None:
    for n in ("x", "y"):
        start(store, store.create(mkpod(n, {"app": "web"})))  # type: ignore[arg-type]
    store.create(mkpod("other", {"app": "db"}))
    r = store.create(mkrs("web", replicas=3))
    owned = pods_of(store, "web")
    assert {"x", "y"} <= {p.name for p in owned} and len(owned) == 3
    assert [e for e in events(store) if e[1] == "SuccessfulCreate"] != [] and \
        len([e for e in events(store) if e[1] == "SuccessfulCreate"]) == 1
    assert store.get("Pod", "default", "other").owner_references == ()
    assert all(p.controller_ref().uid == r.uid for p in owned)  # type: ignore[union-attr]


def test_releases_a_pod_whose_labels_no_longer_match(store: Store) -> None:
    store.create(mkrs("web", replicas=2))
    p = pods_of(store, "web")[0]
    raw = p.deepcopy_raw()
    raw["metadata"]["labels"] = {"app": "debug"}
    store.update(raw)
    assert store.get("Pod", "default", p.name).owner_references == ()
    assert len(pods_of(store, "web")) == 2  # and a replacement was made


def test_replica_failure_condition_and_recovery(store: Store, clock: VirtualClock,
                                                embedded_cluster: EmbeddedCluster) -> None:
    raw = mkrs("web", replicas=5)
    raw["spec"]["template"]["spec"]["priorityClassName"] = "gold"
    store.create(raw)
    got = rs(store)
    (cond,) = got.conditions
    assert {k: cond[k] for k in ("type", "status", "reason")} == {"type": "ReplicaFailure", "status": "True",
                                                                  "reason": "FailedCreate"}
    assert "no PriorityClass with name gold was found" in cond["message"]
    assert events(store)[0][:2] == ("Warning", "FailedCreate")
    assert events(store)[0][2].startswith("Error creating: ")
    # A slow start stops at the first failed batch: one attempt per sync, not five -- the sync
    # and the one its status update (the new condition) triggers.
    assert len([e for e in events(store) if e[1] == "FailedCreate"]) == 2
    store.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "gold"},
                  "value": 100})
    due = embedded_cluster.next_wakeup()
    assert due is not None
    clock.advance_to(due)
    embedded_cluster.controllers.settle()
    assert len(pods_of(store, "web")) == 5 and rs(store).conditions == []


def test_at_most_burst_replicas_per_sync(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replicaset, "BURST_REPLICAS", 3)
    created: list[int] = []
    store.after_write.insert(0, lambda: created.append(len(store.items("Pod"))))
    store.create(mkrs("web", replicas=7))
    assert len(pods_of(store, "web")) == 7
    # The sync that started from 0 stopped at 3; the next ones made the rest.
    assert 3 in created and 6 in created


def test_deleted_replicaset_is_forgotten(store: Store) -> None:
    store.create(mkrs("web", replicas=1))
    store.delete("ReplicaSet", "default", "web", propagation_policy="Orphan")
    # The garbage collector orphans the pod; the controller neither deletes nor replaces it.
    pods = [p for p in store.items("Pod") if isinstance(p, Pod)]
    assert len(pods) == 1 and not pods[0].owner_references


def test_deleted_replicaset_pods_go_with_it(store: Store) -> None:
    store.create(mkrs("web", replicas=2))
    store.delete("ReplicaSet", "default", "web")  # background propagation: the garbage collector
    assert pods_of(store, "web") == []




def test_a_simulation_syncs_once_per_instant_not_once_per_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler binds and the kubelet starts 60 pods at one virtual instant; the ReplicaSet
    re-counts its pods a handful of times, not once per binding and start."""
    from ksched.sim.simulation import Simulation

    sim = Simulation(seed=0)
    for n in ("n1", "n2"):
        sim.store.create(mknode(n))
    c = sim.cluster.controllers.controller("replicaset")
    synced: list[Any] = []
    real = c.sync
    monkeypatch.setattr(c, "sync", lambda key: (synced.append(key), real(key)))
    sim.store.create(mkrs("web", replicas=60))
    sim.run()
    assert len([p for p in pods_of(sim.store, "web") if p.phase == "Running"]) == 60
    assert 2 <= len(synced) <= 8


def test_pod_names_are_reproducible_for_a_seed() -> None:
    from ksched.sim.simulation import Simulation

    def names(seed: int) -> list[str]:
        sim = Simulation(seed=seed)
        sim.store.create(mknode("n1"))
        sim.store.create(mkrs("web", replicas=4))
        sim.run()
        return [p.name for p in pods_of(sim.store, "web")]

    assert names(1) == names(1) and names(1) != names(2)
