"""VolumeRestrictions: in-tree disks that cannot be mounted twice on a node, and
ReadWriteOncePod claims that only one pod in the cluster may use (upstream's
``plugins/volumerestrictions``).

* PreFilter finds the pod's claims with the ``ReadWriteOncePod`` access mode and counts how many
  of them scheduled (or assumed) pods already use; it skips the pod when that count is 0 and the
  pod has no GCE PD / AWS EBS / RBD / iSCSI volume. A missing claim: UnschedulableAndUnresolvable
  with the lister's message.
* Filter: a same-disk conflict with a pod on the node (GCE PD and iSCSI unless both read-only, AWS
  EBS always, RBD when monitors overlap with the same pool and image unless both read-only) is
  Unschedulable ``node(s) had no available disk``; a ReadWriteOncePod claim in use is
  Unschedulable (preemption may help) on every node.
* AddPod/RemovePod keep the in-use count right while preemption and nominated pods are simulated.
"""

from __future__ import annotations

from typing import Any

from ksched.api.pod import Pod, Volume
from ksched.api.storage import PersistentVolumeClaim
from ksched.scheduler.framework.cycle_state import CycleState, StateData
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
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
)
from ksched.scheduler.framework.signers import (
    CLAIMS_NOT_SIGNABLE,
    VOLUMES_SIGNER_NAME,
    has_claim_volumes,
    volumes_signer,
)
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.scheduler.plugins.helper.claims import claim_event_hint

__all__ = [
    "ERR_REASON_DISK_CONFLICT",
    "ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT",
    "VolumeRestrictions",
    "is_volume_conflict",
]

NAME = "VolumeRestrictions"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use "
    "by another pod")

_RESTRICTED_KINDS = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


def _claim_name(v: Volume) -> str:
    """The claim of a ``persistentVolumeClaim`` volume ("" for every other kind, ephemeral too)."""
    src = v.raw.get("persistentVolumeClaim")
    return (src.get("claimName") or "") if src else ""


def needs_restrictions_check(v: Volume) -> bool:
    raw = v.raw
    for k in _RESTRICTED_KINDS:
        if raw.get(k) is not None:
            return True
    return False


def _have_overlap(a: Any, b: Any) -> bool:
    return bool(set(a or ()) & set(b or ()))


def is_volume_conflict(volume: Volume, pod: Pod) -> bool:
    """Whether ``volume`` (of the pod being scheduled) conflicts with a volume of ``pod``."""
    v = volume.raw
    gce, ebs, rbd, iscsi = (v.get("gcePersistentDisk"), v.get("awsElasticBlockStore"), v.get("rbd"),
                            v.get("iscsi"))
    for ev in pod.volumes:
        e = ev.raw
        if gce is not None and e.get("gcePersistentDisk") is not None:
            eg = e["gcePersistentDisk"]
            if (gce.get("pdName") or "") == (eg.get("pdName") or "") and not (
                    gce.get("readOnly", False) and eg.get("readOnly", False)):
                return True
        if (ebs is not None and e.get("awsElasticBlockStore") is not None
                and (ebs.get("volumeID") or "") == (e["awsElasticBlockStore"].get("volumeID") or "")):
            return True
        if iscsi is not None and e.get("iscsi") is not None:
            ei = e["iscsi"]
            if (iscsi.get("iqn") or "") == (ei.get("iqn") or "") and not (
                    iscsi.get("readOnly", False) and ei.get("readOnly", False)):
                return True
        if rbd is not None and e.get("rbd") is not None:
            er = e["rbd"]
            if (_have_overlap(rbd.get("monitors"), er.get("monitors"))
                    and (rbd.get("pool") or "rbd") == (er.get("pool") or "rbd")
                    and (rbd.get("image") or "") == (er.get("image") or "")
                    and not (rbd.get("readOnly", False) and er.get("readOnly", False))):
                return True
    return False


def satisfy_volume_conflicts(pod: Pod, pods: list[Pod]) -> bool:
    """No volume of ``pod`` conflicts with a volume of ``pods`` (those on one node)."""
    for v in pod.volumes:
        if not needs_restrictions_check(v):
            continue
        for other in pods:
            if is_volume_conflict(v, other):
                return False
    return True


class _PreFilterState(StateData):
    __slots__ = ("conflicting_pvc_ref_count", "read_write_once_pod_pvcs")

    def __init__(self, pvcs: frozenset[str], count: int) -> None:
        self.read_write_once_pod_pvcs = pvcs
        self.conflicting_pvc_ref_count = count

    def clone(self) -> _PreFilterState:
        return _PreFilterState(self.read_write_once_pod_pvcs, self.conflicting_pvc_ref_count)

    def update_with_pod(self, pi: PodInfo, multiplier: int) -> None:
        n = 0
        for v in pi.pod.volumes:
            name = _claim_name(v)
            if name and name in self.read_write_once_pod_pvcs:
                n += 1
        self.conflicting_pvc_ref_count += multiplier * n


class VolumeRestrictions(PreFilterPlugin, FilterPlugin, PreFilterExtensions, EnqueueExtensions, SignPlugin):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        informers = getattr(handle, "informers", None)
        self._pvcs = informers.informer("PersistentVolumeClaim") if informers is not None else None
        self._disk_conflict = Status(Code.UNSCHEDULABLE, ERR_REASON_DISK_CONFLICT, plugin=NAME)
        self._rwop_conflict = Status(Code.UNSCHEDULABLE, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT, plugin=NAME)

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """The pod's volume sources (as upstream). ksched refuses pods with claim-backed volumes:
        the verdict reads PVs and PVCs, which the previous pod's placement may change."""
        if has_claim_volumes(pod):
            return None, Status(Code.UNSCHEDULABLE, CLAIMS_NOT_SIGNABLE)
        return [SignFragment(VOLUMES_SIGNER_NAME, volumes_signer(pod))], None

    # ---- PreFilter ------------------------------------------------------------------------

    def pre_filter_skips(self, pod: Pod) -> bool:
        """PreFilter skips a pod without volumes (nothing to check, no claims to look up; the
        runtime's ``TEMPLATE_SKIPS``)."""
        return not pod.volumes

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        needs_check = False
        for v in pod.volumes:
            if needs_restrictions_check(v):
                needs_check = True
                break
        pvcs: set[str] = set()
        for v in pod.volumes:
            name = _claim_name(v)
            if not name:
                continue
            pvc = self._pvcs.get(f"{pod.namespace}/{name}") if self._pvcs is not None else None
            if pvc is None:
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                    f'persistentvolumeclaim "{name}" not found', plugin=NAME)
            assert isinstance(pvc, PersistentVolumeClaim)
            if "ReadWriteOncePod" in pvc.access_modes:
                pvcs.add(pvc.name)
        count = 0
        snapshot = self.handle.snapshot if self.handle is not None else None
        for name in pvcs:
            if snapshot is not None and snapshot.is_pvc_used_by_pods(f"{pod.namespace}/{name}"):
                count += 1
        if not needs_check and count == 0:
            return None, Status.skip()
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(frozenset(pvcs), count))
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_add: PodInfo,
                node_info: NodeInfo) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return Status.as_error(f'cannot read "{PRE_FILTER_STATE_KEY}" from cycleState', NAME)
        s.update_with_pod(pod_info_to_add, 1)
        return None

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return Status.as_error(f'cannot read "{PRE_FILTER_STATE_KEY}" from cycleState', NAME)
        s.update_with_pod(pod_info_to_remove, -1)
        return None

    # ---- Filter ---------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        for v in pod.volumes:
            if needs_restrictions_check(v):
                for pi in node_info.pods:
                    if is_volume_conflict(v, pi.pod):
                        return self._disk_conflict
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return Status.as_error(f'cannot read "{PRE_FILTER_STATE_KEY}" from cycleState', NAME)
        if s.conflicting_pvc_ref_count > 0:
            return self._rwop_conflict
        return None

    # ---- EnqueueExtensions ----------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Deleting a pod frees its disks and its ReadWriteOncePod claims.
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"),
                                 self.is_schedulable_after_assigned_pod_deleted),
            # Any new node may help (scheduling queue hints are on: no node updates needed).
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd")),
            # The claim must exist to read its access modes.
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD,
                                              "PersistentVolumeClaimAdd"),
                                 self.is_schedulable_after_pvc_added),
        ]

    @staticmethod
    def is_schedulable_after_pvc_added(pod: Pod, old: Any, new: Any) -> QueueingHint:
        return claim_event_hint(pod, new, "isSchedulableAfterPersistentVolumeClaimAdded", ephemeral=False)

    @staticmethod
    def is_schedulable_after_assigned_pod_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if not isinstance(old, Pod):
            raise TypeError(f"unexpected objects in isSchedulableAfterAssignedPodDeleted: {old!r}")
        deleted = old
        if deleted.namespace != pod.namespace:
            return QueueingHint.QUEUE_SKIP
        if not satisfy_volume_conflicts(pod, [deleted]):
            return QueueingHint.QUEUE
        # A shared claim may be a ReadWriteOncePod one (the claim itself is not read, to keep
        # hints cheap, as upstream).
        claims = {n for v in pod.volumes if (n := _claim_name(v))}
        for v in deleted.volumes:
            if _claim_name(v) in claims:
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP
