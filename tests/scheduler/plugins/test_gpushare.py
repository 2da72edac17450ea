"""The FGD paper's definitions with hand-computed cases (fragmentation of a node against a
typical-pod set, the FGD score of a GPU-sharing pod and its GPU, GPU model constraints), the
baselines' rules, and every policy's vectorized form against its per-node form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.gpu import GpuRequest, GpuSpecError, format_gpu_index, parse_gpu_index, pod_gpu_request
from ksched.scheduler.framework.status import Code
from ksched.scheduler.plugins.gpushare.bestfit import BestFit
from ksched.scheduler.plugins.gpushare.clustering import GpuClustering
from ksched.scheduler.plugins.gpushare.columns import GpuColumns
from ksched.scheduler.plugins.gpushare.dotprod import DotProd
from ksched.scheduler.plugins.gpushare.fgd import FGD
from ksched.scheduler.plugins.gpushare.fgdpack import FGDPack
from ksched.scheduler.plugins.gpushare.frag import (
    CompiledTypical,
    SigmoidTable,
    TypicalPods,
    fgd_score_of_delta,
    node_frag_int,
    typical_pods,
)
from ksched.scheduler.plugins.gpushare.packing import GpuPacking
from ksched.scheduler.plugins.gpushare.selection import choose_gpus, sub_gpus
from ksched.scheduler.plugins.gpushare.shape import NodeView, PodShape
from ksched.testing import PluginRunner, make_node, make_pod

T4 = frozenset({"T4"})
G2 = frozenset({"G2"})

# m1: half a GPU (weight 2); m2: one whole GPU (weight 1); m3: CPU only (weight 1);
# m4: half a G2 GPU (weight 1). W = 5.
TYP = TypicalPods((PodShape(1000, 500, 1), PodShape(4000, 1000, 1), PodShape(2000), PodShape(1000, 500, 1, G2)),
                  (2, 1, 1, 1))


def test_node_fragmentation_hand_computed() -> None:
    # A T4 node with GPUs free [1000, 300] and 8 CPUs left; idle = 1300.
    node = NodeView(8000, [1000, 300], "T4")
    # m1 fits (one GPU >= 500): fragment = the 300 on the too-small GPU -> 2 * 300
    # m2 fits (one GPU >= 1000): fragment = 300 -> 1 * 300
    # m3 is CPU-only: all idle counts -> 1 * 1300
    # m4 may not use a T4: all idle -> 1 * 1300
    assert node_frag_int(node, TYP) == 600 + 300 + 1300 + 1300
    # F_n = 3500 / 5 = 700 milli.
    # Without CPU for m2 (4000 needed), m2's fragment is all idle too.
    assert node_frag_int(node, TYP, cpu_left=3000) == 600 + 1300 + 1300 + 1300
    # A node without GPUs has nothing to fragment.
    assert node_frag_int(NodeView(8000, [], ""), TYP) == 0


def test_fgd_score_for_a_sharing_pod_hand_computed() -> None:
    node = NodeView(8000, [1000, 300], "T4")
    pod = PodShape(1000, 300, 1)
    before = 3500
    # GPU 0 -> [700, 300], 7 CPUs: m1 300*2, m2 idle 1000, m3 1000, m4 1000 = 3600: delta -100
    # GPU 1 -> [1000, 0]: m1 0, m2 0, m3 1000, m4 1000 = 2000: delta +1500
    after0 = node_frag_int(node, TYP, 7000, [700, 300])
    after1 = node_frag_int(node, TYP, 7000, [1000, 0])
    assert (after0, after1) == (3600, 2000)
    s0 = int(1 / (1 + math.exp(-(before - after0) / 5 / 1000)) * 100)
    s1 = int(1 / (1 + math.exp(-(before - after1) / 5 / 1000)) * 100)
    assert (s0, s1) == (49, 57)
    fgd = FGD(TYP)
    assert fgd.node_scores(node, pod) == (57, 1)
    assert fgd.score_node(node, pod) == 57
    assert fgd.choose(node, pod) == (1,)


def test_fgd_prefers_the_earlier_gpu_on_equal_scores() -> None:
    node = NodeView(8000, [500, 500], "T4")
    assert FGD(TYP).node_scores(node, PodShape(1000, 200, 1))[1] == 0


def test_fgd_empty_pod_scores_100() -> None:
    assert FGD(TYP).score_node(NodeView(8000, [1000], "T4"), PodShape(0)) == 100


def test_typical_pods_grouping_threshold_and_ties() -> None:
    shapes = [PodShape(1000, 500, 1)] * 6 + [PodShape(2000)] * 3 + [PodShape(4000, 1000, 1)] * 3 + \
        [PodShape(1000, 100, 1)] * 1
    typ = typical_pods(shapes, threshold=90)
    # 13 pods; 90 % needs 12: groups of 6, then the tie of 3 and 3 goes to the larger key first.
    assert typ.weights == (6, 3, 3)
    assert typ.shapes[1] == PodShape(4000, 1000, 1)
    assert typ.shapes[2] == PodShape(2000)
    assert typical_pods(shapes, threshold=50).weights == (6, 3)
    assert typical_pods([]).shapes == ()


def test_gpu_model_constraints() -> None:
    assert PodShape(1000, 500, 1, T4).allows("T4")
    assert not PodShape(1000, 500, 1, T4).allows("G2")
    assert not PodShape(1000, 500, 1, T4).allows("")  # a node without a model is not accessible
    assert PodShape(1000, 500, 1).allows("G2")
    cols = GpuColumns(0, 2)
    cols.set_row(0, NodeView(8000, [1000, 1000], "T4"))
    cols.set_row(1, NodeView(8000, [1000, 1000], "G2"))
    cols.set_row(2, NodeView(8000, [], ""))
    rows = np.arange(3)
    assert cols.gpu_fit(rows, PodShape(1000, 500, 1, frozenset({"G2", "V100"}))).tolist() == [False, True, False]
    assert cols.gpu_fit(rows, PodShape(1000, 1000, 2)).tolist() == [True, True, False]
    assert cols.gpu_fit(rows, PodShape(1000)).tolist() == [True, True, True]


def test_gpu_request_annotations() -> None:
    pod = make_pod("p", annotations={"alibabacloud.com/gpu-milli": "250", "alibabacloud.com/gpu-count": "1",
                                     "alibabacloud.com/gpu-card-model": "T4|P100"})
    assert pod_gpu_request(pod) == GpuRequest(250, 1, frozenset({"T4", "P100"}))
    assert pod_gpu_request(make_pod("q")) is None
    whole = make_pod("w", annotations={"alibabacloud.com/gpu-count": "2"})
    assert pod_gpu_request(whole) == GpuRequest(1000, 2)
    with pytest.raises(GpuSpecError, match="gpu-milli"):
        pod_gpu_request(make_pod("x", annotations={"alibabacloud.com/gpu-milli": "half"}))
    with pytest.raises(GpuSpecError, match="whole GPUs"):
        GpuRequest.make(500, 2)
    assert parse_gpu_index("0-3") == (0, 3)
    assert format_gpu_index([1, 2]) == "1-2"
    with pytest.raises(GpuSpecError):
        parse_gpu_index("a-b")


def test_gpu_selection_methods() -> None:
    free = [1000, 300, 600, 1000]
    share = PodShape(1000, 300, 1)
    assert choose_gpus(free, share, "best") == (1,)
    assert choose_gpus(free, share, "worst") == (0,)
    assert choose_gpus(free, PodShape(1000, 1000, 2)) == (0, 3)
    assert choose_gpus(free, PodShape(1000, 1000, 3)) is None
    assert choose_gpus(free, PodShape(1000)) == ()
    assert choose_gpus(free, share, "random", np.random.default_rng(0))[0] in (0, 1, 2, 3)
    assert sub_gpus([1000, 300, 600], 300, 2) == [1, 2]


def test_baseline_rules_hand_computed() -> None:
    node = NodeView(64000, [1000, 400, 1000, 1000], "T4")
    pod = PodShape(8000, 300, 1)
    # BestFit: 1 - (0.5 * 56000/128000 + 0.5 * 3100/8000) = 0.5875 -> 58
    assert BestFit().score_node(node, pod) == 58
    # DotProd: 100 * (1 - (0.5 * 0.0625 + 0.4 * 0.0375) / 2) = 97.69 -> 97
    assert DotProd().score_node(node, pod) == 97
    # GpuPacking: the shared GPU with 400 free is used: S = 40 -> max(100 - 4, 50) = 96
    assert GpuPacking().score_node(node, pod) == 96
    assert GpuPacking().score_node(NodeView(8000, [1000] * 8, "G2"), pod) == 25  # all free: max(33 - 8, 8)
    assert GpuPacking().score_node(node, PodShape(8000, 1000, 2)) == 48  # two fully free GPUs used
    # GpuClustering: base 25 * (8000 - 3400) / 8000 = 14; offsets by resident tags.
    assert GpuClustering().score_node(node, pod) == 14 + 25
    node.tags = {"share-gpu": 2}
    assert GpuClustering().score_node(node, pod) == 14 + 75
    node.tags = {"share-gpu": 2, "1-gpu": 1}
    assert GpuClustering().score_node(node, pod) == 14 + 50
    assert GpuClustering().score_node(node, PodShape(8000, 1000, 2)) == 14 + 0


def test_sigmoid_table_equals_the_formula() -> None:
    table = SigmoidTable(37, 37 * 8000)
    for d in [*range(-3000, 3000, 7), -296000, 296000, 0, 1, -1]:
        assert table.score(d) == fgd_score_of_delta(d, 37)
    assert table.scores(np.asarray([-5000, 0, 5000])).tolist() == [fgd_score_of_delta(d, 37) for d in (-5000, 0, 5000)]


_free = st.lists(st.sampled_from([0, 50, 100, 250, 300, 500, 700, 900, 1000, 1000]), min_size=0, max_size=8)
_models = st.sampled_from(["T4", "G2", "P100"])
_shape = st.one_of(
    st.builds(PodShape, st.sampled_from([0, 1000, 4000, 16000])),
    st.builds(PodShape, st.sampled_from([1000, 4000, 16000]), st.sampled_from([100, 250, 500, 700, 999]),
              st.just(1), st.sampled_from([None, T4, frozenset({"G2", "P100"})])),
    st.builds(PodShape, st.sampled_from([1000, 4000, 16000]), st.just(1000), st.sampled_from([1, 2, 4, 8]),
              st.sampled_from([None, G2])),
)


@settings(max_examples=60, deadline=None)
@given(nodes=st.lists(st.tuples(st.integers(0, 96000), _free, _models,
                                st.dictionaries(st.sampled_from(["share-gpu", "1-gpu", "2-gpu"]), st.integers(1, 3))),
                      min_size=1, max_size=12),
       pods=st.lists(_shape, min_size=1, max_size=30), probes=st.lists(_shape, min_size=1, max_size=6))
def test_vectorized_forms_equal_the_per_node_forms(nodes, pods, probes) -> None:
    typ = typical_pods(pods)
    views = [NodeView(c, f, m if f else "", 0, t) for c, f, m, t in nodes]
    cols = GpuColumns(0, 8)
    for r, v in enumerate(views):
        cols.set_row(r, v)
    rows = np.arange(len(views))
    compiled = CompiledTypical(typ)
    assert compiled.frag(cols.free, cols.cpu_left, cols.model, cols.models)[: len(views)].tolist() == \
        [node_frag_int(v, typ) for v in views]
    fgd = FGD(typ)
    for shape in probes:
        fit = rows[cols.gpu_fit(rows, shape)]
        for policy in (fgd, FGDPack(typ), BestFit(), DotProd(), GpuPacking(), GpuClustering()):
            assert policy.score_rows(cols, fit, shape).tolist() == [policy.score_node(views[r], shape) for r in fit]
        _, choice = fgd.score_and_choice_rows(cols, fit, shape)
        if shape.is_sharing:
            assert choice.tolist() == [fgd.node_scores(views[r], shape)[1] for r in fit]
        # FGDPack: FGD's score first; BestFit breaks its ties only for pods without shared GPUs.
        pack = FGDPack(typ)
        for r in fit:
            fgd_part = fgd.score_node(views[r], shape) * 1000
            tie = pack.score_node(views[r], shape) - fgd_part
            assert tie == (0 if shape.is_sharing else BestFit().score_node(views[r], shape))


def _gpu_node(name: str, gpus: int, model: str, cpu: str = "32") -> object:
    return make_node(name, cpu=cpu, memory="256Gi", allocatable={"alibabacloud.com/gpu-count": gpus},
                     labels={"alibabacloud.com/gpu-card-model": model})


def _gpu_pod(name: str, milli: int, count: int = 1, model: str = "", node: str = "", index: str = "") -> object:
    ann = {"alibabacloud.com/gpu-milli": str(milli), "alibabacloud.com/gpu-count": str(count)}
    if model:
        ann["alibabacloud.com/gpu-card-model"] = model
    if index:
        ann["alibabacloud.com/gpu-index"] = index
    return make_pod(name, requests={"cpu": "2", "memory": "4Gi"}, annotations=ann, node_name=node)


def test_framework_plugins_agree_and_filter_with_reasons() -> None:
    nodes = [_gpu_node("a", 2, "T4"), _gpu_node("b", 4, "G2"), make_node("c", cpu="16", memory="64Gi"),
             _gpu_node("d", 8, "G2", cpu="96")]
    bound = [_gpu_pod("x", 600, node="a", index="0"), _gpu_pod("y", 1000, 2, node="b", index="1-2"),
             _gpu_pod("z", 500, node="d", index="3")]
    typ = [{"cpu": 2000, "milli": 500, "count": 1, "weight": 3}, {"cpu": 2000, "milli": 1000, "count": 2, "weight": 1},
           {"cpu": 1000, "weight": 1}]
    runner = PluginRunner(["GpuShare", ("FGD", 1), ("FGDPack", 1), ("BestFit", 1), ("DotProd", 1), ("GpuPacking", 1),
                           ("GpuClustering", 1)], nodes, bound, args={"FGD": {"typicalPods": typ}, "FGDPack": {"typicalPods": typ}})
    st_ = runner.filter(_gpu_pod("p", 500, model="T4"))
    assert st_["a"] is None
    assert st_["b"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and "GPU model" in st_["b"].message()
    assert st_["c"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and "no GPU" in st_["c"].message()
    st_ = runner.filter(_gpu_pod("q", 1000, 2))
    assert st_["d"] is None
    # a's GPU 0 has 400 milli left: not a whole GPU; b has GPUs 0 and 3 free.
    assert st_["a"].code == Code.UNSCHEDULABLE and "enough free GPU" in st_["a"].message()
    assert st_["b"] is None
    for probe in (_gpu_pod("s", 300), _gpu_pod("t", 1000, 2), make_pod("cpu-only", requests={"cpu": "1"})):
        fits = [n for n, s in runner.filter(probe).items() if s is None]
        runner.score(probe, nodes=fits)  # asserts the vectorized and per-node forms agree
    bad = make_pod("bad", annotations={"alibabacloud.com/gpu-milli": "1500"})
    _, _, st_ = runner.pre_filter(bad)
    assert st_ is not None and st_.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and "0..1000" in st_.message()
