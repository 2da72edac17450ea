"""Reading a cluster's objects for a simulation (``ksched snapshot``, ``ksched simulate
--from-cluster``): every kind ksched knows and the cluster serves, plus the custom resources of
the cluster's CustomResourceDefinitions, listed page by page (``limit``/``continue``) through the
REST client. Nothing is ever written to the cluster.

Not taken: Events and Leases (the cluster's past and its heartbeats), and Secrets unless asked
for (a snapshot is a file on disk). ``metadata.managedFields`` is dropped. ``namespaces`` limits
the namespaced kinds (and the Namespace objects) to those namespaces; ``label_selector`` applies
to namespaced kinds only: the cluster-scoped objects pods depend on (nodes, classes, volumes)
are always taken whole.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ksched.api.errors import ApiError, Forbidden, NotFound
from ksched.api.labels import LabelSelector
from ksched.api.meta import KubeObject
from ksched.api.scheme import resource_name

__all__ = ["NOT_SNAPSHOT", "Snapshot", "take_snapshot"]

log = logging.getLogger(__name__)

NOT_SNAPSHOT = frozenset(("Event", "Lease"))


@dataclass(slots=True)
class Snapshot:
    """Objects by resource name (``pods``, ``deployments.apps``, ``widgets.example.com``), and the
    resources the cluster would not list (with why)."""

    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)

    def all(self) -> list[dict[str, Any]]:
        return [o for objs in self.objects.values() for o in objs]

    def count(self) -> int:
        return sum(len(v) for v in self.objects.values())


def _clean(cls: type[KubeObject], raw: dict[str, Any]) -> dict[str, Any]:
    out = dict(raw)
    out.setdefault("apiVersion", cls.API_VERSION)
    out.setdefault("kind", cls.KIND)
    md = out.get("metadata")
    if isinstance(md, dict) and "managedFields" in md:
        out["metadata"] = {k: v for k, v in md.items() if k != "managedFields"}
    return out


def take_snapshot(client: Any, namespaces: Iterable[str] = (), label_selector: LabelSelector | None = None,
                  include_secrets: bool = False) -> Snapshot:
    """Every object the cluster behind ``client`` (a RestClient) holds of the kinds ksched knows."""
    snap = Snapshot()
    ns_filter = [n for n in namespaces if n]
    try:
        client.discover_custom_kinds()
    except ApiError as e:
        snap.unavailable["customresourcedefinitions.apiextensions.k8s.io"] = e.message
    skip = set(NOT_SNAPSHOT)
    if not include_secrets:
        skip.add("Secret")
    for cls in client.scheme.classes():
        if cls.KIND_KEY in skip:
            continue
        name = resource_name(cls)
        items: list[dict[str, Any]] = []
        try:
            if cls.NAMESPACED and ns_filter:
                for ns in ns_filter:
                    objs, _ = client.list(cls, ns, label_selector)
                    items.extend(_clean(cls, o.raw) for o in objs)
            else:
                objs, _ = client.list(cls, None, label_selector if cls.NAMESPACED else None)
                items.extend(_clean(cls, o.raw) for o in objs
                             if not (cls.KIND_KEY == "Namespace" and ns_filter and o.name not in ns_filter))
        except (NotFound, Forbidden) as e:
            # Not served by this cluster (an older version), or not ours to read.
            snap.unavailable[name] = e.message
            log.info("snapshot: %s not listed: %s", name, e.message)
            continue
        if items:
            snap.objects[name] = items
    return snap
