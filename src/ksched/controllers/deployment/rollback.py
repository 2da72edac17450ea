"""Rolling back through the ``deprecated.deployment.rollback.to`` annotation (upstream's
``pkg/controller/deployment/rollback.go``). apps/v1 has no ``spec.rollbackTo`` and ``kubectl
rollout undo`` patches the template itself, but the controller still honours the annotation:
the template of the ReplicaSet with that revision (0: the previous one) is copied back.
"""

from __future__ import annotations

import copy
from typing import Any

from ksched.api.apps import DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, Deployment, ReplicaSet
from ksched.controllers.deployment.util import (
    DEPRECATED_ROLLBACK_TO,
    ROLLBACK_DONE,
    ROLLBACK_REVISION_NOT_FOUND,
    ROLLBACK_TEMPLATE_UNCHANGED,
    equal_ignore_hash,
    last_revision,
    revision,
    set_deployment_annotations_to,
)

__all__ = ["RollbackMixin", "rollback_to"]


def rollback_to(d: Deployment) -> int | None:
    """The revision the annotation asks for, None without it (or when it is not a number)."""
    v = d.annotations.get(DEPRECATED_ROLLBACK_TO)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        return None


class RollbackMixin:
    """Mixed into DeploymentController."""

    def _rollback(self: Any, d: Deployment, rs_list: list[ReplicaSet]) -> None:
        new, old, d = self._all_replica_sets_and_sync_revision(d, rs_list, True)
        all_rss = [rs for rs in (*old, new) if rs is not None]
        target = rollback_to(d) or 0
        if target == 0:
            target = last_revision(all_rss)
            if target == 0:
                self._rollback_event(d, "Warning", ROLLBACK_REVISION_NOT_FOUND, "Unable to find last revision.")
                self._clear_rollback(d)
                return
        for rs in all_rss:
            try:
                v = revision(rs.annotations)
            except ValueError:
                continue
            if v == target:
                if self._rollback_to_template(d, rs):
                    self._rollback_event(d, "Normal", ROLLBACK_DONE,
                                         f'Rolled back deployment "{d.name}" to revision {target}')
                return
        self._rollback_event(d, "Warning", ROLLBACK_REVISION_NOT_FOUND, "Unable to find the revision to rollback to.")
        self._clear_rollback(d)

    def _rollback_to_template(self: Any, d: Deployment, rs: ReplicaSet) -> bool:
        if equal_ignore_hash(d.template, rs.template):
            self._rollback_event(d, "Warning", ROLLBACK_TEMPLATE_UNCHANGED,
                                 f'The rollback revision contains the same template as current deployment "{d.name}"')
            self._clear_rollback(d)
            return False
        template = copy.deepcopy(rs.template)
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        labels.pop(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, None)
        template.setdefault("metadata", {})["labels"] = labels
        annotations = set_deployment_annotations_to(dict(d.annotations), rs)
        self._clear_rollback(d, template, annotations)
        return True

    def _clear_rollback(self: Any, d: Deployment, template: dict[str, Any] | None = None,
                        annotations: dict[str, str] | None = None) -> None:
        """Write the Deployment without the rollback annotation (and with the restored template)."""
        raw = copy.deepcopy(d.raw)
        md = raw.setdefault("metadata", {})
        ann = dict(annotations if annotations is not None else md.get("annotations") or {})
        ann.pop(DEPRECATED_ROLLBACK_TO, None)
        md["annotations"] = ann
        if template is not None:
            raw["spec"]["template"] = template
        self.client.update(raw)

    def _rollback_event(self: Any, d: Deployment, etype: str, reason: str, message: str) -> None:
        self.recorder.event(d, etype, reason, "Rollback", message)
