"""Quota accounting (ksched.api.quota), against upstream's evaluators: what pods (init and
sidecar containers, pod-level resources, overhead, terminal pods), services, claims and other
objects use; which quotas cover an object (scopes); what a container must state; the message
forms quota admission prints."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.config import ConfigMap
from ksched.api.pod import Pod
from ksched.api.quantity import parse_quantity
from ksched.api.quota import (
    add,
    constraints,
    count_resource_name,
    less_than_or_equal,
    mask,
    matches,
    matching_resources,
    pretty_print,
    usage,
)
from ksched.api.resourcequota import ResourceQuota
from ksched.api.service import Service
from ksched.api.storage import PersistentVolumeClaim


def ctr(name: str = "c", req: dict[str, str] | None = None, lim: dict[str, str] | None = None,
        **extra: Any) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if req:
        res["requests"] = req
    if lim:
        res["limits"] = lim
    return {"name": name, "image": "i", "resources": res, **extra}


def pod(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None, phase: str = "Pending",
        **spec: Any) -> Pod:
    s: dict[str, Any] = {"containers": list(containers), **spec}
    if init:
        s["initContainers"] = init
    return Pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": s,
                "status": {"phase": phase}})


def shown(rl: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in rl.items()}


@pytest.mark.parametrize(("p", "want"), [
    (pod(ctr()), {"count/pods": "1", "pods": "1"}),
    (pod(ctr(req={"cpu": "100m", "memory": "64Mi"}, lim={"cpu": "1", "memory": "128Mi"})),
     {"count/pods": "1", "pods": "1", "cpu": "100m", "requests.cpu": "100m", "limits.cpu": "1",
      "memory": "64Mi", "requests.memory": "64Mi", "limits.memory": "128Mi"}),
    # Init containers: the max of the largest init container and the sum of the others.
    (pod(ctr(req={"cpu": "100m"}), ctr("d", req={"cpu": "200m"}), init=[ctr("i", req={"cpu": "250m"})]),
     {"count/pods": "1", "pods": "1", "cpu": "300m", "requests.cpu": "300m"}),
    (pod(ctr(req={"cpu": "100m"}), init=[ctr("i", req={"cpu": "500m"})]),
     {"count/pods": "1", "pods": "1", "cpu": "500m", "requests.cpu": "500m"}),
    # A restartable init container (sidecar) runs alongside: added to the sum.
    (pod(ctr(req={"cpu": "100m"}), init=[ctr("s", req={"cpu": "50m"}, restartPolicy="Always"),
                                         ctr("i", req={"cpu": "120m"})]),
     {"count/pods": "1", "pods": "1", "cpu": "170m", "requests.cpu": "170m"}),
    # Overhead: added to every request, to the limits that are set.
    (pod(ctr(req={"cpu": "100m"}, lim={"cpu": "200m"}), overhead={"cpu": "50m", "memory": "10Mi"}),
     {"count/pods": "1", "pods": "1", "cpu": "150m", "requests.cpu": "150m", "limits.cpu": "250m",
      "memory": "10Mi", "requests.memory": "10Mi"}),
    # Extended resources and hugepages.
    (pod(ctr(req={"nvidia.com/gpu": "2", "hugepages-2Mi": "4Mi", "memory": "1Gi"},
             lim={"nvidia.com/gpu": "2", "hugepages-2Mi": "4Mi", "memory": "1Gi"})),
     {"count/pods": "1", "pods": "1", "memory": "1Gi", "requests.memory": "1Gi", "limits.memory": "1Gi",
      "requests.nvidia.com/gpu": "2", "hugepages-2Mi": "4Mi", "requests.hugepages-2Mi": "4Mi"}),
    # Terminal pods use nothing but their object count.
    (pod(ctr(req={"cpu": "1"}), phase="Succeeded"), {"count/pods": "1"}),
    (pod(ctr(req={"cpu": "1"}), phase="Failed"), {"count/pods": "1"}),
])
def test_pod_usage(p: Pod, want: dict[str, str]) -> None:
    assert shown(usage(p, 0.0)) == want


def test_a_pod_past_its_deletion_grace_period_uses_nothing() -> None:
    raw = pod(ctr(req={"cpu": "1"})).deepcopy_raw()
    raw["metadata"].update(deletionTimestamp="2024-01-01T00:00:30Z", deletionGracePeriodSeconds=30)
    p = Pod(raw)
    t = p.deletion_timestamp
    assert t is not None
    assert "cpu" in usage(p, t + 30) and shown(usage(p, t + 31)) == {"count/pods": "1"}


@pytest.mark.parametrize(("spec", "want"), [
    ({"type": "ClusterIP", "ports": [{"port": 80}]}, {"count/services": "1", "services": "1"}),
    ({"type": "NodePort", "ports": [{"port": 80}, {"port": 443}]},
     {"count/services": "1", "services": "1", "services.nodeports": "2"}),
    ({"type": "LoadBalancer", "ports": [{"port": 80}]},
     {"count/services": "1", "services": "1", "services.nodeports": "1", "services.loadbalancers": "1"}),
    ({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": False, "ports": [{"port": 80}]},
     {"count/services": "1", "services": "1", "services.nodeports": "0", "services.loadbalancers": "1"}),
])
def test_service_usage(spec: dict[str, Any], want: dict[str, str]) -> None:
    svc = Service({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"}, "spec": spec})
    assert shown(usage(svc, 0.0)) == want


def test_claim_and_object_count_usage() -> None:
    pvc = PersistentVolumeClaim({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                 "metadata": {"name": "c", "namespace": "ns"},
                                 "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
                                          "resources": {"requests": {"storage": "10Gi"}}}})
    assert shown(usage(pvc, 0.0)) == {
        "count/persistentvolumeclaims": "1", "persistentvolumeclaims": "1", "requests.storage": "10Gi",
        "fast.storageclass.storage.k8s.io/persistentvolumeclaims": "1",
        "fast.storageclass.storage.k8s.io/requests.storage": "10Gi"}
    cm = ConfigMap({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}})
    assert shown(usage(cm, 0.0)) == {"count/configmaps": "1", "configmaps": "1"}
    assert count_resource_name(ResourceQuota) == "count/resourcequotas"


def quota(hard: dict[str, str], scopes: list[str] | None = None, selector: list[dict[str, Any]] | None = None,
          ns: str = "ns") -> ResourceQuota:
    spec: dict[str, Any] = {"hard": hard}
    if scopes:
        spec["scopes"] = scopes
    if selector:
        spec["scopeSelector"] = {"matchExpressions": selector}
    return ResourceQuota({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": ns},
                          "spec": spec, "status": {"hard": hard}})


BEST_EFFORT = pod(ctr())
BURSTABLE_TERMINATING = pod(ctr(req={"cpu": "1"}), activeDeadlineSeconds=60, priorityClassName="high")


@pytest.mark.parametrize(("q", "p", "want"), [
    (quota({"pods": "1"}), BEST_EFFORT, True),
    (quota({"pods": "1"}, ns="other"), BEST_EFFORT, False),
    (quota({"count/configmaps": "1"}), BEST_EFFORT, False),  # limits nothing a pod uses
    (quota({"pods": "1"}, ["BestEffort"]), BEST_EFFORT, True),
    (quota({"pods": "1"}, ["BestEffort"]), BURSTABLE_TERMINATING, False),
    (quota({"pods": "1"}, ["NotBestEffort", "Terminating"]), BURSTABLE_TERMINATING, True),
    (quota({"pods": "1"}, ["NotTerminating"]), BURSTABLE_TERMINATING, False),
    (quota({"pods": "1"}, selector=[{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]),
     BURSTABLE_TERMINATING, True),
    (quota({"pods": "1"}, selector=[{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]),
     BEST_EFFORT, False),
    (quota({"pods": "1"}, selector=[{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]),
     BEST_EFFORT, True),
    (quota({"pods": "1"}, selector=[{"scopeName": "PriorityClass", "operator": "Exists"}]), BEST_EFFORT, False),
])
def test_which_quotas_cover_a_pod(q: ResourceQuota, p: Pod, want: bool) -> None:
    assert matches(q, p) is want


def test_matching_resources_per_kind() -> None:
    names = ["pods", "requests.cpu", "limits.memory", "requests.nvidia.com/gpu", "hugepages-1Gi", "services",
             "count/configmaps", "requests.storage", "gold.storageclass.storage.k8s.io/requests.storage"]
    assert matching_resources(Pod, names) == ["pods", "requests.cpu", "limits.memory", "requests.nvidia.com/gpu",
                                              "hugepages-1Gi"]
    assert matching_resources(Service, names) == ["services"]
    assert matching_resources(ConfigMap, names) == ["count/configmaps"]
    assert matching_resources(PersistentVolumeClaim, names) == [
        "requests.storage", "gold.storageclass.storage.k8s.io/requests.storage"]


def test_containers_must_state_what_a_quota_limits() -> None:
    p = pod(ctr("app", req={"cpu": "1"}), ctr("side"), init=[ctr("init", req={"cpu": "1", "memory": "1Mi"})])
    assert constraints(p, ["pods", "limits.cpu", "requests.memory", "count/pods"]) == (
        "must specify limits.cpu for: app,init,side; requests.memory for: app,side")
    assert constraints(p, ["pods", "count/pods"]) is None
    assert constraints(ConfigMap({"metadata": {"name": "c"}}), ["limits.cpu"]) is None


def test_resource_list_helpers_and_pretty_printing() -> None:
    a = {"cpu": parse_quantity("500m"), "memory": parse_quantity("1Gi")}
    b = {"cpu": parse_quantity("1"), "pods": parse_quantity("2")}
    total = add(a, b)
    assert shown(total) == {"cpu": "1500m", "memory": "1Gi", "pods": "2"}
    assert shown(mask(total, ["cpu", "pods", "nope"])) == {"cpu": "1500m", "pods": "2"}
    assert less_than_or_equal(total, {"cpu": parse_quantity("1"), "memory": parse_quantity("2Gi")}) == (False, ["cpu"])
    assert pretty_print(total) == "cpu=1500m,memory=1Gi,pods=2"
