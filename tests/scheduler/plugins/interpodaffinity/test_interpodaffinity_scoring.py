"""InterPodAffinity: PreScore, Score, NormalizeScore.

Cases ported from upstream kubernetes v1.36 ``pkg/scheduler/framework/plugins/interpodaffinity``
``scoring_test.go`` (TestPreferredAffinity, TestPreferredAffinityWithHardPodAffinitySymmetricWeight).
Namespaces are spelled ``subteam1-team1`` (upstream: ``subteam1.team1``) and upstream's empty
namespace is ``default``. Upstream's cases with unparsable label values are not ported: the API
layer rejects such pods before they reach the scheduler.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.status import Code
from ksched.scheduler.plugins.interpodaffinity import PRE_SCORE_STATE_KEY, InterPodAffinity
from ksched.testing import PluginRunner, make_node, make_pod


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def term(*exprs: dict[str, Any], topo: str, namespaces: list[str] | None = None,
         ns_selector: dict[str, Any] | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"topologyKey": topo, "labelSelector": {"matchExpressions": list(exprs)}}
    if namespaces is not None:
        t["namespaces"] = namespaces
    if ns_selector is not None:
        t["namespaceSelector"] = ns_selector
    return t


def affinity(aff: list[dict[str, Any]] | None = None, anti: list[dict[str, Any]] | None = None,
             pref_aff: list[tuple[int, dict[str, Any]]] | None = None,
             pref_anti: list[tuple[int, dict[str, Any]]] | None = None) -> dict[str, Any]:
    a: dict[str, Any] = {}
    if aff or pref_aff:
        a["podAffinity"] = {}
        if aff:
            a["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = aff
        if pref_aff:
            a["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in pref_aff]
    if anti or pref_anti:
        a["podAntiAffinity"] = {}
        if anti:
            a["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = anti
        if pref_anti:
            a["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in pref_anti]
    return a


_n = 0


def pod(node: str = "", labels: dict[str, str] | None = None, aff: dict[str, Any] | None = None,
        ns: str = "default") -> Pod:
    global _n
    _n += 1
    return make_pod(f"p{_n}", ns, labels=labels, node_name=node, affinity=aff or None)


def ns_informers() -> InformerFactory:
    store = Store()
    for name, team in (("subteam1-team1", "team1"), ("subteam2-team1", "team1"),
                       ("subteam1-team2", "team2"), ("subteam2-team2", "team2")):
        store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": team}}})
    f = InformerFactory(InProcessClient(store))
    f.informer("Namespace")
    f.poll()
    return f


def scores(nodes: list[Any], pods: list[Pod], incoming: Pod, **args: Any) -> dict[str, int]:
    """Normalized InterPodAffinity scores (empty when PreScore skips); vectorized and per-node
    forms are checked to agree by the runner."""
    r = PluginRunner(["InterPodAffinity"], nodes, pods, args={"InterPodAffinity": args}, informers=ns_informers())
    return r.score(incoming)["InterPodAffinity"]


RG_CHINA = {"region": "China"}
RG_INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
RG_CHINA_AZ1 = {"region": "China", "az": "az1"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}

STAY_WITH_S1_IN_REGION = affinity(pref_aff=[(5, term(expr("security", "In", "S1"), topo="region"))])
STAY_WITH_S2_IN_REGION = affinity(pref_aff=[(6, term(expr("security", "In", "S2"), topo="region"))])
AFFINITY3 = affinity(pref_aff=[
    (8, term(expr("security", "NotIn", "S1"), expr("security", "In", "S2"), topo="region")),
    (2, term(expr("security", "Exists"), expr("wrongkey", "DoesNotExist"), topo="region"))])
HARD_AFFINITY = affinity(aff=[
    term(expr("security", "In", "S1", "value2"), topo="region"),
    term(expr("security", "Exists"), expr("wrongkey", "DoesNotExist"), topo="region")])
AWAY_FROM_S1_IN_AZ = affinity(pref_anti=[(5, term(expr("security", "In", "S1"), topo="az"))])
AWAY_FROM_S2_IN_AZ = affinity(pref_anti=[(5, term(expr("security", "In", "S2"), topo="az"))])
STAY_S1_REGION_AWAY_S2_AZ = affinity(pref_aff=[(8, term(expr("security", "In", "S1"), topo="region"))],
                                     pref_anti=[(5, term(expr("security", "In", "S2"), topo="az"))])
TEAM1 = {"matchExpressions": [expr("team", "In", "team1")]}
AFFINITY_NS_SELECTOR = affinity(pref_aff=[(5, term(expr("security", "In", "S1"), topo="region",
                                                   namespaces=["subteam2-team2"], ns_selector=TEAM1))])
ANTI_AFFINITY_NS_SELECTOR = affinity(pref_anti=[(5, term(expr("security", "In", "S1"), topo="region",
                                                         namespaces=["subteam2-team2"], ns_selector=TEAM1))])


def N(name: str, labels: dict[str, str]) -> Any:
    return make_node(name, labels=labels)


def _three(a: dict[str, str], b: dict[str, str], c: dict[str, str]) -> list[Any]:
    return [N("node1", a), N("node2", b), N("node3", c)]


PREFERRED_CASES: list[tuple[str, Pod, list[Pod], list[Any], dict[str, Any], dict[str, int]]] = [
    ("all nodes are the same when the pod has no affinity (PreScore skips)",
     pod(labels=S1), [], _three(RG_CHINA, RG_INDIA, AZ1), {}, {}),
    ("affinity: the node matching topology key and pods scores highest",
     pod(labels=S1, aff=STAY_WITH_S1_IN_REGION),
     [pod("node1", S1), pod("node2", S2), pod("node3", S1)], _three(RG_CHINA, RG_INDIA, AZ1), {},
     {"node1": 100, "node2": 0, "node3": 0}),
    ("all nodes with the same topology value as a matching pod score the same",
     pod(aff=STAY_WITH_S1_IN_REGION), [pod("node1", S1)], _three(RG_CHINA, RG_CHINA_AZ1, RG_INDIA), {},
     {"node1": 100, "node2": 100, "node3": 0}),
    ("affinity: the region with more matching pods scores higher",
     pod(labels=S1, aff=STAY_WITH_S2_IN_REGION),
     [pod("node1", S2), pod("node1", S2), pod("node2", S2), pod("node3", S2), pod("node4", S2), pod("node5", S2)],
     [N("node1", RG_CHINA), N("node2", RG_INDIA), N("node3", RG_CHINA), N("node4", RG_CHINA),
      N("node5", RG_INDIA)], {},
     {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0}),
    ("affinity: different operators and values, with some mismatches",
     pod(labels=S1, aff=AFFINITY3), [pod("node1", S1), pod("node2", S2), pod("node3", S1)],
     _three(RG_CHINA, RG_INDIA, AZ1), {}, {"node1": 20, "node2": 100, "node3": 0}),
    ("affinity symmetry: existing pods' preferred affinity",
     pod(labels=S2), [pod("node1", S1, STAY_WITH_S1_IN_REGION), pod("node2", S2, STAY_WITH_S2_IN_REGION)],
     _three(RG_CHINA, RG_INDIA, AZ1), {}, {"node1": 0, "node2": 100, "node3": 0}),
    ("affinity symmetry with a namespace selector",
     pod(labels=S1, ns="subteam1-team1"),
     [pod("node1", S1, AFFINITY_NS_SELECTOR), pod("node2", S2, STAY_WITH_S2_IN_REGION)],
     _three(RG_CHINA, RG_INDIA, AZ1), {}, {"node1": 100, "node2": 0, "node3": 0}),
    ("anti-affinity symmetry with a namespace selector",
     pod(labels=S1, ns="subteam1-team1"),
     [pod("node1", S1, ANTI_AFFINITY_NS_SELECTOR), pod("node2", S2, STAY_WITH_S2_IN_REGION)],
     _three(RG_CHINA, RG_INDIA, AZ1), {}, {"node1": 0, "node2": 100, "node3": 100}),
    ("affinity symmetry: existing pods' required affinity (hardPodAffinityWeight)",
     pod(labels=S1), [pod("node1", S1, HARD_AFFINITY), pod("node2", S2, HARD_AFFINITY)],
     _three(RG_CHINA, RG_INDIA, AZ1), {}, {"node1": 100, "node2": 100, "node3": 0}),
    ("anti-affinity: a node without matching pods scores high",
     pod(labels=S1, aff=AWAY_FROM_S1_IN_AZ), [pod("node1", S1), pod("node2", S2)],
     [N("node1", AZ1), N("node2", RG_CHINA)], {}, {"node1": 0, "node2": 100}),
    ("anti-affinity: a node without the topology key scores high",
     pod(labels=S1, aff=AWAY_FROM_S1_IN_AZ), [pod("node1", S1), pod("node2", S1)],
     [N("node1", AZ1), N("node2", RG_CHINA)], {}, {"node1": 0, "node2": 100}),
    ("anti-affinity: the node with more matching pods scores lower",
     pod(labels=S1, aff=AWAY_FROM_S1_IN_AZ), [pod("node1", S1), pod("node1", S1), pod("node2", S2)],
     [N("node1", AZ1), N("node2", RG_INDIA)], {}, {"node1": 0, "node2": 100}),
    ("anti-affinity symmetry: existing pods' preferred anti-affinity",
     pod(labels=S2), [pod("node1", S1, AWAY_FROM_S2_IN_AZ), pod("node2", S2, AWAY_FROM_S1_IN_AZ)],
     [N("node1", AZ1), N("node2", AZ2)], {}, {"node1": 0, "node2": 100}),
    ("affinity and anti-affinity, preferred only",
     pod(labels=S1, aff=STAY_S1_REGION_AWAY_S2_AZ), [pod("node1", S1), pod("node2", S1)],
     [N("node1", RG_CHINA), N("node2", AZ1)], {}, {"node1": 100, "node2": 0}),
    ("affinity and anti-affinity with pods of the same labels",
     pod(labels=S1, aff=STAY_S1_REGION_AWAY_S2_AZ),
     [pod("node1", S1), pod("node1", S1), pod("node2", S1), pod("node3", S1), pod("node3", S1), pod("node4", S1),
      pod("node5", S1)],
     [N("node1", RG_CHINA_AZ1), N("node2", RG_INDIA), N("node3", RG_CHINA), N("node4", RG_CHINA),
      N("node5", RG_INDIA)], {},
     {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0}),
    ("affinity, anti-affinity and symmetry together",
     pod(labels=S1, aff=STAY_S1_REGION_AWAY_S2_AZ),
     [pod("node1", S1), pod("node2", S2), pod("node3", None, STAY_S1_REGION_AWAY_S2_AZ),
      pod("node4", None, AWAY_FROM_S1_IN_AZ)],
     [N("node1", RG_CHINA), N("node2", AZ1), N("node3", RG_INDIA), N("node4", AZ2)], {},
     {"node1": 100, "node2": 0, "node3": 100, "node4": 0}),
    ("no panic when only some nodes of a topology have pods with affinity",
     pod(labels=S1), [pod("node1", S1), pod("node2", None, STAY_S1_REGION_AWAY_S2_AZ)],
     [N("node1", RG_CHINA), N("node2", RG_CHINA)], {}, {"node1": 0, "node2": 0}),
    ("affinity with pods matching the namespace selector",
     pod(labels=S1, aff=AFFINITY_NS_SELECTOR, ns="subteam1-team1"),
     [pod("node1", S1, ns="subteam1-team1"), pod("node1", S1, ns="subteam1-team1"),
      pod("node1", S1, ns="subteam1-team2"), pod("node2", S1, ns="subteam2-team1")],
     [N("node1", RG_CHINA), N("node2", RG_INDIA)], {}, {"node1": 100, "node2": 0}),
    ("affinity with pods matching both the namespace selector and the namespaces",
     pod(labels=S1, aff=AFFINITY_NS_SELECTOR, ns="subteam1-team1"),
     [pod("node1", S1, ns="subteam1-team1"), pod("node1", S1, ns="subteam1-team1"),
      pod("node1", S1, ns="subteam2-team2"), pod("node2", S1, ns="subteam2-team1")],
     [N("node1", RG_CHINA), N("node2", RG_INDIA)], {}, {"node1": 100, "node2": 0}),
    ("anti-affinity with pods matching the namespace selector",
     pod(labels=S1, aff=ANTI_AFFINITY_NS_SELECTOR, ns="subteam1-team1"),
     [pod("node1", S1, ns="subteam1-team1"), pod("node1", S1, ns="subteam1-team1"),
      pod("node1", S1, ns="subteam1-team2"), pod("node2", S1, ns="subteam2-team1")],
     [N("node1", RG_CHINA), N("node2", RG_INDIA)], {}, {"node1": 0, "node2": 100}),
    ("anti-affinity with pods matching both the namespace selector and the namespaces",
     pod(labels=S1, aff=ANTI_AFFINITY_NS_SELECTOR, ns="subteam1-team1"),
     [pod("node1", S1, ns="subteam1-team1"), pod("node1", S1, ns="subteam1-team1"),
      pod("node1", S1, ns="subteam2-team2"), pod("node2", S1, ns="subteam2-team1")],
     [N("node1", RG_CHINA), N("node2", RG_INDIA)], {}, {"node1": 0, "node2": 100}),
    ("ignore preferred terms of existing pods (PreScore skips)",
     pod(labels=S2), [pod("node1", S1, STAY_S1_REGION_AWAY_S2_AZ), pod("node2", S2, STAY_WITH_S2_IN_REGION)],
     [N("node1", RG_CHINA), N("node2", RG_INDIA)], {"ignorePreferredTermsOfExistingPods": True}, {}),
    ("do not ignore preferred terms of existing pods",
     pod(labels=S2), [pod("node1", S1, STAY_S1_REGION_AWAY_S2_AZ), pod("node2", S2, STAY_WITH_S2_IN_REGION)],
     [N("node1", RG_CHINA), N("node2", RG_INDIA)], {"ignorePreferredTermsOfExistingPods": False},
     {"node1": 0, "node2": 100}),
    ("no nodes to score (PreScore skips)", pod(labels=S2), [], [], {}, {}),
]


@pytest.mark.parametrize(("name", "incoming", "pods", "nodes", "args", "want"), PREFERRED_CASES,
                         ids=[c[0] for c in PREFERRED_CASES])
def test_preferred_affinity(name: str, incoming: Pod, pods: list[Pod], nodes: list[Any], args: dict[str, Any],
                            want: dict[str, int]) -> None:
    assert scores(nodes, pods, incoming, **args) == want


HARD_POD_AFFINITY = affinity(aff=[term(expr("service", "In", "S1"), topo="region",
                                       namespaces=["default", "subteam2-team2"], ns_selector=TEAM1)])
SERVICE_S1 = {"service": "S1"}

HARD_WEIGHT_CASES = [
    ("with default weight", "default", 1, {"node1": 100, "node2": 100, "node3": 0}),
    ("with zero weight (PreScore skips)", "default", 0, {}),
    ("with no matching namespace (PreScore skips)", "subteam1-team2", 1, {}),
    ("with matching namespace selector", "subteam1-team1", 1, {"node1": 100, "node2": 100, "node3": 0}),
    ("with matching namespaces", "subteam2-team2", 1, {"node1": 100, "node2": 100, "node3": 0}),
]


@pytest.mark.parametrize(("name", "ns", "weight", "want"), HARD_WEIGHT_CASES, ids=[c[0] for c in HARD_WEIGHT_CASES])
def test_preferred_affinity_with_hard_pod_affinity_symmetric_weight(name: str, ns: str, weight: int,
                                                                    want: dict[str, int]) -> None:
    nodes = _three(RG_CHINA, RG_INDIA, AZ1)
    existing = [pod("node1", None, HARD_POD_AFFINITY), pod("node2", None, HARD_POD_AFFINITY)]
    assert scores(nodes, existing, pod(labels=SERVICE_S1, ns=ns), hardPodAffinityWeight=weight) == want


def test_raw_scores_and_weights() -> None:
    """Raw (pre-normalization) scores are the sums of weights per topology pair."""
    nodes = [N("a", {"zone": "z1", "rack": "r1"}), N("b", {"zone": "z1", "rack": "r2"}), N("c", {"zone": "z2"})]
    existing = [pod("a", {"app": "db"}), pod("a", {"app": "db"}), pod("c", {"app": "db"}),
                pod("b", {"app": "cache"}, affinity(aff=[term(expr("app", "In", "web"), topo="zone")])),
                pod("c", {"app": "x"}, affinity(pref_anti=[(7, term(expr("app", "Exists"), topo="zone"))]))]
    incoming = pod(labels={"app": "web"}, aff=affinity(pref_aff=[(3, term(expr("app", "In", "db"), topo="zone"))],
                                                       pref_anti=[(2, term(expr("app", "In", "db"), topo="rack"))]))
    r = PluginRunner(["InterPodAffinity"], nodes, existing, args={"InterPodAffinity": {"hardPodAffinityWeight": 4}})
    raw = r.score(incoming, normalize=False)["InterPodAffinity"]
    # a: zone z1 (+3*2 db, +4 hard) + rack r1 (-2*2 db) = 6; b: zone z1 = 10; c: zone z2 (+3 db, -7) = -4
    assert raw == {"a": 6, "b": 10, "c": -4}
    assert r.score(incoming)["InterPodAffinity"] == {"a": 71, "b": 100, "c": 0}


def test_normalize_score_min_max_as_upstream() -> None:
    r = PluginRunner(["InterPodAffinity"], [N("a", {"zone": "z"})], [pod("a", {"app": "db"})])
    p = r.fw.plugins["InterPodAffinity"]
    assert isinstance(p, InterPodAffinity)
    state = CycleState()
    incoming = pod(aff=affinity(pref_aff=[(1, term(expr("app", "In", "db"), topo="zone"))]))
    assert p.pre_score(state, incoming, r.snapshot.all_nodes()) is None
    nl = r.snapshot.all_nodes()
    s = np.array([-5, 0, 7, 3, -5], dtype=np.int64)
    assert p.normalize_score(state, incoming, nl, s) is None
    # int64(100 * (s - min) / (max - min)), truncated
    assert s.tolist() == [0, 41, 100, 66, 0]
    s = np.array([4, 4, 4], dtype=np.int64)
    p.normalize_score(state, incoming, nl, s)
    assert s.tolist() == [0, 0, 0]
    st = p.normalize_score(CycleState(), incoming, nl, s)
    assert st is not None and st.code == Code.ERROR
    assert st.message() == f'failed to read "{PRE_SCORE_STATE_KEY}" from cycleState: not found'
    _, st = p.score(CycleState(), incoming, r.snapshot.get("a"))  # type: ignore[arg-type]
    assert st is not None and st.code == Code.ERROR


def test_prescore_ignores_the_feasible_subset() -> None:
    """Upstream builds the topology scores from all nodes, not only the ones being scored."""
    nodes = [N("a", {"zone": "z1"}), N("b", {"zone": "z1"}), N("c", {"zone": "z2"})]
    r = PluginRunner(["InterPodAffinity"], nodes, [pod("a", {"app": "db"})])
    incoming = pod(aff=affinity(pref_aff=[(5, term(expr("app", "In", "db"), topo="zone"))]))
    assert r.score(incoming, nodes=["b", "c"], normalize=False)["InterPodAffinity"] == {"b": 5, "c": 0}
    assert r.score(incoming, nodes=["b", "c"])["InterPodAffinity"] == {"b": 100, "c": 0}


def test_zero_sum_contribution_still_runs_and_normalizes_to_zero() -> None:
    """A term that matched (even with a net zero) makes PreScore run; all-equal scores are 0."""
    nodes = [N("a", {"zone": "z1"}), N("b", {"zone": "z2"})]
    existing = [pod("a", {"app": "db"})]
    incoming = pod(aff=affinity(pref_aff=[(5, term(expr("app", "In", "db"), topo="zone"))],
                                pref_anti=[(5, term(expr("app", "In", "db"), topo="zone"))]))
    r = PluginRunner(["InterPodAffinity"], nodes, existing)
    assert r.score(incoming, normalize=False)["InterPodAffinity"] == {"a": 0, "b": 0}
    # Contributions only on a node without the topology key: nothing counts, PreScore skips.
    r = PluginRunner(["InterPodAffinity"], [N("a", {}), N("b", {"zone": "z2"})], existing)
    assert r.score(incoming)["InterPodAffinity"] == {}
