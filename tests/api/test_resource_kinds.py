"""resource.k8s.io/v1 kinds: typed views, validation with upstream's limits and paths, the CEL
device-selector environment, claim name resolution, and the server-side tables."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ksched.api.dracel import CelError, compile_selector, device_value
from ksched.api.kinds import parse_object
from ksched.api.loader import load_manifests
from ksched.api.pod import Pod
from ksched.api.resource import (
    ClaimNameError,
    ResourceClaim,
    ResourceSlice,
    claim_is_for_pod,
    pod_claim_name,
    pod_claim_refs,
)
from ksched.api.validation import validate
from ksched.apiserver.tables import to_table

DRV = "gpu.example.com"


def slice_(devices: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"driver": DRV, "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                         "nodeName": "n1", "devices": devices if devices is not None else [{"name": "gpu-0"}]}
    s.update(spec)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu"}, "spec": s}


def claim(requests: list[dict[str, Any]], **devices: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": requests, **devices}}}


def errs(raw: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate(raw)]


def paths(raw: dict[str, Any]) -> list[str]:
    return [e.path for e in validate(raw)]


# ---------------------------------------------------------------- typed views


def test_slice_qualifies_bare_names_under_the_driver_domain() -> None:
    s = parse_object(slice_([{"name": "gpu-0", "attributes": {"model": {"string": "A100"},
                                                                "other.com/x": {"int": 3},
                                                                "v": {"version": "1.2.3"}},
                              "capacity": {"memory": {"value": "40Gi"}}}]))
    assert isinstance(s, ResourceSlice)
    d = s.devices[0]
    assert d.attributes == {f"{DRV}/model": "A100", "other.com/x": 3, f"{DRV}/v": ("version", "1.2.3")}
    assert d.capacity[f"{DRV}/memory"].value == 40 * 2**30 * 10**9


def test_claim_requests_exactly_and_first_available() -> None:
    c = parse_object(claim([{"name": "a", "exactly": {"deviceClassName": "gpu", "count": 2}},
                            {"name": "b", "firstAvailable": [{"name": "big", "deviceClassName": "gpu"},
                                                             {"name": "small", "deviceClassName": "gpu",
                                                              "count": 2}]}]))
    assert isinstance(c, ResourceClaim)
    a, b = c.requests
    assert a.exactly is not None and a.exactly.count == 2 and a.exactly.allocation_mode == "ExactCount"
    assert [s.name for s in b.first_available] == ["big", "small"]
    assert c.allocation is None and c.results == []


# ---------------------------------------------------------------- validation


def test_valid_objects_pass() -> None:
    assert errs(slice_()) == []
    assert errs(claim([{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}])) == []
    assert errs({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                 "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRV}"'}}],
                          "extendedResourceName": "example.com/gpu"}}) == []


@pytest.mark.parametrize(("mutate", "path"), [
    (lambda s: s["spec"].pop("nodeName"), "spec"),
    (lambda s: s["spec"].update(allNodes=True), "spec"),
    (lambda s: s["spec"]["pool"].update(resourceSliceCount=0), "spec.pool.resourceSliceCount"),
    (lambda s: s["spec"].update(driver="Not_A_Domain"), "spec.driver"),
    (lambda s: s["spec"]["devices"].append({"name": "gpu-0"}), "spec.devices[1].name"),
    (lambda s: s["spec"]["devices"][0].update(attributes={"model": {"string": "a", "int": 1}}),
     "spec.devices[0].attributes[model]"),
    (lambda s: s["spec"]["devices"][0].update(attributes={"bad name": {"int": 1}}),
     "spec.devices[0].attributes[bad name]"),
    (lambda s: s["spec"]["devices"][0].update(capacity={"mem": {"value": "1Gi", "requestPolicy": {"default": "1"}}}),
     "spec.devices[0].capacity[mem].requestPolicy"),
    (lambda s: s["spec"]["devices"][0].update(allowMultipleAllocations=True, capacity={"mem": {
        "value": "10", "requestPolicy": {"default": "3", "validValues": ["1", "2"]}}}),
     "spec.devices[0].capacity[mem].requestPolicy.default"),
    (lambda s: s["spec"]["devices"][0].update(allowMultipleAllocations=True, capacity={"mem": {
        "value": "10", "requestPolicy": {"validValues": ["2", "1"]}}}),
     "spec.devices[0].capacity[mem].requestPolicy.validValues[1]"),
    (lambda s: s["spec"]["devices"][0].update(taints=[{"key": "k", "effect": "PreferNoSchedule"}]),
     "spec.devices[0].taints[0].effect"),
    (lambda s: s["spec"]["devices"][0].update(nodeName="n1"), "spec.devices[0].nodeName"),
    (lambda s: s["spec"].update(devices=[{"name": f"d{i}"} for i in range(129)]), "spec.devices"),
    (lambda s: s["spec"].update(sharedCounters=[{"name": "s", "counters": {"mem": {"value": "1"}}}]), "spec"),
])
def test_slice_validation(mutate: Any, path: str) -> None:
    s = slice_()
    mutate(s)
    assert path in paths(s)


def test_slice_device_limit_is_64_with_taints() -> None:
    devs = [{"name": f"d{i}", "taints": [{"key": "k", "effect": "NoSchedule"}]} for i in range(65)]
    assert "spec.devices" in paths(slice_(devs))
    assert "spec.devices" not in paths(slice_(devs[:64]))


@pytest.mark.parametrize(("requests", "extra", "path"), [
    ([{"name": "a"}], {}, "spec.devices.requests[0]"),
    ([{"name": "a", "exactly": {"deviceClassName": "c"}, "firstAvailable": [{"name": "x", "deviceClassName": "c"}]}],
     {}, "spec.devices.requests[0]"),
    ([{"name": "a", "exactly": {"deviceClassName": "c", "count": 0}}], {}, "spec.devices.requests[0].exactly.count"),
    ([{"name": "a", "exactly": {"deviceClassName": "c", "allocationMode": "All", "count": 2}}], {},
     "spec.devices.requests[0].exactly.count"),
    ([{"name": "a", "exactly": {"deviceClassName": "c", "allocationMode": "Some"}}], {},
     "spec.devices.requests[0].exactly.allocationMode"),
    ([{"name": "a", "exactly": {"deviceClassName": ""}}], {}, "spec.devices.requests[0].exactly.deviceClassName"),
    ([{"name": "a", "exactly": {"deviceClassName": "c", "selectors": [{"cel": {"expression": "1 +"}}]}}], {},
     "spec.devices.requests[0].exactly.selectors[0].cel.expression"),
    ([{"name": "a", "exactly": {"deviceClassName": "c", "selectors": [{"cel": {"expression": "1"}}]}}], {},
     "spec.devices.requests[0].exactly.selectors[0].cel.expression"),
    ([{"name": "a", "firstAvailable": [{"name": "x", "deviceClassName": "c", "adminAccess": True}]}], {},
     "spec.devices.requests[0].firstAvailable[0].adminAccess"),
    ([{"name": "a", "firstAvailable": [{"name": f"s{i}", "deviceClassName": "c"} for i in range(9)]}], {},
     "spec.devices.requests[0].firstAvailable"),
    ([{"name": "a", "exactly": {"deviceClassName": "c"}}],
     {"constraints": [{"requests": ["b"], "matchAttribute": f"{DRV}/model"}]}, "spec.devices.constraints[0].requests[0]"),
    ([{"name": "a", "exactly": {"deviceClassName": "c"}}],
     {"constraints": [{"matchAttribute": "model"}]}, "spec.devices.constraints[0].matchAttribute"),
    ([{"name": "a", "exactly": {"deviceClassName": "c", "tolerations": [{"operator": "Exists", "value": "x"}]}}], {},
     "spec.devices.requests[0].exactly.tolerations[0].value"),
    ([{"name": f"r{i}", "exactly": {"deviceClassName": "c"}} for i in range(33)], {}, "spec.devices.requests"),
])
def test_claim_validation(requests: list[dict[str, Any]], extra: dict[str, Any], path: str) -> None:
    assert path in paths(claim(requests, **extra))


def test_constraint_may_name_a_subrequest() -> None:
    c = claim([{"name": "a", "firstAvailable": [{"name": "x", "deviceClassName": "c"}]}],
              constraints=[{"requests": ["a/x"], "matchAttribute": f"{DRV}/model"}])
    assert errs(c) == []


def test_template_validates_its_claim_spec_and_pod_claims() -> None:
    t = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "t", "namespace": "default"}, "spec": {"spec": {"devices": {"requests": [{"name": "a"}]}}}}
    assert "spec.spec.devices.requests[0]" in paths(t)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "other", "resourceClaimName": "x", "resourceClaimTemplateName": "y"}]}}
    ps = paths(pod)
    assert "spec.resourceClaims[0]" in ps and "spec.containers[0].resources.claims[0]" in ps


def test_loader_reports_file_and_field(tmp_path: Any) -> None:
    text = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: a}]}}\n"
    f = tmp_path / "claims.yaml"
    f.write_text(text)
    res = load_manifests([f])
    assert not res.objects and res.errors
    assert "claims.yaml" in str(res.errors[0]) and "spec.devices.requests[0]" in str(res.errors[0])


# ---------------------------------------------------------------- CEL


DEV = device_value(DRV, {f"{DRV}/model": "A100", f"{DRV}/numa": 1, f"{DRV}/v": ("version", "1.2.3")},
                   {f"{DRV}/memory": 40 * 2**30 * 10**9}, True)


@pytest.mark.parametrize(("expr", "want"), [
    (f'device.driver == "{DRV}"', True),
    (f'device.attributes["{DRV}"].model == "A100"', True),
    (f'device.attributes["{DRV}"].numa > 0 && device.attributes["{DRV}"].numa < 2', True),
    ('device.attributes["unknown.example.com"].size() == 0', True),
    (f'"model" in device.attributes["{DRV}"]', True),
    (f'device.capacity["{DRV}"].memory.isGreaterThan(quantity("32Gi"))', True),
    (f'device.capacity["{DRV}"].memory.compareTo(quantity("40960Mi")) == 0', True),
    (f'device.capacity["{DRV}"].memory == quantity("40Gi")', True),
    (f'device.attributes["{DRV}"].v.isLessThan(semver("1.10.0"))', True),
    (f'device.attributes["{DRV}"].v.major() == 1 && device.attributes["{DRV}"].v.minor() == 2', True),
    ('semver("v2", true).compareTo(semver("2.0.0")) == 0', True),
    ('quantity("1.5").add(1).compareTo(quantity("2500m")) == 0', True),
    ('quantity("2Gi").asInteger() == 2147483648', True),
    ('isQuantity("1Gi") && !isQuantity("x") && isSemver("1.0.0") && !isSemver("1.0")', True),
    ('device.allowMultipleAllocations', True),
    ('sets.contains(["a", "b"], ["a"])', True),
    ('cel.bind(m, device.driver, m.startsWith("gpu"))', True),
])
def test_selectors(expr: str, want: bool) -> None:
    assert compile_selector(expr).matches(DEV) is want


@pytest.mark.parametrize(("expr", "msg"), [
    (f'device.attributes["{DRV}"].nosuch == 1', "CEL runtime error: no such key: nosuch"),
    (f'device.attributes["{DRV}"].model', "CEL result of type string could not be converted to bool"),
])
def test_selector_runtime_errors(expr: str, msg: str) -> None:
    with pytest.raises(CelError) as e:
        compile_selector(expr).matches(DEV)
    assert str(e.value) == msg


@pytest.mark.parametrize("expr", ["1 +", "1", "nosuchvar == 1", "x" * 10241])
def test_selector_compile_errors(expr: str) -> None:
    with pytest.raises(CelError) as e:
        compile_selector(expr)
    assert str(e.value).startswith("CEL compile error: ")


# ---------------------------------------------------------------- claim names


def pod(statuses: list[dict[str, Any]] | None = None, **claims: Any) -> Pod:
    raw: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
                           "spec": {"containers": [{"name": "c"}],
                                    "resourceClaims": [{"name": n, **ref} for n, ref in claims.items()]}}
    if statuses is not None:
        raw["status"] = {"resourceClaimStatuses": statuses}
    return Pod(raw)


def test_claim_name_resolution_as_upstream() -> None:
    p = pod(gpu={"resourceClaimName": "shared"})
    assert pod_claim_name(p, pod_claim_refs(p)[0]) == ("shared", False)
    p = pod(gpu={"resourceClaimTemplateName": "t"})
    with pytest.raises(ClaimNameError, match=r'^pod "ns/p": ResourceClaim not created yet$'):
        pod_claim_name(p, pod_claim_refs(p)[0])
    p = pod([{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}], gpu={"resourceClaimTemplateName": "t"})
    assert pod_claim_name(p, pod_claim_refs(p)[0]) == ("p-gpu-abcde", True)
    p = pod([{"name": "gpu"}], gpu={"resourceClaimTemplateName": "t"})
    assert pod_claim_name(p, pod_claim_refs(p)[0]) == (None, True)
    p = pod(gpu={})
    with pytest.raises(ClaimNameError, match=r'spec\.resourceClaim "gpu": none of the supported fields are set'):
        pod_claim_name(p, pod_claim_refs(p)[0])
    c = ResourceClaim({"metadata": {"name": "x", "namespace": "ns", "ownerReferences": [
        {"uid": "other", "controller": True, "kind": "Pod", "name": "p"}]}})
    with pytest.raises(ClaimNameError, match=r"^ResourceClaim ns/x was not created for Pod ns/p \(Pod is not owner\)$"):
        claim_is_for_pod(pod(), c)


# ---------------------------------------------------------------- tables


def test_tables_have_upstreams_columns() -> None:
    c = copy.deepcopy(claim([{"name": "a", "exactly": {"deviceClassName": "c"}}]))
    pending = parse_object(copy.deepcopy(c))
    c["status"] = {"allocation": {"devices": {"results": []}}, "reservedFor": [{"resource": "pods", "name": "p",
                                                                               "uid": "u"}]}
    reserved = parse_object(c)
    t = to_table("ResourceClaim", [pending, reserved], 0)
    assert [d["name"] for d in t["columnDefinitions"]] == ["Name", "State", "Age"]
    assert [r["cells"][1] for r in t["rows"]] == ["pending", "allocated,reserved"]
    t = to_table("ResourceSlice", [parse_object(slice_())], 0)
    assert [d["name"] for d in t["columnDefinitions"]] == ["Name", "Node", "Driver", "Pool", "Age"]
    assert t["rows"][0]["cells"][:4] == ["n1-gpu", "n1", DRV, "n1"]
    assert [d["name"] for d in to_table("DeviceClass", [], 0)["columnDefinitions"]] == ["Name", "Age"]
    assert [d["name"] for d in to_table("ResourceClaimTemplate", [], 0)["columnDefinitions"]] == ["Name", "Age"]
