"""NodeVolumeLimits: no node may get more volumes of a CSI driver attached than its CSINode's
``spec.drivers[].allocatable.count`` (upstream's ``plugins/nodevolumelimits``, the CSILimits
plugin).

A volume counts as ``<driver>/<volume handle>``, so a volume shared by pods on a node counts
once. The driver and handle come from the claim's bound volume (``spec.csi``), or -- for a claim
not bound yet, or bound to a volume that is not there -- from its StorageClass (the provisioner,
with a handle unique to the claim). In-tree volumes of plugins migrated to CSI (AWS EBS, GCE PD,
Azure Disk, Cinder, Portworx), as PersistentVolumes or inline in the pod, count under their CSI
driver when the node's CSINode lists the plugin in ``storage.alpha.kubernetes.io/migrated-plugins``
(the translation is reduced to the driver name and volume handle, which is all counting needs).

A node without a CSINode, or whose drivers report no limit, accepts any number of volumes.
Exceeding a limit is Unschedulable ``node(s) exceed max volume count``. VolumeAttachment objects
are not counted (the embedded API has no such kind).
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np

from ksched.api.pod import Pod
from ksched.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from ksched.api.volumes import claim_class, volume_claim_name
from ksched.client.informer import EventHandler
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from ksched.scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    NodeList,
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
    VectorizedFilter,
)
from ksched.scheduler.framework.signers import (
    CLAIMS_NOT_SIGNABLE,
    VOLUMES_SIGNER_NAME,
    has_claim_volumes,
    volumes_signer,
)
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.helper.claims import claim_event_hint

__all__ = ["ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED", "MIGRATED_PLUGINS_ANNOTATION", "NodeVolumeLimits"]

NAME = "NodeVolumeLimits"
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"

AWS_EBS_PLUGIN = "kubernetes.io/aws-ebs"
GCE_PD_PLUGIN = "kubernetes.io/gce-pd"
AZURE_DISK_PLUGIN = "kubernetes.io/azure-disk"
CINDER_PLUGIN = "kubernetes.io/cinder"
PORTWORX_PLUGIN = "kubernetes.io/portworx-volume"
_UNSPECIFIED = "UNSPECIFIED"


def _ebs_handle(src: dict[str, Any], pv: PersistentVolume | None) -> str:
    vid = src.get("volumeID") or ""
    if vid.startswith("aws://"):
        # aws://<zone>/<volume id>
        vid = vid[len("aws://"):].partition("/")[2].strip("/")
    return vid


def _gce_handle(src: dict[str, Any], pv: PersistentVolume | None) -> str:
    pd = src.get("pdName") or ""
    zone = ""
    if pv is not None:
        zone = pv.labels.get("topology.kubernetes.io/zone") or pv.labels.get(
            "failure-domain.beta.kubernetes.io/zone") or ""
    if not zone:
        return f"projects/{_UNSPECIFIED}/zones/{_UNSPECIFIED}/disks/{pd}"
    zones = [z for z in zone.split("__") if z]
    if len(zones) > 1:
        region = zones[0].rpartition("-")[0]
        return f"projects/{_UNSPECIFIED}/regions/{region}/disks/{pd}"
    return f"projects/{_UNSPECIFIED}/zones/{zones[0]}/disks/{pd}"


def _field(name: str) -> Any:
    def get(src: dict[str, Any], pv: PersistentVolume | None) -> str:
        return str(src.get(name) or "")
    return get


# In-tree plugin -> (CSI driver, volume source field, volume handle of a source).
IN_TREE_PLUGINS: dict[str, tuple[str, str, Any]] = {
    AWS_EBS_PLUGIN: ("ebs.csi.aws.com", "awsElasticBlockStore", _ebs_handle),
    GCE_PD_PLUGIN: ("pd.csi.storage.gke.io", "gcePersistentDisk", _gce_handle),
    AZURE_DISK_PLUGIN: ("disk.csi.azure.com", "azureDisk", _field("diskURI")),
    CINDER_PLUGIN: ("cinder.csi.openstack.org", "cinder", _field("volumeID")),
    PORTWORX_PLUGIN: ("pxd.portworx.com", "portworxVolume", _field("volumeID")),
}


def in_tree_plugin_of(spec: dict[str, Any]) -> str:
    """The migratable in-tree plugin of a volume or PV spec ("" when none)."""
    for plugin, (_, field, _) in IN_TREE_PLUGINS.items():
        if spec.get(field) is not None:
            return plugin
    return ""


def is_csi_migration_on(csi_node: CSINode | None, plugin: str) -> bool:
    """The node's CSINode says the in-tree plugin has been migrated to its CSI driver."""
    if csi_node is None or plugin not in IN_TREE_PLUGINS:
        return False
    mpa = csi_node.annotations.get(MIGRATED_PLUGINS_ANNOTATION) or ""
    return plugin in mpa.split(",")


def translate(spec: dict[str, Any], plugin: str, pv: PersistentVolume | None) -> tuple[str, str]:
    driver, field, handle = IN_TREE_PLUGINS[plugin]
    return driver, handle(spec.get(field) or {}, pv)


class _LookupError(Exception):
    def __init__(self, message: str, not_found: bool = False) -> None:
        super().__init__(message)
        self.not_found = not_found


_NEW_VOLUMES_KEY = "NodeVolumeLimits/newVolumes"
_NO_LIMIT = np.iinfo(np.int64).max // 2


class _RowVolumes:
    """Per driver: unique attached volumes and the CSINode limit of every row."""

    def __init__(self, snapshot: Snapshot, version: int, n: int) -> None:
        self.snapshot = snapshot
        self.version = version
        self.generation = -1
        self.n = n
        self.counts: dict[str, np.ndarray] = {}
        self.limits: dict[str, np.ndarray] = {}
        self.broken = np.zeros(n, dtype=bool)
        self.handles: dict[str, set[int]] = {}
        self.row_handles: dict[int, dict[str, str]] = {}

    def fit(self, n: int) -> None:
        if n <= self.n:
            return
        for d in (self.counts, self.limits):
            for k, a in d.items():
                g = np.full(n, _NO_LIMIT if d is self.limits else 0, dtype=np.int64)
                g[: self.n] = a
                d[k] = g
        b = np.zeros(n, dtype=bool)
        b[: self.n] = self.broken
        self.broken = b
        self.n = n

    def count(self, driver: str) -> np.ndarray:
        a = self.counts.get(driver)
        if a is None:
            a = self.counts[driver] = np.zeros(self.n, dtype=np.int64)
        return a

    def limit(self, driver: str) -> np.ndarray:
        a = self.limits.get(driver)
        if a is None:
            a = self.limits[driver] = np.full(self.n, _NO_LIMIT, dtype=np.int64)
        return a

    def clear_row(self, r: int) -> None:
        for a in self.counts.values():
            a[r] = 0
        for a in self.limits.values():
            a[r] = _NO_LIMIT
        self.broken[r] = False
        for h in self.row_handles.pop(r, {}):
            rs = self.handles.get(h)
            if rs is not None:
                rs.discard(r)
                if not rs:
                    del self.handles[h]


class NodeVolumeLimits(PreFilterPlugin, FilterPlugin, EnqueueExtensions, VectorizedFilter, SignPlugin):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        informers = getattr(handle, "informers", None)
        self._pvcs = informers.informer("PersistentVolumeClaim") if informers is not None else None
        self._pvs = informers.informer("PersistentVolume") if informers is not None else None
        self._classes = informers.informer("StorageClass") if informers is not None else None
        self._csinodes = informers.informer("CSINode") if informers is not None else None
        # Volumes of unbound claims get a handle no real volume has.
        self.random_volume_id_prefix = uuid.uuid4().hex
        self._exceeded = Status(Code.UNSCHEDULABLE, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, plugin=NAME)
        # Attached volumes per node, reused while the node's pods (the same PodInfo objects) and
        # every PV/PVC/StorageClass/CSINode stay the same (any event on those bumps the version).
        self._volume_version = 0
        self._rows: _RowVolumes | None = None
        self._attached: dict[str, tuple[int, tuple[Any, ...], dict[str, int], frozenset[str]]] = {}
        infs = [i for i in (self._pvcs, self._pvs, self._classes, self._csinodes) if i is not None]
        # Only informers that tell us about changes make the reuse safe.
        self._reuse = bool(infs) and all(hasattr(i, "add_handler") for i in infs)
        if self._reuse:
            for inf in infs:
                inf.add_handler(EventHandler(self._bump, lambda a, b: self._bump(b), self._bump))

    def _bump(self, _obj: Any = None) -> None:
        self._volume_version += 1
        self._attached.clear()
        self._rows = None

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """The pod's volume sources (as upstream). ksched refuses pods with claim-backed volumes
        and migratable in-tree ones: the verdict reads PVs, PVCs, StorageClasses and CSINodes,
        which the previous pod's placement may change."""
        if has_claim_volumes(pod):
            return None, Status(Code.UNSCHEDULABLE, CLAIMS_NOT_SIGNABLE)
        if any(in_tree_plugin_of(v.raw) for v in pod.volumes):
            return None, Status(Code.UNSCHEDULABLE, "pods with migratable in-tree volumes are not signable")
        return [SignFragment(VOLUMES_SIGNER_NAME, volumes_signer(pod))], None

    # ---- PreFilter ------------------------------------------------------------------------

    def pre_filter_skips(self, pod: Pod) -> bool:
        """PreFilter skips a pod without claim-backed, ephemeral or migratable in-tree volumes
        (its test below, a function of the pod's volume specs alone; the runtime's
        ``TEMPLATE_SKIPS``)."""
        return not any(v.raw.get("persistentVolumeClaim") is not None or v.ephemeral or in_tree_plugin_of(v.raw)
                       for v in pod.volumes)

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        for v in pod.volumes:
            if v.raw.get("persistentVolumeClaim") is not None or v.ephemeral or in_tree_plugin_of(v.raw):
                return None, None
        return None, Status.skip()

    # ---- Filter ---------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if not pod.volumes:
            return None
        node = node_info.node
        if node is None:
            return Status.as_error("node not found", NAME)
        csi_node = self._csinodes.get(node.name) if self._csinodes is not None else None
        if csi_node is not None and not isinstance(csi_node, CSINode):
            csi_node = None
        # The pod's own volumes depend on the node only through the CSINode's migrated-plugins
        # annotation: work them out once per cycle for each value of it.
        memo: dict[str | None, dict[str, str] | _LookupError] | None = state.get(_NEW_VOLUMES_KEY)
        if memo is None:
            memo = {}
            state.write(_NEW_VOLUMES_KEY, memo)
        mkey = csi_node.annotations.get(MIGRATED_PLUGINS_ANNOTATION) if csi_node is not None else None
        got = memo.get(mkey)
        if got is None:
            vols: dict[str, str] = {}
            try:
                self._attachable_volumes(pod, csi_node, True, vols)
                got = vols
            except _LookupError as e:
                got = e
            memo[mkey] = got
        if isinstance(got, _LookupError):
            if got.not_found:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, str(got), plugin=NAME)
            return Status.as_error(str(got), NAME)
        if not got:
            return None
        new_volumes = dict(got)
        limits = {d: c for d, c in csi_node.drivers.items() if c is not None} if csi_node is not None else {}
        if not limits:
            return None
        pods = tuple(node_info.pods)
        hit = self._attached.get(node.name) if self._reuse else None
        if hit is not None and hit[0] == self._volume_version and hit[1] == pods:
            attached_count, attached_keys = hit[2], hit[3]
        else:
            attached: dict[str, str] = {}
            try:
                for pi in pods:
                    self._attachable_volumes(pi.pod, csi_node, False, attached)
            except _LookupError as e:
                return Status.as_error(str(e), NAME)
            attached_count = {}
            for driver in attached.values():
                attached_count[driver] = attached_count.get(driver, 0) + 1
            attached_keys = frozenset(attached)
            if self._reuse:
                self._attached[node.name] = (self._volume_version, pods, attached_count, attached_keys)
        for unique in attached_keys.intersection(new_volumes):
            del new_volumes[unique]  # a volume shared with a pod on the node counts once
        new_count: dict[str, int] = {}
        for driver in new_volumes.values():
            new_count[driver] = new_count.get(driver, 0) + 1
        for driver, n in new_count.items():
            limit = limits.get(driver)
            if limit is not None and attached_count.get(driver, 0) + n > limit:
                return self._exceeded
        return None

    # ---- vectorized Filter --------------------------------------------------------------

    def _depends_on_migration(self, pod: Pod) -> bool:
        """Whether the pod's volumes resolve differently on nodes with in-tree migration on
        (inline in-tree volumes, in-tree PVs, or an in-tree provisioner for an unbound claim)."""
        for v in pod.volumes:
            if in_tree_plugin_of(v.raw):
                return True
            claim = volume_claim_name(pod, v)
            if claim is None:
                continue
            pvc = self._pvcs.get(f"{pod.namespace}/{claim[0]}") if self._pvcs is not None else None
            if not isinstance(pvc, PersistentVolumeClaim):
                continue
            pv = self._pvs.get(pvc.volume_name) if pvc.volume_name and self._pvs is not None else None
            if isinstance(pv, PersistentVolume):
                if not pv.csi_driver and in_tree_plugin_of(pv.raw.get("spec") or {}):
                    return True
            else:
                sc = self._classes.get(claim_class(pvc)) if self._classes is not None else None
                if isinstance(sc, StorageClass) and sc.provisioner in IN_TREE_PLUGINS:
                    return True
        return False

    def _row_state(self, snapshot: Snapshot) -> _RowVolumes:
        """Attached-volume counts and limits per driver over every row, kept current with the
        rows that changed (and rebuilt when any volume object changed)."""
        rv = self._rows
        n = len(snapshot.infos)
        if rv is None or rv.snapshot is not snapshot or rv.version != self._volume_version:
            rv = self._rows = _RowVolumes(snapshot, self._volume_version, n)
            rows = [r for r in range(n) if snapshot.infos[r] is not None]
        else:
            rv.fit(n)
            rows = snapshot.changed_rows_since(rv.generation).tolist() if rv.generation != snapshot.generation \
                else []
        infos = snapshot.infos
        for r in rows:
            ni = infos[r]
            rv.clear_row(r)
            if ni is None or ni.node is None:
                continue
            csi_node = self._csinodes.get(ni.name) if self._csinodes is not None else None
            if not isinstance(csi_node, CSINode):
                csi_node = None
            if csi_node is not None:
                for driver, limit in csi_node.drivers.items():
                    if limit is not None:
                        rv.limit(driver)[r] = limit
            attached: dict[str, str] = {}
            for pi in ni.pods:
                try:
                    self._attachable_volumes(pi.pod, csi_node, False, attached)
                except _LookupError:
                    rv.broken[r] = True
                    break
            for handle, driver in attached.items():
                rv.count(driver)[r] += 1
                rv.handles.setdefault(handle, set()).add(r)
            rv.row_handles[r] = attached
        rv.generation = snapshot.generation
        return rv

    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        infos = snapshot.infos
        if not pod.volumes:
            return np.ones(len(rows), dtype=bool)
        if not self._reuse or self._depends_on_migration(pod):
            return np.fromiter((self.filter(state, pod, infos[r]) is None for r in rows.tolist()),  # type: ignore[arg-type]
                               dtype=bool, count=len(rows))
        new_volumes: dict[str, str] = {}
        try:
            self._attachable_volumes(pod, None, True, new_volumes)
        except _LookupError:
            # Every node gives the same answer; the per-node form words it.
            st = self.filter(state, pod, infos[int(rows[0])]) if len(rows) else None  # type: ignore[arg-type]
            return np.full(len(rows), st is None, dtype=bool)
        if not new_volumes:
            return np.ones(len(rows), dtype=bool)
        rv = self._row_state(snapshot)
        ok = ~rv.broken[rows]
        shared = [h for h in new_volumes if h in rv.handles]
        need: dict[str, int] = {}
        for driver in new_volumes.values():
            need[driver] = need.get(driver, 0) + 1
        for driver, k in need.items():
            lim = rv.limits.get(driver)
            if lim is None:
                continue
            ok &= rv.count(driver)[rows] + k <= lim[rows]
        if shared:
            # Rows that already have one of the pod's volumes count it once: decide those per node.
            touched = set().union(*(rv.handles[h] for h in shared))
            pos_of = {int(r): i for i, r in enumerate(rows.tolist()) if int(r) in touched}
            for r, i in pos_of.items():
                ok[i] = self.filter(state, pod, infos[r]) is None  # type: ignore[arg-type]
        broken = np.flatnonzero(rv.broken[rows])
        for i in broken.tolist():
            ok[i] = self.filter(state, pod, infos[int(rows[i])]) is None  # type: ignore[arg-type]
        return ok

    def _attachable_volumes(self, pod: Pod, csi_node: CSINode | None, new_pod: bool,
                            result: dict[str, str]) -> None:
        """Add the pod's CSI volumes (``driver/handle`` -> driver) to ``result``."""
        for v in pod.volumes:
            claim = volume_claim_name(pod, v)
            if claim is None:
                plugin = in_tree_plugin_of(v.raw)
                if plugin and is_csi_migration_on(csi_node, plugin):
                    driver, handle = translate(v.raw, plugin, None)
                    if handle:
                        result[f"{driver}/{handle}"] = driver
                continue
            name, ephemeral = claim
            if not name:
                raise _LookupError("PersistentVolumeClaim had no name")
            pvc = self._pvcs.get(f"{pod.namespace}/{name}") if self._pvcs is not None else None
            if pvc is None:
                if new_pod:
                    raise _LookupError(f'looking up PVC {pod.namespace}/{name}: persistentvolumeclaim "{name}" '
                                       "not found", not_found=True)
                continue  # an existing pod's missing claim is not counted
            assert isinstance(pvc, PersistentVolumeClaim)
            if ephemeral:
                ref = pvc.controller_ref()
                if pvc.namespace != pod.namespace or ref is None or ref.uid != pod.uid:
                    raise _LookupError(f"PVC {pvc.namespace}/{pvc.name} was not created for pod "
                                       f"{pod.namespace}/{pod.name} (pod is not owner)")
            driver, handle = self._csi_driver_info(csi_node, pvc)
            if not driver or not handle:
                continue
            result[f"{driver}/{handle}"] = driver

    def _csi_driver_info(self, csi_node: CSINode | None, pvc: PersistentVolumeClaim) -> tuple[str, str]:
        if not pvc.volume_name:
            return self._csi_driver_info_from_class(csi_node, pvc)
        pv = self._pvs.get(pvc.volume_name) if self._pvs is not None else None
        if not isinstance(pv, PersistentVolume):
            # Deleted, or the claim was pre-bound to a volume not created yet.
            return self._csi_driver_info_from_class(csi_node, pvc)
        if pv.csi_driver:
            return pv.csi_driver, pv.csi_volume_handle
        spec = pv.raw.get("spec") or {}
        plugin = in_tree_plugin_of(spec)
        if not plugin or not is_csi_migration_on(csi_node, plugin):
            return "", ""
        return translate(spec, plugin, pv)

    def _csi_driver_info_from_class(self, csi_node: CSINode | None, pvc: PersistentVolumeClaim) -> tuple[str, str]:
        cls_name = claim_class(pvc)
        if not cls_name:
            return "", ""  # an Immediate claim: it is bound before the pod is scheduled
        sc = self._classes.get(cls_name) if self._classes is not None else None
        if not isinstance(sc, StorageClass):
            return "", ""
        handle = f"{self.random_volume_id_prefix}-{pvc.namespace}/{pvc.name}"
        provisioner = sc.provisioner
        if provisioner in IN_TREE_PLUGINS:
            if not is_csi_migration_on(csi_node, provisioner):
                return "", ""
            return IN_TREE_PLUGINS[provisioner][0], handle
        return provisioner, handle

    # ---- EnqueueExtensions ----------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Any new CSINode may bring room for volumes.
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, ActionType.ADD, "CSINodeAdd")),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, ActionType.UPDATE, "CSINodeUpdate"),
                                 self.is_schedulable_after_csinode_updated),
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"),
                                 self.is_schedulable_after_assigned_pod_deleted),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD,
                                              "PersistentVolumeClaimAdd"),
                                 self.is_schedulable_after_pvc_added),
        ]

    @staticmethod
    def is_schedulable_after_assigned_pod_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if not isinstance(old, Pod):
            raise TypeError(f"unexpected objects in isSchedulableAfterAssignedPodDeleted: {old!r}")
        deleted = old
        if not deleted.volumes:
            return QueueingHint.QUEUE_SKIP
        if not deleted.node_name and not deleted.nominated_node_name:
            return QueueingHint.QUEUE_SKIP
        for v in deleted.volumes:
            if v.raw.get("persistentVolumeClaim") is not None or v.ephemeral or in_tree_plugin_of(v.raw):
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_pvc_added(pod: Pod, old: Any, new: Any) -> QueueingHint:
        return claim_event_hint(pod, new, "isSchedulableAfterPVCAdded", ephemeral=True)

    @staticmethod
    def is_schedulable_after_csinode_updated(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when some driver's limit went up or went away."""
        if not isinstance(old, CSINode) or not isinstance(new, CSINode):
            raise TypeError(f"unexpected objects in isSchedulableAfterCSINodeUpdated: {old!r}, {new!r}")
        for driver, old_limit in old.drivers.items():
            if old_limit is None:
                continue
            new_limit = new.drivers.get(driver)
            if new_limit is None or new_limit > old_limit:
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP
