"""VolumeBinding: a pod's PersistentVolumeClaims must be bound, or bindable on the node, and the
scheduler binds the delayed ones (upstream's ``plugins/volumebinding/volume_binding.go``; the
binder it drives is ``binder.py``, its assume caches ``assume_cache.py``).

* PreFilter: every claim the pod uses must exist (``persistentvolumeclaim "x" not found``), not
  be lost or being deleted, and (for generic ephemeral volumes) belong to the pod; all of those
  are UnschedulableAndUnresolvable. A pod without claims: Skip. Unbound claims of an
  ``Immediate`` class (or of no class) are the PV controller's to bind: ``pod has unbound
  immediate PersistentVolumeClaims`` (UnschedulableAndUnresolvable).
* Filter: bound claims' volumes must admit the node (node affinity) and exist; unbound
  ``WaitForFirstConsumer`` claims need an available static volume (smallest fit: class, selector,
  capacity, access and volume modes, node affinity) or a class that can provision on the node
  (a provisioner, ``allowedTopologies``). Rejections are UnschedulableAndUnresolvable with
  upstream's reasons.
* Reserve assumes the choice (the volume reserved for the claim, the claim's selected node),
  Unreserve reverts it, PreBind writes it to the API and waits for the PV controller to complete
  the bindings (``bindTimeoutSeconds`` on the cluster's clock, then ``binding volumes: context
  deadline exceeded``). It does not block while it waits: it returns ``WaitUntil`` (the next
  poll) and the binding cycle calls it again then, as DynamicResources does for binding
  conditions, so a single-threaded scheduler on a virtual clock waits for the provisioner as
  one on a real clock does instead of failing at once.
* Score (only with a ``shape`` in the args, standing in for upstream's StorageCapacityScoring
  gate) rates static bindings by how full the chosen volumes would be.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ksched.api.pod import Pod
from ksched.api.quantity import value
from ksched.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from ksched.api.volumes import volume_claim_name
from ksched.scheduler.framework.cycle_state import CycleState, StateData
from ksched.scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from ksched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    EnqueueExtensions,
    FilterPlugin,
    NodeList,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
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
from ksched.scheduler.framework.status import Code, Status, WaitUntil
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.helper.claims import claim_event_hint
from ksched.scheduler.plugins.helper.shape_score import broken_linear
from ksched.scheduler.plugins.nodevolumelimits import MIGRATED_PLUGINS_ANNOTATION
from ksched.scheduler.plugins.volumebinding.binder import (
    BindingWait,
    PodVolumeClaims,
    PodVolumes,
    VolumeBinder,
    VolumeBindingError,
    volume_is_for_pod,
)

__all__ = [
    "ERR_REASON_UNBOUND_IMMEDIATE",
    "NAME",
    "VolumeBinding",
    "broken_linear",
]

NAME = "VolumeBinding"
STATE_KEY = NAME
ERR_REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
DEFAULT_BIND_TIMEOUT_SECONDS = 600
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10


class _State(StateData):
    """Shared by every clone of the cycle state (as upstream's pointer)."""

    __slots__ = ("all_bound", "binding_wait", "bound_anywhere", "has_static_bindings", "pod_volume_claims",
                 "pod_volumes_by_node")

    def __init__(self, claims: PodVolumeClaims | None = None) -> None:
        self.all_bound = False
        # Only bound claims, all of whose volumes exist and have no node affinity: every node fits
        # (None until computed).
        self.bound_anywhere: bool | None = None
        self.pod_volumes_by_node: dict[str, PodVolumes] | None = {} if claims is not None else None
        self.pod_volume_claims = claims
        self.has_static_bindings = False
        # PreBind's wait for the PV controller, once the bindings are written.
        self.binding_wait: BindingWait | None = None

    def clone(self) -> _State:
        return self

    def volumes_for(self, node_name: str) -> PodVolumes | None:
        """What Filter found for the pod's claims on a node (None: the pod has no claims or the
        node was not filtered). Claims that are bound anywhere need nothing on any node."""
        by_node = self.pod_volumes_by_node
        if by_node is None:
            return None
        got = by_node.get(node_name)
        if got is None and self.bound_anywhere:
            got = by_node[node_name] = PodVolumes()
        return got


class VolumeBinding(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin, PreBindPlugin,
        EnqueueExtensions, VectorizedFilter, SignPlugin):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        timeout = self.args.get("bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT_SECONDS)
        if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0:
            raise ValueError(f"bindTimeoutSeconds: Invalid value: {timeout!r}: invalid BindTimeoutSeconds, should "
                             "not be a negative value")
        self.binder = VolumeBinder(handle, timeout)
        self._pvcs = self.binder.pvc_cache.informer
        shape = self.args.get("shape")
        self._shape: list[tuple[int, int]] | None = None
        if shape:
            pts = [(int(p["utilization"]), int(p["score"]) * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE))
                   for p in shape]
            self._shape = pts

    # ---- PreFilter ------------------------------------------------------------------------

    def _pod_has_pvcs(self, pod: Pod) -> tuple[bool, str | None]:
        has = False
        for v in pod.volumes:
            claim = volume_claim_name(pod, v)
            if claim is None:
                continue
            name, ephemeral = claim
            has = True
            pvc = self._pvcs.get(f"{pod.namespace}/{name}") if self._pvcs is not None else None
            if not isinstance(pvc, PersistentVolumeClaim):
                if ephemeral:
                    return has, (f'waiting for ephemeral volume controller to create the persistentvolumeclaim '
                                 f'"{name}"')
                return has, f'persistentvolumeclaim "{name}" not found'
            if pvc.phase == "Lost":
                return has, (f'persistentvolumeclaim "{pvc.name}" bound to non-existent persistentvolume '
                             f'"{pvc.volume_name}"')
            if pvc.deletion_timestamp is not None:
                return has, f'persistentvolumeclaim "{pvc.name}" is being deleted'
            if ephemeral:
                err = volume_is_for_pod(pod, pvc)
                if err is not None:
                    return has, err
        return has, None

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """The pod's volume sources (as upstream). ksched refuses pods with claim-backed volumes:
        the verdict reads PVs and PVCs, which the previous pod's placement may change."""
        if has_claim_volumes(pod):
            return None, Status(Code.UNSCHEDULABLE, CLAIMS_NOT_SIGNABLE)
        return [SignFragment(VOLUMES_SIGNER_NAME, volumes_signer(pod))], None

    def pre_filter_skip_state(self, pod: Pod) -> tuple[str, Any] | None:
        """PreFilter writes a new empty state (Reserve and PreBind write to it) and Skips a pod
        none of whose volumes is backed by a claim (which volumes are is the template's; the
        runtime's ``SKIP_STATES``)."""
        if any(volume_claim_name(pod, v) is not None for v in pod.volumes):
            return None
        return STATE_KEY, _State

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        has, err = self._pod_has_pvcs(pod)
        if err is not None:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, err, plugin=NAME)
        if not has:
            state.write(STATE_KEY, _State())
            return None, Status.skip()
        try:
            claims = self.binder.get_pod_volume_claims(pod)
        except VolumeBindingError as e:
            return None, Status.as_error(str(e), NAME)
        if claims.unbound_claims_immediate:
            # The PV controller binds them; the pod is retried when the claims change.
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNBOUND_IMMEDIATE, plugin=NAME)
        state.write(STATE_KEY, _State(claims))
        return None, None

    @staticmethod
    def _state(state: CycleState) -> _State:
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            raise VolumeBindingError(f'reading "{STATE_KEY}" from cycleState: not found')
        return s

    # ---- Filter ---------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        try:
            s = self._state(state)
        except VolumeBindingError as e:
            return Status.as_error(str(e), NAME)
        node = node_info.node
        if node is None:
            return Status.as_error("node not found", NAME)
        claims = s.pod_volume_claims
        if claims is None:
            return None
        if self._bound_anywhere(s, claims):
            return None  # what find_pod_volumes would conclude on any node (see _State.volumes_for)
        try:
            pod_volumes, reasons = self.binder.find_pod_volumes(pod, claims, node)
        except VolumeBindingError as e:
            return Status.as_error(str(e), NAME)
        if reasons:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons, plugin=NAME)
        assert s.pod_volumes_by_node is not None
        s.pod_volumes_by_node[node.name] = pod_volumes
        if pod_volumes.static_bindings:
            s.has_static_bindings = True
        return None

    def _bound_anywhere(self, s: _State, claims: PodVolumeClaims) -> bool:
        if s.bound_anywhere is None:
            s.bound_anywhere = not claims.unbound_claims_delay_binding and all(
                isinstance(pv := self.binder.pv_cache.get(c.volume_name), PersistentVolume)
                and pv.node_affinity is None for c in claims.bound_claims)
        return s.bound_anywhere

    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Any, rows: np.ndarray) -> np.ndarray | None:
        """Every node at once when the answer is the same everywhere (no claims, or claims all
        bound to volumes without node affinity); None otherwise: Filter then runs per node."""
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            return None
        claims = s.pod_volume_claims
        if claims is None or self._bound_anywhere(s, claims):
            return np.ones(len(rows), dtype=bool)
        return None

    # ---- PreScore / Score -------------------------------------------------------------------

    def pre_score_skips(self, pod: Pod) -> bool:
        """PreScore skips every pod without a scoring shape (the plugin's arguments alone; the
        runtime's ``TEMPLATE_SKIPS``)."""
        return self._shape is None

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        if self._shape is None:
            return Status.skip()
        try:
            s = self._state(state)
        except VolumeBindingError as e:
            return Status.as_error(str(e), NAME)
        return None if s.has_static_bindings else Status.skip()

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        if self._shape is None:
            return 0, None
        try:
            s = self._state(state)
        except VolumeBindingError as e:
            return 0, Status.as_error(str(e), NAME)
        pv = s.volumes_for(node_info.name)
        if pv is None:
            return 0, None
        classes: dict[str, list[int]] = {}
        for b in pv.static_bindings:
            r = classes.setdefault(b.storage_class_name, [0, 0])
            r[0] += b.pvc.request
            r[1] += b.pv.capacity
        if not classes:
            return 0, None
        shape = self._shape
        total = 0
        for requested, capacity in classes.values():
            if capacity == 0 or requested > capacity:
                total += broken_linear(shape, MAX_UTILIZATION)
            else:
                total += broken_linear(shape, requested * MAX_UTILIZATION // capacity)
        # math.Round of a float: halves away from zero.
        n = len(classes)
        q, r = divmod(abs(total), n)
        rounded = q + (1 if 2 * r >= n else 0)
        return (rounded if total >= 0 else -rounded), None

    # ---- Reserve / Unreserve ------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        try:
            s = self._state(state)
        except VolumeBindingError as e:
            return Status.as_error(str(e), NAME)
        pv = s.volumes_for(node_name)
        if pv is None:
            s.all_bound = True  # the pod uses no claim
            return None
        try:
            s.all_bound = self.binder.assume_pod_volumes(pod, node_name, pv)
        except VolumeBindingError as e:
            return Status.as_error(str(e), NAME)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            return
        pv = s.volumes_for(node_name)
        if pv is not None:
            self.binder.revert_assumed_pod_volumes(pv)

    # ---- PreBind ---------------------------------------------------------------------------

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        try:
            s = self._state(state)
        except VolumeBindingError as e:
            return Status.as_error(str(e), NAME)
        if s.all_bound:
            return Status.skip()
        if s.volumes_for(node_name) is None:
            return Status.as_error(f'no pod volumes found for node "{node_name}"', NAME)
        return None

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        try:
            s = self._state(state)
        except VolumeBindingError as e:
            return Status.as_error(str(e), NAME)
        if s.all_bound:
            return None
        pv = s.volumes_for(node_name)
        if pv is None:
            return Status.as_error(f'no pod volumes found for node "{node_name}"', NAME)
        try:
            if s.binding_wait is None:
                s.binding_wait = self.binder.bind_pod_volumes(pv)
            at = self.binder.poll_pod_volumes(pod, node_name, pv, s.binding_wait)
        except VolumeBindingError as e:
            return Status.as_error(str(e), NAME)
        if at is None:
            return None
        return WaitUntil(at, "waiting for the volumes to be bound", plugin=NAME)

    # ---- EnqueueExtensions ----------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A missing or mis-configured class (allowedTopologies) may be fixed.
            ClusterEventWithHint(ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD | ActionType.UPDATE,
                                              "StorageClassChange"),
                                 self.is_schedulable_after_storage_class_change),
            # Claims get created and bound.
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM,
                                              ActionType.ADD | ActionType.UPDATE, "PersistentVolumeClaimChange"),
                                 self.is_schedulable_after_pvc_change),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE,
                                              "PersistentVolumeChange")),
            # Node labels decide volume node affinity and allowed topologies (with queueing
            # hints on, taint updates are not needed).
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL,
                                              "NodeAddOrUpdateLabel")),
            # CSINodes say which in-tree plugins are migrated to CSI.
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, ActionType.ADD | ActionType.UPDATE,
                                              "CSINodeChange"),
                                 self.is_schedulable_after_csinode_change),
            # Storage capacity tracking.
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_DRIVER, ActionType.UPDATE, "CSIDriverUpdate"),
                                 self.is_schedulable_after_csidriver_change),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_STORAGE_CAPACITY,
                                              ActionType.ADD | ActionType.UPDATE, "CSIStorageCapacityChange"),
                                 self.is_schedulable_after_csi_storage_capacity_change),
        ]

    @staticmethod
    def is_schedulable_after_pvc_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        return claim_event_hint(pod, new, "isSchedulableAfterPersistentVolumeClaimChange", ephemeral=True)

    @staticmethod
    def is_schedulable_after_storage_class_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if not isinstance(new, StorageClass) or (old is not None and not isinstance(old, StorageClass)):
            raise TypeError(f"unexpected objects in isSchedulableAfterStorageClassChange: {old!r}, {new!r}")
        if old is None:
            return QueueingHint.QUEUE
        if new.allowed_topologies != old.allowed_topologies:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_csinode_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if old is None:
            return QueueingHint.QUEUE
        if not isinstance(old, CSINode) or not isinstance(new, CSINode):
            raise TypeError(f"unexpected objects in isSchedulableAfterCSINodeChange: {old!r}, {new!r}")
        if old.annotations.get(MIGRATED_PLUGINS_ANNOTATION) != new.annotations.get(MIGRATED_PLUGINS_ANNOTATION):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_csidriver_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when a driver a pod's inline CSI volume uses stops tracking capacity."""
        if old is None or new is None:
            raise TypeError(f"unexpected objects in isSchedulableAfterCSIDriverChange: {old!r}, {new!r}")
        name = new.name
        for v in pod.volumes:
            csi = v.raw.get("csi")
            if not csi or csi.get("driver") != name:
                continue
            was = bool((old.raw.get("spec") or {}).get("storageCapacity"))
            now = bool((new.raw.get("spec") or {}).get("storageCapacity"))
            if was and not now:
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_csi_storage_capacity_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue on a new capacity object, or when the volume limit (maximumVolumeSize, else
        capacity) went up."""
        if new is None:
            raise TypeError(f"unexpected objects in isSchedulableAfterCSIStorageCapacityChange: {new!r}")
        if old is None:
            return QueueingHint.QUEUE
        def limit(o: Any) -> int | None:
            raw = o.raw
            q = raw.get("maximumVolumeSize")
            if q is None:
                q = raw.get("capacity")
            return value(q) if q is not None else None

        new_limit, old_limit = limit(new), limit(old)
        if new_limit is not None and (old_limit is None or new_limit > old_limit):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP
