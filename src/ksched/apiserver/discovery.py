"""API discovery: which groups, versions and resources the embedded server serves (the built-in
kinds, the custom kinds of the store's scheme, and the review resources of ``auth.py``), and the
mapping from a REST path's (group, version, resource) to a kind."""

from __future__ import annotations

from typing import Any

from ksched.api.apiextensions import CustomObject
from ksched.api.kinds import KINDS
from ksched.api.meta import KubeObject
from ksched.api.scheme import Scheme
from ksched.apiserver.auth import RESOURCES as REVIEW_RESOURCES

__all__ = ["GROUP_VERSIONS", "api_group_list", "api_resource_list", "api_versions", "has_status_subresource",
           "resolve_resource", "served_kinds"]

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_CATEGORIES = {"Pod": ["all"], "Job": ["all"], "CronJob": ["all"], "Deployment": ["all"], "ReplicaSet": ["all"],
               "StatefulSet": ["all"], "DaemonSet": ["all"]}
_CATEGORIES["Service"] = ["all"]

# Serves the built-in kinds alone (callers without a store).
_BASE = Scheme()


def _group_version(cls: type[KubeObject]) -> tuple[str, str]:
    g, _, v = cls.API_VERSION.rpartition("/")
    return g, v


GROUP_VERSIONS: dict[tuple[str, str], list[type[KubeObject]]] = {}
for _cls in KINDS.values():
    GROUP_VERSIONS.setdefault(_group_version(_cls), []).append(_cls)


def served_kinds(scheme: Scheme | None = None) -> list[type[KubeObject]]:
    """The kinds the server serves (stored kinds; the OpenAPI documents are built from them)."""
    return (scheme or _BASE).classes()


def has_status_subresource(kind: str, scheme: Scheme | None = None) -> bool:
    cls = (scheme or _BASE).resolve(kind)
    return cls is not None and bool(cls.STATUS_SUBRESOURCE)


def resolve_resource(group: str, version: str, plural: str, scheme: Scheme | None = None) -> type[KubeObject] | None:
    return (scheme or _BASE).resource(group, version, plural)


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def api_group_list(scheme: Scheme | None = None) -> dict[str, Any]:
    """Every group but the core one, each with its versions (the preferred, stored one first)."""
    versions: dict[str, list[str]] = {}
    for c in (scheme or _BASE).classes():
        g = _group_version(c)[0]
        if not g:
            continue
        have = versions.setdefault(g, [])
        for v in (scheme or _BASE).versions(c):
            if v not in have:
                have.append(v)
    for g, v, _ in REVIEW_RESOURCES:
        if v not in versions.setdefault(g, []):
            versions[g].append(v)
    groups = []
    for g in sorted(versions):
        gvs = [{"groupVersion": f"{g}/{v}", "version": v} for v in versions[g]]
        groups.append({"name": g, "versions": gvs, "preferredVersion": gvs[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group: str, scheme: Scheme | None = None) -> dict[str, Any] | None:
    for g in api_group_list(scheme)["groups"]:
        if g["name"] == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **g}
    return None


def api_resource_list(group: str, version: str, scheme: Scheme | None = None) -> dict[str, Any] | None:
    classes = (scheme or _BASE).group_versions().get((group, version)) or []
    reviews = [(p, k) for (g, v, p), k in REVIEW_RESOURCES.items() if (g, v) == (group, version)]
    if not classes and not reviews:
        return None
    resources: list[dict[str, Any]] = [
        {"name": p, "singularName": k.lower(), "namespaced": False, "kind": k, "verbs": ["create"]}
        for p, k in sorted(reviews)]
    for c in sorted(classes, key=lambda c: c.PLURAL):
        custom = issubclass(c, CustomObject)
        r: dict[str, Any] = {"name": c.PLURAL, "singularName": c.SINGULAR if custom else c.KIND.lower(),
                             "namespaced": c.NAMESPACED, "kind": c.KIND, "verbs": list(_VERBS)}
        if c.SHORT_NAMES:
            r["shortNames"] = list(c.SHORT_NAMES)
        categories = list(c.CATEGORIES) if custom else _CATEGORIES.get(c.KIND)
        if categories:
            r["categories"] = categories
        resources.append(r)
        if (version in c.STATUS_VERSIONS) if custom else c.STATUS_SUBRESOURCE:
            resources.append({"name": f"{c.PLURAL}/status", "singularName": "", "namespaced": c.NAMESPACED,
                              "kind": c.KIND, "verbs": ["get", "patch", "update"]})
        if c.SCALE_SUBRESOURCE:
            resources.append({"name": f"{c.PLURAL}/scale", "singularName": "", "namespaced": True,
                              "group": "autoscaling", "version": "v1", "kind": "Scale",
                              "verbs": ["get", "patch", "update"]})
        if c.KIND == "Namespace" and not custom:
            resources.append({"name": "namespaces/finalize", "singularName": "", "namespaced": False,
                              "kind": "Namespace", "verbs": ["update"]})
        if c.KIND == "Pod" and not custom:
            resources.append({"name": "pods/binding", "singularName": "", "namespaced": True, "kind": "Binding",
                              "verbs": ["create"]})
            resources.append({"name": "pods/eviction", "singularName": "", "namespaced": True,
                              "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
    if (group, version) == ("", "v1"):
        resources.append({"name": "bindings", "singularName": "binding", "namespaced": True, "kind": "Binding",
                          "verbs": ["create"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources}
