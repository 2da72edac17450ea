"""Validation with field paths, as the API server reports it; never a crash on junk."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ksched.api.errors import FieldError, Path, ValidationError
from ksched.api.kinds import KINDS, UnknownKindError, kind_class, parse_object
from ksched.api.pod import Pod
from ksched.api.resources import pod_non_zero_requests, pod_requests, qos_class
from ksched.api.validation import validate, validate_quantity


def errs(raw: Any) -> list[str]:
    return [str(e) for e in validate(raw)]


def pod(container: dict[str, Any] | None = None, name: str = "p", **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": [container or {"name": "c", "image": "img"}]}
    s.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": s}


def res(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {}
    if requests is not None:
        r["requests"] = requests
    if limits is not None:
        r["limits"] = limits
    return {"name": "c", "image": "img", "resources": r}


RICH_POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default", "labels": {"app": "x", "example.com/tier": "front"},
                 "annotations": {"a": "b"}},
    "spec": {
        "containers": [{"name": "c", "image": "i",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1",
                                                   "hugepages-2Mi": "2Mi"},
                                      "limits": {"nvidia.com/gpu": "1", "hugepages-2Mi": "2Mi", "memory": "1Gi"}},
                        "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]}],
        "initContainers": [{"name": "i", "image": "i", "restartPolicy": "Always"}],
        "overhead": {"cpu": "10m"},
        "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}},
        "nodeSelector": {"zone": "a"},
        "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 3},
                        {"operator": "Exists"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}],
                     "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}}]},
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "x", "operator": "Exists"}]},
                 "topologyKey": "zone", "namespaces": ["default"], "namespaceSelector": {}}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 3, "podAffinityTerm": {"labelSelector": {}, "topologyKey": "kubernetes.io/hostname"}}]}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                       "minDomains": 2, "labelSelector": {"matchLabels": {"a": "b"}},
                                       "nodeAffinityPolicy": "Honor", "nodeTaintsPolicy": "Ignore"}],
        "priority": 5, "preemptionPolicy": "Never", "schedulingGates": [{"name": "example.com/gate"}],
        "terminationGracePeriodSeconds": 3, "nodeName": "n1",
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}],
    },
}

VALID_OTHERS: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n.example"},
     "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoExecute"}]},
     "status": {"capacity": {"cpu": "1"}, "allocatable": {"cpu": "1", "pods": "110", "nvidia.com/gpu": "4"}}},
    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "d"},
     "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"a": "b"}}}},
    {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
     "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
              "nodeAffinity": {"required": {"nodeSelectorTerms": [
                  {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}]}}}},
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "d"},
     "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
              "selector": {"matchLabels": {"a": "b"}}}},
    {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n"},
     "spec": {"drivers": [{"name": "d", "allocatable": {"count": 3}}]}},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pc"}, "value": 10,
     "preemptionPolicy": "Never"},
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "sc"}, "provisioner": "x",
     "volumeBindingMode": "WaitForFirstConsumer"},
    {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l", "namespace": "d"},
     "spec": {"leaseDurationSeconds": 15}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "d"},
     "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
              "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}},
              "template": {"metadata": {"labels": {"app": "web"}},
                           "spec": {"containers": [{"name": "c", "image": "nginx",
                                                    "resources": {"requests": {"cpu": "100m"}}}]}}}},
    {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "d"},
     "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
              "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
              "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
              "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                  "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}},
    {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "d"},
     "spec": {"selector": {"matchLabels": {"app": "agent"}},
              "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
              "template": {"metadata": {"labels": {"app": "agent"}},
                           "spec": {"containers": [{"name": "c", "image": "x"}]}}}},
]


@pytest.mark.parametrize("raw", [RICH_POD, *VALID_OTHERS], ids=lambda r: r["kind"])
def test_valid_objects_have_no_errors(raw: dict[str, Any]) -> None:
    assert validate(raw) == []
    parse_object(raw)


# ---------------------------------------------------------------- quantities and resources


def test_invalid_quantity_has_the_field_path() -> None:
    e = validate(pod(res({"cpu": "1.2.3"})))
    assert [str(x) for x in e] == ['spec.containers[0].resources.requests.cpu: invalid quantity "1.2.3"']
    assert e[0].path == "spec.containers[0].resources.requests.cpu"
    assert e[0].reason == "FieldValueInvalid"


def test_invalid_quantity_in_init_container_limits_and_overhead() -> None:
    raw = pod(initContainers=[{"name": "i", "image": "x", "resources": {"limits": {"memory": "lots"}}}],
              overhead={"cpu": "x"})
    assert set(errs(raw)) == {'spec.initContainers[0].resources.limits.memory: invalid quantity "lots"',
                              'spec.overhead.cpu: invalid quantity "x"'}


def test_validate_quantity_helper() -> None:
    assert validate_quantity("1Gi") is None
    fe = validate_quantity("1.2.3", "spec.x")
    assert fe is not None and str(fe) == 'spec.x: invalid quantity "1.2.3"'


def test_request_must_not_exceed_limit() -> None:
    assert errs(pod(res({"cpu": "2"}, {"cpu": "1"}))) == [
        'spec.containers[0].resources.requests.cpu: Invalid value: "2": must be less than or equal to cpu limit of 1']
    assert errs(pod(res({"memory": "2Gi"}, {"memory": "1Gi"}))) == [
        'spec.containers[0].resources.requests.memory: Invalid value: "2Gi": must be less than or equal to memory '
        'limit of 1Gi']
    assert errs(pod(res({"cpu": "1", "memory": "1Gi"}, {"cpu": "1000m", "memory": "2Gi"}))) == []
    assert errs(pod(res({"cpu": "500m"}))) == []
    assert errs(pod(res(None, {"cpu": "1"}))) == []  # the request defaults to the limit


def test_negative_quantities_are_invalid() -> None:
    assert errs(pod(res({"cpu": "-1"}))) == [
        'spec.containers[0].resources.requests.cpu: Invalid value: "-1": must be greater than or equal to 0']


def test_hugepages_request_must_equal_limit() -> None:
    e = errs(pod(res({"memory": "1Gi", "hugepages-2Mi": "2Mi"}, {"hugepages-2Mi": "4Mi"})))
    assert e == ['spec.containers[0].resources.requests.hugepages-2Mi: Invalid value: "2Mi": must be equal to '
                 'hugepages-2Mi limit of 4Mi']
    assert errs(pod(res({"memory": "1Gi", "hugepages-2Mi": "2Mi"}, {"hugepages-2Mi": "2Mi"}))) == []
    assert errs(pod(res({"cpu": "1", "hugepages-1Gi": "2Gi"}, {"hugepages-1Gi": "2Gi"}))) == []


def test_hugepages_require_cpu_or_memory() -> None:
    e = validate(pod(res({"hugepages-2Mi": "2Mi"}, {"hugepages-2Mi": "2Mi"})))
    assert [str(x) for x in e] == ["spec.containers[0].resources: Forbidden: HugePages require cpu or memory"]
    assert e[0].reason == "FieldValueForbidden"


def test_hugepages_need_a_limit() -> None:
    assert errs(pod(res({"memory": "1Gi", "hugepages-2Mi": "2Mi"}))) == [
        "spec.containers[0].resources.limits.hugepages-2Mi: Required value: Limit must be set for non "
        "overcommitable resources"]


def test_hugepages_resource_name() -> None:
    e = errs(pod(res({"memory": "1Gi", "hugepages-huge": "2Mi"}, {"hugepages-huge": "2Mi"})))
    assert any("hugepages-huge" in x and "hugepages resource name" in x for x in e)


def test_extended_resources_are_integers_and_request_equals_limit() -> None:
    assert errs(pod(res({"nvidia.com/gpu": "0.5"}, {"nvidia.com/gpu": "0.5"}))) == [
        'spec.containers[0].resources.requests.nvidia.com/gpu: Invalid value: "500m": must be an integer',
        'spec.containers[0].resources.limits.nvidia.com/gpu: Invalid value: "500m": must be an integer']
    assert errs(pod(res({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"}))) == [
        'spec.containers[0].resources.requests.nvidia.com/gpu: Invalid value: "1": must be equal to nvidia.com/gpu '
        'limit of 2']
    assert errs(pod(res({"nvidia.com/gpu": "1"}))) == [
        "spec.containers[0].resources.limits.nvidia.com/gpu: Required value: Limit must be set for non "
        "overcommitable resources"]
    assert errs(pod(res({"nvidia.com/gpu": 2}, {"nvidia.com/gpu": 2}))) == []
    assert errs(pod(res(None, {"example.com/foo": "3"}))) == []


def test_resource_names_must_be_qualified() -> None:
    e = errs(pod(res({"bad/name/x": "1"}, {"bad/name/x": "1"})))
    assert any("must be a standard resource type or fully qualified" in x for x in e)


# ---------------------------------------------------------------- names and metadata


@pytest.mark.parametrize(("name", "ok"), [
    ("web", True), ("web-1", True), ("a.b-c", True), ("0abc", True), ("a" * 253, True),
    ("Bad_Name", False), ("-a", False), ("a-", False), ("UPPER", False), ("a" * 254, False), ("a..b", False),
    ("a b", False),
])
def test_pod_names_are_dns1123_subdomains(name: str, ok: bool) -> None:
    e = validate(pod(name=name))
    assert (e == []) is ok
    if not ok:
        assert e[0].path == "metadata.name"
        assert "RFC 1123 subdomain" in e[0].message


def test_namespace_names_are_dns1123_labels() -> None:
    assert validate({"kind": "Namespace", "metadata": {"name": "team-a"}}) == []
    e = validate({"kind": "Namespace", "metadata": {"name": "team.a"}})
    assert e and e[0].path == "metadata.name" and "RFC 1123 label" in e[0].message
    e = validate({"kind": "Pod", "metadata": {"name": "p", "namespace": "Bad"}, "spec": RICH_POD["spec"]})
    assert [x.path for x in e] == ["metadata.namespace"]


def test_container_names_are_dns1123_labels_and_unique() -> None:
    e = errs(pod({"name": "Bad.Name", "image": "i"}))
    assert e and e[0].startswith('spec.containers[0].name: Invalid value: "Bad.Name"')
    raw = pod(initContainers=[{"name": "c", "image": "i"}])
    assert errs(raw) == ['spec.containers[0].name: Duplicate value: "c"']


def test_name_or_generate_name_required() -> None:
    raw = pod()
    del raw["metadata"]["name"]
    assert errs(raw) == ["metadata.name: Required value: name or generateName is required"]
    raw["metadata"]["generateName"] = "web-"
    assert errs(raw) == []


def test_required_fields() -> None:
    assert errs({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}) == [
        "spec.containers: Required value"]
    assert errs({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}) == [
        "spec.containers[0].image: Required value"]
    assert errs({"kind": "Pod", "metadata": {"name": "p"}}) == ["spec: Required value"]


def test_labels_and_namespace_on_cluster_scoped_kinds() -> None:
    raw = pod()
    raw["metadata"]["labels"] = {"ok": "v", "bad key!": "v", "k": "bad value!", "example.com/x": "v" * 64}
    e = errs(raw)
    assert len(e) == 3
    assert all(x.startswith("metadata.labels") for x in e)
    e = validate({"kind": "Node", "metadata": {"name": "n", "namespace": "default"}})
    assert [(x.path, x.reason) for x in e] == [("metadata.namespace", "FieldValueForbidden")]


# ---------------------------------------------------------------- tolerations


def test_tolerations() -> None:
    raw = pod(tolerations=[
        {"key": "k", "operator": "Exists", "value": "v"},
        {"operator": "Equal", "value": "x"},
        {"key": "a", "effect": "Bad"},
        {"key": "b", "effect": "NoSchedule", "tolerationSeconds": 5},
        {"key": "c", "operator": "Sometimes"},
        {"key": "bad key!"},
        {"operator": "Exists"},
        {"key": "d", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
        {"key": "e", "value": "v", "effect": "NoSchedule"},
    ])
    e = validate(raw)
    assert [(x.path, x.reason) for x in e] == [
        ("spec.tolerations[0].operator", "FieldValueInvalid"),
        ("spec.tolerations[1].operator", "FieldValueInvalid"),
        ("spec.tolerations[2].effect", "FieldValueNotSupported"),
        ("spec.tolerations[3].effect", "FieldValueInvalid"),
        ("spec.tolerations[4].operator", "FieldValueNotSupported"),
        ("spec.tolerations[5].key", "FieldValueInvalid"),
    ]
    assert "value must be empty when `operator` is 'Exists'" in e[0].message
    assert "operator must be Exists when `key` is empty" in e[1].message
    assert "effect must be 'NoExecute' when `tolerationSeconds` is set" in e[3].message


# ---------------------------------------------------------------- affinity


def aff(node_terms: Any = None, preferred: Any = None, pod_terms: Any = None) -> dict[str, Any]:
    a: dict[str, Any] = {}
    if node_terms is not None or preferred is not None:
        a["nodeAffinity"] = {}
        if node_terms is not None:
            a["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": node_terms}
        if preferred is not None:
            a["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    if pod_terms is not None:
        a["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": pod_terms}
    return pod(affinity=a)


def test_node_affinity_needs_a_term() -> None:
    assert errs(aff([])) == [
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Required "
        "value: must have at least one node selector term"]


@pytest.mark.parametrize(("expr", "path", "reason"), [
    ({"key": "a", "operator": "Near", "values": ["b"]}, "operator", "FieldValueNotSupported"),
    ({"key": "a", "operator": "In"}, "values", "FieldValueRequired"),
    ({"key": "a", "operator": "NotIn", "values": []}, "values", "FieldValueRequired"),
    ({"key": "a", "operator": "Exists", "values": ["x"]}, "values", "FieldValueForbidden"),
    ({"key": "a", "operator": "Gt", "values": ["x"]}, "values[0]", "FieldValueInvalid"),
    ({"key": "a", "operator": "Lt", "values": ["1", "2"]}, "values", "FieldValueRequired"),
    ({"operator": "Exists"}, "key", "FieldValueRequired"),
])
def test_node_selector_requirement_errors(expr: dict[str, Any], path: str, reason: str) -> None:
    e = validate(aff([{"matchExpressions": [expr]}]))
    base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
    assert [(x.path, x.reason) for x in e] == [(f"{base}.matchExpressions[0].{path}", reason)]


def test_match_fields_only_metadata_name() -> None:
    e = validate(aff([{"matchFields": [{"key": "spec.nodeName", "operator": "In", "values": ["a"]}]}]))
    assert [x.path for x in e] == [
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchFields[0].key"]


@pytest.mark.parametrize("weight", [0, 101, "x", None])
def test_preferred_weight_range(weight: Any) -> None:
    e = validate(aff(preferred=[{"weight": weight, "preference": {}}]))
    assert [x.path for x in e] == ["spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
                                   ".weight"]


def test_pod_affinity_term_needs_topology_key_and_valid_selector() -> None:
    e = validate(aff(pod_terms=[{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt",
                                                                         "values": ["1"]}]}}]))
    paths = {x.path for x in e}
    base = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
    assert paths == {f"{base}.topologyKey", f"{base}.labelSelector.matchExpressions[0].operator"}


# ---------------------------------------------------------------- topology spread constraints


def test_topology_spread_constraints() -> None:
    e = validate(pod(topologySpreadConstraints=[
        {"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "X"},
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2},
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 0},
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Maybe"},
    ]))
    assert [(x.path, x.reason) for x in e] == [
        ("spec.topologySpreadConstraints[0].maxSkew", "FieldValueInvalid"),
        ("spec.topologySpreadConstraints[0].topologyKey", "FieldValueRequired"),
        ("spec.topologySpreadConstraints[0].whenUnsatisfiable", "FieldValueNotSupported"),
        ("spec.topologySpreadConstraints[1].minDomains", "FieldValueInvalid"),
        ("spec.topologySpreadConstraints[2].minDomains", "FieldValueInvalid"),
        ("spec.topologySpreadConstraints[3].nodeTaintsPolicy", "FieldValueNotSupported"),
        ("spec.topologySpreadConstraints[3]", "FieldValueDuplicate"),
    ]


# ---------------------------------------------------------------- other pod fields


def test_restart_policy_only_on_init_containers() -> None:
    e = validate(pod({"name": "c", "image": "i", "restartPolicy": "Always"},
                     initContainers=[{"name": "i", "image": "i", "restartPolicy": "Never"}]))
    assert [(x.path, x.reason) for x in e] == [
        ("spec.initContainers[0].restartPolicy", "FieldValueNotSupported"),
        ("spec.containers[0].restartPolicy", "FieldValueForbidden")]


def test_ports_and_misc_pod_fields() -> None:
    e = validate(pod({"name": "c", "image": "i", "ports": [{"containerPort": 0}, {"containerPort": 80, "hostPort": 70000,
                                                                                  "protocol": "HTTP"}]},
                     preemptionPolicy="Sometimes", priority="high", terminationGracePeriodSeconds=-1,
                     nodeName="Bad_Node", schedulingGates=[{"name": ""}]))
    assert {x.path for x in e} == {
        "spec.containers[0].ports[0].containerPort", "spec.containers[0].ports[1].hostPort",
        "spec.containers[0].ports[1].protocol", "spec.preemptionPolicy", "spec.priority",
        "spec.terminationGracePeriodSeconds", "spec.nodeName", "spec.schedulingGates[0].name"}


# ---------------------------------------------------------------- other kinds


def test_node_taints() -> None:
    e = validate({"kind": "Node", "metadata": {"name": "n"}, "spec": {"taints": [
        {"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule", "value": "x"},
        {"key": "j", "effect": "Sometimes"}, {"effect": "NoSchedule"}]}})
    assert [(x.path, x.reason) for x in e] == [
        ("spec.taints[1]", "FieldValueDuplicate"),
        ("spec.taints[2].effect", "FieldValueNotSupported"),
        ("spec.taints[3].key", "FieldValueRequired")]


def test_priority_class_value_limit() -> None:
    def pc(name: str, v: Any) -> dict[str, Any]:
        return {"kind": "PriorityClass", "metadata": {"name": name}, "value": v}
    assert validate(pc("user", 1_000_000_000)) == []
    assert [x.reason for x in validate(pc("user", 1_000_000_001))] == ["FieldValueForbidden"]
    assert validate(pc("system-special", 2_000_000_000)) == []
    assert [x.path for x in validate(pc("noval", None))] == ["value"]


@pytest.mark.parametrize(("spec", "paths"), [
    ({"minAvailable": 1, "maxUnavailable": 1}, ["spec"]),
    ({"minAvailable": "150%"}, ["spec.minAvailable"]),
    ({"maxUnavailable": "ten"}, ["spec.maxUnavailable"]),
    ({"minAvailable": -1}, ["spec.minAvailable"]),
    ({"minAvailable": 2, "selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
     ["spec.selector.matchExpressions[0].values"]),
    ({"maxUnavailable": "25%"}, []),
])
def test_pdb(spec: dict[str, Any], paths: list[str]) -> None:
    raw = {"kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "d"}, "spec": spec}
    assert [x.path for x in validate(raw)] == paths


def test_pv_and_pvc_need_storage_and_access_modes() -> None:
    assert {x.path for x in validate({"kind": "PersistentVolume", "metadata": {"name": "v"}, "spec": {}})} == {
        "spec.capacity.storage", "spec.accessModes"}
    assert {x.path for x in validate({"kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
                                      "spec": {"accessModes": ["Sometimes"]}})} == {
        "spec.accessModes[0]", "spec.resources.requests.storage"}


def test_not_an_object_or_unknown_kind() -> None:
    assert errs([1, 2]) == ["expected an object, got list"]
    assert errs({"metadata": {"name": "x"}}) == ["kind: Required value"]
    assert [(x.path, x.reason) for x in validate({"kind": "Widget"})] == [("kind", "FieldValueNotSupported")]
    assert [x.path for x in validate({"kind": ["Pod"]})] == ["kind"]


# ---------------------------------------------------------------- errors and kinds


def test_field_error_and_validation_error_strings() -> None:
    fe = FieldError("spec.x", "bad")
    assert str(fe) == "spec.x: bad" and str(FieldError("", "bad")) == "bad"
    ve = ValidationError("Pod", "p", [fe, FieldError("spec.y", "worse")], namespace="ns")
    assert str(ve) == "Pod 'ns/p' is invalid: spec.x: bad; spec.y: worse"
    assert str(Path("spec").child("containers").index(0).child("resources").key("cpu")) == \
        "spec.containers[0].resources[cpu]"


def test_kind_class() -> None:
    assert kind_class("v1", "Pod") is Pod
    assert kind_class("", "Pod") is Pod
    assert kind_class("policy/v1beta1", "PodDisruptionBudget") is KINDS["PodDisruptionBudget"]
    for av, k in [("apps/v1", "Pod"), ("v1", "Deployment"), ("v1", ""), (["v1"], "Pod"), ("v1", {"a": 1})]:
        with pytest.raises(UnknownKindError):
            kind_class(av, k)  # type: ignore[arg-type]


# ---------------------------------------------------------------- junk never crashes

_KEYS = ["metadata", "name", "namespace", "labels", "annotations", "spec", "status", "containers",
         "initContainers", "image", "resources", "requests", "limits", "cpu", "memory", "nvidia.com/gpu",
         "hugepages-2Mi", "ports", "containerPort", "hostPort", "tolerations", "key", "operator", "values",
         "effect", "affinity", "nodeAffinity", "nodeSelectorTerms", "matchExpressions", "matchFields",
         "topologySpreadConstraints", "maxSkew", "taints", "capacity", "allocatable", "minAvailable", "selector",
         "value", "priority", "volumes", "drivers", "overhead", "restartPolicy", "weight"]
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(allow_nan=True),
                     st.text(max_size=5), st.sampled_from(["1", "1Gi", "In", "Exists", "NoSchedule", "", "-1", "0.5"]))
_junk = st.recursive(_scalars, lambda ch: st.one_of(
    st.lists(ch, max_size=3),
    st.dictionaries(st.one_of(st.sampled_from(_KEYS), st.text(max_size=3), st.integers(0, 2)), ch, max_size=5)),
    max_leaves=25)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([*KINDS, "Foo", None, 3, ["Pod"]]), _junk)
def test_random_junk_never_raises(kind: Any, body: Any) -> None:
    raw = dict(body) if isinstance(body, dict) else {"spec": body}
    raw["kind"] = kind
    for e in validate(raw):
        assert isinstance(e, FieldError)
        assert "internal validation error" not in e.message
    validate(body)  # not even a dict at the top


def _paths(x: Any, pre: tuple = ()) -> list[tuple]:
    out = [pre]
    if isinstance(x, dict):
        for k, v in x.items():
            out.extend(_paths(v, (*pre, k)))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            out.extend(_paths(v, (*pre, i)))
    return out


_BASES = [RICH_POD, *VALID_OTHERS]
_SITES = [(i, p) for i, b in enumerate(_BASES) for p in _paths(b) if p]


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(range(len(_BASES))), st.lists(st.tuples(st.integers(0, 10**6), _junk), min_size=1, max_size=3))
def test_mutated_manifests_never_crash_and_valid_ones_parse(base: int, muts: list) -> None:
    """Junk planted anywhere in a valid manifest: validation reports it (never raises), and whatever
    validation accepts, the typed model and the resource math can read."""
    raw = copy.deepcopy(_BASES[base])
    sites = [p for i, p in _SITES if i == base]
    for n, junk in muts:
        p = sites[n % len(sites)]
        cur = raw
        try:
            for k in p[:-1]:
                cur = cur[k]
            cur[p[-1]] = junk
        except (KeyError, IndexError, TypeError):
            pass
    e = validate(raw)
    assert all("internal validation error" not in x.message for x in e)
    if e:
        return
    try:
        obj = parse_object(raw)
    except UnknownKindError:
        return  # apiVersion/kind replaced: the loader reports this
    if isinstance(obj, Pod):
        pod_requests(obj)
        pod_non_zero_requests(obj)
        qos_class(obj)
        obj.host_ports()


def test_field_paths_are_formatted_once_and_shared() -> None:
    """Validation asks for a path at every field: each is built once and shared (roots by their
    string, children by name, index or key), with the text as before."""
    spec = Path("spec")
    assert Path("spec") is spec
    name = spec.child("containers").index(0).child("name")
    assert str(name) == "spec.containers[0].name"
    assert spec.child("containers").index(0).child("name") is name
    assert str(Path().child("a").key("x/y")) == "a[x/y]"
    # child("0") and index(0) are different paths; key("k") and child("k") too.
    assert str(Path("m").child("0")) == "m.0" and str(Path("m").index(0)) == "m[0]"
    assert str(Path("m").key("k")) == "m[k]" and str(Path("m").child("k")) == "m.k"


def test_field_paths_keep_a_bounded_number_of_children() -> None:
    """Map keys come from the objects validated: past the bound, paths are still right but no
    longer kept."""
    labels = Path("metadata.labels-bound-test")
    paths = [labels.key(f"k{i}") for i in range(Path._MAX_KIDS + 10)]
    assert [str(p) for p in paths] == [f"metadata.labels-bound-test[k{i}]" for i in range(Path._MAX_KIDS + 10)]
    assert labels.key("k0") is paths[0]
    assert labels.key(f"k{Path._MAX_KIDS + 5}") is not paths[Path._MAX_KIDS + 5]
    assert len(labels._kids or {}) == Path._MAX_KIDS
