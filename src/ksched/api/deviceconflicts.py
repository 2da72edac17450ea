"""Devices that two ResourceClaims must not both hold: the conflict resolver's check of claim
allocations, for several schedulers sharing a cluster (docs/multi-scheduler.md).

The DynamicResources plugin of each scheduler instance allocates devices against the claims it
has seen allocated (plus its own allocations in flight); with watches lagging, two instances
can each write an allocation of the same device. The embedded API server, with the checks
between pods on (``Store.enable_pod_conflicts``), refuses a ResourceClaim write that adds an
allocation result for a device another claim holds, unless both share it (results with a
``shareID``: a device that allows multiple allocations). The scheduler's PreBind fails on the
409 Conflict, its in-flight allocation is released, and the pod tries again once its view has
caught up. Results with ``adminAccess`` do not hold their device (as upstream).

Known divergences: the consumable capacity of a shared device is not summed (two instances can
still over-commit a shared device's capacity); upstream's API server checks nothing of this.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ksched.api.quantity import parse_quantity
from ksched.api.resource import ResourceClaim, ResourceSlice

__all__ = ["DeviceAllocations", "slice_capacity"]

DeviceKey = tuple[str, str, str]  # driver, pool, device


class _Hold:
    """What one claim holds of one device: shared or not, and the capacity it consumes."""

    __slots__ = ("consumed", "shared")

    def __init__(self) -> None:
        self.shared = True
        self.consumed: dict[str, int] = {}  # capacity name -> nanos


def _held(claim: ResourceClaim | None) -> dict[DeviceKey, _Hold]:
    """The devices a claim's allocation holds."""
    out: dict[DeviceKey, _Hold] = {}
    if claim is None:
        return out
    for r in claim.results:
        if not isinstance(r, dict) or r.get("adminAccess"):
            continue
        key = (str(r.get("driver") or ""), str(r.get("pool") or ""), str(r.get("device") or ""))
        h = out.get(key)
        if h is None:
            h = out[key] = _Hold()
        h.shared = h.shared and bool(r.get("shareID"))
        for name, q in (r.get("consumedCapacity") or {}).items():
            try:
                h.consumed[name] = h.consumed.get(name, 0) + parse_quantity(q).nanos
            except ValueError:
                continue
    return out


def slice_capacity(slices: Any, key: DeviceKey) -> dict[str, int] | None:
    """A device's capacities (name -> nanos) as its ResourceSlice publishes them, or None."""
    driver, pool, device = key
    for s in slices:
        if not isinstance(s, ResourceSlice) or s.driver != driver or s.pool_name != pool:
            continue
        for d in (s.raw.get("spec") or {}).get("devices") or ():
            if isinstance(d, dict) and d.get("name") == device:
                out = {}
                for name, c in (d.get("capacity") or {}).items():
                    try:
                        out[name] = parse_quantity((c or {}).get("value", 0)).nanos
                    except ValueError:
                        continue
                return out
    return None


def _fmt(nanos: int) -> str:
    """A quantity for a message: binary suffixes where they divide (16Gi), else plain units."""
    if nanos % 10**9:
        return str(parse_quantity(f"{nanos}n"))
    v = nanos // 10**9
    for suffix, unit in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if v and v % unit == 0:
            return f"{v // unit}{suffix}"
    return str(v)


class DeviceAllocations:
    """Which claims hold each device (shared or not, consuming how much of its capacity)."""

    def __init__(self, capacity_of: Callable[[DeviceKey], dict[str, int] | None] | None = None) -> None:
        self.holders: dict[DeviceKey, dict[str, _Hold]] = {}
        self.capacity_of = capacity_of

    def update(self, old: Any, new: Any) -> None:
        if isinstance(old, ResourceClaim):
            for key in _held(old):
                users = self.holders.get(key)
                if users is not None:
                    users.pop(old.key, None)
                    if not users:
                        del self.holders[key]
        if isinstance(new, ResourceClaim):
            for key, h in _held(new).items():
                self.holders.setdefault(key, {})[new.key] = h

    def conflict(self, old: ResourceClaim | None, new: ResourceClaim) -> str | None:
        """Why ``new`` (replacing ``old``) may not hold the devices it adds, or None."""
        before = _held(old)
        for key, h in _held(new).items():
            if key in before:
                continue
            driver, pool, device = key
            others = {k: o for k, o in (self.holders.get(key) or {}).items() if k != new.key}
            for other, o in sorted(others.items()):
                if not (h.shared and o.shared):
                    return f"device {driver}/{pool}/{device} is already allocated to claim {other}"
            if not h.consumed or self.capacity_of is None:
                continue
            capacity = self.capacity_of(key) or {}
            for name, want in sorted(h.consumed.items()):
                have = capacity.get(name)
                used = sum(o.consumed.get(name, 0) for o in others.values())
                if have is not None and used + want > have:
                    return (f"device {driver}/{pool}/{device} would be over-committed on {name}: requested "
                            f"{_fmt(want)}, capacity {_fmt(have)}, already allocated {_fmt(used)}")
        return None
