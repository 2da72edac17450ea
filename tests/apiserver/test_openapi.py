"""The OpenAPI documents (ksched.apiserver.openapi, openapi_proto): schemas derived from the
official Python client's models for every served kind and for kinds registered later, upstream's
definition names, group-version-kind extensions, patch merge keys, the operations kubectl reads
(fieldValidation on PATCH, strategic merge patch), the v3 index's hashes, and the v2 protobuf
encoding read back with a small wire decoder."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from ksched.api.kinds import KINDS
from ksched.api.meta import KubeObject
from ksched.apiserver.discovery import has_status_subresource
from ksched.apiserver.openapi import OpenAPIDocuments, ServedResource, group_package, model_index
from ksched.apiserver.openapi_proto import encode_document


class FakeDeployment(KubeObject):
    KIND: ClassVar[str] = "Deployment"
    API_VERSION: ClassVar[str] = "apps/v1"
    PLURAL: ClassVar[str] = "deployments"


class FakeWidget(KubeObject):
    KIND: ClassVar[str] = "Widget"
    API_VERSION: ClassVar[str] = "example.com/v1alpha1"
    PLURAL: ClassVar[str] = "widgets"


def _docs(*kinds: Any) -> OpenAPIDocuments:
    return OpenAPIDocuments(lambda: list(kinds) or list(KINDS.values()), status_subresource=has_status_subresource)


def _v3(docs: OpenAPIDocuments, group: str, version: str) -> dict[str, Any]:
    doc = docs.v3(group, version)
    assert doc is not None
    return json.loads(doc[0])  # type: ignore[no-any-return]


def _gvk_index(schemas: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    out = {}
    for name, s in schemas.items():
        for g in s.get("x-kubernetes-group-version-kind", ()):
            out[(g["group"], g["version"], g["kind"])] = name
    return out


@pytest.mark.parametrize(("group", "version", "kind", "model", "definition"), [
    ("", "v1", "Pod", "V1Pod", "io.k8s.api.core.v1.Pod"),
    ("", "v1", "Event", "CoreV1Event", "io.k8s.api.core.v1.Event"),
    ("events.k8s.io", "v1", "Event", "EventsV1Event", "io.k8s.api.events.v1.Event"),
    ("apps", "v1", "Deployment", "V1Deployment", "io.k8s.api.apps.v1.Deployment"),
    ("batch", "v1", "CronJob", "V1CronJob", "io.k8s.api.batch.v1.CronJob"),
    ("policy", "v1", "PodDisruptionBudget", "V1PodDisruptionBudget", "io.k8s.api.policy.v1.PodDisruptionBudget"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", "V1ClusterRole", "io.k8s.api.rbac.v1.ClusterRole"),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "V1CustomResourceDefinition",
     "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"),
    ("node.k8s.io", "v1", "RuntimeClass", "V1RuntimeClass", "io.k8s.api.node.v1.RuntimeClass"),
    ("discovery.k8s.io", "v1", "EndpointSlice", "V1EndpointSlice", "io.k8s.api.discovery.v1.EndpointSlice"),
    ("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "V1SelfSubjectAccessReview",
     "io.k8s.api.authorization.v1.SelfSubjectAccessReview"),
    ("example.com", "v1", "Widget", None, None),
])
def test_kind_to_model_and_definition_name(group: str, version: str, kind: str, model: str | None,
                                           definition: str | None) -> None:
    idx = model_index()
    got = idx.model_for(group, version, kind)
    assert got == model
    if model is not None:
        assert idx.definition_name(model) == definition


@pytest.mark.parametrize(("model", "definition"), [
    ("V1ObjectMeta", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
    ("V1LabelSelector", "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"),
    ("V1Condition", "io.k8s.apimachinery.pkg.apis.meta.v1.Condition"),
    ("V1PodTemplateSpec", "io.k8s.api.core.v1.PodTemplateSpec"),
    ("V1Container", "io.k8s.api.core.v1.Container"),
    ("V1DeploymentSpec", "io.k8s.api.apps.v1.DeploymentSpec"),
    ("V1JobTemplateSpec", "io.k8s.api.batch.v1.JobTemplateSpec"),
    ("V1Eviction", "io.k8s.api.policy.v1.Eviction"),
    ("V1Scale", "io.k8s.api.autoscaling.v1.Scale"),
    ("RbacV1Subject", "io.k8s.api.rbac.v1.Subject"),
    ("V1JSONSchemaProps", "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"),
])
def test_nested_types_take_their_go_package(model: str, definition: str) -> None:
    assert model_index().definition_name(model) == definition


def test_group_package() -> None:
    assert [group_package(g) for g in ("", "apps", "rbac.authorization.k8s.io", "internal.apiserver.k8s.io")] == \
        ["core", "apps", "rbac", "apiserverinternal"]


def test_every_served_kind_has_a_schema_with_its_gvk_in_v2_and_v3() -> None:
    docs = _docs()
    v2 = json.loads(docs.v2()[0])
    index = _gvk_index(v2["definitions"])
    for cls in KINDS.values():
        group, _, version = cls.API_VERSION.rpartition("/")
        name = index[(group, version, cls.KIND)]
        assert v2["definitions"][name]["properties"]["metadata"] == {
            "$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"} or \
            v2["definitions"][name]["properties"]["metadata"]["$ref"].endswith(".ObjectMeta")
        assert (group, version, cls.KIND + "List") in index
        v3 = _v3(docs, group, version)
        assert (group, version, cls.KIND) in _gvk_index(v3["components"]["schemas"])
    # Every $ref resolves within its document.
    for doc, prefix, defs in ((v2, "#/definitions/", v2["definitions"]),):
        refs = set(_refs(doc))
        assert refs and all(r.startswith(prefix) and r[len(prefix):] in defs for r in refs)
    v3 = _v3(docs, "", "v1")
    assert all(r[len("#/components/schemas/"):] in v3["components"]["schemas"] for r in _refs(v3))


def _refs(doc: Any) -> list[str]:
    if isinstance(doc, dict):
        out = [doc["$ref"]] if isinstance(doc.get("$ref"), str) else []
        for v in doc.values():
            out += _refs(v)
        return out
    if isinstance(doc, list):
        return [r for v in doc for r in _refs(v)]
    return []


def test_pod_schema_fields_types_required_descriptions_and_merge_keys() -> None:
    v3 = _v3(_docs(), "", "v1")
    schemas = v3["components"]["schemas"]
    container = schemas["io.k8s.api.core.v1.Container"]
    assert container["required"] == ["name"]
    props = container["properties"]
    assert props["name"]["type"] == "string" and props["name"]["description"].startswith("Name of the container")
    assert props["args"]["type"] == "array" and props["args"]["items"] == {"type": "string"}
    assert props["ports"]["x-kubernetes-patch-merge-key"] == "containerPort"
    assert props["ports"]["x-kubernetes-patch-strategy"] == "merge"
    assert props["resources"] == {"$ref": "#/components/schemas/io.k8s.api.core.v1.ResourceRequirements"}
    limits = schemas["io.k8s.api.core.v1.ResourceRequirements"]["properties"]["limits"]
    assert limits["type"] == "object" and limits["additionalProperties"] == {"type": "string"}
    spec = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]
    assert spec["containers"]["x-kubernetes-patch-merge-key"] == "name"
    assert spec["volumes"]["x-kubernetes-patch-strategy"] == "merge,retainKeys"
    assert spec["priority"]["type"] == "integer" and spec["hostNetwork"]["type"] == "boolean"
    md = schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]
    assert md["creationTimestamp"] == {**md["creationTimestamp"], "type": "string", "format": "date-time"}
    assert md["finalizers"]["x-kubernetes-patch-strategy"] == "merge"
    # A port of a Service has no containerPort: no merge key is claimed for it.
    assert "x-kubernetes-patch-merge-key" not in schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["tolerations"]
    v2 = json.loads(_docs().v2()[0])
    res = v2["definitions"]["io.k8s.api.core.v1.Container"]["properties"]["resources"]
    assert res == {"$ref": "#/definitions/io.k8s.api.core.v1.ResourceRequirements"}


def test_kinds_registered_later_get_schemas_and_paths() -> None:
    kinds: list[Any] = [c for c in KINDS.values() if c.API_VERSION != "apps/v1"]  # apps/v1 comes later
    docs = OpenAPIDocuments(lambda: kinds, status_subresource=has_status_subresource)
    assert docs.v3("apps", "v1") is None
    before = docs.v3_index()["paths"]["api/v1"]
    kinds.append(FakeDeployment)
    kinds.append(FakeWidget)
    apps = _v3(docs, "apps", "v1")
    dep = apps["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]
    assert dep["x-kubernetes-group-version-kind"] == [{"group": "apps", "kind": "Deployment", "version": "v1"}]
    assert "template" in apps["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]
    assert "/apis/apps/v1/namespaces/{namespace}/deployments/{name}" in apps["paths"]
    widgets = _v3(docs, "example.com", "v1alpha1")
    w = widgets["components"]["schemas"]["io.k8s.api.example.v1alpha1.Widget"]
    assert w["x-kubernetes-preserve-unknown-fields"] is True
    patch = widgets["paths"]["/apis/example.com/v1alpha1/namespaces/{namespace}/widgets/{name}"]["patch"]
    # No strategic merge patch for a kind without a Go type (as for custom resources).
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    index = docs.v3_index()["paths"]
    assert {"apis/apps/v1", "apis/example.com/v1alpha1"} <= set(index)
    assert index["api/v1"] == before  # unchanged group-versions keep their hash


def test_patch_operations_declare_field_validation_and_strategic_merge() -> None:
    v3 = _v3(_docs(), "", "v1")
    patch = v3["paths"]["/api/v1/nodes/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1", "kind": "Node"}
    assert {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}} in \
        patch["parameters"]
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    assert "/api/v1/namespaces/{namespace}/pods/{name}/status" in v3["paths"]
    assert "/api/v1/pods" in v3["paths"]  # list across namespaces
    post = v3["paths"]["/api/v1/namespaces/{namespace}/pods"]["post"]
    assert post["x-kubernetes-action"] == "post" and set(post["responses"]) == {"200", "201", "202", "401"}


def test_v3_index_hash_is_the_documents_hash_and_documents_are_cached() -> None:
    docs = _docs()
    index = docs.v3_index()["paths"]
    body, etag = docs.v3("policy", "v1")  # type: ignore[misc]
    assert index["apis/policy/v1"]["serverRelativeURL"] == f"/openapi/v3/apis/policy/v1?hash={etag}"
    assert len(etag) == 128
    assert docs.v3("policy", "v1")[0] is body  # type: ignore[index]
    assert docs.v2()[0] is docs.v2()[0]
    assert docs.v3("policy", "v2") is None and docs.v3("nothing.example", "v1") is None


def test_served_resources_that_are_not_stored_kinds() -> None:
    ssar = ServedResource("authorization.k8s.io/v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews")
    docs = OpenAPIDocuments(lambda: [], status_subresource=lambda k: False, extra=[ssar])
    v3 = _v3(docs, "authorization.k8s.io", "v1")
    assert set(v3["paths"]) == {"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"}
    assert set(v3["paths"]["/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"]) == {"parameters", "post"}
    spec = v3["components"]["schemas"]["io.k8s.api.authorization.v1.SelfSubjectAccessReviewSpec"]
    assert "resourceAttributes" in spec["properties"]


# ------------------------------------------------------------------------------ protobuf


def _decode(buf: bytes) -> list[tuple[int, Any]]:
    """A protobuf message's (field, value) pairs; length-delimited values stay bytes."""
    out: list[tuple[int, Any]] = []
    i = 0

    def varint() -> int:
        nonlocal i
        n = shift = 0
        while True:
            b = buf[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    while i < len(buf):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out.append((field, varint()))
        elif wire == 2:
            n = varint()
            out.append((field, buf[i:i + n]))
            i += n
        elif wire == 1:
            out.append((field, buf[i:i + 8]))
            i += 8
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    return out


def _fields(buf: bytes, field: int) -> list[Any]:
    return [v for f, v in _decode(buf) if f == field]


def test_v2_protobuf_is_gnostics_document() -> None:
    doc = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.36.0"},
           "paths": {"/api/v1/pods": {"get": {"operationId": "listPod", "parameters": [
               {"name": "limit", "in": "query", "type": "integer", "uniqueItems": True}],
               "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/P"}}},
               "x-kubernetes-action": "list"}}},
           "definitions": {"P": {"type": "object", "required": ["spec"], "properties": {
               "spec": {"type": "array", "items": {"type": "string"}},
               "m": {"type": "object", "additionalProperties": {"type": "integer", "format": "int64"}}},
               "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "P"}]}}}
    pb = encode_document(doc)
    assert _fields(pb, 1) == [b"2.0"]
    info = _fields(pb, 2)[0]
    assert _fields(info, 1) == [b"Kubernetes"] and _fields(info, 2) == [b"v1.36.0"]
    named_path = _fields(_fields(pb, 8)[0], 2)[0]
    assert _fields(named_path, 1) == [b"/api/v1/pods"]
    get = _fields(_fields(named_path, 2)[0], 2)[0]
    assert _fields(get, 5) == [b"listPod"]
    query = _fields(_fields(_fields(_fields(get, 8)[0], 1)[0], 2)[0], 3)[0]
    assert _fields(query, 2) == [b"query"] and _fields(query, 4) == [b"limit"] and _fields(query, 6) == [b"integer"]
    assert _fields(query, 20) == [1]
    ext = _fields(get, 13)[0]
    assert _fields(ext, 1) == [b"x-kubernetes-action"] and _fields(_fields(ext, 2)[0], 2) == [b'"list"']
    named_schema = _fields(_fields(pb, 9)[0], 1)[0]
    assert _fields(named_schema, 1) == [b"P"]
    schema = _fields(named_schema, 2)[0]
    assert _fields(schema, 19) == [b"spec"] and _fields(_fields(schema, 22)[0], 1) == [b"object"]
    props = {_fields(p, 1)[0]: _fields(p, 2)[0] for p in _fields(_fields(schema, 25)[0], 1)}
    items = _fields(_fields(props[b"spec"], 23)[0], 1)[0]
    assert _fields(_fields(items, 22)[0], 1) == [b"string"]
    ap = _fields(_fields(props[b"m"], 21)[0], 1)[0]
    assert _fields(ap, 2) == [b"int64"]
    gvk = _fields(schema, 31)[0]
    assert json.loads(_fields(_fields(gvk, 2)[0], 2)[0]) == [{"group": "", "version": "v1", "kind": "P"}]


def test_served_v2_protobuf_names_every_definition() -> None:
    docs = _docs()
    body, pb, _ = docs.v2()
    names = {_fields(n, 1)[0].decode() for n in _fields(_fields(pb, 9)[0], 1)}
    assert names == set(json.loads(body)["definitions"])
