"""The REST front with the new kinds: discovery of the core, discovery.k8s.io, node.k8s.io,
rbac.authorization.k8s.io and apiextensions.k8s.io resources, custom kinds appearing and going
with their CRDs (each served version, the status subresource), objects served at the version
asked for, and every refusal answered as a Status object."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from serve_helpers import Http

from ksched.apiserver.http import ApiServer
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock

CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "widgets.example.com"},
       "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                                  "type": "object", "properties": {"size": {"type": "integer", "maximum": 3}}},
                                  "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}},
                             {"name": "v1beta1", "served": True, "storage": False, "schema": {"openAPIV3Schema": {
                                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture
def http() -> Iterator[tuple[Store, Http]]:
    store = Store(VirtualClock())
    server = ApiServer(store, "127.0.0.1", 0)
    server.start()
    try:
        yield store, Http("127.0.0.1", server.port)
    finally:
        server.stop()


def resources(h: Http, path: str) -> dict[str, dict[str, Any]]:
    code, _, body = h.get(path)
    assert code == 200, body
    return {r["name"]: r for r in body["resources"]}


def is_status(body: Any, code: int, reason: str) -> bool:
    return (isinstance(body, dict) and body.get("kind") == "Status" and body.get("code") == code
            and body.get("reason") == reason and body.get("status") == "Failure")


def test_discovery_of_the_new_kinds(http: tuple[Store, Http]) -> None:
    _, h = http
    core = resources(h, "/api/v1")
    for name in ("services", "services/status", "configmaps", "secrets", "serviceaccounts", "limitranges",
                 "resourcequotas", "resourcequotas/status"):
        assert name in core, name
    assert core["services"]["shortNames"] == ["svc"] and core["services"]["categories"] == ["all"]
    assert resources(h, "/apis/discovery.k8s.io/v1")["endpointslices"]["namespaced"] is True
    assert resources(h, "/apis/node.k8s.io/v1")["runtimeclasses"]["namespaced"] is False
    assert set(resources(h, "/apis/rbac.authorization.k8s.io/v1")) == {"roles", "clusterroles", "rolebindings",
                                                                       "clusterrolebindings"}
    crds = resources(h, "/apis/apiextensions.k8s.io/v1")
    assert crds["customresourcedefinitions"]["shortNames"] == ["crd", "crds"]


def test_custom_kinds_come_and_go_with_their_crd(http: tuple[Store, Http]) -> None:
    _, h = http
    code, _, body = h.get("/apis/example.com/v1")
    assert code == 404 and is_status(body, 404, "NotFound")
    code, _, body = h.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    assert code == 201 and body["status"]["conditions"][1]["type"] == "Established"
    groups = {g["name"]: g for g in h.get("/apis")[2]["groups"]}
    assert groups["example.com"]["preferredVersion"]["version"] == "v1"
    assert [v["version"] for v in groups["example.com"]["versions"]] == ["v1", "v1beta1"]
    v1 = resources(h, "/apis/example.com/v1")
    assert v1["widgets"]["kind"] == "Widget" and v1["widgets"]["singularName"] == "widget" and "widgets/status" in v1
    assert "widgets/status" not in resources(h, "/apis/example.com/v1beta1")
    base = "/apis/example.com/v1beta1/namespaces/default/widgets"
    code, _, body = h.post(base, {"apiVersion": "example.com/v1beta1", "kind": "Widget",
                                  "metadata": {"name": "w"}, "spec": {"size": 1, "free": True}})
    assert code == 201 and body["apiVersion"] == "example.com/v1beta1"
    code, _, body = h.get("/apis/example.com/v1/namespaces/default/widgets/w")
    assert code == 200 and body["apiVersion"] == "example.com/v1" and body["spec"] == {"size": 1, "free": True}
    code, _, body = h.get(base)
    assert body["kind"] == "WidgetList" and body["apiVersion"] == "example.com/v1beta1"
    assert [i["apiVersion"] for i in body["items"]] == ["example.com/v1beta1"]
    code, _, body = h.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
    assert code == 200
    code, _, body = h.get("/apis/example.com/v1/namespaces/default/widgets")
    assert code == 404 and is_status(body, 404, "NotFound")


def test_refusals_are_status_objects(http: tuple[Store, Http]) -> None:
    store, h = http
    h.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    base = "/apis/example.com/v1/namespaces/default/widgets"
    code, _, body = h.post(base, {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                                  "spec": {"size": 9}})
    assert code == 422 and is_status(body, 422, "Invalid")
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec.size",
                                          "message": "Invalid value: 9: spec.size in body should be less than or equal "
                                                     "to 3"}]
    code, _, body = h.post(base, {"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"name": "w"}})
    assert code == 400 and is_status(body, 400, "BadRequest")
    code, _, body = h.post("/api/v1/namespaces/default/pods", {"apiVersion": "v1", "kind": "Pod",
                                                               "metadata": {"name": "p"},
                                                               "spec": {"runtimeClassName": "none", "containers": [
                                                                   {"name": "c", "image": "i"}]}})
    assert code == 403 and is_status(body, 403, "Forbidden")
    assert body["message"] == 'pods "p" is forbidden: pod rejected: RuntimeClass "none" not found'
    code, _, body = h.post("/api/v1/namespaces/default/resourcequotas", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {"widgets": "1"}}})
    assert code == 422 and is_status(body, 422, "Invalid")
    code, _, body = h.post("/api/v1/namespaces/default/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"clusterIP": "10.96.0.5", "ports": [{"port": 80}]}})
    assert code == 201
    code, _, body = h.post("/api/v1/namespaces/default/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "t"},
        "spec": {"clusterIP": "10.96.0.5", "ports": [{"port": 80}]}})
    assert code == 422 and is_status(body, 422, "Invalid") and "provided IP is already allocated" in body["message"]
    assert store.count("Service") == 1


def test_status_is_served_at_the_versions_that_declare_it(http: tuple[Store, Http]) -> None:
    _, h = http
    h.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    h.post("/apis/example.com/v1/namespaces/default/widgets", {"apiVersion": "example.com/v1", "kind": "Widget",
                                                               "metadata": {"name": "w"}, "spec": {"size": 1}})
    code, _, body = h.patch("/apis/example.com/v1/namespaces/default/widgets/w/status", {"status": {"ok": True}},
                            "application/merge-patch+json")
    assert code == 200 and body["status"] == {"ok": True}
    code, _, body = h.patch("/apis/example.com/v1beta1/namespaces/default/widgets/w/status", {"status": {"ok": 1}},
                            "application/merge-patch+json")
    assert code == 404 and is_status(body, 404, "NotFound")
