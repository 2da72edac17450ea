"""API discovery: which groups, versions and resources the embedded server serves, and the
mapping from a REST path's (group, version, resource) to a kind."""

from __future__ import annotations

from typing import Any

from ksched.api.kinds import KINDS
from ksched.api.meta import KubeObject
from ksched.apiserver.auth import RESOURCES as REVIEW_RESOURCES

__all__ = ["GROUP_VERSIONS", "api_group_list", "api_resource_list", "api_versions", "has_status_subresource",
           "resolve_resource", "served_kinds"]

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_CATEGORIES = {"Pod": ["all"]}


def _group_version(cls: type[KubeObject]) -> tuple[str, str]:
    g, _, v = cls.API_VERSION.rpartition("/")
    return g, v


GROUP_VERSIONS: dict[tuple[str, str], list[type[KubeObject]]] = {}
for _cls in KINDS.values():
    GROUP_VERSIONS.setdefault(_group_version(_cls), []).append(_cls)

_BY_PATH: dict[tuple[str, str, str], type[KubeObject]] = {
    (*_group_version(c), c.PLURAL): c for c in KINDS.values()}


def served_kinds() -> list[type[KubeObject]]:
    """The kinds the server serves (stored kinds; the OpenAPI documents are built from them)."""
    return list(KINDS.values())


def has_status_subresource(kind: str) -> bool:
    cls = KINDS.get(kind)
    return cls is not None and bool(cls.STATUS_SUBRESOURCE)


def resolve_resource(group: str, version: str, plural: str) -> type[KubeObject] | None:
    return _BY_PATH.get((group, version, plural))


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def api_group_list() -> dict[str, Any]:
    groups = []
    for (g, v) in sorted(set(GROUP_VERSIONS) | {(g, v) for g, v, _ in REVIEW_RESOURCES}):
        if not g:
            continue
        gv = {"groupVersion": f"{g}/{v}", "version": v}
        groups.append({"name": g, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group: str) -> dict[str, Any] | None:
    for g in api_group_list()["groups"]:
        if g["name"] == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **g}
    return None


def api_resource_list(group: str, version: str) -> dict[str, Any] | None:
    classes = GROUP_VERSIONS.get((group, version)) or []
    reviews = [(p, k) for (g, v, p), k in REVIEW_RESOURCES.items() if (g, v) == (group, version)]
    if not classes and not reviews:
        return None
    resources: list[dict[str, Any]] = [
        {"name": p, "singularName": k.lower(), "namespaced": False, "kind": k, "verbs": ["create"]}
        for p, k in sorted(reviews)]
    for c in sorted(classes, key=lambda c: c.PLURAL):
        r: dict[str, Any] = {"name": c.PLURAL, "singularName": c.KIND.lower(), "namespaced": c.NAMESPACED,
                             "kind": c.KIND, "verbs": list(_VERBS)}
        if c.SHORT_NAMES:
            r["shortNames"] = list(c.SHORT_NAMES)
        if c.KIND in _CATEGORIES:
            r["categories"] = _CATEGORIES[c.KIND]
        resources.append(r)
        if c.STATUS_SUBRESOURCE:
            resources.append({"name": f"{c.PLURAL}/status", "singularName": "", "namespaced": c.NAMESPACED,
                              "kind": c.KIND, "verbs": ["get", "patch", "update"]})
        if c.KIND == "Pod":
            resources.append({"name": "pods/binding", "singularName": "", "namespaced": True, "kind": "Binding",
                              "verbs": ["create"]})
            resources.append({"name": "pods/eviction", "singularName": "", "namespaced": True,
                              "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
    if (group, version) == ("", "v1"):
        resources.append({"name": "bindings", "singularName": "binding", "namespaced": True, "kind": "Binding",
                          "verbs": ["create"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources}
