"""The volume binder behind the VolumeBinding plugin (upstream's ``volumebinding/binder.go``).

``get_pod_volume_claims`` (PreFilter) sorts a pod's claims into bound, unbound with delayed
binding and unbound with immediate binding; ``find_pod_volumes`` (Filter) checks one node;
``assume_pod_volumes`` (Reserve) records the choice in the assume caches;
``bind_pod_volumes`` (PreBind) makes the API updates, and ``poll_pod_volumes`` polls until the PV
controller has bound every claim or ``bind_timeout`` has passed on the cluster's clock;
``revert_assumed_pod_volumes`` (Unreserve) drops the assumptions.

Divergence: upstream's BindPodVolumes blocks its binding goroutine while it polls (every second,
the first poll after a second). Here the poll is a call of its own, so the PreBind plugin can
hand the wait back to the binding cycle (``WaitUntil``) and a single-threaded scheduler on a
virtual clock lets the PV controller and the provisioner act meanwhile, as they do beside a
scheduler on a real clock; the first poll is at once, then after 0.05 s, doubling up to a second.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

from ksched.api.errors import ApiError, NotFound
from ksched.api.meta import KubeObject
from ksched.api.node import Node
from ksched.api.pod import Pod, Volume
from ksched.api.storage import (
    ANNOTATION_SELECTED_NODE,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from ksched.api.volumes import (
    NOT_SUPPORTED_PROVISIONER,
    bind_volume_to_claim,
    check_node_affinity,
    claim_class,
    find_matching_volume,
    is_delay_binding_mode,
    is_pvc_fully_bound,
    match_topology_selector_terms,
    volume_claim_name,
)
from ksched.scheduler.plugins.volumebinding.assume_cache import AssumeCache, PVAssumeCache

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "BindingInfo",
    "BindingWait",
    "PodVolumeClaims",
    "PodVolumes",
    "VolumeBinder",
    "VolumeBindingError",
]

ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"

_FIRST_POLL_INTERVAL = 0.05
_MAX_POLL_INTERVAL = 1.0  # upstream polls every second


class VolumeBindingError(Exception):
    """Something went wrong (an Error status, not a rejection)."""


@dataclass(slots=True)
class BindingWait:
    """PreBind's wait for the PV controller to complete a pod's bindings: until ``deadline``
    (clock time), polled after ``interval`` seconds, doubling up to upstream's one second."""

    deadline: float
    interval: float = _FIRST_POLL_INTERVAL


@dataclass(slots=True)
class BindingInfo:
    """A claim and the (static, pre-provisioned) volume chosen for it."""

    pvc: PersistentVolumeClaim
    pv: PersistentVolume

    @property
    def storage_class_name(self) -> str:
        return self.pv.storage_class_name


@dataclass(slots=True)
class PodVolumes:
    """What a pod needs done on one node: static bindings and claims to provision."""

    static_bindings: list[BindingInfo] = field(default_factory=list)
    dynamic_provisions: list[PersistentVolumeClaim] = field(default_factory=list)


@dataclass(slots=True)
class PodVolumeClaims:
    bound_claims: list[PersistentVolumeClaim] = field(default_factory=list)
    unbound_claims_delay_binding: list[PersistentVolumeClaim] = field(default_factory=list)
    unbound_claims_immediate: list[PersistentVolumeClaim] = field(default_factory=list)
    # storage class -> the volumes of that class (assumed versions included), for the delayed claims
    unbound_volumes_delay_binding: dict[str, list[PersistentVolume]] = field(default_factory=dict)


def volume_is_for_pod(pod: Pod, pvc: PersistentVolumeClaim) -> str | None:
    """An error message unless the (ephemeral volume's) claim is controlled by the pod."""
    ref = pvc.controller_ref()
    if pvc.namespace != pod.namespace or ref is None or ref.uid != pod.uid:
        return (f"PVC {pvc.namespace}/{pvc.name} was not created for pod {pod.namespace}/{pod.name} "
                "(pod is not owner)")
    return None


class VolumeBinder:
    def __init__(self, handle: Any, bind_timeout: float) -> None:
        self.handle = handle
        informers = getattr(handle, "informers", None)

        def inf(kind: str) -> Any:
            return informers.informer(kind) if informers is not None else None

        self.pvc_cache = AssumeCache(inf("PersistentVolumeClaim"), "v1.PersistentVolumeClaim")
        self.pv_cache = PVAssumeCache(inf("PersistentVolume"))
        self.classes = inf("StorageClass")
        self.nodes = inf("Node")
        self.bind_timeout = float(bind_timeout)

    # ---- lookups ---------------------------------------------------------------------------

    def storage_class(self, name: str) -> StorageClass | None:
        sc = self.classes.get(name) if self.classes is not None else None
        return sc if isinstance(sc, StorageClass) else None

    def _pvc(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        pvc = self.pvc_cache.get(f"{namespace}/{name}")
        return pvc if isinstance(pvc, PersistentVolumeClaim) else None

    # ---- PreFilter -------------------------------------------------------------------------

    def is_volume_bound(self, pod: Pod, v: Volume) -> tuple[bool, PersistentVolumeClaim | None]:
        """Whether the volume's claim is fully bound (non-claim volumes count as bound). Raises
        VolumeBindingError for a missing claim or an ephemeral claim the pod does not own."""
        claim = volume_claim_name(pod, v)
        if claim is None:
            return True, None
        name, ephemeral = claim
        pvc = self._pvc(pod.namespace, name)
        if pvc is None:
            raise VolumeBindingError(f'error getting PVC "{pod.namespace}/{name}": could not find '
                                     f'v1.PersistentVolumeClaim "{pod.namespace}/{name}"')
        if ephemeral:
            err = volume_is_for_pod(pod, pvc)
            if err is not None:
                raise VolumeBindingError(err)
        return is_pvc_fully_bound(pvc), pvc

    def are_pod_volumes_bound(self, pod: Pod) -> bool:
        for v in pod.volumes:
            try:
                bound, _ = self.is_volume_bound(pod, v)
            except VolumeBindingError:
                return False
            if not bound:
                return False
        return True

    def get_pod_volume_claims(self, pod: Pod) -> PodVolumeClaims:
        out = PodVolumeClaims()
        for v in pod.volumes:
            bound, pvc = self.is_volume_bound(pod, v)
            if pvc is None:
                continue
            if bound:
                out.bound_claims.append(pvc)
            elif is_delay_binding_mode(pvc, self.storage_class) and not pvc.volume_name:
                out.unbound_claims_delay_binding.append(pvc)
            else:
                # Immediate binding (pre-bound claims included): the PV controller binds it.
                out.unbound_claims_immediate.append(pvc)
        for pvc in out.unbound_claims_delay_binding:
            cls_name = claim_class(pvc)
            out.unbound_volumes_delay_binding[cls_name] = self.pv_cache.list_pvs(cls_name)
        return out

    # ---- Filter ----------------------------------------------------------------------------

    def find_pod_volumes(self, pod: Pod, claims: PodVolumeClaims, node: Node) -> tuple[PodVolumes, list[str]]:
        """What the pod needs on this node, and why the node does not fit (reasons in
        upstream's order). Raises VolumeBindingError."""
        pv = PodVolumes()
        bound_satisfied = True
        bound_pvs_found = True
        unbound_satisfied = True
        sufficient_storage = True
        labels = node.labels
        if claims.bound_claims:
            bound_satisfied, bound_pvs_found = self._check_bound_claims(claims.bound_claims, labels)
        if claims.unbound_claims_delay_binding:
            to_match: list[PersistentVolumeClaim] = []
            to_provision: list[PersistentVolumeClaim] = []
            fast_fail = False
            for c in claims.unbound_claims_delay_binding:
                selected = c.annotations.get(ANNOTATION_SELECTED_NODE)
                if selected is not None:
                    if selected != node.name:
                        unbound_satisfied = False  # provisioning is under way for another node
                        fast_fail = True
                        break
                    to_provision.append(c)
                else:
                    to_match.append(c)
            if not fast_fail:
                if to_match:
                    unbound_satisfied, pv.static_bindings, unmatched = self._find_matching_volumes(
                        to_match, claims.unbound_volumes_delay_binding, labels)
                    to_provision.extend(unmatched)
                if to_provision:
                    unbound_satisfied, sufficient_storage, pv.dynamic_provisions = self._check_volume_provisions(
                        to_provision, labels)
        reasons: list[str] = []
        if not bound_satisfied:
            reasons.append(ERR_REASON_NODE_CONFLICT)
        if not unbound_satisfied:
            reasons.append(ERR_REASON_BIND_CONFLICT)
        if not sufficient_storage:
            reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
        if not bound_pvs_found:
            reasons.append(ERR_REASON_PV_NOT_EXIST)
        return pv, reasons

    def _check_bound_claims(self, claims: list[PersistentVolumeClaim], labels: dict[str, str]) -> tuple[bool, bool]:
        """(node affinity of every bound volume satisfied, every bound volume exists)."""
        for pvc in claims:
            pv = self.pv_cache.get(pvc.volume_name)
            if not isinstance(pv, PersistentVolume):
                return True, False
            if not check_node_affinity(pv, labels):
                return False, True
        return True, True

    def _find_matching_volumes(self, claims: list[PersistentVolumeClaim], volumes: dict[str, list[PersistentVolume]],
                               labels: dict[str, str]) -> tuple[bool, list[BindingInfo], list[PersistentVolumeClaim]]:
        """Smallest claims first, each gets the smallest fitting volume not chosen already."""
        chosen: dict[str, PersistentVolume] = {}
        bindings: list[BindingInfo] = []
        unmatched: list[PersistentVolumeClaim] = []
        found = True
        for pvc in sorted(claims, key=lambda c: c.request):
            pv = find_matching_volume(pvc, volumes.get(claim_class(pvc), ()), labels, chosen, True)
            if pv is None:
                unmatched.append(pvc)
                found = False
                continue
            chosen[pv.name] = pv
            bindings.append(BindingInfo(pvc, pv))
        return found, bindings, unmatched

    def _check_volume_provisions(self, claims: list[PersistentVolumeClaim],
                                 labels: dict[str, str]) -> tuple[bool, bool, list[PersistentVolumeClaim]]:
        """(provisioning possible, enough capacity, claims to provision)."""
        out: list[PersistentVolumeClaim] = []
        for c in claims:
            cls_name = claim_class(c)
            if not cls_name:
                raise VolumeBindingError(f'no class for claim "{c.namespace}/{c.name}"')
            sc = self.storage_class(cls_name)
            if sc is None:
                raise VolumeBindingError(f'failed to find storage class "{cls_name}"')
            if not sc.provisioner or sc.provisioner == NOT_SUPPORTED_PROVISIONER:
                return False, True, []
            if not match_topology_selector_terms(sc.allowed_topologies, labels):
                return False, True, []
            # Storage capacity (CSIDriver.storageCapacity + CSIStorageCapacity) is not tracked by
            # the embedded API: every CSI driver counts as not opting in, as upstream does for a
            # driver without a CSIDriver object.
            out.append(c)
        return True, True, out

    # ---- Reserve / Unreserve -------------------------------------------------------------------

    def assume_pod_volumes(self, pod: Pod, node_name: str, pod_volumes: PodVolumes) -> bool:
        """Record the bindings in the assume caches; True when all volumes are bound already."""
        if self.are_pod_volumes_bound(pod):
            return True
        new_bindings: list[BindingInfo] = []
        for b in pod_volumes.static_bindings:
            new_pv, dirty = bind_volume_to_claim(b.pv, b.pvc)
            if dirty:
                try:
                    self.pv_cache.assume(new_pv)
                except (LookupError, ValueError) as e:
                    self._revert_pvs(new_bindings)
                    raise VolumeBindingError(str(e)) from e
            new_bindings.append(BindingInfo(b.pvc, new_pv))
        provisioned: list[PersistentVolumeClaim] = []
        for c in pod_volumes.dynamic_provisions:
            raw = copy.deepcopy(c.raw)
            md = raw.setdefault("metadata", {})
            md["annotations"] = {**(md.get("annotations") or {}), ANNOTATION_SELECTED_NODE: node_name}
            clone = PersistentVolumeClaim(raw)
            try:
                self.pvc_cache.assume(clone)
            except (LookupError, ValueError) as e:
                self._revert_pvs(new_bindings)
                self._revert_pvcs(provisioned)
                raise VolumeBindingError(str(e)) from e
            provisioned.append(clone)
        pod_volumes.static_bindings = new_bindings
        pod_volumes.dynamic_provisions = provisioned
        return False

    def revert_assumed_pod_volumes(self, pod_volumes: PodVolumes) -> None:
        self._revert_pvs(pod_volumes.static_bindings)
        self._revert_pvcs(pod_volumes.dynamic_provisions)

    def _revert_pvs(self, bindings: list[BindingInfo]) -> None:
        for b in bindings:
            self.pv_cache.restore(b.pv.key)

    def _revert_pvcs(self, claims: list[PersistentVolumeClaim]) -> None:
        for c in claims:
            self.pvc_cache.restore(c.key)

    # ---- PreBind ---------------------------------------------------------------------------

    def bind_pod_volumes(self, pod_volumes: PodVolumes) -> BindingWait:
        """Write the bindings to the API; the wait for the PV controller to complete them
        starts (:meth:`poll_pod_volumes`). Raises VolumeBindingError."""
        self._bind_api_update(pod_volumes)
        return BindingWait(self._now() + self.bind_timeout)

    def poll_pod_volumes(self, pod: Pod, node_name: str, pod_volumes: PodVolumes, wait: BindingWait) -> float | None:
        """One poll of upstream's wait for the bindings: None once every claim is fully bound,
        else the clock time of the next poll. Raises VolumeBindingError when the binding failed
        or the wait has reached ``bind_timeout`` ("context deadline exceeded")."""
        try:
            if self._check_bindings(pod, node_name, pod_volumes):
                return None
        except VolumeBindingError as e:
            raise VolumeBindingError(f"binding volumes: {e}") from e
        t = self._now()
        if t >= wait.deadline:
            raise VolumeBindingError("binding volumes: context deadline exceeded")
        at = min(t + wait.interval, wait.deadline)
        wait.interval = min(wait.interval * 2, _MAX_POLL_INTERVAL)
        return at

    def _now(self) -> float:
        clock = getattr(self.handle, "clock", None)
        return clock.now() if clock is not None else time.time()

    def _bind_api_update(self, pod_volumes: PodVolumes) -> None:
        client = self.handle.client
        bindings = pod_volumes.static_bindings
        claims = pod_volumes.dynamic_provisions
        done_bindings = 0
        done_claims = 0
        try:
            for b in bindings:
                new = client.update(b.pv)
                if isinstance(new, PersistentVolume):
                    b.pv = new
                done_bindings += 1
            for i, c in enumerate(claims):
                new = client.update(c)
                if isinstance(new, PersistentVolumeClaim):
                    claims[i] = new
                done_claims += 1
        except ApiError as e:
            # Only what was not written goes back to the informer's version.
            self._revert_pvs(bindings[done_bindings:])
            self._revert_pvcs(claims[done_claims:])
            raise VolumeBindingError(e.message) from e

    def _get(self, kind: str, namespace: str, name: str) -> KubeObject:
        return self.handle.client.get(kind, namespace, name)  # type: ignore[no-any-return]

    def _node_labels(self, node_name: str) -> dict[str, str]:
        node = self.nodes.get(node_name) if self.nodes is not None else None
        if not isinstance(node, Node):
            try:
                node = self._get("Node", "", node_name)
            except ApiError as e:
                raise VolumeBindingError(f'failed to get node "{node_name}": {e.message}') from e
        return node.labels

    def _check_bindings(self, pod: Pod, node_name: str, pod_volumes: PodVolumes) -> bool:
        """True once every claim the pod's binding touched is fully bound; VolumeBindingError
        when the binding has failed (the pod is gone, a reservation or selected node was undone,
        a volume does not fit the node). Reads the API server, not the informers, as the PV
        controller and provisioners act on it."""
        labels = self._node_labels(node_name)
        try:
            self._get("Pod", pod.namespace, pod.name)
        except NotFound as e:
            raise VolumeBindingError(f"pod does not exist any more: {e.message}") from e
        except ApiError:
            pass  # upstream logs a lister error and goes on
        for b in pod_volumes.static_bindings:
            try:
                pv = self._get("PersistentVolume", "", b.pv.name)
                pvc = self._get("PersistentVolumeClaim", b.pvc.namespace, b.pvc.name)
            except ApiError as e:
                raise VolumeBindingError(f"failed to check binding: {e.message}") from e
            assert isinstance(pv, PersistentVolume) and isinstance(pvc, PersistentVolumeClaim)
            if not check_node_affinity(pv, labels):
                raise VolumeBindingError(f'pv "{pv.name}" node affinity doesn\'t match node "{node_name}": '
                                         "no matching NodeSelectorTerms")
            if not pv.claim_ref or not pv.claim_ref.get("uid"):
                raise VolumeBindingError(f'ClaimRef got reset for pv "{pv.name}"')
            if not is_pvc_fully_bound(pvc):
                return False
        for c in pod_volumes.dynamic_provisions:
            try:
                pvc = self._get("PersistentVolumeClaim", c.namespace, c.name)
            except ApiError as e:
                raise VolumeBindingError(f"failed to check provisioning pvc: {e.message}") from e
            assert isinstance(pvc, PersistentVolumeClaim)
            if not pvc.annotations:
                raise VolumeBindingError(f'selectedNode annotation reset for PVC "{pvc.name}"')
            if pvc.annotations.get(ANNOTATION_SELECTED_NODE) != node_name:
                # A provisioner that fails drops the annotation to have the pod rescheduled.
                raise VolumeBindingError(f'provisioning failed for PVC "{pvc.name}"')
            if pvc.volume_name:
                try:
                    pv = self._get("PersistentVolume", "", pvc.volume_name)
                except NotFound:
                    return False  # not visible yet
                except ApiError as e:
                    raise VolumeBindingError(f'failed to get pv "{pvc.volume_name}" from cache: {e.message}') from e
                assert isinstance(pv, PersistentVolume)
                if not check_node_affinity(pv, labels):
                    raise VolumeBindingError(f'pv "{pv.name}" node affinity doesn\'t match node "{node_name}": '
                                             "no matching NodeSelectorTerms")
            if not is_pvc_fully_bound(pvc):
                return False
        return True
