"""The structured-parameters allocator: cases ported from upstream's allocator tests
(``structured/internal/allocatortesting``: simple, selectors, constraints, All, prioritized list,
admin access, partitionable devices, consumable capacity, taints, pools) and invariants
(hypothesis: no dedicated device twice, consumable capacity never exceeded)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.node import Node
from ksched.api.quantity import parse_quantity
from ksched.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from ksched.scheduler.plugins.dynamicresources.allocator import (
    AllocatedState,
    Allocator,
    AllocatorError,
    FailedOnNode,
)

DRV = "driver-a"
NODE = Node({"metadata": {"name": "node-1", "labels": {"zone": "a"}}})
OTHER = Node({"metadata": {"name": "node-2", "labels": {"zone": "b"}}})


def dev(name: str, **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    attrs = kw.pop("attrs", None)
    if attrs:
        d["attributes"] = {k: ({"string": v} if isinstance(v, str) else {"bool": v} if isinstance(v, bool)
                               else {"int": v}) for k, v in attrs.items()}
    d.update(kw)
    return d


def rslice(name: str, devices: list[dict[str, Any]], node: str | None = "node-1", pool: str = "pool-1",
           gen: int = 1, count: int = 1, **spec: Any) -> ResourceSlice:
    s: dict[str, Any] = {"driver": spec.pop("driver", DRV), "pool": {"name": pool, "generation": gen,
                                                                    "resourceSliceCount": count}}
    if node is not None:
        s["nodeName"] = node
    if devices:
        s["devices"] = devices
    s.update(spec)
    return ResourceSlice({"metadata": {"name": name}, "spec": s})


def dclass(name: str = "cls", *selectors: str, config: list[dict[str, Any]] | None = None) -> DeviceClass:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    if config:
        spec["config"] = config
    return DeviceClass({"metadata": {"name": name}, "spec": spec})


def exactly(cls: str = "cls", **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"deviceClassName": cls}
    sels = kw.pop("selectors", None)
    if sels:
        d["selectors"] = [{"cel": {"expression": e}} for e in sels]
    d.update(kw)
    return d


def rclaim(name: str, *requests: dict[str, Any], **devices: Any) -> ResourceClaim:
    return ResourceClaim({"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                          "spec": {"devices": {"requests": list(requests), **devices}}})


def req(name: str = "req-0", **kw: Any) -> dict[str, Any]:
    fa = kw.pop("first_available", None)
    if fa is not None:
        return {"name": name, "firstAvailable": fa}
    return {"name": name, "exactly": exactly(**kw)}


def allocator(slices: list[ResourceSlice], classes: list[DeviceClass] | None = None,
              allocated: AllocatedState | None = None) -> Allocator:
    ids = (f"share-{i}" for i in itertools.count())
    cls = {c.name: c for c in (classes if classes is not None else [dclass()])}
    return Allocator(allocated or AllocatedState(), cls, slices, lambda: next(ids))


def devices_of(res: list[dict[str, Any]] | None) -> list[list[tuple[str, str]]] | None:
    if res is None:
        return None
    return [[(r["request"], r["device"]) for r in a["devices"]["results"]] for a in res]


# ---------------------------------------------------------------- table of cases

TWO = [dev("device-1"), dev("device-2")]


def _cases() -> list[tuple[str, list[ResourceSlice], list[DeviceClass] | None, list[ResourceClaim],
                           AllocatedState | None, Any]]:
    numa = [dev("d0", attrs={"numa": 0}), dev("d1", attrs={"numa": 1}), dev("d2", attrs={"numa": 1})]
    return [
        ("simple", [rslice("s", TWO)], None, [rclaim("c", req())], None, [[("req-0", "device-1")]]),
        ("two claims, one device each", [rslice("s", TWO)], None, [rclaim("a", req()), rclaim("b", req())], None,
         [[("req-0", "device-1")], [("req-0", "device-2")]]),
        ("too many claims", [rslice("s", TWO)], None, [rclaim(n, req()) for n in "abc"], None, None),
        ("count 2", [rslice("s", TWO)], None, [rclaim("c", req(count=2))], None,
         [[("req-0", "device-1"), ("req-0", "device-2")]]),
        ("already allocated", [rslice("s", TWO)], None, [rclaim("c", req())],
         AllocatedState({(DRV, "pool-1", "device-1")}), [[("req-0", "device-2")]]),
        ("class selector", [rslice("s", [dev("a", attrs={"model": "x"}), dev("b", attrs={"model": "y"})])],
         [dclass("cls", f'device.attributes["{DRV}"].model == "y"')], [rclaim("c", req())], None,
         [[("req-0", "b")]]),
        ("claim selector", [rslice("s", [dev("a", attrs={"model": "x"}), dev("b", attrs={"model": "y"})])],
         None, [rclaim("c", req(selectors=[f'device.attributes["{DRV}"].model == "y"']))], None,
         [[("req-0", "b")]]),
        ("class selector on driver", [rslice("s", TWO)], [dclass("cls", 'device.driver == "other"')],
         [rclaim("c", req())], None, None),
        ("matchAttribute picks a matching pair", [rslice("s", numa)], None,
         [rclaim("c", req(count=2), constraints=[{"matchAttribute": f"{DRV}/numa"}])], None,
         [[("req-0", "d1"), ("req-0", "d2")]]),
        ("matchAttribute across requests", [rslice("s", numa)], None,
         [rclaim("c", req("a"), req("b"), constraints=[{"requests": ["a", "b"], "matchAttribute": f"{DRV}/numa"}])],
         None, [[("a", "d1"), ("b", "d2")]]),
        ("matchAttribute missing attribute", [rslice("s", TWO)], None,
         [rclaim("c", req(), constraints=[{"matchAttribute": f"{DRV}/numa"}])], None, None),
        ("distinctAttribute", [rslice("s", numa)], None,
         [rclaim("c", req(count=2), constraints=[{"distinctAttribute": f"{DRV}/numa"}])], None,
         [[("req-0", "d0"), ("req-0", "d1")]]),
        ("all devices", [rslice("s", TWO)], None, [rclaim("c", req(allocationMode="All"))], None,
         [[("req-0", "device-1"), ("req-0", "device-2")]]),
        ("all devices, one in use", [rslice("s", TWO)], None, [rclaim("c", req(allocationMode="All"))],
         AllocatedState({(DRV, "pool-1", "device-2")}), None),
        ("all devices, none selectable", [rslice("s", TWO)], [dclass("cls", "false")],
         [rclaim("c", req(allocationMode="All"))], None, None),
        ("firstAvailable: first fits", [rslice("s", TWO)], None,
         [rclaim("c", req(first_available=[{"name": "one", **exactly()}, {"name": "two", **exactly(count=2)}]))],
         None, [[("req-0/one", "device-1")]]),
        ("firstAvailable: falls back", [rslice("s", TWO)], None,
         [rclaim("c", req(first_available=[{"name": "three", **exactly(count=3)}, {"name": "two", **exactly(count=2)}]))],
         None, [[("req-0/two", "device-1"), ("req-0/two", "device-2")]]),
        ("firstAvailable: backtracks over later claims", [rslice("s", TWO)], None,
         [rclaim("a", req(first_available=[{"name": "two", **exactly(count=2)}, {"name": "one", **exactly()}])),
          rclaim("b", req())], None, [[("req-0/one", "device-1")], [("req-0", "device-2")]]),
        ("admin access takes an allocated device", [rslice("s", TWO[:1])], None,
         [rclaim("c", req(adminAccess=True))], AllocatedState({(DRV, "pool-1", "device-1")}),
         [[("req-0", "device-1")]]),
        ("other node's slice", [rslice("s", TWO, node="node-2")], None, [rclaim("c", req())], None, None),
        ("allNodes slice", [rslice("s", TWO, node=None, allNodes=True)], None, [rclaim("c", req())], None,
         [[("req-0", "device-1")]]),
        ("nodeSelector slice", [rslice("s", TWO, node=None, nodeSelector={"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]})], None,
         [rclaim("c", req())], None, None),
        ("incomplete pool is skipped", [rslice("s", TWO, count=2)], None, [rclaim("c", req())], None, None),
        ("obsolete generation", [rslice("s1", [dev("old")], gen=1), rslice("s2", [dev("new")], gen=2)], None,
         [rclaim("c", req())], None, [[("req-0", "new")]]),
        ("untolerated NoSchedule taint", [rslice("s", [dev("t", taints=[{"key": "k", "effect": "NoSchedule"}])])],
         None, [rclaim("c", req())], None, None),
        ("taint effect None is ignored", [rslice("s", [dev("t", taints=[{"key": "k", "effect": "None"}])])],
         None, [rclaim("c", req())], None, [[("req-0", "t")]]),
        ("tolerated taint", [rslice("s", [dev("t", taints=[{"key": "k", "value": "v", "effect": "NoExecute"}])])],
         None, [rclaim("c", req(tolerations=[{"key": "k", "operator": "Equal", "value": "v"}]))], None,
         [[("req-0", "t")]]),
        ("per-device node selection", [rslice("s", [dev("x", nodeName="node-2"), dev("y", nodeName="node-1")],
                                              node=None, perDeviceNodeSelection=True)], None,
         [rclaim("c", req())], None, [[("req-0", "y")]]),
    ]


@pytest.mark.parametrize(("name", "slices", "classes", "claims", "allocated", "want"), _cases(),
                         ids=[c[0] for c in _cases()])
def test_allocate(name: str, slices: list[ResourceSlice], classes: list[DeviceClass] | None,
                  claims: list[ResourceClaim], allocated: AllocatedState | None, want: Any) -> None:
    got = allocator(slices, classes, allocated).allocate(NODE, claims)
    assert devices_of(got) == want


# ---------------------------------------------------------------- result details


def test_result_fields_and_node_selector() -> None:
    a = allocator([rslice("s", TWO)], [dclass("cls", config=[{"opaque": {"driver": DRV, "parameters": {"a": 1}}}])])
    [res] = a.allocate(NODE, [rclaim("c", req(tolerations=[{"key": "k", "operator": "Exists"}]),
                                     config=[{"opaque": {"driver": DRV, "parameters": {"b": 2}}}])])
    r = res["devices"]["results"][0]
    assert r == {"request": "req-0", "driver": DRV, "pool": "pool-1", "device": "device-1",
                 "tolerations": [{"key": "k", "operator": "Exists"}]}
    assert res["devices"]["config"] == [
        {"source": "FromClass", "requests": ["req-0"], "opaque": {"driver": DRV, "parameters": {"a": 1}}},
        {"source": "FromClaim", "opaque": {"driver": DRV, "parameters": {"b": 2}}}]
    assert res["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}
    [res] = allocator([rslice("s", TWO, node=None, allNodes=True)]).allocate(NODE, [rclaim("c", req())])
    assert "nodeSelector" not in res


def test_admin_access_marks_result() -> None:
    [res] = allocator([rslice("s", TWO)]).allocate(NODE, [rclaim("c", req(adminAccess=True))])
    assert res["devices"]["results"][0]["adminAccess"] is True


# ---------------------------------------------------------------- partitionable devices


def partitioned(n: int, per: str) -> ResourceSlice:
    """``n`` partitions of one GPU, each consuming ``per`` of the counter set ``gpu-0``."""
    return ResourceSlice({"metadata": {"name": "s"}, "spec": {
        "driver": DRV, "nodeName": "node-1", "pool": {"name": "pool-1", "generation": 1, "resourceSliceCount": 2},
        "devices": [dev(f"part-{i}", consumesCounters=[{"counterSet": "gpu-0", "counters": {
            "memory": {"value": per}}}]) for i in range(n)]}})


def counters(total: str) -> ResourceSlice:
    return ResourceSlice({"metadata": {"name": "s-counters"}, "spec": {
        "driver": DRV, "nodeName": "node-1", "pool": {"name": "pool-1", "generation": 1, "resourceSliceCount": 2},
        "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": total}}}]}})


def test_partitionable_devices_share_counters() -> None:
    slices = [partitioned(3, "4Gi"), counters("8Gi")]
    assert devices_of(allocator(slices).allocate(NODE, [rclaim("c", req(count=2))])) == [
        [("req-0", "part-0"), ("req-0", "part-1")]]
    assert allocator(slices).allocate(NODE, [rclaim("c", req(count=3))]) is None
    used = AllocatedState({(DRV, "pool-1", "part-0")})
    assert devices_of(allocator(slices, allocated=used).allocate(NODE, [rclaim("c", req())])) == [
        [("req-0", "part-1")]]
    assert allocator(slices, allocated=used).allocate(NODE, [rclaim("c", req(count=2))]) is None


def test_invalid_pool_fails_on_node() -> None:
    bad = partitioned(2, "4Gi")  # counters slice missing: a consumesCounters reference to nothing
    with_ref = [bad, ResourceSlice({"metadata": {"name": "s-counters"}, "spec": {
        "driver": DRV, "nodeName": "node-1", "pool": {"name": "pool-1", "generation": 1, "resourceSliceCount": 2},
        "sharedCounters": [{"name": "other", "counters": {"memory": {"value": "8Gi"}}}]}})]
    with pytest.raises(FailedOnNode, match=r"^invalid resource pools were encountered$"):
        allocator(with_ref).allocate(NODE, [rclaim("c", req())])


# ---------------------------------------------------------------- consumable capacity


def shared_gpu(mem: str = "40Gi", policy: dict[str, Any] | None = None) -> ResourceSlice:
    cap: dict[str, Any] = {"value": mem}
    if policy:
        cap["requestPolicy"] = policy
    return rslice("s", [dev("gpu-0", allowMultipleAllocations=True, capacity={"memory": cap})])


def test_consumable_capacity_shares_a_device() -> None:
    a = allocator([shared_gpu()])
    claims = [rclaim(n, req(capacity={"requests": {"memory": "16Gi"}})) for n in "ab"]
    res = a.allocate(NODE, claims)
    assert res is not None
    r0, r1 = (x["devices"]["results"][0] for x in res)
    assert r0["device"] == r1["device"] == "gpu-0" and r0["shareID"] != r1["shareID"]
    assert r0["consumedCapacity"] == {"memory": "16Gi"}
    # A third one does not fit next to two.
    claims.append(rclaim("c", req(capacity={"requests": {"memory": "16Gi"}})))
    assert allocator([shared_gpu()]).allocate(NODE, claims) is None
    # Nor next to what is allocated already.
    used = AllocatedState(capacity={(DRV, "pool-1", "gpu-0"): {f"{DRV}/memory": 30 * 2**30 * 10**9}})
    assert allocator([shared_gpu()], allocated=used).allocate(NODE, claims[:1]) is None
    # Without a request the whole capacity is taken.
    [res1] = allocator([shared_gpu()]).allocate(NODE, [rclaim("c", req())])
    assert res1["devices"]["results"][0]["consumedCapacity"] == {"memory": "40Gi"}


@pytest.mark.parametrize(("policy", "amount", "consumed"), [
    ({"default": "1Gi", "validRange": {"min": "1Gi", "step": "4Gi"}}, "3Gi", "5Gi"),
    ({"default": "1Gi", "validRange": {"min": "2Gi"}}, "1", "2Gi"),
    ({"default": "8Gi", "validValues": ["8Gi", "16Gi", "40Gi"]}, "10Gi", "16Gi"),
    ({"default": "8Gi", "validValues": ["8Gi", "16Gi"]}, None, "8Gi"),
])
def test_request_policy_rounding(policy: dict[str, Any], amount: str | None, consumed: str) -> None:
    kw = {"capacity": {"requests": {"memory": amount}}} if amount else {}
    [res] = allocator([shared_gpu(policy=policy)]).allocate(NODE, [rclaim("c", req(**kw))])
    got = res["devices"]["results"][0]["consumedCapacity"]["memory"]
    assert parse_quantity(got).nanos == parse_quantity(consumed).nanos


@pytest.mark.parametrize(("policy", "amount"), [
    ({"default": "8Gi", "validValues": ["8Gi", "16Gi"]}, "20Gi"),
    ({"default": "1Gi", "validRange": {"min": "1Gi", "max": "8Gi"}}, "10Gi"),
])
def test_request_policy_violations(policy: dict[str, Any], amount: str) -> None:
    claim = rclaim("c", req(capacity={"requests": {"memory": amount}}))
    assert allocator([shared_gpu(policy=policy)]).allocate(NODE, [claim]) is None


def test_capacity_request_for_a_missing_capacity() -> None:
    claim = rclaim("c", req(capacity={"requests": {"cores": "1"}}))
    assert allocator([shared_gpu()]).allocate(NODE, [claim]) is None


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(("claims", "classes", "msg"), [
    ([rclaim("c", req(cls="missing"))], None,
     'claim default/c, request req-0: could not retrieve device class missing: deviceclass.resource.k8s.io '
     '"missing" not found'),
    ([rclaim("c", *(req(f"r{i}", count=2) for i in range(17)))], None,
     "claim default/c: number of requested devices 34 exceeds the claim limit of 32"),
    ([rclaim("c", req())], [dclass("cls", f'device.attributes["{DRV}"].nosuch == 1')],
     "class cls: selector #0: CEL runtime error: no such key: nosuch"),
    ([rclaim("c", req(selectors=["true", f'device.attributes["{DRV}"].nosuch']))], None,
     "claim default/c: selector #1: CEL runtime error: no such key: nosuch"),
    ([rclaim("c", req(allocationMode="All"))], None,
     "claim default/c, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being "
     "updated"),
])
def test_fatal_errors(claims: list[ResourceClaim], classes: list[DeviceClass] | None, msg: str) -> None:
    slices = [rslice("s", TWO, count=2)] if "updated" in msg else [rslice("s", TWO)]
    with pytest.raises(AllocatorError) as e:
        allocator(slices, classes).allocate(NODE, claims)
    assert str(e.value) == msg


# ---------------------------------------------------------------- invariants


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.booleans(), st.integers(0, 40)), min_size=1, max_size=8),
       st.integers(1, 4), st.integers(0, 2))
def test_no_device_twice_and_capacity_never_exceeded(reqs: list[tuple[int, bool, int]], n_dev: int,
                                                     n_shared: int) -> None:
    devices = [dev(f"d{i}") for i in range(n_dev)]
    devices += [dev(f"s{i}", allowMultipleAllocations=True, capacity={"mem": {"value": "40"}}) for i in range(n_shared)]
    slices = [rslice("s", devices)]
    state = AllocatedState()
    for i, (count, shared, mem) in enumerate(reqs):
        sel = ["device.allowMultipleAllocations"] if shared else ["!device.allowMultipleAllocations"]
        kw: dict[str, Any] = {"count": count, "selectors": sel}
        if shared:
            kw["capacity"] = {"requests": {"mem": str(mem)}}
        res = allocator(slices, allocated=state).allocate(NODE, [rclaim(f"c{i}", req(**kw))])
        if res is None:
            continue
        for r in res[0]["devices"]["results"]:
            did = (r["driver"], r["pool"], r["device"])
            if r.get("shareID"):
                state.add_result(*did, r["shareID"], {f"{DRV}/mem": parse_quantity(r["consumedCapacity"]["mem"]).nanos})
            else:
                assert did not in state.devices, "a dedicated device was allocated twice"
                state.add_result(*did, "", {})
    for caps in state.capacity.values():
        assert caps[f"{DRV}/mem"] <= 40 * 10**9


# ---------------------------------------------------------------- the pool cache


@pytest.mark.parametrize(("name", "slices", "classes", "claims", "allocated", "want"), _cases(),
                         ids=[c[0] for c in _cases()])
def test_a_pool_cache_shared_by_later_allocators_changes_no_answer(
        name: str, slices: list[ResourceSlice], classes: list[DeviceClass] | None, claims: list[ResourceClaim],
        allocated: AllocatedState | None, want: Any) -> None:
    """Every table case, answered by three allocators in a row sharing one pool cache (as the
    scheduler's cycles do), on both nodes: the same answers as without the cache."""
    cache: dict[str, Any] = {}
    for _ in range(3):
        for node in (NODE, OTHER):
            ids = (f"share-{i}" for i in itertools.count())
            cls = {c.name: c for c in (classes if classes is not None else [dclass()])}
            cached = Allocator(allocated or AllocatedState(), cls, slices, lambda ids=ids: next(ids),
                               pool_cache=cache)
            try:
                got = devices_of(cached.allocate(node, claims))
            except AllocatorError as e:
                got = repr(e)
            try:
                plain = devices_of(allocator(slices, classes, allocated).allocate(node, claims))
            except AllocatorError as e:
                plain = repr(e)
            assert got == plain
    assert not cache or all(len(v) == 3 for v in cache.values())


def test_the_pool_cache_follows_slice_and_node_updates() -> None:
    cache: dict[str, Any] = {}
    claim = rclaim("c", req(selectors=[f'device.attributes["{DRV}"].model == "new"']))
    old = [rslice("s", [dev("a", attrs={"model": "old"})])]
    assert Allocator(AllocatedState(), {"cls": dclass()}, old, lambda: "x", pool_cache=cache).allocate(
        NODE, [claim]) is None
    # The driver republishes the slice (a new object): the cached pools are not used.
    new = [rslice("s", [dev("a", attrs={"model": "new"})], gen=2)]
    got = Allocator(AllocatedState(), {"cls": dclass()}, new, lambda: "x", pool_cache=cache).allocate(NODE, [claim])
    assert devices_of(got) == [[("req-0", "a")]]
    # A node updated (a new object) whose labels no longer match a node selector of the slice.
    by_zone = [rslice("z", [dev("a", attrs={"model": "new"})], node=None, nodeSelector={"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]})]
    a = Allocator(AllocatedState(), {"cls": dclass()}, by_zone, lambda: "x", pool_cache=cache)
    assert devices_of(a.allocate(NODE, [claim])) == [[("req-0", "a")]]
    moved = Node({"metadata": {"name": "node-1", "labels": {"zone": "b"}}})
    a = Allocator(AllocatedState(), {"cls": dclass()}, by_zone, lambda: "x", pool_cache=cache)
    assert a.allocate(moved, [claim]) is None
