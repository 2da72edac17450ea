"""Review of NodeTable.add_pod's element-wise updates: a row kept by adding and removing pods
one by one (the cache's incremental path) equals the row written afresh from the NodeInfo (the
reference, ``NodeTable.write``), for pods the author's tests do not build: several containers,
init containers and sidecars, overhead, pod-level resources, extended resources and hugepages,
explicit zero requests, limits without requests, and removals in any order."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.scheduler.cache.node_table import NodeTable
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.testing import make_node, make_pod

_RES = ["cpu", "memory", "ephemeral-storage", "example.com/gpu", "hugepages-2Mi", "vendor.io/fpga"]
_QTY = {"cpu": ["0", "1m", "250m", "2"], "memory": ["0", "1", "64Mi", "1Gi"],
        "ephemeral-storage": ["0", "1Gi"], "example.com/gpu": ["0", "1", "3"], "hugepages-2Mi": ["0", "2Mi"],
        "vendor.io/fpga": ["0", "1"]}


@st.composite
def _resources(draw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in draw(st.lists(st.sampled_from(_RES), unique=True, max_size=3)):
        out[k] = draw(st.sampled_from(_QTY[k]))
    return out


@st.composite
def _container(draw: Any, name: str, init: bool) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "i"}
    res: dict[str, Any] = {}
    req = draw(_resources())
    if req:
        res["requests"] = req
    lim = draw(_resources())
    if lim:
        # Limits at least the requests where both name a resource (a valid pod).
        res["limits"] = {k: (req.get(k) if k in req else v) for k, v in lim.items()}
    if res:
        c["resources"] = res
    if init and draw(st.booleans()):
        c["restartPolicy"] = "Always"  # a sidecar
    return c


@st.composite
def _pod(draw: Any, i: int) -> Any:
    containers = [draw(_container(f"c{j}", False)) for j in range(draw(st.integers(1, 3)))]
    inits = [draw(_container(f"i{j}", True)) for j in range(draw(st.integers(0, 2)))]
    extra: dict[str, Any] = {}
    if draw(st.booleans()):
        extra["overhead"] = {"cpu": draw(st.sampled_from(["0", "10m"])), "memory": "1Mi"}
    spec: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        spec["resources"] = {"requests": {"cpu": draw(st.sampled_from(["0", "500m", "3"]))},
                             "limits": {"memory": "2Gi"}}
    return make_pod(f"p{i}", uid=f"u{i}", node_name="n", containers=containers, init_containers=inits or None,
                    spec=spec or None, **extra)


def _row(table: NodeTable, row: int) -> tuple[list[int], list[int]]:
    return table.req[row].tolist(), table.nz[row].tolist()


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_incremental_rows_equal_rows_written_from_the_node_info(data: Any) -> None:
    n_pods = data.draw(st.integers(1, 6))
    pods = [data.draw(_pod(i)) for i in range(n_pods)]
    node = make_node("n", allocatable={"example.com/gpu": 8, "hugepages-2Mi": "64Mi"})
    ni = NodeInfo(node)
    table = NodeTable(rows=4)
    row = 2
    table.write(row, ni)
    infos: dict[str, PodInfo] = {}
    ops = data.draw(st.lists(st.integers(0, n_pods - 1), max_size=12))
    for k in ops:
        p = pods[k]
        if p.uid in infos:
            pi = infos.pop(p.uid)
            assert ni.remove_pod(p) is pi
            table.add_pod(row, pi, -1)
        else:
            pi = infos[p.uid] = PodInfo(p)
            ni.add_pod(pi)
            table.add_pod(row, pi, 1)
        ref = NodeTable(table.cols, rows=4)
        ref.write(row, ni)
        width = max(table.req.shape[1], ref.req.shape[1])
        got_req, got_nz = _row(table, row)
        want_req, want_nz = _row(ref, row)
        assert got_req + [0] * (width - len(got_req)) == want_req + [0] * (width - len(want_req))
        assert got_nz == want_nz
    # Every pod removed again (in reverse order): the row is back to zero.
    for uid in reversed(list(infos)):
        pi = infos.pop(uid)
        ni.remove_pod(pi.pod)
        table.add_pod(row, pi, -1)
    assert not any(table.req[row].tolist()) and table.nz[row].tolist() == [0, 0]
