"""The structured-parameters allocator: which devices of which ResourceSlices satisfy a pod's
ResourceClaims on one node, as the *incubating* allocator of
``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/incubating/``
(``allocator_incubating.go``, ``pools_incubating.go``) does with 1.36's default gates
(AdminAccess, PrioritizedList, PartitionableDevices, DeviceTaints, ConsumableCapacity,
DeviceBindingAndStatus).

:class:`Allocator` is built once per scheduling cycle (PreFilter) from the allocated state, the
DeviceClasses and the slices; :meth:`Allocator.allocate` runs per node (Filter): it gathers the
node's pools, validates the claims and searches depth first for the **first** complete
solution (claims in order, requests in order, device slots; candidates in pool, slice, device
order; a slot resumes after the device the previous slot of the same request took;
``firstAvailable`` subrequests in order). Nothing is scored.

It returns the ``status.allocation`` of each claim (results with request, driver, pool, device,
adminAccess, tolerations, shareID, consumedCapacity, binding conditions; configs FromClass then
FromClaim; the node selector), or None when the claims cannot be allocated on the node.
:class:`AllocatorError` is fatal (Filter returns Error); :class:`FailedOnNode` is upstream's
``ErrFailedAllocationOnNode`` (UnschedulableAndUnresolvable).

Known divergences: share IDs come from a caller-supplied generator (the plugin's seeded random
source, so a simulation is deterministic) rather than random UUIDs; the filter timeout is
measured in wall-clock time every 256 candidates; device taint rules (DeviceTaintRule, off by
default) and list-typed attributes (off by default) do not exist here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ksched.api.dracel import CelError, compile_selector, device_value
from ksched.api.resource import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    EFFECT_NO_EXECUTE,
    EFFECT_NO_SCHEDULE,
    Capacity,
    Device,
    DeviceClass,
    DeviceSubRequest,
    ResourceClaim,
    ResourceSlice,
    qualified,
)

__all__ = [
    "AllocatedState",
    "Allocator",
    "AllocatorError",
    "AllocatorTimeout",
    "DeviceID",
    "FailedOnNode",
    "consumed_capacity",
]

DeviceID = tuple[str, str, str]  # driver, pool, device
MAX_RESULTS_PER_CLAIM = 32


class AllocatorError(Exception):
    """A fatal error: the claim or a class is broken (Filter returns Error)."""


class FailedOnNode(AllocatorError):
    """upstream ErrFailedAllocationOnNode: not an error of the pod, but this node cannot do it."""


class AllocatorTimeout(AllocatorError):
    """The filter timeout passed."""


def device_id_str(d: DeviceID) -> str:
    return f"{d[0]}/{d[1]}/{d[2]}"


@dataclass(slots=True)
class AllocatedState:
    """What is in use (``PL/allocateddevices.go``): dedicated devices, (device, shareID) pairs,
    and the capacity consumed per multi-allocation device (nano-units per qualified name)."""

    devices: set[DeviceID] = field(default_factory=set)
    shared: set[tuple[DeviceID, str]] = field(default_factory=set)
    capacity: dict[DeviceID, dict[str, int]] = field(default_factory=dict)

    def is_allocated(self, d: DeviceID) -> bool:
        """``AL/internal/allocatedstate.go IsDeviceAllocated``."""
        if d in self.devices or d in self.capacity:
            return True
        return any(s[0] == d for s in self.shared)

    def add_result(self, driver: str, pool: str, device: str, share_id: str, consumed: dict[str, int]) -> None:
        d = (driver, pool, device)
        if share_id:
            self.shared.add((d, share_id))
            caps = self.capacity.setdefault(d, {})
            for k, v in consumed.items():
                caps[k] = caps.get(k, 0) + v
        else:
            self.devices.add(d)

    def remove_result(self, driver: str, pool: str, device: str, share_id: str, consumed: dict[str, int]) -> None:
        """The inverse of :meth:`add_result` (a preemption dry run freeing a victim's claim)."""
        d = (driver, pool, device)
        if not share_id:
            self.devices.discard(d)
            return
        self.shared.discard((d, share_id))
        caps = self.capacity.get(d)
        if caps is None:
            return
        for k, v in consumed.items():
            left = caps.get(k, 0) - v
            if left > 0:
                caps[k] = left
            else:
                caps.pop(k, None)
        if not caps and not any(s[0] == d for s in self.shared):
            del self.capacity[d]

    def copy(self) -> AllocatedState:
        return AllocatedState(set(self.devices), set(self.shared), {k: dict(v) for k, v in self.capacity.items()})


def consumed_capacity(cap: Capacity, requested: int | None) -> int:
    """How much of a capacity one allocation consumes (upstream's calculateConsumedCapacity):
    the policy default (or the full value) without a request, else the request rounded up as the
    requestPolicy says."""
    if requested is None:
        return cap.default if cap.default is not None else cap.value
    if not cap.has_policy:
        return requested
    if cap.valid_range is not None:
        lo, _hi, step = cap.valid_range
        if requested < lo:
            return lo
        if step:
            return lo + -(-(requested - lo) // step) * step
        return requested
    if cap.valid_values:
        for v in cap.valid_values:
            if v >= requested:
                return v
        return requested
    return requested


def _violates_policy(cap: Capacity, consumed: int) -> bool:
    if not cap.has_policy:
        return False
    if cap.default is not None and consumed == cap.default:
        return False
    if cap.valid_range is not None:
        lo, hi, step = cap.valid_range
        if hi is not None and consumed > hi:
            return True
        return bool(step and (consumed - lo) % step)
    if cap.valid_values:
        return consumed not in cap.valid_values
    return False


@dataclass(slots=True)
class _Candidate:
    slice: ResourceSlice
    device: Device
    id: DeviceID
    node_match: bool  # the device may be used on this node (else only counts for counters)


@dataclass(slots=True)
class _Pool:
    driver: str
    name: str
    slices: list[ResourceSlice]
    candidates: list[_Candidate]
    counter_sets: dict[str, dict[str, int]]
    invalid: str = ""
    incomplete: bool = False
    binding: bool = False


@dataclass(slots=True)
class _Req:
    """One request or subrequest of a claim as the search sees it."""

    ref: str  # "req" or "req/sub"
    parent: str
    sub: DeviceSubRequest
    cls: DeviceClass | None
    count: int
    all_devices: list[_Candidate] | None = None
    index: int = 0  # position among the subrequests (for firstAvailable)


@dataclass(slots=True)
class _ClaimData:
    claim: ResourceClaim
    requests: list[list[_Req]]  # per request: [exactly] or the firstAvailable alternatives
    constraints: list[_Constraint]
    results: list[dict[str, Any]] = field(default_factory=list)
    chosen: list[_Req | None] = field(default_factory=list)


class _Constraint:
    __slots__ = ("attribute", "devices", "distinct", "requests", "values")

    def __init__(self, requests: tuple[str, ...], attribute: str, distinct: bool) -> None:
        self.requests = requests
        self.attribute = attribute
        self.distinct = distinct
        self.values: list[Any] = []
        self.devices: list[DeviceID] = []

    def applies(self, ref: str) -> bool:
        if not self.requests:
            return True
        parent = ref.split("/", 1)[0]
        return ref in self.requests or parent in self.requests

    def add(self, ref: str, dev: Device, did: DeviceID) -> bool:
        if not self.applies(ref):
            return True
        v = dev.attributes.get(self.attribute, _MISSING)
        if v is _MISSING:
            return False
        if self.distinct:
            if any(_same_attr(v, x) for x in self.values):
                return False
        elif self.values and not _same_attr(v, self.values[0]):
            return False
        self.values.append(v)
        self.devices.append(did)
        return True

    def remove(self, ref: str, did: DeviceID) -> None:
        if not self.applies(ref):
            return
        for i in range(len(self.devices) - 1, -1, -1):
            if self.devices[i] == did:
                del self.devices[i]
                del self.values[i]
                return


_MISSING = object()


def _same_attr(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _node_matches_device(slice_: ResourceSlice, dev: Device, node: Any) -> bool:
    if not slice_.per_device_node_selection:
        return True
    if dev.all_nodes:
        return True
    if dev.node_name:
        return node is not None and dev.node_name == node.name
    if dev.node_selector is not None:
        return node is not None and dev.node_selector.matches(node.name, node.labels)
    return False


def _slice_targets_node(s: ResourceSlice, node: Any) -> bool:
    if s.node_name:
        return node is not None and s.node_name == node.name
    if s.all_nodes:
        return True
    if s.node_selector is not None:
        return node is not None and s.node_selector.matches(node.name, node.labels)
    if s.per_device_node_selection:
        return any(_node_matches_device(s, d, node) for d in s.devices)
    return False


class Allocator:
    """One scheduling cycle's allocator over a fixed view of the cluster."""

    def __init__(self, allocated: AllocatedState, classes: dict[str, DeviceClass], slices: Iterable[ResourceSlice],
                 new_share_id: Callable[[], str], *, timeout: float = 0.0,
                 pool_cache: dict[str, tuple[Any, list[ResourceSlice], list[_Pool]]] | None = None) -> None:
        self.allocated = allocated
        # A node's pools built from the same slice objects (and node object) in an earlier cycle
        # are the same pools: the scheduler's DRA manager keeps them across cycles.
        self.pool_cache = pool_cache
        self.classes = classes
        self.new_share_id = new_share_id
        self.timeout = timeout
        self.per_node: dict[str, list[ResourceSlice]] = {}
        self.shared: list[ResourceSlice] = []
        self.by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
        for s in slices:
            if s.node_name and not s.shared_counters:
                self.per_node.setdefault(s.node_name, []).append(s)
            else:
                self.shared.append(s)
            self.by_pool.setdefault((s.driver, s.pool_name), []).append(s)
        # (device object id, request key) -> selectable; CEL results are also kept per device.
        self._sel_cache: dict[tuple[int, int], bool] = {}

    # ---------------------------------------------------------------- pools

    def _pools(self, node: Any) -> list[_Pool]:
        key = node.name if node is not None else ""
        cands = [*self.per_node.get(key, ()), *self.shared]
        cache = self.pool_cache
        if cache is not None:
            hit = cache.get(key)
            if hit is not None and hit[0] is node and len(hit[1]) == len(cands) \
                    and all(a is b for a, b in zip(hit[1], cands, strict=True)):
                return hit[2]
        pools, local = self._build_pools(node, cands)
        if cache is not None and local:
            cache[key] = (node, cands, pools)
        return pools

    def _build_pools(self, node: Any, cands: list[ResourceSlice]) -> tuple[list[_Pool], bool]:
        """The node's pools, and whether they depend on ``cands`` alone (no pool needed slices
        of other nodes to be judged complete or obsolete)."""
        local = True
        relevant: dict[tuple[str, str], list[ResourceSlice]] = {}
        for s in cands:
            if s.shared_counters or _slice_targets_node(s, node):
                relevant.setdefault((s.driver, s.pool_name), []).append(s)
        pools: list[_Pool] = []
        for (driver, pname), sl in relevant.items():
            gen = max(s.pool_generation for s in sl)
            sl = [s for s in sl if s.pool_generation == gen]
            count = sl[0].resource_slice_count
            if len(sl) == count and all(s.resource_slice_count == count for s in sl):
                members = sl
            else:
                local = False
                everyone = self.by_pool.get((driver, pname), [])
                if any(s.pool_generation > gen for s in everyone):
                    continue  # obsolete
                members = [s for s in everyone if s.pool_generation == gen]
                if len(members) != count:
                    pools.append(_Pool(driver, pname, members, [], {}, incomplete=True))
                    continue
            pools.append(self._build_pool(driver, pname, members, node))
        pools.sort(key=lambda p: (p.binding, p.driver, p.name))
        return pools, local

    def _build_pool(self, driver: str, pname: str, members: list[ResourceSlice], node: Any) -> _Pool:
        members = sorted(members, key=lambda s: s.name)
        pool = _Pool(driver, pname, members, [], {})
        names: set[str] = set()
        for s in members:
            for cs, counters in s.shared_counters.items():
                if cs in pool.counter_sets:
                    pool.invalid = f"duplicate counter set name {cs}"
                pool.counter_sets[cs] = counters
        for s in members:
            targets = bool(s.node_name or s.all_nodes or s.node_selector is not None or s.per_device_node_selection) \
                and _slice_targets_node(s, node)
            for d in s.devices:
                if d.name in names:
                    pool.invalid = f"duplicate device name {d.name}"
                names.add(d.name)
                pool.candidates.append(_Candidate(s, d, (driver, pname, d.name),
                                                  targets and _node_matches_device(s, d, node)))
                if d.binding_conditions:
                    pool.binding = True
        for c in pool.candidates:
            for cs, counters in c.device.consumes_counters:
                have = pool.counter_sets.get(cs)
                if have is None or any(n not in have for n in counters):
                    pool.invalid = f"device {c.device.name} consumes counters of an unknown counter set"
        return pool

    # ---------------------------------------------------------------- selection

    def _class_selectors(self, req: _Req) -> tuple[str, ...]:
        return req.cls.selectors if req.cls is not None else ()

    def _selectable(self, cand: _Candidate, req: _Req, claim: ResourceClaim) -> bool:
        key = (id(cand.device), id(req.sub))
        hit = self._sel_cache.get(key)
        if hit is not None:
            return hit
        ok = cand.node_match and self._matches(cand, req, claim)
        self._sel_cache[key] = ok
        return ok

    def _matches(self, cand: _Candidate, req: _Req, claim: ResourceClaim) -> bool:
        for where, sels in ((f"class {req.sub.device_class_name}", self._class_selectors(req)),
                            (f"claim {claim.namespace}/{claim.name}", req.sub.selectors)):
            for i, expr in enumerate(sels):
                if not expr:
                    raise AllocatorError(f"{where}: selector #{i}: CEL expression empty (unsupported selector type?)")
                if not _eval(expr, cand, where, i):
                    return False
        return True

    def _capacity_use(self, cand: _Candidate, req: _Req) -> dict[str, int] | None:
        """The capacity this allocation would consume (qualified name -> nano-units), or None
        when the device cannot give it."""
        dev = cand.device
        requests: dict[str, int] = {}
        for k, v in (req.sub.capacity_requests or {}).items():
            requests[qualified(k, cand.id[0])] = v
        for k in requests:
            if k not in dev.capacity:
                return None
        out: dict[str, int] = {}
        for k, cap in dev.capacity.items():
            c = consumed_capacity(cap, requests.get(k))
            if _violates_policy(cap, c):
                return None
            out[k] = c
        return out

    def _capacity_fits(self, cand: _Candidate, use: dict[str, int]) -> bool:
        dev = cand.device
        if not dev.allow_multiple_allocations:
            return all(use[k] <= cap.value for k, cap in dev.capacity.items())
        have = self.allocated.capacity.get(cand.id, {})
        pending = self._attempt_capacity.get(cand.id, {})
        for k, cap in dev.capacity.items():
            if have.get(k, 0) + pending.get(k, 0) + use[k] > cap.value:
                return False
        return True

    # ---------------------------------------------------------------- allocate

    def allocate(self, node: Any, claims: list[ResourceClaim]) -> list[dict[str, Any]] | None:
        """The allocation of each claim on ``node`` (None: not possible there)."""
        self._deadline = time.monotonic() + self.timeout if self.timeout > 0 else 0.0
        self._steps = 0
        self._node = node
        pools = self._pools(node)
        self._pools_list = pools
        self._invalid_seen = any(p.invalid for p in pools)
        data = [self._claim_data(c, pools) for c in claims]
        self._data = data
        self._allocating: set[DeviceID] = set()
        self._allocating_admin: dict[int, set[DeviceID]] = {}
        self._attempt_capacity: dict[DeviceID, dict[str, int]] = {}
        self._attempt_counters: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
        self._available_counters: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
        ok = self._allocate_one(0, 0, 0, None, 0)
        if not ok:
            if self._invalid_seen:
                raise FailedOnNode("invalid resource pools were encountered")
            return None
        return [self._result(cd, node) for cd in data]

    def _claim_data(self, claim: ResourceClaim, pools: list[_Pool]) -> _ClaimData:
        cname = f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name
        reqs: list[list[_Req]] = []
        min_total = 0
        for r in claim.requests:
            alts = [r.exactly] if r.exactly is not None else list(r.first_available)
            if not alts:
                raise AllocatorError(f"claim {cname}, request {r.name}: missing device class name (unsupported "
                                     "request type?)")
            out = []
            for i, sub in enumerate(alts):
                ref = r.name if r.exactly is not None else f"{r.name}/{sub.name}"
                if not sub.device_class_name:
                    raise AllocatorError(f"claim {cname}, request {ref}: missing device class name (unsupported "
                                         "request type?)")
                cls = self.classes.get(sub.device_class_name)
                if cls is None:
                    raise AllocatorError(f"claim {cname}, request {ref}: could not retrieve device class "
                                         f"{sub.device_class_name}: deviceclass.resource.k8s.io "
                                         f'"{sub.device_class_name}" not found')
                req = _Req(ref, r.name, sub, cls, sub.count, index=i)
                if sub.allocation_mode == ALLOCATION_MODE_ALL:
                    req.all_devices = self._all_devices(req, claim, pools, cname)
                    req.count = len(req.all_devices)
                elif sub.allocation_mode != ALLOCATION_MODE_EXACT_COUNT:
                    raise AllocatorError(f"claim {cname}, request {ref}: unsupported count mode "
                                         f"{sub.allocation_mode}")
                out.append(req)
            min_total += min(q.count for q in out)
            reqs.append(out)
        if min_total > MAX_RESULTS_PER_CLAIM:
            raise AllocatorError(f"claim {cname}: number of requested devices {min_total} exceeds the claim limit of "
                                 f"{MAX_RESULTS_PER_CLAIM}")
        constraints = []
        for i, c in enumerate(claim.constraints):
            if c.match_attribute:
                constraints.append(_Constraint(c.requests, c.match_attribute, False))
            elif c.distinct_attribute:
                constraints.append(_Constraint(c.requests, c.distinct_attribute, True))
            else:
                raise AllocatorError(f"claim {cname}, constraint #{i}: empty constraint (unsupported constraint "
                                     "type?)")
        return _ClaimData(claim, reqs, constraints, [], [None] * len(reqs))

    def _all_devices(self, req: _Req, claim: ResourceClaim, pools: list[_Pool], cname: str) -> list[_Candidate]:
        out: list[_Candidate] = []
        for p in pools:
            if p.incomplete:
                raise AllocatorError(f"claim {cname}, request {req.ref}: asks for all devices, but resource pool "
                                     f"{p.driver}/{p.name} is currently being updated")
            if p.invalid:
                raise AllocatorError(f"claim {cname}, request {req.ref}: asks for all devices, but resource pool "
                                     f"{p.driver}/{p.name} is currently invalid")
            for c in p.candidates:
                if not self._selectable(c, req, claim):
                    continue
                if self._capacity_use(c, req) is None:
                    continue
                out.append(c)
        return out

    def _tick(self) -> None:
        self._steps += 1
        if self._deadline and self._steps & 255 == 0 and time.monotonic() > self._deadline:
            node = self._node.name if self._node is not None else ""
            raise AllocatorTimeout(f"node {node}: timed out trying to allocate devices")

    def _allocate_one(self, ci: int, ri: int, di: int, req: _Req | None, resume: int) -> bool:
        """Allocate device slot ``di`` of request ``ri`` of claim ``ci`` (``req``: the chosen
        alternative once picked), then everything after it. ``resume``: the flat candidate
        index to scan from (after the previous slot's device)."""
        self._tick()
        if ci >= len(self._data):
            return True
        cd = self._data[ci]
        if ri >= len(cd.requests):
            return self._allocate_one(ci + 1, 0, 0, None, 0)
        if req is None:
            alts = cd.requests[ri]
            for alt in alts:
                if alt.count == 0 and alt.all_devices is not None:
                    continue  # All with no devices: this alternative fails
                if len(cd.results) + alt.count > MAX_RESULTS_PER_CLAIM:
                    continue
                cd.chosen[ri] = alt
                if self._allocate_one(ci, ri, 0, alt, 0):
                    return True
                cd.chosen[ri] = None
            return False
        if di >= req.count:
            return self._allocate_one(ci, ri + 1, 0, None, 0)
        if req.all_devices is not None:
            cand = req.all_devices[di]
            if not self._usable(cand, req, ci):
                return False
            undo = self._allocate_device(cd, ci, req, cand, must=True)
            if undo is None:
                return False
            if self._allocate_one(ci, ri, di + 1, req, 0):
                return True
            undo()
            return False
        flat = self._flat()
        for k in range(resume, len(flat)):
            self._tick()
            pool, cand = flat[k]
            if pool.incomplete or pool.invalid:
                continue
            if not self._usable(cand, req, ci):
                continue
            undo = self._allocate_device(cd, ci, req, cand, must=False)
            if undo is None:
                continue
            if self._allocate_one(ci, ri, di + 1, req, k + 1):
                return True
            undo()
        return False

    def _flat(self) -> list[tuple[_Pool, _Candidate]]:
        f = getattr(self, "_flat_cache", None)
        if f is None or f[0] is not self._pools_list:
            f = (self._pools_list, [(p, c) for p in self._pools_list for c in p.candidates])
            self._flat_cache = f
        return f[1]

    def _in_use(self, cand: _Candidate, req: _Req, ci: int) -> bool:
        if req.sub.admin_access:
            return cand.id in self._allocating_admin.get(ci, ())
        if cand.device.allow_multiple_allocations:
            return False
        return cand.id in self.allocated.devices or self.allocated.is_allocated(cand.id) \
            or cand.id in self._allocating

    def _usable(self, cand: _Candidate, req: _Req, ci: int) -> bool:
        if self._in_use(cand, req, ci):
            return False
        if not self._selectable(cand, req, self._data[ci].claim):
            return False
        use = self._capacity_use(cand, req)
        return use is not None and self._capacity_fits(cand, use)

    def _counters_available(self, pool: _Pool) -> dict[str, dict[str, int]]:
        key = (pool.driver, pool.name)
        av = self._available_counters.get(key)
        if av is None:
            av = {cs: dict(c) for cs, c in pool.counter_sets.items()}
            for c in pool.candidates:
                if not self.allocated.is_allocated(c.id):
                    continue
                for cs, counters in c.device.consumes_counters:
                    for n, v in counters.items():
                        if cs in av and n in av[cs]:
                            av[cs][n] -= v
            self._available_counters[key] = av
        return av

    def _pool_of(self, cand: _Candidate) -> _Pool:
        for p in self._pools_list:
            if p.driver == cand.id[0] and p.name == cand.id[1]:
                return p
        raise AllocatorError(f"internal error: no pool for device {device_id_str(cand.id)}")

    def _allocate_device(self, cd: _ClaimData, ci: int, req: _Req, cand: _Candidate,
                         must: bool) -> Callable[[], None] | None:
        """Take ``cand`` for ``req``; returns the rollback, or None when it cannot be taken."""
        if self._in_use(cand, req, ci):
            return None
        dev = cand.device
        multi = dev.allow_multiple_allocations
        undo: list[Callable[[], None]] = []

        def rollback() -> None:
            for u in reversed(undo):
                u()

        # Counters (a shared device already in use consumes them once).
        if dev.consumes_counters and not (multi and (cand.id in self.allocated.capacity
                                                      or cand.id in self._attempt_capacity)):
            pool = self._pool_of(cand)
            avail = self._counters_available(pool)
            used = self._attempt_counters.setdefault((pool.driver, pool.name), {})
            over = False
            for cs, counters in dev.consumes_counters:
                u = used.setdefault(cs, {})
                for n, v in counters.items():
                    u[n] = u.get(n, 0) + v
                    if u[n] > avail.get(cs, {}).get(n, 0):
                        over = True
            added = dev.consumes_counters

            def undo_counters(used: dict[str, dict[str, int]] = used, added: Any = added) -> None:
                for cs, counters in added:
                    for n, v in counters.items():
                        used[cs][n] -= v

            if over:
                undo_counters()
                return None
            undo.append(undo_counters)
        # Taints.
        for t in dev.taints:
            if t.effect not in (EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE):
                continue
            if not any(tol.tolerates(t) for tol in req.sub.tolerations):
                rollback()
                return None
        # Constraints.
        added_c: list[_Constraint] = []
        for con in cd.constraints:
            if not con.add(req.ref, dev, cand.id):
                for a in added_c:
                    a.remove(req.ref, cand.id)
                rollback()
                if must:
                    raise AllocatorError(f"cannot add device {device_id_str(cand.id)} because a claim constraint "
                                         "would not be satisfied")
                return None
            added_c.append(con)
        undo.append(lambda: [a.remove(req.ref, cand.id) for a in added_c] and None)
        # Record.
        share_id = ""
        consumed: dict[str, int] | None = None
        if req.sub.admin_access:
            s = self._allocating_admin.setdefault(ci, set())
            s.add(cand.id)
            undo.append(lambda: s.discard(cand.id))
        elif not multi:
            self._allocating.add(cand.id)
            undo.append(lambda: self._allocating.discard(cand.id))
        if multi:
            share_id = self.new_share_id()
            consumed = self._capacity_use(cand, req) or {}
            pend = self._attempt_capacity.setdefault(cand.id, {})
            for k, v in consumed.items():
                pend[k] = pend.get(k, 0) + v

            def undo_cap(pend: dict[str, int] = pend, consumed: dict[str, int] = consumed) -> None:
                for k, v in consumed.items():
                    pend[k] -= v
                if not any(pend.values()):
                    self._attempt_capacity.pop(cand.id, None)

            undo.append(undo_cap)
        result = self._result_entry(req, cand, share_id, consumed)
        cd.results.append(result)
        undo.append(lambda: cd.results.remove(result))
        return rollback

    def _result_entry(self, req: _Req, cand: _Candidate, share_id: str,
                      consumed: dict[str, int] | None) -> dict[str, Any]:
        from ksched.api.quantity import BINARY_SI, DECIMAL_SI, format_quantity

        r: dict[str, Any] = {"request": req.ref, "driver": cand.id[0], "pool": cand.id[1], "device": cand.id[2]}
        if req.sub.admin_access:
            r["adminAccess"] = True
        if req.sub.tolerations:
            r["tolerations"] = [dict(t.raw) for t in req.sub.tolerations]
        dev = cand.device
        if dev.binding_conditions:
            r["bindingConditions"] = list(dev.binding_conditions)
            r["bindingFailureConditions"] = list(dev.binding_failure_conditions)
        if share_id:
            r["shareID"] = share_id
        if consumed is not None:
            raw_caps = dev.raw.get("capacity") or {}
            out = {}
            for raw_name, rc in raw_caps.items():
                q = qualified(raw_name, cand.id[0])
                fmt = BINARY_SI if str((rc or {}).get("value", "")).endswith("i") else DECIMAL_SI
                out[raw_name] = format_quantity(consumed.get(q, 0), fmt)
            r["consumedCapacity"] = out
        return r

    def _result(self, cd: _ClaimData, node: Any) -> dict[str, Any]:
        claim = cd.claim
        results = sorted(cd.results, key=lambda r: _result_order(cd, r))
        configs: list[dict[str, Any]] = []
        by_class: dict[str, list[str]] = {}
        for chosen in cd.chosen:
            if chosen is None:
                continue
            by_class.setdefault(chosen.sub.device_class_name, []).append(chosen.ref if "/" not in chosen.ref
                                                                          else chosen.parent)
        for cname, reqs in by_class.items():
            cls = self.classes.get(cname)
            for c in cls.config if cls is not None else ():
                if c.get("opaque") is not None:
                    configs.append({"source": "FromClass", "requests": reqs, "opaque": c["opaque"]})
        chosen_refs = {c.ref for c in cd.chosen if c is not None}
        parents = {c.parent for c in cd.chosen if c is not None}
        for c in claim.config:
            reqs = list(c.get("requests") or ())
            if not reqs or any(r in parents or r in chosen_refs for r in reqs):
                entry: dict[str, Any] = {"source": "FromClaim", "opaque": c.get("opaque")}
                if reqs:
                    entry["requests"] = reqs
                configs.append(entry)
        alloc: dict[str, Any] = {"devices": {"results": results}}
        if configs:
            alloc["devices"]["config"] = configs
        sel = self._node_selector(results, node)
        if sel is not None:
            alloc["nodeSelector"] = sel
        return alloc

    def _node_selector(self, results: list[dict[str, Any]], node: Any) -> dict[str, Any] | None:
        terms: list[dict[str, Any]] = []
        for r in results:
            did = (r["driver"], r["pool"], r["device"])
            cand = next((c for p in self._pools_list for c in p.candidates if c.id == did), None)
            if cand is None:
                continue
            s, d = cand.slice, cand.device
            if s.node_name or d.node_name or d.binds_to_node:
                name = node.name if node is not None else (s.node_name or d.node_name)
                return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                                "values": [name]}]}]}
            ns = s.raw.get("spec", {}).get("nodeSelector") if s.node_selector is not None else \
                (d.raw.get("nodeSelector") if d.node_selector is not None else None)
            if ns:
                for t in ns.get("nodeSelectorTerms") or ():
                    terms.append(t)
        if not terms:
            return None
        merged: dict[str, Any] = {}
        for t in terms:
            for k in ("matchExpressions", "matchFields"):
                if t.get(k):
                    merged.setdefault(k, []).extend(t[k])
        return {"nodeSelectorTerms": [merged]}


def _result_order(cd: _ClaimData, r: dict[str, Any]) -> int:
    """Results in request order (a request's devices in the order taken)."""
    parent = r["request"].split("/", 1)[0]
    for i, req in enumerate(cd.claim.requests):
        if req.name == parent:
            return i
    return len(cd.claim.requests)


def _eval(expr: str, cand: _Candidate, where: str, i: int) -> bool:
    """A selector's verdict for a device, cached on the device (a slice's devices are immutable:
    an update brings new objects), so each expression runs once per device, not per cycle."""
    dev = cand.device
    cache = dev.sel_cache
    if cache is None:
        cache = dev.sel_cache = {}
    hit = cache.get(expr)
    if hit is None:
        try:
            prog = compile_selector(expr)
            view = cache.get("")
            if view is None:
                view = cache[""] = device_value(cand.id[0], dev.attributes,
                                                {k: c.value for k, c in dev.capacity.items()},
                                                dev.allow_multiple_allocations)
            hit = prog.matches(view)
        except CelError as e:
            hit = e
        cache[expr] = hit
    if isinstance(hit, CelError):
        raise AllocatorError(f"{where}: selector #{i}: {hit}")
    return bool(hit)
