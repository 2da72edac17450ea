"""schedulePod / findNodesThatFitPod: how many nodes are evaluated, the rotating start index,
host selection, FitError messages (upstream schedule_one_test.go)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest
from core_helpers import (
    CallLog,
    config,
    fake_filter,
    fake_pre_filter,
    fake_score,
    label_score,
    profile_cfg,
)

from ksched.scheduler.cache.cache import Cache
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.explanation import Explanation
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import VectorizedFilter
from ksched.scheduler.framework.runtime import Framework
from ksched.scheduler.framework.status import Code, Diagnosis, FitError, Status, fit_error_message
from ksched.scheduler.framework.types import PodInfo
from ksched.scheduler.plugins.registry import Registry
from ksched.scheduler.queue.nominator import Nominator
from ksched.scheduler.schedule_one import (
    Algorithm,
    NoNodesAvailable,
    SchedulingError,
    num_feasible_nodes_to_find,
)
from ksched.testing import make_node, make_pod

UPSTREAM_CORE = ("PrioritySort", "SchedulingGates", "NodeUnschedulable", "NodeName", "DefaultBinder")


class Setup:
    def __init__(self, nodes: list[Any], *plugins: type, order: list[Any] | None = None, pods: list[Any] = (),
                 pct: int | None = None, global_pct: int = 0, seed: int = 0,
                 core: tuple[str, ...] = UPSTREAM_CORE) -> None:
        self.cache = Cache()
        for n in nodes:
            self.cache.add_node(n)
        for p in pods:
            self.cache.add_pod(p)
        self.snap = Snapshot(self.cache.table.cols)
        self.cache.update_snapshot(self.snap)
        reg = Registry({c.name: c for c in plugins}, load_entry_points=False)
        names = order if order is not None else [c.name for c in plugins]
        cfg = config(profile_cfg(*names, core=core, pct=pct), percentageOfNodesToScore=global_pct)
        self.fw = Framework(cfg.profiles[0], reg, percentage_of_nodes_to_score=cfg.percentage_of_nodes_to_score)
        self.fw.set_snapshot(self.snap)
        self.fw.nominator = Nominator()
        self.algo = Algorithm(random.Random(seed))

    def schedule(self, pod: Any, explain: Explanation | None = None) -> Any:
        self.cache.update_snapshot(self.snap)
        return self.algo.schedule_pod(self.fw, CycleState(), pod, self.snap, explain)

    def fit_error(self, pod: Any) -> FitError:
        with pytest.raises(FitError) as ei:
            self.schedule(pod)
        return ei.value


def named(*names: str) -> list[Any]:
    return [make_node(n) for n in names]


TrueFilter = fake_filter("TrueFilter", lambda p, ni: True)
FalseFilter = fake_filter("FalseFilter", lambda p, ni: False, reason="injecting failure")
NoPodsFilter = fake_filter("NoPodsFilter", lambda p, ni: ni.num_pods == 0, reason="node has pods")
MatchFilter = fake_filter("MatchFilter", lambda p, ni: ni.name == p.name, reason="node name does not match pod")
Equal = fake_score("EqualPrioritizer", lambda p, ni: 1)


class VecTrueFilter(TrueFilter, VectorizedFilter):  # type: ignore[misc, valid-type]
    name = "VecTrueFilter"

    def filter_nodes(self, state, pod, snapshot, rows):
        return np.ones(len(rows), dtype=bool)


# ------------------------------------------------------------------ numFeasibleNodesToFind


@pytest.mark.parametrize(("pct", "n", "want"), [
    # TestNumFeasibleNodesToFind
    (0, 10, 10), (40, 10, 10), (0, 1000, 420), (40, 1000, 400), (0, 6000, 300), (40, 6000, 2400),
    # reference §4.1 worked examples
    (0, 500, 230), (0, 5000, 500), (0, 5625, 281), (0, 15000, 750),
    # boundaries
    (0, 99, 99), (0, 100, 100), (0, 199, 100), (5, 1000, 100), (100, 1000, 1000), (0, 0, 0),
])
def test_num_feasible_nodes_to_find(pct: int, n: int, want: int):
    assert num_feasible_nodes_to_find(pct, n) == want


def test_profile_percentage_overrides_global():
    s = Setup(named("a"), TrueFilter, pct=None, global_pct=40)
    assert s.fw.percentage_of_nodes_to_score == 40
    s = Setup(named("a"), TrueFilter, pct=30, global_pct=40)
    assert s.fw.percentage_of_nodes_to_score == 30
    s = Setup(named("a"), TrueFilter, pct=0, global_pct=40)
    assert s.fw.percentage_of_nodes_to_score == 0


@pytest.mark.parametrize("filt", [TrueFilter, VecTrueFilter])
def test_fair_evaluation_for_nodes(filt: type):
    """TestFairEvaluationForNodes: 500 nodes, 30 % -> 150 per cycle, start index rotates."""
    nodes = [make_node(str(i)) for i in range(500)]
    s = Setup(nodes, filt, Equal, global_pct=30)
    to_find = num_feasible_nodes_to_find(30, 500)
    assert to_find == 150
    for i in range(2 * (500 // to_find + 1)):
        res = s.schedule(make_pod("p"))
        assert res.feasible_nodes == to_find
        assert res.evaluated_nodes == to_find
        assert s.algo.next_start_node_index == (i + 1) * to_find % 500


def test_start_index_counts_failed_and_feasible_nodes():
    # 10 nodes; "bad-*" nodes fail. No score plugin -> one feasible node is enough.
    names = ["bad-0", "ok-1", "bad-2", "bad-3", "ok-4", "ok-5", "bad-6", "ok-7", "bad-8", "ok-9"]
    f = fake_filter("OnlyOk", lambda p, ni: ni.name.startswith("ok"))
    s = Setup(named(*names), f)
    picks = []
    for _ in range(6):
        res = s.schedule(make_pod("p"))
        picks.append((res.suggested_host, res.evaluated_nodes, s.algo.next_start_node_index))
    assert picks == [("ok-1", 2, 2), ("ok-4", 3, 5), ("ok-5", 1, 6), ("ok-7", 2, 8), ("ok-9", 2, 0),
                     ("ok-1", 2, 2)]


def test_start_index_with_prefilter_subset_is_modulo_all_nodes():
    """Upstream: nodes[(next+i) % len(subset)] while iterating, then
    next = (next + processed) % len(allNodes)."""
    nodes = named(*(f"n{i}" for i in range(10)))
    sub = fake_pre_filter("Subset", nodes=lambda p: {"n1", "n2", "n3"} if p.labels.get("subset") else None)
    s = Setup(nodes, sub, TrueFilter, Equal)
    res = s.schedule(make_pod("p", labels={"subset": "1"}))
    assert res.evaluated_nodes == 3 and res.feasible_nodes == 3
    assert s.algo.next_start_node_index == 3
    res = s.schedule(make_pod("q"))
    assert s.algo.next_start_node_index == (3 + 10) % 10


def test_filter_error_aborts_and_still_moves_start_index():
    err = fake_filter("Err", lambda p, ni: ni.name != "c", code=Code.ERROR, reason="exploded")
    s = Setup(named("a", "b", "c", "d"), err, Equal)
    with pytest.raises(SchedulingError) as ei:
        s.schedule(make_pod("p"))
    assert ei.value.status.code == Code.ERROR and "exploded" in str(ei.value)


# ------------------------------------------------------------------ evaluation and selection


def test_no_nodes():
    s = Setup([], TrueFilter)
    with pytest.raises(NoNodesAvailable, match="no nodes available to schedule pods"):
        s.schedule(make_pod("p"))


def test_one_feasible_node_skips_prescore_and_score():
    log = CallLog()
    scorer = fake_score("Scorer", lambda p, ni: 50, pre_score_skip=lambda p: False, log=log)
    only_b = fake_filter("OnlyB", lambda p, ni: ni.name == "b")
    s = Setup(named("a", "b", "c"), only_b, scorer)
    res = s.schedule(make_pod("p"))
    assert res.suggested_host == "b" and res.feasible_nodes == 1 and res.evaluated_nodes == 3
    assert log.calls == []
    # With two feasible nodes both run.
    two = fake_filter("TwoFit", lambda p, ni: ni.name != "c")
    s = Setup(named("a", "b", "c"), two, scorer)
    s.schedule(make_pod("p"))
    assert log.points("preScore") == ["Scorer"]
    assert sorted(c[2] for c in log.calls if c[1] == "score") == ["a", "b"]


def test_without_score_plugins_one_node_is_evaluated():
    log = CallLog()
    f = fake_filter("Counting", lambda p, ni: True, log=log)
    s = Setup(named("node1", "node2", "node3"), f)
    res = s.schedule(make_pod("pod1"))
    assert res.evaluated_nodes == 1 and res.feasible_nodes == 1
    assert len(log.points("filter")) == 1


def test_no_filter_no_score_prefilter_two_nodes_evaluates_one():
    """Upstream "test no score plugin, prefilter plugin returning 2 nodes": evaluated 1."""
    log = CallLog()
    pf = fake_pre_filter("FakePreFilter", nodes=lambda p: {"node1", "node2"}, log=log)
    s = Setup(named("node1", "node2", "node3"), pf, core=("PrioritySort", "DefaultBinder"))
    res = s.schedule(make_pod("test-prefilter"))
    assert res.suggested_host in {"node1", "node2"}
    assert res.evaluated_nodes == 1 and res.feasible_nodes == 1


def test_no_filter_plugins_takes_nodes_in_rotation():
    s = Setup(named("a", "b", "c"), Equal, core=("PrioritySort", "DefaultBinder"))
    res = s.schedule(make_pod("p"))
    assert res.feasible_nodes == 3 and res.evaluated_nodes == 3
    assert s.algo.next_start_node_index == 0


def test_highest_weighted_score_wins():
    # Upstream "test 6": NumericMap (score = node name) w1 and ReverseNumericMap w2 -> node "1".
    numeric = fake_score("NumericMap", lambda p, ni: int(ni.name))
    reverse = fake_score("ReverseNumericMap", lambda p, ni: int(ni.name),
                         normalize=lambda xs: [max(xs) + min(xs) - x for x in xs])
    s = Setup(named("3", "2", "1"), TrueFilter, numeric, reverse,
              order=["TrueFilter", ("NumericMap", 1), ("ReverseNumericMap", 2)])
    assert s.schedule(make_pod("2")).suggested_host == "1"
    s = Setup(named("3", "2", "1"), TrueFilter, numeric, order=["TrueFilter", ("NumericMap", 1)])
    assert s.schedule(make_pod("2")).suggested_host == "3"


def test_score_plugin_error_aborts():
    class Failing(fake_score("FalseMap", lambda p, ni: 0)):  # type: ignore[misc]
        def score(self, state, pod, node_info):
            return 0, Status.as_error("prioritize failed")

    Failing.name = "FalseMap"
    s = Setup(named("2", "1"), TrueFilter, Failing)
    with pytest.raises(SchedulingError, match="prioritize failed"):
        s.schedule(make_pod("p"))


def test_seeded_tie_break_is_reproducible_and_uniform():
    nodes = named(*(f"n{i}" for i in range(4)))
    picks = []
    for _ in range(2):
        s = Setup(nodes, TrueFilter, Equal, seed=42)
        picks.append([s.schedule(make_pod(f"p{i}")).suggested_host for i in range(40)])
    assert picks[0] == picks[1]
    s = Setup(nodes, TrueFilter, Equal, seed=7)
    other = [s.schedule(make_pod(f"p{i}")).suggested_host for i in range(40)]
    assert other != picks[0]
    s = Setup(nodes, TrueFilter, Equal, seed=1)
    counts = Counter(s.schedule(make_pod(f"p{i}")).suggested_host for i in range(800))
    assert set(counts) == {"n0", "n1", "n2", "n3"}
    assert min(counts.values()) > 150


def test_ties_only_among_the_best():
    nodes = [make_node(n, labels={"score": v}) for n, v in (("a", "5"), ("b", "9"), ("c", "9"), ("d", "1"))]
    s = Setup(nodes, TrueFilter, label_score())
    got = {s.schedule(make_pod(f"p{i}")).suggested_host for i in range(30)}
    assert got == {"b", "c"}


def test_nominated_node_is_tried_first():
    """TestPreferNominatedNodeFilterCallCounts: 1 filter call with a passing nominated node,
    3 without one, 1 + 3 when the nominated node fails."""
    for nominated, fail_node1, want_calls, want_host in [
        ("node1", False, 1, "node1"), ("", False, 3, None), ("node1", True, 4, None)]:
        log = CallLog()
        f = fake_filter("FakeFilter", (lambda p, ni: ni.name != "node1") if fail_node1 else (lambda p, ni: True),
                        log=log)
        s = Setup(named("node1", "node2", "node3"), f, Equal)
        res = s.schedule(make_pod("p", priority=1000, nominated_node_name=nominated))
        assert len(log.points("filter")) == want_calls
        if want_host:
            assert res.suggested_host == want_host and res.evaluated_nodes == 1


def test_nominated_pods_count_on_their_node():
    # Slot filter: one pod per node. A higher-priority pod nominated to "a" blocks it.
    one = fake_filter("OnePod", lambda p, ni: ni.num_pods == 0, reason="node is full")
    s = Setup(named("a", "b"), one, Equal)
    s.fw.nominator.add(PodInfo(make_pod("vip", priority=100)), "a")
    for i in range(10):
        assert s.schedule(make_pod(f"p{i}", priority=10)).suggested_host == "b"
    # A pod of even higher priority ignores it.
    hosts = {s.schedule(make_pod(f"q{i}", priority=1000)).suggested_host for i in range(20)}
    assert hosts == {"a", "b"}


# ------------------------------------------------------------------ FitError


def test_fit_error_message_example():
    s = Setup([make_node("node1", unschedulable=True), make_node("node2"), make_node("node3")], Equal)
    fe = s.fit_error(make_pod("p", spec={"nodeName": "node9"}))
    assert str(fe) == ("0/3 nodes are available: 1 node(s) were unschedulable, "
                       "2 node(s) didn't match the requested node name.")
    assert fe.diagnosis.unschedulable_plugins == {"NodeUnschedulable", "NodeName"}
    assert fe.num_all_nodes == 3


def test_fit_error_histogram_sorted_as_strings():
    nodes = [make_node(f"n{i:02d}", labels={"kind": "b" if i < 10 else "a"}) for i in range(12)]
    f = fake_filter("Kind", lambda p, ni: False)

    class ByKind(f):  # type: ignore[misc, valid-type]
        def filter(self, state, pod, node_info):
            return Status(Code.UNSCHEDULABLE, f"node(s) of kind {node_info.node.labels['kind']}")

    ByKind.name = "Kind"
    s = Setup(nodes, ByKind, Equal)
    assert str(s.fit_error(make_pod("p"))) == \
        "0/12 nodes are available: 10 node(s) of kind b, 2 node(s) of kind a."


def test_fit_error_first_failing_plugin_per_node():
    # Upstream "test 8": node "1" fails MatchFilter, node "2" (with a pod) fails NoPodsFilter.
    s = Setup(named("1", "2"), NoPodsFilter, MatchFilter, Equal,
              pods=[make_pod("existing", node_name="2", phase="Running")])
    fe = s.fit_error(make_pod("p"))
    assert {n: st.plugin for n, st in fe.diagnosis.node_to_status.items()} == {"1": "MatchFilter",
                                                                             "2": "NoPodsFilter"}
    assert fe.diagnosis.unschedulable_plugins == {"MatchFilter", "NoPodsFilter"}
    assert str(fe) == "0/2 nodes are available: 1 node has pods, 1 node name does not match pod."


def test_fit_error_all_nodes_fail_one_plugin():
    s = Setup(named("3", "2", "1"), TrueFilter, FalseFilter, Equal)
    fe = s.fit_error(make_pod("2"))
    assert str(fe) == "0/3 nodes are available: 3 injecting failure."
    assert fe.diagnosis.unschedulable_plugins == {"FalseFilter"}
    assert all(st.code == Code.UNSCHEDULABLE for st in fe.diagnosis.node_to_status.values())


def test_fit_error_prefilter_rejection():
    pf = fake_pre_filter("FakePreFilter",
                         status=lambda p: Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "injected unschedulable status"))
    s = Setup(named("1", "2"), pf, TrueFilter)
    fe = s.fit_error(make_pod("test-prefilter"))
    assert fe.diagnosis.pre_filter_msg == "injected unschedulable status"
    assert fe.diagnosis.unschedulable_plugins == {"FakePreFilter"}
    assert str(fe) == "0/2 nodes are available: injected unschedulable status."
    assert fe.diagnosis.status_of("1").code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_fit_error_prefilter_error_is_a_scheduling_error():
    pf = fake_pre_filter("FakePreFilter", status=lambda p: Status.as_error("injected error status"))
    s = Setup(named("1", "2"), pf, TrueFilter)
    with pytest.raises(SchedulingError, match="injected error status"):
        s.schedule(make_pod("p"))


def test_fit_error_prefilter_non_intersecting():
    pf2 = fake_pre_filter("FakePreFilter2", nodes=lambda p: {"node2"})
    pf3 = fake_pre_filter("FakePreFilter3", nodes=lambda p: {"node1"})
    pf1 = fake_pre_filter("FakePreFilter1")
    s = Setup(named("node1", "node2", "node3"), pf1, pf2, pf3)
    fe = s.fit_error(make_pod("test-prefilter"))
    msg = "node(s) didn't satisfy plugin(s) [FakePreFilter2 FakePreFilter3] simultaneously"
    assert fe.diagnosis.pre_filter_msg == msg
    assert fe.diagnosis.unschedulable_plugins == {"FakePreFilter2", "FakePreFilter3"}
    assert str(fe) == f"0/3 nodes are available: {msg}."


def test_fit_error_prefilter_subset_then_filter():
    """Upstream "some nodes are filtered out by prefilter plugin and other are filtered out by
    filter plugin"."""
    pf = fake_pre_filter("FakePreFilter", nodes=lambda p: {"node2"})
    ff = fake_filter("FakeFilter", lambda p, ni: ni.name != "node2", reason="injecting failure for pod test-prefilter")
    s = Setup(named("node1", "node2"), pf, ff)
    fe = s.fit_error(make_pod("test-prefilter"))
    assert fe.diagnosis.pre_filter_msg == ""
    assert fe.diagnosis.unschedulable_plugins == {"FakePreFilter", "FakeFilter"}
    assert set(fe.diagnosis.node_to_status) == {"node2"}
    assert fe.diagnosis.status_of("node1").message() == "node(s) didn't satisfy plugin(s) [FakePreFilter]"
    assert str(fe) == ("0/2 nodes are available: 1 injecting failure for pod test-prefilter, "
                       "1 node(s) didn't satisfy plugin(s) [FakePreFilter].")


def test_fit_error_prefilter_invalid_node():
    pf = fake_pre_filter("FakePreFilter", nodes=lambda p: {"invalid-node"})
    s = Setup(named("1", "2"), pf, TrueFilter)
    fe = s.fit_error(make_pod("test-prefilter"))
    assert fe.diagnosis.unschedulable_plugins == {"FakePreFilter"}
    assert str(fe) == "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [FakePreFilter]."


def test_prefilter_skip_skips_its_filter():
    """Upstream "test prefilter plugin returning skip": the skipped plugin's Filter (which would
    error) is not run."""
    skipper = fake_pre_filter("FakeFilter2", status=lambda p: Status.skip(), with_filter=True)
    f1 = fake_filter("FakeFilter1", lambda p, ni: ni.name != "node1")
    s = Setup(named("node1", "node2", "node3"), f1, skipper, Equal)
    res = s.schedule(make_pod("test-prefilter"))
    assert res.suggested_host in {"node2", "node3"}
    assert res.evaluated_nodes == 3 and res.feasible_nodes == 2


def test_fit_error_message_formats():
    d = Diagnosis()
    assert fit_error_message(2, d) == "0/2 nodes are available:"
    # Upstream appends the PostFilter message with " %v": its own period, if any, ends the text.
    d.post_filter_msg = "No preemption victims found for incoming pod"
    assert fit_error_message(2, d) == "0/2 nodes are available: No preemption victims found for incoming pod"
    d.post_filter_msg = "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    assert fit_error_message(2, d).endswith("incoming pod.") and not fit_error_message(2, d).endswith("..")
    d.node_to_status = {"a": Status(Code.UNSCHEDULABLE, "r1", "r2")}
    d.absent_status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "r2")
    assert fit_error_message(3, d) == ("0/3 nodes are available: 1 r1, 3 r2. "
                                       "preemption: 0/2 nodes are available: 2 No preemption victims found for "
                                       "incoming pod.")


def test_explain_records_filters_and_scores():
    s = Setup([make_node("a", labels={"score": "3"}), make_node("b", labels={"score": "7"}),
               make_node("c", unschedulable=True)], label_score("LabelScore"))
    ex = Explanation()
    res = s.schedule(make_pod("p"), ex)
    assert res.suggested_host == "b" and ex.selected == "b"
    assert ex.filters["a"] == "passed" and ex.filters["b"] == "passed"
    assert ex.filters["c"]["plugin"] == "NodeUnschedulable"
    assert ex.scores["b"]["LabelScore"] == {"raw": 7, "normalized": 7, "weighted": 7}
    assert ex.scores["b"]["total"] == 7 and ex.scores["a"]["total"] == 3
    assert ex.to_dict()["selectedNode"] == "b"


def test_nominated_pass_verdicts_are_remembered_while_nothing_changes():
    """With only row-local Filter plugins active, the pass with nominated pods is remembered per
    (node generation, pod keys, nominated pods): replicas reuse it, and a change to the node or
    to the nominated pods is seen."""
    from ksched.scheduler.plugins.noderesources.fit import Fit

    s = Setup([make_node("a", cpu="1"), make_node("b", cpu="1")], Fit, Equal)
    vip = PodInfo(make_pod("vip", priority=100, requests={"cpu": "800m"}))
    s.fw.nominator.add(vip, "a")
    for i in range(5):
        assert s.schedule(make_pod(f"p{i}", priority=10, requests={"cpu": "300m"})).suggested_host == "b"
    assert len(s.fw.row_cache._nominated) == 1  # one question, asked five times
    # A smaller pod fits beside the nominated one: a different key, a different answer.
    hosts = {s.schedule(make_pod(f"s{i}", priority=10, requests={"cpu": "100m"})).suggested_host for i in range(20)}
    assert hosts == {"a", "b"}
    # The nominated pod goes away: "a" is open to the big pods too.
    s.fw.nominator.delete(vip.pod)
    hosts = {s.schedule(make_pod(f"q{i}", priority=10, requests={"cpu": "300m"})).suggested_host for i in range(20)}
    assert hosts == {"a", "b"}
    # Back again, with "a" changed meanwhile (a small pod bound there): still no room for 300m.
    s.fw.nominator.add(vip, "a")
    s.cache.add_pod(make_pod("small", node_name="a", requests={"cpu": "100m"}))
    assert s.schedule(make_pod("r", priority=10, requests={"cpu": "300m"})).suggested_host == "b"
    s.fw.nominator.delete(vip.pod)
    s.cache.add_pod(make_pod("big", node_name="b", requests={"cpu": "900m"}))
    assert s.schedule(make_pod("t", priority=10, requests={"cpu": "300m"})).suggested_host == "a"
