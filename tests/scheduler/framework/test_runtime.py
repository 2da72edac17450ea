"""The framework runtime: extension point order and contracts (upstream framework_test.go)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from core_helpers import (
    CallLog,
    bind_plugin,
    fake_filter,
    fake_pre_filter,
    fake_score,
    framework,
    post_filter_plugin,
    reserve_plugin,
)

from ksched.clock import VirtualClock
from ksched.scheduler.framework.cycle_state import CycleState, StateData
from ksched.scheduler.framework.interface import (
    FilterPlugin,
    PermitPlugin,
    PostFilterResult,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    RowLocal,
    ScoreExtensions,
    ScorePlugin,
    VectorizedFilter,
    VectorizedFilterStatuses,
    VectorizedScore,
)
from ksched.scheduler.framework.runtime import MAX_PERMIT_TIMEOUT, Framework, FrameworkError
from ksched.scheduler.framework.status import Code, Diagnosis, Status
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.scheduler.plugins.registry import Registry
from ksched.scheduler.queue.nominator import Nominator
from ksched.testing import build_snapshot, make_node, make_pod


def fw_with(*classes: type, order: list[str | tuple[str, int]] | None = None, **kw: Any) -> Framework:
    reg = Registry({c.name: c for c in classes}, load_entry_points=False)
    names = order if order is not None else [c.name for c in classes]
    return framework(*names, registry=reg, **kw)


def nodes3() -> Any:
    cache, snap = build_snapshot([make_node(f"node{i}") for i in (1, 2, 3)])
    return cache, snap


# ------------------------------------------------------------------------------------ PreFilter


def prefilter_case(*specs: tuple[str, Any]) -> tuple[Framework, CallLog]:
    log = CallLog()
    classes = []
    for name, what in specs:
        if isinstance(what, Code):
            code = what
            classes.append(fake_pre_filter(name, status=lambda p, c=code, n=name: Status(c, f"{n} says no"),
                                           log=log))
        else:
            classes.append(fake_pre_filter(name, nodes=lambda p, s=what: s, log=log))
    return fw_with(*classes), log


def run_pf(fw: Framework) -> tuple[Any, Status | None, list[str], CycleState]:
    _, snap = nodes3()
    fw.set_snapshot(snap)
    state = CycleState()
    res, st, plugins = fw.run_pre_filter(state, make_pod("p"), snap.all_nodes())
    return res, st, plugins, state


def test_prefilter_all_success_in_order():
    fw, log = prefilter_case(("a", None), ("b", None))
    res, st, _, state = run_pf(fw)
    assert res is None and st is None
    assert log.points("preFilter") == ["a", "b"]
    assert state.skip_filter_plugins == set()


def test_prefilter_skip_recorded():
    fw, _log = prefilter_case(("skip1", Code.SKIP), ("ok", None), ("skip2", Code.SKIP))
    _, st, _, state = run_pf(fw)
    assert st is None
    assert state.skip_filter_plugins == {"skip1", "skip2"}


def test_prefilter_error_stops():
    fw, log = prefilter_case(("ok", None), ("err", Code.ERROR), ("after", None))
    _, st, _, _ = run_pf(fw)
    assert st is not None and st.code == Code.ERROR and st.plugin == "err"
    assert log.points("preFilter") == ["ok", "err"]


def test_prefilter_unresolvable_stops_the_others():
    fw, log = prefilter_case(("unresolvable", Code.UNSCHEDULABLE_AND_UNRESOLVABLE), ("skip", Code.SKIP))
    _, st, _, _state = run_pf(fw)
    assert st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.plugin == "unresolvable"
    assert log.points("preFilter") == ["unresolvable"]


def test_prefilter_unschedulable_runs_the_others():
    """k/k#119770: after Unschedulable the remaining PreFilter plugins still run (preemption
    needs their state); the Unschedulable status is returned at the end."""
    fw, log = prefilter_case(("unschedulable", Code.UNSCHEDULABLE), ("skip", Code.SKIP))
    _, st, _, state = run_pf(fw)
    assert st is not None and st.code == Code.UNSCHEDULABLE and st.plugin == "unschedulable"
    assert log.points("preFilter") == ["unschedulable", "skip"]
    assert state.skip_filter_plugins == {"skip"}


def test_prefilter_unschedulable_then_unresolvable_returns_unresolvable():
    fw, _log = prefilter_case(("u", Code.UNSCHEDULABLE), ("uu", Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
    _, st, _, _ = run_pf(fw)
    assert st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.plugin == "uu"


def test_prefilter_results_intersect():
    fw, _ = prefilter_case(("a", {"node1", "node2"}), ("all", None), ("b", {"node2", "node3"}))
    res, st, plugins, _ = run_pf(fw)
    assert st is None
    assert res.node_names == {"node2"}
    assert sorted(plugins) == ["a", "b"]


def test_prefilter_empty_result_single_plugin_message():
    fw, log = prefilter_case(("reject-all-nodes", set()), ("skip", Code.SKIP))
    _res, st, _plugins, state = run_pf(fw)
    assert st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.message() == "node(s) didn't satisfy plugin reject-all-nodes"
    assert log.points("preFilter") == ["reject-all-nodes"]
    assert state.skip_filter_plugins == set()


def test_prefilter_disjoint_results_message_lists_plugins_sorted():
    fw, _ = prefilter_case(("zeta", {"node1"}), ("alpha", {"node2"}))
    _, st, plugins, _ = run_pf(fw)
    assert st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    # sets.List() sorts the names; %v of a []string prints "[a b]".
    assert st.message() == "node(s) didn't satisfy plugin(s) [alpha zeta] simultaneously"
    assert sorted(plugins) == ["alpha", "zeta"]


def test_prefilter_result_merge():
    a = PreFilterResult(None)
    b = PreFilterResult({"x", "y"})
    assert a.merge(None).all_nodes()
    assert a.merge(b).node_names == {"x", "y"}
    assert b.merge(a).node_names == {"x", "y"}
    assert b.merge(PreFilterResult({"y", "z"})).node_names == {"y"}


class _ExtPreFilter(PreFilterPlugin, PreFilterExtensions):
    name = "Ext"
    calls: list[str] = []
    fail = False

    def pre_filter(self, state, pod, nodes):
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def add_pod(self, state, pod_to_schedule, pod_info_to_add, node_info):
        self.calls.append("add:" + pod_info_to_add.pod.name)
        return Status.as_error("boom") if self.fail else None

    def remove_pod(self, state, pod_to_schedule, pod_info_to_remove, node_info):
        self.calls.append("remove:" + pod_info_to_remove.pod.name)
        return Status.as_error("boom") if self.fail else None


def test_prefilter_extensions_called_unless_skipped():
    _ExtPreFilter.calls = []
    _ExtPreFilter.fail = True
    fw = fw_with(_ExtPreFilter)
    ni = NodeInfo(make_node("n"))
    pi = PodInfo(make_pod("other"))
    state = CycleState()
    st = fw.run_pre_filter_extension_add_pod(state, make_pod("p"), pi, ni)
    assert st is not None and st.code == Code.ERROR and "Ext" in st.message()
    st = fw.run_pre_filter_extension_remove_pod(state, make_pod("p"), pi, ni)
    assert st is not None and st.code == Code.ERROR
    state.skip_filter_plugins = {"Ext"}
    assert fw.run_pre_filter_extension_add_pod(state, make_pod("p"), pi, ni) is None
    assert fw.run_pre_filter_extension_remove_pod(state, make_pod("p"), pi, ni) is None
    assert _ExtPreFilter.calls == ["add:other", "remove:other"]


# ------------------------------------------------------------------------------------ Filter


def test_filter_order_and_first_rejection_decides():
    log = CallLog()
    f1 = fake_filter("F1", lambda p, ni: True, log=log)
    f2 = fake_filter("F2", lambda p, ni: False, code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason="r2", log=log)
    f3 = fake_filter("F3", lambda p, ni: False, reason="r3", log=log)
    fw = fw_with(f1, f2, f3)
    st = fw.run_filter_plugins(CycleState(), make_pod("p"), NodeInfo(make_node("n")))
    assert st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.plugin == "F2"
    assert st.reasons == ("r2",)
    assert log.points("filter") == ["F1", "F2"]


def test_filter_skipped_after_prefilter_skip():
    log = CallLog()
    pf = fake_pre_filter("PF", status=lambda p: Status.skip(), log=log, with_filter=True)
    fw = fw_with(pf)
    _, snap = nodes3()
    fw.set_snapshot(snap)
    state = CycleState()
    _, st, _ = fw.run_pre_filter(state, make_pod("p"), snap.all_nodes())
    assert st is None
    assert fw.run_filter_plugins(state, make_pod("p"), snap.get("node1")) is None
    assert log.points("filter") == []
    # Without the skip its Filter rejects.
    st = fw.run_filter_plugins(CycleState(), make_pod("p"), snap.get("node1"))
    assert st is not None and st.plugin == "PF"


def test_filter_unexpected_status_is_an_error():
    f = fake_filter("Weird", lambda p, ni: False, code=Code.WAIT)
    st = fw_with(f).run_filter_plugins(CycleState(), make_pod("p"), NodeInfo(make_node("n")))
    assert st is not None and st.code == Code.ERROR and st.plugin == "Weird"


# ------------------------------------------------------------------------- nominated pods (two passes)


def nominated_setup(fits: Any, pod_prio: int, nominated: list[tuple[str, int]]) -> tuple[Framework, Any, list]:
    seen: list[int] = []

    def record(p: Any, ni: NodeInfo) -> bool:
        seen.append(ni.num_pods)
        return fits(p, ni)

    f = fake_filter("Count", record)
    fw = fw_with(f)
    nom = Nominator()
    for name, prio in nominated:
        nom.add(PodInfo(make_pod(name, priority=prio)), "node1")
    fw.nominator = nom
    return fw, make_pod("incoming", priority=pod_prio), seen


def test_nominated_pods_two_passes_both_pass():
    fw, pod, seen = nominated_setup(lambda p, ni: True, 5, [("hi", 10), ("eq", 5), ("lo", 1)])
    ni = NodeInfo(make_node("node1"))
    assert fw.run_filter_plugins_with_nominated_pods(CycleState(), pod, ni) is None
    # Pass 1 with the two pods of equal or higher priority, pass 2 without them.
    assert seen == [2, 0]
    assert ni.num_pods == 0  # the node info itself is not modified


def test_nominated_pods_first_pass_failure_skips_second():
    fw, pod, seen = nominated_setup(lambda p, ni: ni.num_pods < 1, 5, [("hi", 10)])
    st = fw.run_filter_plugins_with_nominated_pods(CycleState(), pod, NodeInfo(make_node("node1")))
    assert st is not None and st.code == Code.UNSCHEDULABLE
    assert seen == [1]


def test_nominated_pods_second_pass_can_fail():
    # Like a pod-affinity filter: fits only when some pod is on the node.
    fw, pod, seen = nominated_setup(lambda p, ni: ni.num_pods > 0, 5, [("hi", 10)])
    st = fw.run_filter_plugins_with_nominated_pods(CycleState(), pod, NodeInfo(make_node("node1")))
    assert st is not None and st.code == Code.UNSCHEDULABLE
    assert seen == [1, 0]


def test_lower_priority_nominated_pods_ignored_and_self_excluded():
    fw, pod, seen = nominated_setup(lambda p, ni: True, 5, [("lo", 4)])
    fw.nominator.add(PodInfo(pod), "node1")  # the pod itself
    assert fw.run_filter_plugins_with_nominated_pods(CycleState(), pod, NodeInfo(make_node("node1"))) is None
    assert seen == [0]  # a single pass, nothing added


def test_nominated_pods_go_through_prefilter_add_pod():
    _ExtPreFilter.calls = []
    _ExtPreFilter.fail = False
    fw = fw_with(_ExtPreFilter)
    nom = Nominator()
    nom.add(PodInfo(make_pod("hi", priority=10)), "node1")
    fw.nominator = nom
    assert fw.run_filter_plugins_with_nominated_pods(CycleState(), make_pod("p"), NodeInfo(make_node("node1"))) \
        is None
    assert _ExtPreFilter.calls == ["add:hi"]
    _ExtPreFilter.fail = True
    st = fw.run_filter_plugins_with_nominated_pods(CycleState(), make_pod("p"), NodeInfo(make_node("node1")))
    assert st is not None and st.code == Code.ERROR


def test_cycle_state_clone_is_independent():
    class Counter(StateData):
        def __init__(self, n: int) -> None:
            self.n = n

        def clone(self) -> Counter:
            return Counter(self.n)

    s = CycleState()
    s.write("c", Counter(1))
    s.write("plain", [1])
    s.skip_filter_plugins = {"x"}
    c = s.clone()
    c.read("c").n = 2
    c.skip_filter_plugins.add("y")
    assert s.read("c").n == 1
    assert s.skip_filter_plugins == {"x"}
    assert c.read("plain") is s.read("plain")
    with pytest.raises(KeyError):
        s.read("missing")
    s.delete("c")
    assert s.get("c") is None


# ------------------------------------------------------------------------------------ PostFilter


def test_post_filter_success_stops():
    a = post_filter_plugin("A", code=Code.UNSCHEDULABLE, message="a failed")
    b = post_filter_plugin("B", code=Code.SUCCESS, nominate="node2")
    c = post_filter_plugin("C", code=Code.UNSCHEDULABLE, message="c failed")
    fw = fw_with(a, b, c)
    res, st = fw.run_post_filter(CycleState(), make_pod("p"), Diagnosis())
    assert st.code == Code.SUCCESS
    assert res is not None and res.nominated_node_name == "node2"


def test_post_filter_all_fail_collects_reasons_first_rejector():
    a = post_filter_plugin("A", message="a failed")
    b = post_filter_plugin("B", message="b failed", nominate="node3")
    fw = fw_with(a, b)
    res, st = fw.run_post_filter(CycleState(), make_pod("p"), Diagnosis())
    assert st.code == Code.UNSCHEDULABLE
    assert st.reasons == ("a failed", "b failed")
    assert st.plugin == "A"  # upstream records the first failed plugin
    assert res is not None and res.nominated_node_name == "node3"


def test_post_filter_unresolvable_and_error_stop():
    a = post_filter_plugin("A", code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message="hopeless")
    b = post_filter_plugin("B", code=Code.SUCCESS)
    _, st = fw_with(a, b).run_post_filter(CycleState(), make_pod("p"), Diagnosis())
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.plugin == "A"
    e = post_filter_plugin("E", code=Code.ERROR, message="broken")
    res, st = fw_with(e, b).run_post_filter(CycleState(), make_pod("p"), Diagnosis())
    assert st.code == Code.ERROR and res is None


def test_post_filter_result_modes():
    r = PostFilterResult("n1")
    assert r.mode == PostFilterResult.MODE_OVERRIDE
    assert PostFilterResult("", PostFilterResult.MODE_NOOP).mode == PostFilterResult.MODE_NOOP


# ------------------------------------------------------------------------------ PreScore / Score


def score_fw(*classes: type, order: list[Any] | None = None) -> tuple[Framework, Any]:
    _cache, snap = build_snapshot([make_node("node1", labels={"s": "10"}), make_node("node2", labels={"s": "60"})])
    fw = fw_with(*classes, order=order)
    fw.set_snapshot(snap)
    return fw, snap


def const(name: str, v: int, **kw: Any) -> type:
    return fake_score(name, lambda p, ni: v, **kw)


def run_scores(fw: Framework, snap: Any, state: CycleState | None = None) -> tuple[list[int], Status | None, dict]:
    state = state or CycleState()
    rec: dict[str, Any] = {}
    totals, st = fw.run_score(state, make_pod("p"), snap, snap.all_nodes(), rec)
    return totals.tolist(), st, rec


def test_score_weights_and_normalize():
    # Upstream "3 Score plugins, 2 NormalizeScore plugins": 1 + 4 + 5*2 = 15.
    s1 = const("score1", 1)
    n1 = const("normalize1", 3, normalize=lambda xs: [4] * len(xs))
    n2 = const("normalize2", 4, normalize=lambda xs: [5] * len(xs))
    fw, snap = score_fw(s1, n1, n2, order=["score1", "normalize1", ("normalize2", 2)])
    totals, st, rec = run_scores(fw, snap)
    assert st is None
    assert totals == [15, 15]
    assert rec["normalize2"][0].tolist() == [4, 4]
    assert rec["normalize2"][1].tolist() == [5, 5]
    assert rec["normalize2"][2].tolist() == [10, 10]


def test_score_per_node_values():
    s = fake_score("ByLabel", lambda p, ni: int(ni.node.labels["s"]))
    fw, snap = score_fw(s, order=[("ByLabel", 3)])
    totals, st, _ = run_scores(fw, snap)
    assert st is None and totals == [30, 180]


@pytest.mark.parametrize(("score", "norm"), [(101, None), (-1, None), (50, 101), (50, -1)])
def test_score_out_of_range_after_normalize_is_an_error(score: int, norm: int | None):
    cls = const("Bad", score, normalize=(lambda xs: [norm] * len(xs)) if norm is not None else None)
    fw, snap = score_fw(cls)
    _, st, _ = run_scores(fw, snap)
    assert st is not None and st.code == Code.ERROR
    bad = norm if norm is not None else score
    assert st.message() == (f"plugin \"Bad\" returns an invalid score {bad}, it should in the range of [0, 100] "
                            "after normalizing")


def test_raw_score_out_of_range_is_fine_when_normalized():
    cls = const("Big", 1000, normalize=lambda xs: [100 if x >= 1000 else 0 for x in xs])
    fw, snap = score_fw(cls)
    totals, st, _ = run_scores(fw, snap)
    assert st is None and totals == [100, 100]


def test_pre_score_skip_skips_score():
    log = CallLog()
    skipping = fake_score("Skipper", lambda p, ni: 100, pre_score_skip=lambda p: True, log=log)
    other = fake_score("Other", lambda p, ni: 7, pre_score_skip=lambda p: False, log=log)
    fw, snap = score_fw(skipping, other)
    state = CycleState()
    assert fw.run_pre_score(state, make_pod("p"), snap.all_nodes()) is None
    assert state.skip_score_plugins == {"Skipper"}
    totals, st, rec = run_scores(fw, snap, state)
    assert st is None and totals == [7, 7]
    assert "Skipper" not in rec
    assert [c for c in log.calls if c[1] == "score"] == [("Other", "score", "node1"), ("Other", "score", "node2")]
    assert log.points("preScore") == ["Skipper", "Other"]


def test_pre_score_error():
    class Err(fake_score("E", lambda p, ni: 0, pre_score_skip=lambda p: False)):  # type: ignore[misc]
        def pre_score(self, state, pod, nodes):
            return Status.as_error("nope")

    Err.name = "E"
    fw, snap = score_fw(Err)
    st = fw.run_pre_score(CycleState(), make_pod("p"), snap.all_nodes())
    assert st is not None and st.code == Code.ERROR and "E" in st.message()


def test_vectorized_and_per_node_scores_agree():
    class Vec(fake_score("Vec", lambda p, ni: int(ni.node.labels["s"])), VectorizedScore):  # type: ignore[misc]
        def score_nodes(self, state, pod, snapshot, rows):
            return np.asarray([int(snapshot.infos[r].node.labels["s"]) for r in rows.tolist()])

    Vec.name = "Vec"
    fw, snap = score_fw(Vec)
    a, _, _ = run_scores(fw, snap)
    fw.vectorize = False
    b, _, _ = run_scores(fw, snap)
    assert a == b == [10, 60]


# ---------------------------------------------------------------------------- Reserve / Permit / Bind


def test_reserve_failure_stops_and_unreserve_runs_in_reverse():
    log = CallLog()
    r1, r2, r3 = (reserve_plugin(n, log) for n in ("R1", "R2", "R3"))
    fw = fw_with(r1, r2, r3)
    pod = make_pod("p", labels={"fail-reserve": "R2"})
    st = fw.run_reserve(CycleState(), pod, "node1")
    assert st is not None and st.code == Code.UNSCHEDULABLE and st.plugin == "R2"
    assert log.points("reserve") == ["R1", "R2"]
    fw.run_unreserve(CycleState(), pod, "node1")
    assert log.points("unreserve") == ["R3", "R2", "R1"]


def test_reserve_error_wrapped():
    log = CallLog()
    fw = fw_with(reserve_plugin("R1", log))
    st = fw.run_reserve(CycleState(), make_pod("p", labels={"error-reserve": "R1"}), "n")
    assert st is not None and st.code == Code.ERROR and st.plugin == "R1"


class _Permit(PermitPlugin):
    verdict: dict[str, tuple[Status | None, float]] = {}

    def permit(self, state, pod, node_name):
        return self.verdict.get(self.name, (None, 0))


def permit_plugin(name: str) -> type:
    return type(name, (_Permit,), {"name": name})


def test_permit_wait_allow_by_all():
    clock = VirtualClock()
    p1, p2 = permit_plugin("P1"), permit_plugin("P2")
    _Permit.verdict = {"P1": (Status(Code.WAIT), 10), "P2": (Status(Code.WAIT), 20)}
    fw = fw_with(p1, p2)
    fw.clock = clock
    pod = make_pod("p")
    st = fw.run_permit(CycleState(), pod, "n")
    assert st is not None and st.code == Code.WAIT
    wp = fw.get_waiting_pod(pod.uid)
    assert wp is not None and not wp.resolved
    assert fw.next_permit_deadline() == clock.now() + 10
    wp.allow("P1")
    assert not wp.resolved
    wp.allow("P2")
    assert wp.resolved
    assert fw.wait_on_permit_result(pod) is None
    assert fw.get_waiting_pod(pod.uid) is None


def test_permit_reject_and_timeout():
    clock = VirtualClock()
    _Permit.verdict = {"P1": (Status(Code.WAIT), 10), "P2": (None, 0)}
    fw = fw_with(permit_plugin("P1"), permit_plugin("P2"))
    fw.clock = clock
    a, b = make_pod("a"), make_pod("b")
    fw.run_permit(CycleState(), a, "n")
    fw.run_permit(CycleState(), b, "n")
    assert fw.reject_waiting_pod(a.uid, "P1", "go away")
    st = fw.wait_on_permit_result(a)
    assert st is not None and st.code == Code.UNSCHEDULABLE and st.message() == "go away" and st.plugin == "P1"
    clock.advance(9.9)
    fw.check_permit_timeouts(clock.now())
    assert not fw.get_waiting_pod(b.uid).resolved
    clock.advance(0.1)
    fw.check_permit_timeouts(clock.now())
    st = fw.wait_on_permit_result(b)
    assert st is not None and st.code == Code.UNSCHEDULABLE
    assert st.message() == "rejected due to timeout after waiting at plugin P1"
    assert fw.next_permit_deadline() is None
    assert not fw.reject_waiting_pod("nobody")


def test_permit_rejection_and_error_and_timeout_cap():
    clock = VirtualClock()
    _Permit.verdict = {"P1": (Status(Code.UNSCHEDULABLE, "no"), 0)}
    fw = fw_with(permit_plugin("P1"), permit_plugin("P2"))
    fw.clock = clock
    st = fw.run_permit(CycleState(), make_pod("p"), "n")
    assert st is not None and st.code == Code.UNSCHEDULABLE and st.plugin == "P1"
    _Permit.verdict = {"P2": (Status.as_error("x"), 0)}
    st = fw.run_permit(CycleState(), make_pod("q"), "n")
    assert st is not None and st.code == Code.ERROR and st.plugin == "P2"
    _Permit.verdict = {"P1": (Status(Code.WAIT), 10**9)}
    fw.run_permit(CycleState(), make_pod("r"), "n")
    assert fw.next_permit_deadline() == clock.now() + MAX_PERMIT_TIMEOUT


def test_bind_skip_falls_through_and_all_skip_is_an_error():
    log = CallLog()
    b1 = bind_plugin("B1", log, skip=True)
    b2 = bind_plugin("B2", log, really_bind=False)
    b3 = bind_plugin("B3", log, really_bind=False)
    fw = fw_with(b1, b2, b3, order=["B1", "B2", "B3"], core=("PrioritySort",))
    assert fw.run_bind(CycleState(), make_pod("p"), "n") is None
    assert log.points("bind") == ["B1", "B2"]
    log.clear()
    fw2 = fw_with(bind_plugin("S1", log, skip=True), bind_plugin("S2", log, skip=True), core=("PrioritySort",))
    st = fw2.run_bind(CycleState(), make_pod("p"), "n")
    assert st is not None and st.code == Code.ERROR
    assert log.points("bind") == ["S1", "S2"]
    fw3 = fw_with(bind_plugin("E1", log, error=True), core=("PrioritySort",))
    st = fw3.run_bind(CycleState(), make_pod("p"), "n")
    assert st is not None and st.code == Code.ERROR and st.plugin == "E1"


# ------------------------------------------------------------------ construction: the fast-path contract


class _AFilter(FilterPlugin):
    def filter(self, state: CycleState, pod: Any, node_info: NodeInfo) -> Status | None:
        return None


class _AScore(ScorePlugin):
    def score(self, state: CycleState, pod: Any, node_info: NodeInfo) -> tuple[int, Status | None]:
        return 0, None


def _fast(self: Any, *args: Any) -> Any:
    return None


FAST_PATH_METHODS = [
    ("filter_nodes", _AFilter, VectorizedFilter),
    ("score_nodes", _AScore, VectorizedScore),
    ("row_local_key", _AFilter, RowLocal),
    ("filter_statuses", _AFilter, VectorizedFilterStatuses),
    ("normalize_score", _AScore, ScoreExtensions),
]


@pytest.mark.parametrize(("method", "base", "declared_by"), FAST_PATH_METHODS, ids=[m[0] for m in FAST_PATH_METHODS])
def test_a_fast_path_method_without_its_declaration_is_refused(method: str, base: type, declared_by: type) -> None:
    """Ignoring it would change scores or speed silently: the framework names the plugin, the
    method and the class it must derive from."""
    undeclared = type("Undeclared", (base,), {"name": "Undeclared", method: _fast})
    with pytest.raises(FrameworkError) as ei:
        fw_with(undeclared)
    assert str(ei.value) == (f'plugin "Undeclared" defines {method} but does not derive from '
                             f"{declared_by.__name__} (ksched.scheduler.framework.interface)")
    declared = type("Declared", (base, declared_by), {"name": "Declared", method: _fast})
    assert isinstance(fw_with(declared).plugins["Declared"], declared_by)


def test_an_inherited_fast_path_method_counts_too() -> None:
    class Normalizing:
        def normalize_score(self, state: Any, pod: Any, nodes: Any, scores: Any) -> Status | None:
            return None

    class Inherits(_AScore, Normalizing):
        name = "Inherits"

    with pytest.raises(FrameworkError, match='plugin "Inherits" defines normalize_score but does not derive '
                                             "from ScoreExtensions"):
        fw_with(Inherits)
