"""The scheduler's view of DRA objects (``PL/dra_manager.go``, ``PL/allocateddevices.go``,
``pkg/scheduler/util/assumecache``): informers on ResourceClaims, ResourceSlices and
DeviceClasses; an assume cache for claims the scheduler wrote itself; the allocated state kept
current from claim events; and the in-flight allocations (Reserve until PreBind) that keep two
pods from getting the same device.

One manager per informer factory (the scheduler's), shared by every profile's plugin.

Known divergences: the allocated state is maintained incrementally from claim events (upstream
also does, with a revision counter and retries while merging in-flight claims; here the
scheduling thread is the only reader and writer, so no retry is needed).
"""

from __future__ import annotations

from typing import Any

from ksched.api.quantity import parse_quantity
from ksched.api.resource import (
    ANNOTATION_EXTENDED_RESOURCE_CLAIM,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
    qualified,
)
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler
from ksched.scheduler.plugins.dynamicresources.allocator import AllocatedState, DeviceID
from ksched.scheduler.plugins.dynamicresources.extended import DeviceClassResolver

__all__ = ["DRAManager", "claim_contribution", "existing_manager", "manager_of"]

Contribution = list[tuple[DeviceID, str, dict[str, int]]]


def claim_contribution(claim: ResourceClaim | None, allocation: dict[str, Any] | None = None) -> Contribution:
    """The devices a claim's allocation holds: (device, shareID, consumed capacity); admin access
    results hold nothing."""
    alloc = allocation if allocation is not None else (claim.allocation if claim is not None else None)
    if not alloc:
        return []
    out: Contribution = []
    for r in (alloc.get("devices") or {}).get("results") or ():
        if r.get("adminAccess"):
            continue
        did = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
        share = r.get("shareID") or ""
        consumed: dict[str, int] = {}
        if share:
            for k, q in (r.get("consumedCapacity") or {}).items():
                try:
                    consumed[qualified(k, did[0])] = parse_quantity(q).nanos
                except ValueError:
                    continue
        out.append((did, share, consumed))
    return out


def _rv(o: Any) -> int:
    try:
        return int(o.resource_version or 0)
    except (TypeError, ValueError):
        return 0


class DRAManager:
    def __init__(self, informers: Any) -> None:
        self.claims = informers.informer("ResourceClaim")
        self.slices = informers.informer("ResourceSlice")
        self.classes = informers.informer("DeviceClass")
        self.assumed: dict[str, ResourceClaim] = {}
        self.in_flight: dict[str, tuple[ResourceClaim, dict[str, Any], int]] = {}
        self.state = AllocatedState()
        # Built pools per node, reused by the allocators of later cycles (see Allocator.pool_cache).
        self.pool_cache: dict[str, Any] = {}
        self._devices_count: dict[DeviceID, int] = {}
        self._contrib: dict[str, Contribution] = {}
        self._resolver: DeviceClassResolver | None = None
        self._classes: dict[str, DeviceClass] | None = None
        # Extended-resource claims (annotated) by (namespace, controlling owner's UID) -> claim keys.
        self._extended: dict[tuple[str, str], set[str]] = {}
        self._extended_of: dict[str, tuple[str, str]] = {}
        self.claims.add_handler(EventHandler(self._on_add, self._on_update, self._on_delete))
        self.classes.add_handler(EventHandler(self._class_changed, lambda _o, _n: self._class_changed(_n),
                                              self._class_changed))

    # ---------------------------------------------------------------- allocated state

    def _apply(self, key: str, claim: ResourceClaim | None) -> None:
        old = self._contrib.pop(key, [])
        st = self.state
        for did, share, consumed in old:
            if share:
                st.shared.discard((did, share))
                caps = st.capacity.get(did)
                if caps is not None:
                    for k, v in consumed.items():
                        caps[k] = caps.get(k, 0) - v
                    if not any(caps.values()) and not any(s[0] == did for s in st.shared):
                        del st.capacity[did]
            else:
                n = self._devices_count.get(did, 0) - 1
                if n <= 0:
                    self._devices_count.pop(did, None)
                    st.devices.discard(did)
                else:
                    self._devices_count[did] = n
        new = claim_contribution(claim)
        if new:
            self._contrib[key] = new
        for did, share, consumed in new:
            if share:
                st.add_result(*did, share, consumed)
            else:
                self._devices_count[did] = self._devices_count.get(did, 0) + 1
                st.devices.add(did)

    def _effective(self, key: str, informer_obj: ResourceClaim | None) -> ResourceClaim | None:
        a = self.assumed.get(key)
        if a is not None:
            if informer_obj is None or _rv(informer_obj) < _rv(a):
                return a
            del self.assumed[key]
        return informer_obj

    def _index_extended(self, key: str, claim: ResourceClaim | None) -> None:
        old = self._extended_of.pop(key, None)
        if old is not None:
            keys = self._extended.get(old)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._extended[old]
        if claim is None or claim.annotations.get(ANNOTATION_EXTENDED_RESOURCE_CLAIM) != "true":
            return
        for r in claim.owner_references:
            if r.controller:
                k = (claim.namespace, r.uid)
                self._extended.setdefault(k, set()).add(key)
                self._extended_of[key] = k
                return

    def extended_claims_of(self, namespace: str, pod_uid: str) -> list[ResourceClaim]:
        """The claims annotated as extended-resource claims and controlled by this pod."""
        out = []
        for key in sorted(self._extended.get((namespace, pod_uid), ())):
            ns, _, name = key.partition("/")
            c = self.get_claim(ns, name)
            if c is not None:
                out.append(c)
        return out

    def _on_add(self, obj: Any) -> None:
        if isinstance(obj, ResourceClaim):
            self._index_extended(obj.key, obj)
            self._apply(obj.key, self._effective(obj.key, obj))

    def _on_update(self, old: Any, new: Any) -> None:
        self._on_add(new)

    def _on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        if isinstance(obj, ResourceClaim):
            self.assumed.pop(obj.key, None)
            self._index_extended(obj.key, None)
            self._apply(obj.key, None)

    def _class_changed(self, _obj: Any) -> None:
        self._resolver = None
        self._classes = None

    def resolver(self) -> DeviceClassResolver:
        """Which DeviceClass stands for an extended resource name (rebuilt after class events)."""
        r = self._resolver
        if r is None:
            r = self._resolver = DeviceClassResolver(self.device_classes().values())
        return r

    # ---------------------------------------------------------------- reads

    def get_claim(self, namespace: str, name: str) -> ResourceClaim | None:
        key = f"{namespace}/{name}"
        got = self.claims.get(key)
        return self._effective(key, got if isinstance(got, ResourceClaim) else None)

    def list_claims(self) -> list[ResourceClaim]:
        out = []
        for c in self.claims.list():
            if isinstance(c, ResourceClaim):
                e = self._effective(c.key, c)
                if e is not None:
                    out.append(e)
        return out

    def device_classes(self) -> dict[str, DeviceClass]:
        """Name -> DeviceClass (rebuilt after class events; callers must not change it)."""
        c = self._classes
        if c is None:
            c = self._classes = {x.name: x for x in self.classes.list() if isinstance(x, DeviceClass)}
        return c

    def get_class(self, name: str) -> DeviceClass | None:
        c = self.classes.get(name)
        return c if isinstance(c, DeviceClass) else None

    def resource_slices(self) -> list[ResourceSlice]:
        return [s for s in self.slices.list() if isinstance(s, ResourceSlice)]

    def assume(self, claim: ResourceClaim) -> None:
        """The scheduler's own write, until the informer has it (assume cache)."""
        cur = self.claims.get(claim.key)
        if isinstance(cur, ResourceClaim) and _rv(cur) >= _rv(claim):
            self._apply(claim.key, cur)
            return
        self.assumed[claim.key] = claim
        self._apply(claim.key, claim)

    # ---------------------------------------------------------------- in flight

    def signal_pending(self, claim: ResourceClaim, allocation: dict[str, Any]) -> None:
        """Reserve: the claim's allocation is in flight (one more sharer if it is already)."""
        cur = self.in_flight.get(claim.uid)
        n = cur[2] + 1 if cur is not None else 1
        self.in_flight[claim.uid] = (claim, allocation, n)

    def remove_pending(self, uid: str, force: bool = False) -> None:
        cur = self.in_flight.get(uid)
        if cur is None:
            return
        if force or cur[2] <= 1:
            del self.in_flight[uid]
        else:
            self.in_flight[uid] = (cur[0], cur[1], cur[2] - 1)

    def has_pending(self, uid: str) -> bool:
        return uid in self.in_flight

    def pending_allocation(self, uid: str) -> dict[str, Any] | None:
        cur = self.in_flight.get(uid)
        return cur[1] if cur is not None else None

    def gather_allocated_state(self) -> AllocatedState:
        """GatherAllocatedState: the informer's allocated devices plus those in flight."""
        st = self.state
        out = AllocatedState(set(st.devices), set(st.shared), {k: dict(v) for k, v in st.capacity.items()})
        for _claim, alloc, _n in self.in_flight.values():
            for did, share, consumed in claim_contribution(None, alloc):
                out.add_result(*did, share, consumed)
        return out


def existing_manager(informers: Any) -> DRAManager | None:
    """The manager of a scheduler whose profiles have DynamicResources (None: DRA is off there,
    as a scheduler without the DRA manager)."""
    attachments = getattr(informers, "attachments", None)
    return None if attachments is None else attachments.get("DRAManager")


def manager_of(informers: Any) -> DRAManager:
    """The DRA manager of the scheduler reading ``informers`` (an InformerFactory), made on first
    use. It lives on the factory (``attachments``) and dies with it: the manager references the
    factory's informers, so a map keyed weakly by the factory would never let either go."""
    m: DRAManager | None = informers.attachments.get("DRAManager")
    if m is None:
        m = informers.attachments["DRAManager"] = DRAManager(informers)
    return m
