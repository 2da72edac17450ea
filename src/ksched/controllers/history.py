"""ControllerRevisions, the history of a StatefulSet's or DaemonSet's pod template (upstream's
``pkg/controller/history/controller_history.go``): a revision's data is the strategic merge patch
that restores the template, its name ``<parent>-<hash>`` hashes that data (FNV-32, the collision
count as a decimal string), name collisions with different data bump the collision count.

Divergence: the hash is over a canonical JSON form of the data (see
:func:`ksched.controllers.controller_utils.compute_hash`); data are compared semantically, so a
revision dumped from a real cluster equals the one ksched would make for the same template.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from ksched.api.apps import ControllerRevision
from ksched.api.errors import AlreadyExists
from ksched.api.labels import LabelSelector
from ksched.api.meta import KubeObject
from ksched.client.informer import SharedInformer
from ksched.controllers.controller_utils import (
    canonical_json,
    controller_ref,
    fnv32,
    safe_encode_string,
    semantic,
)

__all__ = [
    "CONTROLLER_REVISION_HASH_LABEL",
    "controller_revision_name",
    "create_controller_revision",
    "equal_revision",
    "hash_controller_revision",
    "list_controller_revisions",
    "new_controller_revision",
    "sort_revisions",
    "template_patch",
]

# The label holding a revision's hash (history.ControllerRevisionHashLabel).
CONTROLLER_REVISION_HASH_LABEL = "controller.kubernetes.io/hash"


def template_patch(template: dict[str, Any]) -> dict[str, Any]:
    """The data of a revision of a pod template: a strategic merge patch replacing it (``getPatch``)."""
    return {"spec": {"template": {**copy.deepcopy(template), "$patch": "replace"}}}


def template_of(revision: ControllerRevision) -> dict[str, Any] | None:
    """The pod template a revision restores (applying its patch to a workload's spec)."""
    data = revision.data
    if not isinstance(data, dict):
        return None
    tpl = (data.get("spec") or {}).get("template")
    if not isinstance(tpl, dict):
        return None
    return {k: copy.deepcopy(v) for k, v in tpl.items() if k != "$patch"}


def hash_controller_revision(data: Any, probe: int | None) -> str:
    raw = canonical_json(data)
    if probe is not None:
        raw += str(probe).encode()
    return safe_encode_string(str(fnv32(raw)))


def controller_revision_name(prefix: str, hash_: str) -> str:
    return f"{prefix[:223]}-{hash_}"


def new_controller_revision(parent: KubeObject, template_labels: dict[str, str], data: Any, revision: int,
                            collision_count: int | None) -> dict[str, Any]:
    """A revision manifest (``NewControllerRevision``), named by its hash."""
    hash_ = hash_controller_revision(data, collision_count)
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": controller_revision_name(parent.name, hash_), "namespace": parent.namespace,
                         "labels": {**template_labels, CONTROLLER_REVISION_HASH_LABEL: hash_},
                         "ownerReferences": [controller_ref(parent)]},
            "data": data, "revision": revision}


def equal_revision(a: ControllerRevision | None, b: ControllerRevision | None) -> bool:
    if a is None or b is None:
        return a is b
    return semantic(a.data) == semantic(b.data)  # type: ignore[no-any-return]


def sort_revisions(revisions: Iterable[ControllerRevision]) -> list[ControllerRevision]:
    """By revision, then age, then name (``SortControllerRevisions``)."""
    return sorted(revisions, key=lambda r: (r.revision, r.creation_timestamp or 0.0, r.name))


def list_controller_revisions(informer: SharedInformer, parent: KubeObject,
                              selector: LabelSelector) -> list[ControllerRevision]:
    """Revisions the parent's selector matches that it controls or nobody does."""
    out = []
    for r in informer.indexer.by_index("namespace", parent.namespace):
        if not isinstance(r, ControllerRevision) or not selector.matches(r.labels):
            continue
        ref = r.controller_ref()
        if ref is None or ref.uid == parent.uid:
            out.append(r)
    return sort_revisions(out)


def create_controller_revision(client: Any, parent: KubeObject, revision: dict[str, Any],
                               collision_count: int) -> tuple[ControllerRevision, int]:
    """Create a revision, renaming it with a higher collision count while its name is taken by
    different data (``CreateControllerRevision``). Returns the revision and the collision count."""
    while True:
        hash_ = hash_controller_revision(revision["data"], collision_count)
        raw = copy.deepcopy(revision)
        raw["metadata"]["name"] = controller_revision_name(parent.name, hash_)
        try:
            created = client.create(raw)
        except AlreadyExists:
            exists = client.get("ControllerRevision", parent.namespace, raw["metadata"]["name"])
            if isinstance(exists, ControllerRevision) and semantic(exists.data) == semantic(revision["data"]):
                return exists, collision_count
            collision_count += 1
            continue
        assert isinstance(created, ControllerRevision)
        return created, collision_count


def update_revision_number(client: Any, revision: ControllerRevision, number: int) -> ControllerRevision:
    """Give a revision a new number (a rollback to an earlier template)."""
    if revision.revision == number:
        return revision
    raw = dict(revision.raw)
    raw["revision"] = number
    out = client.update(raw)
    assert isinstance(out, ControllerRevision)
    return out
