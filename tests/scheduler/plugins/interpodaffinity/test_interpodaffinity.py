"""InterPodAffinity: PreFilter, Filter, PreFilterExtensions, arguments, events.

Cases ported from upstream kubernetes v1.36 ``pkg/scheduler/framework/plugins/interpodaffinity``
``filtering_test.go`` (TestRequiredAffinitySingleNode, TestRequiredAffinityMultipleNodes,
TestPreFilterDisabled, TestPreFilterStateAddRemovePod, TestPreFilterStateClone,
TestGetTPMapMatchingIncomingAffinityAntiAffinity). Upstream's test namespaces such as
``subteam1.team1`` are not valid namespace names for the embedded API server and are spelled
``subteam1-team1`` here; upstream's empty namespace is ``default``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.scheduler.config import parse_configuration
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ActionType, EventResource
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import PodInfo
from ksched.scheduler.plugins.interpodaffinity import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    PRE_FILTER_STATE_KEY,
    InterPodAffinity,
)
from ksched.scheduler.plugins.interpodaffinity._index import _DOMAINS
from ksched.testing import PluginRunner, make_node, make_pod

# ---------------------------------------------------------------------------------------------
# Builders (upstream's st.MakePod().PodAffinityIn(...) and friends)


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def term(*exprs: dict[str, Any], topo: str = "", namespaces: list[str] | None = None,
         ns_selector: dict[str, Any] | None = None, match_labels: dict[str, str] | None = None,
         match_label_keys: list[str] | None = None, mismatch_label_keys: list[str] | None = None,
         no_selector: bool = False) -> dict[str, Any]:
    t: dict[str, Any] = {"topologyKey": topo}
    if not no_selector:
        sel: dict[str, Any] = {}
        if exprs:
            sel["matchExpressions"] = list(exprs)
        if match_labels:
            sel["matchLabels"] = dict(match_labels)
        t["labelSelector"] = sel
    if namespaces is not None:
        t["namespaces"] = namespaces
    if ns_selector is not None:
        t["namespaceSelector"] = ns_selector
    if match_label_keys:
        t["matchLabelKeys"] = match_label_keys
    if mismatch_label_keys:
        t["mismatchLabelKeys"] = mismatch_label_keys
    return t


def pod(name: str = "p", ns: str = "default", labels: dict[str, str] | None = None, node: str = "",
        aff: list[dict[str, Any]] | None = None, anti: list[dict[str, Any]] | None = None,
        pref_aff: list[tuple[int, dict[str, Any]]] | None = None,
        pref_anti: list[tuple[int, dict[str, Any]]] | None = None, nominated: str = "",
        uid: str | None = None) -> Pod:
    a: dict[str, Any] = {}
    if aff or pref_aff:
        pa: dict[str, Any] = {}
        if aff:
            pa["requiredDuringSchedulingIgnoredDuringExecution"] = aff
        if pref_aff:
            pa["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in pref_aff]
        a["podAffinity"] = pa
    if anti or pref_anti:
        pa = {}
        if anti:
            pa["requiredDuringSchedulingIgnoredDuringExecution"] = anti
        if pref_anti:
            pa["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in pref_anti]
        a["podAntiAffinity"] = pa
    return make_pod(name, ns, labels=labels, node_name=node, affinity=a or None, nominated_node_name=nominated,
                    uid=uid)


def node(name: str, labels: dict[str, str]) -> Any:
    return make_node(name, labels=labels)


NAMESPACES = {
    "subteam1-team1": {"team": "team1"},
    "subteam2-team1": {"team": "team1"},
    "subteam1-team2": {"team": "team2"},
    "subteam2-team2": {"team": "team2"},
}


def ns_informers(namespaces: dict[str, dict[str, str]] | None = None) -> InformerFactory:
    store = Store()
    for name, labels in (NAMESPACES if namespaces is None else namespaces).items():
        store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    f = InformerFactory(InProcessClient(store))
    f.informer("Namespace")
    f.poll()
    return f


def runner(nodes: list[Any], pods: list[Pod] = (), args: dict[str, Any] | None = None,  # type: ignore[assignment]
           informers: Any = None) -> PluginRunner:
    return PluginRunner(["InterPodAffinity"], nodes, pods, args={"InterPodAffinity": args or {}},
                        informers=informers if informers is not None else ns_informers())


def plugin(r: PluginRunner) -> InterPodAffinity:
    p = r.fw.plugins["InterPodAffinity"]
    assert isinstance(p, InterPodAffinity)
    return p


def pre_filter(r: PluginRunner, p: Pod) -> tuple[CycleState, Status | None]:
    state = CycleState()
    _, st = plugin(r).pre_filter(state, p, r.snapshot.all_nodes())
    return state, st


def pairs(counts: dict[str, np.ndarray]) -> dict[tuple[str, str], int]:
    """Counts as upstream's topologyToMatchedTermCount (non-zero topology pairs)."""
    out: dict[tuple[str, str], int] = {}
    for key, arr in counts.items():
        inv = {i: v for v, i in _DOMAINS.get(key, {}).items()}
        for i in np.flatnonzero(arr).tolist():
            out[(key, inv[i])] = int(arr[i])
    return out


UNRESOLVABLE_AFF = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY_RULES_NOT_MATCH)
ANTI = Status(Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
EXISTING = Status(Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
SKIP = "skip"


# ---------------------------------------------------------------------------------------------
# Messages


def test_reasons_are_upstreams() -> None:
    assert ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH == "node(s) didn't satisfy existing pods anti-affinity rules"
    assert ERR_REASON_AFFINITY_RULES_NOT_MATCH == "node(s) didn't match pod affinity rules"
    assert ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH == "node(s) didn't match pod anti-affinity rules"
    assert PRE_FILTER_STATE_KEY == "PreFilterInterPodAffinity"


# ---------------------------------------------------------------------------------------------
# TestRequiredAffinitySingleNode

POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
NODE1 = {"region": "r1", "zone": "z11"}
IN_SECURITYSCAN = expr("service", "In", "securityscan", "value2")
TEAM1 = {"matchExpressions": [expr("team", "In", "team1")]}


def _existing() -> Pod:
    return pod("existing", labels=POD_LABEL, node="node1")


SINGLE_NODE_CASES: list[tuple[str, Pod, list[Pod], Any]] = [
    ("no required pod affinity, no existing pods: PreFilter skips",
     pod(), [], SKIP),
    ("affinity In matches the existing pod",
     pod(labels=POD_LABEL2, aff=[term(IN_SECURITYSCAN, topo="region")]), [_existing()], None),
    ("affinity NotIn matches the existing pod",
     pod(labels=POD_LABEL2, aff=[term(expr("service", "NotIn", "securityscan3", "value3"), topo="region")]),
     [_existing()], None),
    ("affinity does not match because of a different namespace",
     pod(labels=POD_LABEL2, aff=[term(IN_SECURITYSCAN, namespaces=["DiffNameSpace"])]),
     [pod("e", ns="ns", labels=POD_LABEL, node="node1")], UNRESOLVABLE_AFF),
    ("affinity label selector does not match the existing pod",
     pod(labels=POD_LABEL, aff=[term(expr("service", "In", "antivirusscan", "value2"))]),
     [_existing()], UNRESOLVABLE_AFF),
    ("several affinity terms with different operators all match",
     pod(labels=POD_LABEL2, aff=[
         term(expr("service", "Exists"), expr("wrongkey", "DoesNotExist"), topo="region"),
         term(expr("service", "In", "securityscan"), expr("service", "NotIn", "WrongValue"), topo="region")]),
     [_existing()], None),
    ("match expressions are ANDed: one does not match",
     pod(labels=POD_LABEL2, aff=[
         term(expr("service", "Exists"), expr("wrongkey", "DoesNotExist"), topo="region"),
         term(expr("service", "In", "securityscan2"), expr("service", "NotIn", "WrongValue"), topo="region")]),
     [_existing()], UNRESOLVABLE_AFF),
    ("affinity and anti-affinity both satisfied",
     pod(labels=POD_LABEL2, aff=[term(IN_SECURITYSCAN, topo="region")],
         anti=[term(expr("service", "In", "antivirusscan", "value2"), topo="node")]),
     [_existing()], None),
    ("affinity, anti-affinity and anti-affinity symmetry satisfied",
     pod(labels=POD_LABEL2, aff=[term(IN_SECURITYSCAN, topo="region")],
         anti=[term(expr("service", "In", "antivirusscan", "value2"), topo="node")]),
     [pod("e", labels=POD_LABEL, node="node1",
          anti=[term(expr("service", "In", "antivirusscan", "value2"), topo="node")])], None),
    ("affinity satisfied, anti-affinity not",
     pod(labels=POD_LABEL2, aff=[term(IN_SECURITYSCAN, topo="region")],
         anti=[term(IN_SECURITYSCAN, topo="zone")]),
     [_existing()], ANTI),
    ("affinity and anti-affinity satisfied, existing pod's anti-affinity (symmetry) not",
     pod(labels=POD_LABEL, aff=[term(IN_SECURITYSCAN, topo="region")],
         anti=[term(expr("service", "In", "antivirusscan", "value2"), topo="node")]),
     [pod("e", labels=POD_LABEL, node="node1", anti=[term(IN_SECURITYSCAN, topo="zone")])], EXISTING),
    ("pod matches its own NotIn affinity but an existing pod on a node outside the snapshot does not count",
     pod(labels=POD_LABEL, aff=[term(expr("service", "NotIn", "securityscan", "value2"), topo="region")]),
     [pod("e", labels={"service": "securityscan"}, node="node2")], UNRESOLVABLE_AFF),
    ("existing pod's anti-affinity is respected when the pod has none: not satisfied",
     pod(labels=POD_LABEL),
     [pod("e", labels=POD_LABEL, node="node1", anti=[term(IN_SECURITYSCAN, topo="zone")])], EXISTING),
    ("existing pod's anti-affinity is respected when the pod has none: satisfied, PreFilter skips",
     pod(labels=POD_LABEL),
     [pod("e", labels=POD_LABEL, node="node1",
          anti=[term(expr("service", "NotIn", "securityscan", "value2"), topo="zone")])], SKIP),
    ("anti-affinity satisfied with the existing pod, symmetry not with the incoming pod",
     pod(labels=POD_LABEL, anti=[term(expr("service", "Exists"), topo="region"),
                                 term(expr("security", "Exists"), topo="region")]),
     [pod("e", labels=POD_LABEL2, node="node1", anti=[term(expr("security", "Exists"), topo="zone")])], ANTI),
    ("symmetry a1: the pods partially match each other's terms",
     pod(labels=POD_LABEL, anti=[term(expr("service", "Exists"), topo="zone"),
                                 term(expr("security", "Exists"), topo="zone")]),
     [pod("e", labels=POD_LABEL2, node="node1", anti=[term(expr("security", "Exists"), topo="zone")])], ANTI),
    ("symmetry a2: the pods partially match each other's terms",
     pod(labels=POD_LABEL2, anti=[term(expr("security", "Exists"), topo="zone")]),
     [pod("e", labels=POD_LABEL, node="node1", anti=[term(expr("service", "Exists"), topo="zone"),
                                                     term(expr("security", "Exists"), topo="zone")])],
     EXISTING),
    ("symmetry b1: the pods partially match each other's terms",
     pod(labels={"abc": "", "xyz": ""}, anti=[term(expr("abc", "Exists"), topo="zone"),
                                             term(expr("def", "Exists"), topo="zone")]),
     [pod("e", labels={"def": "", "xyz": ""}, node="node1",
          anti=[term(expr("abc", "Exists"), topo="zone"), term(expr("def", "Exists"), topo="zone")])], ANTI),
    ("symmetry b2: the pods partially match each other's terms",
     pod(labels={"def": "", "xyz": ""}, anti=[term(expr("abc", "Exists"), topo="zone"),
                                             term(expr("def", "Exists"), topo="zone")]),
     [pod("e", labels={"abc": "", "xyz": ""}, node="node1",
          anti=[term(expr("abc", "Exists"), topo="zone"), term(expr("def", "Exists"), topo="zone")])], ANTI),
    ("affinity with a namespaceSelector that selects the existing pod's namespace",
     pod(labels=POD_LABEL2, aff=[term(IN_SECURITYSCAN, topo="region", ns_selector=TEAM1)]),
     [pod("e", ns="subteam1-team1", labels=POD_LABEL, node="node1")], None),
    ("affinity with a namespaceSelector that does not select the existing pod's namespace",
     pod(labels=POD_LABEL2, aff=[term(IN_SECURITYSCAN, topo="region", ns_selector=TEAM1)]),
     [pod("e", ns="subteam1-team2", labels=POD_LABEL, node="node1")], UNRESOLVABLE_AFF),
    ("anti-affinity with a matching namespaceSelector",
     pod(ns="subteam1-team1", labels=POD_LABEL2, anti=[term(IN_SECURITYSCAN, topo="zone", ns_selector=TEAM1)]),
     [pod("e", ns="subteam2-team1", labels=POD_LABEL, node="node1")], ANTI),
    ("anti-affinity with an empty namespaceSelector selects every namespace",
     pod(ns="subteam1-team1", labels=POD_LABEL2, anti=[term(IN_SECURITYSCAN, topo="zone", ns_selector={})]),
     [pod("e", ns="subteam2-team1", labels=POD_LABEL, node="node1")], ANTI),
    ("anti-affinity with a non-matching namespaceSelector",
     pod(ns="subteam1-team1", labels=POD_LABEL2, anti=[term(IN_SECURITYSCAN, topo="zone", ns_selector=TEAM1)]),
     [pod("e", ns="subteam1-team2", labels=POD_LABEL, node="node1")], None),
]


@pytest.mark.parametrize(("name", "incoming", "pods", "want"), SINGLE_NODE_CASES,
                         ids=[c[0] for c in SINGLE_NODE_CASES])
def test_required_affinity_single_node(name: str, incoming: Pod, pods: list[Pod], want: Any) -> None:
    r = runner([node("node1", NODE1)], pods)
    _, st = pre_filter(r, incoming)
    if want == SKIP:
        assert st is not None and st.code == Code.SKIP
        return
    assert st is None
    got = r.filter(incoming)["node1"]
    assert got == want, f"{got!r} != {want!r}"


# ---------------------------------------------------------------------------------------------
# TestRequiredAffinityMultipleNodes

RG_CHINA = {"region": "China"}
RG_CHINA_AZ1 = {"region": "China", "az": "az1"}
RG_INDIA = {"region": "India"}


def _n(name: str, **labels: str) -> Any:
    return node(name, labels)


MULTI_NODE_CASES: list[tuple[str, Pod, list[Pod], list[Any], Any, list[Status | None]]] = [
    ("nodes with the same topology value as a matching pod all fit",
     pod(aff=[term(expr("foo", "In", "bar"), topo="region")]),
     [pod("p1", labels={"foo": "bar"}, node="node1")],
     [node("node1", RG_CHINA), node("node2", RG_CHINA_AZ1), node("node3", RG_INDIA)], None,
     [None, None, UNRESOLVABLE_AFF]),
    ("the first pod of a collection with affinity to itself may go to any node",
     pod(labels={"foo": "bar", "service": "securityscan"},
         aff=[term(expr("foo", "In", "bar"), topo="zone"), term(expr("service", "In", "securityscan"), topo="zone")]),
     [pod("p1", labels={"foo": "bar"}, node="nodeA")],
     [_n("nodeA", zone="az1", hostname="h1"), _n("nodeB", zone="az2", hostname="h2")], None, [None, None]),
    ("the first pod of a collection only goes to nodes with the topology keys",
     pod(labels={"foo": "bar", "service": "securityscan"},
         aff=[term(expr("foo", "In", "bar"), topo="zone"), term(expr("service", "In", "securityscan"), topo="zone")]),
     [pod("p1", labels={"foo": "bar"}, node="nodeA")],
     [_n("nodeA", zoneLabel="az1", hostname="h1"), _n("nodeB", zoneLabel="az2", hostname="h2")], None,
     [UNRESOLVABLE_AFF, UNRESOLVABLE_AFF]),
    ("anti-affinity blocks every node of the matching pod's topology value",
     pod(anti=[term(expr("foo", "In", "abc"), topo="region")]),
     [pod("e", labels={"foo": "abc"}, node="nodeA")],
     [_n("nodeA", region="r1", hostname="nodeA"), _n("nodeB", region="r1", hostname="nodeB")], None, [ANTI, ANTI]),
    ("anti-affinity applies when any of its terms matches",
     pod(anti=[term(expr("foo", "In", "abc"), topo="region"), term(expr("service", "In", "securityscan"), topo="zone")]),
     [pod("e", labels={"foo": "abc", "service": "securityscan"}, node="nodeA")],
     [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
     None, [ANTI, ANTI]),
    ("anti-affinity leaves other topology values free",
     pod(anti=[term(expr("foo", "In", "abc"), topo="region")]),
     [pod("e", labels={"foo": "abc"}, node="nodeA")],
     [node("nodeA", RG_CHINA), node("nodeB", RG_CHINA_AZ1), node("nodeC", RG_INDIA)], None, [ANTI, ANTI, None]),
    ("existing pod's anti-affinity in another namespace does not match",
     pod(ns="NS1", labels={"foo": "123"}, anti=[term(expr("foo", "In", "bar"), topo="region")]),
     [pod("e1", ns="NS1", labels={"foo": "bar"}, node="nodeA"),
      pod("e2", ns="NS2", node="nodeC", anti=[term(expr("foo", "In", "123"), topo="region")])],
     [node("nodeA", RG_CHINA), node("nodeB", RG_CHINA_AZ1), node("nodeC", RG_INDIA)], None, [ANTI, ANTI, None]),
    ("existing pod's anti-affinity: a term whose topology key no node has counts nowhere",
     pod(labels={"foo": ""}),
     [pod("e", node="nodeA", anti=[term(expr("foo", "Exists"), topo="invalid-node-label")])],
     [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z1", hostname="nodeB")],
     SKIP, [None, None]),
    ("incoming pod's anti-affinity: the topology key is checked even if the selector matches",
     pod(node="nodeA", anti=[term(expr("foo", "Exists"), topo="invalid-node-label")]),
     [pod("e", labels={"foo": ""}, node="nodeA")],
     [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z1", hostname="nodeB")],
     None, [None, None]),
    ("existing pods' anti-affinity: the pod violates each existing pod's terms on all nodes",
     pod(labels={"foo": "", "bar": ""}),
     [pod("e1", node="nodeA", anti=[term(expr("foo", "Exists"), topo="zone")]),
      pod("e2", node="nodeA", anti=[term(expr("bar", "Exists"), topo="region")])],
     [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
     None, [EXISTING, EXISTING]),
    ("incoming pod's anti-affinity: violating one rule is enough",
     pod(anti=[term(expr("foo", "Exists"), topo="zone"), term(expr("bar", "Exists"), topo="region")]),
     [pod("e1", labels={"foo": ""}, node="nodeA"), pod("e2", labels={"bar": ""}, node="nodeB")],
     [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
     None, [ANTI, ANTI]),
    ("existing pod's anti-affinity: selector and topology key must both match (one key is missing)",
     pod(labels={"foo": "", "bar": ""}),
     [pod("e", node="nodeA", anti=[term(expr("foo", "Exists"), topo="invalid-node-label"),
                                   term(expr("bar", "Exists"), topo="zone")])],
     [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
     None, [EXISTING, None]),
    ("incoming pod's anti-affinity: selector and topology key must both match (one key is missing)",
     pod(anti=[term(expr("foo", "Exists"), topo="invalid-node-label"), term(expr("bar", "Exists"), topo="zone")]),
     [pod("podA", labels={"foo": "", "bar": ""}, node="nodeA")],
     [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
     None, [ANTI, None]),
    ("existing pod's anti-affinity: selector and topology key must both match (all keys present)",
     pod(labels={"foo": "", "bar": ""}),
     [pod("e", node="nodeA", anti=[term(expr("foo", "Exists"), topo="region"),
                                   term(expr("bar", "Exists"), topo="zone")])],
     [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
     None, [EXISTING, EXISTING]),
    ("incoming pod's anti-affinity: selector and topology key must both match (all keys present)",
     pod(anti=[term(expr("foo", "Exists"), topo="region"), term(expr("bar", "Exists"), topo="zone")]),
     [pod("e", labels={"foo": "", "bar": ""}, node="nodeA")],
     [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
     None, [ANTI, ANTI]),
    ("existing pods on nodeA and nodeB each have a matching term: only nodeC fits",
     pod(labels={"foo": "", "bar": ""}),
     [pod("e1", node="nodeA", anti=[term(expr("foo", "Exists"), topo="zone"),
                                    term(expr("labelA", "Exists"), topo="zone")]),
      pod("e2", node="nodeB", anti=[term(expr("bar", "Exists"), topo="zone"),
                                    term(expr("labelB", "Exists"), topo="zone")])],
     [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB"),
      _n("nodeC", region="r1", zone="z3", hostname="nodeC")], None, [EXISTING, EXISTING, None]),
    ("incoming pod's affinity: all terms match one pod, then all topology keys are checked",
     pod(aff=[term(expr("foo", "Exists"), topo="region"), term(expr("bar", "Exists"), topo="zone")]),
     [pod("pod1", labels={"foo": "", "bar": ""}, node="nodeA")],
     [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z1", hostname="nodeB")],
     None, [None, None]),
    ("incoming pod's affinity: the terms must be satisfied by the same pod",
     pod(aff=[term(expr("foo", "Exists"), topo="region"), term(expr("bar", "Exists"), topo="zone")]),
     [pod("pod1", labels={"foo": ""}, node="nodeA"), pod("pod2", labels={"bar": ""}, node="nodeB")],
     [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
     None, [UNRESOLVABLE_AFF, UNRESOLVABLE_AFF]),
]


@pytest.mark.parametrize(("name", "incoming", "pods", "nodes", "want_pre", "want"), MULTI_NODE_CASES,
                         ids=[c[0] for c in MULTI_NODE_CASES])
def test_required_affinity_multiple_nodes(name: str, incoming: Pod, pods: list[Pod], nodes: list[Any],
                                          want_pre: Any, want: list[Status | None]) -> None:
    r = runner(nodes, pods)
    _, st = pre_filter(r, incoming)
    if want_pre == SKIP:
        assert st is not None and st.code == Code.SKIP
        # The framework skips the plugin: every node passes it.
        assert all(v is None for v in r.filter(incoming).values())
        return
    assert st is None
    got = r.filter(incoming)
    assert [got[n.name] for n in nodes] == want


# ---------------------------------------------------------------------------------------------
# Filter without PreFilter, node without Node object


def test_filter_without_prefilter_state_is_an_error() -> None:
    r = runner([node("n1", {})])
    st = plugin(r).filter(CycleState(), pod(), r.snapshot.get("n1"))  # type: ignore[arg-type]
    assert st is not None and st.code == Code.ERROR
    assert st.message() == 'error reading "PreFilterInterPodAffinity" from cycleState: not found'
    st = plugin(r).add_pod(CycleState(), pod(), PodInfo(pod("x")), r.snapshot.get("n1"))  # type: ignore[arg-type]
    assert st is not None and st.code == Code.ERROR


def test_unschedulable_codes_for_diagnosis() -> None:
    """Affinity failures are UnschedulableAndUnresolvable (preemption will not help), anti-affinity
    failures Unschedulable (removing pods may help)."""
    assert UNRESOLVABLE_AFF.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    r = runner([node("a", {"zone": "z1"}), node("b", {"zone": "z2"})],
               [pod("e", labels={"app": "db"}, node="a")])
    got = r.filter(pod(aff=[term(match_labels={"app": "web"}, topo="zone")], labels={"app": "x"}))
    assert {n: s.code for n, s in got.items() if s is not None} == {
        "a": Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "b": Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
    got = r.filter(pod(anti=[term(match_labels={"app": "db"}, topo="zone")]))
    assert got["a"] is not None and got["a"].code == Code.UNSCHEDULABLE and got["b"] is None


# ---------------------------------------------------------------------------------------------
# PreFilterExtensions: TestPreFilterStateAddRemovePod

LABEL1 = {"region": "r1", "zone": "z11"}
LABEL2 = {"region": "r1", "zone": "z12"}
LABEL3 = {"region": "r2", "zone": "z21"}
ANTI_FOO_BAR = [term(expr("foo", "In", "bar"), topo="region")]
ANTI_COMPLEX = [term(expr("foo", "In", "bar", "buzz"), topo="region"),
                term(expr("service", "NotIn", "bar", "security", "test"), topo="zone")]
AFF_COMPLEX = ANTI_COMPLEX

ADD_REMOVE_CASES = [
    ("anti-affinity counts follow an added and removed pod",
     pod("pending", labels={"foo": "bar"}, anti=ANTI_FOO_BAR),
     [pod("p1", labels={"foo": "bar"}, node="nodeA"), pod("p2", node="nodeC", anti=ANTI_FOO_BAR)],
     pod("addedPod", labels={"foo": "bar"}, node="nodeB", anti=ANTI_FOO_BAR),
     {("region", "r1"): 2}, {}),
    ("anti-affinity counts with several terms follow an added and removed pod",
     pod("pending", labels={"foo": "bar"}, anti=ANTI_COMPLEX),
     [pod("p1", labels={"foo": "bar"}, node="nodeA"), pod("p2", node="nodeC", anti=ANTI_FOO_BAR)],
     pod("addedPod", labels={"foo": "bar"}, node="nodeA", anti=ANTI_COMPLEX),
     {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1}, {}),
    ("affinity counts follow an added and removed pod",
     pod("pending", labels={"foo": "bar"}, aff=AFF_COMPLEX),
     [pod("p1", labels={"foo": "bar"}, node="nodeA"),
      pod("p2", node="nodeC", anti=ANTI_FOO_BAR, aff=AFF_COMPLEX)],
     pod("addedPod", labels={"foo": "bar"}, node="nodeA", anti=ANTI_COMPLEX),
     {}, {("region", "r1"): 2, ("zone", "z11"): 2}),
]


def _state_pairs(state: CycleState) -> tuple[dict[Any, int], dict[Any, int], dict[Any, int]]:
    s = state.read(PRE_FILTER_STATE_KEY)
    return pairs(s.existing), pairs(s.aff), pairs(s.anti)


@pytest.mark.parametrize(("name", "pending", "existing", "added", "want_anti", "want_aff"), ADD_REMOVE_CASES,
                         ids=[c[0] for c in ADD_REMOVE_CASES])
def test_prefilter_state_add_remove_pod(name: str, pending: Pod, existing: list[Pod], added: Pod,
                                        want_anti: dict[Any, int], want_aff: dict[Any, int]) -> None:
    nodes = [node("nodeA", LABEL1), node("nodeB", LABEL2), node("nodeC", LABEL3)]
    all_state, st = pre_filter(runner(nodes, [*existing, added]), pending)
    assert st is None
    r = runner(nodes, existing)
    state, st = pre_filter(r, pending)
    assert st is None
    original = _state_pairs(state)
    original_clone = state.read(PRE_FILTER_STATE_KEY).clone()
    p = plugin(r)
    ni = r.snapshot.get(added.node_name)
    assert ni is not None
    assert p.add_pod(state, pending, PodInfo(added), ni) is None
    got = _state_pairs(state)
    assert got[2] == want_anti
    assert got[1] == want_aff
    assert got == _state_pairs(all_state)
    assert p.remove_pod(state, pending, PodInfo(added), ni) is None
    assert _state_pairs(state) == original
    # The clone taken before was not touched by the updates.
    c = CycleState()
    c.write(PRE_FILTER_STATE_KEY, original_clone)
    assert _state_pairs(c) == original


def test_prefilter_state_clone_is_deep() -> None:
    r = runner([node("n1", {"zone": "z1"}), node("n2", {"zone": "z2"})],
               [pod("e", labels={"app": "a"}, node="n1", anti=[term(match_labels={"app": "a"}, topo="zone")])])
    incoming = pod(labels={"app": "a"}, aff=[term(match_labels={"app": "a"}, topo="zone")],
                   anti=[term(match_labels={"app": "a"}, topo="zone")])
    state, _ = pre_filter(r, incoming)
    before = _state_pairs(state)
    assert before == ({("zone", "z1"): 1}, {("zone", "z1"): 1}, {("zone", "z1"): 1})
    clone = state.clone()
    ni = r.snapshot.get("n2")
    assert ni is not None
    plugin(r).add_pod(clone, incoming, PodInfo(pod("x", labels={"app": "a"}, node="n2",
                                                   anti=[term(match_labels={"app": "a"}, topo="zone")])), ni)
    assert _state_pairs(clone) == ({("zone", "z1"): 1, ("zone", "z2"): 1}, {("zone", "z1"): 1, ("zone", "z2"): 1},
                                   {("zone", "z1"): 1, ("zone", "z2"): 1})
    assert _state_pairs(state) == before


def test_nominated_pod_is_counted_through_the_framework() -> None:
    """Filter with nominated pods: the framework clones the state and calls AddPod; a nominated
    pod matching the incoming pod's anti-affinity blocks its node in the first pass."""

    class _Nom:
        def __init__(self, pods: dict[str, list[PodInfo]]) -> None:
            self.by_node = pods

        def pods_for_node(self, name: str) -> list[PodInfo]:
            return self.by_node.get(name, [])

        def __len__(self) -> int:
            return sum(len(v) for v in self.by_node.values())

    nominated = PodInfo(pod("nom", labels={"app": "db"}))
    nominated.pod.priority = 10
    r = PluginRunner(["InterPodAffinity"], [node("a", {"zone": "z1"}), node("b", {"zone": "z2"})], [],
                     nominator=_Nom({"a": [nominated]}), informers=ns_informers())
    incoming = pod(anti=[term(match_labels={"app": "db"}, topo="zone")])
    state, _, st = r.pre_filter(incoming)
    assert st is None
    for name, want in (("a", ANTI), ("b", None)):
        ni = r.snapshot.get(name)
        assert ni is not None
        assert r.fw.run_filter_plugins_with_nominated_pods(state, incoming, ni) == want
    # The state of the cycle itself is unchanged by the nominated pass.
    assert _state_pairs(state) == ({}, {}, {})


# ---------------------------------------------------------------------------------------------
# TestGetTPMapMatchingIncomingAffinityAntiAffinity


def _normal(*labels: str) -> Pod:
    return pod("normal", labels=dict.fromkeys(labels, ""), node="nodeA")


INCOMING_COUNT_CASES = [
    ("nil test", [], pod("aaa-normal"), None, None),
    ("incoming pod without affinity/anti-affinity is a no-op", [_normal("aaa")], pod("aaa-normal"), None, None),
    ("no pod violates the incoming pod's affinity and anti-affinity", [_normal("bbb")],
     pod("aaa-anti", aff=[term(expr("aaa", "Exists"), topo="hostname")],
         anti=[term(expr("aaa", "Exists"), topo="hostname")]), {}, {}),
    ("existing pod matches the incoming pod's affinity and anti-affinity - single term", [_normal("aaa")],
     pod("affi-antiaffi", aff=[term(expr("aaa", "Exists"), topo="hostname")],
         anti=[term(expr("aaa", "Exists"), topo="hostname")]),
     {("hostname", "nodeA"): 1}, {("hostname", "nodeA"): 1}),
    ("existing pod matches the incoming pod's affinity and anti-affinity - multiple terms", [_normal("aaa", "bbb")],
     pod("affi-antiaffi", aff=[term(expr("aaa", "Exists"), topo="hostname"),
                               term(expr("bbb", "Exists"), topo="hostname")],
         anti=[term(expr("aaa", "Exists"), topo="hostname")]),
     {("hostname", "nodeA"): 2}, {("hostname", "nodeA"): 1}),
    ("existing pod matches the anti-affinity but not all affinity terms", [_normal("aaa")],
     pod("affi-antiaffi", aff=[term(expr("aaa", "Exists"), topo="hostname"),
                               term(expr("bbb", "Exists"), topo="hostname")],
         anti=[term(expr("aaa", "Exists"), topo="hostname"), term(expr("bbb", "Exists"), topo="hostname")]),
     {}, {("hostname", "nodeA"): 1}),
    ("anti-affinity with several terms, the existing pod violates one - case 1", [_normal("aaa", "bbb")],
     pod("anaffi-antiaffiti", aff=[term(expr("aaa", "Exists"), topo="hostname"),
                                   term(expr("ccc", "Exists"), topo="hostname")],
         anti=[term(expr("aaa", "Exists"), topo="hostname"), term(expr("ccc", "Exists"), topo="hostname")]),
     {}, {("hostname", "nodeA"): 1}),
    ("anti-affinity with several terms, the existing pod violates one - case 2", [_normal("bbb")],
     pod("affi-antiaffi", aff=[term(expr("aaa", "Exists"), topo="hostname"),
                               term(expr("bbb", "Exists"), topo="hostname")],
         anti=[term(expr("aaa", "Exists"), topo="hostname"), term(expr("bbb", "Exists"), topo="hostname")]),
     {}, {("hostname", "nodeA"): 1}),
]


@pytest.mark.parametrize(("name", "existing", "incoming", "want_aff", "want_anti"), INCOMING_COUNT_CASES,
                         ids=[c[0] for c in INCOMING_COUNT_CASES])
def test_incoming_affinity_anti_affinity_counts(name: str, existing: list[Pod], incoming: Pod,
                                                want_aff: Any, want_anti: Any) -> None:
    r = runner([node("nodeA", {"hostname": "nodeA"})], existing)
    state, st = pre_filter(r, incoming)
    if want_aff is None:
        # No terms of its own and nothing existing against it: the plugin skips (no counts).
        assert st is not None and st.code == Code.SKIP
        return
    assert st is None
    _, aff, anti = _state_pairs(state)
    assert aff == want_aff
    assert anti == want_anti


# ---------------------------------------------------------------------------------------------
# matchLabelKeys / mismatchLabelKeys (merged into the selector by the API layer)


def test_match_label_keys_end_to_end() -> None:
    nodes = [node("n1", {"zone": "z1"}), node("n2", {"zone": "z2"}), node("n3", {"zone": "z3"})]
    existing = [pod("v1", labels={"app": "web", "version": "v1"}, node="n1"),
                pod("v2", labels={"app": "web", "version": "v2"}, node="n2")]
    r = runner(nodes, existing)
    # Anti-affinity to pods of the same app *and version*: only v2's zone is blocked.
    incoming = pod(labels={"app": "web", "version": "v2"},
                   anti=[term(match_labels={"app": "web"}, topo="zone", match_label_keys=["version"])])
    assert r.filter(incoming) == {"n1": None, "n2": ANTI, "n3": None}
    # Affinity to same app but a *different* version (mismatchLabelKeys): only v1's zone fits.
    incoming = pod(labels={"app": "web", "version": "v2"},
                   aff=[term(match_labels={"app": "web"}, topo="zone", mismatch_label_keys=["version"])])
    assert r.filter(incoming) == {"n1": None, "n2": UNRESOLVABLE_AFF, "n3": UNRESOLVABLE_AFF}
    # An existing pod's merged keys act on the incoming pod too (symmetry).
    r = runner(nodes, [pod("e", labels={"app": "web", "version": "v1"}, node="n1",
                           anti=[term(match_labels={"app": "web"}, topo="zone", match_label_keys=["version"])])])
    assert r.filter(pod(labels={"app": "web", "version": "v1"})) == {"n1": EXISTING, "n2": None, "n3": None}
    assert r.filter(pod(labels={"app": "web", "version": "v9"})) == {"n1": None, "n2": None, "n3": None}


def test_existing_namespace_selector_uses_incoming_namespace_labels() -> None:
    nodes = [node("n1", {"zone": "z1"}), node("n2", {"zone": "z2"})]
    existing = [pod("e", ns="subteam2-team2", node="n1",
                    anti=[term(match_labels={"app": "x"}, topo="zone", ns_selector=TEAM1)])]
    r = runner(nodes, existing)
    assert r.filter(pod(ns="subteam1-team1", labels={"app": "x"}))["n1"] == EXISTING
    assert r.filter(pod(ns="subteam1-team2", labels={"app": "x"}))["n1"] is None
    # A namespace the informer does not know has no labels.
    assert r.filter(pod(ns="unknown", labels={"app": "x"}))["n1"] is None
    # An empty namespaceSelector selects every namespace, known or not.
    r = runner(nodes, [pod("e", ns="subteam2-team2", node="n1",
                           anti=[term(match_labels={"app": "x"}, topo="zone", ns_selector={})])])
    assert r.filter(pod(ns="unknown", labels={"app": "x"}))["n1"] == EXISTING


def test_namespace_selector_sees_namespaces_created_later() -> None:
    store = Store()
    f = InformerFactory(InProcessClient(store))
    f.informer("Namespace")
    f.poll()
    nodes = [node("n1", {"zone": "z1"})]
    r = PluginRunner(["InterPodAffinity"], nodes, [pod("e", ns="late", labels={"app": "x"}, node="n1")],
                     informers=f)
    incoming = pod(aff=[term(match_labels={"app": "x"}, topo="zone",
                             ns_selector={"matchLabels": {"team": "t"}})])
    assert r.filter(incoming)["n1"] == UNRESOLVABLE_AFF
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "late", "labels": {"team": "t"}}})
    f.poll()
    assert r.filter(incoming)["n1"] is None



def test_namespace_labels_follow_the_informers_namespace_objects() -> None:
    """The incoming pod's namespace labels are made once per Namespace object: a relabelled
    namespace (a new object in the informer) gives its new labels, and an existing pod's
    namespaceSelector term then matches by them."""
    store = Store()
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {"team": "x"}}})
    f = InformerFactory(InProcessClient(store))
    f.informer("Namespace")
    f.poll()
    nodes = [node("n1", {"zone": "z1"})]
    existing = [pod("e", ns="b", node="n1",
                    anti=[term(match_labels={"app": "x"}, topo="zone", ns_selector={"matchLabels": {"team": "t"}})])]
    r = PluginRunner(["InterPodAffinity"], nodes, existing, informers=f)
    plugin = r.fw.plugins["InterPodAffinity"]
    incoming = pod(ns="a", labels={"app": "x"})
    assert r.filter(incoming)["n1"] is None
    first = plugin._namespace_labels_and_key("a")
    assert first == ({"team": "x"}, frozenset({("team", "x")}))
    assert plugin._namespace_labels_and_key("a")[0] is first[0]  # the same object: made once
    assert plugin._namespace_labels_and_key("unknown") == ({}, None)
    ns = store.get("Namespace", "", "a")
    store.update({**ns.raw, "metadata": {**ns.raw["metadata"], "labels": {"team": "t"}}})
    f.poll()
    assert plugin._namespace_labels_and_key("a") == ({"team": "t"}, frozenset({("team", "t")}))
    assert r.filter(incoming)["n1"] == EXISTING

# ---------------------------------------------------------------------------------------------
# Arguments and events


def test_default_args_and_validation() -> None:
    cfg = parse_configuration({}).profiles[0].plugin_config["InterPodAffinity"]
    assert cfg == {"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": False}
    p = InterPodAffinity(dict(cfg))
    assert p.hard_pod_affinity_weight == 1 and not p.ignore_preferred_terms_of_existing_pods
    assert InterPodAffinity({}).hard_pod_affinity_weight == 1
    with pytest.raises(ValueError, match=r"hardPodAffinityWeight: Invalid value: 101: not in valid range \[0-100\]"):
        InterPodAffinity({"hardPodAffinityWeight": 101})
    with pytest.raises(ValueError, match="not in valid range"):
        InterPodAffinity({"hardPodAffinityWeight": -1})


def test_events_to_register() -> None:
    evs = InterPodAffinity({}).events_to_register()
    got = {(e.event.resource, e.event.action) for e in evs}
    assert got == {
        (EventResource.POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE),
        (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
    }
    assert all(e.hint is not None for e in evs)


def test_registered_in_tree() -> None:
    from ksched.scheduler.plugins.registry import Registry

    assert Registry(load_entry_points=False).get("InterPodAffinity") is InterPodAffinity
