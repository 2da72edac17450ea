"""Namespace lifecycle: the API server marks a deleted namespace Terminating and refuses new
content in it; the namespace controller (pkg/controller/namespace) empties it five seconds later,
records upstream's deletion conditions, waits for terminating pods and finalizers, and removes
the ``kubernetes`` finalizer, after which the namespace is gone. default, kube-system and
kube-public may not be deleted."""

from __future__ import annotations

from typing import Any

import pytest

from api_objects import mknode, mkpod
from embedded import advance, settle
from ksched.api.errors import Forbidden, NotFound
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.controllers.namespace import NAMESPACE_DELETION_GRACE_PERIOD
from ksched.sim.cluster import EmbeddedCluster


def mkns(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


@pytest.fixture
def cluster(clock: VirtualClock) -> EmbeddedCluster:
    return EmbeddedCluster(clock, controllers=["namespace", "garbage-collector"])


def conditions(store: Store, ns: str) -> dict[str, tuple[str, str, str]]:
    raw = store.get("Namespace", "", ns).raw
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in raw["status"].get("conditions") or ()}


def test_a_new_namespace_is_active_with_the_kubernetes_finalizer(store: Store) -> None:
    ns = store.create(mkns("team-a"))
    assert ns.raw["spec"] == {"finalizers": ["kubernetes"]}
    assert ns.raw["status"] == {"phase": "Active"}


def test_deleting_a_namespace_marks_it_terminating_then_the_controller_empties_it(
        cluster: EmbeddedCluster, clock: VirtualClock) -> None:
    s = cluster.store
    s.create(mkns("team-a"))
    s.create(mkpod("a", ns="team-a"))
    s.create(mkpod("b", ns="team-a"))
    s.create(mkpod("c"))
    ns = s.delete("Namespace", "", "team-a")
    assert ns.deletion_timestamp == clock.now() and ns.raw["status"]["phase"] == "Terminating"
    # Nothing is deleted during the namespace controller's grace period ...
    advance(cluster, NAMESPACE_DELETION_GRACE_PERIOD - 0.001)
    assert sorted(p.key for p in s.items("Pod")) == ["default/c", "team-a/a", "team-a/b"]
    # ... and nothing new may be created meanwhile.
    with pytest.raises(Forbidden) as ei:
        s.create(mkpod("d", ns="team-a"))
    assert ei.value.message == ('pods "d" is forbidden: unable to create new content in namespace team-a because '
                                "it is being terminated")
    assert ei.value.causes == [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                "message": "unable to create new content in namespace team-a because it is being "
                                           "terminated"}]
    advance(cluster, 0.001)
    assert [p.key for p in s.items("Pod")] == ["default/c"]
    assert s.try_get("Namespace", "", "team-a") is None


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
def test_the_system_namespaces_may_not_be_deleted(store: Store, name: str) -> None:
    with pytest.raises(Forbidden) as ei:
        store.delete("Namespace", "", name)
    assert ei.value.message == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
    assert store.get("Namespace", "", name).deletion_timestamp is None


def test_kube_node_lease_may_be_deleted(cluster: EmbeddedCluster) -> None:
    cluster.store.delete("Namespace", "", "kube-node-lease")
    advance(cluster, NAMESPACE_DELETION_GRACE_PERIOD)
    assert cluster.store.try_get("Namespace", "", "kube-node-lease") is None


def test_terminating_pods_are_waited_for_with_upstreams_estimate(cluster: EmbeddedCluster) -> None:
    s = cluster.store
    s.create(mkns("team-a"))
    s.create(mknode("n1"))
    s.create(mkpod("p", ns="team-a"))
    s.bind("team-a", "p", "n1")  # bound: deleted with its 30 s grace period (no kubelet here)
    s.delete("Namespace", "", "team-a")
    advance(cluster, 5)
    assert s.get("Pod", "team-a", "p").deletion_timestamp is not None
    assert conditions(s, "team-a") == {
        "NamespaceDeletionDiscoveryFailure": ("False", "ResourcesDiscovered", "All resources successfully discovered"),
        "NamespaceDeletionGroupVersionParsingFailure": ("False", "ParsedGroupVersions",
                                                        "All legacy kube types successfully parsed"),
        "NamespaceDeletionContentFailure": ("False", "ContentDeleted",
                                            "All content successfully deleted, may be waiting on finalization"),
        "NamespaceContentRemaining": ("True", "SomeResourcesRemain",
                                      "Some resources are remaining: pods. has 1 resource instances"),
        "NamespaceFinalizersRemaining": ("False", "ContentHasNoFinalizers",
                                         "All content-preserving finalizers finished"),
    }
    # The status update at 5 s brings the namespace back after the 5 s grace period (10 s); the
    # estimate is 30 s (the pod's grace period, not yet over): looked at again 30/2 + 1 = 16 s
    # later (26 s) and again at 42 s -- the pod went at 35 s.
    advance(cluster, 36.9)
    assert s.try_get("Pod", "team-a", "p") is None
    assert s.get("Namespace", "", "team-a") is not None
    advance(cluster, 0.1)
    assert s.try_get("Namespace", "", "team-a") is None


def test_content_held_by_a_finalizer(cluster: EmbeddedCluster) -> None:
    s = cluster.store
    s.create(mkns("team-a"))
    raw = mkpod("held", ns="team-a")
    raw["metadata"]["finalizers"] = ["example.com/hold"]
    s.create(raw)
    s.delete("Namespace", "", "team-a")
    advance(cluster, 5)
    cond = conditions(s, "team-a")
    assert cond["NamespaceFinalizersRemaining"] == (
        "True", "SomeFinalizersRemain",
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")
    assert cond["NamespaceContentRemaining"][0] == "True"
    advance(cluster, 60)
    assert s.get("Namespace", "", "team-a").raw["status"]["phase"] == "Terminating"
    pod = s.get("Pod", "team-a", "held")
    s.update({**pod.raw, "metadata": {**pod.raw["metadata"], "finalizers": []}})
    advance(cluster, 15)
    assert s.try_get("Namespace", "", "team-a") is None


def test_finalize_subresource_on_a_bare_store() -> None:
    s = Store(VirtualClock())
    s.create(mkns("team-a"))
    s.create(mkpod("a", ns="team-a"))
    ns = s.delete("Namespace", "", "team-a")
    # Without a namespace controller the namespace stays Terminating, its content in place.
    assert s.delete("Namespace", "", "team-a").raw["status"]["phase"] == "Terminating"
    assert s.get("Pod", "team-a", "a") is not None
    # Only namespaces have a finalize subresource.
    with pytest.raises(NotFound, match=r"the server could not find the requested resource \(pods/finalize\)"):
        s.update(s.get("Pod", "team-a", "a").raw, "finalize")
    s.update({**ns.raw, "spec": {"finalizers": []}}, "finalize")
    assert s.try_get("Namespace", "", "team-a") is None


def test_orphan_propagation_on_a_namespace_waits_for_the_collector(cluster: EmbeddedCluster) -> None:
    s = cluster.store
    s.create(mkns("team-a"))
    ns = s.delete("Namespace", "", "team-a", propagation_policy="Orphan")
    assert ns.finalizers == ["orphan"]
    settle(cluster)
    advance(cluster, 5)
    assert s.try_get("Namespace", "", "team-a") is None
