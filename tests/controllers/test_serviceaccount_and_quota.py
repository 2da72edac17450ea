"""The serviceaccount controller (a default ServiceAccount in every active namespace, made again
when deleted) and the resourcequota controller (status.hard and status.used computed when a
quota is created or its limits change, usage given back when objects go or pods finish), run by
the embedded cluster after every write."""

from __future__ import annotations

import re
from typing import Any

import pytest

from api_objects import mkpod
from ksched.api.errors import Forbidden
from ksched.apiserver.store import Store
from ksched.sim.cluster import EmbeddedCluster


def accounts(store: Store) -> list[str]:
    return sorted(o.key for o in store.items("ServiceAccount"))


def test_every_namespace_gets_a_default_service_account(store: Store) -> None:
    assert accounts(store) == ["default/default", "kube-node-lease/default", "kube-public/default",
                               "kube-system/default"]
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    assert "team/default" in accounts(store)
    store.delete("ServiceAccount", "team", "default")
    assert "team/default" in accounts(store)  # made again
    store.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "team"}})
    store.delete("ServiceAccount", "team", "robot")
    assert "team/robot" not in accounts(store)


def test_no_account_is_made_in_a_terminating_namespace() -> None:
    from ksched.clock import VirtualClock

    c = EmbeddedCluster(VirtualClock(), controllers=["serviceaccount"])
    c.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone"},
                    "status": {"phase": "Terminating"}}, existing=True)
    c.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "here"},
                    "status": {"phase": "Active"}}, existing=True)
    assert "gone/default" not in accounts(c.store) and "here/default" in accounts(c.store)


def quota(hard: dict[str, str], name: str = "q", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": "default"},
            "spec": {"hard": hard, **spec}}


def status(store: Store, name: str = "q") -> dict[str, Any]:
    return store.get("ResourceQuota", "default", name).raw["status"]  # type: ignore[no-any-return]


def cpu_pod(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return mkpod(name, containers=[{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}], **spec)


def test_usage_is_computed_when_a_quota_appears(store: Store) -> None:
    store.create(cpu_pod("a", "250m"))
    store.create(cpu_pod("b", "250m", activeDeadlineSeconds=30))
    store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    store.create(quota({"pods": "10", "requests.cpu": "2", "count/configmaps": "5", "services": "1"}))
    assert status(store) == {"hard": {"pods": "10", "requests.cpu": "2", "count/configmaps": "5", "services": "1"},
                             "used": {"count/configmaps": "1", "pods": "2", "requests.cpu": "500m", "services": "0"}}
    store.create(quota({"pods": "10"}, name="terminating", scopes=["Terminating"]))
    assert status(store, "terminating")["used"] == {"pods": "1"}


def test_usage_follows_creations_deletions_and_finished_pods(store: Store) -> None:
    store.create(quota({"pods": "2", "requests.cpu": "1"}))
    store.create(cpu_pod("a", "400m"))
    store.create(cpu_pod("b", "400m"))
    assert status(store)["used"] == {"pods": "2", "requests.cpu": "800m"}
    with pytest.raises(Forbidden, match=re.escape("exceeded quota: q, requested: pods=1,requests.cpu=300m, used: "
                                        "pods=2,requests.cpu=800m, limited: pods=2,requests.cpu=1")):
        store.create(cpu_pod("c", "300m"))
    store.delete("Pod", "default", "a")
    assert status(store)["used"] == {"pods": "1", "requests.cpu": "400m"}
    store.patch("Pod", "default", "b", {"status": {"phase": "Succeeded"}}, subresource="status")
    assert status(store)["used"] == {"pods": "0", "requests.cpu": "0"}
    store.create(cpu_pod("c", "1"))


def test_changed_limits_are_counted_again(store: Store) -> None:
    store.create(quota({"pods": "5"}))
    store.create(cpu_pod("a", "1"))
    store.patch("ResourceQuota", "default", "q", {"spec": {"hard": {"pods": "5", "requests.cpu": "4"}}})
    assert status(store) == {"hard": {"pods": "5", "requests.cpu": "4"}, "used": {"pods": "1", "requests.cpu": "1"}}


def test_object_counts_of_any_kind(store: Store) -> None:
    store.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"},
                  "value": 1})
    store.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"},
                  "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}})
    store.create(quota({"count/poddisruptionbudgets.policy": "1"}))
    assert status(store)["used"] == {"count/poddisruptionbudgets.policy": "1"}
    with pytest.raises(Forbidden, match="exceeded quota"):
        store.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "c"},
                      "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}})
    store.delete("PodDisruptionBudget", "default", "b")
    assert status(store)["used"] == {"count/poddisruptionbudgets.policy": "0"}
