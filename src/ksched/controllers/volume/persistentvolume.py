"""The PersistentVolume controller, and what an external CSI provisioner does, for the embedded
cluster (upstream's ``pkg/controller/volume/persistentvolume``, the controller kube-controller-manager
runs as ``persistentvolume-binder``). It watches PersistentVolumes, PersistentVolumeClaims and
StorageClasses and writes through the API like any client:

* a claim with no ``spec.volumeName`` is bound to the smallest matching available volume, unless
  its class is ``WaitForFirstConsumer`` (then only a volume already reserved for it by
  ``spec.claimRef`` -- what the scheduler's VolumeBinding writes in PreBind -- is bound);
* a volume whose ``spec.claimRef`` names a claim with an empty ``spec.volumeName`` gets that claim
  bound to it (``spec.volumeName``, ``pv.kubernetes.io/bind-completed``, both phases ``Bound``);
* a claim of a class with a provisioner and no matching volume gets a new volume
  ``pvc-<claim uid>`` (capacity = request, the class's provisioner as CSI driver), provisioned
  at once for ``Immediate`` classes and, for ``WaitForFirstConsumer`` classes, once the scheduler
  has set ``volume.kubernetes.io/selected-node`` (the volume then has node affinity to that node's
  hostname); a selected node that does not exist makes the provisioner drop the annotation, which
  tells the scheduler provisioning failed;
* claims without ``spec.storageClassName`` get the default StorageClass (the DefaultStorageClass
  admission plugin and the controller's retroactive assignment);
* volumes whose claim is gone are ``Released``, or deleted under the ``Delete`` reclaim policy;
  claims whose bound volume is gone are ``Lost``.

Its caches of volumes and claims take its own writes at once (upstream's ``storeObjectUpdate``:
a newer resourceVersion wins), so a sync reads what the previous one wrote even before the
watch delivers it. Indices (volumes available per class, volumes reserved per claim, unbound
claims per class) keep each sync proportional to what it touches, not to the number of objects.

Divergences: no periodic resync (an available volume offers itself to the pending claims of
its class instead, which is what the resync achieves); provisioning is immediate.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from ksched.api.errors import ApiError
from ksched.api.meta import KubeObject
from ksched.api.node import Node
from ksched.api.storage import (
    ANNOTATION_BIND_COMPLETED,
    ANNOTATION_BOUND_BY_CONTROLLER,
    ANNOTATION_SELECTED_NODE,
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from ksched.api.volumes import (
    ANN_BETA_STORAGE_CLASS,
    ANN_BETA_STORAGE_PROVISIONER,
    ANN_PROVISIONED_BY,
    ANN_STORAGE_PROVISIONER,
    CLAIM_BOUND,
    CLAIM_LOST,
    CLAIM_PENDING,
    LABEL_HOSTNAME,
    NOT_SUPPORTED_PROVISIONER,
    PHASE_AVAILABLE,
    PHASE_BOUND,
    PHASE_FAILED,
    PHASE_RELEASED,
    _allowed_topologies_affinity,
    _is_default_class,
    _vac,
    bind_volume_to_claim,
    check_access_modes,
    claim_class,
    claim_ref_for,
    find_matching_volume,
    is_delay_binding_mode,
    is_pvc_fully_bound,
    is_volume_bound_to_claim,
    volume_class,
    volume_mode_mismatch,
)
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.clock import Clock
from ksched.controllers.controller import Controller

__all__ = ["PersistentVolumeController"]

log = logging.getLogger(__name__)


def _rv(obj: KubeObject) -> int:
    try:
        return int(obj.resource_version or 0)
    except ValueError:
        return 0


class PersistentVolumeController(Controller):
    """Keys: ``("claim", namespace/name)`` and ``("volume", name)``, synced in the order queued."""

    name = "persistentvolume-binder"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.class_informer = informers.informer("StorageClass")
        self.node_informer = informers.informer("Node")
        self._volumes: dict[str, PersistentVolume] = {}
        self._claims: dict[str, PersistentVolumeClaim] = {}
        self._deleted_claims: dict[str, PersistentVolumeClaim] = {}
        # volume name -> (class if available else None, reserved-for claim key or "")
        self._pv_meta: dict[str, tuple[str | None, str]] = {}
        self._available: dict[str, dict[str, None]] = {}
        self._by_claim: dict[str, dict[str, None]] = {}
        # claim key -> (class if spec.volumeName is empty else None, spec.volumeName)
        self._claim_meta: dict[str, tuple[str | None, str]] = {}
        self._unbound: dict[str, dict[str, None]] = {}
        self._naming: dict[str, dict[str, None]] = {}  # volume name -> claims whose spec.volumeName it is
        informers.informer("PersistentVolume").add_handler(EventHandler(
            self._volume_seen, lambda old, new: self._volume_seen(new), self._volume_gone))
        informers.informer("PersistentVolumeClaim").add_handler(EventHandler(
            self._claim_seen, lambda old, new: self._claim_seen(new), self._claim_gone))
        self.class_informer.add_handler(EventHandler(
            self._class_changed, lambda old, new: self._class_changed(new), None))

    # ---- events ---------------------------------------------------------------------------

    def _volume_seen(self, pv: PersistentVolume) -> None:
        cur = self._volumes.get(pv.name)
        if cur is None or _rv(pv) >= _rv(cur):
            self._volumes[pv.name] = pv
            self._index_volume(pv.name)
        self.queue.add(("volume", pv.name))

    def _volume_gone(self, obj: Any) -> None:
        pv = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self._volumes.pop(pv.name, None)
        self._index_volume(pv.name)
        self.queue.add(("volume", pv.name))
        if isinstance(pv, PersistentVolume) and pv.claim_ref:
            # A deleted volume: its claim may now be lost.
            cr = pv.claim_ref
            self.queue.add(("claim", f"{cr.get('namespace', '')}/{cr.get('name', '')}"))

    def _claim_seen(self, pvc: PersistentVolumeClaim) -> None:
        cur = self._claims.get(pvc.key)
        if cur is None or _rv(pvc) >= _rv(cur):
            self._claims[pvc.key] = pvc
            self._index_claim(pvc.key)
        self.queue.add(("claim", pvc.key))

    def _claim_gone(self, obj: Any) -> None:
        pvc = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self._claims.pop(pvc.key, None)
        self._index_claim(pvc.key)
        if isinstance(pvc, PersistentVolumeClaim):
            self._deleted_claims[pvc.key] = pvc
        self.queue.add(("claim", pvc.key))

    def _class_changed(self, sc: StorageClass) -> None:
        # A new default class, or a class whose claims can now be provisioned.
        for pvc in list(self._claims.values()):
            if not pvc.volume_name:
                self.queue.add(("claim", pvc.key))

    def sync(self, key: Any) -> None:
        what, name = key
        try:
            if what == "claim":
                self._sync_claim(name)
            else:
                self._sync_volume(name)
        except ApiError as e:  # a write lost a race: the event of the newer version syncs again
            log.debug("PV controller: syncing %s %s: %s", what, name, e)

    # ---- indices --------------------------------------------------------------------------

    def _index_volume(self, name: str) -> None:
        old = self._pv_meta.pop(name, None)
        if old is not None:
            cls_name, claim = old
            if cls_name is not None:
                _discard(self._available, cls_name, name)
            if claim:
                _discard(self._by_claim, claim, name)
        pv = self._volume(name)
        if pv is None:
            return
        cr = pv.claim_ref
        claim = f"{cr.get('namespace', '')}/{cr.get('name', '')}" if cr else ""
        cls_name = None if cr else volume_class(pv)
        self._pv_meta[name] = (cls_name, claim)
        if cls_name is not None:
            self._available.setdefault(cls_name, {})[name] = None
        if claim:
            self._by_claim.setdefault(claim, {})[name] = None

    def _index_claim(self, key: str) -> None:
        old = self._claim_meta.pop(key, None)
        if old is not None:
            old_cls, old_volume = old
            if old_cls is not None:
                _discard(self._unbound, old_cls, key)
            if old_volume:
                _discard(self._naming, old_volume, key)
        pvc = self._claim(key)
        if pvc is None:
            return
        if pvc.volume_name:
            self._claim_meta[key] = (None, pvc.volume_name)
            self._naming.setdefault(pvc.volume_name, {})[key] = None
            return
        cls_name = claim_class(pvc)
        self._claim_meta[key] = (cls_name, "")
        self._unbound.setdefault(cls_name, {})[key] = None

    # ---- reads and writes -----------------------------------------------------------------

    def _class(self, name: str) -> StorageClass | None:
        sc = self.class_informer.get(name)
        return sc if isinstance(sc, StorageClass) else None

    def _claim(self, key: str) -> PersistentVolumeClaim | None:
        return self._claims.get(key)

    def _volume(self, name: str) -> PersistentVolume | None:
        return self._volumes.get(name)

    def _volumes_named(self, names: Any) -> list[PersistentVolume]:
        vols = self._volumes
        return [pv for n in names if (pv := vols.get(n)) is not None]

    def _stored(self, obj: KubeObject) -> KubeObject:
        """Take a write's result into the caches at once."""
        if isinstance(obj, PersistentVolume):
            self._volumes[obj.name] = obj
            self._index_volume(obj.name)
        elif isinstance(obj, PersistentVolumeClaim):
            self._claims[obj.key] = obj
            self._index_claim(obj.key)
        return obj

    def _write(self, raw: dict[str, Any], subresource: str = "") -> KubeObject:
        if subresource == "status":
            return self._stored(self.client.update_status(raw))
        return self._stored(self.client.update(raw))

    def _set_status(self, obj: KubeObject, **fields: Any) -> KubeObject:
        status = dict(obj.raw.get("status") or {})
        if all(status.get(k) == v for k, v in fields.items()):
            return obj
        status.update(fields)
        raw = dict(obj.raw)
        raw["status"] = status
        return self._write(raw, "status")

    # ---- claims ---------------------------------------------------------------------------

    def _sync_claim(self, key: str) -> None:
        pvc = self._claim(key)
        if pvc is None:
            self._claim_deleted(key)
            return
        if pvc.deletion_timestamp is not None:
            return
        if not pvc.volume_name:
            self._sync_unbound_claim(pvc)
            return
        pv = self._volume(pvc.volume_name)
        if pv is None:
            phase = CLAIM_LOST if ANNOTATION_BIND_COMPLETED in pvc.annotations else CLAIM_PENDING
            self._set_status(pvc, phase=phase)
            return
        if pv.claim_ref is None or is_volume_bound_to_claim(pv, pvc):
            if volume_mode_mismatch(pvc, pv):
                self._set_status(pvc, phase=CLAIM_PENDING)
                return
            self._bind(pv, pvc)
            return
        # The volume is bound to another claim: this (pre-bound) claim waits.
        self._set_status(pvc, phase=CLAIM_PENDING)

    def _sync_unbound_claim(self, pvc: PersistentVolumeClaim) -> None:
        if self._assign_default_class(pvc):
            return  # the update comes back as a new event
        delay = is_delay_binding_mode(pvc, self._class)
        pv = self._find_for_claim(pvc, delay)
        if pv is not None:
            self._bind(pv, pvc)
            return
        cls_name = claim_class(pvc)
        if cls_name and not (delay and ANNOTATION_SELECTED_NODE not in pvc.annotations):
            sc = self._class(cls_name)
            if sc is not None and sc.provisioner and sc.provisioner != NOT_SUPPORTED_PROVISIONER:
                self._provision(pvc, sc)
                return
        self._set_status(pvc, phase=CLAIM_PENDING)

    def _find_for_claim(self, pvc: PersistentVolumeClaim, delay: bool) -> PersistentVolume | None:
        """The best volume for the claim (upstream's findBestMatchForClaim). Candidates are the
        volumes reserved for it and, unless its class binds on first consumer, the available ones
        of its class; as upstream's volume index, volumes with the fewest access modes that
        include the claim's are tried first."""
        names = dict(self._by_claim.get(pvc.key, {}))
        if not delay:
            names.update(self._available.get(claim_class(pvc), {}))
        if not names:
            return None
        groups: dict[frozenset[str], list[PersistentVolume]] = {}
        for pv in self._volumes_named(names):
            if check_access_modes(pvc, pv):
                groups.setdefault(frozenset(pv.access_modes), []).append(pv)
        for modes in sorted(groups, key=len):
            pv = find_matching_volume(pvc, groups[modes], None, None, delay)
            if pv is not None:
                return pv
        return None

    def _assign_default_class(self, pvc: PersistentVolumeClaim) -> bool:
        spec = pvc.raw.get("spec") or {}
        if spec.get("storageClassName") is not None or ANN_BETA_STORAGE_CLASS in pvc.annotations:
            return False
        defaults = [sc for sc in self.class_informer.list()
                    if isinstance(sc, StorageClass) and _is_default_class(sc)]
        if not defaults:
            return False
        # The newest default class wins (then the first name), as upstream's GetDefaultClass.
        defaults.sort(key=lambda sc: (-(sc.creation_timestamp or 0.0), sc.name))
        raw = copy.deepcopy(pvc.raw)
        raw.setdefault("spec", {})["storageClassName"] = defaults[0].name
        self._write(raw)
        return True

    def _claim_deleted(self, key: str) -> None:
        """Volumes bound to a deleted claim get released (or deleted)."""
        gone = self._deleted_claims.pop(key, None)
        if gone is None:
            return  # never existed (a volume reserved for a claim not created yet)
        for pv in self._volumes_named(list(self._by_claim.get(key, {}))):
            uid = (pv.claim_ref or {}).get("uid")
            if uid and uid != gone.uid:
                continue
            self.queue.add(("volume", pv.name))

    def _bind(self, pv: PersistentVolume, pvc: PersistentVolumeClaim) -> None:
        """Both halves of a binding, each written only where it is not in place yet (upstream's
        bind: bindVolumeToClaim, volume phase, bindClaimToVolume, claim status)."""
        new_pv, dirty = bind_volume_to_claim(pv, pvc)
        if dirty:
            pv = self._write(new_pv.raw)  # type: ignore[assignment]
        pv = self._set_status(pv, phase=PHASE_BOUND)  # type: ignore[assignment]
        raw = copy.deepcopy(pvc.raw)
        md = raw.setdefault("metadata", {})
        anns = dict(md.get("annotations") or {})
        spec = raw.setdefault("spec", {})
        changed = False
        if spec.get("volumeName") != pv.name:
            spec["volumeName"] = pv.name
            anns[ANNOTATION_BOUND_BY_CONTROLLER] = "yes"
            changed = True
        if ANNOTATION_BIND_COMPLETED not in anns:
            anns[ANNOTATION_BIND_COMPLETED] = "yes"
            changed = True
        if changed:
            md["annotations"] = anns
            pvc = self._write(raw)  # type: ignore[assignment]
        cap = dict((pv.raw.get("spec") or {}).get("capacity") or {})
        self._set_status(pvc, phase=CLAIM_BOUND, accessModes=list(pv.access_modes), capacity=cap)

    def _provision(self, pvc: PersistentVolumeClaim, sc: StorageClass) -> None:
        """What an external provisioner does: a new volume reserved for the claim (the claim is
        then bound to it by the volume's sync)."""
        name = f"pvc-{pvc.uid}"
        existing = self._volume(name)
        if existing is not None:
            if is_volume_bound_to_claim(existing, pvc):
                self._bind(existing, pvc)
            return
        if pvc.annotations.get(ANN_STORAGE_PROVISIONER) != sc.provisioner:
            # The PV controller hands the claim to the class's (external) provisioner.
            raw = copy.deepcopy(pvc.raw)
            md = raw.setdefault("metadata", {})
            md["annotations"] = {**(md.get("annotations") or {}), ANN_STORAGE_PROVISIONER: sc.provisioner,
                                 ANN_BETA_STORAGE_PROVISIONER: sc.provisioner}
            pvc = self._write(raw)  # type: ignore[assignment]
        affinity: dict[str, Any] | None = None
        selected = pvc.annotations.get(ANNOTATION_SELECTED_NODE)
        if selected:
            node = self.node_informer.get(selected)
            if not isinstance(node, Node):
                # Provisioning fails: dropping the annotation tells the scheduler to retry.
                raw = copy.deepcopy(pvc.raw)
                anns = dict(raw.get("metadata", {}).get("annotations") or {})
                anns.pop(ANNOTATION_SELECTED_NODE, None)
                raw["metadata"]["annotations"] = anns
                self._write(raw)
                return
            hostname = node.labels.get(LABEL_HOSTNAME)
            if hostname:
                affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": LABEL_HOSTNAME, "operator": "In", "values": [hostname]}]}]}}
        else:
            affinity = _allowed_topologies_affinity(sc)
        request = (((pvc.raw.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage", "0")
        spec: dict[str, Any] = {
            "capacity": {"storage": request},
            "accessModes": list(pvc.access_modes),
            "persistentVolumeReclaimPolicy": sc.raw.get("reclaimPolicy") or "Delete",
            "storageClassName": sc.name,
            "volumeMode": pvc.volume_mode,
            "claimRef": claim_ref_for(pvc),
            "csi": {"driver": sc.provisioner, "volumeHandle": name},
        }
        if affinity is not None:
            spec["nodeAffinity"] = affinity
        if sc.raw.get("mountOptions"):
            spec["mountOptions"] = list(sc.raw["mountOptions"])
        vac = _vac(pvc)
        if vac:
            spec["volumeAttributesClassName"] = vac
        self._stored(self.client.create({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: sc.provisioner}},
            "spec": spec,
        }))

    # ---- volumes --------------------------------------------------------------------------

    def _sync_volume(self, name: str) -> None:
        pv = self._volume(name)
        if pv is None or pv.deletion_timestamp is not None:
            return
        for key in self._naming.get(name, {}):
            # Claims pre-bound to this volume (spec.volumeName) finish binding in their sync.
            pvc = self._claim(key)
            if pvc is not None and (not is_pvc_fully_bound(pvc) or pvc.phase != CLAIM_BOUND):
                self.queue.add(("claim", key))
        cr = pv.claim_ref
        if not cr:
            self._set_status(pv, phase=PHASE_AVAILABLE)
            self._offer(pv)
            return
        claim_key = f"{cr.get('namespace', '')}/{cr.get('name', '')}"
        if not cr.get("uid"):
            # Reserved for a claim that is not bound yet: the claim's sync binds it.
            self._set_status(pv, phase=PHASE_AVAILABLE)
            self.queue.add(("claim", claim_key))
            return
        pvc = self._claim(claim_key)
        if pvc is None or pvc.uid != cr.get("uid"):
            if pv.reclaim_policy == "Delete":
                self.client.delete("PersistentVolume", "", pv.name)
                return
            if pv.phase not in (PHASE_RELEASED, PHASE_FAILED):
                self._set_status(pv, phase=PHASE_RELEASED)
            return
        if not pvc.volume_name:
            self.queue.add(("claim", claim_key))
            return
        if pvc.volume_name == pv.name:
            self._set_status(pv, phase=PHASE_BOUND)
            if not is_pvc_fully_bound(pvc):
                self.queue.add(("claim", claim_key))
            return
        # The claim is bound to another volume: undo this volume's half of the binding.
        raw = copy.deepcopy(pv.raw)
        if ANNOTATION_BOUND_BY_CONTROLLER in pv.annotations:
            raw["spec"].pop("claimRef", None)
        else:
            raw["spec"]["claimRef"] = {k: v for k, v in cr.items() if k != "uid"}
        pv = self._write(raw)  # type: ignore[assignment]
        self._set_status(pv, phase=PHASE_AVAILABLE)

    def _offer(self, pv: PersistentVolume) -> None:
        """An available volume: the pending claims of its class it would do for get synced, in
        the order they came, until the volume is taken (what upstream's periodic claim resync
        achieves)."""
        cls_name = volume_class(pv)
        sc = self._class(cls_name) if cls_name else None
        if sc is not None and sc.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER:
            return  # only the scheduler binds those
        for key in list(self._unbound.get(cls_name, {})):
            pvc = self._claim(key)
            if pvc is None or pvc.volume_name or pvc.deletion_timestamp is not None:
                continue
            if not check_access_modes(pvc, pv) or find_matching_volume(pvc, (pv,), None, None, False) is None:
                continue
            self._sync_claim(key)
            cur = self._volume(pv.name)
            if cur is None or cur.claim_ref:
                return


def _discard(index: dict[str, dict[str, None]], key: str, member: str) -> None:
    s = index.get(key)
    if s is not None:
        s.pop(member, None)
        if not s:
            del index[key]
