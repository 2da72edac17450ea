"""The preemption helpers (ksched.scheduler.preemption): which nodes preemption may help
(upstream's TestNodesWherePreemptionMightHelp), pickOneNodeForPreemption, the PDB split, pod
importance and start times, IsPodRunningPreemption, error aggregation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.pdb import PodDisruptionBudget
from ksched.api.pod import Pod
from ksched.scheduler.framework.status import Code, Diagnosis, Status
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.scheduler.preemption import (
    MAX_INT32,
    Executor,
    Victims,
    aggregate_error_message,
    filter_pods_with_pdb_violation,
    get_earliest_pod_start_time,
    more_important_pod,
    nodes_for_status_code,
    pdb_selects_pod,
    pick_one_node_for_preemption,
    pod_start_time,
)
from ksched.testing import make_node, make_pod

U = Code.UNSCHEDULABLE
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
NOW = 1_000_000.0


def pod(name: str, priority: int = 0, start: float | None = None, labels: dict[str, str] | None = None,
        ns: str = "default") -> Pod:
    p = make_pod(name, ns, uid=name, priority=priority, labels=labels)
    if start is not None:
        p.start_time = start
    return p


def pdb(name: str, selector: dict[str, Any] | None, allowed: int, ns: str = "default",
        disrupted: tuple[str, ...] = ()) -> PodDisruptionBudget:
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["selector"] = selector
    return PodDisruptionBudget({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                "metadata": {"name": name, "namespace": ns}, "spec": spec,
                                "status": {"disruptionsAllowed": allowed,
                                           "disruptedPods": dict.fromkeys(disrupted, "2025-01-01T00:00:00Z")}})


# ---------------------------------------------------------------------------- nodes where preemption may help


NODE_NAMES = ["node1", "node2", "node3", "node4"]


@pytest.mark.parametrize(("name", "statuses", "expected"), [
    ("No node should be attempted",
     {"node1": Status(UU, "node(s) didn't match Pod's node affinity/selector"),
      "node2": Status(UU, "node(s) didn't match the requested node name"),
      "node3": Status(UU, "node(s) had untolerated taint(s)"),
      "node4": Status(UU, "node(s) didn't match pod affinity rules")}, []),
    ("ErrReasonAntiAffinityRulesNotMatch should be tried as it indicates that the pod is unschedulable due to "
     "inter-pod anti-affinity",
     {"node1": Status(U, "node(s) didn't match pod anti-affinity rules"),
      "node2": Status(UU, "node(s) didn't match the requested node name"),
      "node3": Status(UU, "node(s) were unschedulable")}, ["node1", "node4"]),
    ("ErrReasonAffinityRulesNotMatch should not be tried as it indicates that the pod is unschedulable due to "
     "inter-pod affinity, but ErrReasonAntiAffinityRulesNotMatch should be tried",
     {"node1": Status(UU, "node(s) didn't match pod affinity rules"),
      "node2": Status(U, "node(s) didn't match pod anti-affinity rules")}, ["node2", "node3", "node4"]),
    ("Mix of failed predicates works fine",
     {"node1": Status(UU, "node(s) had no available disk"), "node2": Status(U, "Insufficient memory")},
     ["node2", "node3", "node4"]),
    ("Node condition errors should be considered unresolvable",
     {"node1": Status(UU, "node(s) had unknown conditions")}, ["node2", "node3", "node4"]),
    ("ErrVolume... errors should not be tried",
     {"node1": Status(UU, "node(s) had no available volume zone"),
      "node2": Status(UU, "node(s) had volume node affinity conflict"),
      "node3": Status(UU, "node(s) didn't find available persistent volumes to bind")}, ["node4"]),
    ("ErrReasonConstraintsNotMatch should be tried as it indicates that the pod is unschedulable due to "
     "topology spread constraints",
     {"node1": Status(U, "node(s) didn't match pod topology spread constraints"),
      "node2": Status(UU, "node(s) didn't match the requested node name"),
      "node3": Status(U, "node(s) didn't match pod topology spread constraints")}, ["node1", "node3", "node4"]),
    ("UnschedulableAndUnresolvable status should be skipped but Unschedulable should be tried",
     {"node2": Status(UU, ""), "node3": Status(U, ""), "node4": Status(UU, "")}, ["node1", "node3"]),
    ("ErrReasonNodeLabelNotMatch should not be tried",
     {"node2": Status(UU, "node(s) didn't match pod topology spread constraints (missing required label)"),
      "node3": Status(U, ""), "node4": Status(UU, "")}, ["node1", "node3"]),
])
def test_nodes_where_preemption_might_help(name: str, statuses: dict[str, Status], expected: list[str]) -> None:
    # Upstream's table gives the absent nodes Unschedulable (its NodeToStatusMap had no absent status).
    infos = [NodeInfo(make_node(n)) for n in NODE_NAMES]
    d = Diagnosis()
    d.node_to_status = statuses
    d.absent_status = Status(U)
    assert [ni.name for ni in nodes_for_status_code(d, infos, U)] == expected


def test_nodes_for_status_code_default_absent_is_unresolvable() -> None:
    infos = [NodeInfo(make_node(n)) for n in NODE_NAMES]
    d = Diagnosis()
    d.node_to_status = {"node3": Status(U), "node1": Status(U), "gone": Status(U)}
    assert [ni.name for ni in nodes_for_status_code(d, infos, U)] == ["node1", "node3"]  # snapshot order
    d.absent_status = Status(U, "from PreFilter")
    d.node_to_status = {"node2": Status(UU)}
    assert [ni.name for ni in nodes_for_status_code(d, infos, U)] == ["node1", "node3", "node4"]


# ---------------------------------------------------------------------------- pickOneNodeForPreemption


def victims(*pods: Pod, violations: int = 0) -> Victims:
    return Victims(list(pods), violations)


@pytest.mark.parametrize(("name", "nodes", "expected"), [
    ("fewest PDB violations first",
     {"a": victims(pod("a1", 1), violations=2), "b": victims(pod("b1", 1000), pod("b2", 1000), violations=1),
      "c": victims(pod("c1", 1), violations=1)}, "c"),
    ("then the lowest highest-priority victim",
     {"a": victims(pod("a1", 100), pod("a2", 0)), "b": victims(pod("b1", 50), pod("b2", 50), pod("b3", 50))},
     "b"),
    ("then the smallest sum of priorities (shifted by MaxInt32+1)",
     {"a": victims(pod("a1", 100), pod("a2", -100), pod("a3", -100)),
      "b": victims(pod("b1", 100), pod("b2", -100))}, "b"),
    ("negative priorities: more victims cost more even if each is negative",
     {"a": victims(pod("a1", -5), pod("a2", -5)), "b": victims(pod("b1", -5))}, "b"),
    ("then the fewest victims",
     {"a": victims(pod("a1", 10), pod("a2", 0)), "b": victims(pod("b1", 10))}, "b"),
    ("then the latest earliest start time among the highest-priority victims",
     {"a": victims(pod("a1", 10, start=5.0), pod("a2", 0, start=100.0)),
      "b": victims(pod("b1", 10, start=7.0), pod("b2", 0, start=1.0))}, "b"),
    ("a victim that has not started counts as starting now",
     {"a": victims(pod("a1", 10, start=5.0)), "b": victims(pod("b1", 10))}, "b"),
    ("all equal: the first node", {"x": victims(pod("x1", 1, start=3.0)), "y": victims(pod("y1", 1, start=3.0))},
     "x"),
])
def test_pick_one_node_for_preemption(name: str, nodes: dict[str, Victims], expected: str) -> None:
    assert pick_one_node_for_preemption(nodes, None, NOW) == expected


def test_pick_one_node_with_score_funcs() -> None:
    nodes = {"a": victims(pod("a1", 1)), "b": victims(pod("b1", 1000)), "c": victims(pod("c1", 1000))}
    order = {"a": 1, "b": 5, "c": 5}
    assert pick_one_node_for_preemption(nodes, [lambda n: order[n], lambda n: -ord(n)], NOW) == "b"
    assert pick_one_node_for_preemption({}, None, NOW) == ""


def test_sum_uses_int64_shift() -> None:
    # Without the shift, -MaxInt32 + -MaxInt32 would beat a single -MaxInt32.
    nodes = {"two": victims(pod("t1", -MAX_INT32), pod("t2", -MAX_INT32)), "one": victims(pod("o1", -MAX_INT32))}
    assert pick_one_node_for_preemption(nodes, None, NOW) == "one"


# ---------------------------------------------------------------------------- importance and start times


def test_more_important_pod() -> None:
    assert more_important_pod(pod("a", 10), pod("b", 5), NOW)
    assert not more_important_pod(pod("a", 5), pod("b", 10), NOW)
    assert more_important_pod(pod("a", 5, start=1.0), pod("b", 5, start=2.0), NOW)
    assert not more_important_pod(pod("a", 5, start=2.0), pod("b", 5, start=1.0), NOW)
    assert more_important_pod(pod("a", 5, start=1.0), pod("b", 5), NOW)  # not started: now
    assert not more_important_pod(pod("a", 5), pod("b", 5), NOW)
    assert pod_start_time(pod("a"), NOW) == NOW


def test_get_earliest_pod_start_time() -> None:
    v = victims(pod("a", 1, start=9.0), pod("b", 5, start=8.0), pod("c", 5, start=3.0), pod("d", 1, start=1.0))
    assert get_earliest_pod_start_time(v, NOW) == 3.0
    assert get_earliest_pod_start_time(victims(), NOW) is None
    assert get_earliest_pod_start_time(victims(pod("x", 1)), NOW) == NOW


# ---------------------------------------------------------------------------- PDB split


def _split(pods: list[Pod], pdbs: list[PodDisruptionBudget]) -> tuple[list[str], list[str]]:
    v, nv = filter_pods_with_pdb_violation([PodInfo(p) for p in pods], pdbs)
    return [pi.pod.name for pi in v], [pi.pod.name for pi in nv]


APP = {"matchLabels": {"app": "x"}}


@pytest.mark.parametrize(("name", "pods", "pdbs", "violating", "non_violating"), [
    ("budget of one: the second matching pod violates",
     [pod("a", labels={"app": "x"}), pod("b", labels={"app": "x"}), pod("c", labels={"app": "y"})],
     [pdb("p", APP, 1)], ["b"], ["a", "c"]),
    ("no budget: every matching pod violates", [pod("a", labels={"app": "x"}), pod("b", labels={"app": "x"})],
     [pdb("p", APP, 0)], ["a", "b"], []),
    ("other namespace does not match", [pod("a", labels={"app": "x"}, ns="other")], [pdb("p", APP, 0)], [], ["a"]),
    ("pod without labels matches nothing", [pod("a")], [pdb("p", {}, 0)], [], ["a"]),
    ("empty selector matches nothing here", [pod("a", labels={"app": "x"})], [pdb("p", {}, 0)], [], ["a"]),
    ("nil selector matches nothing", [pod("a", labels={"app": "x"})], [pdb("p", None, 0)], [], ["a"]),
    ("already disrupted pods are not counted again",
     [pod("a", labels={"app": "x"}), pod("b", labels={"app": "x"})], [pdb("p", APP, 1, disrupted=("a",))],
     [], ["a", "b"]),
    ("any violated PDB makes the pod violating",
     [pod("a", labels={"app": "x", "tier": "t"})],
     [pdb("p1", APP, 5), pdb("p2", {"matchLabels": {"tier": "t"}}, 0)], ["a"], []),
    ("expressions", [pod("a", labels={"app": "x"}), pod("b", labels={"app": "z"})],
     [pdb("p", {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]}, 0)], ["a"], ["b"]),
])
def test_filter_pods_with_pdb_violation(name: str, pods: list[Pod], pdbs: list[PodDisruptionBudget],
                                        violating: list[str], non_violating: list[str]) -> None:
    assert _split(pods, pdbs) == (violating, non_violating)


def test_pdb_selects_pod() -> None:
    assert pdb_selects_pod(pdb("p", APP, 0), pod("a", labels={"app": "x"}))
    assert not pdb_selects_pod(pdb("p", APP, 0), pod("a", labels={"app": "y"}))


# ---------------------------------------------------------------------------- IsPodRunningPreemption


class _Informer:
    def __init__(self, pods: dict[str, Pod]) -> None:
        self.pods = pods

    def get(self, key: str) -> Pod | None:
        return self.pods.get(key.split("/", 1)[1])

    def list(self) -> list[Pod]:
        return list(self.pods.values())


class _Informers:
    def __init__(self, pods: dict[str, Pod]) -> None:
        self.inf = _Informer(pods)

    def informer(self, kind: str, **_: Any) -> _Informer:
        return self.inf


class _Handle:
    def __init__(self, pods: dict[str, Pod]) -> None:
        self.informers = _Informers(pods)
        self.clock = None


def _victim(name: str, terminating: bool = False) -> Pod:
    p = make_pod(name, "ns", uid=name, node_name="node", priority=100)
    if terminating:
        p.deletion_timestamp = NOW
    return p


@pytest.mark.parametrize(("name", "preempting", "last", "lister", "expected"), [
    ("preemptor not in preemptingSet", set(), {}, {}, False),
    ("preemptor not in preemptingSet, lastVictimSet not empty", set(), {"preemptor": ("ns", "victim1")}, {}, False),
    ("preemptor in preemptingSet, no lastVictim for preemptor", {"preemptor"}, {"otherPod": ("ns", "victim1")}, {},
     True),
    ("preemptor in preemptingSet, victim in lastVictimSet, not in PodLister", {"preemptor"},
     {"preemptor": ("ns", "victim1")}, {}, False),
    ("preemptor in preemptingSet, victim in lastVictimSet and in PodLister", {"preemptor"},
     {"preemptor": ("ns", "victim1")}, {"victim1": _victim("victim1"), "victim2": _victim("victim2")}, True),
    ("preemptor in preemptingSet, victim in lastVictimSet and in PodLister with deletion timestamp", {"preemptor"},
     {"preemptor": ("ns", "victim-deleted")},
     {"victim1": _victim("victim1"), "victim-deleted": _victim("victim-deleted", True)}, False),
])
def test_is_pod_running_preemption(name: str, preempting: set[str], last: dict[str, tuple[str, str]],
                                   lister: dict[str, Pod], expected: bool) -> None:
    ex = Executor(_Handle(lister))
    ex.preempting = set(preempting)
    ex.last_victims_pending = dict(last)
    assert ex.is_pod_running_preemption("preemptor") is expected


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(("msgs", "want"), [
    ([], ""),
    (["a"], "a"),
    (["a", "b"], "[a, b]"),
    (["a", "a"], "a"),
    (["a", "b", "a"], "[a, b]"),
])
def test_aggregate_error_message(msgs: list[str], want: str) -> None:
    assert aggregate_error_message(msgs) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.one_of(st.none(), st.integers(0, 5))), max_size=8))
def test_default_importance_key_sort_matches_the_comparison(specs: list[tuple[int, int | None]]) -> None:
    """DefaultPreemption sorts victims with a key (priority, then start time) when its
    ``more_important_pod`` is the default: the same order as the comparison sort."""
    from ksched.scheduler.plugins.defaultpreemption import DefaultPreemption
    from ksched.scheduler.preemption import more_important_pod, sort_by_importance

    infos = []
    for i, (prio, start) in enumerate(specs):
        raw = make_pod(f"p{i}", priority=prio).raw
        if start is not None:
            raw["status"] = {"startTime": f"2026-01-01T00:00:0{start}Z"}
        infos.append(PodInfo(Pod(raw)))
    plugin = DefaultPreemption({}, None)
    now = plugin._now()
    by_cmp = list(infos)
    sort_by_importance(by_cmp, lambda a, b: more_important_pod(a, b, now), lambda pi: pi.pod)
    by_key = list(infos)
    plugin._sort_by_importance(by_key)
    assert [pi.pod.name for pi in by_key] == [pi.pod.name for pi in by_cmp]
