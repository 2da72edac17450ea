"""DaemonSet updates and history (upstream's ``pkg/controller/daemon/update.go``): the rolling
update -- without surge, delete old pods (unavailable ones first) while at most
``maxUnavailable`` daemon pods are unavailable and let the sync create the new ones; with
surge, start a new pod beside an old one on up to ``maxSurge`` nodes and delete the old pod once
the new one is available -- and the ControllerRevisions that name each template
(``<daemonset>-<hash>``, label ``controller-revision-hash``), old ones beyond
``revisionHistoryLimit`` deleted unless a pod still runs them.

Divergence: nodes are visited in name order (upstream: map order).
"""

from __future__ import annotations

import copy
from typing import Any

from ksched.api.apps import CONTROLLER_REVISION_HASH_LABEL, ControllerRevision, DaemonSet
from ksched.api.errors import AlreadyExists, Conflict, NotFound
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.controllers.controller_utils import (
    ControllerRefManager,
    compute_hash,
    controller_ref,
    is_pod_available,
    semantic,
)
from ksched.controllers.daemon.util import is_pod_updated, surge_count, unavailable_count
from ksched.controllers.history import template_patch

__all__ = ["UpdateMixin", "find_updated_pods_on_node"]


def find_updated_pods_on_node(ds: DaemonSet, pods: list[Pod], hash_: str) -> tuple[Pod | None, Pod | None, bool]:
    """(new pod, old pod, ok) among a node's pods not being deleted; not ok with two of either."""
    new = old = None
    for p in pods:
        if p.deletion_timestamp is not None:
            continue
        if is_pod_updated(p, hash_, ds.template_generation):
            if new is not None:
                return None, None, False
            new = p
        else:
            if old is not None:
                return None, None, False
            old = p
    return new, old, True


class UpdateMixin:
    """Mixed into DaemonSetsController (which provides the pod map, node tests and syncNodes)."""

    def _rolling_update(self: Any, ds: DaemonSet, nodes: list[Node], hash_: str) -> None:
        node_pods = self._nodes_to_daemon_pods(ds)
        max_surge, max_unavailable, desired = self._updated_desired_node_counts(ds, nodes, node_pods)
        now = self.clock.now()
        mrs = ds.min_ready_seconds
        if max_surge == 0:
            unavailable = 0
            replacements: list[str] = []
            candidates: list[str] = []
            for node_name in sorted(node_pods):
                new, old, ok = find_updated_pods_on_node(ds, node_pods[node_name], hash_)
                if not ok:
                    unavailable += 1  # the sync prunes the excess; count the node as unavailable
                    continue
                if (old is None and new is None) or (old is not None and new is not None):
                    unavailable += 1
                elif new is not None:
                    if not is_pod_available(new, mrs, now):
                        unavailable += 1
                elif old is not None:
                    if not is_pod_available(old, mrs, now):
                        replacements.append(old.name)
                        unavailable += 1
                    elif unavailable < max_unavailable:
                        candidates.append(old.name)
            remaining = max(0, min(max_unavailable - unavailable, len(candidates)))
            self._sync_nodes(ds, replacements + candidates[:remaining], [], hash_)
            return
        to_delete: list[str] = []
        should_not_run: list[str] = []
        candidate_nodes: list[str] = []
        allowed_nodes: list[str] = []
        surge = available = 0
        for node_name in sorted(node_pods):
            new, old, ok = find_updated_pods_on_node(ds, node_pods[node_name], hash_)
            if not ok:
                surge += 1
                continue
            if old is not None:
                if is_pod_available(old, mrs, now):
                    available += 1
            elif new is not None and is_pod_available(new, mrs, now):
                available += 1
            if old is None:
                continue
            if new is None:
                node = self._node(node_name)
                if node is None:
                    raise NotFound(f'couldn\'t get node for nodeName "{node_name}"')
                should_run, _ = self._node_should_run(node, ds)
                if not is_pod_available(old, mrs, now):
                    if not should_run:
                        to_delete.append(old.name)
                        continue
                    allowed_nodes.append(node_name)
                elif not should_run:
                    should_not_run.append(old.name)
                elif surge < max_surge:
                    candidate_nodes.append(node_name)
                continue
            if not is_pod_available(new, mrs, now):
                surge += 1
                continue
            to_delete.append(old.name)
        deletable = available - desired
        if deletable > 0:
            for name in should_not_run[:deletable]:
                p = self.pod_informer.get(f"{ds.namespace}/{name}")
                if isinstance(p, Pod) and p.deletion_timestamp is None:
                    to_delete.append(name)
        remaining = max(0, min(max_surge - surge, len(candidate_nodes)))
        self._sync_nodes(ds, to_delete, allowed_nodes + candidate_nodes[:remaining], hash_)

    def _updated_desired_node_counts(self: Any, ds: DaemonSet, nodes: list[Node],
                                     node_pods: dict[str, list[Pod]]) -> tuple[int, int, int]:
        desired = 0
        for node in nodes:
            if self._node_should_run(node, ds)[0]:
                desired += 1
                node_pods.setdefault(node.name, [])
        max_unavailable = unavailable_count(ds, desired)
        max_surge = surge_count(ds, desired)
        if desired > 0 and max_unavailable == 0 and max_surge == 0:
            max_unavailable = 1  # an impossible configuration: accept unavailability
        return max_surge, max_unavailable, desired

    # ---- history --------------------------------------------------------------------------

    def _controlled_histories(self: Any, ds: DaemonSet) -> list[ControllerRevision]:
        revs = sorted((r for r in self.history_informer.indexer.by_index("namespace", ds.namespace)
                       if isinstance(r, ControllerRevision)), key=lambda r: r.name)
        manager = ControllerRefManager(self.client, ds, ds.selector,
                                       lambda: self.client.get("DaemonSet", ds.namespace, ds.name))
        claimed, errors = manager.claim(revs)
        if errors:
            raise errors[0]
        return [r for r in claimed if isinstance(r, ControllerRevision)]

    def _construct_history(self: Any, ds: DaemonSet) -> tuple[ControllerRevision, list[ControllerRevision]]:
        """(current revision, old revisions) (``constructHistory``): the current one is created,
        renumbered or de-duplicated as needed."""
        patch = semantic(template_patch(ds.template))
        current: list[ControllerRevision] = []
        old: list[ControllerRevision] = []
        for h in self._controlled_histories(ds):
            if CONTROLLER_REVISION_HASH_LABEL not in h.labels:
                raw = copy.deepcopy(h.raw)
                raw["metadata"].setdefault("labels", {})[CONTROLLER_REVISION_HASH_LABEL] = h.name
                h = self.client.update(raw)
            (current if semantic(h.data) == patch else old).append(h)
        number = max((h.revision for h in old), default=0) + 1
        if not current:
            return self._snapshot(ds, number), old
        cur = self._dedup_current(ds, current)
        if cur.revision < number:
            raw = dict(cur.raw)
            raw["revision"] = number
            cur = self.client.update(raw)
        return cur, old

    def _dedup_current(self: Any, ds: DaemonSet, current: list[ControllerRevision]) -> ControllerRevision:
        keep = current[0]
        for c in current:
            if c.revision >= keep.revision:
                keep = c
        keep_hash = keep.labels.get(CONTROLLER_REVISION_HASH_LABEL, "")
        for c in current:
            if c.name == keep.name:
                continue
            for p in self._daemon_pods(ds):
                if p.labels.get(CONTROLLER_REVISION_HASH_LABEL) != keep_hash:
                    self.client.patch("Pod", p.namespace, p.name,
                                      {"metadata": {"labels": {CONTROLLER_REVISION_HASH_LABEL: keep_hash}}},
                                      "application/strategic-merge-patch+json")
            try:
                self.client.delete("ControllerRevision", c.namespace, c.name)
            except NotFound:
                pass
        return keep

    def _snapshot(self: Any, ds: DaemonSet, number: int) -> ControllerRevision:
        """Record the current template as a revision (``snapshot``); a name taken by another
        template bumps the DaemonSet's collision count and retries later."""
        hash_ = compute_hash(ds.template, ds.collision_count)
        name = f"{ds.name}-{hash_}"
        raw: dict[str, Any] = {
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": name, "namespace": ds.namespace,
                         "labels": {**ds.template_labels, CONTROLLER_REVISION_HASH_LABEL: hash_},
                         "ownerReferences": [controller_ref(ds)]},
            "data": template_patch(ds.template), "revision": number}
        if ds.annotations:
            raw["metadata"]["annotations"] = dict(ds.annotations)
        try:
            created = self.client.create(raw)
        except AlreadyExists:
            existing = self.client.get("ControllerRevision", ds.namespace, name)
            if isinstance(existing, ControllerRevision) and semantic(existing.data) == semantic(raw["data"]):
                return existing
            fresh = self.client.get("DaemonSet", ds.namespace, ds.name)
            if not isinstance(fresh, DaemonSet) or fresh.collision_count != ds.collision_count:
                raise Conflict(f'found a stale collision count ({ds.collision_count}, expected '
                               f'{getattr(fresh, "collision_count", None)}) of DaemonSet "{ds.name}" while '
                               "processing; will retry until it is updated") from None
            status = dict(fresh.status)
            status["collisionCount"] = (fresh.collision_count or 0) + 1
            self.client.update_status({**fresh.raw, "status": status})
            raise
        assert isinstance(created, ControllerRevision)
        return created

    def _cleanup_history(self: Any, ds: DaemonSet, old: list[ControllerRevision]) -> None:
        """Delete the oldest revisions beyond revisionHistoryLimit that no pod runs."""
        to_kill = len(old) - ds.revision_history_limit
        if to_kill <= 0:
            return
        live = {p.labels.get(CONTROLLER_REVISION_HASH_LABEL) for pods in self._nodes_to_daemon_pods(ds).values()
                for p in pods}
        for h in sorted(old, key=lambda r: (r.revision, r.creation_timestamp or 0.0, r.name)):
            if to_kill <= 0:
                break
            if h.labels.get(CONTROLLER_REVISION_HASH_LABEL) in live:
                continue
            try:
                self.client.delete("ControllerRevision", h.namespace, h.name)
            except NotFound:
                pass
            to_kill -= 1
