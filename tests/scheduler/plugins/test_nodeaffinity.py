"""NodeAffinity, with the cases of upstream's node_affinity_test.go (1.36): Filter/PreFilter,
Score/PreScore, addedAffinity, queueing hints; plus the vectorized forms."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.node import Node
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ActionType, EventResource, QueueingHint
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.helper import NodeSelectorParseError, parse_int64
from ksched.scheduler.plugins.nodeaffinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    NodeAffinity,
)
from ksched.testing import PluginRunner, make_node, make_pod

POD = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match Pod's node affinity/selector")
ENFORCED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match scheduler-enforced node affinity")
CONFLICT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "pod affinity terms conflict")
SKIP = Status.skip()


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    d: dict[str, Any] = {"key": key, "operator": op}
    if values:
        d["values"] = list(values)
    return d


def name_in(*names: str) -> dict[str, Any]:
    return expr("metadata.name", "In", *names)


def term(exprs: list[dict[str, Any]] | None = None, fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {}
    if exprs is not None:
        t["matchExpressions"] = exprs
    if fields is not None:
        t["matchFields"] = fields
    return t


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}


def req_affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": required(*terms)}


def preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": w, "preference": t} for w, t in weighted]}


def pref_affinity(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"nodeAffinity": preferred(*weighted)}


def labeled_node(name: str, labels: dict[str, str] | None) -> Node:
    n = make_node(name or "node", labels=labels)
    # make_node adds kubernetes.io/hostname; upstream's test nodes carry only the given labels.
    n.labels.pop("kubernetes.io/hostname", None)
    return n


# ---------------------------------------------------------------- Filter / PreFilter (upstream TestNodeAffinity)

# (id, pod kwargs, node labels, node name, want filter, want prefilter status, want prefilter names, args,
#  run prefilter)
FILTER_CASES: list[Any] = [
    ("missing labels", {"node_selector": {"foo": "bar"}}, None, "", POD, None, None, None, True),
    ("same labels", {"node_selector": {"foo": "bar"}}, {"foo": "bar"}, "", None, None, None, None, True),
    ("node labels are superset", {"node_selector": {"foo": "bar"}}, {"foo": "bar", "baz": "blah"}, "",
     None, None, None, None, True),
    ("node labels are subset", {"node_selector": {"foo": "bar", "baz": "blah"}}, {"foo": "bar"}, "",
     POD, None, None, None, True),
    ("In operator matches", {"affinity": req_affinity(term([expr("foo", "In", "bar", "value2")]))},
     {"foo": "bar"}, "", None, None, None, None, True),
    ("Gt operator matches", {"affinity": req_affinity(term([expr("kernel-version", "Gt", "0204")]))},
     {"kernel-version": "0206"}, "", None, None, None, None, True),
    ("NotIn operator matches", {"affinity": req_affinity(term([expr("mem-type", "NotIn", "DDR", "DDR2")]))},
     {"mem-type": "DDR3"}, "", None, None, None, None, True),
    ("Exists operator matches", {"affinity": req_affinity(term([expr("GPU", "Exists")]))},
     {"GPU": "NVIDIA-GRID-K1"}, "", None, None, None, None, True),
    ("affinity does not match labels", {"affinity": req_affinity(term([expr("foo", "In", "value1", "value2")]))},
     {"foo": "bar"}, "", POD, None, None, None, True),
    ("empty MatchExpressions matches no objects", {"affinity": req_affinity(term([]))},
     {"foo": "bar"}, "", POD, None, None, None, True),
    ("no Affinity", {}, {"foo": "bar"}, "", None, SKIP, None, None, True),
    ("Affinity but nil NodeSelector", {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuring"
                                                                      "Execution": []}}},
     {"foo": "bar"}, "", None, SKIP, None, None, True),
    ("multiple matchExpressions ANDed match",
     {"affinity": req_affinity(term([expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")]))},
     {"GPU": "NVIDIA-GRID-K1"}, "", None, None, None, None, True),
    ("multiple matchExpressions ANDed do not match",
     {"affinity": req_affinity(term([expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")]))},
     {"GPU": "NVIDIA-GRID-K1"}, "", POD, None, None, None, True),
    ("multiple terms ORed",
     {"affinity": req_affinity(term([expr("foo", "In", "bar", "value2")]),
                               term([expr("diffkey", "In", "wrong", "value2")]))},
     {"foo": "bar"}, "", None, None, None, None, True),
    ("affinity and nodeSelector both satisfied",
     {"node_selector": {"foo": "bar"}, "affinity": req_affinity(term([expr("foo", "Exists")]))},
     {"foo": "bar"}, "", None, None, None, None, True),
    ("affinity matches but nodeSelector does not",
     {"node_selector": {"foo": "bar"}, "affinity": req_affinity(term([expr("foo", "Exists")]))},
     {"foo": "barrrrrr"}, "", POD, None, None, None, True),
    ("invalid value in term never matches",
     {"affinity": req_affinity(term([expr("foo", "NotIn", "invalid value: ___@#$%^")]))},
     {"foo": "bar"}, "", POD, None, None, None, True),
    ("matchFields In matches the node", {"affinity": req_affinity(term(fields=[name_in("node1")]))},
     None, "node1", None, None, {"node1"}, None, True),
    ("matchFields In does not match the node", {"affinity": req_affinity(term(fields=[name_in("node1")]))},
     None, "node2", POD, None, {"node1"}, None, True),
    ("two terms: matchFields does not match, matchExpressions matches",
     {"affinity": req_affinity(term(fields=[name_in("node1"), name_in("node2")]),
                               term([expr("foo", "In", "bar")]))},
     {"foo": "bar"}, "node2", None, None, None, None, True),
    ("one term: matchFields does not match, matchExpressions matches",
     {"affinity": req_affinity(term([expr("foo", "In", "bar")], [name_in("node1")]))},
     {"foo": "bar"}, "node2", POD, None, {"node1"}, None, True),
    ("one term: both match",
     {"affinity": req_affinity(term([expr("foo", "In", "bar")], [name_in("node1")]))},
     {"foo": "bar"}, "node1", None, None, {"node1"}, None, True),
    ("two terms: neither matches",
     {"affinity": req_affinity(term(fields=[name_in("node1")]), term([expr("foo", "In", "not-match-to-bar")]))},
     {"foo": "bar"}, "node2", POD, None, None, None, True),
    ("two terms of node.Name affinity",
     {"affinity": req_affinity(term(fields=[name_in("node1")]), term(fields=[name_in("node2")]))},
     None, "node2", None, None, {"node1", "node2"}, None, True),
    ("two conflicting match field requirements",
     {"affinity": req_affinity(term(fields=[name_in("node1"), name_in("node2")]))},
     {"foo": "bar"}, "node2", POD, CONFLICT, None, None, True),
    ("matches added affinity and pod's node affinity",
     {"affinity": req_affinity(term([expr("zone", "In", "foo")]))},
     {"zone": "foo"}, "node2", None, None, None, {"addedAffinity": required(term(fields=[name_in("node2")]))},
     True),
    ("matches added affinity but not pod's node affinity",
     {"affinity": req_affinity(term([expr("zone", "In", "bar")]))},
     {"zone": "foo"}, "node2", POD, None, None, {"addedAffinity": required(term(fields=[name_in("node2")]))},
     True),
    ("does not match added affinity", {}, {"zone": "foo"}, "node2", ENFORCED, None, None,
     {"addedAffinity": required(term([expr("zone", "In", "bar")]))}, True),
    ("node selector matched without PreFilter", {"node_selector": {"foo": "bar"}},
     {"foo": "bar", "baz": "blah"}, "", None, None, None, None, False),
    ("node affinity matched without PreFilter",
     {"affinity": req_affinity(term([expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")]))},
     {"GPU": "NVIDIA-GRID-K1"}, "", None, None, None, None, False),
    ("affinity not matched without PreFilter",
     {"affinity": req_affinity(term([expr("GPU", "In", "AMD")]))},
     {"GPU": "NVIDIA-GRID-K1"}, "", POD, None, None, None, False),
]


@pytest.mark.parametrize(
    ("pod_kw", "labels", "node_name", "want", "want_pf_status", "want_pf_names", "args", "run_pre_filter"),
    [pytest.param(*c[1:], id=c[0]) for c in FILTER_CASES])
def test_filter(pod_kw: dict[str, Any], labels: dict[str, str] | None, node_name: str, want: Status | None,
                want_pf_status: Status | None, want_pf_names: set[str] | None, args: dict[str, Any] | None,
                run_pre_filter: bool) -> None:
    pod = make_pod("p", **pod_kw)
    node = labeled_node(node_name, labels)
    pl = NodeAffinity(args)
    state = CycleState()
    if run_pre_filter:
        res, st = pl.pre_filter(state, pod, PluginRunner(["NodeAffinity"], [node]).snapshot.all_nodes())
        if want_pf_status is None:
            assert st is None
        else:
            assert st == want_pf_status
        if want_pf_names is None:
            assert res is None or res.all_nodes()
        else:
            assert res is not None and res.node_names == want_pf_names
    got = pl.filter(state, pod, NodeInfo(node))
    if want is None:
        assert got is None
    else:
        assert got == want
    # The framework path (vectorized vs per-node agreement is asserted by the runner).
    runner = PluginRunner(["NodeAffinity"], [node], args={"NodeAffinity": args or {}})
    out = runner.filter(pod)
    if want_pf_status is not None and want_pf_status.code != Code.SKIP:
        assert out[node.name] == want_pf_status
    elif want_pf_names is not None and node.name not in want_pf_names:
        assert out[node.name] is not None
    elif want is None:
        assert out[node.name] is None
    else:
        assert out[node.name] == want


def test_reason_strings() -> None:
    assert ERR_REASON_POD == "node(s) didn't match Pod's node affinity/selector"
    assert ERR_REASON_ENFORCED == "node(s) didn't match scheduler-enforced node affinity"
    assert ERR_REASON_CONFLICT == "pod affinity terms conflict"


def test_pre_filter_result_restricts_the_cycle_to_named_nodes() -> None:
    nodes = [make_node(f"node{i}") for i in range(5)]
    r = PluginRunner(["NodeAffinity"], nodes)
    pod = make_pod("p", affinity=req_affinity(term(fields=[name_in("node3")]), term(fields=[name_in("node1")])))
    _, res, st = r.pre_filter(pod)
    assert st is None and res is not None and res.node_names == {"node1", "node3"}
    out = r.filter(pod)
    assert {n for n, s in out.items() if s is None} == {"node1", "node3"}


def test_pre_filter_not_in_field_does_not_narrow() -> None:
    r = PluginRunner(["NodeAffinity"], [make_node("a"), make_node("b")])
    pod = make_pod("p", affinity=req_affinity(term(fields=[expr("metadata.name", "NotIn", "a")])))
    _, res, st = r.pre_filter(pod)
    assert st is None and res is None
    out = r.filter(pod)
    assert out["a"] == POD and out["b"] is None


def test_required_with_no_terms_matches_nothing() -> None:
    r = PluginRunner(["NodeAffinity"], [make_node("a")])
    pod = make_pod("p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": []}}})
    _, res, st = r.pre_filter(pod)
    assert st is None and res is None
    assert r.filter(pod)["a"] == POD


@pytest.mark.parametrize(("op", "value", "label", "match"), [
    ("Gt", "5", "6", True),
    ("Gt", "5", "5", False),
    ("Lt", "5", "-3", True),
    ("Gt", "5", "abc", False),         # not an integer label: no match
    ("Gt", "5", "5_0", False),         # Go's ParseInt rejects underscores
    ("Gt", "5", "+6", True),           # and accepts a sign
    ("Gt", "x", "6", False),           # a non-integer bound is a parse error: the term never matches
    ("Gt", "-1", "6", False),          # "-1" is not a valid label value: parse error
    ("In", "", "", True),              # an empty value is a valid label value
    ("Exists", "v", "v", False),       # Exists with values: parse error
    ("Bogus", "v", "v", False),        # unknown operator: parse error
])
def test_requirement_parsing_as_upstream(op: str, value: str, label: str, match: bool) -> None:
    pod = make_pod("p", affinity=req_affinity(term([expr("k", op, value)])))
    r = PluginRunner(["NodeAffinity"], [make_node("a", labels={"k": label})])
    got = r.filter(pod)["a"]
    assert (got is None) == match


def test_parse_int64() -> None:
    assert parse_int64("0204") == 204
    assert parse_int64("-9223372036854775808") == -(2**63)
    assert parse_int64("9223372036854775808") is None
    assert parse_int64(" 1") is None
    assert parse_int64("") is None


def test_vectorized_filter_many_nodes_shared_cache() -> None:
    nodes = [make_node(f"n{i}", labels={"zone": f"z{i % 3}", "tier": "gpu" if i % 4 == 0 else "cpu",
                                        "rank": str(i)}) for i in range(40)]
    r = PluginRunner(["NodeAffinity"], nodes,
                     args={"NodeAffinity": {"addedAffinity": required(term([expr("rank", "Lt", "35")]))}})
    pods = [
        make_pod("a", node_selector={"zone": "z1"}),
        make_pod("b", affinity=req_affinity(term([expr("tier", "In", "gpu")]), term([expr("zone", "In", "z2")]))),
        make_pod("c", node_selector={"tier": "cpu"},
                 affinity=req_affinity(term([expr("rank", "Gt", "10"), expr("zone", "NotIn", "z0")]))),
        make_pod("d"),
    ]
    for p in pods:
        out = r.filter(p)
        for n in nodes:
            rank = int(n.labels["rank"])
            if rank >= 35:
                assert out[n.name] == ENFORCED
    before = len(r.snapshot._row_values)
    r.filter(make_pod("a2", node_selector={"zone": "z1"}))
    assert len(r.snapshot._row_values) == before


# ---------------------------------------------------------------- Score (upstream TestNodeAffinityPriority)

LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}

AFFINITY1 = pref_affinity((2, term([expr("foo", "In", "bar")])))
AFFINITY2 = pref_affinity(
    (2, term([expr("foo", "In", "bar")])),
    (4, term([expr("key", "In", "value")])),
    (5, term([expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1")])),
)

SCORE_CASES: list[Any] = [
    ("no preferred node affinity", {}, [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)], None,
     None),
    ("no node matches", {"affinity": AFFINITY1}, [("node1", LABEL4), ("node2", LABEL2), ("node3", LABEL3)], None,
     {"node1": 0, "node2": 0, "node3": 0}),
    ("only node1 matches", {"affinity": AFFINITY1}, [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)],
     None, {"node1": 100, "node2": 0, "node3": 0}),
    ("all match with different priorities", {"affinity": AFFINITY2},
     [("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2)], None, {"node1": 18, "node5": 100, "node2": 36}),
    ("added affinity", {}, [("node1", LABEL1), ("node2", LABEL2)],
     {"addedAffinity": AFFINITY1["nodeAffinity"]}, {"node1": 100, "node2": 0}),
    ("added affinity and pod has default affinity", {"affinity": AFFINITY1},
     [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL5)],
     {"addedAffinity": preferred((3, term([expr("key", "In", "value")])))},
     {"node1": 40, "node2": 60, "node3": 100}),
]


@pytest.mark.parametrize(("pod_kw", "nodes", "args", "expected"), [pytest.param(*c[1:], id=c[0])
                                                                    for c in SCORE_CASES])
def test_score(pod_kw: dict[str, Any], nodes: list[tuple[str, dict[str, str]]], args: dict[str, Any] | None,
               expected: dict[str, int] | None) -> None:
    r = PluginRunner(["NodeAffinity"], [labeled_node(n, lb) for n, lb in nodes],
                     args={"NodeAffinity": args or {}})
    got = r.score(make_pod("p", **pod_kw))["NodeAffinity"]
    if expected is None:
        assert got == {}  # PreScore returned Skip
    else:
        assert got == expected


def test_pre_score_skip_without_preferred_terms() -> None:
    pl = NodeAffinity()
    nodes = PluginRunner(["NodeAffinity"], [make_node("node1")]).snapshot.all_nodes()
    assert pl.pre_score(CycleState(), make_pod("p"), nodes) == SKIP
    # Required terms alone do not make PreScore run.
    pod = make_pod("p", affinity=req_affinity(term([expr("a", "Exists")])))
    assert pl.pre_score(CycleState(), pod, nodes) == SKIP
    assert pl.pre_score(CycleState(), make_pod("p", affinity=AFFINITY1), nodes) is None


def test_score_without_pre_score_is_computed() -> None:
    pl = NodeAffinity()
    scores = [pl.score(CycleState(), make_pod("p", affinity=AFFINITY2), NodeInfo(labeled_node(n, lb)))
              for n, lb in (("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2))]
    assert [s for s, _ in scores] == [2, 11, 4]
    assert all(st is None for _, st in scores)
    s, st = pl.score(CycleState(), make_pod("p"), NodeInfo(labeled_node("n", LABEL1)))
    assert (s, st) == (0, None)


def test_pre_score_error_on_broken_preferred_affinity() -> None:
    pl = NodeAffinity()
    pod = make_pod("p", affinity=pref_affinity((2, term([expr("invalid key", "In", "bar")]))))
    st = pl.pre_score(CycleState(), pod, PluginRunner(["NodeAffinity"], [make_node("node1")]).snapshot.all_nodes())
    assert st is not None and st.code == Code.ERROR
    assert st.message() == (
        "[0].matchExpressions[0].key: Invalid value: \"invalid key\": name part must consist of alphanumeric "
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
        "'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def test_preferred_terms_with_weight_zero_or_empty_are_ignored() -> None:
    pod = make_pod("p", affinity=pref_affinity((0, term([expr("foo", "In", "bar")])), (3, term([])),
                                                (1, term(fields=[name_in("b")]))))
    r = PluginRunner(["NodeAffinity"], [labeled_node("a", LABEL1), labeled_node("b", LABEL2)])
    assert r.score(pod, normalize=False)["NodeAffinity"] == {"a": 0, "b": 1}


def test_invalid_added_affinity_is_rejected() -> None:
    with pytest.raises(NodeSelectorParseError, match=r"parsing addedAffinity\.requiredDuringScheduling"):
        NodeAffinity({"addedAffinity": required(term([expr("a", "In")]))})
    with pytest.raises(NodeSelectorParseError, match=r"parsing addedAffinity\.preferredDuringScheduling"):
        NodeAffinity({"addedAffinity": preferred((1, term([expr("a", "Gt", "x")])))})


def test_vectorized_score_many_nodes() -> None:
    nodes = [make_node(f"n{i}", labels={"zone": f"z{i % 3}", "tier": "gpu" if i % 4 == 0 else "cpu"})
             for i in range(30)]
    r = PluginRunner(["NodeAffinity"], nodes,
                     args={"NodeAffinity": {"addedAffinity": preferred((7, term([expr("zone", "In", "z0")])))}})
    pod = make_pod("p", affinity=pref_affinity((3, term([expr("tier", "In", "gpu")])),
                                               (1, term(fields=[name_in("n5")]))))
    raw = r.score(pod, normalize=False)["NodeAffinity"]  # asserts vectorized == per-node
    for i in range(30):
        want = (7 if i % 3 == 0 else 0) + (3 if i % 4 == 0 else 0) + (1 if i == 5 else 0)
        assert raw[f"n{i}"] == want


# ---------------------------------------------------------------- events and hints


def test_events_to_register() -> None:
    evs = NodeAffinity().events_to_register()
    assert len(evs) == 1
    assert evs[0].event.resource == EventResource.NODE
    assert evs[0].event.action == ActionType.ADD | ActionType.UPDATE_NODE_LABEL


ADDED_FOO_BAR = {"addedAffinity": required(term([expr("foo", "In", "bar")]))}

HINT_CASES: list[Any] = [
    ("skip-queue-on-add", None, None, {}, QueueingHint.QUEUE_SKIP),
    ("queue-on-add", None, None, {"foo": "bar"}, QueueingHint.QUEUE),
    ("skip-unrelated-changes", None, {}, {}, QueueingHint.QUEUE_SKIP),
    ("skip-unrelated-changes-on-labels", None, {}, {"k": "v"}, QueueingHint.QUEUE_SKIP),
    ("skip-labels-changes-on-node-from-suitable-to-unsuitable", None, {"foo": "bar"}, {"k": "v"},
     QueueingHint.QUEUE_SKIP),
    ("queue-on-labels-change-makes-pod-schedulable", None, {}, {"foo": "bar"}, QueueingHint.QUEUE),
    ("skip-queue-on-add-scheduler-enforced-node-affinity", ADDED_FOO_BAR, None, {}, QueueingHint.QUEUE_SKIP),
    ("queue-on-add-scheduler-enforced-node-affinity", ADDED_FOO_BAR, None, {"foo": "bar"}, QueueingHint.QUEUE),
    ("skip-still-matching", None, {"foo": "bar"}, {"foo": "bar", "x": "y"}, QueueingHint.QUEUE_SKIP),
]


@pytest.mark.parametrize(("args", "old_labels", "new_labels", "want"), [pytest.param(*c[1:], id=c[0])
                                                                       for c in HINT_CASES])
def test_hint_node_change(args: dict[str, Any] | None, old_labels: dict[str, str] | None,
                          new_labels: dict[str, str], want: QueueingHint) -> None:
    pl = NodeAffinity(args)
    pod = make_pod("p", affinity=req_affinity(term([expr("foo", "In", "bar")])))
    old = labeled_node("n", old_labels) if old_labels is not None else None
    assert pl.is_schedulable_after_node_change(pod, old, labeled_node("n", new_labels)) == want


def test_hint_wrong_objects_raise() -> None:
    pl = NodeAffinity()
    pod = make_pod("p", affinity=req_affinity(term([expr("foo", "In", "bar")])))
    with pytest.raises(TypeError):
        pl.is_schedulable_after_node_change(pod, None, "not-a-node")
    with pytest.raises(TypeError):
        pl.is_schedulable_after_node_change(pod, "not-a-node", make_node("n"))
