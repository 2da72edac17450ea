"""DynamicResources: the scheduler plugin that allocates ResourceClaims
(``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``, 1.36 defaults).

* SignPod (opportunistic batching): pods with claims are not signable; others sign nothing.
* PreEnqueue: every claim of the pod resolves (created, not being deleted, owned by the pod
  when generated from a template), else UnschedulableAndUnresolvable with upstream's text.
* PreFilter: the claims again; Skip for a pod without claims (Filter and Score then cost
  nothing); the allocated ones' node selectors; classes must exist; the allocator for the
  claims to allocate, over the allocated state plus the allocations in flight.
* Filter: an allocated claim must be usable on the node; the others are allocated by the
  structured allocator (``cannot allocate all claims``); the result is kept for Reserve.
* PostFilter (before DefaultPreemption, for every unschedulable pod): ``no new claims to
  deallocate``; or deallocates one unavailable claim reserved for nobody else; or ``still not
  schedulable``. Without PreFilter state (an earlier PreFilter rejected the pod outright) the
  status is an Error ``not found``, as upstream's state read fails.
* Score (weight 2 in the default profile): ``8 - i`` per firstAvailable request whose
  subrequest ``i`` was chosen, normalized to 0..100; 0 for pods without claims.
* Reserve puts the node's allocation in flight; Unreserve takes it back (and the pod out of
  ``reservedFor``); PreBind writes the finalizer, the allocation and the reservation.
* Queueing hints for ResourceClaim, the pod's generated-claim status, DeviceClass and
  ResourceSlice events.

* AddPod/RemovePod (only with DRAPreemption, which 1.36 does not have: alpha afterwards, off by
  default): a preemption dry run that removes every pod reserving an allocated claim frees the
  claim's devices in its copy of the allocated state (and putting one back takes them again);
  Filter's ``cannot allocate all claims`` is then Unschedulable, so preemption is tried. Without
  it (1.36) that verdict is UnschedulableAndUnresolvable and devices are never preempted for.

Args: ``filterTimeout`` (seconds, default 10; 0 disables), ``bindingTimeout`` (600);
``draPreemption`` (false) stands in for the DRAPreemption feature gate (ksched has no
``--feature-gates``; a ``feature_gates`` mapping on the handle wins).

* DRA-backed extended resources (DRAExtendedResource, ``extended.py``): PreFilter appends the
  pod's extended-resource claim (the one an earlier cycle created, or the in-memory
  ``<extended-resources>`` placeholder) after its own claims when it asks for a resource a
  DeviceClass stands for; Filter gives the placeholder this node's requests for the resources
  the node does not advertise (``cannot fit resource`` when neither the node nor a class has
  one; ``cannot schedule extended resource claim`` for a claim left by an earlier cycle) and
  allocates it with the others; PreBind creates it (``<pod>-extended-resources-<5>``, annotated
  ``resource.kubernetes.io/extended-resource-claim: "true"``, owned by the pod), writes its
  allocation and reservation, and the pod's ``status.extendedResourceClaimStatus``; Unreserve
  and PostFilter (``deletion of ResourceClaim completed``) delete a created one.

* Binding conditions (DRADeviceBindingConditions with DRAResourceClaimDeviceStatus): PreBind
  sets ``allocationTimestamp``, records ``BindingConditionsPending`` and waits until the
  devices' binding conditions are True in the claims' ``status.devices`` (``claim <c> binding
  failed: reason=..., message="..."`` on a True failure condition, ``device binding timeout``
  after ``bindingTimeout``); Filter finds such a failed or timed-out allocated claim unavailable
  (``resourceclaim not available on the node``), so PostFilter deallocates it.

Known divergences: PreBind does not block while it waits for binding conditions: it returns
``WaitUntil`` (5 s later on the cluster's clock) and the binding cycle calls it again, which
keeps a simulation single-threaded and its virtual time exact; PodGroup
claims (alpha) do not exist; share IDs are UUIDs from a seeded source of the plugin's own;
PostFilter's "random" unavailable claim comes from the scheduler's seeded source; the
allocator's filter timeout is checked in wall-clock time.
"""

from __future__ import annotations

import copy
import logging
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ksched.api.errors import ApiError, Conflict
from ksched.api.labels import NodeSelector
from ksched.api.meta import format_time, parse_time
from ksched.api.pod import Pod
from ksched.api.resource import (
    FINALIZER_DELETE_PROTECTION,
    ClaimNameError,
    ResourceClaim,
    claim_is_for_pod,
    is_dra_extended_resource_name,
    pod_claim_name,
    pod_claim_refs,
    pod_has_claims,
)
from ksched.api.resources import pod_requests
from ksched.scheduler.cache.snapshot import Snapshot
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
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorizedScore,
    ZeroScore,
)
from ksched.scheduler.framework.status import Code, Diagnosis, Status, WaitUntil
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.scheduler.plugins.dynamicresources.allocator import (
    Allocator,
    AllocatorError,
    AllocatorTimeout,
    FailedOnNode,
)
from ksched.scheduler.plugins.dynamicresources.extended import (
    DeviceClassResolver,
    find_extended_resource_claim,
    is_special_claim,
    mapped_requests,
    node_claim,
    placeholder_claim,
    requests_and_mappings,
)
from ksched.scheduler.plugins.dynamicresources.manager import DRAManager, claim_contribution, manager_of

__all__ = ["NAME", "DynamicResources"]

log = logging.getLogger(__name__)

NAME = "DynamicResources"
STATE_KEY = NAME
MAX_SCORE = 100
BINDING_POLL_SECONDS = 5.0


@dataclass(slots=True)
class _NodeAllocation:
    """Filter's result on a node: the allocation of each claim it allocated (indices into the
    state's claims), and the extended-resource claim with this node's requests, if any."""

    indices: list[int]
    results: list[dict[str, Any]]
    ext_claim: ResourceClaim | None = None
    mappings: list[dict[str, str]] = field(default_factory=list)


@dataclass(slots=True)
class _State(StateData):
    claims: list[ResourceClaim] = field(default_factory=list)
    available_on: list[NodeSelector | None] = field(default_factory=list)
    allocator: Allocator | None = None
    node_allocations: dict[str, _NodeAllocation] = field(default_factory=dict)
    # The extended-resource claim (DRAExtendedResource): its index in ``claims`` (-1: none), the
    # UID it had when put in flight, the pod's requests of such resources, the class resolver.
    ext: int = -1
    ext_initial_uid: str = ""
    ext_requests: dict[str, int] = field(default_factory=dict)
    resolver: DeviceClassResolver | None = None
    # The extended claim with a node's requests, per set of resources DRA provides there: the
    # same set gives the same claim on every node (built once per cycle, not once per node).
    ext_variants: dict[tuple[str, ...], tuple[ResourceClaim, list[dict[str, str]]]] = field(default_factory=dict)
    # PreBind: the claims are written (a binding cycle that waits for binding conditions calls
    # PreBind again), and since when it waits.
    bound: bool = False
    wait_start: float | None = None
    unavailable: set[int] = field(default_factory=set)
    allocations: dict[int, dict[str, Any]] = field(default_factory=dict)
    # DRAPreemption: victims removed in a preemption dry run, per claim UID, and the claims whose
    # every user was removed (their devices are out of the allocator's allocated state).
    preemption: bool = False
    removed_users: dict[str, set[str]] = field(default_factory=dict)
    released: set[str] = field(default_factory=set)

    def clone(self) -> _State:
        if not self.preemption or self.allocator is None:
            return self
        # A dry run's removals stay in its copy: the allocated state and the removal records are
        # copied; what Filter and Reserve record (per-node allocations) stays shared, as upstream.
        c = copy.copy(self)
        c.allocator = copy.copy(self.allocator)
        c.allocator.allocated = self.allocator.allocated.copy()
        c.removed_users = {k: set(v) for k, v in self.removed_users.items()}
        c.released = set(self.released)
        return c

    def to_allocate(self) -> list[int]:
        return [i for i, c in enumerate(self.claims) if c.allocation is None]


# The PreFilter state of a pod with nothing to allocate: no claims, so no extension point
# writes to it (Filter and Score return at once, Reserve/Unreserve/PreBind have nothing to do).
_NO_CLAIMS = _State()


def _no_claims() -> _State:
    """The state of a pod with nothing to allocate (``pre_filter_skip_state``'s factory)."""
    return _NO_CLAIMS
_SKIP = Status.skip()


class DynamicResources(PreEnqueuePlugin, PreFilterPlugin, PreFilterExtensions, SignPlugin, FilterPlugin, PostFilterPlugin, ScorePlugin,
                       ScoreExtensions, VectorizedScore, ZeroScore, ReservePlugin, PreBindPlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        ft = self.args.get("filterTimeout", 10)
        bt = self.args.get("bindingTimeout", 600)
        if isinstance(ft, bool) or not isinstance(ft, int | float) or ft < 0:
            raise ValueError(f"filterTimeout: Invalid value: {ft!r}: must be zero or positive")
        if isinstance(bt, bool) or not isinstance(bt, int | float) or bt <= 0:
            raise ValueError(f"bindingTimeout: Invalid value: {bt!r}: must be positive")
        self.filter_timeout = float(ft)
        self.binding_timeout = float(bt)
        dp = self.args.get("draPreemption", False)
        if not isinstance(dp, bool):
            raise ValueError(f"draPreemption: Invalid value: {dp!r}: must be true or false")
        gates = getattr(handle, "feature_gates", None) or {}
        self.dra_preemption = bool(gates.get("DRAPreemption", dp))
        self._manager: DRAManager | None = None
        self._share_rng = random.Random(0)
        self._uid_rng = random.Random(1)
        if getattr(handle, "informers", None) is not None:
            # The DRA manager exists from the start: NodeResourcesFit asks it which extended
            # resources DeviceClasses stand for.
            self._manager = manager_of(handle.informers)

    @property
    def manager(self) -> DRAManager:
        m = self._manager
        if m is None:
            informers = getattr(self.handle, "informers", None)
            if informers is None:
                raise RuntimeError("DynamicResources needs the scheduler's informers")
            m = self._manager = manager_of(informers)
        return m

    def _rng(self) -> Any:
        return getattr(self.handle, "rng", None)

    def _new_uid(self) -> str:
        return str(uuid.UUID(int=self._uid_rng.getrandbits(128), version=4))

    def _mapped(self, pod: Pod, resolver: DeviceClassResolver) -> dict[str, int]:
        """The pod's requests of resources a DeviceClass stands for (cached per pod and resolver)."""
        if not resolver:
            return {}
        cache = pod.cached()
        hit = cache.get("dra.mapped")
        if hit is not None and hit[0] is resolver:
            return hit[1]  # type: ignore[no-any-return]
        out = mapped_requests(pod_requests(pod), resolver)
        cache["dra.mapped"] = (resolver, out)
        return out

    def pre_filter_skip_state(self, pod: Pod) -> tuple[str, Any] | None:
        """PreFilter writes the shared empty state and Skips a pod without claims none of whose
        requests names a resource a DeviceClass may stand for: no resolver maps any of them,
        so the template alone decides (the runtime's ``SKIP_STATES``)."""
        if pod_has_claims(pod) or any(v and is_dra_extended_resource_name(k) for k, v in pod_requests(pod).items()):
            return None
        return STATE_KEY, _no_claims

    def _new_share_id(self) -> str:
        # A source of its own (seeded): drawing from the scheduler's would shift its tie-breaks.
        return str(uuid.UUID(int=self._share_rng.getrandbits(128), version=4))

    # ---------------------------------------------------------------- claims of a pod

    def _pod_claims(self, pod: Pod) -> list[ResourceClaim]:
        """foreachPodResourceClaim: raises ClaimNameError with upstream's texts."""
        out = []
        m = self.manager
        for ref in pod_claim_refs(pod):
            name, check_owner = pod_claim_name(pod, ref)
            if name is None:
                continue
            claim = m.get_claim(pod.namespace, name)
            if claim is None:
                raise ClaimNameError(f'could not find ResourceClaim "{pod.namespace}/{name}"')
            if claim.deletion_timestamp is not None:
                raise ClaimNameError(f'resourceclaim "{claim.name}" is being deleted')
            if check_owner:
                claim_is_for_pod(pod, claim)
            out.append(claim)
        return out

    # ---------------------------------------------------------------- SignPod

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """As upstream: a pod with claims is never signed (whether its claims are single-host is
        not simple to tell); any other pod's answers here do not depend on it."""
        if pod_has_claims(pod) or self._mapped(pod, self.manager.resolver()):
            return None, Status(Code.UNSCHEDULABLE, "pods with dra resource claims are not signable")
        return [], None

    # ---------------------------------------------------------------- PreEnqueue

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not pod_has_claims(pod):
            return None
        try:
            self._pod_claims(pod)
        except ClaimNameError as e:
            return Status.unresolvable(str(e), plugin=self.name)
        return None

    # ---------------------------------------------------------------- PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        m = self.manager
        resolver = m.resolver()
        has_claims = pod_has_claims(pod)
        if not has_claims and not self._mapped(pod, resolver):
            # Nothing to allocate (most pods): the shared empty state, which nothing writes to.
            state.write(STATE_KEY, _NO_CLAIMS)
            return None, _SKIP
        s = _State()
        state.write(STATE_KEY, s)
        claims: list[ResourceClaim] = []
        if has_claims:
            try:
                claims = self._pod_claims(pod)
            except ClaimNameError as e:
                return None, Status.unresolvable(str(e), plugin=self.name)
        if self._mapped(pod, resolver):
            s.resolver = resolver
            s.ext_requests = {k: v for k, v in pod_requests(pod).items() if v and is_dra_extended_resource_name(k)}
            ext = find_extended_resource_claim(pod, m.extended_claims_of(pod.namespace, pod.uid)) or \
                placeholder_claim(pod, self._new_uid())
            s.ext = len(claims)
            s.ext_initial_uid = ext.uid
            claims.append(ext)
        if not claims:
            return None, Status.skip()
        s.available_on = [None] * len(claims)
        to_allocate = 0
        for i, claim in enumerate(claims):
            if claim.allocation is not None:
                sel = claim.allocation.get("nodeSelector")
                if sel:
                    s.available_on[i] = NodeSelector.from_dict(sel)
                continue
            to_allocate += 1
            if m.has_pending(claim.uid):
                return None, Status.unresolvable(f"resource claim {claim.namespace}/{claim.name} is in the process "
                                                 "of being allocated", plugin=self.name)
            for r in claim.requests:
                if r.exactly is not None:
                    st = self._check_class(r.exactly.device_class_name, r.name)
                elif r.first_available:
                    st = None
                    for sub in r.first_available:
                        st = self._check_class(sub.device_class_name, f"{r.name}/{sub.name}")
                        if st is not None:
                            break
                else:
                    st = Status.unresolvable(f"resource claim {claim.namespace}/{claim.name}, request {r.name}: "
                                             "unknown request type", plugin=self.name)
                if st is not None:
                    return None, st
        s.claims = claims
        s.preemption = self.dra_preemption
        if to_allocate:
            s.allocator = Allocator(m.gather_allocated_state(), m.device_classes(), m.resource_slices(),
                                    self._new_share_id, timeout=self.filter_timeout, pool_cache=m.pool_cache)
        return None, None

    def _check_class(self, name: str, request: str) -> Status | None:
        if not name:
            return Status.as_error(f"request {request}: unsupported request type", self.name)
        if self.manager.get_class(name) is None:
            return Status.unresolvable(f"request {request}: device class {name} does not exist", plugin=self.name)
        return None

    # ---------------------------------------------------------------- Filter

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        s: _State | None = state.get(STATE_KEY)
        if s is None:
            return Status.as_error("not found", self.name)
        if not s.claims:
            return None
        node = node_info.node
        node_ext: ResourceClaim | None = None
        mappings: list[dict[str, str]] = []
        if s.ext >= 0:
            st, node_ext, mappings = self._filter_extended(s, pod, node_info)
            if st is not None:
                return st
            if node_ext is None and s.ext == 0:
                return None  # only extended resources, all from the node's allocatable
        unavailable = []
        for i, sel in enumerate(s.available_on):
            if sel is not None and (node is None or not sel.matches(node.name, node.labels)):
                unavailable.append(i)
                continue
            claim = s.claims[i]
            if claim.allocation is not None:
                # Binding failed (a failure condition) or timed out: PostFilter may deallocate it.
                try:
                    ready = claim_ready_for_binding(claim)
                except _BindError:
                    unavailable.append(i)
                    continue
                if not ready and self._claim_timed_out(claim):
                    unavailable.append(i)
        if s.allocator is not None:
            indices = [i for i in s.to_allocate() if i != s.ext or node_ext is not None]
            todo = [node_ext if i == s.ext and node_ext is not None else s.claims[i] for i in indices]
            try:
                got = s.allocator.allocate(node, todo) if todo else []
            except AllocatorTimeout as e:
                return Status.as_error(str(e), self.name)
            except FailedOnNode as e:
                return Status.unresolvable(str(e), plugin=self.name)
            except AllocatorError as e:
                return Status.as_error(str(e), self.name)
            if got is None or len(got) != len(todo):
                if s.preemption:
                    # Preempting pods that use devices of this node might free enough of them.
                    return Status.unschedulable("cannot allocate all claims", plugin=self.name)
                return Status.unresolvable("cannot allocate all claims", plugin=self.name)
            if not unavailable:
                s.node_allocations[node_info.name] = _NodeAllocation(indices, got, node_ext, mappings)
        if unavailable:
            s.unavailable.update(unavailable)
            return Status.unresolvable("resourceclaim not available on the node", plugin=self.name)
        return None

    def _filter_extended(self, s: _State, pod: Pod, node_info: NodeInfo
                         ) -> tuple[Status | None, ResourceClaim | None, list[dict[str, str]]]:
        """filterExtendedResources: the extended-resource claim with this node's requests (None
        when the node's allocatable covers them all, or the claim is allocated already)."""
        ext = s.claims[s.ext]
        if ext.requests:
            # Left by an earlier cycle: PostFilter deletes it and the pod is tried anew.
            return Status.unresolvable("cannot schedule extended resource claim", plugin=self.name), None, []
        resolver = s.resolver
        alloc = node_info.allocatable
        from_dra: list[str] = []
        for name in s.ext_requests:
            backed = resolver is not None and resolver.get(name) is not None
            if backed and alloc.get(name, 0) == 0:
                from_dra.append(name)
            elif name not in alloc:
                return Status.unresolvable("cannot fit resource", plugin=self.name), None, []
        if not from_dra or ext.allocation is not None or resolver is None:
            return None, None, []
        key = tuple(from_dra)
        hit = s.ext_variants.get(key)
        if hit is None:
            reqs, mappings = requests_and_mappings(pod, from_dra, resolver)
            hit = s.ext_variants[key] = (node_claim(ext, reqs), mappings)
        return None, hit[0], hit[1]

    # ---------------------------------------------------------------- PreFilterExtensions (DRAPreemption)

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self if self.dra_preemption else None

    def _used_claims(self, pod: Pod) -> list[ResourceClaim]:
        """The allocated claims a (victim) pod is among the users of."""
        out = []
        for ref in pod_claim_refs(pod):
            try:
                name, _ = pod_claim_name(pod, ref)
            except ClaimNameError:
                continue
            claim = self.manager.get_claim(pod.namespace, name) if name else None
            if claim is not None and claim.allocation is not None and claim.reserved_for_pod(pod.uid):
                out.append(claim)
        return out

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        """A victim leaves: a claim all of whose users are gone gives its devices back."""
        s: _State | None = state.get(STATE_KEY)
        if s is None or s.allocator is None:
            return None
        victim = pod_info_to_remove.pod
        for claim in self._used_claims(victim):
            removed = s.removed_users.setdefault(claim.uid, set())
            removed.add(victim.uid)
            users = [r for r in claim.reserved_for]
            if claim.uid in s.released or not all(
                    r.get("resource") == "pods" and not r.get("apiGroup") and r.get("uid") in removed for r in users):
                continue
            s.released.add(claim.uid)
            for did, share, consumed in claim_contribution(claim):
                s.allocator.allocated.remove_result(*did, share, consumed)
        return None

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_add: PodInfo,
                node_info: NodeInfo) -> Status | None:
        """The inverse of :meth:`remove_pod` (a victim put back; nominated pods change nothing)."""
        s: _State | None = state.get(STATE_KEY)
        if s is None or s.allocator is None:
            return None
        pod = pod_info_to_add.pod
        for claim in self._used_claims(pod):
            removed = s.removed_users.get(claim.uid)
            if removed is None or pod.uid not in removed:
                continue
            removed.discard(pod.uid)
            if not removed:
                del s.removed_users[claim.uid]
            if claim.uid in s.released:
                s.released.discard(claim.uid)
                for did, share, consumed in claim_contribution(claim):
                    s.allocator.allocated.add_result(*did, share, consumed)
        return None

    # ---------------------------------------------------------------- PostFilter

    def post_filter(self, state: CycleState, pod: Pod,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        s: _State | None = state.get(STATE_KEY)
        if s is None:
            return None, Status.as_error("not found", self.name)
        if not s.claims:
            return None, Status.unschedulable("no new claims to deallocate", plugin=self.name)
        cands = sorted(s.unavailable)
        rng = self._rng()
        if rng is not None and len(cands) > 1:
            rng.shuffle(cands)
        ext = s.claims[s.ext] if s.ext >= 0 else None
        for i in cands:
            claim = s.claims[i]
            if i == s.ext:
                if not is_special_claim(claim):
                    break  # deleted below
                continue
            rf = claim.reserved_for
            if not rf or (len(rf) == 1 and rf[0].get("uid") == pod.uid):
                raw = claim.deepcopy_raw()
                st = raw.setdefault("status", {})
                for k in ("reservedFor", "allocation", "devices"):
                    st.pop(k, None)
                try:
                    self.handle.client.update_status(raw)
                except ApiError as e:
                    return None, Status.as_error(e, self.name)
                return None, Status.unschedulable("deallocation of ResourceClaim completed", plugin=self.name)
        if ext is not None and not is_special_claim(ext):
            # Reserved or allocated in an earlier cycle: deleted, and the pod is tried anew.
            try:
                self._delete_claim(ext)
            except ApiError as e:
                return None, Status.as_error(e, self.name)
            return None, Status.unschedulable("deletion of ResourceClaim completed", plugin=self.name)
        return None, Status.unschedulable("still not schedulable", plugin=self.name)

    def _delete_claim(self, claim: ResourceClaim) -> None:
        """deleteClaim: the finalizer off (retried on conflicts with a fresh read), then delete."""
        client = self.handle.client
        cur: Any = claim
        for attempt in range(5):
            if attempt:
                try:
                    cur = client.get("ResourceClaim", claim.namespace, claim.name)
                except ApiError as e:
                    if getattr(e, "code", 0) == 404:
                        return
                    raise
            if FINALIZER_DELETE_PROTECTION not in cur.finalizers:
                break
            raw = cur.deepcopy_raw()
            raw["metadata"]["finalizers"] = [f for f in cur.finalizers if f != FINALIZER_DELETE_PROTECTION]
            try:
                client.update(raw)
                break
            except Conflict:
                if attempt == 4:
                    raise
            except ApiError as e:
                if getattr(e, "code", 0) == 404:
                    return
                raise
        try:
            client.delete("ResourceClaim", claim.namespace, claim.name)
        except ApiError as e:
            if getattr(e, "code", 0) != 404:
                raise

    # ---------------------------------------------------------------- Score

    def _node_score(self, s: _State, node_name: str) -> int:
        alloc_of: dict[int, dict[str, Any]] = {}
        cached = s.node_allocations.get(node_name)
        todo = s.to_allocate()
        if todo and cached is None:
            return 0
        if cached is not None:
            for i, a in zip(cached.indices, cached.results, strict=True):
                alloc_of[i] = a
        refs: set[str] = set()
        for i, claim in enumerate(s.claims):
            alloc = claim.allocation if claim.allocation is not None else alloc_of.get(i)
            for r in ((alloc or {}).get("devices") or {}).get("results") or ():
                refs.add(r.get("request", ""))
        score = 0
        for claim in s.claims:
            for r in claim.requests:
                if not r.first_available:
                    continue
                for idx, sub in enumerate(r.first_available):
                    if f"{r.name}/{sub.name}" in refs:
                        score += 8 - idx
                        break
        return score

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        s: _State | None = state.get(STATE_KEY)
        if s is None or not s.claims:
            return 0, None
        return self._node_score(s, node_info.name), None

    def scores_zero(self, state: CycleState, pod: Pod) -> bool:
        """No claims: 0 on every node (and NormalizeScore keeps all zeros)."""
        s: _State | None = state.get(STATE_KEY)
        return s is None or not s.claims

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        s: _State | None = state.get(STATE_KEY)
        out = np.zeros(len(rows), dtype=np.int64)
        if s is None or not s.claims:
            return out
        infos = snapshot.infos
        for k, r in enumerate(rows.tolist()):
            out[k] = self._node_score(s, infos[r].name)
        return out

    def normalize_score(self, state: CycleState, pod: Pod, nodes: NodeList, scores: np.ndarray) -> Status | None:
        if len(scores) == 0:
            return None
        mx = int(scores.max())
        if mx == 0:
            return None
        scores[:] = scores * MAX_SCORE // mx
        return None

    # ---------------------------------------------------------------- Reserve

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        s: _State | None = state.get(STATE_KEY)
        if s is None:
            return Status.as_error("not found", self.name)
        todo = s.to_allocate()
        if not s.claims or not todo or s.allocator is None:
            return None
        na = s.node_allocations.get(node_name)
        if na is None or not na.results:
            if all(i == s.ext for i in todo):
                return None  # the extended resources come from the node's allocatable
            return Status.as_error("claim allocation not found for node", self.name)
        want = len([i for i in todo if i != s.ext or na.ext_claim is not None])
        if len(na.results) != len(na.indices) or len(na.results) != want:
            return Status.as_error(f"internal error, have {len(na.results)} allocations, {len(na.indices)} claims "
                                   f"to allocate, want {want} claims", self.name)
        m = self.manager
        for i, alloc in zip(na.indices, na.results, strict=True):
            s.allocations[i] = alloc
            claim = na.ext_claim if i == s.ext and na.ext_claim is not None else s.claims[i]
            m.signal_pending(claim, alloc)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        s: _State | None = state.get(STATE_KEY)
        if s is None or not s.claims:
            return
        m = self.manager
        for i in list(s.allocations):
            m.remove_pending(s.ext_initial_uid if i == s.ext else s.claims[i].uid)
        s.allocations.clear()
        for i, claim in enumerate(s.claims):
            if i == s.ext:
                if not is_special_claim(claim):
                    # Created in PreBind: deleted, so no orphan holds the devices.
                    try:
                        self._delete_claim(claim)
                    except ApiError as e:
                        log.debug("deleting extended resource claim %s: %s", claim.key, e)
                continue
            cur = m.get_claim(claim.namespace, claim.name)
            if cur is None or not cur.reserved_for_pod(pod.uid):
                continue
            try:
                self.handle.client.patch("ResourceClaim", cur.namespace, cur.name,
                                         {"metadata": {"uid": cur.uid},
                                          "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]}},
                                         "application/strategic-merge-patch+json", "status")
            except ApiError:
                continue

    # ---------------------------------------------------------------- PreBind

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        s: _State | None = state.get(STATE_KEY)
        if s is None or not s.claims:
            return Status.skip()
        return None

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        s: _State | None = state.get(STATE_KEY)
        if s is None or not s.claims:
            return None
        if not s.bound:
            st = self._bind_claims(s, pod, node_name)
            if st is not None:
                return st
            s.bound = True
        return self._wait_for_binding_conditions(s, pod, node_name)

    def _wait_for_binding_conditions(self, s: _State, pod: Pod, node_name: str) -> Status | None:
        """PreBind's wait (DRADeviceBindingConditions): until every binding condition of the
        allocated devices is True in the claims' device statuses; a True failure condition or
        the binding timeout fails the binding cycle (a later Filter finds the claim unavailable
        and PostFilter deallocates it). Polled every 5 s of the cluster's clock."""
        if not any(r.get("bindingConditions") for c in s.claims for r in c.results):
            return None
        now = self.handle.clock.now()
        if s.wait_start is None:
            s.wait_start = now
            rec = getattr(self.handle, "event_recorder", None)
            if rec is not None:
                rec.event(pod, "Normal", "BindingConditionsPending", "Scheduling",
                          f"waiting for binding conditions for device on node {node_name}")
        m = self.manager
        ready = True
        for i, c in enumerate(s.claims):
            cur = m.get_claim(c.namespace, c.name)
            if cur is None:
                return Status.as_error(f'could not find ResourceClaim "{c.namespace}/{c.name}"', self.name)
            s.claims[i] = cur
            try:
                ok = claim_ready_for_binding(cur)
            except _BindError as e:
                return Status.as_error(str(e), self.name)
            if not ok:
                if self._claim_timed_out(cur):
                    return Status.as_error(f"claim {cur.name} binding timeout", self.name)
                ready = False
        if ready:
            return None
        deadline = s.wait_start + self.binding_timeout
        if now >= deadline:
            return Status.as_error("device binding timeout", self.name)
        return WaitUntil(min(now + BINDING_POLL_SECONDS, deadline), "waiting for binding conditions",
                         plugin=self.name)

    def _claim_timed_out(self, claim: ResourceClaim) -> bool:
        """isClaimTimeout: allocated with binding conditions longer than the binding timeout ago."""
        alloc = claim.allocation
        ts = parse_time(alloc.get("allocationTimestamp")) if alloc else None
        if ts is None or not any(r.get("bindingConditions") for r in claim.results):
            return False
        return ts + self.binding_timeout < self.handle.clock.now()

    def _bind_claims(self, s: _State, pod: Pod, node_name: str) -> Status | None:
        for i, claim in enumerate(s.claims):
            if claim.reserved_for_pod(pod.uid):
                continue
            try:
                if i == s.ext:
                    if i not in s.allocations:
                        continue  # the node's allocatable has the extended resources
                    if is_special_claim(claim):
                        claim = self._create_extended_claim(s, claim.uid, node_name)
                        s.claims[i] = claim
                    s.claims[i] = self._bind_claim(claim, s.allocations.get(i), pod, s.ext_initial_uid)
                    self._patch_extended_status(s, pod, node_name)
                else:
                    s.claims[i] = self._bind_claim(claim, s.allocations.get(i), pod)
            except (ApiError, _BindError) as e:
                return Status.as_error(str(e), self.name)
        return None

    def _create_extended_claim(self, s: _State, uid: str, node_name: str) -> ResourceClaim:
        na = s.node_allocations.get(node_name)
        if na is None or na.ext_claim is None:
            raise _BindError(f"extended resource claim not found for node {node_name}")
        raw = na.ext_claim.deepcopy_raw()
        md = raw["metadata"]
        md.pop("name", None)
        md.pop("uid", None)
        raw.pop("status", None)
        try:
            created = self.handle.client.create(raw)
        except ApiError as e:
            raise _BindError(f"create claim for extended resources {md.get('namespace', '')}/: {e.message}") \
                from None
        if not isinstance(created, ResourceClaim):
            raise _BindError("create claim for extended resources: not a ResourceClaim")
        return created

    def _patch_extended_status(self, s: _State, pod: Pod, node_name: str) -> None:
        na = s.node_allocations.get(node_name)
        mappings = na.mappings if na is not None else []
        if not mappings:
            raise _BindError(f"nil or empty request mappings, no update of pod {pod.namespace}/{pod.name} "
                             "ExtendedResourceClaimStatus")
        status = {"requestMappings": mappings, "resourceClaimName": s.claims[s.ext].name}
        try:
            self.handle.client.patch("Pod", pod.namespace, pod.name,
                                     {"status": {"extendedResourceClaimStatus": status}},
                                     "application/strategic-merge-patch+json", "status")
        except ApiError as e:
            raise _BindError(f"update pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus: {e.message}") \
                from None

    def _bind_claim(self, claim: ResourceClaim, allocation: dict[str, Any] | None, pod: Pod,
                    pending_uid: str = "") -> ResourceClaim:
        client = self.handle.client
        m = self.manager
        try:
            for attempt in range(5):
                try:
                    cur = client.get("ResourceClaim", claim.namespace, claim.name)
                except ApiError as e:
                    if getattr(e, "code", 0) == 404:
                        raise _BindError(f"claim {claim.namespace}/{claim.name} got deleted in the meantime") \
                            from None
                    raise
                if not isinstance(cur, ResourceClaim) or cur.uid != claim.uid:
                    raise _BindError(f"claim {claim.namespace}/{claim.name} got deleted in the meantime")
                if allocation is not None and cur.allocation is not None:
                    raise _BindError(f"claim {claim.namespace}/{claim.name} got allocated elsewhere in the meantime")
                if allocation is None and cur.allocation is None:
                    raise _BindError(f"claim {claim.namespace}/{claim.name} got deallocated elsewhere in the meantime")
                try:
                    if allocation is not None and FINALIZER_DELETE_PROTECTION not in cur.finalizers:
                        raw = cur.deepcopy_raw()
                        raw.setdefault("metadata", {}).setdefault("finalizers", []).append(
                            FINALIZER_DELETE_PROTECTION)
                        cur = client.update(raw)
                    raw = cur.deepcopy_raw()
                    st = raw.setdefault("status", {})
                    if allocation is not None:
                        st["allocation"] = dict(allocation)
                    clock = getattr(self.handle, "clock", None)
                    if st.get("allocation") and not st["allocation"].get("allocationTimestamp") and clock is not None:
                        # DRADeviceBindingConditions with DRAResourceClaimDeviceStatus: when the
                        # binding timeout starts.
                        st["allocation"] = {**st["allocation"], "allocationTimestamp": format_time(clock.now())}
                    st.setdefault("reservedFor", []).append(
                        {"resource": "pods", "name": pod.name, "uid": pod.uid})
                    updated = client.update_status(raw)
                except Conflict:
                    if attempt == 4:
                        raise
                    continue
                if isinstance(updated, ResourceClaim):
                    m.assume(updated)
                    return updated
                return cur
        finally:
            m.remove_pending(pending_uid or claim.uid, force=True)
        raise _BindError(f"claim {claim.namespace}/{claim.name}: no update")

    # ---------------------------------------------------------------- events

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL
                                              | ActionType.UPDATE_NODE_ALLOCATABLE)),
            ClusterEventWithHint(ClusterEvent(EventResource.RESOURCE_CLAIM, ActionType.ADD | ActionType.UPDATE),
                                 self._after_claim_change),
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM),
                                 self._after_pod_change),
            ClusterEventWithHint(ClusterEvent(EventResource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE)),
            ClusterEventWithHint(ClusterEvent(EventResource.RESOURCE_SLICE, ActionType.ADD | ActionType.UPDATE)),
        ]

    def _after_claim_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """isSchedulableAfterClaimChange."""
        if not isinstance(new, ResourceClaim):
            return QueueingHint.QUEUE
        try:
            uses = any(c.uid == new.uid for c in self._pod_claims(pod))
        except ClaimNameError:
            return QueueingHint.QUEUE_SKIP
        if isinstance(old, ResourceClaim) and old.allocation is not None and new.allocation is None:
            return QueueingHint.QUEUE
        if not uses:
            return QueueingHint.QUEUE_SKIP
        if old is None:
            return QueueingHint.QUEUE
        if (old.raw.get("status") or {}) == (new.raw.get("status") or {}):
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE

    def _after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """isSchedulableAfterPodChange."""
        if not isinstance(new, Pod) or new.uid != pod.uid:
            return QueueingHint.QUEUE_SKIP
        try:
            self._pod_claims(new)
        except ClaimNameError:
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE


class _BindError(Exception):
    pass


def _condition(conds: Any, ctype: str) -> dict[str, Any] | None:
    for c in conds or ():
        if (c or {}).get("type") == ctype:
            return c  # type: ignore[no-any-return]
    return None


def claim_ready_for_binding(claim: ResourceClaim) -> bool:
    """isClaimReadyForBinding: every binding condition of its devices True in
    ``status.devices`` (no binding conditions: ready); raises _BindError when a binding failure
    condition is True."""
    if claim.allocation is None:
        return False
    for r in claim.results:
        if not r.get("bindingConditions"):
            continue
        ds = next((d for d in claim.device_statuses
                   if (d.get("driver"), d.get("pool"), d.get("device")) == (r.get("driver"), r.get("pool"),
                                                                             r.get("device"))), None)
        if ds is None:
            return False
        conds = ds.get("conditions")
        for ft in r.get("bindingFailureConditions") or ():
            c = _condition(conds, ft)
            if c is not None and c.get("status") == "True":
                raise _BindError(f'claim {claim.name} binding failed: reason={c.get("reason", "")}, '
                                 f'message="{c.get("message", "")}"')
        for bt in r["bindingConditions"]:
            c = _condition(conds, bt)
            if c is None or c.get("status") != "True":
                return False
    return True
