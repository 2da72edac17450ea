"""NodeResourcesBalancedAllocation with 1.36 semantics: the score is the change in balance the pod
brings, ``50 + (50 + with - without) / 2``; best-effort pods are skipped in PreScore. Cases
ported from upstream's balanced_allocation_test.go (master after kubernetes/kubernetes#135573;
the DRA-backed extended resource cases are left out, ksched has no DRA)."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.status import Code
from ksched.scheduler.plugins.noderesources import BalancedAllocation
from ksched.scheduler.plugins.noderesources.balanced_allocation import (
    PRE_SCORE_STATE_KEY,
    _balance_vector,
    balanced_resource_score,
    balanced_resource_scorer,
)
from ksched.testing import PluginRunner, make_node, make_pod

BA = "NodeResourcesBalancedAllocation"
GPU = "nvidia.com/gpu"
THREE = {BA: {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                            {"name": GPU, "weight": 1}]}}

_n = 0


def pod(*containers: dict[str, Any] | None, node_name: str = "") -> Pod:
    """st.MakePod().Req(a).Req(b): one container per requests dict."""
    global _n
    _n += 1
    cs = []
    for i, r in enumerate(containers):
        c: dict[str, Any] = {"name": f"c{i}", "image": "img"}
        if r is not None:
            c["resources"] = {"requests": dict(r)}
        cs.append(c)
    return make_pod(f"p{_n}", uid=f"uid-ba-{_n}", containers=cs, node_name=node_name)


def cpu_only(c: str) -> dict[str, str]:
    return {"cpu": c}


def cpu_mem(c: str, m: str) -> dict[str, str]:
    return {"cpu": c, "memory": m}


def cpu_mem_gpu(c: str, m: str, g: str) -> dict[str, str]:
    return {"cpu": c, "memory": m, GPU: g}


def node(name: str, milli_cpu: int, memory: int, gpu: int | None = None) -> Node:
    """upstream's makeNode: allocatable cpu/memory (and gpu), no pod count."""
    extra = {GPU: gpu} if gpu is not None else None
    return make_node(name, cpu=f"{milli_cpu}m", memory=str(memory), pods=None, allocatable=extra)


TWO_CONTAINERS = (cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000"))

CASES: list[tuple[str, Pod, list[Node], list[Pod], dict[str, Any] | None, list[int]]] = [
    # Node1 cpu 0 -> 75%, memory 0 -> 50%: balance 100 -> 87: 50 + (50 + 87 - 100) / 2 = 68.
    # Node2 cpu 0 -> 50%, memory 0 -> 50%: balance 100 -> 100: 75.
    ("nothing scheduled, resources requested, differently sized nodes", pod(*TWO_CONTAINERS),
     [node("node1", 4000, 10000), node("node2", 6000, 10000)], [], None, [68, 75]),
    # Node1 cpu 30% -> 60%, memory 0 -> 25%: 85 -> 82: 73. Node2 cpu 30 -> 60, memory 25 -> 50: 97 -> 95: 74.
    ("resources requested, pods scheduled with resources", pod(*TWO_CONTAINERS),
     [node("node1", 10000, 20000), node("node2", 10000, 20000)],
     [pod(cpu_only("1000m"), cpu_only("2000m"), node_name="node1"), pod(*TWO_CONTAINERS, node_name="node2")],
     None, [73, 74]),
    # Node2 memory 5000 -> 10000 of 50000 (10% -> 20%): 90 -> 80: 70.
    ("resources requested, pods scheduled with resources, differently sized nodes", pod(*TWO_CONTAINERS),
     [node("node1", 10000, 20000), node("node2", 10000, 50000)],
     [pod(cpu_only("1000m"), cpu_only("2000m"), node_name="node1"), pod(*TWO_CONTAINERS, node_name="node2")],
     None, [73, 70]),
    # Node1 cpu 100% -> 100%, memory 0 -> 100%: 50 -> 100: 100. Node2 cpu 0, memory 0 -> 100%: 100 -> 50: 50.
    ("resources requested, pods scheduled with resources, nodes to reach min/max score",
     pod({"memory": "2000"}, {"memory": "3000"}), [node("node1", 3000, 5000), node("node2", 3000, 5000)],
     [pod(cpu_only("1000m"), cpu_only("2000m"), node_name="node1")], None, [100, 50]),
    # Node1 cpu 50% -> 100%, memory 0: 75 -> 50: 62. Node2 cpu 50 -> 100, memory 50: 100 -> 75: 62.
    ("requested resources at node capacity", pod(cpu_only("1000m"), cpu_only("2000m")),
     [node("node1", 6000, 10000), node("node2", 6000, 10000)],
     [pod(cpu_only("1000m"), cpu_only("2000m"), node_name="node1"), pod(*TWO_CONTAINERS, node_name="node2")],
     None, [62, 62]),
    # Three resources: node1 gpu 3 -> 4 of 8: 69 -> 70: 75. Node2 gpu 0 -> 1 of 8: 62 -> 65: 76.
    ("scalar resource is included in the score computation if pod requests the scalar resource",
     pod(cpu_mem_gpu("0", "0", "1")), [node("node1", 3500, 40000, gpu=8), node("node2", 3500, 40000, gpu=8)],
     [pod(cpu_mem("1000m", "2000"), cpu_mem_gpu("2000m", "3000", "3"), node_name="node1"),
      pod(*TWO_CONTAINERS, node_name="node2")], THREE, [75, 76]),
    # gpu is left out (not requested): cpu 0 -> 85.7%, memory 0 -> 12.5%: 100 -> 63: 56 on both.
    ("scalar resource is not included in the score computation if pod doesn't request the scalar resource",
     pod(*TWO_CONTAINERS), [node("node1", 3500, 40000, gpu=8), node("node2", 3500, 40000)], [], THREE, [56, 56]),
]


@pytest.mark.parametrize(("name", "p", "nodes", "existing", "args", "want"), CASES, ids=[c[0] for c in CASES])
def test_balanced_allocation(name: str, p: Pod, nodes: list[Node], existing: list[Pod], args: Any,
                             want: list[int]) -> None:
    r = PluginRunner([BA], nodes, existing, args=args)
    assert list(r.score(p)[BA].values()) == want  # also checks score_nodes == score
    # Whether or not PreScore ran, the result is the same (upstream's "if PreScore not called").
    ba = r.fw.plugins[BA]
    assert [ba.score(CycleState(), p, ni)[0] for ni in r.snapshot.all_nodes()] == want  # type: ignore[attr-defined]
    assert ba.score_nodes(CycleState(), p, r.snapshot, r.snapshot.order).tolist() == want  # type: ignore[attr-defined]


def test_best_effort_pod_is_skipped_in_pre_score() -> None:
    r = PluginRunner([BA], [node("node1", 4000, 10000), node("node2", 4000, 10000)])
    p = make_pod("be", containers=[])
    state = CycleState()
    st = r.fw.plugins[BA].pre_score(state, p, r.snapshot.all_nodes())  # type: ignore[attr-defined]
    assert st is not None and st.code == Code.SKIP
    assert state.get(PRE_SCORE_STATE_KEY) is None
    # Through the framework: the plugin is skipped for this cycle.
    assert r.score(p)[BA] == {}
    state = CycleState()
    assert r.fw.run_pre_score(state, p, r.snapshot.all_nodes()) is None
    assert BA in state.skip_score_plugins
    # Score without PreScore gives 0 for such pods, on both forms.
    ba = r.fw.plugins[BA]
    assert [ba.score(CycleState(), p, ni)[0] for ni in r.snapshot.all_nodes()] == [0, 0]  # type: ignore[attr-defined]
    assert ba.score_nodes(CycleState(), p, r.snapshot, r.snapshot.order).tolist() == [0, 0]  # type: ignore[attr-defined]


def test_best_effort_means_no_request_of_the_configured_resources() -> None:
    r = PluginRunner([BA], [node("node1", 4000, 10000)])
    ba = r.fw.plugins[BA]
    # Containers without requests (non-zero defaults are not used here) and explicit zeros.
    for p in (pod(None, None), pod(cpu_mem("0", "0")), pod({"ephemeral-storage": "1Gi"})):
        assert ba.pre_score(CycleState(), p, r.snapshot.all_nodes()).code == Code.SKIP  # type: ignore[attr-defined]
    # A gpu-only pod is not best effort when gpu is configured.
    r = PluginRunner([BA], [node("node1", 4000, 10000, gpu=4)], args=THREE)
    ba = r.fw.plugins[BA]
    assert ba.pre_score(CycleState(), pod({GPU: "1"}), r.snapshot.all_nodes()) is None  # type: ignore[attr-defined]
    # cpu 0, memory 0, gpu 0 -> 1/4: balance 100 -> 88 (std of 0, 0, .25 = .1179): 50 + 38 / 2 = 69.
    assert r.score(pod({GPU: "1"}))[BA] == {"node1": 69}


def test_uses_real_requests_not_non_zero_defaults() -> None:
    # Existing pods without requests add nothing (non-zero defaults would add 100m/200Mi each).
    nodes = [node("a", 1000, 1000 * 1024 * 1024), node("b", 1000, 1000 * 1024 * 1024)]
    existing = [pod(None, node_name="b"), pod(None, node_name="b")]
    r = PluginRunner([BA], nodes, existing)
    got = r.score(pod(cpu_mem("500m", "500Mi")))[BA]
    assert got["a"] == got["b"] == 75  # 50% / 50% from an empty node on both


def test_balance_score_formulas() -> None:
    assert balanced_resource_score([3000, 5000], [4000, 10000]) == 87
    assert balanced_resource_score([1, 2, 3], [0, 0, 0]) == 100  # nothing to balance
    assert balanced_resource_score([5, 0], [10, 0]) == 100  # a single fraction has no deviation
    assert balanced_resource_score([20, 0], [10, 10]) == 50  # fractions are capped at 1
    fr = [3000 / 3500, 5000 / 40000, 4 / 8]
    mean = sum(fr) / 3
    want = int((1 - math.sqrt(sum((f - mean) ** 2 for f in fr) / 3)) * 100)
    assert balanced_resource_score([3000, 5000, 4], [3500, 40000, 8]) == want == 70
    # Improvement scoring stays in [50, 100]: worst change 100 -> 50 scores 50, best 50 -> 100 scores 100.
    assert balanced_resource_scorer([10, 0], [0, 0], [10, 10]) == 50
    assert balanced_resource_scorer([10, 10], [10, 0], [10, 10]) == 100
    assert balanced_resource_scorer([5, 5], [5, 5], [10, 10]) == 75
    # Odd improvements truncate: 100 -> 87 is 50 + 37 / 2 = 68.
    assert balanced_resource_scorer([3000, 5000], [0, 0], [4000, 10000]) == 68


def test_vector_balance_matches_scalar_bit_for_bit() -> None:
    rng = random.Random(11)
    n = 500
    m = 4
    vals = [np.asarray([rng.choice([0, 1, 3, 7, 10**6, 2**40 + rng.randint(0, 999)]) for _ in range(n)],
                       dtype=np.int64) for _ in range(m)]
    allocs = [np.asarray([rng.choice([0, 1, 5, 8, 10**6 + 1, 2**41 - 3]) for _ in range(n)], dtype=np.int64)
              for _ in range(m)]
    got = _balance_vector(list(vals), list(allocs), n).tolist()  # type: ignore[arg-type]
    want = [balanced_resource_score([int(v[i]) for v in vals], [int(a[i]) for a in allocs]) for i in range(n)]
    assert got == want


def test_args() -> None:
    ba = BalancedAllocation({})
    assert ba.resources.names == ("cpu", "memory")
    ba = BalancedAllocation({"resources": [{"name": "cpu"}, {"name": GPU, "weight": 0}]})
    assert ba.resources.names == ("cpu", GPU) and ba.resources.weights == (1, 1)
    with pytest.raises(ValueError, match=r"resources\[1\].weight: Invalid value: 2: must be 1"):
        BalancedAllocation({"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 2}]})
    with pytest.raises(ValueError, match="Duplicate value"):
        BalancedAllocation({"resources": [{"name": "cpu"}, {"name": "cpu"}]})


def _random_case(rng: random.Random, n: int) -> tuple[list[Node], list[Pod]]:
    nodes: list[Node] = []
    pods: list[Pod] = []
    for i in range(n):
        gpu = rng.choice([None, 0, 2, 8])
        nodes.append(node(f"n{i}", rng.choice([0, 500, 4000, 96000]), rng.choice([0, 2**30, 7 * 2**33]), gpu=gpu))
        for _ in range(rng.randint(0, 4)):
            reqs: dict[str, Any] = {}
            if rng.random() < 0.6:
                reqs["cpu"] = f"{rng.choice([0, 100, 1500, 5000])}m"
            if rng.random() < 0.6:
                reqs["memory"] = str(rng.choice([0, 2**27, 2**31, 3 * 2**32]))
            if gpu and rng.random() < 0.4:
                reqs[GPU] = str(rng.randint(1, 3))
            pods.append(pod(reqs or None, node_name=f"n{i}"))
    return nodes, pods


@pytest.mark.parametrize("args", [None, THREE,
                                  {BA: {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU},
                                                      {"name": "ephemeral-storage"}, {"name": "pods"}]}}],
                         ids=["cpu-memory", "with-gpu", "five"])
def test_random_clusters_vectorized_matches_per_node(args: Any) -> None:
    rng = random.Random(5 if args is None else len(str(args)))
    for _ in range(6):
        nodes, pods = _random_case(rng, 40)
        r = PluginRunner([BA], nodes, pods, args=args)
        for _ in range(8):
            reqs: dict[str, Any] = {}
            if rng.random() < 0.8:
                reqs["cpu"] = f"{rng.choice([0, 10, 250, 3000])}m"
            if rng.random() < 0.8:
                reqs["memory"] = str(rng.choice([0, 2**20, 2**30]))
            if rng.random() < 0.4:
                reqs[GPU] = str(rng.randint(1, 2))
            if rng.random() < 0.2:
                reqs["ephemeral-storage"] = "1Gi"
            scores = r.score(pod(reqs or None))[BA]  # asserts both forms agree
            assert all(50 <= s <= 100 for s in scores.values())


_AMOUNTS = st.one_of(st.just(0), st.integers(1, 10), st.integers(1, 2**40), st.integers(-5, -1))


@settings(max_examples=300, deadline=None)
@given(st.lists(_AMOUNTS, min_size=2, max_size=2), st.lists(_AMOUNTS, min_size=2, max_size=2))
def test_two_resource_shortcut_is_the_general_score(requested: list[int], allocatable: list[int]) -> None:
    """balanced_resource_score's two-resource shortcut gives what the general loop gives
    (zero allocatable, fractions past 1, negative amounts included)."""
    from ksched.scheduler.plugins.noderesources.balanced_allocation import balanced_resource_score_any

    assert balanced_resource_score(requested, allocatable) == balanced_resource_score_any(requested, allocatable)


class _Node:
    def __init__(self, allocatable: dict[str, int], requested: dict[str, int], nz: list[int]) -> None:
        self.allocatable = allocatable
        self.requested = requested
        self.non_zero_requested = nz


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["cpu", "memory", "pods"]), _AMOUNTS),
       st.dictionaries(st.sampled_from(["cpu", "memory"]), _AMOUNTS),
       st.lists(_AMOUNTS, min_size=2, max_size=2), st.lists(_AMOUNTS, min_size=2, max_size=2), st.booleans())
def test_cpu_memory_node_values_are_the_general_ones(alloc: dict[str, int], req: dict[str, int], nz: list[int],
                                                     pod: list[int], use_requested: bool) -> None:
    """node_values' shortcut for the default resources (cpu, memory) gives what the loop over
    any configured resources gives."""
    from ksched.scheduler.plugins.noderesources.resource_allocation import (
        DEFAULT_RESOURCES,
        ResourceSpec,
        node_values,
        node_values_any,
    )

    spec = ResourceSpec.of(DEFAULT_RESOURCES)
    ni: Any = _Node(alloc, req, nz)
    assert node_values(ni, spec, pod, use_requested) == node_values_any(ni, spec, pod, use_requested)
