"""Deployment helpers (upstream's ``pkg/controller/deployment/util/deployment_util.go``):
revisions and the annotations a Deployment copies to its ReplicaSets, conditions, the
rolling-update fenceposts, proportions for scaling mid-rollout, finding the new and old
ReplicaSets, and the tests of completion, progress and timeout.

ReplicaSets are read-only typed objects; the functions that upstream lets mutate a ReplicaSet
or a Deployment status work on plain dicts (annotations, status) here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ksched.api.apps import (
    DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY,
    RECREATE,
    ROLLING_UPDATE,
    Deployment,
    ReplicaSet,
)
from ksched.api.apps import scaled_value as _scaled
from ksched.api.meta import format_time, parse_time
from ksched.controllers.controller_utils import semantic

__all__ = [
    "DESIRED_REPLICAS_ANNOTATION",
    "MAX_REPLICAS_ANNOTATION",
    "REVISION_ANNOTATION",
    "REVISION_HISTORY_ANNOTATION",
    "equal_ignore_hash",
    "find_new_replica_set",
    "find_old_replica_sets",
    "max_surge",
    "max_unavailable",
    "resolve_fenceposts",
]

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
REVISION_HISTORY_ANNOTATION = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
DEPRECATED_ROLLBACK_TO = "deprecated.deployment.rollback.to"
LAST_APPLIED_CONFIG = "kubectl.kubernetes.io/last-applied-configuration"

# Event reasons of a rollback.
ROLLBACK_REVISION_NOT_FOUND = "DeploymentRollbackRevisionNotFound"
ROLLBACK_TEMPLATE_UNCHANGED = "DeploymentRollbackTemplateUnchanged"
ROLLBACK_DONE = "DeploymentRollback"

# Condition types and reasons.
AVAILABLE = "Available"
PROGRESSING = "Progressing"
REPLICA_FAILURE = "ReplicaFailure"
REPLICA_SET_UPDATED = "ReplicaSetUpdated"
FAILED_RS_CREATE = "ReplicaSetCreateError"
NEW_REPLICA_SET = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
MINIMUM_REPLICAS_AVAILABLE = "MinimumReplicasAvailable"
MINIMUM_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"

# The revision-history annotation is kept under this many characters (maxRevHistoryLengthInChars).
MAX_REV_HISTORY_LENGTH = 2000
_MAX_INT32 = 2**31 - 1

_SKIP_COPY = frozenset((LAST_APPLIED_CONFIG, REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION,
                        DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, DEPRECATED_ROLLBACK_TO))


# ---------------------------------------------------------------- conditions


def new_condition(ctype: str, status: str, reason: str, message: str, now: float) -> dict[str, Any]:
    ts = format_time(now)
    return {"type": ctype, "status": status, "lastUpdateTime": ts, "lastTransitionTime": ts, "reason": reason,
            "message": message}


def get_condition(status: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in status.get("conditions") or ():
        if c.get("type") == ctype:
            return c  # type: ignore[no-any-return]
    return None


def set_condition(status: dict[str, Any], cond: dict[str, Any]) -> None:
    """Add or replace a condition; the same status and reason leaves it as it is, the same
    status keeps its lastTransitionTime."""
    cur = get_condition(status, cond["type"])
    if cur is not None and cur.get("status") == cond["status"] and cur.get("reason") == cond["reason"]:
        return
    cond = dict(cond)
    if cur is not None and cur.get("status") == cond["status"]:
        cond["lastTransitionTime"] = cur.get("lastTransitionTime")
    status["conditions"] = [*(c for c in status.get("conditions") or () if c.get("type") != cond["type"]), cond]


def remove_condition(status: dict[str, Any], ctype: str) -> None:
    conds = [c for c in status.get("conditions") or () if c.get("type") != ctype]
    if conds:
        status["conditions"] = conds
    else:
        status.pop("conditions", None)


def rs_to_deployment_condition(c: dict[str, Any]) -> dict[str, Any]:
    return {"type": c.get("type"), "status": c.get("status"), "lastUpdateTime": c.get("lastTransitionTime"),
            "lastTransitionTime": c.get("lastTransitionTime"), "reason": c.get("reason", ""),
            "message": c.get("message", "")}


# ---------------------------------------------------------------- revisions and annotations


def revision(annotations: dict[str, str]) -> int:
    """The revision in ``deployment.kubernetes.io/revision`` (0 when absent); ValueError if not a number."""
    v = annotations.get(REVISION_ANNOTATION)
    return 0 if v is None else int(v)


def _revision_or_none(rs: ReplicaSet) -> int | None:
    try:
        return revision(rs.annotations)
    except ValueError:
        return None


def max_revision(rss: Iterable[ReplicaSet]) -> int:
    return max((v for rs in rss if (v := _revision_or_none(rs)) is not None), default=0)


def last_revision(rss: Iterable[ReplicaSet]) -> int:
    """The second highest revision (the one before the current)."""
    top = second = 0
    for rs in rss:
        v = _revision_or_none(rs)
        if v is None:
            continue
        if v >= top:
            top, second = v, top
        elif v > second:
            second = v
    return second


def copy_deployment_annotations(d: Deployment, annotations: dict[str, str]) -> bool:
    """Copy the Deployment's annotations (except apply, revision and replicas ones) into a
    ReplicaSet's; whether anything changed."""
    changed = False
    for k, v in d.annotations.items():
        if k in _SKIP_COPY or annotations.get(k) == v:
            continue
        annotations[k] = v
        changed = True
    return changed


def set_new_rs_annotations(d: Deployment, annotations: dict[str, str], new_revision: int, exists: bool) -> bool:
    """The new ReplicaSet's annotations (``SetNewReplicaSetAnnotations``): the Deployment's,
    its revision raised to ``new_revision`` (the old one into revision-history when it had one),
    and for a ReplicaSet about to be created the replicas annotations. Whether anything changed."""
    changed = copy_deployment_annotations(d, annotations)
    old = annotations.get(REVISION_ANNOTATION)
    try:
        old_int = int(old) if old is not None else 0
    except ValueError:
        return False
    if old_int < new_revision:
        annotations[REVISION_ANNOTATION] = str(new_revision)
        changed = True
        if old is not None:
            history = annotations.get(REVISION_HISTORY_ANNOTATION, "")
            olds = history.split(",") if history else []
            if not olds:
                annotations[REVISION_HISTORY_ANNOTATION] = old
            else:
                total = len(history) + len(old) + 1
                start = 0
                while total > MAX_REV_HISTORY_LENGTH and start < len(olds):
                    total -= len(olds[start]) + 1
                    start += 1
                if total <= MAX_REV_HISTORY_LENGTH:
                    annotations[REVISION_HISTORY_ANNOTATION] = ",".join([*olds[start:], old])
    if not exists and set_replicas_annotations(annotations, d.replicas, d.replicas + max_surge(d)):
        changed = True
    return changed


def set_deployment_annotations_to(annotations: dict[str, str], rollback_to: ReplicaSet) -> dict[str, str]:
    """A Deployment's annotations when rolling back to ``rollback_to``: its own skipped ones
    (apply, revision, replicas) and the ReplicaSet's others."""
    out = {k: v for k, v in annotations.items() if k in _SKIP_COPY}
    out.update({k: v for k, v in rollback_to.annotations.items() if k not in _SKIP_COPY})
    return out


def _int_annotation(rs: ReplicaSet, key: str) -> int | None:
    v = rs.annotations.get(key)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        return None


def desired_replicas_annotation(rs: ReplicaSet) -> int | None:
    return _int_annotation(rs, DESIRED_REPLICAS_ANNOTATION)


def set_replicas_annotations(annotations: dict[str, str], desired: int, maximum: int) -> bool:
    changed = False
    for key, v in ((DESIRED_REPLICAS_ANNOTATION, str(desired)), (MAX_REPLICAS_ANNOTATION, str(maximum))):
        if annotations.get(key) != v:
            annotations[key] = v
            changed = True
    return changed


def replicas_annotations_need_update(rs: ReplicaSet, desired: int, maximum: int) -> bool:
    return (rs.annotations.get(DESIRED_REPLICAS_ANNOTATION) != str(desired)
            or rs.annotations.get(MAX_REPLICAS_ANNOTATION) != str(maximum))


# ---------------------------------------------------------------- fenceposts and proportions


def is_rolling_update(d: Deployment) -> bool:
    return d.strategy_type == ROLLING_UPDATE


def resolve_fenceposts(surge: int | str | None, unavailable: int | str | None, desired: int) -> tuple[int, int]:
    """maxSurge rounded up, maxUnavailable rounded down; both 0 makes maxUnavailable 1."""
    s = _scaled(surge, desired, True)
    u = _scaled(unavailable, desired, False)
    if s == 0 and u == 0:
        u = 1
    return s, u


def max_unavailable(d: Deployment) -> int:
    if not is_rolling_update(d) or d.replicas == 0:
        return 0
    _, u = resolve_fenceposts(d.max_surge, d.max_unavailable, d.replicas)
    return min(u, d.replicas)


def min_available(d: Deployment) -> int:
    return d.replicas - max_unavailable(d) if is_rolling_update(d) else 0


def max_surge(d: Deployment) -> int:
    if not is_rolling_update(d):
        return 0
    return resolve_fenceposts(d.max_surge, d.max_unavailable, d.replicas)[0]


def _round_half_away(x: float) -> int:
    """Go's math.Round (``integer.RoundToInt32``)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def rs_fraction(rs: ReplicaSet, d: Deployment) -> int:
    """How many replicas ``rs`` gains (or loses) in a scaling event (``getReplicaSetFraction``)."""
    if d.replicas == 0:
        return -rs.replicas
    deployment_replicas = d.replicas + max_surge(d)
    annotated = _int_annotation(rs, MAX_REPLICAS_ANNOTATION)
    if annotated is None:
        # No annotation: fall back to the deployment's current size (the min/max in
        # get_proportion keep the result in bounds).
        annotated = d.status_replicas
    if annotated == 0:
        return 0
    return _round_half_away(rs.replicas * deployment_replicas / annotated) - rs.replicas


def get_proportion(rs: ReplicaSet | None, d: Deployment, to_add: int, added: int) -> int:
    if rs is None or rs.replicas == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = rs_fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def new_rs_new_replicas(d: Deployment, all_rss: Sequence[ReplicaSet], new_rs_replicas: int,
                        others_replicas: int | None = None) -> int:
    """How many replicas the new ReplicaSet should have (``NewRSNewReplicas``); ``all_rss``
    includes the new one (or ``others_replicas`` counts the rest when it does not exist yet)."""
    if d.strategy_type == RECREATE:
        return d.replicas
    surge = _scaled(d.max_surge, d.replicas, True)
    current = replica_count(all_rss) if others_replicas is None else others_replicas + new_rs_replicas
    max_total = d.replicas + surge
    if current >= max_total:
        return new_rs_replicas
    return new_rs_replicas + min(max_total - current, d.replicas - new_rs_replicas)


def is_saturated(d: Deployment, rs: ReplicaSet | None) -> bool:
    if rs is None:
        return False
    desired = desired_replicas_annotation(rs)
    return desired is not None and rs.replicas == d.replicas and desired == d.replicas and \
        rs.available_replicas == d.replicas


def has_progress_deadline(d: Deployment) -> bool:
    return d.progress_deadline_seconds is not None and d.progress_deadline_seconds != _MAX_INT32


def has_revision_history_limit(d: Deployment) -> bool:
    return d.revision_history_limit != _MAX_INT32


# ---------------------------------------------------------------- finding replica sets


def _strip_hash(template: dict[str, Any]) -> Any:
    md = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (md.get("labels") or {}).items() if k != DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY}
    md["labels"] = labels
    return semantic({**template, "metadata": md})


def equal_ignore_hash(t1: dict[str, Any], t2: dict[str, Any]) -> bool:
    """Templates equal but for their ``pod-template-hash`` label (semantically)."""
    return _strip_hash(t1) == _strip_hash(t2)  # type: ignore[no-any-return]


def by_creation(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    return sorted(rss, key=lambda r: (r.creation_timestamp or 0.0, r.name))


def find_new_replica_set(d: Deployment, rss: Iterable[ReplicaSet]) -> ReplicaSet | None:
    """The oldest ReplicaSet whose template is the Deployment's."""
    for rs in by_creation(rss):
        if equal_ignore_hash(rs.template, d.template):
            return rs
    return None


def find_old_replica_sets(d: Deployment, rss: Sequence[ReplicaSet]) -> tuple[list[ReplicaSet], list[ReplicaSet]]:
    """(old ReplicaSets with replicas, all old ReplicaSets)."""
    new = find_new_replica_set(d, rss)
    old = [rs for rs in rss if new is None or rs.uid != new.uid]
    return [rs for rs in old if rs.replicas != 0], old


def filter_active(rss: Iterable[ReplicaSet | None]) -> list[ReplicaSet]:
    return [rs for rs in rss if rs is not None and rs.replicas > 0]


def find_active_or_latest(new_rs: ReplicaSet | None, old_rss: Sequence[ReplicaSet]) -> ReplicaSet | None:
    """The one active ReplicaSet, or the newest when none is active; None with several active."""
    if new_rs is None and not old_rss:
        return None
    olds = sorted(old_rss, key=lambda r: (r.creation_timestamp or 0.0, r.name), reverse=True)
    active = filter_active([*olds, new_rs])
    if not active:
        return new_rs if new_rs is not None else olds[0]
    return active[0] if len(active) == 1 else None


def sort_by_size_newer(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """Largest first; equal sizes newest first (``ReplicaSetsBySizeNewer``)."""
    out = sorted(rss, key=lambda r: (r.creation_timestamp or 0.0, r.name), reverse=True)
    out.sort(key=lambda r: -r.replicas)
    return out


def sort_by_size_older(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """Largest first; equal sizes oldest first (``ReplicaSetsBySizeOlder``)."""
    return sorted(rss, key=lambda r: (-r.replicas, r.creation_timestamp or 0.0, r.name))


def sort_by_revision(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """Lowest revision first, ties oldest first (``ReplicaSetsByRevision``)."""
    return sorted(rss, key=lambda r: (_revision_or_none(r) or 0, r.creation_timestamp or 0.0, r.name))


# ---------------------------------------------------------------- counts and states


def replica_count(rss: Iterable[ReplicaSet | None]) -> int:
    return sum(rs.replicas for rs in rss if rs is not None)


def actual_replica_count(rss: Iterable[ReplicaSet | None]) -> int:
    return sum(rs.status_replicas for rs in rss if rs is not None)


def ready_replica_count(rss: Iterable[ReplicaSet | None]) -> int:
    return sum(rs.ready_replicas for rs in rss if rs is not None)


def available_replica_count(rss: Iterable[ReplicaSet | None]) -> int:
    return sum(rs.available_replicas for rs in rss if rs is not None)


def terminating_replica_count(rss: Iterable[ReplicaSet | None]) -> int | None:
    total = 0
    for rs in rss:
        if rs is None:
            continue
        if rs.terminating_replicas is None:
            return None
        total += rs.terminating_replicas
    return total


def _status_int(status: dict[str, Any], key: str) -> int:
    return int(status.get(key) or 0)


def deployment_complete(d: Deployment, status: dict[str, Any]) -> bool:
    """All replicas updated and available, no old ones left, the generation observed."""
    return (_status_int(status, "updatedReplicas") == d.replicas and _status_int(status, "replicas") == d.replicas
            and _status_int(status, "availableReplicas") == d.replicas
            and _status_int(status, "observedGeneration") >= d.generation)


def deployment_progressing(d: Deployment, new: dict[str, Any]) -> bool:
    """More updated, ready or available replicas than before, or fewer old ones."""
    old = d.status
    old_old = _status_int(old, "replicas") - _status_int(old, "updatedReplicas")
    new_old = _status_int(new, "replicas") - _status_int(new, "updatedReplicas")
    return (_status_int(new, "updatedReplicas") > _status_int(old, "updatedReplicas") or new_old < old_old
            or _status_int(new, "readyReplicas") > d.ready_replicas
            or _status_int(new, "availableReplicas") > d.available_replicas)


def deployment_timed_out(d: Deployment, new: dict[str, Any], now: float) -> bool:
    """The Progressing condition is older than progressDeadlineSeconds (or says so already)."""
    if not has_progress_deadline(d):
        return False
    cond = get_condition(new, PROGRESSING)
    if cond is None or cond.get("reason") == NEW_RS_AVAILABLE:
        return False
    if cond.get("reason") == TIMED_OUT:
        return True
    last = parse_time(cond.get("lastUpdateTime"))
    assert d.progress_deadline_seconds is not None
    return last is not None and last + d.progress_deadline_seconds < now
