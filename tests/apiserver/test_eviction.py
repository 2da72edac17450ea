"""pods/eviction with PodDisruptionBudgets (refused when the budget's status allows no
disruption), graceful deletion on a virtual clock, and finalizers. The budgets' status itself
is the disruption controller's (tests/controllers/test_disruption.py)."""

from __future__ import annotations

import pytest

from api_objects import WEB, mknode, mkpdb, mkpod, pdb, running
from ksched.api.errors import Conflict, InternalError, NotFound, TooManyRequests
from ksched.api.watch import DELETED, MODIFIED
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.sim.cluster import EmbeddedCluster


@pytest.fixture
def store(embedded_cluster: EmbeddedCluster) -> Store:
    s = embedded_cluster.store  # with the disruption controller keeping PDB status
    s.create(mknode("n1"))
    return s


# ---------------------------------------------------------------- eviction


def test_eviction_refused_with_429_when_the_budget_allows_none(store: Store) -> None:
    running(store, "a", {"app": "web"})
    running(store, "b", {"app": "web"})
    store.create(mkpdb("web", WEB, minAvailable=2))
    assert pdb(store).disruptions_allowed == 0
    with pytest.raises(TooManyRequests) as ei:
        store.evict("default", "a")
    e = ei.value
    assert e.code == 429 and "disruption budget" in e.message
    assert e.causes and e.causes[0]["reason"] == "DisruptionBudget"
    p = store.get("Pod", "default", "a")
    assert p.deletion_timestamp is None


def test_eviction_allowed_then_budget_used_up(store: Store, clock: VirtualClock) -> None:
    for n in "abc":
        running(store, n, {"app": "web"})
    store.create(mkpdb("web", WEB, minAvailable=2))
    assert pdb(store).disruptions_allowed == 1
    store.evict("default", "a")
    evicted = store.get("Pod", "default", "a")
    assert evicted.deletion_timestamp == clock.now() + 30  # bound pods go gracefully
    b = pdb(store)
    assert (b.disruptions_allowed, b.current_healthy, b.expected_pods) == (0, 2, 3)
    with pytest.raises(TooManyRequests):
        store.evict("default", "b")
    # The evicted pod goes away; a replacement becomes ready: one disruption allowed again.
    clock.advance(30)
    assert store.finalize_expired() == 1
    running(store, "d", {"app": "web"})
    assert pdb(store).disruptions_allowed == 1
    store.evict("default", "b")


def test_eviction_without_budget_or_of_pods_that_are_not_running(store: Store) -> None:
    running(store, "a", {"app": "web"})
    store.create(mkpdb("web", WEB, minAvailable=5))
    store.create(mkpod("pending", {"app": "web"}))  # Pending: the budget does not apply
    store.evict("default", "pending")
    assert store.try_get("Pod", "default", "pending") is None  # unbound: deleted at once
    running(store, "free", {"app": "other"})
    store.evict("default", "free", grace_period_seconds=0)
    assert store.try_get("Pod", "default", "free") is None
    with pytest.raises(NotFound):
        store.evict("default", "ghost")


def test_eviction_with_two_budgets_is_an_error(store: Store) -> None:
    running(store, "a", {"app": "web"})
    store.create(mkpdb("one", WEB, maxUnavailable=1))
    store.create(mkpdb("two", {}, maxUnavailable=1))
    with pytest.raises(InternalError) as ei:
        store.evict("default", "a")
    assert ei.value.code == 500


# ---------------------------------------------------------------- graceful deletion


def test_bound_pod_is_deleted_gracefully(store: Store, clock: VirtualClock) -> None:
    running(store, "a")
    w = store.watch("Pod", resource_version=store.resource_version)
    t0 = clock.now()
    p = store.delete("Pod", "default", "a")
    assert p.deletion_timestamp == t0 + 30 and p.deletion_grace_period_seconds == 30
    assert store.get("Pod", "default", "a").deletion_timestamp == t0 + 30
    assert store.next_deletion_deadline() == t0 + 30
    clock.advance(29)
    assert store.finalize_expired() == 0
    clock.advance(1)
    assert store.finalize_expired() == 1
    assert store.try_get("Pod", "default", "a") is None
    assert store.next_deletion_deadline() is None
    assert [e.type for e in w.drain()] == [MODIFIED, DELETED]


def test_grace_period_from_spec_request_and_shortening(store: Store, clock: VirtualClock) -> None:
    store.create(mkpod("a", terminationGracePeriodSeconds=120))
    store.bind("default", "a", "n1")
    t0 = clock.now()
    assert store.delete("Pod", "default", "a").deletion_timestamp == t0 + 120
    # Deleting again with a longer period changes nothing; a shorter one brings it forward.
    assert store.delete("Pod", "default", "a", grace_period_seconds=500).deletion_timestamp == t0 + 120
    assert store.delete("Pod", "default", "a", grace_period_seconds=5).deletion_timestamp == t0 + 5
    store.delete("Pod", "default", "a", grace_period_seconds=0)
    assert store.try_get("Pod", "default", "a") is None


def test_unbound_and_terminal_pods_go_at_once(store: Store) -> None:
    store.create(mkpod("pending"))
    store.delete("Pod", "default", "pending")
    assert store.try_get("Pod", "default", "pending") is None
    running(store, "done")
    store.patch("Pod", "default", "done", {"status": {"phase": "Succeeded"}}, subresource="status")
    store.delete("Pod", "default", "done")
    assert store.try_get("Pod", "default", "done") is None


def test_delete_preconditions(store: Store) -> None:
    p = store.create(mkpod("a"))
    with pytest.raises(Conflict):
        store.delete("Pod", "default", "a", uid="other")
    with pytest.raises(Conflict):
        store.delete("Pod", "default", "a", resource_version="1")
    store.delete("Pod", "default", "a", uid=p.uid, resource_version=p.resource_version)
    assert store.try_get("Pod", "default", "a") is None


# ---------------------------------------------------------------- finalizers


def test_finalizers_hold_an_object_until_removed(store: Store) -> None:
    raw = mknode("n2")
    raw["metadata"]["finalizers"] = ["example.com/drain"]
    store.create(raw)
    w = store.watch("Node", resource_version=store.resource_version)
    n = store.delete("Node", "", "n2")
    assert n.deletion_timestamp is not None and store.get("Node", "", "n2").finalizers == ["example.com/drain"]
    # Other changes are still possible while it waits.
    store.patch("Node", "", "n2", {"metadata": {"labels": {"a": "b"}}})
    assert store.get("Node", "", "n2").deletion_timestamp is not None
    store.patch("Node", "", "n2", {"metadata": {"finalizers": None}})
    assert store.try_get("Node", "", "n2") is None
    assert [e.type for e in w.drain()] == [MODIFIED, MODIFIED, DELETED]


def test_finalizers_and_grace_period_on_a_pod(store: Store, clock: VirtualClock) -> None:
    raw = mkpod("a")
    raw["metadata"]["finalizers"] = ["example.com/x"]
    store.create(raw)
    store.bind("default", "a", "n1")
    store.delete("Pod", "default", "a", grace_period_seconds=10)
    # Finalizers removed before the grace period ends: the kubelet has not finished yet.
    store.patch("Pod", "default", "a", {"metadata": {"finalizers": None}})
    assert store.try_get("Pod", "default", "a") is not None
    clock.advance(10)
    assert store.finalize_expired() == 1
    assert store.try_get("Pod", "default", "a") is None
    # Grace period over but a finalizer left: finalize_expired leaves it to the finalizer.
    raw = mkpod("b")
    raw["metadata"]["finalizers"] = ["example.com/x"]
    store.create(raw)
    store.bind("default", "b", "n1")
    store.delete("Pod", "default", "b", grace_period_seconds=1)
    clock.advance(5)
    assert store.finalize_expired() == 0 and store.try_get("Pod", "default", "b") is not None
    store.patch("Pod", "default", "b", {"metadata": {"finalizers": []}})
    assert store.try_get("Pod", "default", "b") is None
