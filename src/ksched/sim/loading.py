"""Creating loaded objects in an embedded cluster, as ``kubectl create -f`` of a directory would
and as a restore of a real cluster's objects needs:

* **order**: kinds others refer to first (CRDs, namespaces, service accounts, classes, nodes,
  limits and quotas), then pods, then everything else (workload controllers, custom objects);
  within that, an object before any object that owns it (``ownerReferences``), so a controller
  created from a dump finds its pods and adopts them instead of making new ones;
* **existing objects** (exported from another cluster, see ``Manifest.existing``) are created
  with ``existing=True``: they keep their uid, creation time and status (a bound pod stays on its
  node) and are not admitted again; references to owners missing from the input are dropped,
  or the garbage collector would delete them;
* **merging**: an object every fresh cluster has (its namespaces, the ``system-*``
  PriorityClasses, the ``default`` ServiceAccounts) is updated with the loaded manifest's labels,
  annotations and other fields instead of being refused; any other object already there, or a
  second object of the same name in the input, is still an error.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ksched.api.errors import AlreadyExists, ApiError
from ksched.api.meta import KubeObject
from ksched.api.pod import Pod
from ksched.api.priorityclass import system_priority_classes
from ksched.api.serviceaccount import DEFAULT_SERVICE_ACCOUNT
from ksched.apiserver.store import DEFAULT_NAMESPACES, Store

__all__ = ["LOAD_ORDER", "LoadReport", "load_objects"]

_SYSTEM_CLASSES = frozenset(pc["metadata"]["name"] for pc in system_priority_classes())

# Kinds are created in this order ("*": every kind not named).
LOAD_ORDER = ("CustomResourceDefinition", "Namespace", "ServiceAccount", "PriorityClass", "RuntimeClass",
              "StorageClass", "CSINode", "PersistentVolume", "LimitRange", "ResourceQuota", "PersistentVolumeClaim",
              "Node", "DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim", "ConfigMap", "Secret",
              "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "Service", "EndpointSlice",
              "PodDisruptionBudget", "Lease", "Pod", "*", "Event")


@dataclass(slots=True)
class LoadReport:
    errors: list[tuple[int, ApiError]] = field(default_factory=list)
    # Objects a fresh cluster has, updated from the input: "Kind name".
    merged: list[str] = field(default_factory=list)
    # Existing objects whose references to owners missing from the input were dropped.
    orphaned: list[str] = field(default_factory=list)


def _raw(o: KubeObject | dict[str, Any]) -> dict[str, Any]:
    return o.raw if isinstance(o, KubeObject) else o


def _kind(raw: dict[str, Any]) -> str:
    return str(raw.get("kind", ""))


def _uid(raw: dict[str, Any]) -> str:
    md = raw.get("metadata")
    return str(md.get("uid") or "") if isinstance(md, dict) else ""


def _owner_uids(raw: dict[str, Any]) -> list[str]:
    md = raw.get("metadata")
    refs = md.get("ownerReferences") if isinstance(md, dict) else None
    return [str(r.get("uid") or "") for r in refs or () if isinstance(r, dict)]


def order(raws: Sequence[dict[str, Any]], shortcut: bool = True) -> list[int]:
    """Indices of ``raws`` in creation order: by LOAD_ORDER, then input order, dependents before
    their owners. ``shortcut=False`` walks even when no object is another's owner (the
    reference the shortcut is tested against)."""
    rank = {k: i for i, k in enumerate(LOAD_ORDER)}
    other = rank["*"]
    ranks = [rank.get(_kind(r), other) for r in raws]
    by_rank = sorted(range(len(raws)), key=ranks.__getitem__)  # (stable: input order within a rank)
    by_uid = {u: i for i, r in enumerate(raws) if (u := _uid(r))}
    if shortcut and not by_uid:
        return by_rank  # no object names a uid (manifests as written): none is another's owner
    # Owners wait for their dependents: a depth-first walk emits an object's dependents first.
    dependents: dict[int, list[int]] = {}
    for i in by_rank:
        for u in _owner_uids(raws[i]):
            j = by_uid.get(u)
            if j is not None and j != i:
                dependents.setdefault(j, []).append(i)
    if shortcut and not dependents:
        return by_rank
    out: list[int] = []
    state: dict[int, int] = {}  # 1: being visited, 2: done

    def visit(i: int) -> None:
        stack = [(i, iter(dependents.get(i, ())))]
        state[i] = 1
        while stack:
            node, it = stack[-1]
            for d in it:
                if state.get(d) is None:
                    state[d] = 1
                    stack.append((d, iter(dependents.get(d, ()))))
                    break
            else:
                stack.pop()
                state[node] = 2
                out.append(node)

    for i in by_rank:
        if state.get(i) is None:
            visit(i)
    return out


def _merge(store: Store, raw: dict[str, Any]) -> None:
    """Update the object a fresh cluster already has with what the manifest says of it."""
    md = raw.get("metadata") or {}
    cls = store.scheme.resolve(_kind(raw))
    if cls is None:
        return
    current = store.get(cls, md.get("namespace") or ("default" if cls.NAMESPACED else ""), md.get("name") or "")
    merged = copy.deepcopy(current.raw)
    cmd = merged["metadata"]
    for f in ("labels", "annotations"):
        if md.get(f):
            cmd[f] = {**(cmd.get(f) or {}), **md[f]}
    for k, v in raw.items():
        if k not in ("metadata", "status", "apiVersion", "kind"):
            merged[k] = copy.deepcopy(v)
    store.update(merged)


def load_objects(store: Store, objects: Sequence[KubeObject | dict[str, Any]], existing: Collection[int] = (),
                 *, skip_present: bool = False, owned: bool = False, validated: bool = False) -> LoadReport:
    """Create ``objects`` in ``store`` (``existing``: indices of those exported from another
    cluster). ``skip_present``: an object already there (but those every fresh cluster has, which
    are merged) is left as it is -- a restart that loads the same manifests again -- instead of
    being reported. ``owned``: the caller hands the manifests over (the store takes them without
    a copy and may change them); those a fresh cluster has are still copied, as a refused create
    falls back to merging them. ``validated``: every object passed validation as it is given
    (``ksched.api.loader.build_objects`` validates, naming file, document and field path); the
    store then validates a pod again only where admission may have made it invalid, and a
    ``Pod`` given with ``owned`` and ``validated`` lends the store its parse."""
    report = LoadReport()
    raws = [_raw(o) for o in objects]
    existing = set(existing)
    known_uids = {u for r in raws if (u := _uid(r))} if existing else set()
    created: set[tuple[str, str, str]] = set()
    for i in order(raws):
        raw = raws[i]
        is_existing = i in existing
        if is_existing:
            refs = (raw.get("metadata") or {}).get("ownerReferences")
            if refs and any(str(r.get("uid") or "") not in known_uids for r in refs if isinstance(r, dict)):
                raw = copy.deepcopy(raw)
                kept = [r for r in refs if isinstance(r, dict) and str(r.get("uid") or "") in known_uids]
                if kept:
                    raw["metadata"]["ownerReferences"] = kept
                else:
                    del raw["metadata"]["ownerReferences"]
                report.orphaned.append(_describe(raw))
        md = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        key = (_kind(raw), str(md.get("namespace") or ""), str(md.get("name") or ""))
        # A validated pod handed over goes with its parse, which the store shares (Pod.admitted);
        # an existing one's parse is not shared, and its manifest is handed over as it was (the
        # store copies the manifest of a typed object it does not take the parse of).
        given = objects[i]
        target = given if owned and validated and not is_existing and isinstance(given, Pod) \
            and given.raw is raw else raw
        try:
            store.create(target, existing=is_existing, owned=owned and not _fresh_cluster_object(raw),
                         validated=validated)
            created.add(key)
        except AlreadyExists as e:
            if key in created or not md.get("name"):
                report.errors.append((i, e))
                continue
            if not _fresh_cluster_object(raw):
                if not skip_present:
                    report.errors.append((i, e))
                continue
            try:
                _merge(store, raw)
                created.add(key)
                report.merged.append(_describe(raw))
            except ApiError as e2:
                report.errors.append((i, e2))
        except ApiError as e:
            report.errors.append((i, e))
    return report


def _fresh_cluster_object(raw: dict[str, Any]) -> bool:
    """One of the objects every fresh cluster has: its namespaces, the system PriorityClasses, the
    default ServiceAccounts (which the serviceaccount controller makes)."""
    kind = _kind(raw)
    name = str((raw.get("metadata") or {}).get("name") or "")
    return ((kind == "Namespace" and name in DEFAULT_NAMESPACES)
            or (kind == "PriorityClass" and name in _SYSTEM_CLASSES)
            or (kind == "ServiceAccount" and name == DEFAULT_SERVICE_ACCOUNT))


def _describe(raw: dict[str, Any]) -> str:
    md = raw.get("metadata") or {}
    ns = md.get("namespace")
    return f"{_kind(raw)} {ns}/{md.get('name')}" if ns else f"{_kind(raw)} {md.get('name')}"
