"""DefaultPreemption: tables ported from upstream's
pkg/scheduler/framework/plugins/defaultpreemption/default_preemption_test.go (1.36 line): PostFilter,
DryRunPreemption, SelectBestCandidate, CustomSelection, CustomOrdering, PodEligibleToPreemptOthers,
Preempt and PreEnqueue. Extender cases are left out (ksched has no scheduler extenders).
Resource fits run with a fake fit plugin and, once it exists, with NodeResourcesFit."""

from __future__ import annotations

from typing import Any

import pytest
from test_defaultpreemption_support import (
    FIT_PLUGINS,
    HAVE_INTERPODAFFINITY,
    HAVE_PODTOPOLOGYSPREAD,
    HIGH,
    LARGE,
    LOW,
    MEDIUM,
    MID,
    NEG,
    SMALL,
    VERY_HIGH,
    VERY_LARGE,
    FakeFilter,
    build,
    node,
    pdb,
    pod,
)

from ksched.api.pod import Pod
from ksched.scheduler.framework.events import ActionType, EventResource, QueueingHint
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.plugins.defaultpreemption import (
    DefaultPreemption,
    PreemptionArgsError,
    pod_terminating_by_preemption,
    validate_args,
)
from ksched.scheduler.preemption import MAX_INT32

U = Code.UNSCHEDULABLE
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
ONE_POD = {}  # st.MakeNode().Capacity({pods: 1}): no cpu/memory, one pod
NODE_RES = {"cpu": "200m", "memory": "400"}


def st(code: Code, *reasons: str) -> Status:
    return Status(code, *reasons)


def victims_by_node(cands: Any) -> dict[str, tuple[list[str], int]]:
    return {c.name: (sorted(p.name for p in c.victims.pods), c.victims.num_pdb_violations) for c in cands}


# ---------------------------------------------------------------------------- PostFilter


POST_FILTER_CASES: list[dict[str, Any]] = [
    dict(
        name="pod with higher priority can be made schedulable",
        pod=pod("p", priority=HIGH),
        pods=[pod("p1", node_name="node1")],
        nodes=[node("node1", ONE_POD, pods=1)],
        statuses={"node1": st(U)},
        want_node="node1", want_code=Code.SUCCESS, want_msg="",
    ),
    dict(
        name="pod with tied priority is still unschedulable",
        pod=pod("p"),
        pods=[pod("p1", node_name="node1")],
        nodes=[node("node1", ONE_POD, pods=1)],
        statuses={"node1": st(U)},
        want_node="", want_code=U,
        want_msg="preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
    ),
    dict(
        name="preemption should respect filteredNodesStatuses",
        pod=pod("p", priority=HIGH),
        pods=[pod("p1", node_name="node1")],
        nodes=[node("node1", ONE_POD, pods=1)],
        statuses={"node1": st(UU)},
        want_node="", want_code=U,
        want_msg="preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
    ),
    dict(
        name="preemption should respect absent NodeToStatusReader entry meaning UnschedulableAndUnresolvable",
        pod=pod("p", priority=HIGH),
        pods=[pod("p1", node_name="node1")],
        nodes=[node("node1", ONE_POD, pods=1)],
        statuses={},
        want_node="", want_code=U,
        want_msg="preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
    ),
    dict(
        name="pod can be made schedulable on one node",
        pod=pod("p", priority=MID),
        pods=[pod("p1", node_name="node1", priority=HIGH), pod("p2", node_name="node2", priority=LOW)],
        nodes=[node("node1", ONE_POD, pods=1), node("node2", ONE_POD, pods=1)],
        statuses={"node1": st(U), "node2": st(U)},
        want_node="node2", want_code=Code.SUCCESS, want_msg="",
    ),
    dict(
        name="pod can be made schedulable on minHighestPriority node",
        pod=pod("p", priority=VERY_HIGH),
        pods=[
            pod("p1", node_name="node1", priority=HIGH, labels={"pdb": "non-violating"}),
            pod("p2", node_name="node1", priority=LOW, labels={"pdb": "violating"}),
            pod("p3", node_name="node2", priority=MID, labels={"pdb": "violating"}),
        ],
        pdbs=[pdb("violating-pdb", {"pdb": "violating"}, 0, min_available="100%"),
              pdb("non-violating-pdb", {"pdb": "non-violating"}, MAX_INT32, min_available="0")],
        nodes=[node("node1", ONE_POD, pods=1), node("node2", ONE_POD, pods=1)],
        statuses={"node1": st(U), "node2": st(U)},
        want_node="node2", want_code=Code.SUCCESS, want_msg="",
    ),
    dict(
        name="no candidate nodes found, no enough resource after removing low priority pods",
        pod=pod("p", priority=HIGH, req=LARGE),
        pods=[pod("p1", node_name="node1"), pod("p2", node_name="node2")],
        nodes=[node("node1", NODE_RES), node("node2", NODE_RES)],
        statuses={"node1": st(U), "node2": st(U)},
        want_node="", want_code=U,
        want_msg="preemption: 0/2 nodes are available: 2 Insufficient cpu.",
    ),
    dict(
        name="no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU resource",
        pod=pod("p", priority=HIGH, req=LARGE),
        pods=[pod("p1", node_name="node1", priority=HIGH), pod("p2", node_name="node2"),
              pod("p3", node_name="node3", priority=HIGH)],
        nodes=[node("node1", ONE_POD, pods=1), node("node2", NODE_RES), node("node3", ONE_POD, pods=1)],
        statuses={"node1": st(U), "node2": st(U), "node3": st(U)},
        want_node="", want_code=U,
        want_msg="preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for "
                 "incoming pod.",
    ),
    dict(
        name="no candidate nodes found with mixed reason, 2 UnschedulableAndUnresolvable nodes and 2 nodes "
             "don't have enough CPU resource",
        pod=pod("p", priority=HIGH, req=LARGE),
        pods=[pod("p1", node_name="node1"), pod("p2", node_name="node2")],
        nodes=[node(f"node{i}", NODE_RES) for i in range(1, 5)],
        statuses={"node1": st(U), "node2": st(U), "node4": st(UU)},
        want_node="", want_code=U,
        want_msg="preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for "
                 "scheduling.",
    ),
    dict(
        name="one failed with TestPlugin and the other pass",
        pod=pod("p", priority=HIGH, req=LARGE),
        pods=[pod("p1", node_name="node1"), pod("p2", node_name="node2", req=MEDIUM)],
        nodes=[node("node1", LARGE, labels={"error": "true"}), node("node2", LARGE)],
        statuses={"node1": st(U), "node2": st(U)},
        want_node="node2", want_code=Code.SUCCESS, want_msg="",
    ),
]


@pytest.mark.parametrize("fit", FIT_PLUGINS)
@pytest.mark.parametrize("case", POST_FILTER_CASES, ids=[c["name"] for c in POST_FILTER_CASES])
def test_post_filter(case: dict[str, Any], fit: str) -> None:
    env = build([fit, "test-plugin"], case["nodes"], case["pods"], preemptor=case["pod"], pdbs=case.get("pdbs", ()))
    res, status = env.post_filter(case["pod"], case["statuses"])
    assert status.code == case["want_code"], status
    assert status.message() == case["want_msg"]
    assert res is not None and res.nominated_node_name == case["want_node"]
    if case["want_node"]:
        assert status.plugin == "DefaultPreemption"
        assert env.plugin.last_decision is not None and env.plugin.last_decision.selected == case["want_node"]


@pytest.mark.parametrize("fit", FIT_PLUGINS)
def test_post_filter_error_from_remove_pod_extension(fit: str) -> None:
    """Only one node, and a PreFilter extension fails on it: the error comes back, no nomination."""
    p = pod("p", priority=HIGH, req=LARGE)
    env = build([fit, "test-plugin"], [node("node1", LARGE, labels={"error": "true"})],
                [pod("p1", node_name="node1")], preemptor=p)
    res, status = env.post_filter(p, {"node1": st(U)})
    assert res is None
    assert status.code == Code.ERROR
    msg = status.message()
    # Upstream: preemption: running RemovePod on PreFilter plugin "test-plugin": failed to remove pod: p
    assert msg.startswith("preemption: running RemovePod on PreFilter plugin ")
    assert "test-plugin" in msg and msg.endswith(": failed to remove pod: p")
    assert env.client.deletes == []


def test_post_filter_message_in_fit_error() -> None:
    """The scheduler appends the PostFilter message to the FitError as upstream (" <msg>.")."""
    from ksched.scheduler.framework.status import Diagnosis, fit_error_message

    p = pod("p", priority=HIGH, req=LARGE)
    env = build(["FakeFit"], [node("node1", NODE_RES)], [pod("p1", node_name="node1")], preemptor=p)
    _, status = env.post_filter(p, {"node1": st(U, "Insufficient cpu")})
    d = Diagnosis()
    d.node_to_status = {"node1": st(U, "Insufficient cpu")}
    d.post_filter_msg = status.message()
    assert fit_error_message(1, d) == ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
                                       "available: 1 Insufficient cpu.")


def test_post_filter_not_eligible_preemption_never() -> None:
    p = pod("p", priority=HIGH, spec={"preemptionPolicy": "Never"})
    env = build(["FakeFit"], [node("node1", ONE_POD, pods=1)], [pod("p1", node_name="node1")], preemptor=p)
    res, status = env.post_filter(p, {"node1": st(U)})
    assert res is None
    assert status.code == U
    assert status.message() == "preemption: not eligible due to preemptionPolicy=Never."
    assert env.client.deletes == []
    assert env.plugin.last_decision is not None and not env.plugin.last_decision.eligible


def test_post_filter_reads_latest_preemptor() -> None:
    """The preemptor is re-read from the pod informer: a policy changed there counts."""
    stale = pod("p", priority=HIGH)
    latest = pod("p", priority=HIGH, spec={"preemptionPolicy": "Never"})
    env = build(["FakeFit"], [node("node1", ONE_POD, pods=1)], [pod("p1", node_name="node1")], preemptor=latest)
    _, status = env.post_filter(stale, {"node1": st(U)})
    assert status.message() == "preemption: not eligible due to preemptionPolicy=Never."


def test_post_filter_preemptor_gone_is_an_error() -> None:
    p = pod("p", priority=HIGH)
    env = build(["FakeFit"], [node("node1", ONE_POD, pods=1)], [pod("p1", node_name="node1")])
    res, status = env.post_filter(p, {"node1": st(U)})
    assert res is None and status.code == Code.ERROR
    assert status.message() == 'preemption: pods "p" not found'


def test_post_filter_unschedulable_absent_status_makes_every_node_a_candidate() -> None:
    """A PreFilter rejection with Unschedulable marks every node with it (absent status)."""
    p = pod("p", priority=HIGH)
    env = build(["FakeFit"], [node("node1", ONE_POD, pods=1), node("node2", ONE_POD, pods=1)],
                [pod("p1", node_name="node1", priority=MID), pod("p2", node_name="node2", priority=LOW)],
                preemptor=p)
    res, status = env.post_filter(p, {}, absent=st(U, "rejected in PreFilter"))
    assert status.code == Code.SUCCESS
    assert res.nominated_node_name == "node2"
    assert env.plugin.last_decision is not None
    assert env.plugin.last_decision.potential_nodes == ["node1", "node2"]


# ---------------------------------------------------------------------------- DryRunPreemption


def _dry_run(env: Any, pods: list[Pod], offsets: list[int] | None, pdbs: list[Any] | None = None,
             node_names: list[str] | None = None) -> list[tuple[dict[str, tuple[list[str], int]], int]]:
    out = []
    infos = env.node_infos(node_names)
    for i, p in enumerate(pods):
        state = env.pre_filter(p)
        before = FakeFilter.calls
        off, num = env.plugin.get_offset_and_num_candidates(len(infos))
        if offsets is not None:
            off = offsets[i]
        cands, _, _ = env.plugin.evaluator.dry_run_preemption(state, p, infos, pdbs or [], off, num)
        out.append((victims_by_node(cands), FakeFilter.calls - before))
    return out


DRY_RUN_CASES: list[dict[str, Any]] = [
    dict(name="a pod that does not fit on any node", plugins=["FalseFilter"], nodes=["node1", "node2"],
         pods=[pod("p", priority=HIGH)],
         init=[pod("p1", node_name="node1", priority=MID), pod("p2", node_name="node2", priority=MID)],
         expected=[{}], calls=[2]),
    dict(name="a pod that fits with no preemption", plugins=["TrueFilter"], nodes=["node1", "node2"],
         pods=[pod("p", priority=HIGH)],
         init=[pod("p1", node_name="node1", priority=MID), pod("p2", node_name="node2", priority=MID)],
         fake_code=U, expected=[{}], calls=[2]),
    dict(name="a pod that fits on one node with no preemption", plugins=["MatchFilter"], nodes=["node1", "node2"],
         pods=[pod("node1", priority=HIGH)],
         init=[pod("p1", node_name="node1", priority=MID), pod("p2", node_name="node2", priority=MID)],
         fake_code=U, expected=[{}], calls=[2]),
    dict(name="a pod that fits on both nodes when lower priority pods are preempted", plugins=["FIT"],
         nodes=["node1", "node2"], pods=[pod("p", priority=HIGH, req=LARGE)],
         init=[pod("p1", node_name="node1", priority=MID, req=LARGE),
               pod("p2", node_name="node2", priority=MID, req=LARGE)],
         expected=[{"node1": (["p1"], 0), "node2": (["p2"], 0)}], calls=[4]),
    dict(name="a pod that would fit on the nodes, but other pods running are higher priority, no preemption "
              "would happen", plugins=["FIT"], nodes=["node1", "node2"], pods=[pod("p", priority=LOW, req=LARGE)],
         init=[pod("p1", node_name="node1", priority=MID, req=LARGE),
               pod("p2", node_name="node2", priority=MID, req=LARGE)],
         expected=[{}], calls=[0]),
    dict(name="medium priority pod is preempted, but lower priority one stays as it is small", plugins=["FIT"],
         nodes=["node1", "node2"], pods=[pod("p", priority=HIGH, req=LARGE)],
         init=[pod("p1.1", node_name="node1", priority=LOW, req=SMALL),
               pod("p1.2", node_name="node1", priority=MID, req=LARGE),
               pod("p2", node_name="node2", priority=MID, req=LARGE)],
         expected=[{"node1": (["p1.2"], 0), "node2": (["p2"], 0)}], calls=[5]),
    dict(name="mixed priority pods are preempted", plugins=["FIT"], nodes=["node1", "node2"],
         pods=[pod("p", priority=HIGH, req=LARGE)],
         init=[pod("p1.1", node_name="node1", priority=MID, req=SMALL),
               pod("p1.2", node_name="node1", priority=LOW, req=SMALL),
               pod("p1.3", node_name="node1", priority=MID, req=MEDIUM),
               pod("p1.4", node_name="node1", priority=HIGH, req=SMALL),
               pod("p2", node_name="node2", priority=HIGH, req=LARGE)],
         expected=[{"node1": (["p1.2", "p1.3"], 0)}], calls=[4]),
    dict(name="mixed priority pods are preempted, pick later StartTime one when priorities are equal",
         plugins=["FIT"], nodes=["node1", "node2"], pods=[pod("p", priority=HIGH, req=LARGE)],
         init=[pod("p1.1", node_name="node1", priority=LOW, req=SMALL, start=5),
               pod("p1.2", node_name="node1", priority=LOW, req=SMALL, start=4),
               pod("p1.3", node_name="node1", priority=MID, req=MEDIUM, start=3),
               pod("p1.4", node_name="node1", priority=HIGH, req=SMALL, start=2),
               pod("p2", node_name="node2", priority=HIGH, req=LARGE, start=1)],
         expected=[{"node1": (["p1.1", "p1.3"], 0)}], calls=[4]),
    dict(name="get Unschedulable in the preemption phase when the filter plugins filtering the nodes",
         plugins=["FIT"], nodes=["node1", "node2"], pods=[pod("p", priority=HIGH, req=LARGE)],
         init=[pod("p1", node_name="node1", priority=MID, req=LARGE),
               pod("p2", node_name="node2", priority=MID, req=LARGE)],
         fake_code=U, expected=[{}], calls=[2]),
    dict(name="preemption with violation of same pdb", plugins=["FIT"], nodes=["node1"],
         pods=[pod("p", priority=HIGH, req=VERY_LARGE)],
         init=[pod("p1.1", node_name="node1", priority=MID, req=MEDIUM, labels={"app": "foo"}),
               pod("p1.2", node_name="node1", priority=MID, req=MEDIUM, labels={"app": "foo"})],
         pdbs=[pdb("pdb", {"app": "foo"}, 1)],
         expected=[{"node1": (["p1.1", "p1.2"], 1)}], calls=[3]),
    dict(name="preemption with violation of the pdb with pod whose eviction was processed, the victim doesn't "
              "belong to DisruptedPods", plugins=["FIT"], nodes=["node1"],
         pods=[pod("p", priority=HIGH, req=VERY_LARGE)],
         init=[pod("p1.1", node_name="node1", priority=MID, req=MEDIUM, labels={"app": "foo"}),
               pod("p1.2", node_name="node1", priority=MID, req=MEDIUM, labels={"app": "foo"})],
         pdbs=[pdb("pdb", {"app": "foo"}, 1, disrupted=["p2"])],
         expected=[{"node1": (["p1.1", "p1.2"], 1)}], calls=[3]),
    dict(name="preemption with violation of the pdb with pod whose eviction was processed, the victim belongs "
              "to DisruptedPods", plugins=["FIT"], nodes=["node1"],
         pods=[pod("p", priority=HIGH, req=VERY_LARGE)],
         init=[pod("p1.1", node_name="node1", priority=MID, req=MEDIUM, labels={"app": "foo"}),
               pod("p1.2", node_name="node1", priority=MID, req=MEDIUM, labels={"app": "foo"})],
         pdbs=[pdb("pdb", {"app": "foo"}, 1, disrupted=["p1.2"])],
         expected=[{"node1": (["p1.1", "p1.2"], 0)}], calls=[3]),
    dict(name="preemption with violation of the pdb with pod whose eviction was processed, the victim which "
              "belongs to DisruptedPods is treated as 'nonViolating'", plugins=["FIT"], nodes=["node1"],
         pods=[pod("p", priority=HIGH, req=VERY_LARGE)],
         init=[pod("p1.1", node_name="node1", priority=MID, req=MEDIUM, labels={"app": "foo"}),
               pod("p1.2", node_name="node1", priority=MID, req=MEDIUM, labels={"app": "foo"}),
               pod("p1.3", node_name="node1", priority=MID, req=MEDIUM, labels={"app": "foo"})],
         pdbs=[pdb("pdb", {"app": "foo"}, 1, disrupted=["p1.3"])],
         expected=[{"node1": (["p1.1", "p1.2", "p1.3"], 1)}], calls=[4]),
    # Upstream draws the offsets from a seeded Go rand (4, then 1, then 3); they are given here.
    dict(name="all nodes are possible candidates, but DefaultPreemptionArgs limits to 2",
         args={"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1}, plugins=["FIT"],
         nodes=[f"node{i}" for i in range(1, 6)], pods=[pod("p", priority=HIGH, req=LARGE)],
         init=[pod(f"p{i}", node_name=f"node{i}", priority=MID, req=LARGE) for i in range(1, 6)],
         offsets=[4], expected=[{"node1": (["p1"], 0), "node5": (["p5"], 0)}], calls=[4]),
    dict(name="some nodes are not possible candidates, DefaultPreemptionArgs limits to 2",
         args={"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1}, plugins=["FIT"],
         nodes=[f"node{i}" for i in range(1, 6)], pods=[pod("p", priority=HIGH, req=LARGE)],
         init=[pod(f"p{i}", node_name=f"node{i}", priority=VERY_HIGH if i in (2, 5) else MID, req=LARGE)
               for i in range(1, 6)],
         offsets=[4], expected=[{"node1": (["p1"], 0), "node3": (["p3"], 0)}], calls=[4]),
    dict(name="preemption offset across multiple scheduling cycles and wrap around",
         args={"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1}, plugins=["FIT"],
         nodes=[f"node{i}" for i in range(1, 6)],
         pods=[pod(f"tp{i}", priority=HIGH, req=LARGE) for i in range(1, 4)],
         init=[pod(f"p{i}", node_name=f"node{i}", priority=MID, req=LARGE) for i in range(1, 6)],
         offsets=[4, 1, 3],
         expected=[{"node1": (["p1"], 0), "node5": (["p5"], 0)}, {"node2": (["p2"], 0), "node3": (["p3"], 0)},
                   {"node4": (["p4"], 0), "node5": (["p5"], 0)}], calls=[4, 4, 4]),
    dict(name="preemption looks past numCandidates until a non-PDB violating node is found",
         args={"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 2}, plugins=["FIT"],
         nodes=[f"node{i}" for i in range(1, 6)], pods=[pod("p", priority=HIGH, req=LARGE)],
         init=[pod(f"p{i}", node_name=f"node{i}", priority=MID, req=LARGE,
                   labels={"app": "foo"} if i in (1, 2, 5) else None) for i in range(1, 6)],
         pdbs=[pdb("pdb", {"app": "foo"}, 0)], offsets=[4],
         # node5 (pdb), node1 (pdb), node2 (pdb, over the cap of violating candidates), node3 (ok): stop.
         expected=[{"node1": (["p1"], 1), "node3": (["p3"], 0), "node5": (["p5"], 1)}], calls=[8]),
]


@pytest.mark.parametrize("fit", FIT_PLUGINS)
@pytest.mark.parametrize("case", DRY_RUN_CASES, ids=[c["name"] for c in DRY_RUN_CASES])
def test_dry_run_preemption(case: dict[str, Any], fit: str) -> None:
    plugins = ["FakeFilter"] + [fit if p == "FIT" else p for p in case["plugins"]]
    nodes = [node(n, VERY_LARGE) for n in case["nodes"]]
    env = build(plugins, nodes, case["init"], preemptor=case["pods"], args=case.get("args"))
    if case.get("fake_code") is not None:
        FakeFilter.codes = dict.fromkeys(case["nodes"], case["fake_code"])
    got = _dry_run(env, case["pods"], case.get("offsets"), case.get("pdbs"))
    assert [g[0] for g in got] == case["expected"]
    assert [g[1] for g in got] == case["calls"]


@pytest.mark.skipif(not HAVE_INTERPODAFFINITY, reason="InterPodAffinity not written yet")
@pytest.mark.parametrize("fit", FIT_PLUGINS)
def test_dry_run_pod_with_anti_affinity_is_preempted(fit: str) -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}, "topologyKey": "hostname"}]}}
    p = pod("p", priority=HIGH, req=SMALL, labels={"foo": ""})
    init = [pod("p1.1", node_name="node1", priority=LOW, req=SMALL, labels={"foo": ""}, affinity=anti),
            pod("p1.2", node_name="node1", priority=MID, req=SMALL),
            pod("p1.3", node_name="node1", priority=HIGH, req=SMALL),
            pod("p2", node_name="node2", priority=HIGH, req=SMALL)]
    nodes = [node(n, VERY_LARGE, labels={"hostname": n}) for n in ("node1", "node2")]
    env = build(["FakeFilter", fit, "InterPodAffinity"], nodes, init, preemptor=p)
    got = _dry_run(env, [p], None)
    assert got == [({"node1": (["p1.1"], 0)}, 3)]


def _spread_nodes() -> list[Any]:
    return [node(n, VERY_LARGE, labels={"hostname": n, "zone": z})
            for n, z in (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"))]


def _spread_pod(name: str, prio: int) -> Pod:
    sel = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
    return pod(name, priority=prio, labels={"foo": ""}, topology_spread_constraints=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel},
        {"maxSkew": 1, "topologyKey": "hostname", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}])


@pytest.mark.skipif(not HAVE_PODTOPOLOGYSPREAD, reason="PodTopologySpread not written yet")
def test_dry_run_preemption_resolves_topology_spread() -> None:
    p = _spread_pod("p", HIGH)
    init = [pod("pod-a1", node_name="node-a", labels={"foo": ""}, priority=MID),
            pod("pod-a2", node_name="node-a", labels={"foo": ""}, priority=LOW),
            pod("pod-b1", node_name="node-b", labels={"foo": ""}, priority=LOW),
            pod("pod-x1", node_name="node-x", labels={"foo": ""}, priority=HIGH),
            pod("pod-x2", node_name="node-x", labels={"foo": ""}, priority=HIGH)]
    env = build(["FakeFilter", "PodTopologySpread"], _spread_nodes(), init, preemptor=p)
    got = _dry_run(env, [p], None)
    assert got == [({"node-a": (["pod-a2"], 0), "node-b": (["pod-b1"], 0)}, 5)]


def test_dry_run_statuses_and_errors() -> None:
    """Nodes that give no candidate keep their status; errors are collected."""
    p = pod("p", priority=HIGH, req=LARGE)
    env = build(["FakeFit", "test-plugin"],
                [node("node1", LARGE, labels={"error": "true"}), node("node2", NODE_RES), node("node3", LARGE)],
                [pod("p1", node_name="node1"), pod("p2", node_name="node2"), pod("p3", node_name="node3",
                                                                                 priority=HIGH)],
                preemptor=p)
    cands, statuses, errs = env.plugin.evaluator.dry_run_preemption(env.pre_filter(p), p, env.node_infos(), [], 0, 3)
    assert cands == []
    assert statuses["node1"].code == Code.ERROR
    assert statuses["node2"].code == U and statuses["node2"].reasons == ("Insufficient cpu",)
    assert statuses["node3"] == Status(UU, "No preemption victims found for incoming pod")
    assert len(errs) == 1 and errs[0].endswith("failed to remove pod: p")


def test_dry_run_does_not_touch_the_snapshot() -> None:
    p = pod("p", priority=HIGH, req=LARGE)
    env = build(["FakeFit"], [node("node1", VERY_LARGE)],
                [pod("p1", node_name="node1", priority=MID, req=LARGE)], preemptor=p)
    ni = env.node_infos(["node1"])[0]
    before = (ni.pod_keys(), dict(ni.requested))
    cands, _, _ = env.plugin.evaluator.dry_run_preemption(env.pre_filter(p), p, [ni], [], 0, 1)
    assert victims_by_node(cands) == {"node1": (["p1"], 0)}
    assert (ni.pod_keys(), dict(ni.requested)) == before


# ---------------------------------------------------------------------------- SelectBestCandidate


SELECT_CASES: list[dict[str, Any]] = [
    dict(name="a pod that fits on both nodes when lower priority pods are preempted", nodes=["node1", "node2"],
         pod=pod("p", priority=HIGH, req=LARGE),
         pods=[pod("p1", node_name="node1", priority=MID, req=LARGE, start=0),
               pod("p2", node_name="node2", priority=MID, req=LARGE, start=0)],
         expected=["node1", "node2"]),
    dict(name="node with min highest priority pod is picked", nodes=["node1", "node2", "node3"],
         pod=pod("p", priority=HIGH, req=VERY_LARGE),
         pods=[pod("p1.1", node_name="node1", priority=MID, req=MEDIUM, start=0),
               pod("p1.2", node_name="node1", priority=MID, req=LARGE, start=0),
               pod("p2.1", node_name="node2", priority=MID, req=MEDIUM, start=0),
               pod("p2.2", node_name="node2", priority=LOW, req=MEDIUM, start=0),
               pod("p3.1", node_name="node3", priority=LOW, req=MEDIUM, start=0),
               pod("p3.2", node_name="node3", priority=LOW, req=MEDIUM, start=0)],
         expected=["node3"]),
    dict(name="when highest priorities are the same, minimum sum of priorities is picked",
         nodes=["node1", "node2", "node3"], pod=pod("p", priority=HIGH, req=VERY_LARGE),
         pods=[pod("p1.1", node_name="node1", priority=MID, req=MEDIUM, start=0),
               pod("p1.2", node_name="node1", priority=MID, req=LARGE, start=0),
               pod("p2.1", node_name="node2", priority=MID, req=LARGE, start=0),
               pod("p2.2", node_name="node2", priority=LOW, req=MEDIUM, start=0),
               pod("p3.1", node_name="node3", priority=MID, req=MEDIUM, start=0),
               pod("p3.2", node_name="node3", priority=MID, req=MEDIUM, start=0)],
         expected=["node2"]),
    dict(name="when highest priority and sum are the same, minimum number of pods is picked",
         nodes=["node1", "node2", "node3"], pod=pod("p", priority=HIGH, req=VERY_LARGE),
         pods=[pod("p1.1", node_name="node1", priority=MID, req=SMALL, start=0),
               pod("p1.2", node_name="node1", priority=NEG, req=SMALL, start=0),
               pod("p1.3", node_name="node1", priority=MID, req=SMALL, start=0),
               pod("p1.4", node_name="node1", priority=NEG, req=SMALL, start=0),
               pod("p2.1", node_name="node2", priority=MID, req=LARGE, start=0),
               pod("p2.2", node_name="node2", priority=NEG, req=MEDIUM, start=0),
               pod("p3.1", node_name="node3", priority=MID, req=MEDIUM, start=0),
               pod("p3.2", node_name="node3", priority=NEG, req=SMALL, start=0),
               pod("p3.3", node_name="node3", priority=LOW, req=SMALL, start=0)],
         expected=["node2"]),
    dict(name="sum of adjusted priorities is considered", nodes=["node1", "node2", "node3"],
         pod=pod("p", priority=HIGH, req=VERY_LARGE),
         pods=[pod("p1.1", node_name="node1", priority=MID, req=SMALL, start=0),
               pod("p1.2", node_name="node1", priority=NEG, req=SMALL, start=0),
               pod("p1.3", node_name="node1", priority=NEG, req=SMALL, start=0),
               pod("p2.1", node_name="node2", priority=MID, req=LARGE, start=0),
               pod("p2.2", node_name="node2", priority=NEG, req=MEDIUM, start=0),
               pod("p3.1", node_name="node3", priority=MID, req=MEDIUM, start=0),
               pod("p3.2", node_name="node3", priority=NEG, req=SMALL, start=0),
               pod("p3.3", node_name="node3", priority=LOW, req=SMALL, start=0)],
         expected=["node2"]),
    dict(name="non-overlapping lowest high priority, sum priorities, and number of pods",
         nodes=["node1", "node2", "node3", "node4"], pod=pod("p", priority=VERY_HIGH, req=VERY_LARGE),
         pods=[pod("p1.1", node_name="node1", priority=MID, req=SMALL, start=0),
               pod("p1.2", node_name="node1", priority=LOW, req=SMALL, start=0),
               pod("p1.3", node_name="node1", priority=LOW, req=SMALL, start=0),
               pod("p2.1", node_name="node2", priority=HIGH, req=LARGE, start=0),
               pod("p3.1", node_name="node3", priority=MID, req=MEDIUM, start=0),
               pod("p3.2", node_name="node3", priority=LOW, req=SMALL, start=0),
               pod("p3.3", node_name="node3", priority=LOW, req=SMALL, start=0),
               pod("p3.4", node_name="node3", priority=LOW, req=MEDIUM, start=0),
               pod("p4.1", node_name="node4", priority=MID, req=MEDIUM, start=0),
               pod("p4.2", node_name="node4", priority=MID, req=SMALL, start=0),
               pod("p4.3", node_name="node4", priority=MID, req=SMALL, start=0),
               pod("p4.4", node_name="node4", priority=NEG, req=SMALL, start=0)],
         expected=["node1"]),
    dict(name="same priority, same number of victims, different start time for each node's pod",
         nodes=["node1", "node2", "node3"], pod=pod("p", priority=HIGH, req=VERY_LARGE),
         pods=[pod("p1.1", node_name="node1", priority=MID, req=MEDIUM, start=2),
               pod("p1.2", node_name="node1", priority=MID, req=MEDIUM, start=2),
               pod("p2.1", node_name="node2", priority=MID, req=MEDIUM, start=3),
               pod("p2.2", node_name="node2", priority=MID, req=MEDIUM, start=3),
               pod("p3.1", node_name="node3", priority=MID, req=MEDIUM, start=1),
               pod("p3.2", node_name="node3", priority=MID, req=MEDIUM, start=1)],
         expected=["node2"]),
    dict(name="same priority, same number of victims, different start time for all pods",
         nodes=["node1", "node2", "node3"], pod=pod("p", priority=HIGH, req=VERY_LARGE),
         pods=[pod("p1.1", node_name="node1", priority=MID, req=MEDIUM, start=4),
               pod("p1.2", node_name="node1", priority=MID, req=MEDIUM, start=2),
               pod("p2.1", node_name="node2", priority=MID, req=MEDIUM, start=5),
               pod("p2.2", node_name="node2", priority=MID, req=MEDIUM, start=1),
               pod("p3.1", node_name="node3", priority=MID, req=MEDIUM, start=3),
               pod("p3.2", node_name="node3", priority=MID, req=MEDIUM, start=6)],
         expected=["node3"]),
    dict(name="different priority, same number of victims, different start time for all pods",
         nodes=["node1", "node2", "node3"], pod=pod("p", priority=HIGH, req=VERY_LARGE),
         pods=[pod("p1.1", node_name="node1", priority=LOW, req=MEDIUM, start=4),
               pod("p1.2", node_name="node1", priority=MID, req=MEDIUM, start=2),
               pod("p2.1", node_name="node2", priority=MID, req=MEDIUM, start=6),
               pod("p2.2", node_name="node2", priority=LOW, req=MEDIUM, start=1),
               pod("p3.1", node_name="node3", priority=LOW, req=MEDIUM, start=3),
               pod("p3.2", node_name="node3", priority=MID, req=MEDIUM, start=5)],
         expected=["node2"]),
]


@pytest.mark.parametrize("fit", FIT_PLUGINS)
@pytest.mark.parametrize("case", SELECT_CASES, ids=[c["name"] for c in SELECT_CASES])
def test_select_best_candidate(case: dict[str, Any], fit: str) -> None:
    env = build([fit], [node(n, VERY_LARGE) for n in case["nodes"]], case["pods"], preemptor=case["pod"])
    infos = env.node_infos()
    p = case["pod"]
    for offset in range(len(infos)):  # whatever the random offset, the same node wins
        cands, _, _ = env.plugin.evaluator.dry_run_preemption(env.pre_filter(p), p, infos, [], offset, len(infos))
        best = env.plugin.evaluator.select_candidate(cands)
        assert best is not None and best.name in case["expected"]


# ---------------------------------------------------------------------------- custom selection / ordering


def _label_eligible(key: str, val: str) -> Any:
    return lambda ni, victim, preemptor: victim.pod.labels.get(key) == val


def _node_eligible(name: str) -> Any:
    return lambda ni, victim, preemptor: ni.name == name


def _preemptor_at_least(prio: int) -> Any:
    return lambda ni, victim, preemptor: preemptor.priority >= prio


def _victim_at_most(prio: int) -> Any:
    return lambda ni, victim, preemptor: victim.pod.priority <= prio


def _label_pods() -> list[Pod]:
    return [pod("v1", node_name="node1", priority=MID, req=LARGE, start=0, labels={"preemptible": "no"}),
            pod("v2", node_name="node2", priority=MID, req=LARGE, start=0, labels={"preemptible": "yes"}),
            pod("v3", node_name="node3", priority=LOW, req=LARGE, start=0, labels={"preemptible": "yes"}),
            pod("v4", node_name="node4", priority=LOW, req=LARGE, start=0)]


def _node1_pods(v1_req: dict[str, str]) -> list[Pod]:
    return [pod("v1", node_name="node1", priority=HIGH, req=v1_req, start=0),
            pod("v2", node_name="node1", priority=MID, req=SMALL, start=0),
            pod("v3", node_name="node1", priority=LOW, req=SMALL, start=0),
            pod("v4", node_name="node2", priority=MID, req=LARGE, start=0),
            pod("v5", node_name="node3", priority=LOW, req=LARGE, start=0)]


def _three_pods() -> list[Pod]:
    return [pod("v1", node_name="node1", priority=HIGH, req=LARGE, start=0),
            pod("v2", node_name="node2", priority=MID, req=LARGE, start=0),
            pod("v3", node_name="node3", priority=LOW, req=LARGE, start=0)]


N4 = ["node1", "node2", "node3", "node4"]
N3 = ["node1", "node2", "node3"]

CUSTOM_SELECTION_CASES: list[tuple[str, Any, list[str], Pod, list[Pod], dict[str, list[str]]]] = [
    ("filter for matching pod label: high priority", _label_eligible("preemptible", "yes"), N4,
     pod("p1", priority=HIGH, req=LARGE), _label_pods(), {"node2": ["v2"], "node3": ["v3"]}),
    ("filter for matching pod label: mid priority", _label_eligible("preemptible", "yes"), N4,
     pod("p2", priority=MID, req=LARGE), _label_pods(), {"node3": ["v3"]}),
    ("filter for matching pod label: low priority", _label_eligible("preemptible", "yes"), N4,
     pod("p3", priority=LOW, req=LARGE), _label_pods(), {}),
    ("filter for matching victim node: high priority", _node_eligible("node1"), N3,
     pod("p3", priority=HIGH, req=LARGE), _node1_pods(MEDIUM), {"node1": ["v2", "v3"]}),
    ("filter for matching victim node: mid priority", _node_eligible("node1"), N3,
     pod("p3", priority=MID, req=LARGE), _node1_pods(SMALL), {"node1": ["v3"]}),
    ("filter for matching victim node: low priority", _node_eligible("node1"), N3,
     pod("p3", priority=LOW, req=LARGE), _node1_pods(SMALL), {}),
    ("only pods at or above specified priority can preempted: high priority", _preemptor_at_least(HIGH), N3,
     pod("p1", priority=HIGH, req=LARGE), _three_pods(), {"node2": ["v2"], "node3": ["v3"]}),
    ("only pods at or above specified priority can preempted: mid priority", _preemptor_at_least(HIGH), N3,
     pod("p2", priority=MID, req=LARGE), _three_pods(), {}),
    ("only pods at or below specified priority can be preempted: high priority", _victim_at_most(MID), N3,
     pod("p1", priority=HIGH, req=LARGE), _three_pods(), {"node2": ["v2"], "node3": ["v3"]}),
]


@pytest.mark.parametrize("fit", FIT_PLUGINS)
@pytest.mark.parametrize(("name", "eligible", "nodes", "preemptor", "pods", "expected"), CUSTOM_SELECTION_CASES,
                         ids=[c[0] for c in CUSTOM_SELECTION_CASES])
def test_custom_selection(name: str, eligible: Any, nodes: list[str], preemptor: Pod, pods: list[Pod],
                          expected: dict[str, list[str]], fit: str) -> None:
    env = build([fit], [node(n, VERY_LARGE) for n in nodes], pods, preemptor=preemptor)
    env.plugin.is_eligible_pod = eligible
    infos = env.node_infos()
    cands, _, _ = env.plugin.evaluator.dry_run_preemption(env.pre_filter(preemptor), preemptor, infos, [], 0,
                                                           len(infos))
    assert len(cands) == len(expected)
    while cands:
        sel = env.plugin.evaluator.select_candidate(cands)
        assert sel is not None and sel.name in expected
        assert [p.name for p in sel.victims.pods] == expected[sel.name]
        cands = [c for c in cands if c.name != sel.name]


def _by_oldest_start(a: Pod, b: Pod) -> bool:
    return (a.start_time or 0.0) < (b.start_time or 0.0)


@pytest.mark.parametrize("fit", FIT_PLUGINS)
@pytest.mark.parametrize(("order", "pods", "expected"), [
    (_by_oldest_start,
     [pod("v1", node_name="node1", priority=LOW, req=MEDIUM, start=2),
      pod("v2", node_name="node1", priority=LOW, req=MEDIUM, start=0),
      pod("v3", node_name="node1", priority=MID, req=MEDIUM, start=1)],
     ["v3", "v1"]),  # the newest two, despite one with higher priority
    (lambda a, b: a.name < b.name,
     [pod("foo", uid="v1", node_name="node1", priority=LOW, req=MEDIUM, start=0),
      pod("bar", uid="v2", node_name="node1", priority=LOW, req=MEDIUM, start=0),
      pod("baz", uid="v3", node_name="node1", priority=MID, req=MEDIUM, start=0)],
     ["baz", "foo"]),  # the alphabetically last, despite one with higher priority
], ids=["select newest pods", "select alphabetically-last pods"])
def test_custom_ordering(order: Any, pods: list[Pod], expected: list[str], fit: str) -> None:
    p = pod("p2", priority=HIGH, req=LARGE)
    env = build([fit], [node("node1", VERY_LARGE)], pods, preemptor=p)
    env.plugin.more_important_pod = order
    cands, _, _ = env.plugin.evaluator.dry_run_preemption(env.pre_filter(p), p, env.node_infos(), [], 0, 1)
    assert len(cands) == 1
    assert [v.name for v in cands[0].victims.pods] == expected


# ---------------------------------------------------------------------------- PodEligibleToPreemptOthers


def _terminating(p: Pod, *conditions: dict[str, Any]) -> Pod:
    raw = dict(p.raw)
    raw["metadata"] = {**raw["metadata"], "deletionTimestamp": "2025-01-01T00:00:00Z"}
    if conditions:
        raw["status"] = {**raw.get("status", {}), "conditions": list(conditions)}
    return Pod(raw)


PREEMPTED = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}


@pytest.mark.parametrize(("name", "preemptor", "pods", "nodes", "nominated_status", "expected"), [
    ("Pod with nominated node", pod("p_with_nominated_node", priority=HIGH, nominated_node_name="node1"),
     [_terminating(pod("p1", priority=LOW, node_name="node1"))], ["node1"],
     Status(UU, "node(s) had untolerated taint(s)"), True),
    ("Pod without nominated node", pod("p_without_nominated_node", priority=HIGH), [], [], None, True),
    ("Pod with 'PreemptNever' preemption policy",
     pod("p_with_preempt_never_policy", priority=HIGH, preemption_policy="Never"), [], [], None, False),
    ("preemption victim pod terminating, as indicated by the dedicated DisruptionTarget condition",
     pod("p_with_nominated_node", priority=HIGH, nominated_node_name="node1"),
     [_terminating(pod("p1", priority=LOW, node_name="node1"), PREEMPTED)], ["node1"], None, False),
    ("non-victim Pods terminating", pod("p_with_nominated_node", priority=HIGH, nominated_node_name="node1"),
     [_terminating(pod("p1", priority=LOW, node_name="node1"))], ["node1"], None, True),
    ("terminating by preemption but not of lower priority",
     pod("p_with_nominated_node", priority=HIGH, nominated_node_name="node1"),
     [_terminating(pod("p1", priority=HIGH, node_name="node1"), PREEMPTED)], ["node1"], None, True),
])
def test_pod_eligible_to_preempt_others(name: str, preemptor: Pod, pods: list[Pod], nodes: list[str],
                                        nominated_status: Status | None, expected: bool) -> None:
    env = build([], [node(n) for n in nodes], pods, preemptor=preemptor)
    got, msg = env.plugin.pod_eligible_to_preempt_others(preemptor, nominated_status)
    assert got is expected
    if not expected:
        assert msg in ("not eligible due to preemptionPolicy=Never.",
                       "not eligible due to a terminating pod on the nominated node.")


def test_pod_terminating_by_preemption() -> None:
    p = pod("p", node_name="n")
    assert not pod_terminating_by_preemption(p)
    assert not pod_terminating_by_preemption(_terminating(p))
    assert pod_terminating_by_preemption(_terminating(p, PREEMPTED))
    assert not pod_terminating_by_preemption(_terminating(p, {**PREEMPTED, "reason": "EvictionByEvictionAPI"}))
    assert not pod_terminating_by_preemption(_terminating(p, {**PREEMPTED, "status": "False"}))


# ---------------------------------------------------------------------------- Preempt


def _preempt_basic_pods() -> list[Pod]:
    return [pod("p1.1", node_name="node1", priority=LOW, req=SMALL),
            pod("p1.2", node_name="node1", priority=LOW, req=SMALL),
            pod("p2.1", node_name="node2", priority=HIGH, req=LARGE),
            pod("p3.1", node_name="node3", priority=MID, req=MEDIUM)]


PREEMPT_CASES = [
    ("basic preemption logic", pod("p", priority=HIGH, req=VERY_LARGE, preemption_policy="PreemptLowerPriority"),
     "node1", ["p1.1", "p1.2"]),
    ("no preempting in pod", pod("p", priority=HIGH, req=VERY_LARGE, preemption_policy="Never"), None, []),
    ("PreemptionPolicy is nil", pod("p", priority=HIGH, req=VERY_LARGE), "node1", ["p1.1", "p1.2"]),
]


@pytest.mark.parametrize("async_preemption", [True, False])
@pytest.mark.parametrize("fit", FIT_PLUGINS)
@pytest.mark.parametrize(("name", "preemptor", "want", "expected_pods"), PREEMPT_CASES,
                         ids=[c[0] for c in PREEMPT_CASES])
def test_preempt(name: str, preemptor: Pod, want: str | None, expected_pods: list[str], fit: str,
                 async_preemption: bool) -> None:
    pods = _preempt_basic_pods()
    env = build([fit], [node(n, VERY_LARGE) for n in ("node1", "node2", "node3")], pods, preemptor=preemptor,
                async_preemption=async_preemption)
    res, status = env.post_filter(preemptor, {n: st(U) for n in ("node1", "node2", "node3")})
    if want is None:
        assert res is None and status.code == U
    else:
        assert status.code == Code.SUCCESS and res.nominated_node_name == want
    assert sorted(env.client.deleted_names) == expected_pods
    # Every deleted victim had the DisruptionTarget condition patched in first.
    assert sorted({p[2] for p in env.client.patches}) == expected_pods
    for victim in expected_pods:
        (patch,) = env.client.patched(victim)
        (cond,) = patch["status"]["conditions"]
        assert cond["type"] == "DisruptionTarget" and cond["status"] == "True"
        assert cond["reason"] == "PreemptionByScheduler"
        assert cond["message"] == "default-scheduler: preempting to accommodate a higher priority pod"
    assert sorted(e[0] for e in env.recorder.events) == [f"default/{v}" for v in expected_pods]
    for e in env.recorder.events:
        assert e[1:] == ("Normal", "Preempted", "Preempting", f"Preempted by pod p on node {want}")

    # The victims are now terminating: asking again preempts nothing more.
    deleted = set(env.client.deleted_names)
    for ni in env.node_infos():
        for pi in list(ni.pods):
            if pi.pod.name in deleted:
                ni.remove_pod(pi.pod)
                from ksched.scheduler.framework.types import PodInfo
                ni.add_pod(PodInfo(_terminating(pi.pod, PREEMPTED)))
    if res is not None and res.nominated_node_name:
        nominated = pod("p", priority=HIGH, req=VERY_LARGE, nominated_node_name=res.nominated_node_name)
        env.informers.informer("Pod").add(nominated)
    n_deleted = len(env.client.deletes)
    res2, _ = env.post_filter(preemptor, {})
    assert len(env.client.deletes) == n_deleted
    assert res2 is None or not res2.nominated_node_name


@pytest.mark.skipif(not HAVE_PODTOPOLOGYSPREAD, reason="PodTopologySpread not written yet")
def test_preempt_for_topology_spread_constraints() -> None:
    p = _spread_pod("p", HIGH)
    pods = [pod("p-a1", node_name="node-a", labels={"foo": ""}, priority=HIGH),
            pod("p-a2", node_name="node-a", labels={"foo": ""}, priority=HIGH),
            pod("p-b1", node_name="node-b", labels={"foo": ""}, priority=LOW),
            pod("p-x1", node_name="node-x", labels={"foo": ""}, priority=HIGH),
            pod("p-x2", node_name="node-x", labels={"foo": ""}, priority=HIGH)]
    env = build(["PodTopologySpread"], _spread_nodes(), pods, preemptor=p)
    res, status = env.post_filter(p, {n: st(U) for n in ("node-a", "node-b", "node-x")})
    assert status.code == Code.SUCCESS and res.nominated_node_name == "node-b"
    assert env.client.deleted_names == ["p-b1"]


@pytest.mark.parametrize("fit", FIT_PLUGINS)
def test_preempt_hugepages_and_extended_resources(fit: str) -> None:
    """Hugepages and extended resources are freed by preemption like cpu and memory."""
    res = {"cpu": "4", "memory": "8Gi", "hugepages-2Mi": "1Gi", "nvidia.com/gpu": "2"}
    gpu = {"cpu": "1", "nvidia.com/gpu": "1"}
    huge = {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "512Mi"}
    pods = [pod("gpu-low", node_name="node1", priority=LOW, req=gpu, limits={"nvidia.com/gpu": "1"}),
            pod("gpu-mid", node_name="node1", priority=MID, req=gpu, limits={"nvidia.com/gpu": "1"}),
            pod("cpu-low", node_name="node1", priority=LOW, req={"cpu": "1"}),
            pod("huge-low", node_name="node2", priority=LOW, req=huge, start=5,
                limits={"memory": "1Gi", "hugepages-2Mi": "512Mi"}),
            pod("huge-low2", node_name="node2", priority=LOW, req=huge, start=1,
                limits={"memory": "1Gi", "hugepages-2Mi": "512Mi"})]
    env = build([fit], [node("node1", res), node("node2", res)], pods)

    gpu_pod = pod("want-gpu", priority=HIGH, req=gpu, limits={"nvidia.com/gpu": "1"})
    env.informers.informer("Pod").add(gpu_pod)
    res1, status = env.post_filter(gpu_pod, {"node1": st(U, "Insufficient nvidia.com/gpu")})
    assert status.code == Code.SUCCESS and res1.nominated_node_name == "node1"
    assert env.client.deleted_names == ["gpu-low"]  # the least important GPU pod, not the cpu-only one

    huge_pod = pod("want-huge", priority=HIGH, req=huge, limits={"memory": "1Gi", "hugepages-2Mi": "512Mi"})
    env.informers.informer("Pod").add(huge_pod)
    res2, status = env.post_filter(huge_pod, {"node2": st(U, "Insufficient hugepages-2Mi")})
    assert status.code == Code.SUCCESS and res2.nominated_node_name == "node2"
    assert env.client.deleted_names == ["gpu-low", "huge-low"]  # the one that started later


# ---------------------------------------------------------------------------- prepareCandidate


def test_preempt_clears_lower_priority_nominations_on_the_node() -> None:
    p = pod("p", priority=HIGH, req=VERY_LARGE)
    low_nom = pod("low-nominated", priority=LOW, nominated_node_name="node1")
    high_nom = pod("high-nominated", priority=VERY_HIGH, nominated_node_name="node1")
    mem_only = pod("in-memory-nominated", priority=LOW)  # nominated without a status field
    env = build(["FakeFit"], [node("node1", VERY_LARGE)], [pod("v", node_name="node1", priority=LOW, req=SMALL)],
                preemptor=p, nominated=[(low_nom, "node1"), (high_nom, "node1"), (mem_only, "node1")])
    res, status = env.post_filter(p, {"node1": st(U)})
    assert status.code == Code.SUCCESS and res.nominated_node_name == "node1"
    assert env.client.patched("low-nominated") == [{"status": {"nominatedNodeName": None}}]
    assert env.client.patched("high-nominated") == []
    assert env.client.patched("in-memory-nominated") == []
    assert sorted(pi.pod.name for pi in env.nominator.pods_for_node("node1")) == ["high-nominated",
                                                                               "in-memory-nominated"]


def test_preempt_rejects_victims_waiting_on_permit() -> None:
    from ksched.scheduler.framework.runtime import WaitingPod

    p = pod("p", priority=HIGH, req=VERY_LARGE)
    waiting = pod("waiting", node_name="node1", priority=LOW, req=LARGE)
    env = build(["FakeFit"], [node("node1", VERY_LARGE)], [waiting], preemptor=p)
    wp = WaitingPod(waiting, {"SomePermit": 100.0})
    env.fw.waiting_pods[waiting.uid] = wp
    res, status = env.post_filter(p, {"node1": st(U)})
    assert status.code == Code.SUCCESS and res.nominated_node_name == "node1"
    assert env.client.deletes == [] and env.client.patches == []
    assert wp.resolved and wp.status is not None
    assert wp.status.code == U and wp.status.message() == "preempted" and wp.status.plugin == "DefaultPreemption"
    assert env.recorder.events == [("default/waiting", "Normal", "Preempted", "Preempting",
                                    "Preempted by pod p on node node1 (in kube-scheduler memory).")]


def test_preempt_victim_no_longer_waiting_is_deleted() -> None:
    """A victim whose Permit wait is already over is preempted through the API instead."""
    from ksched.scheduler.framework.runtime import WaitingPod

    p = pod("p", priority=HIGH, req=VERY_LARGE)
    allowed = pod("allowed", node_name="node1", priority=LOW, req=LARGE)
    env = build(["FakeFit"], [node("node1", VERY_LARGE)], [allowed], preemptor=p)
    wp = WaitingPod(allowed, {"SomePermit": 100.0})
    wp.allow("SomePermit")
    env.fw.waiting_pods[allowed.uid] = wp
    res, status = env.post_filter(p, {"node1": st(U)})
    assert status.code == Code.SUCCESS and res.nominated_node_name == "node1"
    assert wp.status is None  # still allowed
    assert env.client.deleted_names == ["allowed"]
    assert env.recorder.events == [("default/allowed", "Normal", "Preempted", "Preempting",
                                    "Preempted by pod p on node node1")]


def _candidate_env(victims: list[Pod], async_preemption: bool) -> Any:
    from ksched.scheduler.preemption import Candidate, Victims

    preemptor = pod("preemptor", priority=HIGH)
    env = build([], [node("node1", VERY_LARGE)], [], preemptor=preemptor, async_preemption=async_preemption)
    return env, preemptor, Candidate("node1", Victims(victims))


MATCHING = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
            "message": "default-scheduler: preempting to accommodate a higher priority pod",
            "lastTransitionTime": "2024-01-01T00:00:00Z"}


def _with_conditions(p: Pod, *conds: dict[str, Any]) -> Pod:
    raw = dict(p.raw)
    raw["status"] = {**raw.get("status", {}), "conditions": list(conds)}
    raw["metadata"] = {**raw["metadata"], "generation": 0}
    return Pod(raw)


PREPARE_CASES: list[dict[str, Any]] = [
    dict(name="no victims", victims=[], deleted=[], patched=[], error=None),
    dict(name="one victim without condition", victims=[pod("victim1", node_name="node1", priority=MID)],
         deleted=["victim1"], patched=["victim1"], error=None),
    dict(name="one victim, but victim is already being deleted",
         victims=[_terminating(pod("victim1-with-deletion-timestamp", node_name="node1", priority=MID))],
         deleted=[], patched=[], error=None),
    dict(name="one victim, but victim is already deleted",
         victims=[pod("not-found-victim", node_name="node1", priority=MID)], missing=["not-found-victim"],
         deleted=[], patched=[], error=None, events=0),
    dict(name="one victim with same condition",
         victims=[_with_conditions(pod("victim1", node_name="node1", priority=MID), MATCHING)],
         deleted=["victim1"], patched=[], error=None),
    dict(name="one victim, but pod deletion failed",
         victims=[_with_conditions(pod("fail-victim", node_name="node1", priority=MID), MATCHING)],
         fail_delete=["fail-victim"], deleted=[], patched=[], error="delete pod failed"),
    dict(name="one victim, but patch pod failed", victims=[pod("fail-victim", node_name="node1", priority=MID)],
         fail_patch=["fail-victim"], deleted=[], patched=[], error="patch pod status failed"),
]


@pytest.mark.parametrize("async_preemption", [False, True])
@pytest.mark.parametrize("case", PREPARE_CASES, ids=[c["name"] for c in PREPARE_CASES])
def test_prepare_candidate(case: dict[str, Any], async_preemption: bool) -> None:
    env, preemptor, cand = _candidate_env(case["victims"], async_preemption)
    env.client.fail_patch.update(case.get("fail_patch", ()))
    env.client.fail_delete.update(case.get("fail_delete", ()))
    env.client.missing.update(case.get("missing", ()))
    ex = env.plugin.executor
    if async_preemption:
        ex.prepare_candidate_async(cand, preemptor, "DefaultPreemption")
        assert ex.preempting == set()
        assert [p.name for p in env.activated] == (["preemptor"] if case["error"] else [])
    else:
        status = ex.prepare_candidate(cand, preemptor, "DefaultPreemption")
        if case["error"] is None:
            assert status is None
        else:
            assert status is not None and status.code == Code.ERROR and status.message() == case["error"]
    assert env.client.deleted_names == case["deleted"]
    assert [p[2] for p in env.client.patches] == case["patched"]
    n_events = case.get("events", len(case["deleted"]))
    assert len(env.recorder.events) == n_events


def test_prepare_candidate_two_victims_second_fails() -> None:
    """Synchronously the first failure is returned; asynchronously the last victim is skipped
    after a failure and the preemptor is activated."""
    v_fail = pod("fail-victim", node_name="node1", priority=MID)
    v2 = pod("victim2", node_name="node1", priority=50000)
    env, preemptor, cand = _candidate_env([v_fail, v2], False)
    env.client.fail_patch.add("fail-victim")
    status = env.plugin.executor.prepare_candidate(cand, preemptor, "DefaultPreemption")
    assert status is not None and status.message() == "patch pod status failed"

    env, preemptor, cand = _candidate_env([v_fail, v2], True)
    env.client.fail_patch.add("fail-victim")
    env.plugin.executor.prepare_candidate_async(cand, preemptor, "DefaultPreemption")
    assert env.client.deleted_names == []
    assert [p.name for p in env.activated] == ["preemptor"]


def test_disruption_condition_carries_observed_generation() -> None:
    victim = pod("victim1", node_name="node1", priority=MID)
    victim = Pod({**victim.raw, "metadata": {**victim.raw["metadata"], "generation": 3}})
    env, preemptor, cand = _candidate_env([victim], False)
    env.clock.advance(10)
    env.plugin.executor.prepare_candidate(cand, preemptor, "DefaultPreemption")
    ((kind, ns, name, patch, ctype, sub),) = env.client.patches
    assert (kind, ns, name, ctype, sub) == ("Pod", "default", "victim1", "application/strategic-merge-patch+json",
                                            "status")
    (cond,) = patch["status"]["conditions"]
    assert cond["lastTransitionTime"] == "2025-01-01T00:00:10Z"
    assert cond["observedGeneration"] == 3


# ---------------------------------------------------------------------------- PreEnqueue / events


@pytest.mark.parametrize(("name", "async_preemption", "check", "want"), [
    ("AsyncPreemption disabled, returns nil", False, "p", None),
    ("AsyncPreemption enabled, same pod, returns UnschedulableAndUnresolvable", True, "p",
     Status(UU, "waiting for the preemption for this pod to be finished")),
    ("AsyncPreemption enabled, different pod, returns nil", True, "p_other", None),
])
def test_pre_enqueue(name: str, async_preemption: bool, check: str, want: Status | None) -> None:
    trigger = pod("p", priority=HIGH)
    env = build(["FakeFit"], [node("node1", ONE_POD, pods=1)], [pod("p1", node_name="node1")], preemptor=trigger,
                async_preemption=async_preemption)
    deferred: list[Any] = []
    env.plugin.executor.runner = deferred.append  # the preemption does not finish until we run it
    env.post_filter(trigger, {"node1": st(U)})
    got = env.plugin.pre_enqueue(pod(check, priority=HIGH))
    assert got == want
    if want is not None:
        assert got is not None and got.plugin == "DefaultPreemption"
    for fn in deferred:
        fn()
    assert env.plugin.pre_enqueue(pod(check, priority=HIGH)) is None


def test_pre_enqueue_last_victim_already_terminating() -> None:
    """Waiting for one last victim: done as soon as that victim is terminating or gone."""
    ex = build([], [node("node")]).plugin.executor
    env = build([], [node("node")])
    ex = env.plugin.executor
    ex.preempting.add("preemptor")
    assert ex.is_pod_running_preemption("preemptor")
    ex.last_victims_pending["preemptor"] = ("default", "victim1")
    assert not ex.is_pod_running_preemption("preemptor")  # not in the pod lister: deleted
    env.informers.informer("Pod").add(pod("victim1", node_name="node"))
    assert ex.is_pod_running_preemption("preemptor")
    env.informers.informer("Pod").add(_terminating(pod("victim1", node_name="node")))
    assert not ex.is_pod_running_preemption("preemptor")
    assert not ex.is_pod_running_preemption("other")


def test_events_to_register() -> None:
    env = build([], [node("n")], async_preemption=True)
    (ev,) = env.plugin.events_to_register()
    assert ev.event.resource == EventResource.ASSIGNED_POD and ev.event.action == ActionType.DELETE
    assert ev.hint is not None and ev.hint(pod("p"), pod("x"), None) == QueueingHint.QUEUE_SKIP
    env.plugin.set_async_preemption(False)
    assert env.plugin.events_to_register() == []


# ---------------------------------------------------------------------------- args


@pytest.mark.parametrize(("pct", "absolute", "nodes", "want"), [
    (10, 100, 10, 10),
    (10, 100, 1000, 100),
    (10, 100, 5000, 500),
    (40, 1, 5, 2),
    (40, 2, 5, 2),
    (0, 3, 10, 3),
    (100, 0, 7, 7),
    (5, 50, 10, 10),
])
def test_num_candidates(pct: int, absolute: int, nodes: int, want: int) -> None:
    env = build([], [node("n")], args={"minCandidateNodesPercentage": pct, "minCandidateNodesAbsolute": absolute})
    assert env.plugin.calculate_num_candidates(nodes) == want
    offset, num = env.plugin.get_offset_and_num_candidates(nodes)
    assert 0 <= offset < nodes and num == want


def test_offsets_are_seeded() -> None:
    a = build([], [node("n")]).plugin
    b = build([], [node("n")]).plugin
    assert [a.get_offset_and_num_candidates(1000)[0] for _ in range(5)] == \
        [b.get_offset_and_num_candidates(1000)[0] for _ in range(5)]


@pytest.mark.parametrize("args", [
    {"minCandidateNodesPercentage": -1, "minCandidateNodesAbsolute": 100},
    {"minCandidateNodesPercentage": 101, "minCandidateNodesAbsolute": 100},
    {"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": -1},
    {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
])
def test_invalid_args(args: dict[str, int]) -> None:
    with pytest.raises(PreemptionArgsError):
        validate_args(args)
    with pytest.raises(PreemptionArgsError):
        DefaultPreemption(args, None)


def test_last_decision_for_explain() -> None:
    p = pod("p", priority=HIGH, req=LARGE)
    env = build(["FakeFit"], [node("node1", VERY_LARGE), node("node2", NODE_RES)],
                [pod("p1", node_name="node1", priority=MID, req=LARGE), pod("p2", node_name="node2")],
                preemptor=p)
    env.post_filter(p, {"node1": st(U), "node2": st(U)})
    d = env.plugin.last_decision
    assert d is not None
    out = d.to_dict()
    assert out["preemptor"] == "default/p" and out["selectedNode"] == "node1"
    assert out["victims"] == ["default/p1"]
    assert out["potentialNodes"] == ["node1", "node2"]
    assert out["candidates"] == [{"node": "node1", "victims": ["default/p1"], "numPDBViolations": 0}]
    assert out["nodeStatuses"] == {"node2": {"code": "Unschedulable", "plugin": "FakeFit",
                                             "reason": "Insufficient cpu"}}
    assert out["code"] == "Success"
