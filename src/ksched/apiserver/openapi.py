"""A minimal OpenAPI v3 document per group/version: the paths and operations the server serves,
tagged with ``x-kubernetes-group-version-kind`` and the query parameters it accepts.

kubectl reads it to learn that the server validates objects itself (``fieldValidation``), so
``kubectl create/apply`` need no client-side schema. It carries no object schemas; kubectl
then computes client-side-apply patches from its built-in types, as for any server without
them."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ksched.apiserver.discovery import GROUP_VERSIONS

__all__ = ["openapi_root", "openapi_v3"]

_QUERY_PARAMS = ("fieldValidation", "fieldManager", "dryRun", "pretty")


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}


def openapi_v3(group: str, version: str) -> dict[str, Any] | None:
    classes = GROUP_VERSIONS.get((group, version))
    if not classes:
        return None
    base = "/" + _gv_path(group, version)
    paths: dict[str, Any] = {}
    for c in classes:
        gvk = {"group": group, "version": version, "kind": c.KIND}
        params = [_param(p) for p in _QUERY_PARAMS]
        coll = f"{base}/namespaces/{{namespace}}/{c.PLURAL}" if c.NAMESPACED else f"{base}/{c.PLURAL}"
        item = f"{coll}/{{name}}"

        def op(verb: str, action: str, kind: str = c.KIND, gvk: dict[str, Any] = gvk,
               params: list[dict[str, Any]] = params) -> dict[str, Any]:
            return {"operationId": f"{verb}{kind}", "x-kubernetes-action": action,
                    "x-kubernetes-group-version-kind": gvk, "parameters": params,
                    "responses": {"200": {"description": "OK"}}}

        paths[coll] = {"get": op("list", "list"), "post": op("create", "post")}
        paths[item] = {"get": op("read", "get"), "put": op("replace", "put"), "patch": op("patch", "patch"),
                       "delete": op("delete", "delete")}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (ksched)", "version": "v1.36.0"}, "paths": paths,
            "components": {"schemas": {}}}


def openapi_root() -> dict[str, Any]:
    paths = {}
    for (g, v) in sorted(GROUP_VERSIONS):
        doc = openapi_v3(g, v)
        h = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16].upper()
        paths[_gv_path(g, v)] = {"serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}?hash={h}"}
    return {"paths": paths}
