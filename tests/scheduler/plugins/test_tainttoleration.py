"""TaintToleration, with the cases of upstream's taint_toleration_test.go (1.36 reason wording),
and DefaultNormalizeScore (helper/normalize_score_test.go)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ActionType, EventResource, QueueingHint
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.helper import default_normalize_score
from ksched.scheduler.plugins.tainttoleration import ERR_REASON_UNTOLERATED, TaintToleration
from ksched.testing import PluginRunner, make_node, make_pod

NS = "NoSchedule"
PNS = "PreferNoSchedule"
NE = "NoExecute"


def taint(key: str, value: str, effect: str) -> dict[str, Any]:
    return {"key": key, "value": value, "effect": effect}


def tol(key: str = "", value: str = "", effect: str = "", operator: str = "") -> dict[str, Any]:
    d: dict[str, Any] = {}
    if key:
        d["key"] = key
    if value:
        d["value"] = value
    if effect:
        d["effect"] = effect
    if operator:
        d["operator"] = operator
    return d


UNTOLERATED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint(s)")


def test_reason_is_the_1_36_wording() -> None:
    assert ERR_REASON_UNTOLERATED == "node(s) had untolerated taint(s)"


# ---------------------------------------------------------------- Score (upstream TestTaintTolerationScore)

SCORE_CASES = [
    pytest.param(
        [tol("foo", "bar", PNS, "Equal")],
        {"nodeA": [taint("foo", "bar", PNS)], "nodeB": [taint("foo", "blah", PNS)]},
        {"nodeA": 100, "nodeB": 0},
        id="tolerated-taint-scores-higher"),
    pytest.param(
        [tol("cpu-type", "arm64", PNS, "Equal"), tol("disk-type", "ssd", PNS, "Equal")],
        {"nodeA": [], "nodeB": [taint("cpu-type", "arm64", PNS)],
         "nodeC": [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)]},
        {"nodeA": 100, "nodeB": 100, "nodeC": 100},
        id="number-of-tolerated-taints-does-not-matter"),
    pytest.param(
        [tol("foo", "bar", PNS, "Equal")],
        {"nodeA": [], "nodeB": [taint("cpu-type", "arm64", PNS)],
         "nodeC": [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)]},
        {"nodeA": 100, "nodeB": 50, "nodeC": 0},
        id="more-intolerable-taints-lower-score"),
    pytest.param(
        [tol("cpu-type", "arm64", NS, "Equal"), tol("disk-type", "ssd", NS, "Equal")],
        {"nodeA": [], "nodeB": [taint("cpu-type", "arm64", NS)],
         "nodeC": [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)]},
        {"nodeA": 100, "nodeB": 100, "nodeC": 0},
        id="only-prefer-no-schedule-counts"),
    pytest.param(
        [],
        {"nodeA": [], "nodeB": [taint("cpu-type", "arm64", PNS)]},
        {"nodeA": 100, "nodeB": 0},
        id="no-tolerations-prefers-untainted-node"),
    pytest.param(
        [tol("cpu-type", operator="Exists")],
        {"nodeA": [taint("cpu-type", "arm64", PNS)], "nodeB": [taint("mem", "x", PNS)]},
        {"nodeA": 100, "nodeB": 0},
        id="empty-effect-toleration-tolerates-prefer-no-schedule"),
]


@pytest.mark.parametrize(("tolerations", "node_taints", "expected"), SCORE_CASES)
def test_score(tolerations: list[dict[str, Any]], node_taints: dict[str, list[dict[str, Any]]],
               expected: dict[str, int]) -> None:
    nodes = [make_node(n, taints=t) for n, t in node_taints.items()]
    r = PluginRunner(["TaintToleration"], nodes)
    got = r.score(make_pod("pod1", tolerations=tolerations))
    assert got["TaintToleration"] == expected


def test_raw_score_counts_intolerable_prefer_no_schedule_taints() -> None:
    nodes = [make_node("a"), make_node("b", taints=[taint("x", "1", PNS), taint("y", "1", PNS),
                                                  taint("z", "1", NS)])]
    r = PluginRunner(["TaintToleration"], nodes)
    raw = r.score(make_pod("p", tolerations=[tol("y", operator="Exists")]), normalize=False)
    assert raw["TaintToleration"] == {"a": 0, "b": 1}


def test_score_without_pre_score_is_an_error() -> None:
    p = TaintToleration()
    ni = NodeInfo(make_node("n"))
    _, st = p.score(CycleState(), make_pod(), ni)
    assert st is not None and st.code == Code.ERROR


def test_weighted_score_uses_weight_3() -> None:
    nodes = [make_node("a"), make_node("b", taints=[taint("x", "1", PNS)])]
    r = PluginRunner([("TaintToleration", 3)], nodes)
    assert r.score(make_pod("p"), weighted=True)["TaintToleration"] == {"a": 300, "b": 0}


# ---------------------------------------------------------------- Filter (upstream TestTaintTolerationFilter)

FILTER_CASES = [
    pytest.param([], [taint("dedicated", "user1", NS)], UNTOLERATED, id="no-tolerations-nonempty-taints"),
    pytest.param([tol("dedicated", "user1", NS)], [taint("dedicated", "user1", NS)], None,
                 id="tolerates-dedicated-user1"),
    pytest.param([tol("dedicated", "user2", NS, "Equal")], [taint("dedicated", "user1", NS)], UNTOLERATED,
                 id="wrong-value"),
    pytest.param([tol("foo", effect=NS, operator="Exists")], [taint("foo", "bar", NS)], None, id="exists"),
    pytest.param([tol("dedicated", "user2", NS, "Equal"), tol("foo", effect=NS, operator="Exists")],
                 [taint("dedicated", "user2", NS), taint("foo", "bar", NS)], None, id="all-taints-tolerated"),
    pytest.param([tol("foo", "bar", PNS, "Equal")], [taint("foo", "bar", NS)], UNTOLERATED,
                 id="effect-mismatch"),
    pytest.param([tol("foo", "bar", operator="Equal")], [taint("foo", "bar", NS)], None,
                 id="empty-effect-tolerates-all-effects"),
    pytest.param([tol("dedicated", "user2", NS, "Equal")], [taint("dedicated", "user1", PNS)], None,
                 id="prefer-no-schedule-is-not-filtered"),
    pytest.param([], [taint("dedicated", "user1", PNS)], None, id="no-tolerations-prefer-no-schedule"),
    pytest.param([], [taint("node.kubernetes.io/not-ready", "", NE)], UNTOLERATED, id="no-execute-filtered"),
    pytest.param([tol(operator="Exists")], [taint("a", "b", NS), taint("c", "", NE)], None,
                 id="wildcard-toleration"),
    pytest.param([tol("a", "b", NS)], [taint("a", "b", NS), taint("c", "", NE)], UNTOLERATED,
                 id="second-taint-untolerated"),
]


@pytest.mark.parametrize(("tolerations", "taints", "want"), FILTER_CASES)
def test_filter(tolerations: list[dict[str, Any]], taints: list[dict[str, Any]], want: Status | None) -> None:
    r = PluginRunner(["TaintToleration"], [make_node("nodeA", taints=taints)])
    got = r.filter(make_pod("pod1", tolerations=tolerations))["nodeA"]
    if want is None:
        assert got is None
    else:
        assert got == want
        assert got is not None and got.plugin == "TaintToleration"


def test_vectorized_filter_matches_per_node_on_many_nodes_and_is_cached() -> None:
    nodes = []
    for i in range(60):
        taints = []
        if i % 3 == 0:
            taints.append(taint("dedicated", f"g{i % 2}", NS))
        if i % 5 == 0:
            taints.append(taint("spot", "", NE))
        if i % 7 == 0:
            taints.append(taint("soft", "x", PNS))
        nodes.append(make_node(f"n{i}", taints=taints))
    r = PluginRunner(["TaintToleration"], nodes)
    pods = [make_pod("a"), make_pod("b", tolerations=[tol("dedicated", "g0", NS)]),
            make_pod("c", tolerations=[tol("spot", operator="Exists", effect=NE)]),
            make_pod("d", tolerations=[tol(operator="Exists")])]
    for p in pods:
        out = r.filter(p)  # asserts vectorized == per-node
        fits = {n for n, s in out.items() if s is None}
        expect = {n.name for n in nodes
                  if all(any(_tolerates(t, x) for t in p.tolerations) for x in n.taints if x.effect in (NS, NE))}
        assert fits == expect
        r.score(p)  # asserts vectorized == per-node scores
    # A second pod of the same template reuses the cached per-node verdicts.
    snap = r.snapshot
    pl = r.fw.plugins["TaintToleration"]
    before = len(snap._row_values)
    pl.filter_nodes(CycleState(), make_pod("b2", tolerations=[tol("dedicated", "g0", NS)]), snap, snap.order)
    assert len(snap._row_values) == before


def _tolerates(t: Any, x: Any) -> bool:
    return bool(t.tolerates(x))


def test_vectorized_filter_follows_node_taint_changes() -> None:
    r = PluginRunner(["TaintToleration"], [make_node("a"), make_node("b")])
    pod = make_pod("p")
    assert r.filter(pod) == {"a": None, "b": None}
    old = r.cache.nodes["b"].node
    assert old is not None
    r.cache.update_node(old, make_node("b", taints=[taint("k", "v", NS)]))
    r.refresh()
    out = r.filter(pod)
    assert out["a"] is None and out["b"] == UNTOLERATED


# ---------------------------------------------------------------- events and hints


def test_events_to_register() -> None:
    evs = TaintToleration().events_to_register()
    assert [(e.event.resource, e.event.action) for e in evs] == [
        (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
        (EventResource.POD, ActionType.UPDATE_POD_TOLERATION),
    ]
    assert all(e.hint is not None for e in evs)


NODE_HINT_CASES = [
    pytest.param([tol("dedicated", "user2", NS, "Equal")], None, [taint("dedicated", "user1", NS)],
                 QueueingHint.QUEUE_SKIP, id="skip-queue-on-untoleratedtaint-node-added"),
    pytest.param([tol("dedicated", "user2", NS, "Equal")], None, [taint("dedicated", "user2", NS)],
                 QueueingHint.QUEUE, id="queue-on-toleratedtaint-node-added"),
    pytest.param([tol("dedicated", "user2", NS, "Equal")], [taint("dedicated", "user1", NS)],
                 [taint("dedicated", "user1", NS), taint("dedicated", "user3", NS)],
                 QueueingHint.QUEUE_SKIP, id="skip-unrelated-change"),
    pytest.param([tol("dedicated", "user2", NS, "Equal")], [taint("dedicated", "user1", NS)],
                 [taint("dedicated", "user2", NS)], QueueingHint.QUEUE, id="queue-on-taint-change"),
    pytest.param([], [], [taint("x", "y", PNS)], QueueingHint.QUEUE_SKIP, id="skip-already-tolerated"),
]


@pytest.mark.parametrize(("tolerations", "old_taints", "new_taints", "want"), NODE_HINT_CASES)
def test_hint_node_change(tolerations: list[dict[str, Any]], old_taints: list[dict[str, Any]] | None,
                          new_taints: list[dict[str, Any]], want: QueueingHint) -> None:
    pod = make_pod("pod1", tolerations=tolerations)
    old = make_node("nodeA", taints=old_taints) if old_taints is not None else None
    new = make_node("nodeA", taints=new_taints)
    assert TaintToleration.is_schedulable_after_node_change(pod, old, new) == want


def test_hint_node_change_wrong_objects_raise() -> None:
    pod = make_pod()
    with pytest.raises(TypeError):
        TaintToleration.is_schedulable_after_node_change(pod, None, "not-a-node")
    with pytest.raises(TypeError):
        TaintToleration.is_schedulable_after_node_change(pod, "not-a-node", make_node("n"))


def test_hint_pod_toleration_change() -> None:
    pod = make_pod("pod-1", "ns-1", uid="uid0")
    other_old = make_pod("pod-2", "ns-1", uid="uid1")
    other_new = make_pod("pod-2", "ns-1", uid="uid1", tolerations=[tol("foo", effect=NS)])
    h = TaintToleration.is_schedulable_after_pod_toleration_change
    assert h(pod, other_old, other_new) == QueueingHint.QUEUE_SKIP
    same_new = make_pod("pod-1", "ns-1", uid="uid0", tolerations=[tol("foo", effect=NS)])
    assert h(pod, pod, same_new) == QueueingHint.QUEUE
    with pytest.raises(TypeError):
        h(pod, None, "not-a-pod")
    with pytest.raises(TypeError):
        h(pod, "not-a-pod", same_new)


# ---------------------------------------------------------------- DefaultNormalizeScore

NORMALIZE_CASES = [
    (False, [1, 2, 3, 4], [25, 50, 75, 100]),
    (True, [1, 2, 3, 4], [75, 50, 25, 0]),
    (False, [1000, 10, 20, 30], [100, 1, 2, 3]),
    (True, [1000, 10, 20, 30], [0, 99, 98, 97]),
    (False, [1, 1, 1, 1], [100, 100, 100, 100]),
    (False, [1000, 1, 1, 1], [100, 0, 0, 0]),
    (True, [0, 1, 1, 1], [100, 0, 0, 0]),
    (False, [0, 0, 0, 0], [0, 0, 0, 0]),
    (True, [0, 0, 0, 0], [100, 100, 100, 100]),
    (False, [], []),
    (False, [-1, 3], [-33, 100]),  # Go truncates toward zero
]


@pytest.mark.parametrize(("reverse", "scores", "expected"), NORMALIZE_CASES)
def test_default_normalize_score(reverse: bool, scores: list[int], expected: list[int]) -> None:
    arr = np.asarray(scores, dtype=np.int64)
    assert default_normalize_score(100, reverse, arr) is None
    assert arr.tolist() == expected
