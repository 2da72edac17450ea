"""Validation of the core kinds beside pods and nodes (Service, EndpointSlice, ConfigMap, Secret,
ServiceAccount, LimitRange, ResourceQuota, RuntimeClass, RBAC), with upstream's field paths and
messages; the typed views the scheduler and controllers read."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.kinds import KINDS, parse_object
from ksched.api.limitrange import LimitRange, default_limit_range_item
from ksched.api.runtimeclass import RuntimeClass
from ksched.api.service import Service
from ksched.api.validation import validate


def obj(kind: str, api_version: str = "v1", name: str = "x", ns: str | None = "default", **fields: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if ns:
        md["namespace"] = ns
    return {"apiVersion": api_version, "kind": kind, "metadata": md, **fields}


def svc(**spec: Any) -> dict[str, Any]:
    return obj("Service", spec={"ports": [{"port": 80}], **spec})


RBAC = "rbac.authorization.k8s.io/v1"

CASES: list[tuple[dict[str, Any], list[str]]] = [
    (svc(), []),
    (svc(selector={"app": "web"}, type="NodePort", ports=[{"name": "a", "port": 80, "nodePort": 30080},
                                                         {"name": "b", "port": 81, "targetPort": "http"}]), []),
    (obj("Service", name="Web", spec={"ports": [{"port": 80}]}),
     ['metadata.name: Invalid value: "Web": a DNS-1035 label must consist of lower case alphanumeric characters or '
      "'-', start with an alphabetic character, and end with an alphanumeric character"]),
    (obj("Service", spec={}), ["spec.ports: Required value"]),
    (obj("Service", spec={"clusterIP": "None"}), []),
    (obj("Service", spec={"type": "ExternalName"}), ["spec.externalName: Required value"]),
    (svc(type="Magic"), ['spec.type: Unsupported value: "Magic": supported values: "ClusterIP", "NodePort", '
                         '"LoadBalancer", "ExternalName"']),
    (svc(ports=[{"port": 0}]), ["spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"]),
    (svc(ports=[{"port": 80}, {"port": 81}]), ["spec.ports[0].name: Required value", "spec.ports[1].name: Required value"]),
    (svc(ports=[{"name": "a", "port": 80}, {"name": "a", "port": 81}]), ['spec.ports[1].name: Duplicate value: "a"']),
    (svc(ports=[{"port": 80, "nodePort": 30001}]),
     ["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]),
    (svc(ports=[{"port": 80, "protocol": "HTTP"}]),
     ['spec.ports[0].protocol: Unsupported value: "HTTP": supported values: "TCP", "UDP", "SCTP"']),
    (svc(clusterIP="10.0.0.300"), ['spec.clusterIP: Invalid value: "10.0.0.300": must be a valid IP address, (e.g. '
                                   "10.9.8.7 or 2001:db8::ffff)"]),
    (obj("EndpointSlice", "discovery.k8s.io/v1", addressType="IPv4", endpoints=[{"addresses": ["10.0.0.1"]}],
         ports=[{"port": 80}]), []),
    (obj("EndpointSlice", "discovery.k8s.io/v1", endpoints=[{"addresses": []}]),
     ["addressType: Required value", "endpoints[0].addresses: Required value: must contain at least 1 address"]),
    (obj("ConfigMap", data={"a.b_c-D": "x"}, binaryData={"bin": "AAEC"}), []),
    (obj("ConfigMap", data={"a b": "x"}), [
        'data[a b]: Invalid value: "a b": a valid config key must consist of alphanumeric characters, \'-\', \'_\' or '
        "'.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"]),
    (obj("ConfigMap", data={"k": "x"}, binaryData={"k": "AA=="}),
     ['binaryData[k]: Invalid value: "k": duplicate of key present in data']),
    (obj("ConfigMap", data={"k": "x" * (1024 * 1024 + 1)}), ["Too long: must have at most 1048576 bytes"]),
    (obj("Secret", data={"p": "aHVudGVyMg=="}, stringData={"q": "plain"}), []),
    (obj("Secret", data={"p": "not base64!"}), ['data[p]: Invalid value: "<value omitted>": illegal base64 data']),
    (obj("Secret", type="kubernetes.io/tls", data={"tls.crt": "AA=="}), ["data[tls.key]: Required value"]),
    (obj("Secret", type="kubernetes.io/basic-auth"),
     ['data: Required value: must contain at least one of "username" or "password"']),
    (obj("ServiceAccount"), []),
    (obj("LimitRange", spec={"limits": [{"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "1"},
                                         "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "200m"},
                                         "maxLimitRequestRatio": {"cpu": "4"}}]}), []),
    (obj("LimitRange", spec={"limits": [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]}),
     ['spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1']),
    (obj("LimitRange", spec={"limits": [{"type": "Container", "default": {"cpu": "100m"},
                                         "defaultRequest": {"cpu": "200m"}}]}),
     ['spec.limits[0].defaultRequest[cpu]: Invalid value: "200m": default request value 200m is greater than '
      "default limit value 100m"]),
    (obj("LimitRange", spec={"limits": [{"type": "Pod", "default": {"cpu": "1"}}]}),
     ["spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'"]),
    (obj("LimitRange", spec={"limits": [{"type": "PersistentVolumeClaim"}]}),
     ["spec.limits[0].min: Required value: either minimum or maximum storage value is required, but neither was "
      "provided"]),
    (obj("LimitRange", spec={"limits": [{"type": "Container", "maxLimitRequestRatio": {"cpu": "500m"}}]}),
     ['spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: "500m": ratio 500m is less than 1']),
    (obj("ResourceQuota", spec={"hard": {"pods": "10", "requests.cpu": "4", "count/deployments.apps": "2",
                                         "example.com/widgets": "1"}, "scopes": ["NotBestEffort"]}), []),
    (obj("ResourceQuota", spec={"hard": {"widgets": "1"}}),
     ['spec.hard[widgets]: Invalid value: "widgets": must be a standard resource type or fully qualified']),
    (obj("ResourceQuota", spec={"hard": {"pods": "x"}}), ['spec.hard.pods: invalid quantity "x"']),
    (obj("ResourceQuota", spec={"hard": {"pods": "1"}, "scopes": ["Terminating", "NotTerminating"]}),
     ["spec.scopes: Invalid value: list: conflicting scopes"]),
    (obj("ResourceQuota", spec={"hard": {"pods": "1"}, "scopes": ["Forever"]}),
     ['spec.scopes[0]: Invalid value: "Forever": unsupported scope']),
    (obj("ResourceQuota", spec={"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In"}]}}),
     ["spec.scopeSelector.matchExpressions[0].values: Required value: must be at least one value when `operator` is "
      "'In' or 'NotIn' for scope selector"]),
    (obj("RuntimeClass", "node.k8s.io/v1", ns=None, handler="kata", overhead={"podFixed": {"cpu": "100m"}},
         scheduling={"nodeSelector": {"kata": "yes"}, "tolerations": [{"key": "k", "operator": "Exists"}]}), []),
    (obj("RuntimeClass", "node.k8s.io/v1", ns=None), ["handler: Required value"]),
    (obj("RuntimeClass", "node.k8s.io/v1", ns=None, handler="Kata_1"),
     ['handler: Invalid value: "Kata_1": a lowercase RFC 1123 label must consist of lower case alphanumeric '
      "characters or '-', and must start and end with an alphanumeric character"]),
    (obj("RuntimeClass", "node.k8s.io/v1", ns=None, handler="kata", overhead={"podFixed": {"cpu": "-1"}}),
     ['overhead.podFixed.cpu: Invalid value: "-1": must be greater than or equal to 0']),
    (obj("ClusterRole", RBAC, name="system:controller:x", ns=None,
         rules=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]), []),
    (obj("ClusterRole", RBAC, name="agg", ns=None, aggregationRule={"clusterRoleSelectors": []}), []),
    (obj("Role", RBAC, rules=[{"resources": ["pods"]}]),
     ["rules[0].verbs: Required value: verbs must contain at least one value",
      "rules[0].apiGroups: Required value: resource rules must supply at least one api group"]),
    (obj("Role", RBAC, rules=[{"nonResourceURLs": ["/x"], "verbs": ["get"]}]),
     ["rules[0].nonResourceURLs: Invalid value: list: namespaced rules cannot apply to non-resource URLs"]),
    (obj("Role", RBAC, name="a/b"), ['metadata.name: Invalid value: "a/b": may not contain \'/\'']),
    (obj("RoleBinding", RBAC, roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
         subjects=[{"kind": "ServiceAccount", "name": "sa"}, {"kind": "User", "name": "u",
                                                             "apiGroup": "rbac.authorization.k8s.io"}]), []),
    (obj("ClusterRoleBinding", RBAC, ns=None, roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                      "name": "r"}, subjects=[{"kind": "ServiceAccount", "name": "sa"}]),
     ['roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"',
      "subjects[0].namespace: Required value"]),
    (obj("RoleBinding", RBAC, roleRef={"kind": "Role", "name": "r"}, subjects=[{"kind": "Robot", "name": "x"}]),
     ['roleRef.apiGroup: Unsupported value: "": supported values: "rbac.authorization.k8s.io"',
      'subjects[0].kind: Unsupported value: "Robot": supported values: "Group", "ServiceAccount", "User"']),
]


@pytest.mark.parametrize(("raw", "want"), CASES, ids=[f"{r['kind']}-{i}" for i, (r, _) in enumerate(CASES)])
def test_validation(raw: dict[str, Any], want: list[str]) -> None:
    assert [str(e) for e in validate(raw)] == want
    if not want:
        parsed = parse_object(raw)
        assert type(parsed) is KINDS[raw["kind"]]


def test_typed_views() -> None:
    s = Service(svc(selector={"app": "web", "n": 1}, type="NodePort", ports=[{"port": 80, "nodePort": 30001}]))
    assert s.selector == {"app": "web", "n": "1"} and s.type == "NodePort" and s.ports[0].target_port == 80
    assert s.selects("default", {"app": "web", "n": "1", "x": "y"}) and not s.selects("other", {"app": "web", "n": "1"})
    assert Service(obj("Service", spec={"selector": {}})).selector is None  # selects nothing
    rc = RuntimeClass(obj("RuntimeClass", "node.k8s.io/v1", ns=None, handler="h",
                          overhead={"podFixed": {"cpu": "1"}}, scheduling={"nodeSelector": {"a": "b"}}))
    assert (rc.handler, rc.overhead, rc.node_selector, rc.tolerations) == ("h", {"cpu": "1"}, {"a": "b"}, [])


@pytest.mark.parametrize(("item", "want"), [
    ({"type": "Container", "max": {"cpu": "2"}},
     {"type": "Container", "max": {"cpu": "2"}, "default": {"cpu": "2"}, "defaultRequest": {"cpu": "2"}}),
    ({"type": "Container", "min": {"cpu": "100m"}, "default": {"memory": "1Gi"}},
     {"type": "Container", "min": {"cpu": "100m"}, "default": {"memory": "1Gi"},
      "defaultRequest": {"memory": "1Gi", "cpu": "100m"}}),
    ({"type": "Pod", "max": {"cpu": "2"}}, {"type": "Pod", "max": {"cpu": "2"}}),
])
def test_limit_range_item_defaulting(item: dict[str, Any], want: dict[str, Any]) -> None:
    got = copy.deepcopy(item)
    default_limit_range_item(got)
    assert got == want
    assert LimitRange(obj("LimitRange", spec={"limits": [got]})).limits[0].default == want.get("default", {})


_junk = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                     max_leaves=8)
_NEW = ["Service", "EndpointSlice", "ConfigMap", "Secret", "ServiceAccount", "LimitRange", "ResourceQuota",
        "RuntimeClass", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "CustomResourceDefinition"]


@given(st.sampled_from(_NEW), st.dictionaries(st.sampled_from(
    ["metadata", "spec", "data", "stringData", "binaryData", "rules", "roleRef", "subjects", "handler", "overhead",
     "scheduling", "type", "addressType", "endpoints", "ports"]), _junk, max_size=4))
@settings(max_examples=300, deadline=None)
def test_junk_never_crashes_validation(kind: str, fields: dict[str, Any]) -> None:
    errors = validate({"apiVersion": KINDS[kind].API_VERSION, "kind": kind, **fields})
    assert all(not e.message.startswith("internal validation error") for e in errors)
