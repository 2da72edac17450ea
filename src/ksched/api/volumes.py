"""Binding rules of persistent volumes and claims, shared by the embedded PV controller and the
volume plugins: classes, matching a claim to a volume, node affinity, access and volume modes."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ksched.api.meta import KubeObject
from ksched.api.pod import Pod, Volume
from ksched.api.storage import (
    ANNOTATION_BIND_COMPLETED,
    ANNOTATION_BOUND_BY_CONTROLLER,
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)

__all__ = [
    "ANN_BETA_STORAGE_CLASS",
    "ANN_PROVISIONED_BY",
    "ANN_STORAGE_PROVISIONER",
    "NOT_SUPPORTED_PROVISIONER",
    "bind_volume_to_claim",
    "check_access_modes",
    "check_node_affinity",
    "claim_class",
    "claim_ref_for",
    "find_matching_volume",
    "is_pvc_fully_bound",
    "is_volume_bound_to_claim",
    "match_topology_selector_terms",
    "volume_class",
    "volume_claim_name",
    "volume_mode_mismatch",
]

ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ANN_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
ANN_BETA_DEFAULT_CLASS = "storageclass.beta.kubernetes.io/is-default-class"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
LABEL_HOSTNAME = "kubernetes.io/hostname"

PHASE_AVAILABLE = "Available"
PHASE_BOUND = "Bound"
PHASE_RELEASED = "Released"
PHASE_FAILED = "Failed"
CLAIM_PENDING = "Pending"
CLAIM_BOUND = "Bound"
CLAIM_LOST = "Lost"



# ---------------------------------------------------------------------------- helpers


def volume_claim_name(pod: Pod, v: Volume) -> tuple[str, bool] | None:
    """(claim name, ephemeral) for a pod volume backed by a claim (``persistentVolumeClaim``, or
    a generic ephemeral volume: ``<pod>-<volume>``, as component-helpers' ephemeral.VolumeClaimName),
    None for other volumes."""
    src = v.raw.get("persistentVolumeClaim")
    if src is not None:
        return (src.get("claimName") or ""), False
    if v.ephemeral:
        return f"{pod.name}-{v.name}", True
    return None


def claim_class(pvc: PersistentVolumeClaim) -> str:
    """The claim's class: the beta annotation, else ``spec.storageClassName``, else ""
    (upstream's GetPersistentVolumeClaimClass)."""
    ann = pvc.annotations.get(ANN_BETA_STORAGE_CLASS)
    if ann is not None:
        return ann
    return pvc.storage_class_name or ""


def volume_class(pv: PersistentVolume) -> str:
    """The volume's class: the beta annotation, else ``spec.storageClassName``."""
    ann = pv.annotations.get(ANN_BETA_STORAGE_CLASS)
    if ann is not None:
        return ann
    return pv.storage_class_name


def is_volume_bound_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
    """``spec.claimRef`` names the claim (and its UID, when the reference has one)."""
    cr = pv.claim_ref
    if not cr:
        return False
    if cr.get("name", "") != pvc.name or cr.get("namespace", "") != pvc.namespace:
        return False
    uid = cr.get("uid") or ""
    return not (uid and uid != pvc.uid)


def check_node_affinity(pv: PersistentVolume, node_labels: Mapping[str, str]) -> bool:
    """Whether the volume's required node affinity admits a node with these labels. As upstream,
    only labels are known here (a ``metadata.name`` field term matches no node)."""
    na = pv.node_affinity
    if na is None:
        return True
    return na.matches("", node_labels)


def check_access_modes(pvc: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    """Every access mode the claim asks for is one the volume has."""
    modes = set(pv.access_modes)
    return all(m in modes for m in pvc.access_modes)


def volume_mode_mismatch(pvc: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    return pvc.volume_mode != pv.volume_mode


def _vac(obj: KubeObject) -> str:
    return ((obj.raw.get("spec") or {}).get("volumeAttributesClassName")) or ""


def is_pvc_fully_bound(pvc: PersistentVolumeClaim) -> bool:
    return bool(pvc.volume_name) and ANNOTATION_BIND_COMPLETED in pvc.annotations


def match_topology_selector_terms(terms: Iterable[Mapping[str, Any]], labels: Mapping[str, str]) -> bool:
    """A StorageClass's ``allowedTopologies``: no terms admit every node; terms are ORed, their
    label expressions ANDed (upstream's MatchTopologySelectorTerms)."""
    terms = list(terms)
    if not terms:
        return True
    for term in terms:
        ok = True
        for e in term.get("matchLabelExpressions") or ():
            v = labels.get(e.get("key", ""))
            if v is None or v not in (e.get("values") or ()):
                ok = False
                break
        if ok:
            return True
    return False


def find_matching_volume(pvc: PersistentVolumeClaim, volumes: Iterable[PersistentVolume],
                         node_labels: Mapping[str, str] | None, excluded: Mapping[str, Any] | None,
                         delay_binding: bool) -> PersistentVolume | None:
    """A volume for the claim (upstream's FindMatchingVolume, VolumeAttributesClass on): one
    reserved for it by ``claimRef`` if there is one, else the smallest available volume that
    matches class, selector, capacity, volume mode, access modes (scheduler path) and node
    affinity (scheduler path: ``node_labels`` given). On the controller path (no node) a claim in
    delay-binding mode only gets a volume reserved for it."""
    requested = pvc.request
    requested_class = claim_class(pvc)
    selector = pvc.selector
    claim_vac = _vac(pvc)
    smallest: PersistentVolume | None = None
    for pv in volumes:
        if excluded and pv.name in excluded:
            continue
        bound_to_claim = is_volume_bound_to_claim(pv, pvc)
        if pv.claim_ref and not bound_to_claim:
            continue
        if pv.capacity < requested:
            continue
        if volume_mode_mismatch(pvc, pv):
            continue
        if _vac(pv) != claim_vac:
            continue
        if pv.deletion_timestamp is not None:
            continue
        affinity_ok = True
        if node_labels is not None:
            affinity_ok = check_node_affinity(pv, node_labels)
        if bound_to_claim:
            # A volume reserved for the claim is the answer, or nothing on this node.
            return pv if affinity_ok else None
        if node_labels is None and delay_binding:
            continue
        if pv.phase != PHASE_AVAILABLE:
            continue
        if selector is not None and not selector.matches(pv.labels):
            continue
        if volume_class(pv) != requested_class:
            continue
        if not affinity_ok:
            continue
        if node_labels is not None and not check_access_modes(pvc, pv):
            continue
        if smallest is None or pv.capacity < smallest.capacity:
            smallest = pv
    return smallest


def claim_ref_for(pvc: PersistentVolumeClaim) -> dict[str, Any]:
    """An ObjectReference to the claim, as reference.GetReference builds it."""
    ref: dict[str, Any] = {"kind": "PersistentVolumeClaim", "namespace": pvc.namespace, "name": pvc.name,
                           "uid": pvc.uid, "apiVersion": "v1"}
    if pvc.resource_version:
        ref["resourceVersion"] = pvc.resource_version
    return ref


def bind_volume_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> tuple[PersistentVolume, bool]:
    """The volume with ``claimRef`` set to the claim and ``pv.kubernetes.io/bound-by-controller``
    when it was not reserved for the claim already, and whether anything changed (upstream's
    GetBindVolumeToClaim). The given object is not modified."""
    set_bound_by_controller = not is_volume_bound_to_claim(pv, pvc)
    raw = copy.deepcopy(pv.raw)
    spec = raw.setdefault("spec", {})
    dirty = False
    cr = pv.claim_ref or {}
    if (not cr or cr.get("name", "") != pvc.name or cr.get("namespace", "") != pvc.namespace
            or (cr.get("uid") or "") != pvc.uid):
        spec["claimRef"] = claim_ref_for(pvc)
        dirty = True
    md = raw.setdefault("metadata", {})
    anns = md.get("annotations") or {}
    if set_bound_by_controller and ANNOTATION_BOUND_BY_CONTROLLER not in anns:
        md["annotations"] = {**anns, ANNOTATION_BOUND_BY_CONTROLLER: "yes"}
        dirty = True
    return (PersistentVolume(raw) if dirty else pv), dirty


def is_delay_binding_mode(pvc: PersistentVolumeClaim, get_class: Callable[[str], StorageClass | None]) -> bool:
    """The claim's class exists and binds WaitForFirstConsumer (a missing class: Immediate)."""
    name = claim_class(pvc)
    if not name:
        return False
    sc = get_class(name)
    if sc is None:
        return False
    return sc.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER


def _is_default_class(sc: StorageClass) -> bool:
    a = sc.annotations
    return a.get(ANN_DEFAULT_CLASS) == "true" or a.get(ANN_BETA_DEFAULT_CLASS) == "true"


def _allowed_topologies_affinity(sc: StorageClass) -> dict[str, Any] | None:
    terms = []
    for t in sc.allowed_topologies:
        exprs = [{"key": e.get("key", ""), "operator": "In", "values": list(e.get("values") or ())}
                 for e in t.get("matchLabelExpressions") or ()]
        if exprs:
            terms.append({"matchExpressions": exprs})
    return {"required": {"nodeSelectorTerms": terms}} if terms else None


# ---------------------------------------------------------------------------- controller


