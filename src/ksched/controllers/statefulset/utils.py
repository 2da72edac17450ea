"""StatefulSet helpers (upstream's ``pkg/controller/statefulset/stateful_set_utils.go``): a pod's
identity (``<set>-<ordinal>``, hostname, subdomain, the pod-name and pod-index labels), its
storage (a claim ``<template>-<set>-<ordinal>`` per volumeClaimTemplate), its revision label, the
owner references the PVC retention policy asks of a claim, revisions of the set's template, and
the health tests the update algorithm uses.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from ksched.api.apps import (
    CONTROLLER_REVISION_HASH_LABEL,
    POD_INDEX_LABEL,
    STATEFULSET_POD_NAME_LABEL,
    ControllerRevision,
    StatefulSet,
)
from ksched.api.meta import KubeObject
from ksched.api.pod import Pod
from ksched.api.storage import PersistentVolumeClaim
from ksched.controllers.controller_utils import (
    controller_ref,
    is_pod_available,
    is_pod_ready,
    pod_from_template,
)
from ksched.controllers.history import new_controller_revision, template_of, template_patch

__all__ = [
    "claim_name",
    "identity_matches",
    "new_pod",
    "ordinal_of",
    "parent_and_ordinal",
    "storage_matches",
]

DELETE = "Delete"
RETAIN = "Retain"
_STATEFUL_POD = re.compile(r"^(.*)-([0-9]+)$")


def parent_and_ordinal(name: str) -> tuple[str, int]:
    """The set and ordinal a pod name says (``getParentNameAndOrdinal``); ("", -1) if none."""
    m = _STATEFUL_POD.match(name)
    if m is None:
        return "", -1
    n = int(m.group(2))
    return (m.group(1), n) if n < 2**31 else (m.group(1), -1)


def ordinal_of(pod: KubeObject) -> int:
    return parent_and_ordinal(pod.name)[1]


def start_ordinal(s: StatefulSet) -> int:
    return s.ordinals_start


def end_ordinal(s: StatefulSet) -> int:
    return s.ordinals_start + s.replicas - 1


def in_ordinal_range(pod: KubeObject, s: StatefulSet) -> bool:
    o = ordinal_of(pod)
    return start_ordinal(s) <= o <= end_ordinal(s)


def pod_name(s: StatefulSet, ordinal: int) -> str:
    return f"{s.name}-{ordinal}"


def claim_name(template_name: str, s: StatefulSet, ordinal: int) -> str:
    return f"{template_name}-{s.name}-{ordinal}"


def is_member_of(s: StatefulSet, pod: KubeObject) -> bool:
    return parent_and_ordinal(pod.name)[0] == s.name


def identity_matches(s: StatefulSet, pod: Pod) -> bool:
    parent, ordinal = parent_and_ordinal(pod.name)
    return (ordinal >= 0 and parent == s.name and pod.name == pod_name(s, ordinal) and pod.namespace == s.namespace
            and pod.labels.get(STATEFULSET_POD_NAME_LABEL) == pod.name)


def _template_name(t: dict[str, Any]) -> str:
    return str((t.get("metadata") or {}).get("name") or "")


def storage_matches(s: StatefulSet, pod: Pod) -> bool:
    ordinal = ordinal_of(pod)
    if ordinal < 0:
        return False
    volumes = {v.name: v for v in pod.volumes}
    for t in s.volume_claim_templates:
        v = volumes.get(_template_name(t))
        if v is None or (v.raw.get("persistentVolumeClaim") or {}).get("claimName") != \
                claim_name(_template_name(t), s, ordinal):
            return False
    return True


def claims_for(s: StatefulSet, ordinal: int) -> list[dict[str, Any]]:
    """The claim manifests of a pod, in template order (``getPersistentVolumeClaims``): the
    template's labels and the set's matchLabels."""
    out = []
    match_labels = (s.spec.get("selector") or {}).get("matchLabels") or {}
    for t in s.volume_claim_templates:
        tmd = t.get("metadata") or {}
        md: dict[str, Any] = {"name": claim_name(_template_name(t), s, ordinal), "namespace": s.namespace,
                              "labels": {**(tmd.get("labels") or {}), **match_labels}}
        if tmd.get("annotations"):
            md["annotations"] = copy.deepcopy(tmd["annotations"])
        out.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": md,
                    "spec": copy.deepcopy(t.get("spec") or {})})
    return out


def update_identity(s: StatefulSet, raw: dict[str, Any], ordinal: int) -> None:
    md = raw.setdefault("metadata", {})
    md["name"] = pod_name(s, ordinal)
    md["namespace"] = s.namespace
    labels = md.setdefault("labels", {})
    labels[STATEFULSET_POD_NAME_LABEL] = md["name"]
    labels[POD_INDEX_LABEL] = str(ordinal)


def update_storage(s: StatefulSet, raw: dict[str, Any], ordinal: int) -> None:
    """Volumes for the set's claims first, then the pod's others (``updateStorage``)."""
    spec = raw.setdefault("spec", {})
    names = {_template_name(t) for t in s.volume_claim_templates}
    vols = [{"name": _template_name(t), "persistentVolumeClaim": {"claimName": c["metadata"]["name"]}}
            for t, c in zip(s.volume_claim_templates, claims_for(s, ordinal))]
    vols += [v for v in spec.get("volumes") or () if v.get("name") not in names]
    if vols:
        spec["volumes"] = vols


def new_pod(s: StatefulSet, template: dict[str, Any], ordinal: int, revision: str) -> dict[str, Any]:
    """A member pod at a revision (``newStatefulSetPod`` + ``setPodRevision``): the template, the
    identity, hostname = name, subdomain = serviceName, storage, the revision label."""
    raw = pod_from_template(template, s, controller_ref(s))
    del raw["metadata"]["generateName"]
    update_identity(s, raw, ordinal)
    raw["spec"]["hostname"] = raw["metadata"]["name"]
    if s.service_name:
        raw["spec"]["subdomain"] = s.service_name
    update_storage(s, raw, ordinal)
    raw["metadata"]["labels"][CONTROLLER_REVISION_HASH_LABEL] = revision
    return raw


def pod_revision(pod: KubeObject) -> str:
    return pod.labels.get(CONTROLLER_REVISION_HASH_LABEL, "")


def new_revision(s: StatefulSet, number: int, collision_count: int) -> dict[str, Any]:
    """A revision of the set's template, carrying the set's annotations (``newRevision``)."""
    raw = new_controller_revision(s, s.template_labels, template_patch(s.template), number, collision_count)
    if s.annotations:
        raw["metadata"]["annotations"] = dict(s.annotations)
    return raw


def revision_template(s: StatefulSet, revision: ControllerRevision) -> dict[str, Any]:
    """The template a revision restores (``ApplyRevision``); the set's own when it has none."""
    return template_of(revision) or copy.deepcopy(s.template)


# ---- health --------------------------------------------------------------------------------


def is_created(pod: Pod | None) -> bool:
    return pod is not None and bool(pod.phase)


def is_running_and_ready(pod: Pod) -> bool:
    return pod.phase == "Running" and is_pod_ready(pod)


def is_running_and_available(pod: Pod, min_ready_seconds: int, now: float) -> bool:
    return is_pod_available(pod, min_ready_seconds, now)


def is_healthy(pod: Pod) -> bool:
    return is_running_and_ready(pod) and pod.deletion_timestamp is None


# ---- PVC retention ----------------------------------------------------------------------------


def _refs(claim: KubeObject) -> list[dict[str, Any]]:
    return list((claim.raw.get("metadata") or {}).get("ownerReferences") or [])


def _matches_ref(ref: dict[str, Any], obj_name: str, api_version: str, kind: str) -> bool:
    return ref.get("apiVersion") == api_version and ref.get("kind") == kind and ref.get("name") == obj_name


def _has_ref(claim: KubeObject, uid: str) -> bool:
    return any(r.get("uid") == uid for r in _refs(claim))


def _stale_ref(claim: KubeObject, name: str, uid: str, api_version: str, kind: str) -> bool:
    for r in _refs(claim):
        if _matches_ref(r, name, api_version, kind):
            return r.get("uid") != uid
    return False


def claim_has_stale_pod_ref(claim: PersistentVolumeClaim, pod: Pod) -> bool:
    return _stale_ref(claim, pod.name, pod.uid, "v1", "Pod")


def _unexpected_controller(claim: KubeObject, s: StatefulSet, pod: Pod) -> bool:
    if s.when_scaled == RETAIN and s.when_deleted == RETAIN:
        return False
    for r in _refs(claim):
        if _matches_ref(r, s.name, s.API_VERSION, s.KIND):
            if r.get("uid") != s.uid:
                return True
            continue
        if _matches_ref(r, pod.name, "v1", "Pod"):
            if r.get("uid") != pod.uid:
                return True
            continue
        if r.get("controller"):
            return True
    return False


def claim_owner_up_to_date(claim: PersistentVolumeClaim, s: StatefulSet, pod: Pod) -> bool:
    """Whether a claim's owner references follow the retention policy (``isClaimOwnerUpToDate``)."""
    if _stale_ref(claim, s.name, s.uid, s.API_VERSION, s.KIND) or claim_has_stale_pod_ref(claim, pod):
        return True  # a previous incarnation's claim: not touched
    if _unexpected_controller(claim, s, pod):
        return not (_has_ref(claim, s.uid) or _has_ref(claim, pod.uid))
    if any(r.get("uid") in (s.uid, pod.uid) and not r.get("controller") for r in _refs(claim)):
        return False
    set_ref, pod_ref = _has_ref(claim, s.uid), _has_ref(claim, pod.uid)
    scaled_down = not in_ordinal_range(pod, s)
    if s.when_scaled == DELETE and s.when_deleted == DELETE:
        return scaled_down != set_ref and scaled_down == pod_ref
    if s.when_scaled == DELETE:
        return not set_ref and scaled_down == pod_ref
    if s.when_deleted == DELETE:
        return set_ref and not pod_ref
    return not set_ref and not pod_ref


def claim_owner_refs(refs: list[dict[str, Any]], s: StatefulSet, pod: Pod, unexpected: bool) -> list[dict[str, Any]]:
    """A claim's owner references for the retention policy (``updateClaimOwnerRefForSetAndPod``)."""
    refs = [r for r in refs if not (_matches_ref(r, s.name, s.API_VERSION, s.KIND)
                                    or _matches_ref(r, pod.name, "v1", "Pod"))]
    if unexpected:
        return refs
    scaled_down = not in_ordinal_range(pod, s)
    want: list[KubeObject] = []
    if s.when_scaled == DELETE and scaled_down and pod.uid:
        want.append(pod)
    if s.when_deleted == DELETE and not (s.when_scaled == DELETE and scaled_down):
        want.append(s)
    for owner in want:
        if not any(r.get("uid") == owner.uid for r in refs):
            refs.append(controller_ref(owner))
    return refs


def with_claim_owner_refs(claim_raw: dict[str, Any], existing: KubeObject | None, s: StatefulSet,
                          pod: Pod) -> dict[str, Any]:
    refs = list((claim_raw.get("metadata") or {}).get("ownerReferences") or [])
    unexpected = existing is not None and _unexpected_controller(existing, s, pod)
    refs = claim_owner_refs(refs, s, pod, unexpected)
    md = dict(claim_raw.get("metadata") or {})
    if refs:
        md["ownerReferences"] = refs
    else:
        md.pop("ownerReferences", None)
    return {**claim_raw, "metadata": md}
