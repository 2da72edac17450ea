"""DRA-backed extended resources (DRAExtendedResource, beta and on in 1.36): a pod asking for
``example.com/gpu: 1`` in its containers' resources is given devices of the DeviceClass that
stands for that name, on nodes that do not advertise the resource in their allocatable.

Upstream: ``pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go``
(the special claim, its requests and request mappings) and
``staging/src/k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache`` (which
class a resource name maps to).

* :class:`DeviceClassResolver`: every class stands for ``deviceclass.resource.kubernetes.io/<class>``
  and for its ``spec.extendedResourceName``; when two classes name the same resource the newer
  (creationTimestamp) wins, on a tie the smaller name.
* :func:`find_extended_resource_claim`: the claim of an earlier cycle, annotated
  ``resource.kubernetes.io/extended-resource-claim: "true"`` and controller-owned by the pod.
* :func:`placeholder_claim`: the in-memory claim ``<extended-resources>`` (an invalid name on
  purpose) with ``generateName: <pod>-extended-resources-``, owned by the pod, empty spec.
* :func:`requests_and_mappings`: one ExactCount request ``container-<i>-request-<j>`` per
  container and resource (``i``: index in initContainers then containers; ``j``: index of the
  resource among the container's sorted request names); a non-sidecar init container reuses
  the requests of the long-lived containers after it and only the largest init request is
  kept; requests sorted by name; the ``requestMappings`` for the pod's
  ``status.extendedResourceClaimStatus``.

Known divergence: the placeholder's temporary UID comes from a seeded source of the plugin's
own (a simulation stays deterministic), not a random one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ksched.api.pod import Pod
from ksched.api.resource import (
    ANNOTATION_EXTENDED_RESOURCE_CLAIM,
    EXTENDED_RESOURCE_PREFIX,
    DeviceClass,
    ResourceClaim,
    is_dra_extended_resource_name,
)

__all__ = [
    "SPECIAL_CLAIM_NAME",
    "DeviceClassResolver",
    "find_extended_resource_claim",
    "is_special_claim",
    "placeholder_claim",
    "requests_and_mappings",
]

SPECIAL_CLAIM_NAME = "<extended-resources>"


class DeviceClassResolver:
    """Resource name -> the DeviceClass that provides it."""

    __slots__ = ("_by_name",)

    def __init__(self, classes: Iterable[DeviceClass]) -> None:
        best: dict[str, DeviceClass] = {}
        for c in classes:
            for name in (EXTENDED_RESOURCE_PREFIX + c.name, c.extended_resource_name):
                if not name:
                    continue
                cur = best.get(name)
                if cur is None or _wins(c, cur):
                    best[name] = c
        self._by_name = best

    def get(self, resource: str) -> DeviceClass | None:
        return self._by_name.get(resource)

    def __bool__(self) -> bool:
        return bool(self._by_name)


def _wins(a: DeviceClass, b: DeviceClass) -> bool:
    """Whether class ``a`` takes a resource name from ``b``: newer, or as new with a smaller name."""
    ta = a.creation_timestamp or 0.0
    tb = b.creation_timestamp or 0.0
    if ta != tb:
        return ta > tb
    return a.name < b.name


def mapped_requests(requests: Mapping[str, int], resolver: DeviceClassResolver) -> dict[str, int]:
    """The pod's non-zero requests of resources some DeviceClass stands for."""
    if not resolver:
        return {}
    return {k: v for k, v in requests.items()
            if v and is_dra_extended_resource_name(k) and resolver.get(k) is not None}


def find_extended_resource_claim(pod: Pod, claims: Iterable[ResourceClaim]) -> ResourceClaim | None:
    for c in claims:
        if c.namespace != pod.namespace or c.annotations.get(ANNOTATION_EXTENDED_RESOURCE_CLAIM) != "true":
            continue
        for r in c.owner_references:
            if r.name == pod.name and r.controller and r.uid == pod.uid:
                return c
    return None


def is_special_claim(claim: ResourceClaim) -> bool:
    return claim.name == SPECIAL_CLAIM_NAME


def _owner(pod: Pod) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}


def placeholder_claim(pod: Pod, uid: str) -> ResourceClaim:
    return ResourceClaim({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": SPECIAL_CLAIM_NAME, "namespace": pod.namespace, "uid": uid,
                     "generateName": f"{pod.name}-extended-resources-", "ownerReferences": [_owner(pod)],
                     "annotations": {ANNOTATION_EXTENDED_RESOURCE_CLAIM: "true"}},
        "spec": {}})


def node_claim(placeholder: ResourceClaim, requests: list[dict[str, Any]]) -> ResourceClaim:
    """The placeholder with this node's requests (each node may need other ones)."""
    raw = placeholder.deepcopy_raw()
    raw["spec"] = {"devices": {"requests": requests}}
    return ResourceClaim(raw)


def _request(container_index: int, container: Any, resource: str, class_name: str,
             reusable: list[dict[str, Any] | None]) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """createResourceRequestAndMappings: this container's request for ``resource`` (None when
    it needs none of its own) and its mappings; ``reusable``: requests of later long-lived
    containers it may use first."""
    want = container.requests.get(resource, 0)
    if resource not in container.requests or not want:
        return None, []
    mappings: list[dict[str, str]] = []
    total = 0
    for r in reusable:
        if r is None:
            continue
        total += r["exactly"]["count"]
        mappings.append({"containerName": container.name, "resourceName": resource, "requestName": r["name"]})
        if total >= want:
            return None, mappings
    ridx = sorted(container.requests).index(resource)
    name = f"container-{container_index}-request-{ridx}"
    req = {"name": name, "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount",
                                     "count": want - total}}
    mappings.append({"containerName": container.name, "resourceName": resource, "requestName": name})
    return req, mappings


def requests_and_mappings(pod: Pod, resources: Iterable[str],
                          resolver: DeviceClassResolver) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """createRequestsAndMappings for the resources this node gets from DRA."""
    containers = [*pod.init_containers, *pod.containers]
    n_init = len(pod.init_containers)
    long_lived = [i for i, c in enumerate(containers) if i >= n_init or c.is_sidecar]
    short_lived = [i for i in range(n_init) if not containers[i].is_sidecar]
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(resources):
        cls = resolver.get(resource)
        if cls is None:
            continue
        long_reqs: list[dict[str, Any] | None] = [None] * len(containers)
        long_maps: list[dict[str, str]] = []
        for i in long_lived:
            r, m = _request(i, containers[i], resource, cls.name, [])
            long_reqs[i] = r
            long_maps.extend(m)
        best: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_maps: list[dict[str, str]] = []
        for i in short_lived:
            r, m = _request(i, containers[i], resource, cls.name, long_reqs[i:])
            if r is not None:
                short_names.add(r["name"])
                if best is None or best["exactly"]["count"] < r["exactly"]["count"]:
                    best = r
            short_maps.extend(m)
        if best is not None and len(short_names) > 1:
            short_names.discard(best["name"])
            for m in short_maps:
                if m["requestName"] in short_names:
                    m["requestName"] = best["name"]
        if best is not None:
            requests.append(best)
        requests.extend(r for r in long_reqs if r is not None)
        mappings.extend(long_maps)
        mappings.extend(short_maps)
    requests.sort(key=lambda r: r["name"])
    return requests, mappings
