"""NodeResourcesFit: Filter statuses and insufficient resources, the three scoring strategies,
queueing hints, argument handling. Cases ported from upstream's
pkg/scheduler/framework/plugins/noderesources/{fit,least_allocated,most_allocated,
requested_to_capacity_ratio,resource_allocation}_test.go (v1.36 / master); the DRA-backed
extended resource cases are left out (ksched has no DRA)."""

from __future__ import annotations

import random
import zlib
from typing import Any

import numpy as np
import pytest

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.resources import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ActionType, ClusterEvent, EventResource, QueueingHint
from ksched.scheduler.framework.status import Code
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.scheduler.plugins.noderesources import Fit, InsufficientResource, fits, fits_request
from ksched.scheduler.plugins.noderesources.fit import (
    PRE_FILTER_STATE_KEY,
    have_any_requested_resources_increased,
    is_fit,
    request_checks,
)
from ksched.scheduler.plugins.noderesources.requested_to_capacity_ratio import build_broken_linear_function
from ksched.scheduler.plugins.noderesources.resource_allocation import (
    ResourceSpec,
    is_scalar_resource_name,
    pod_request_list,
)
from ksched.testing import PluginRunner, make_node, make_pod

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_IO_A = "kubernetes.io/something"
K8S_IO_B = "subdomain.kubernetes.io/something"
HUGE_A = "hugepages-2Mi"
EXT_RES = "abc.com/xyz"
Mi = 1024 * 1024
FIT = "NodeResourcesFit"

_uid = 0


def res(cpu: int | None = None, mem: int | None = None, eph: int | None = None,
        **extra: Any) -> dict[str, Any]:
    """Requests as upstream's framework.Resource: cpu in milli-units, the rest in base units.
    ``extra`` keys: ``ext_a`` etc. are mapped by :data:`_EXTRA`."""
    out: dict[str, Any] = {}
    if cpu is not None:
        out["cpu"] = f"{cpu}m"
    if mem is not None:
        out["memory"] = str(mem)
    if eph is not None:
        out["ephemeral-storage"] = str(eph)
    for k, v in extra.items():
        out[_EXTRA[k]] = str(v)
    return out


_EXTRA = {"ext_a": EXT_A, "ext_b": EXT_B, "k8s_a": K8S_IO_A, "k8s_b": K8S_IO_B, "huge_a": HUGE_A,
          "ext": EXT_RES, "gpu": "nvidia.com/gpu", "foo": "intel.com/foo", "bar": "intel.com/bar"}


def ctr(requests: dict[str, Any] | None = None, i: int = 0, sidecar: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": f"c{i}", "image": "img"}
    if requests is not None:
        c["resources"] = {"requests": dict(requests)}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def pod(*containers: dict[str, Any] | None, init: tuple[dict[str, Any] | None, ...] = (),
        overhead: dict[str, Any] | None = None, pod_level: dict[str, Any] | None = None,
        sidecars: tuple[dict[str, Any] | None, ...] = (), name: str | None = None, uid: str | None = None,
        node_name: str = "", nominated: str = "") -> Pod:
    """A pod with one container per requests dict (None: a container without requests)."""
    global _uid
    _uid += 1
    cs = [ctr(r, i) for i, r in enumerate(containers)]
    ics = [ctr(r, i, sidecar=False) for i, r in enumerate(init)]
    ics += [ctr(r, len(ics) + i, sidecar=True) for i, r in enumerate(sidecars)]
    spec: dict[str, Any] = {}
    if pod_level is not None:
        spec["resources"] = {"requests": dict(pod_level)}
    return make_pod(name or f"p{_uid}", uid=uid or f"uid-fit-{_uid}", containers=cs, init_containers=ics or None,
                    overhead=overhead, node_name=node_name, nominated_node_name=nominated, spec=spec or None)


def node(name: str = "n", cpu: Any = None, mem: Any = None, pods: Any = 32, **extra: Any) -> Node:
    """A node whose allocatable is exactly what is given (cpu/mem as quantities)."""
    alloc = {_EXTRA.get(k, k): v for k, v in extra.items()}
    return make_node(name, cpu=cpu, memory=mem, pods=pods, allocatable=alloc)


def status_tuple(st: Any) -> tuple[Code, tuple[str, ...]] | None:
    return None if st is None else (st.code, st.reasons)


U = Code.UNSCHEDULABLE
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def IR(name: str, requested: int, used: int, capacity: int, unresolvable: bool = False) -> InsufficientResource:
    reason = "Too many pods" if name == "pods" else f"Insufficient {name}"
    return InsufficientResource(name, reason, requested, used, capacity, unresolvable)


# --------------------------------------------------------------------------- Filter

# The node of upstream's TestEnoughRequests: cpu 10m, memory 20, pods 32, example.com/aaa 5,
# ephemeral-storage 20, hugepages-2Mi 5.
def enough_node() -> Node:
    return make_node("n", cpu="10m", memory="20", pods=32,
                     allocatable={EXT_A: 5, "ephemeral-storage": 20, HUGE_A: 5})


def P(*containers: Any, **kw: Any) -> Pod:
    return pod(*containers, **kw)


ENOUGH_CASES: list[tuple[str, Pod, dict[str, Any], dict[str, Any], Any, list[InsufficientResource]]] = [
    # (name, pod, existing pod requests, args, want status, want insufficient resources)
    ("no resources requested always fits", P(), res(10, 20), {}, None, []),
    ("too many resources fails", P(res(1, 1)), res(10, 20), {},
     (U, ("Insufficient cpu", "Insufficient memory")), [IR("cpu", 1, 10, 10), IR("memory", 1, 20, 20)]),
    ("too many resources fails due to init container cpu", P(res(1, 1), init=(res(3, 1),)), res(8, 19), {},
     (U, ("Insufficient cpu",)), [IR("cpu", 3, 8, 10)]),
    ("too many resources fails due to highest init container cpu",
     P(res(1, 1), init=(res(3, 1), res(2, 1))), res(8, 19), {}, (U, ("Insufficient cpu",)), [IR("cpu", 3, 8, 10)]),
    ("too many resources fails due to init container memory", P(res(1, 1), init=(res(1, 3),)), res(9, 19), {},
     (U, ("Insufficient memory",)), [IR("memory", 3, 19, 20)]),
    ("too many resources fails due to highest init container memory",
     P(res(1, 1), init=(res(1, 3), res(1, 2))), res(9, 19), {},
     (U, ("Insufficient memory",)), [IR("memory", 3, 19, 20)]),
    ("init container fits because it's the max, not sum, of containers and init containers",
     P(res(1, 1), init=(res(1, 1),)), res(9, 19), {}, None, []),
    ("multiple init containers fit because it's the max, not sum, of containers and init containers",
     P(res(1, 1), init=(res(1, 1), res(1, 1))), res(9, 19), {}, None, []),
    ("both resources fit", P(res(1, 1)), res(5, 5), {}, None, []),
    ("one resource memory fits", P(res(2, 1)), res(9, 5), {}, (U, ("Insufficient cpu",)), [IR("cpu", 2, 9, 10)]),
    ("one resource cpu fits", P(res(1, 2)), res(5, 19), {},
     (U, ("Insufficient memory",)), [IR("memory", 2, 19, 20)]),
    ("equal edge case", P(res(5, 1)), res(5, 19), {}, None, []),
    ("equal edge case for init container", P(res(4, 1), init=(res(5, 1),)), res(5, 19), {}, None, []),
    ("extended resource fits", P(res(ext_a=1)), {}, {}, None, []),
    ("extended resource fits for init container", P(None, init=(res(ext_a=1),)), {}, {}, None, []),
    ("extended resource capacity enforced", P(res(1, 1, ext_a=10)), res(0, 0, ext_a=0), {},
     (UU, (f"Insufficient {EXT_A}",)), [IR(EXT_A, 10, 0, 5, True)]),
    ("extended resource capacity enforced for init container", P(None, init=(res(1, 1, ext_a=10),)),
     res(0, 0, ext_a=0), {}, (UU, (f"Insufficient {EXT_A}",)), [IR(EXT_A, 10, 0, 5, True)]),
    ("extended resource allocatable enforced", P(res(1, 1, ext_a=1)), res(0, 0, ext_a=5), {},
     (U, (f"Insufficient {EXT_A}",)), [IR(EXT_A, 1, 5, 5)]),
    ("extended resource allocatable enforced for init container", P(None, init=(res(1, 1, ext_a=1),)),
     res(0, 0, ext_a=5), {}, (U, (f"Insufficient {EXT_A}",)), [IR(EXT_A, 1, 5, 5)]),
    ("extended resource allocatable enforced for multiple containers",
     P(res(1, 1, ext_a=3), res(1, 1, ext_a=3)), res(0, 0, ext_a=2), {},
     (UU, (f"Insufficient {EXT_A}",)), [IR(EXT_A, 6, 2, 5, True)]),
    ("extended resource allocatable admits multiple init containers",
     P(None, init=(res(1, 1, ext_a=3), res(1, 1, ext_a=3))), res(0, 0, ext_a=2), {}, None, []),
    ("extended resource allocatable enforced for multiple init containers",
     P(None, init=(res(1, 1, ext_a=6), res(1, 1, ext_a=3))), res(0, 0, ext_a=2), {},
     (UU, (f"Insufficient {EXT_A}",)), [IR(EXT_A, 6, 2, 5, True)]),
    ("extended resource allocatable enforced for unknown resource", P(res(1, 1, ext_b=1)), res(0, 0), {},
     (UU, (f"Insufficient {EXT_B}",)), [IR(EXT_B, 1, 0, 0, True)]),
    ("extended resource allocatable enforced for unknown resource for init container",
     P(None, init=(res(1, 1, ext_b=1),)), res(0, 0), {}, (UU, (f"Insufficient {EXT_B}",)), [IR(EXT_B, 1, 0, 0, True)]),
    ("kubernetes.io resource capacity enforced", P(res(1, 1, k8s_a=10)), res(0, 0), {},
     (UU, (f"Insufficient {K8S_IO_A}",)), [IR(K8S_IO_A, 10, 0, 0, True)]),
    ("kubernetes.io resource capacity enforced for init container", P(None, init=(res(1, 1, k8s_b=10),)),
     res(0, 0), {}, (UU, (f"Insufficient {K8S_IO_B}",)), [IR(K8S_IO_B, 10, 0, 0, True)]),
    ("hugepages resource capacity enforced", P(res(1, 1, huge_a=10)), res(0, 0, huge_a=0), {},
     (UU, (f"Insufficient {HUGE_A}",)), [IR(HUGE_A, 10, 0, 5, True)]),
    ("hugepages resource capacity enforced for init container", P(None, init=(res(1, 1, huge_a=10),)),
     res(0, 0, huge_a=0), {}, (UU, (f"Insufficient {HUGE_A}",)), [IR(HUGE_A, 10, 0, 5, True)]),
    ("hugepages resource allocatable enforced for multiple containers",
     P(res(1, 1, huge_a=3), res(1, 1, huge_a=3)), res(0, 0, huge_a=2), {},
     (UU, (f"Insufficient {HUGE_A}",)), [IR(HUGE_A, 6, 2, 5, True)]),
    ("skip checking ignored extended resource", P(res(1, 1, ext_b=1)), res(0, 0),
     {"ignoredResources": [EXT_B]}, None, []),
    ("resources + pod overhead fits", P(res(1, 1), overhead={"cpu": "3m", "memory": "13"}), res(5, 5), {},
     None, []),
    ("requests + overhead does not fit for memory", P(res(1, 1), overhead={"cpu": "1m", "memory": "15"}),
     res(5, 5), {}, (U, ("Insufficient memory",)), [IR("memory", 16, 5, 20)]),
    ("skip checking ignored extended resource via resource groups", P(res(1, 1, ext_b=1, k8s_a=1)), res(0, 0),
     {"ignoredResourceGroups": ["example.com"]},
     (UU, (f"Insufficient {K8S_IO_A}",)), [IR(K8S_IO_A, 1, 0, 0, True)]),
    ("skip checking extended resource request with quantity zero via resource groups",
     P(res(1, 1, ext_a=0)), res(0, 0, ext_a=6), {}, None, []),
    ("skip checking resource request with quantity zero", P(res(ext_a=1)), res(20, 30, ext_a=1), {}, None, []),
    ("both pod-level and container-level resources fit", P(res(1, 1), pod_level=res(1, 2)), res(5, 5), {},
     None, []),
    ("pod-level cpu resource not fit", P(res(1, 1), pod_level=res(7, 2)), res(5, 5), {},
     (U, ("Insufficient cpu",)), [IR("cpu", 7, 5, 10)]),
    ("pod-level memory resource not fit", P(res(1, 1), pod_level=res(3, 2)), res(5, 19), {},
     (U, ("Insufficient memory",)), [IR("memory", 2, 19, 20)]),
    ("pod-level hugepages resource fit", P(pod_level=res(3, 2, huge_a=5)), {}, {}, None, []),
    ("both pod-level and container-level hugepages resource fit",
     P(res(1, 1, huge_a=3), pod_level=res(3, 2, huge_a=5)), {}, {}, None, []),
    ("pod-level hugepages resource not fit", P(pod_level=res(3, 2, huge_a=10)), {}, {},
     (UU, (f"Insufficient {HUGE_A}",)), [IR(HUGE_A, 10, 0, 5, True)]),
    ("one pod-level cpu resource fits and all init and non-init containers resources fit",
     P(res(1, 1), init=(res(1, 1),), pod_level=res(3, 2)), res(5, 19), {},
     (U, ("Insufficient memory",)), [IR("memory", 2, 19, 20)]),
    # Upstream's "extended resource backed by DRA not enabled": a resource no node offers.
    ("extended resource no node has", P(res(1, 1, ext=1)), res(0, 0), {},
     (UU, (f"Insufficient {EXT_RES}",)), [IR(EXT_RES, 1, 0, 0, True)]),
]


@pytest.mark.parametrize(("name", "p", "existing", "args", "want", "want_ir"), ENOUGH_CASES,
                         ids=[c[0] for c in ENOUGH_CASES])
def test_enough_requests(name: str, p: Pod, existing: dict[str, Any], args: dict[str, Any], want: Any,
                         want_ir: list[InsufficientResource]) -> None:
    others = [pod(existing, node_name="n")]
    r = PluginRunner([FIT], [enough_node()], others, args={FIT: args} if args else None)
    got = r.filter(p)["n"]  # also checks filter_nodes agrees
    assert status_tuple(got) == want
    ni = r.snapshot.get("n")
    assert ni is not None
    assert fits_request(PodInfo(p), ni, args.get("ignoredResources", ()),
                        args.get("ignoredResourceGroups", ())) == want_ir


NOT_ENOUGH_CASES = [
    ("even without specified resources, predicate fails when there's no space for additional pod",
     P(), res(10, 20)),
    ("even if both resources fit, predicate fails when there's no space for additional pod",
     P(res(1, 1)), res(5, 5)),
    ("even for equal edge case, predicate fails when there's no space for additional pod",
     P(res(5, 1)), res(5, 19)),
    ("even for equal edge case, predicate fails when there's no space for additional pod due to init container",
     P(res(5, 1), init=(res(5, 1),)), res(5, 19)),
]


@pytest.mark.parametrize(("name", "p", "existing"), NOT_ENOUGH_CASES, ids=[c[0] for c in NOT_ENOUGH_CASES])
def test_not_enough_requests(name: str, p: Pod, existing: dict[str, Any]) -> None:
    n = make_node("n", cpu="10m", memory="20", pods=1, allocatable={EXT_A: 0, "ephemeral-storage": 0, HUGE_A: 0})
    r = PluginRunner([FIT], [n], [pod(existing, node_name="n")])
    assert status_tuple(r.filter(p)["n"]) == (U, ("Too many pods",))
    ni = r.snapshot.get("n")
    assert ni is not None
    assert fits(p, ni)[0] == IR("pods", 1, 1, 1)


STORAGE_CASES = [
    ("empty storage requested, and pod fits", P(res(1, 1)), res(2, 10), None),
    ("storage ephemeral local storage request exceeds allocatable", P(res(eph=25)), res(2, 2),
     (UU, ("Insufficient ephemeral-storage",))),
    ("ephemeral local storage is sufficient", P(res(eph=5)), res(2, 2, eph=10), None),
    ("pod fits", P(res(eph=10)), res(2, 2), None),
    # Not upstream's table: enough in total, but not with what the other pod uses.
    ("ephemeral storage taken by another pod", P(res(eph=15)), res(2, 2, eph=10),
     (U, ("Insufficient ephemeral-storage",))),
]


@pytest.mark.parametrize(("name", "p", "existing", "want"), STORAGE_CASES, ids=[c[0] for c in STORAGE_CASES])
def test_storage_requests(name: str, p: Pod, existing: dict[str, Any], want: Any) -> None:
    r = PluginRunner([FIT], [enough_node()], [pod(existing, node_name="n")])
    assert status_tuple(r.filter(p)["n"]) == want


SIDECAR_CASES = [
    ("pod without restartable init containers", P(None), None),
    ("pod with restartable init containers", P(None, sidecars=(None,)), None),
    ("total requested resources do not exceed the node's allocatable", P(res(1), sidecars=(res(1),)), None),
    ("total requested resources exceed the node's allocatable", P(res(1), sidecars=(res(2),)),
     (UU, ("Insufficient cpu",))),
]


@pytest.mark.parametrize(("name", "p", "want"), SIDECAR_CASES, ids=[c[0] for c in SIDECAR_CASES])
def test_restartable_init_containers(name: str, p: Pod, want: Any) -> None:
    # SidecarContainers is GA: PreFilter never rejects sidecars; their requests add up.
    n = make_node("n", cpu="2m", memory="0", pods=1)
    r = PluginRunner([FIT], [n])
    _, _, st = r.pre_filter(p)
    assert st is None
    assert status_tuple(r.filter(p)["n"]) == want


def test_filter_without_prefilter_is_an_error() -> None:
    fit = Fit()
    st = fit.filter(CycleState(), pod(), NodeInfo(node(cpu="1", mem="1")))
    assert st is not None and st.code == Code.ERROR
    assert st.message() == f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found'


def test_prefilter_never_skips_and_returns_no_node_subset() -> None:
    r = PluginRunner([FIT], [node(cpu="1", mem="1Gi")])
    state, result, st = r.pre_filter(pod())
    assert result is None and st is None
    assert FIT not in state.skip_filter_plugins


def test_unresolvable_only_when_request_alone_exceeds_allocatable() -> None:
    """Upstream 1.36: preemption can't help when the request alone is larger than the node."""
    nodes = [node("big", cpu="4", mem="4Gi"), node("small", cpu="1", mem="4Gi")]
    others = [pod(res(3000, 1024), node_name="big"), pod(res(500), node_name="small")]
    r = PluginRunner([FIT], nodes, others)
    got = r.filter(pod(res(2000)))
    assert status_tuple(got["big"]) == (U, ("Insufficient cpu",))
    assert status_tuple(got["small"]) == (UU, ("Insufficient cpu",))
    # One unresolvable resource makes the whole status unresolvable; all reasons are kept.
    got = r.filter(pod(res(2000, 5 * 1024**3)))
    assert status_tuple(got["big"]) == (UU, ("Insufficient cpu", "Insufficient memory"))


def test_too_many_pods_with_other_reasons_keeps_order() -> None:
    r = PluginRunner([FIT], [make_node("n", cpu="1", memory="1Gi", pods=1)], [pod(res(900), node_name="n")])
    got = r.filter(pod(res(200, ext_a=1)))["n"]
    assert status_tuple(got) == (UU, ("Too many pods", "Insufficient cpu", f"Insufficient {EXT_A}"))


def test_filter_nodes_with_resource_only_some_nodes_have() -> None:
    nodes = [node("gpu", cpu="8", mem="16Gi", gpu=4), node("plain", cpu="8", mem="16Gi"),
             node("full", cpu="8", mem="16Gi", gpu=2)]
    r = PluginRunner([FIT], nodes, [pod(res(100, gpu=2), node_name="full")])
    got = r.filter(pod(res(1000, gpu=2)))
    assert got["gpu"] is None
    assert status_tuple(got["plain"]) == (UU, ("Insufficient nvidia.com/gpu",))
    assert status_tuple(got["full"]) == (U, ("Insufficient nvidia.com/gpu",))
    fit = r.fw.plugins[FIT]
    state, _, _ = r.pre_filter(pod(res(1000, gpu=2)))
    mask = fit.filter_nodes(state, pod(res(1000, gpu=2)), r.snapshot, r.snapshot.order)  # type: ignore[attr-defined]
    assert [bool(x) for x in mask] == [n.name == "gpu" for n in r.snapshot.all_nodes()]


def test_filter_nodes_with_resource_no_node_has() -> None:
    r = PluginRunner([FIT], [node("a", cpu="8", mem="16Gi"), node("b", cpu="8", mem="16Gi")])
    p = pod(res(100, ext_b=1))
    width = len(r.snapshot.table.cols)
    got = r.filter(p)
    assert all(status_tuple(s) == (UU, (f"Insufficient {EXT_B}",)) for s in got.values())
    assert len(r.snapshot.table.cols) == width  # filtering does not grow the node table
    # Ignoring the resource lets the pod through, on both forms.
    r2 = PluginRunner([FIT], [node("a", cpu="8", mem="16Gi")], args={FIT: {"ignoredResources": [EXT_B]}})
    assert r2.filter(p) == {"a": None}


def test_ignored_resources_apply_to_extended_resources_only() -> None:
    reqs = {"cpu": 1, HUGE_A: 2, K8S_IO_A: 3, EXT_A: 4, EXT_B: 5, "pods": 1, "storage": 7, "memory": 0}
    checks = request_checks(reqs, ignored_resources={HUGE_A, K8S_IO_A, EXT_A},
                            ignored_resource_groups={"kubernetes.io", "example.com"})
    # hugepages and kubernetes.io names are never ignored; pods/storage are not checked at all.
    assert checks == (("cpu", 1), (HUGE_A, 2), (K8S_IO_A, 3))
    assert request_checks(reqs) == (("cpu", 1), (HUGE_A, 2), (K8S_IO_A, 3), (EXT_A, 4), (EXT_B, 5))


def test_fits_request_accepts_requests_mapping_and_pod_info() -> None:
    ni = NodeInfo(node(cpu="1", mem="1Gi"))
    ni.add_pod(PodInfo(pod(res(600), node_name="n")))
    p = pod(res(500))
    assert fits_request({"cpu": 500}, ni) == [IR("cpu", 500, 600, 1000)]
    assert fits_request(PodInfo(p), ni) == [IR("cpu", 500, 600, 1000)]
    assert fits_request({"cpu": 400}, ni) == []
    assert fits(p, ni) == [IR("cpu", 500, 600, 1000)]


def test_filter_with_nominated_pods_uses_cloned_node_info() -> None:
    """The runtime's two-pass filter adds nominated pods to a clone; Filter must see them."""
    r = PluginRunner([FIT], [node("n", cpu="1", mem="1Gi")])
    ni = r.snapshot.get("n")
    assert ni is not None
    state, _, _ = r.pre_filter(pod(res(600)))
    clone = ni.clone()
    clone.add_pod(PodInfo(pod(res(500), nominated="n")))
    fit = r.fw.plugins[FIT]
    assert fit.filter(state, pod(res(600)), ni) is None  # type: ignore[attr-defined]
    assert status_tuple(fit.filter(state, pod(res(600)), clone)) == (U, ("Insufficient cpu",))  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- Score

def C(cpu: str | int | None = None, mem: str | int | None = None, **extra: Any) -> dict[str, Any]:
    """Requests in upstream's st.MakePod().Req(...) notation (cpu "1000" is 1000 cores)."""
    out: dict[str, Any] = {}
    if cpu is not None:
        out["cpu"] = str(cpu)
    if mem is not None:
        out["memory"] = str(mem)
    for k, v in extra.items():
        out[_EXTRA[k]] = str(v)
    return out


def N(name: str, cpu: Any = None, mem: Any = None, **extra: Any) -> Node:
    """st.MakeNode().Capacity(...): the given resources plus pods 32."""
    return node(name, cpu=None if cpu is None else str(cpu), mem=None if mem is None else str(mem), **extra)


def score_all(plugins: list[str], nodes: list[Node], existing: list[Pod], p: Pod,
              args: dict[str, Any] | None = None) -> dict[str, dict[str, int]]:
    r = PluginRunner(plugins, nodes, existing, args=args)
    return r.score(p)


def ss(typ: str, resources: list[tuple[str, int]] | None = None, shape: list[tuple[int, int]] | None = None
       ) -> dict[str, Any]:
    d: dict[str, Any] = {"type": typ}
    if resources is not None:
        d["resources"] = [{"name": n, "weight": w} for n, w in resources]
    if shape is not None:
        d["requestedToCapacityRatio"] = {"shape": [{"utilization": u, "score": s} for u, s in shape]}
    return {"scoringStrategy": d}


DEFAULT_RES = [("cpu", 1), ("memory", 1)]
EXT_SET = [("cpu", 1), ("memory", 1), (EXT_RES, 1)]
TWO_NODES = [N("node1", 4000, 10000), N("node2", 6000, 10000)]
BIG_NODES = [N("node1", 10000, 20000), N("node2", 10000, 20000)]


def _fit_score_cases() -> list[tuple[str, dict[str, Any], list[Node], list[Pod], Pod, list[int]]]:
    ex = [pod(C(2000, 4000), node_name="node1"), pod(C(1000, 2000), node_name="node2")]
    big = pod(C(3000, 5000))
    small = pod(C(1000, 2000))
    sidecar_ex = [pod(C(1000, 2000), sidecars=(C(1000, 2000),), node_name="node1"),
                  pod(C(1000, 2000), node_name="node2")]
    same = [N("node1", 4000, 10000), N("node2", 4000, 10000)]
    return [
        ("RequestedToCapacityRatio case1", ss("RequestedToCapacityRatio", DEFAULT_RES, [(0, 10), (100, 0)]),
         TWO_NODES, ex, big, [10, 32]),
        ("RequestedToCapacityRatio case2", ss("RequestedToCapacityRatio", DEFAULT_RES, [(0, 0), (100, 10)]),
         TWO_NODES, ex, big, [95, 68]),
        ("MostAllocated", ss("MostAllocated", DEFAULT_RES), TWO_NODES, ex, small, [67, 36]),
        ("LeastAllocated", ss("LeastAllocated", DEFAULT_RES), TWO_NODES, ex, small, [32, 63]),
        ("MostAllocated with sidecar container", ss("MostAllocated", DEFAULT_RES), same, sidecar_ex, small,
         [67, 45]),
        ("LeastAllocated with sidecar container", ss("LeastAllocated", DEFAULT_RES), same, sidecar_ex, small,
         [32, 55]),
    ]


FIT_SCORE_CASES = _fit_score_cases()


@pytest.mark.parametrize(("name", "args", "nodes", "existing", "p", "want"), FIT_SCORE_CASES,
                         ids=[c[0] for c in FIT_SCORE_CASES])
def test_fit_score(name: str, args: dict[str, Any], nodes: list[Node], existing: list[Pod], p: Pod,
                   want: list[int]) -> None:
    r = PluginRunner([FIT], nodes, existing, args={FIT: args})
    assert list(r.score(p)[FIT].values()) == want
    # Without PreScore (upstream's "... if PreScore is not called"), both forms.
    fit = r.fw.plugins[FIT]
    assert [fit.score(CycleState(), p, ni)[0] for ni in r.snapshot.all_nodes()] == want  # type: ignore[attr-defined]
    assert fit.score_nodes(CycleState(), p, r.snapshot, r.snapshot.order).tolist() == want  # type: ignore[attr-defined]


def _least_cases() -> list[tuple[str, list[tuple[str, int]] | None, list[Node], list[Pod], Pod, list[int]]]:
    two_c = pod(C(1000, 2000), C(2000, 3000))
    none = pod()
    return [
        ("nothing scheduled, nothing requested", DEFAULT_RES, [N("node1", 4000, 10000), N("node2", 4000, 10000)],
         [], none, [100, 100]),
        ("nothing scheduled, resources requested, differently sized nodes", DEFAULT_RES, TWO_NODES, [], two_c,
         [37, 50]),
        ("resources not set default to cpu and memory", None, TWO_NODES, [], two_c, [37, 50]),
        ("no resources requested, pods scheduled", DEFAULT_RES, [N("node1", 4000, 10000), N("node2", 4000, 10000)],
         [pod(node_name="node1"), pod(node_name="node1"), pod(node_name="node2"), pod(node_name="node2")],
         none, [100, 100]),
        ("no resources requested, pods scheduled with resources", DEFAULT_RES, BIG_NODES,
         [pod(C(3000, 0), node_name="node1"), pod(C(3000, 0), node_name="node1"),
          pod(C(3000, 0), node_name="node2"), pod(C(3000, 5000), node_name="node2")], none, [70, 57]),
        ("resources requested, pods scheduled with resources", DEFAULT_RES, BIG_NODES,
         [pod(C(3000, 0), node_name="node1"), pod(C(3000, 5000), node_name="node2")], two_c, [57, 45]),
        ("resources requested, pods scheduled with resources, differently sized nodes", DEFAULT_RES,
         [N("node1", 10000, 20000), N("node2", 10000, 50000)],
         [pod(C(3000, 0), node_name="node1"), pod(C(3000, 5000), node_name="node2")], two_c, [57, 60]),
        ("requested resources exceed node capacity", DEFAULT_RES,
         [N("node1", 4000, 10000), N("node2", 4000, 10000)],
         [pod(C(3000, 0), node_name="node1"), pod(C(3000, 5000), node_name="node2")], pod(C(3000, 0)), [50, 25]),
        ("zero node resources, pods scheduled with resources", DEFAULT_RES,
         [node("node1", pods=None), node("node2", pods=None)],
         [pod(C(3000, 0), node_name="node1"), pod(C(3000, 5000), node_name="node2")], none, [0, 0]),
        ("resources requested with different weight on CPU and memory", [("memory", 2), ("cpu", 1)], TWO_NODES,
         [], two_c, [41, 50]),
        ("bypass extended resource if the pod does not request", EXT_SET,
         [N("node1", 6000, 10000), N("node2", 6000, 10000, ext=4)], [], two_c, [50, 50]),
        ("honor extended resource if the pod requests", EXT_SET,
         [N("node1", 6000, 10000, ext=4), N("node2", 6000, 10000, ext=10)], [], pod(C(3000, 5000, ext=2)),
         [50, 60]),
        ("if the node doesn't have a resource", [(EXT_RES, 2), ("cpu", 1), ("memory", 1)],
         [N("node1", 6000, 10000), N("node2", 6000, 10000, ext=4)], [], pod(C(3000, 4000)), [55, 55]),
    ]


def _most_cases() -> list[tuple[str, list[tuple[str, int]] | None, list[Node], list[Pod], Pod, list[int]]]:
    two_c = pod(C(1000, 2000), C(2000, 3000))
    return [
        ("nothing scheduled, nothing requested", DEFAULT_RES, [N("node1", 4000, 10000), N("node2", 4000, 10000)],
         [], pod(), [0, 0]),
        ("nothing scheduled, resources requested, differently sized nodes", DEFAULT_RES, TWO_NODES, [], two_c,
         [62, 50]),
        ("no resources requested, pods scheduled with resources", DEFAULT_RES, BIG_NODES,
         [pod(C(3000, 0), node_name="node1"), pod(C(3000, 0), node_name="node1"),
          pod(C(3000, 0), node_name="node2"), pod(C(3000, 5000), node_name="node2")], pod(), [30, 42]),
        ("resources requested, pods scheduled with resources", DEFAULT_RES, BIG_NODES,
         [pod(C(3000, 0), node_name="node1"), pod(C(3000, 5000), node_name="node2")], two_c, [42, 55]),
        ("resources requested equal node capacity", DEFAULT_RES,
         [N("node1", 5000, 10000), N("node2", 10000, 9000)], [], pod(C(2000, 4000), C(3000, 5000)), [95, 75]),
        ("weights memory 2 cpu 1", [("memory", 2), ("cpu", 1)], TWO_NODES, [], two_c, [58, 50]),
        ("no resources requested, pods scheduled, nonzero request for resource", DEFAULT_RES,
         [N("node1", "250m", "1000Mi"), N("node2", "250m", "1000Mi")],
         [pod(None, node_name="node1"), pod(None, node_name="node1")], pod(None), [80, 30]),
        ("bypass extended resource if the pod does not request", EXT_SET,
         [N("node1", 6000, 10000), N("node2", 6000, 10000, ext=4)], [], two_c, [50, 50]),
        ("honor extended resource if the pod request", EXT_SET,
         [N("node1", 6000, 10000, ext=4), N("node2", 6000, 10000, ext=10)], [], pod(C(3000, 5000, ext=2)),
         [50, 40]),
        ("if the node doesn't have a resource", [(EXT_RES, 2), ("cpu", 1), ("memory", 1)],
         [N("node1", 6000, 10000), N("node2", 6000, 10000, ext=4)], [], pod(C(3000, 4000)), [45, 45]),
    ]


LEAST_CASES = _least_cases()
MOST_CASES = _most_cases()


@pytest.mark.parametrize(("name", "resources", "nodes", "existing", "p", "want"), LEAST_CASES,
                         ids=[c[0] for c in LEAST_CASES])
def test_least_allocated(name: str, resources: Any, nodes: list[Node], existing: list[Pod], p: Pod,
                         want: list[int]) -> None:
    got = score_all([FIT], nodes, existing, p, {FIT: ss("LeastAllocated", resources)})
    assert list(got[FIT].values()) == want


@pytest.mark.parametrize(("name", "resources", "nodes", "existing", "p", "want"), MOST_CASES,
                         ids=[c[0] for c in MOST_CASES])
def test_most_allocated(name: str, resources: Any, nodes: list[Node], existing: list[Pod], p: Pod,
                        want: list[int]) -> None:
    got = score_all([FIT], nodes, existing, p, {FIT: ss("MostAllocated", resources)})
    assert list(got[FIT].values()) == want


SHAPE_DOWN = [(0, 10), (100, 0)]


def _rtcr_cases() -> list[tuple[str, list[tuple[str, int]], list[tuple[int, int]], list[Node], list[Pod], Pod,
                                list[int]]]:
    foo = "intel.com/foo"
    bar = "intel.com/bar"
    mem = 10000 * Mi

    def ext_node(name: str, **ext: int) -> Node:
        return node(name, cpu="4", mem=str(mem), pods=None, **ext)

    n_single = [ext_node("node1", foo=8), ext_node("node2", foo=4)]
    n_multi = [ext_node("node1", foo=8, bar=4), ext_node("node2", foo=4, bar=8)]
    single = [(foo, 1)]
    multi = [(foo, 3), (bar, 5)]
    up = [(0, 0), (100, 1)]
    return [
        ("nothing scheduled, nothing requested", DEFAULT_RES, SHAPE_DOWN,
         [N("node1", 4000, 10000), N("node2", 4000, 10000)], [pod(node_name="node1"), pod(node_name="node1")],
         pod(), [100, 100]),
        ("nothing scheduled, resources requested, differently sized nodes", DEFAULT_RES, SHAPE_DOWN, TWO_NODES,
         [pod(node_name="node1"), pod(node_name="node1")], pod(C(1000, 2000), C(2000, 3000)), [38, 50]),
        ("no resources requested, pods scheduled with resources", DEFAULT_RES, SHAPE_DOWN, TWO_NODES,
         [pod(C(3000, 5000), node_name="node1"), pod(C(3000, 5000), node_name="node2")], pod(), [38, 50]),
        ("single extended: nothing scheduled, nothing requested", single, up, n_single, [], pod(), [0, 0]),
        ("single extended: pods scheduled with less resources", single, up, n_single, [pod()], pod(C(foo=2)),
         [2, 5]),
        ("single extended: on node with existing pod running", single, up, n_single,
         [pod(C(foo=2), node_name="node2")], pod(C(foo=2)), [2, 10]),
        ("single extended: pods scheduled with more resources", single, up, n_single, [pod()], pod(C(foo=4)),
         [5, 10]),
        ("multiple extended: nothing scheduled, nothing requested", multi, up, n_multi, [], pod(), [0, 0]),
        ("multiple extended: pods scheduled with less resources", multi, up, n_multi, [pod()],
         pod(C(foo=2, bar=2)), [4, 3]),
        ("multiple extended: on node with existing pod running", multi, up, n_multi,
         [pod(C(foo=4, bar=2), node_name="node2")], pod(C(foo=2, bar=2)), [4, 7]),
        ("multiple extended: pods scheduled with more resources", multi, up, n_multi, [pod()],
         pod(C(foo=4, bar=2)), [5, 5]),
    ]


RTCR_CASES = _rtcr_cases()


@pytest.mark.parametrize(("name", "resources", "shape", "nodes", "existing", "p", "want"), RTCR_CASES,
                         ids=[c[0] for c in RTCR_CASES])
def test_requested_to_capacity_ratio(name: str, resources: Any, shape: Any, nodes: list[Node],
                                     existing: list[Pod], p: Pod, want: list[int]) -> None:
    got = score_all([FIT], nodes, existing, p, {FIT: ss("RequestedToCapacityRatio", resources, shape)})
    assert list(got[FIT].values()) == want


def test_requested_to_capacity_ratio_rounds_half_away_from_zero_and_skips_zero_scores() -> None:
    # cpu 50% -> 5*10=50 (weight 1); memory 100% -> 0: left out of both sums -> 50.
    shape = [(0, 0), (50, 5), (100, 0)]
    nodes = [N("n", 4000, 1000)]
    got = score_all([FIT], nodes, [], pod(C(2000, 1000)), {FIT: ss("RequestedToCapacityRatio", DEFAULT_RES, shape)})
    assert got[FIT] == {"n": 50}
    # weights 1 and 2, scores 30 and 40 -> 110/3 = 36.67 -> 37; scores 30 and 45 -> 120/3 = 40.
    nodes = [N("a", 1000, 1000), N("b", 1000, 1000)]
    r = PluginRunner([FIT], nodes, [pod(C(0, 50), node_name="b")],
                     args={FIT: ss("RequestedToCapacityRatio", [("cpu", 1), ("memory", 2)], [(0, 0), (100, 10)])})
    assert r.score(pod(C(300, 400)))[FIT] == {"a": 37, "b": 40}
    # 2 resources scoring 25 and 30 with equal weights: 27.5 -> 28.
    r = PluginRunner([FIT], [N("a", 1000, 1000)],
                     args={FIT: ss("RequestedToCapacityRatio", DEFAULT_RES, [(0, 0), (100, 10)])})
    assert r.score(pod(C(250, 300)))[FIT] == {"a": 28}


BROKEN_LINEAR_CASES = [
    ([(10, 1), (90, 9)], [(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (19, 1), (20, 2), (89, 8), (90, 9),
                          (99, 9), (100, 9), (110, 9)]),
    ([(0, 2), (40, 10), (100, 0)], [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)]),
    ([(0, 2), (40, 2), (100, 2)], [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)]),
    # Decreasing segments truncate toward zero, as Go's integer division.
    ([(0, 100), (30, 0)], [(10, 67), (20, 34), (29, 4)]),
]


@pytest.mark.parametrize(("points", "assertions"), BROKEN_LINEAR_CASES)
def test_broken_linear_function(points: list[tuple[int, int]], assertions: list[tuple[int, int]]) -> None:
    f = build_broken_linear_function(points)
    assert [f(p) for p, _ in assertions] == [want for _, want in assertions]


NON_ZERO_CASES = [
    ("overhead only", pod(overhead={"cpu": "1", "memory": "1Mi"}), 1000, Mi),
    ("1x requestless container", pod(None), DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST),
    ("2x requestless container", pod(None, None), 2 * DEFAULT_MILLI_CPU_REQUEST, 2 * DEFAULT_MEMORY_REQUEST),
    ("request container + requestless container", pod(C(1, "1Mi"), None), 1000 + DEFAULT_MILLI_CPU_REQUEST,
     Mi + DEFAULT_MEMORY_REQUEST),
    ("container + requestless container + overhead", pod(C(1, "1Mi"), None, overhead={"cpu": "1", "memory": "1Mi"}),
     2000 + DEFAULT_MILLI_CPU_REQUEST, 2 * Mi + DEFAULT_MEMORY_REQUEST),
    ("init container + container + requestless container + overhead",
     pod(C(1, "1Mi"), None, init=(C(3),), overhead={"cpu": "1", "memory": "1Mi"}), 4000, 2 * Mi + DEFAULT_MEMORY_REQUEST),
    ("requestless init container + small init container + small container",
     pod(C("3m", 3), init=(None, C("1m", 1))), DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST),
    ("requestless init container + small init container + small container + requestless container",
     pod(C("3m", 3), None, init=(None, C("1m", 1))), 3 + DEFAULT_MILLI_CPU_REQUEST, 3 + DEFAULT_MEMORY_REQUEST),
]


@pytest.mark.parametrize(("name", "p", "cpu", "mem"), NON_ZERO_CASES, ids=[c[0] for c in NON_ZERO_CASES])
def test_score_uses_non_zero_pod_requests(name: str, p: Pod, cpu: int, mem: int) -> None:
    spec = ResourceSpec.of([("cpu", 1), ("memory", 1), ("ephemeral-storage", 1)])
    assert pod_request_list(p, spec, use_requested=False) == (cpu, mem, 0)


def test_score_request_lists_real_requests_when_use_requested() -> None:
    p = pod(None, C(1, "1Mi", gpu=2))
    spec = ResourceSpec.of([("cpu", 1), ("memory", 1), ("nvidia.com/gpu", 1), ("pods", 1)])
    assert pod_request_list(p, spec, use_requested=True) == (1000, Mi, 2, 0)
    assert pod_request_list(p, spec, use_requested=False) == (1100, Mi + DEFAULT_MEMORY_REQUEST, 2, 0)


def test_scalar_resource_names() -> None:
    assert all(is_scalar_resource_name(n) for n in (EXT_A, HUGE_A, K8S_IO_A, K8S_IO_B, "attachable-volumes-csi-x"))
    assert not any(is_scalar_resource_name(n) for n in ("cpu", "memory", "ephemeral-storage", "pods", "storage"))


def test_scoring_ephemeral_storage_uses_real_requests() -> None:
    """Ephemeral storage is scored from real requests on both sides (no non-zero default)."""
    nodes = [node("a", cpu="4", mem="8Gi", **{"ephemeral-storage": "100"}),
             node("b", cpu="4", mem="8Gi", **{"ephemeral-storage": "100"})]
    r = PluginRunner([FIT], nodes, [pod(res(eph=40), node_name="b")],
                     args={FIT: ss("LeastAllocated", [("ephemeral-storage", 1)])})
    assert r.score(pod(res(eph=10)))[FIT] == {"a": 90, "b": 50}
    # A pod without ephemeral-storage requests still scores it (it is not a scalar resource).
    assert r.score(pod(res(100)))[FIT] == {"a": 100, "b": 60}


# --------------------------------------------------------------------------- vectorized == per node

def _random_cluster(rng: random.Random, n: int) -> tuple[list[Node], list[Pod]]:
    nodes: list[Node] = []
    pods: list[Pod] = []
    for i in range(n):
        extra: dict[str, Any] = {}
        if rng.random() < 0.5:
            extra["gpu"] = rng.choice([0, 1, 2, 4, 8])
        if rng.random() < 0.3:
            extra["huge_a"] = rng.choice([0, 2 * Mi, 8 * Mi])
        if rng.random() < 0.3:
            extra["ephemeral-storage"] = rng.choice([0, 10**9, 10**11])
        cpu = rng.choice([None, "0", "500m", "2", "4", "16", "64"])
        mem = rng.choice([None, "0", "1Gi", "8Gi", "64Gi", "1000Mi"])
        nodes.append(node(f"n{i}", cpu=cpu, mem=mem, pods=rng.choice([0, 1, 3, 110]), **extra))
        for _ in range(rng.randint(0, 3)):
            reqs: dict[str, Any] = {}
            if rng.random() < 0.7:
                reqs["cpu"] = f"{rng.choice([0, 100, 250, 1000, 3000])}m"
            if rng.random() < 0.7:
                reqs["memory"] = rng.choice(["0", "128Mi", "1Gi", "4Gi"])
            if rng.random() < 0.3:
                reqs["nvidia.com/gpu"] = str(rng.choice([1, 2]))
            if rng.random() < 0.2:
                reqs["ephemeral-storage"] = str(rng.choice([10**8, 10**10]))
            pods.append(pod(reqs if reqs or rng.random() < 0.5 else None, node_name=f"n{i}"))
    return nodes, pods


def _random_pod(rng: random.Random) -> Pod:
    reqs: dict[str, Any] = {}
    if rng.random() < 0.8:
        reqs["cpu"] = f"{rng.choice([0, 50, 100, 500, 2000, 100000])}m"
    if rng.random() < 0.8:
        reqs["memory"] = rng.choice(["0", "64Mi", "512Mi", "2Gi", "100Gi"])
    if rng.random() < 0.4:
        reqs["nvidia.com/gpu"] = str(rng.choice([1, 2, 3]))
    if rng.random() < 0.2:
        reqs[HUGE_A] = str(rng.choice([2 * Mi, 4 * Mi]))
    if rng.random() < 0.2:
        reqs["ephemeral-storage"] = str(rng.choice([10**8, 10**10]))
    if rng.random() < 0.1:
        reqs[EXT_B] = "1"
    containers = [reqs if reqs else None]
    if rng.random() < 0.3:
        containers.append(None)
    return pod(*containers)


STRATEGIES = [
    ss("LeastAllocated"),
    ss("MostAllocated"),
    ss("LeastAllocated", [("cpu", 3), ("memory", 1), ("nvidia.com/gpu", 5), (HUGE_A, 2), ("ephemeral-storage", 1),
                          ("pods", 1)]),
    ss("MostAllocated", [("nvidia.com/gpu", 7), ("memory", 2)]),
    ss("RequestedToCapacityRatio", DEFAULT_RES, [(0, 0), (100, 10)]),
    ss("RequestedToCapacityRatio", [("cpu", 2), ("memory", 3), ("nvidia.com/gpu", 4)],
       [(0, 3), (20, 10), (55, 1), (100, 7)]),
]


@pytest.mark.parametrize("args", STRATEGIES, ids=lambda a: a["scoringStrategy"]["type"])
def test_random_clusters_vectorized_matches_per_node(args: dict[str, Any]) -> None:
    rng = random.Random(zlib.crc32(repr(args).encode()))
    for _ in range(8):
        nodes, pods = _random_cluster(rng, 40)
        r = PluginRunner([FIT], nodes, pods, args={FIT: args})
        for _ in range(6):
            p = _random_pod(rng)
            r.filter(p)  # asserts filter_nodes == filter on every node
            r.score(p)  # asserts score_nodes == score on every node


def test_filter_nodes_on_a_row_subset() -> None:
    rng = random.Random(7)
    nodes, pods = _random_cluster(rng, 30)
    r = PluginRunner([FIT], nodes, pods)
    fit = r.fw.plugins[FIT]
    rows = r.snapshot.order[::3]
    for _ in range(10):
        p = _random_pod(rng)
        state, _, _ = r.pre_filter(p)
        mask = fit.filter_nodes(state, p, r.snapshot, rows)  # type: ignore[attr-defined]
        per = [fit.filter(state, p, r.snapshot.infos[int(x)]) is None for x in rows]  # type: ignore[attr-defined]
        assert mask.tolist() == per
        scores = fit.score_nodes(state, p, r.snapshot, rows)  # type: ignore[attr-defined]
        assert scores.tolist() == [fit.score(state, p, r.snapshot.infos[int(x)])[0] for x in rows]  # type: ignore[attr-defined]


def test_scores_exact_beyond_int64_products() -> None:
    """Huge allocatable values: utilization and free-share math stays exact on both forms."""
    big = 2**62
    nodes = [node("a", cpu="1", mem="1Gi", **{"example.com/huge": str(big)}),
             node("b", cpu="1", mem="1Gi", **{"example.com/huge": str(big // 3)})]
    for strategy in ("LeastAllocated", "MostAllocated"):
        r = PluginRunner([FIT], nodes, [pod(C(0, 0, **{}), node_name="a")],
                         args={FIT: ss(strategy, [("example.com/huge", 1)])})
        p = make_pod("p", requests={"example.com/huge": str(big // 4)})
        got = r.score(p)[FIT]
        # b: (cap - req) * 100 / cap = 24.99..., req * 100 / cap = 75.00...
        assert got == ({"a": 75, "b": 24} if strategy == "LeastAllocated" else {"a": 25, "b": 75})
    r = PluginRunner([FIT], nodes, args={FIT: ss("RequestedToCapacityRatio", [("example.com/huge", 1)],
                                                 [(0, 0), (100, 10)])})
    assert r.score(make_pod("p", requests={"example.com/huge": str(big // 4)}))[FIT] == {"a": 25, "b": 75}


# --------------------------------------------------------------------------- arguments

def test_args_defaults_follow_v1_defaulting() -> None:
    fit = Fit({})
    assert fit.strategy == "LeastAllocated"
    assert fit.resources.names == ("cpu", "memory") and fit.resources.weights == (1, 1)
    fit = Fit({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu"},
                                                                          {"name": "memory", "weight": 0}]}})
    assert fit.resources.weights == (1, 1)
    fit = Fit({"scoringStrategy": {"type": "MostAllocated", "resources": []}})
    assert fit.resources.names == ("cpu", "memory")


@pytest.mark.parametrize(("args", "message"), [
    ({"scoringStrategy": {"type": "Bogus"}}, "scoring strategy Bogus is not supported"),
    ({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "memory", "weight": -1},
                                                                  {"name": "cpu", "weight": 1}]}},
     "scoringStrategy.resources[0].weight"),
    ({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "memory", "weight": 101}]}},
     "scoringStrategy.resources[0].weight"),
    ({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu"}, {"name": "cpu"}]}},
     "Duplicate value"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}, "at least one point must be specified"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                          "requestedToCapacityRatio": {"shape": [{"utilization": 50, "score": 1},
                                                                 {"utilization": 40, "score": 2}]}}},
     "sorted in increasing order"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                          "requestedToCapacityRatio": {"shape": [{"utilization": 50, "score": 11}]}}},
     "not in valid range [0, 10]"),
    ({"ignoredResourceGroups": ["example.com/aaa"]}, "can't contain '/'"),
])
def test_invalid_args_are_rejected(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=None) as e:
        Fit(args)
    assert message in str(e.value)


# --------------------------------------------------------------------------- events and hints

def test_events_to_register() -> None:
    evs = Fit().events_to_register()
    assert [e.event for e in evs] == [
        ClusterEvent(EventResource.POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
        ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
    ]
    assert all(callable(e.hint) for e in evs)
    # The Pod registration hears about assigned pods being deleted.
    assert evs[0].event.match(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE))
    assert not evs[1].event.match(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL))


Q = QueueingHint.QUEUE
SKIP = QueueingHint.QUEUE_SKIP


def _pod_event_cases() -> list[tuple[str, Pod, Any, Any, QueueingHint]]:
    def p(name: str, uid: str, reqs: dict[str, Any] | None = None, level: dict[str, Any] | None = None,
          node_name: str = "", nominated: str = "") -> Pod:
        if level is not None:
            return pod(name=name, uid=uid, pod_level=level, node_name=node_name, nominated=nominated)
        return pod(reqs, name=name, uid=uid, node_name=node_name, nominated=nominated)

    return [
        ("queue-on-other-pod-deleted", p("pod1", "pod1", C(1)), p("pod2", "pod2", C(1), node_name="fake"), None, Q),
        ("skip-queue-on-unscheduled-pod-deleted", p("pod1", "pod1"), p("pod2", "pod2"), None, SKIP),
        ("queue-on-nominated-pod-deleted", p("pod1", "pod1", C(1)), p("pod2", "pod2", C(1), nominated="n1"), None, Q),
        ("skip-queue-on-other-unscheduled-pod", p("pod1", "uid0", C(1)), p("pod2", "uid1", C(2)),
         p("pod2", "uid1", C(1)), SKIP),
        ("skip-queue-on-other-pod-unrelated-resource-scaled-down", p("pod1", "pod1", C(1)),
         p("pod2", "pod2", C(mem=2), node_name="fake"), p("pod2", "pod2", C(mem=1), node_name="fake"), SKIP),
        ("skip-queue-on-other-pod-unrelated-pod-level-resource-scaled-down", p("pod1", "pod1", level=C(1)),
         p("pod2", "pod2", level=C(mem=2), node_name="fake"), p("pod2", "pod2", level=C(mem=1), node_name="fake"),
         SKIP),
        ("queue-on-other-pod-some-resource-scale-down", p("pod1", "pod1", C(1)),
         p("pod2", "pod2", C(2), node_name="fake"), p("pod2", "pod2", C(1), node_name="fake"), Q),
        ("queue-on-other-pod-some-pod-level-resource-scale-down", p("pod1", "pod1", level=C(1)),
         p("pod2", "pod2", level=C(2), node_name="fake"), p("pod2", "pod2", level=C(1), node_name="fake"), Q),
        ("queue-on-target-pod-some-resource-scale-down", p("pod1", "pod1", C(1)), p("pod1", "pod1", C(2)),
         p("pod1", "pod1", C(1)), Q),
        ("queue-on-target-pod-some-pod-level-resource-scale-down", p("pod1", "pod1", level=C(1)),
         p("pod1", "pod1", level=C(2)), p("pod1", "pod1", level=C(1)), Q),
        ("queue-on-other-pod-extended-resource-scale-down", p("pod1", "pod1", C(gpu=1)),
         p("pod2", "pod2", C(gpu=2), node_name="fake"), p("pod2", "pod2", C(gpu=1), node_name="fake"), Q),
    ]


POD_EVENT_CASES = _pod_event_cases()


@pytest.mark.parametrize(("name", "target", "old", "new", "want"), POD_EVENT_CASES,
                         ids=[c[0] for c in POD_EVENT_CASES])
def test_is_schedulable_after_pod_event(name: str, target: Pod, old: Any, new: Any, want: QueueingHint) -> None:
    assert Fit().is_schedulable_after_pod_event(target, old, new) == want


@pytest.mark.parametrize(("old", "new"), [("not-a-pod", None), (None, "not-a-pod"), (None, None)])
def test_pod_event_hint_rejects_wrong_objects(old: Any, new: Any) -> None:
    # Upstream returns Queue with an error; ksched's queue treats a raising hint as Queue.
    with pytest.raises(TypeError):
        Fit().is_schedulable_after_pod_event(pod(), old, new)


def cap(**resources: Any) -> Node:
    """st.MakeNode().Capacity(...): pods 32 unless given."""
    alloc = {_EXTRA.get(k, k.replace("_", "-")): str(v) for k, v in resources.items()}
    pods = alloc.pop("pods", 32)
    return make_node("n", cpu=None, memory=None, pods=pods, allocatable=alloc)


NODE_EVENT_CASES = [
    ("skip-queue-on-node-add-without-sufficient-resources", P(res(mem=2)), None, cap(memory=1), SKIP),
    ("skip-queue-on-node-add-without-required-resource-type", P(res(ext_a=1)), None, cap(ext_b=1), SKIP),
    ("queue-on-node-add-with-sufficient-resources", P(res(mem=2, ext_a=1)), None, cap(memory=4, ext_a=2), Q),
    ("skip-queue-on-node-unrelated-changes", P(res(mem=2, ext_a=1)), cap(memory=2, ext_a=2),
     cap(memory=2, ext_a=1, ext_b=2), SKIP),
    ("queue-on-pod-requested-resources-increase", P(res(mem=2, ext_a=1)), cap(memory=2, ext_a=1),
     cap(memory=2, ext_a=2), Q),
    ("skip-queue-on-node-changes-from-suitable-to-unsuitable", P(res(mem=2, ext_a=1)), cap(memory=4, ext_a=2),
     cap(memory=1, ext_a=2), SKIP),
    ("queue-on-node-changes-from-unsuitable-to-suitable", P(res(mem=2, ext_a=1)), cap(memory=1, ext_a=2),
     cap(memory=4, ext_a=2), Q),
    ("skip-queue-on-node-add-with-no-pod-room", P(), None, cap(pods=0), SKIP),
]


@pytest.mark.parametrize(("name", "p", "old", "new", "want"), NODE_EVENT_CASES, ids=[c[0] for c in NODE_EVENT_CASES])
def test_is_schedulable_after_node_change(name: str, p: Pod, old: Any, new: Any, want: QueueingHint) -> None:
    assert Fit().is_schedulable_after_node_change(p, old, new) == want


@pytest.mark.parametrize(("old", "new"), [(None, "not-a-node"), ("not-a-node", cap())])
def test_node_event_hint_rejects_wrong_objects(old: Any, new: Any) -> None:
    with pytest.raises(TypeError):
        Fit().is_schedulable_after_node_change(pod(), old, new)


IS_FIT_CASES = [
    ("nil node", P(), None, False),
    ("insufficient resource", pod(C(2)), cap(cpu=1), False),
    ("sufficient resource", pod(C(1)), cap(cpu=2), True),
    ("insufficient pod-level resource", pod(pod_level=C(2)), cap(cpu=1), False),
    ("sufficient pod-level resource", pod(pod_level=C(2)), cap(cpu=2), True),
    ("sufficient pod-level resource hugepages", pod(pod_level={HUGE_A: "2Mi"}), cap(huge_a="2Mi"), True),
    ("insufficient pod-level resource hugepages", pod(pod_level={HUGE_A: "4Mi"}), cap(huge_a="2Mi"), False),
]


@pytest.mark.parametrize(("name", "p", "n", "want"), IS_FIT_CASES, ids=[c[0] for c in IS_FIT_CASES])
def test_is_fit(name: str, p: Pod, n: Node | None, want: bool) -> None:
    assert is_fit(p, n) is want


def _full(pods: int = 32, cpu: Any = 1, mem: Any = 1, eph: Any = 1, ext_a: Any = 1) -> Node:
    return cap(pods=pods, cpu=cpu, memory=mem, ephemeral_storage=eph, ext_a=ext_a)


INCREASED_CASES = [
    ("no-requested-resources", P(res()), _full(1), _full(1, 2, 2, 2, 2), False),
    ("no-requested-resources-pods-increased", P(res()), _full(1), _full(2), True),
    ("scalar-resources-not-in-node", P(res(2, 2, eph=2, ext_a=2)),
     cap(cpu=1, memory=2, ephemeral_storage=3), cap(cpu=1, memory=2, ephemeral_storage=1), False),
    ("requested-resources-decreased", P(res(2, 2, eph=2, ext_a=2)),
     cap(cpu=1, memory=2, ephemeral_storage=3, ext_a=4), cap(cpu=1, memory=2, ephemeral_storage=1, ext_a=1), False),
    ("requested-resources-increased", P(res(2, 2, eph=2, ext_a=2)),
     cap(cpu=1, memory=2, ephemeral_storage=3, ext_a=4), cap(cpu=3, memory=4, ephemeral_storage=3, ext_a=4), True),
    ("non-requested-resources-decreased", P(res(2, 2)),
     cap(cpu=1, memory=2, ephemeral_storage=3, ext_a=4), cap(cpu=1, memory=2, ephemeral_storage=1, ext_a=1), False),
    ("non-requested-resources-increased", P(res(2, 2)),
     cap(cpu=1, memory=2, ephemeral_storage=3, ext_a=4), cap(cpu=1, memory=2, ephemeral_storage=5, ext_a=6), False),
    ("requested-extended-resource-increased", P(res(ext_a=1)), cap(ext_a=1), cap(ext_a=2), True),
]


@pytest.mark.parametrize(("name", "p", "old", "new", "want"), INCREASED_CASES, ids=[c[0] for c in INCREASED_CASES])
def test_have_any_requested_resources_increased(name: str, p: Pod, old: Node, new: Node, want: bool) -> None:
    assert have_any_requested_resources_increased(p, old, new) is want


# --------------------------------------------------------------------------- framework integration

def test_runtime_uses_vectorized_forms_and_weights() -> None:
    nodes = [N("node1", 4000, 10000), N("node2", 6000, 10000)]
    existing = [pod(C(2000, 4000), node_name="node1"), pod(C(1000, 2000), node_name="node2")]
    r = PluginRunner([(FIT, 3)], nodes, existing)
    p = pod(C(1000, 2000))
    state, _, _ = r.pre_filter(p)
    nl = r.snapshot.all_nodes()
    assert r.fw.run_pre_score(state, p, nl) is None
    record: dict[str, Any] = {}
    total, st = r.fw.run_score(state, p, r.snapshot, nl, record)
    assert st is None
    assert total.tolist() == [96, 189]  # LeastAllocated 32 and 63, weight 3
    raw, _, weighted = record[FIT]
    assert raw.tolist() == [32, 63] and weighted.tolist() == [96, 189]
    assert isinstance(total, np.ndarray)


def test_scoring_ignores_the_incoming_pods_pod_level_resources() -> None:
    """Upstream quirk (1.36): NodeResourcesFit's scorer is built without the PodLevelResources
    gate, so the pod is scored by its containers (non-zero defaults included); Filter counts
    the pod-level requests, and so does BalancedAllocation's scorer."""
    spec = ResourceSpec.of([("cpu", 1), ("memory", 1)])
    p = pod(C("100m", "100Mi"), pod_level={"cpu": "2", "memory": "2Gi"})
    assert pod_request_list(p, spec, use_requested=False, pod_level=False) == (100, 100 * Mi)
    assert pod_request_list(p, spec, use_requested=False) == (2000, 2 * 1024 * Mi)
    bare = pod(None, pod_level={"cpu": "2", "memory": "2Gi"})  # containers without requests: the defaults
    assert pod_request_list(bare, spec, use_requested=False, pod_level=False) == (
        DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)
    # LeastAllocated on a 4-CPU / 8Gi node: (4000-100)*100//4000 = 97, (8Gi-100Mi)*100//8Gi = 98 -> 97.
    # With the pod-level requests it would be (50 + 75) // 2 = 62.
    r = PluginRunner([FIT], [node("n", cpu="4", mem="8Gi")])
    assert r.score(p)[FIT] == {"n": 97}
    assert r.filter(p) == {"n": None}
    # Filter sees the pod-level request: 2 CPUs do not fit a 1-CPU node.
    r1 = PluginRunner([FIT], [node("small", cpu="1", mem="8Gi")])
    st = r1.filter(p)["small"]
    assert st is not None and st.reasons == ("Insufficient cpu",)
