"""VolumeZone: a pod's bound PersistentVolumes carry zone/region labels that the node must match
(upstream's ``plugins/volumezone``).

PreFilter reads, for each ``persistentVolumeClaim`` volume, the claim and its bound volume and
collects the volume's topology labels (``topology.kubernetes.io/{zone,region}`` and the beta
``failure-domain.beta.kubernetes.io/{zone,region}``; a value may list zones joined by ``__``).
Unbound claims of a WaitForFirstConsumer class are left to VolumeBinding; other unbound claims,
missing claims, volumes or classes reject the pod (UnschedulableAndUnresolvable). No topology
labels at all: Skip.

Filter: a node without any topology label fits (single-zone clusters); otherwise each volume label
must be on the node (a beta volume label may be matched by the node's GA label) with a value in the
volume's set, else ``node(s) had no available volume zone`` (UnschedulableAndUnresolvable).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ksched.api.pod import Pod
from ksched.api.storage import (
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from ksched.api.volumes import claim_class
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
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.helper.claims import claim_event_hint

__all__ = ["ERR_REASON_CONFLICT", "TOPOLOGY_LABELS", "VolumeZone", "label_zones_to_set"]

NAME = "VolumeZone"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
ERR_REASON_CONFLICT = "node(s) had no available volume zone"

LABEL_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
LABEL_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (LABEL_BETA_ZONE, LABEL_BETA_REGION, LABEL_ZONE, LABEL_REGION)
_TO_GA = {LABEL_BETA_REGION: LABEL_REGION, LABEL_BETA_ZONE: LABEL_ZONE}
MULTI_ZONE_DELIMITER = "__"


def label_zones_to_set(value: str) -> frozenset[str]:
    """Zones in a ``__``-separated label value (upstream's LabelZonesToSet); an empty element is
    an error (ValueError)."""
    out: set[str] = set()
    for z in value.split(MULTI_ZONE_DELIMITER):
        z = z.strip()
        if not z:
            raise ValueError(f'"{MULTI_ZONE_DELIMITER}" separated list ("{value}") must not contain an empty string')
        out.add(z)
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


def pv_topologies(pv: PersistentVolume) -> list[PVTopology]:
    out: list[PVTopology] = []
    for key in TOPOLOGY_LABELS:
        value = pv.labels.get(key)
        if value is None:
            continue
        try:
            zones = label_zones_to_set(value)
        except ValueError:
            continue  # upstream logs and ignores the label
        out.append(PVTopology(pv.name, key, zones))
    return out


class _State(StateData):
    __slots__ = ("topologies",)

    def __init__(self, topologies: list[PVTopology]) -> None:
        self.topologies = topologies


def _pvc_names(pod: Pod) -> list[str]:
    out = []
    for v in pod.volumes:
        src = v.raw.get("persistentVolumeClaim")
        if src is not None:
            out.append(src.get("claimName") or "")
    return out


class VolumeZone(PreFilterPlugin, FilterPlugin, EnqueueExtensions, SignPlugin):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        informers = getattr(handle, "informers", None)
        self._pvcs = informers.informer("PersistentVolumeClaim") if informers is not None else None
        self._pvs = informers.informer("PersistentVolume") if informers is not None else None
        self._classes = informers.informer("StorageClass") if informers is not None else None
        self._conflict = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT, plugin=NAME)

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """The pod's volume sources (as upstream). ksched refuses pods with claim-backed volumes:
        the verdict reads PVs and PVCs, which the previous pod's placement may change."""
        if has_claim_volumes(pod):
            return None, Status(Code.UNSCHEDULABLE, CLAIMS_NOT_SIGNABLE)
        return [SignFragment(VOLUMES_SIGNER_NAME, volumes_signer(pod))], None

    @staticmethod
    def _unresolvable(msg: str) -> Status:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg, plugin=NAME)

    def _pv_topologies_of(self, pod: Pod) -> tuple[list[PVTopology], Status | None]:
        out: list[PVTopology] = []
        for name in _pvc_names(pod):
            if not name:
                return [], self._unresolvable("PersistentVolumeClaim had no name")
            pvc = self._pvcs.get(f"{pod.namespace}/{name}") if self._pvcs is not None else None
            if pvc is None:
                return [], self._unresolvable(f'persistentvolumeclaim "{name}" not found')
            assert isinstance(pvc, PersistentVolumeClaim)
            pv_name = pvc.volume_name
            if not pv_name:
                sc_name = claim_class(pvc)
                if not sc_name:
                    return [], self._unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
                sc = self._classes.get(sc_name) if self._classes is not None else None
                if sc is None:
                    return [], self._unresolvable(f'storageclass.storage.k8s.io "{sc_name}" not found')
                assert isinstance(sc, StorageClass)
                if sc.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER:
                    continue  # VolumeBinding picks (or provisions) a volume for the node
                return [], self._unresolvable("PersistentVolume had no name")
            pv = self._pvs.get(pv_name) if self._pvs is not None else None
            if pv is None:
                return [], self._unresolvable(f'persistentvolume "{pv_name}" not found')
            assert isinstance(pv, PersistentVolume)
            out.extend(pv_topologies(pv))
        return out, None

    def pre_filter_skips(self, pod: Pod) -> bool:
        """PreFilter skips a pod without PersistentVolumeClaim volumes (no claim to look up, no
        topology; the runtime's ``TEMPLATE_SKIPS``)."""
        return not _pvc_names(pod)

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        tops, st = self._pv_topologies_of(pod)
        if st is not None:
            return None, st
        if not tops:
            return None, Status.skip()
        state.write(PRE_FILTER_STATE_KEY, _State(tops))
        return None, None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if not pod.volumes:
            return None
        s = state.get(PRE_FILTER_STATE_KEY)
        if isinstance(s, _State):
            tops = s.topologies
        else:
            # PreFilter did not run: work it out here (as upstream).
            tops, st = self._pv_topologies_of(pod)
            if st is not None:
                return st
        node = node_info.node
        if node is None:
            return Status.as_error("node not found", NAME)
        labels = node.labels
        for key in TOPOLOGY_LABELS:
            if key in labels:
                break
        else:
            return None  # a node without zone labels accepts any volume
        for t in tops:
            v = labels.get(t.key)
            if v is None:
                v = labels.get(_TO_GA.get(t.key, t.key))
            if v is None or v not in t.values:
                return self._conflict
        return None

    # ---- EnqueueExtensions ----------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A new WaitForFirstConsumer class may let an unbound claim through (the binding
            # mode of a class cannot change, so updates are not registered).
            ClusterEventWithHint(ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD, "StorageClassAdd"),
                                 self.is_schedulable_after_storage_class_added),
            # A new node or new zone labels on a node.
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL,
                                              "NodeAddOrUpdateLabel")),
            # A claim created, or bound (spec.volumeName filled in).
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM,
                                              ActionType.ADD | ActionType.UPDATE, "PersistentVolumeClaimChange"),
                                 self.is_schedulable_after_pvc_change),
            # A new volume, or a volume's zone labels changed.
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME,
                                              ActionType.ADD | ActionType.UPDATE, "PersistentVolumeChange"),
                                 self.is_schedulable_after_pv_change),
        ]

    @staticmethod
    def is_schedulable_after_pvc_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        return claim_event_hint(pod, new, "isSchedulableAfterPersistentVolumeClaimChange", ephemeral=False)

    @staticmethod
    def is_schedulable_after_storage_class_added(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if not isinstance(new, StorageClass):
            raise TypeError(f"unexpected objects in isSchedulableAfterStorageClassAdded: {new!r}")
        if new.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_pv_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if not isinstance(new, PersistentVolume) or (old is not None and not isinstance(old, PersistentVolume)):
            raise TypeError(f"unexpected objects in isSchedulableAfterPersistentVolumeChange: {old!r}, {new!r}")
        if old is None:
            return QueueingHint.QUEUE
        if pv_topologies(old) != pv_topologies(new):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP
