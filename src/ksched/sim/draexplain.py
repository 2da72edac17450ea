"""``ksched simulate --explain`` for ResourceClaims: which device each request got, and why each
other device of the node (every node, for a claim left unallocated) was not taken, judged on the
cluster as the simulation left it: in use by another claim, a class or request selector that
does not match, capacity used up, an untolerated taint, another node's device.

This is an explanation after the fact, not a replay of the allocator's search: a device the
search skipped because a constraint (matchAttribute) failed with the devices already picked is
reported as selectable ("free, not needed").
"""

from __future__ import annotations

from typing import Any

from ksched.api.dracel import CelError, compile_selector, device_value
from ksched.api.node import Node
from ksched.api.quantity import format_quantity, parse_quantity
from ksched.api.resource import DeviceClass, DeviceSubRequest, ResourceClaim, ResourceSlice, qualified

__all__ = ["explain_claim"]


def _sub_requests(claim: ResourceClaim) -> list[tuple[str, DeviceSubRequest]]:
    chosen = {r.get("request", "") for r in claim.results}
    out = []
    for r in claim.requests:
        if r.exactly is not None:
            out.append((r.name, r.exactly))
            continue
        subs = [(f"{r.name}/{s.name}", s) for s in r.first_available]
        picked = [x for x in subs if x[0] in chosen]
        out.append(picked[0] if picked else subs[0])
    return out


def _node_matches(s: ResourceSlice, node: Node) -> bool:
    if s.node_name:
        return s.node_name == node.name
    if s.all_nodes:
        return True
    if s.node_selector is not None:
        return s.node_selector.matches(node.name, node.labels)
    return s.per_device_node_selection


def explain_claim(sim: Any, claim: ResourceClaim) -> dict[str, Any]:
    store = sim.store
    classes = {c.name: c for c in store.items("DeviceClass") if isinstance(c, DeviceClass)}
    slices = [s for s in store.items("ResourceSlice") if isinstance(s, ResourceSlice)]
    claims = [c for c in store.items("ResourceClaim") if isinstance(c, ResourceClaim)]
    owner: dict[tuple[str, str, str], list[str]] = {}
    used: dict[tuple[str, str, str], dict[str, int]] = {}
    for c in claims:
        for r in c.results:
            did = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            if c.uid != claim.uid:
                owner.setdefault(did, []).append(f"{c.namespace}/{c.name}")
    mine = {(r.get("driver", ""), r.get("pool", ""), r.get("device", "")): r.get("request", "") for r in claim.results}
    nodes = [n for n in store.items("Node") if isinstance(n, Node)]
    alloc_node = None
    if claim.allocation is not None:
        for t in (claim.allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or ():
            for f in t.get("matchFields") or ():
                if f.get("key") == "metadata.name" and f.get("values"):
                    alloc_node = f["values"][0]
    if alloc_node is not None:
        nodes = [n for n in nodes if n.name == alloc_node]
    subs = _sub_requests(claim)
    out: dict[str, Any] = {"requests": [ref for ref, _ in subs], "nodes": {}}
    for node in sorted(nodes, key=lambda n: n.name):
        rows = []
        for s in sorted(slices, key=lambda s: s.name):
            if not _node_matches(s, node):
                continue
            for d in s.devices:
                did = (s.driver, s.pool_name, d.name)
                if did in mine:
                    rows.append({"device": "/".join(did), "verdict": f"allocated for request {mine[did]}"})
                    continue
                rows.append({"device": "/".join(did), "verdict": _verdict(s, d, did, subs, classes, owner, used,
                                                                           claims)})
        out["nodes"][node.name] = rows
    return out


def _verdict(s: ResourceSlice, d: Any, did: tuple[str, str, str], subs: list[tuple[str, DeviceSubRequest]],
             classes: dict[str, DeviceClass], owner: dict[tuple[str, str, str], list[str]],
             used: dict[tuple[str, str, str], dict[str, int]], claims: list[ResourceClaim]) -> str:
    if did in owner and not d.allow_multiple_allocations:
        return f"in use by claim {', '.join(owner[did])}"
    view = device_value(s.driver, d.attributes, {k: c.value for k, c in d.capacity.items()},
                        d.allow_multiple_allocations)
    reasons = []
    for ref, sub in subs:
        why = ""
        cls = classes.get(sub.device_class_name)
        if cls is None:
            why = f"device class {sub.device_class_name} does not exist"
        else:
            for where, sels in ((f"class {cls.name}", cls.selectors), ("the request", sub.selectors)):
                for i, e in enumerate(sels):
                    try:
                        ok = compile_selector(e).matches(view)
                    except CelError as err:
                        why = f"{where} selector #{i}: {err}"
                        break
                    if not ok:
                        why = f"does not match {where} selector #{i}: {e}"
                        break
                if why:
                    break
        if not why:
            for t in d.taints:
                if t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in sub.tolerations):
                    why = f"untolerated taint {t.key}={t.value}:{t.effect}"
                    break
        if not why and d.allow_multiple_allocations:
            taken: dict[str, int] = {}
            for c in claims:
                for r in c.results:
                    if (r.get("driver"), r.get("pool"), r.get("device")) == did:
                        for k, q in (r.get("consumedCapacity") or {}).items():
                            taken[qualified(k, s.driver)] = taken.get(qualified(k, s.driver), 0) + \
                                parse_quantity(q).nanos
            for k, v in (sub.capacity_requests or {}).items():
                qk = qualified(k, s.driver)
                cap = d.capacity.get(qk)
                if cap is None:
                    why = f"has no capacity {k}"
                    break
                if taken.get(qk, 0) + v > cap.value:
                    why = (f"not enough {k} left: {format_quantity(cap.value - taken.get(qk, 0))} of "
                           f"{format_quantity(cap.value)} free, {format_quantity(v)} requested")
                    break
        if not why:
            return f"selectable for request {ref}: free, not needed"
        reasons.append(f"{ref}: {why}")
    return "; ".join(reasons)
