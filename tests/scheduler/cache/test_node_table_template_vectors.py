"""``NodeTable.add_pod`` with the vector shared by a pod's template (``TEMPLATE_VECTORS``, tkey8)
keeps the same rows as each ``PodInfo`` working out its own (the reference): replicas of random
templates added to and removed from rows, with columns appearing between them (a vector made
for fewer columns is not taken), in one table and in a second one sharing nothing."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.scheduler.test_fast_paths_agree import _cluster, _outcomes

from ksched.api.pod import Pod
from ksched.scheduler.cache import node_table
from ksched.scheduler.cache.node_table import NodeTable
from ksched.scheduler.framework import template
from ksched.scheduler.framework.template import known_template_cache, template_cache
from ksched.scheduler.framework.types import PodInfo
from ksched.scheduler.schedule_one import pod_with_node

_QTY = {"cpu": ["100m", "1", "2"], "memory": ["64Mi", "1Gi"], "example.com/gpu": ["1", "2"],
        "vendor.io/fpga": ["1"], "hugepages-2Mi": ["2Mi"]}


@st.composite
def _spec(draw: Any) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(sorted(_QTY)), unique=True, min_size=1, max_size=3))
    return {"containers": [{"name": "c", "image": "i",
                            "resources": {"requests": {k: draw(st.sampled_from(_QTY[k])) for k in names}}}]}


def _pod(spec: dict[str, Any], i: int) -> Pod:
    return Pod({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"u{i}", "labels": {"app": "a"}},
                "spec": copy.deepcopy(spec)})


def _run(specs: list[dict[str, Any]], ops: list[tuple[int, int]], shared: bool) -> tuple[Any, ...]:
    """Assume replicas (through ``template_cache``, as a scheduling cycle does, then the
    assumed copy's ``PodInfo``) on rows of two tables; remove each again after."""
    template._TEMPLATES.clear()
    template._SPEC_BYTES.clear()
    node_table.TEMPLATE_VECTORS = shared
    try:
        tables = [NodeTable(rows=2), NodeTable(rows=2)]
        added: list[tuple[NodeTable, int, PodInfo]] = []
        for i, (k, row) in enumerate(ops):
            pod = _pod(specs[k % len(specs)], i)
            template_cache(pod)
            pi = PodInfo(pod_with_node(pod, "n"))
            table = tables[row % 2]
            table.add_pod(row, pi, 1)
            added.append((table, row, pi))
        snap = tuple((t.req.tolist(), t.nz.tolist(), list(t.cols.names)) for t in tables)
        for table, row, pi in added:
            table.add_pod(row, pi, -1)
        for t in tables:
            assert not t.req.any() and not t.nz.any()
        return snap
    finally:
        node_table.TEMPLATE_VECTORS = True


@settings(max_examples=100, deadline=None)
@given(st.lists(_spec(), min_size=1, max_size=3),
       st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=10))
def test_template_vectors_keep_the_rows_of_per_pod_vectors(specs: list[dict[str, Any]],
                                                           ops: list[tuple[int, int]]) -> None:
    assert _run(specs, ops, True) == _run(specs, ops, False)


@pytest.mark.parametrize("shared", [True, False])
def test_a_replica_takes_the_templates_vector(shared: bool) -> None:
    """The second replica's new ``PodInfo`` takes the vector the first one's made (with the
    flag), and works out its own without it; a vector made before a column appeared is made
    again."""
    template._TEMPLATES.clear()
    template._SPEC_BYTES.clear()
    node_table.TEMPLATE_VECTORS = shared
    try:
        spec = {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}
        a, b = _pod(spec, 1), _pod(spec, 2)
        template_cache(a)
        template_cache(b)
        table = NodeTable(rows=2)
        pa, pb = PodInfo(a), PodInfo(b)
        table.add_pod(0, pa, 1)
        table.add_pod(1, pb, 1)
        assert (pa.table_vector is pb.table_vector) is shared
        assert pa.table_vector == pb.table_vector
        table.cols.col("example.com/new")
        pc = PodInfo(_pod(spec, 3))
        template_cache(pc.pod)
        table.add_pod(0, pc, 1)
        assert pc.table_vector[1] == len(table.cols) and pc.table_vector is not pa.table_vector
        if shared:
            assert known_template_cache(pc.pod)["node_table.vector"] is pc.table_vector
        assert table.req[0].tolist()[:1] == [2000] and table.req[1].tolist()[:1] == [1000]
    finally:
        node_table.TEMPLATE_VECTORS = True


@pytest.mark.parametrize("seed", range(2))
def test_template_vectors_place_pods_identically(seed: int) -> None:
    """Whole random simulations: the same nodes and messages with the vectors shared and not."""
    rng = random.Random(3200 + seed)
    nodes, pods = _cluster(rng)
    shared = _outcomes(True, nodes, pods, seed, None)
    node_table.TEMPLATE_VECTORS = False
    try:
        alone = _outcomes(True, nodes, pods, seed, None)
    finally:
        node_table.TEMPLATE_VECTORS = True
    assert shared == alone
    assert any(node is not None for node, _ in shared.values())
