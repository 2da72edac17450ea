"""PodTopologySpread: PreFilter state, Filter, AddPod/RemovePod, Score and NormalizeScore,
default constraints and queueing hints.

The tables port the cases of upstream's filtering_test.go (TestPreFilterState,
TestPreFilterStateAddPod/RemovePod, TestSingleConstraint, TestMultipleConstraints),
scoring_test.go (TestPreScoreSkip, TestPreScoreStateEmptyNodes, TestPodTopologySpreadScore) and
plugin_test.go (Test_isSchedulableAfterNodeChange/PodChange), kubernetes/kubernetes 1.35/1.36-era
sources, with the feature gates at their 1.36 values (NodeInclusionPolicy, MatchLabelKeys and
queueing hints on). Every Filter/Score case also goes through PluginRunner, which checks that the
vectorized forms agree with the per-node forms.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from ksched.api.meta import KubeObject
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ActionType, EventResource, QueueingHint
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import PodInfo
from ksched.scheduler.plugins.podtopologyspread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PRE_FILTER_STATE_KEY,
    PRE_SCORE_STATE_KEY,
    PodTopologySpread,
    topology_normalizing_weight,
)
from ksched.testing import PluginRunner, make_node, make_pod

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
HARD = "DoNotSchedule"
SOFT = "ScheduleAnyway"
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
NIL = None  # a nil labelSelector (matches nothing)
EMPTY: dict[str, Any] = {}  # an empty labelSelector (matches everything, counts nothing)
UNSCHED_TAINT = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
TOLERATE_UNSCHED = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]

OK = Code.SUCCESS
U = Code.UNSCHEDULABLE
X = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def ml(**kv: str) -> dict[str, Any]:
    return {"matchLabels": kv}


def spread(skew: int, key: str, when: str, selector: dict[str, Any] | None, *, min_domains: int | None = None,
           affinity_policy: str | None = None, taints_policy: str | None = None,
           match_label_keys: list[str] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector is not None:
        d["labelSelector"] = selector
    if min_domains is not None:
        d["minDomains"] = min_domains
    if affinity_policy is not None:
        d["nodeAffinityPolicy"] = affinity_policy
    if taints_policy is not None:
        d["nodeTaintsPolicy"] = taints_policy
    if match_label_keys is not None:
        d["matchLabelKeys"] = match_label_keys
    return d


def _labels(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for it in items:
        k, _, v = it.partition("=")
        out[k] = v
    return out


def node(name: str, *labels: str, taints: list[dict[str, Any]] | None = None, hostname: bool = True) -> Node:
    """A node; ``labels`` as ``key=value`` (``key`` alone: empty value). ``hostname=False`` drops
    the kubernetes.io/hostname label make_node adds."""
    n = make_node(name, labels=_labels(labels), taints=taints)
    if not hostname:
        raw = n.deepcopy_raw()
        del raw["metadata"]["labels"][HOST]
        n = Node(raw)
    return n


_seq = 0


def pod(node_name: str = "", *labels: str, ns: str = "default", name: str | None = None,
        terminating: bool = False, **kw: Any) -> Pod:
    global _seq
    _seq += 1
    return make_pod(name or f"p{_seq}", ns, node_name=node_name, labels=_labels(labels),
                    deletion_timestamp="2024-01-01T00:00:00Z" if terminating else None, **kw)


def incoming(*labels: str, constraints: list[dict[str, Any]] | None = None, **kw: Any) -> Pod:
    return make_pod("p", labels=_labels(labels), topology_spread_constraints=constraints, **kw)


def node_affinity_in(key: str, values: list[str]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": values}]}]}}}


def node_affinity_not_in(key: str, values: list[str]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "NotIn", "values": values}]}]}}}


def runner(nodes: list[Node], pods: list[Pod] = (), defaulting: str = "List",  # type: ignore[assignment]
           default_constraints: list[dict[str, Any]] | None = None, informers: Any = None) -> PluginRunner:
    args: dict[str, Any] = {"defaultingType": defaulting, "defaultConstraints": default_constraints or []}
    return PluginRunner(["PodTopologySpread"], nodes, pods, args={"PodTopologySpread": args}, informers=informers)


def plugin(r: PluginRunner) -> PodTopologySpread:
    return r.fw.plugins["PodTopologySpread"]  # type: ignore[return-value]


def prefilter_counts(r: PluginRunner, p: Pod) -> tuple[list[dict[str, int]], list[int], Status | None]:
    state, _, st = r.pre_filter(p)
    if PodTopologySpread.name in state.skip_filter_plugins:
        return [], [], Status.skip()
    s = state.read(PRE_FILTER_STATE_KEY)
    n = len(s.constraints)
    return [s.domain_counts(i) for i in range(n)], [s.min_match(i) for i in range(n)], st


def A() -> Node:
    return node("node-a", "zone=zone1", "node=node-a")


def B() -> Node:
    return node("node-b", "zone=zone1", "node=node-b")


def Xn() -> Node:
    return node("node-x", "zone=zone2", "node=node-x")


def Y() -> Node:
    return node("node-y", "zone=zone2", "node=node-y")


def N4() -> list[Node]:
    return [A(), B(), Xn(), Y()]


def test_reasons_are_upstreams() -> None:
    assert ERR_REASON_CONSTRAINTS_NOT_MATCH == "node(s) didn't match pod topology spread constraints"
    assert ERR_REASON_NODE_LABEL_NOT_MATCH == "node(s) didn't match pod topology spread constraints (missing required label)"
    assert PRE_FILTER_STATE_KEY == "PreFilterPodTopologySpread"
    assert PRE_SCORE_STATE_KEY == "PreScorePodTopologySpread"


# ---------------------------------------------------------------- PreFilter state (TestPreFilterState)

def _pf_cases() -> list[Any]:
    p5 = [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-b", "foo"), pod("node-y", "foo"), pod("node-y", "foo")]
    p7 = [*p5, pod("node-y", "foo"), pod("node-y", "foo")]
    abc = [node("node-a", "node=node-a", "foo"), node("node-b", "node=node-b", "foo"), node("node-c", "node=node-c", "bar")]
    abc_pods = [pod("node-a", "bar"), pod("node-b", "bar"), pod("node-b", "bar"), pod("node-c")]
    tainted = [node("node-a", "node=node-a"), node("node-b", "node=node-b"),
               node("node-c", "node=node-c", "bar", taints=UNSCHED_TAINT)]
    fa = [pod("node-a", "foo=a"), pod("node-a", "foo=a"), pod("node-b", "foo=a"), pod("node-y", "foo=a"),
          pod("node-y", "foo=a")]
    return [
        pytest.param(incoming("foo", constraints=[spread(5, "zone", HARD, ml(foo="bar"))]), N4(), [],
                     [{"zone1": 0, "zone2": 0}], [0], id="clean-cluster"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, FOO)]), N4(), p5,
                     [{"zone1": 3, "zone2": 2}], [2], id="one-constraint"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, NIL)]), N4(), p5,
                     [{"zone1": 0, "zone2": 0}], [0], id="null-selector"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, FOO)]),
                     [*N4(), node("node-o", "zone=zone3", "node=node-o"), node("node-p", "zone=zone3", "node=node-p")],
                     p5, [{"zone1": 3, "zone2": 2, "zone3": 0}], [0], id="three-zones"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, FOO)]), N4(),
                     [pod("node-a", "foo"), pod("node-a", "foo", ns="ns1"), pod("node-b", "foo"),
                      pod("node-y", "foo", ns="ns2"), pod("node-y", "foo")],
                     [{"zone1": 2, "zone2": 1}], [1], id="namespace-mismatch-not-counted"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, FOO), spread(1, "node", HARD, FOO)]),
                     N4(), p7, [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}],
                     [3, 0], id="two-constraints"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", SOFT, FOO), spread(1, "zone", HARD, FOO),
                                                  spread(1, "node", SOFT, FOO), spread(1, "node", HARD, FOO)]),
                     [A(), B(), Y()], p7, [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
                     [3, 1], id="soft-constraints-bypassed"),
        pytest.param(incoming("foo", "bar", constraints=[spread(1, "zone", HARD, FOO), spread(1, "node", HARD, BAR)]),
                     [A(), B(), Y()], [pod("node-a", "foo"), pod("node-b", "bar")],
                     [{"zone1": 1, "zone2": 0}, {"node-a": 0, "node-b": 1, "node-y": 0}], [0, 0],
                     id="different-selectors-simple"),
        pytest.param(incoming("foo", "bar", constraints=[spread(1, "zone", HARD, FOO), spread(1, "node", HARD, BAR)]),
                     [A(), B(), Y()],
                     [pod("node-a", "foo"), pod("node-a", "foo", "bar"), pod("node-b", "foo"), pod("node-y", "foo"),
                      pod("node-y", "foo", "bar"), pod("node-y", "foo"), pod("node-y", "foo", "bar")],
                     [{"zone1": 3, "zone2": 4}, {"node-a": 1, "node-b": 0, "node-y": 2}], [3, 0],
                     id="different-selectors-complex"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, FOO), spread(1, "node", HARD, FOO)],
                              affinity=node_affinity_not_in("node", ["node-x"])),
                     N4(), p7, [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}], [3, 1],
                     id="node-affinity-excludes-node-x"),
        pytest.param(incoming("foo", node_selector={"foo": ""},
                              constraints=[spread(1, "node", HARD, BAR)]), abc, abc_pods,
                     [{"node-a": 1, "node-b": 2}], [1], id="affinity-policy-honor-node-selector"),
        pytest.param(incoming("foo", node_selector={"foo": ""},
                              constraints=[spread(1, "node", HARD, BAR, affinity_policy="Ignore")]), abc, abc_pods,
                     [{"node-a": 1, "node-b": 2, "node-c": 0}], [0], id="affinity-policy-ignore-node-selector"),
        pytest.param(incoming("foo", affinity=node_affinity_in("foo", [""]),
                              constraints=[spread(1, "node", HARD, BAR)]), abc, abc_pods,
                     [{"node-a": 1, "node-b": 2}], [1], id="affinity-policy-honor-node-affinity"),
        pytest.param(incoming("foo", affinity=node_affinity_in("foo", [""]),
                              constraints=[spread(1, "node", HARD, BAR, affinity_policy="Ignore")]), abc, abc_pods,
                     [{"node-a": 1, "node-b": 2, "node-c": 0}], [0], id="affinity-policy-ignore-node-affinity"),
        pytest.param(incoming("foo", constraints=[spread(1, "node", HARD, BAR)]), tainted, abc_pods,
                     [{"node-a": 1, "node-b": 2, "node-c": 0}], [0], id="taints-policy-ignore-default"),
        pytest.param(incoming("foo", constraints=[spread(1, "node", HARD, BAR, taints_policy="Honor")]), tainted,
                     abc_pods, [{"node-a": 1, "node-b": 2}], [1], id="taints-policy-honor"),
        pytest.param(incoming("foo", tolerations=TOLERATE_UNSCHED,
                              constraints=[spread(1, "node", HARD, BAR, taints_policy="Honor")]), tainted, abc_pods,
                     [{"node-a": 1, "node-b": 2, "node-c": 0}], [0], id="taints-policy-honor-tolerated"),
        pytest.param(incoming("foo", node_selector={"foo": ""},
                              constraints=[spread(1, "zone", HARD, FOO),
                                           spread(1, "node", HARD, FOO, affinity_policy="Ignore")]),
                     [node("node-a", "zone=zone1", "node=node-a", "foo"), node("node-b", "zone=zone1", "node=node-b"),
                      node("node-x", "zone=zone2", "node=node-x", "foo")],
                     [pod("node-b", "foo"), pod("node-b", "foo"), pod("node-x", "foo")],
                     [{"zone1": 0, "zone2": 1}, {"node-a": 0, "node-b": 2, "node-x": 1}], [0, 0],
                     id="zone-honor-ignore-node-ignore-ignore"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, FOO, taints_policy="Honor"),
                                                  spread(1, "node", HARD, FOO)]),
                     [node("node-a", "zone=zone1", "node=node-a", "foo"),
                      node("node-b", "zone=zone1", "node=node-b", taints=UNSCHED_TAINT),
                      node("node-x", "zone=zone2", "node=node-x", "foo")],
                     [pod("node-b", "foo"), pod("node-b", "foo"), pod("node-x", "foo")],
                     [{"zone1": 0, "zone2": 1}, {"node-a": 0, "node-b": 2, "node-x": 1}], [0, 0],
                     id="zone-honor-honor-node-honor-ignore"),
        pytest.param(incoming("foo", node_selector={"foo": ""},
                              constraints=[spread(1, "zone", HARD, FOO), spread(1, "node", HARD, FOO)]),
                     [node("node-a", "zone=zone1", "node=node-a"),
                      node("node-b", "zone=zone1", "node=node-b", "foo", taints=UNSCHED_TAINT),
                      node("node-x", "zone=zone2", "node=node-x", "foo"), node("node-y", "zone=zone2", "node=node-y")],
                     [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-x", "foo"), pod("node-y", "foo")],
                     [{"zone1": 0, "zone2": 1}, {"node-b": 0, "node-x": 1}], [0, 0],
                     id="both-honor-affinity"),
        pytest.param(incoming("foo", node_selector={"foo": ""},
                              constraints=[spread(1, "zone", HARD, FOO, affinity_policy="Ignore"),
                                           spread(1, "node", HARD, FOO, taints_policy="Honor")]),
                     [node("node-a", "zone=zone1", "node=node-a"),
                      node("node-b", "zone=zone1", "node=node-b", "foo", taints=UNSCHED_TAINT),
                      node("node-x", "zone=zone2", "node=node-x", "foo"),
                      node("node-y", "zone=zone2", "node=node-y", "foo")],
                     [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-x", "foo"), pod("node-x", "foo"),
                      pod("node-y", "foo")],
                     [{"zone1": 2, "zone2": 3}, {"node-x": 2, "node-y": 1}], [2, 1],
                     id="zone-ignore-ignore-node-honor-honor"),
        pytest.param(incoming("foo", "bar=a", constraints=[spread(1, "zone", HARD, FOO, match_label_keys=["bar"])]),
                     N4(), [pod("node-a", "foo"), pod("node-a", "foo", "bar=a"), pod("node-b", "foo"),
                            pod("node-y", "foo", "bar=a"), pod("node-y", "bar")],
                     [{"zone1": 1, "zone2": 1}], [1], id="match-label-keys-anded-with-selector"),
        pytest.param(incoming("foo=a", constraints=[spread(1, "zone", HARD, EMPTY, match_label_keys=["foo"])]),
                     N4(), fa, [{"zone1": 3, "zone2": 2}], [2], id="match-label-keys-with-empty-selector"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, NIL, match_label_keys=["bar"])]),
                     N4(), fa, [{"zone1": 0, "zone2": 0}], [0], id="match-label-keys-ignored-for-nil-selector"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, FOO, match_label_keys=["bar"])]),
                     N4(), fa, [{"zone1": 3, "zone2": 2}], [2], id="match-label-key-missing-on-pod"),
        pytest.param(incoming("foo", "bar", constraints=[spread(1, "zone", HARD, FOO), spread(1, "zone", HARD, BAR)]),
                     N4(), [pod("node-a", "foo", "bar"), pod("node-b", "foo"), pod("node-x", "bar"),
                            pod("node-y", "foo", "bar"), pod("node-y", "bar")],
                     [{"zone1": 2, "zone2": 1}, {"zone1": 1, "zone2": 3}], [1, 1], id="same-topology-key-twice"),
    ]


@pytest.mark.parametrize(("p", "nodes", "pods", "want_counts", "want_min"), _pf_cases())
def test_pre_filter_state(p: Pod, nodes: list[Node], pods: list[Pod], want_counts: list[dict[str, int]],
                          want_min: list[int]) -> None:
    counts, mins, st = prefilter_counts(runner(nodes, pods), p)
    assert st is None
    assert counts == want_counts
    assert mins == want_min


def test_pre_filter_constraint_fields() -> None:
    p = incoming("foo", constraints=[spread(5, "zone", HARD, ml(foo="bar")),
                                     spread(2, "node", HARD, FOO, min_domains=3, affinity_policy="Ignore",
                                            taints_policy="Honor")])
    state, _, st = runner(N4()).pre_filter(p)
    assert st is None
    c0, c1 = state.read(PRE_FILTER_STATE_KEY).constraints
    assert (c0.max_skew, c0.topology_key, c0.min_domains, c0.honor_affinity, c0.honor_taints) == (5, "zone", 1, True,
                                                                                                   False)
    assert (c1.max_skew, c1.topology_key, c1.min_domains, c1.honor_affinity, c1.honor_taints) == (2, "node", 3, False,
                                                                                                  True)


def test_pre_filter_skips_without_hard_constraints() -> None:
    r = runner([A()])
    state, _, st = r.pre_filter(incoming("foo"))
    assert st is None and "PodTopologySpread" in state.skip_filter_plugins
    state, _, _ = r.pre_filter(incoming("foo", constraints=[spread(1, "zone", SOFT, FOO)]))
    assert "PodTopologySpread" in state.skip_filter_plugins
    assert plugin(r).pre_filter(CycleState(), incoming("foo"), r.snapshot.all_nodes())[1] == Status.skip()


def test_filter_without_pre_filter_state_is_an_error() -> None:
    r = runner([A()])
    st = plugin(r).filter(CycleState(), incoming("foo"), r.snapshot.get("node-a"))  # type: ignore[arg-type]
    assert st is not None and st.code == Code.ERROR
    assert st.message() == 'reading "PreFilterPodTopologySpread" from cycleState: not found'


# ---------------------------------------------------------------- default constraints with listers

class FakeInformer:
    def __init__(self, objs: list[KubeObject]) -> None:
        self.objs = objs

    def list(self) -> list[KubeObject]:
        return list(self.objs)

    def get(self, key: str) -> KubeObject | None:
        for o in self.objs:
            if o.key == key:
                return o
        return None


class FakeFactory:
    def __init__(self, **kinds: list[dict[str, Any]]) -> None:
        self.informers = {k: FakeInformer([KubeObject(raw) for raw in v]) for k, v in kinds.items()}


def service(selector: dict[str, str] | None, ns: str = "default", name: str = "svc") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def replicaset(name: str, selector: dict[str, Any] | None, ns: str = "default") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": selector}}


def test_default_constraints_and_a_service() -> None:
    defaults = [{"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": HARD},
                {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": SOFT},
                {"maxSkew": 5, "topologyKey": "rack", "whenUnsatisfiable": HARD}]
    r = runner([], default_constraints=defaults, informers=FakeFactory(Service=[service({"foo": "bar"})]))
    state, _, st = r.pre_filter(incoming("foo=bar", "baz=kar"))
    assert st is None
    s = state.read(PRE_FILTER_STATE_KEY)
    assert [(c.max_skew, c.topology_key) for c in s.constraints] == [(3, "node"), (5, "rack")]
    for c in s.constraints:
        assert c.selector.matches(pod("", "foo=bar")) and not c.selector.matches(pod("", "baz=kar"))
    assert [s.domain_counts(i) for i in range(2)] == [{}, {}]


def test_default_constraints_and_a_service_that_does_not_match() -> None:
    r = runner([], default_constraints=[{"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": HARD}],
               informers=FakeFactory(Service=[service({"baz": "kep"})]))
    state, _, _ = r.pre_filter(incoming("foo=bar"))
    assert "PodTopologySpread" in state.skip_filter_plugins


def test_default_constraints_ignored_when_the_pod_has_constraints() -> None:
    r = runner([], default_constraints=[{"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": HARD}],
               informers=FakeFactory(Service=[service({"foo": "bar"})]))
    p = incoming("foo=bar", "baz=tar", constraints=[spread(1, "zone", HARD, ml(baz="tar")),
                                                    spread(2, "planet", SOFT, ml(fot="rok"))])
    state, _, _ = r.pre_filter(p)
    s = state.read(PRE_FILTER_STATE_KEY)
    assert [(c.max_skew, c.topology_key) for c in s.constraints] == [(1, "zone")]


def test_default_soft_constraints_skip_pre_filter() -> None:
    r = runner([], default_constraints=[{"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": SOFT}],
               informers=FakeFactory(Service=[service({"foo": "bar"})]))
    state, _, _ = r.pre_filter(incoming("foo=bar"))
    assert "PodTopologySpread" in state.skip_filter_plugins


def test_service_with_nil_selector_matches_nothing_and_empty_selector_adds_nothing() -> None:
    pl = plugin(runner([], default_constraints=[{"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": HARD}],
                       informers=FakeFactory(Service=[service(None, name="a"), service({}, name="b")])))
    assert pl.default_selector(incoming("foo")).empty


def test_default_selector_uses_replicaset_and_statefulset_listers() -> None:
    f = FakeFactory(Service=[service({"app": "web"})], ReplicaSet=[replicaset("rs1", FOO)],
                    StatefulSet=[{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                  "metadata": {"name": "ss1", "namespace": "default"},
                                  "spec": {"selector": ml(tier="db")}}])
    pl = plugin(runner([], default_constraints=[{"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": HARD}],
                       informers=f))
    sel = pl.default_selector(incoming("app=web", "foo", owner_kind="ReplicaSet", owner_name="rs1"))
    assert sel.matches(pod("", "app=web", "foo")) and not sel.matches(pod("", "app=web"))
    assert not sel.matches(pod("", "foo"))
    sel = pl.default_selector(incoming("tier=db", owner_kind="StatefulSet", owner_name="ss1"))
    assert sel.matches(pod("", "tier=db")) and not sel.matches(pod("", "tier=web"))
    # An owner the lister does not know: only the Service selector remains (upstream).
    sel = pl.default_selector(incoming("app=web", owner_kind="ReplicaSet", owner_name="rs2"))
    assert sel.matches(pod("", "app=web")) and not sel.matches(pod("", "foo"))
    assert pl.default_selector(incoming("x=y", owner_kind="ReplicaSet", owner_name="rs2")).empty


def test_default_selector_replication_controller_merges_its_selector_map() -> None:
    rc = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc1", "namespace": "default"},
          "spec": {"selector": {"app": "db"}}}
    pl = plugin(runner([], default_constraints=[{"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": HARD}],
                       informers=FakeFactory(ReplicationController=[rc])))
    raw = incoming("app=db").deepcopy_raw()
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ReplicationController", "name": "rc1",
                                           "uid": "u", "controller": True}]
    sel = pl.default_selector(Pod(raw))
    assert sel.matches(pod("", "app=db")) and not sel.matches(pod("", "app=web"))


def test_default_selector_without_listers_is_empty() -> None:
    # Upstream's DefaultSelector reads only listers: a controller whose lister is missing adds
    # nothing (as a failed Get), so a pod without selecting Services gets no default spreading.
    pl = plugin(runner([], defaulting="System"))
    assert pl.default_selector(incoming("app=web", owner_kind="ReplicaSet", owner_name="rs1")).empty
    assert pl.get_constraints(incoming("app=web", owner_kind="ReplicaSet", owner_name="rs1"), SOFT) == ()
    pl = plugin(runner([], defaulting="System", informers=FakeFactory(Service=[service({"app": "web"})])))
    sel = pl.default_selector(incoming("app=web", owner_kind="ReplicaSet", owner_name="rs1"))
    assert sel.matches(pod("", "app=web")) and not sel.matches(pod("", "app=db"))
    # Not a controller kind upstream's DefaultSelector knows: only the Services count.
    assert pl.default_selector(incoming("app=db", owner_kind="Deployment", owner_name="d")).empty


def test_default_selector_reads_services_of_the_pods_namespace_only() -> None:
    pl = plugin(runner([], defaulting="System", informers=FakeFactory(
        Service=[service({"app": "web"}, ns="other"), service({"tier": "front"}, name="front")])))
    sel = pl.default_selector(incoming("app=web", "tier=front"))
    assert sel.matches(pod("", "tier=front")) and not sel.matches(pod("", "app=web"))


# ---------------------------------------------------------------- AddPod / RemovePod

def _zone_pods() -> tuple[list[Node], list[Pod]]:
    nodes = [node("node-a", "zone=zone1", "node=node-a", "foo=bar"), node("node-b", "zone=zone2", "node=node-b", "foo")]
    return nodes, [pod("node-a", "foo", "zone=zone1"), pod("node-b", "foo", "zone=zone2")]


def _ab() -> list[Node]:
    return [node("node-a", "zone=zone1", "node=node-a"), node("node-b", "zone=zone1", "node=node-b")]


ZN = [spread(1, "zone", HARD, FOO), spread(1, "node", HARD, FOO)]


def _add_cases() -> list[Any]:
    ax = [node("node-a", "zone=zone1", "node=node-a"), node("node-x", "zone=zone2", "node=node-x")]
    abx = [*_ab(), node("node-x", "zone=zone2", "node=node-x")]
    tainted = [node("node-a", "zone=zone1", "node=node-a", taints=UNSCHED_TAINT), node("node-b", "zone=zone2", "node=node-b")]
    node_c = [spread(1, "node", HARD, FOO)]
    return [
        pytest.param(incoming("foo", constraints=node_c), _ab(), [], pod("node-a", "foo"), "node-a",
                     [{"node-a": 1, "node-b": 0}], [0], id="a-and-b-impact-min"),
        pytest.param(incoming("foo", constraints=node_c), _ab(), [pod("node-b", "foo")], pod("node-a", "foo"), "node-a",
                     [{"node-a": 1, "node-b": 1}], [1], id="only-a-impacts-min"),
        pytest.param(incoming("foo", constraints=node_c), _ab(), [pod("node-b", "foo")],
                     pod("node-a", "foo", ns="ns1"), "node-a", [{"node-a": 0, "node-b": 1}], [0],
                     id="other-namespace-ignored"),
        pytest.param(incoming("foo", constraints=node_c), _ab(), [pod("node-b", "foo")], pod("node-b", "foo"), "node-b",
                     [{"node-a": 0, "node-b": 2}], [0], id="non-critical-node"),
        pytest.param(incoming("foo", constraints=ZN), ax, [], pod("node-a", "foo"), "node-a",
                     [{"zone1": 1, "zone2": 0}, {"node-a": 1, "node-x": 0}], [0, 0], id="zone-and-node-empty"),
        pytest.param(incoming("foo", constraints=ZN), ax, [pod("node-x", "foo")], pod("node-a", "foo"), "node-a",
                     [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-x": 1}], [1, 1], id="zone-and-node-one-each"),
        pytest.param(incoming("foo", constraints=ZN), abx,
                     [pod("node-b", "foo"), pod("node-b", "foo"), pod("node-x", "foo")], pod("node-a", "foo"), "node-a",
                     [{"zone1": 3, "zone2": 1}, {"node-a": 1, "node-b": 2, "node-x": 1}], [1, 1],
                     id="node-min-on-a-zone-min-on-x"),
        pytest.param(incoming("foo", "bar", constraints=[spread(1, "zone", HARD, FOO), spread(1, "node", HARD, BAR)]),
                     abx, [pod("node-b", "foo", "bar"), pod("node-x", "foo", "bar"), pod("node-x", "bar")],
                     pod("node-a", "foo"), "node-a",
                     [{"zone1": 2, "zone2": 1}, {"node-a": 0, "node-b": 1, "node-x": 2}], [1, 0],
                     id="different-selectors-zone-only"),
        pytest.param(incoming("foo", "bar", constraints=[spread(1, "zone", HARD, FOO), spread(1, "node", HARD, BAR)]),
                     abx, [pod("node-b", "bar"), pod("node-x", "foo", "bar"), pod("node-x", "bar")],
                     pod("node-a", "foo", "bar"), "node-a",
                     [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-b": 1, "node-x": 2}], [1, 1],
                     id="different-selectors-zone-and-node"),
        pytest.param(incoming("foo", affinity=node_affinity_not_in("foo", ["bar"]),
                              constraints=[spread(1, "zone", HARD, FOO)]),
                     _zone_pods()[0], [pod("node-a", "foo", "zone=zone1"), pod("node-b", "foo", "zone=zone2")],
                     pod("node-a", "foo", "zone=zone1"), "node-a", [{"zone2": 1}], [1], id="affinity-unmatched-node"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, FOO)]), _zone_pods()[0],
                     [pod("node-a", "foo", "zone=zone1"), pod("node-b", "foo", "zone=zone2")],
                     pod("node-b", "foo", "zone=zone2"), "node-b", [{"zone1": 1, "zone2": 2}], [1],
                     id="affinity-matched-node"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, FOO)]), _zone_pods()[0],
                     [pod("node-a", "foo", "zone=zone1"), pod("node-b", "foo", "zone=zone2")],
                     pod("node-b", "zone=zone2"), "node-b", [{"zone1": 1, "zone2": 1}], [1],
                     id="selector-unmatched-pod"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, FOO)]), tainted,
                     [pod("node-a", "foo"), pod("node-b", "foo")], pod("node-b", "foo"), "node-b",
                     [{"zone1": 1, "zone2": 2}], [1], id="taint-ignored-by-default"),
        pytest.param(incoming("foo", tolerations=TOLERATE_UNSCHED, constraints=[spread(1, "zone", HARD, FOO)]), tainted,
                     [pod("node-a", "foo"), pod("node-b", "foo")], pod("node-b", "foo"), "node-b",
                     [{"zone1": 1, "zone2": 2}], [1], id="taint-tolerated"),
    ]


@pytest.mark.parametrize(("preemptor", "nodes", "existing", "added", "on", "want", "want_min"), _add_cases())
def test_pre_filter_state_add_pod(preemptor: Pod, nodes: list[Node], existing: list[Pod], added: Pod, on: str,
                                  want: list[dict[str, int]], want_min: list[int]) -> None:
    r = runner(nodes, existing)
    state, _, st = r.pre_filter(preemptor)
    assert st is None
    assert plugin(r).add_pod(state, preemptor, PodInfo(added), r.snapshot.get(on)) is None  # type: ignore[arg-type]
    s = state.read(PRE_FILTER_STATE_KEY)
    assert [s.domain_counts(i) for i in range(len(s.constraints))] == want
    assert [s.min_match(i) for i in range(len(s.constraints))] == want_min


def _remove_cases() -> list[Any]:
    abx = [*_ab(), node("node-x", "zone=zone2", "node=node-x")]
    abxy = [*abx, node("node-y", "zone=zone2", "node=node-y")]
    zone = [spread(1, "zone", HARD, FOO)]
    p1 = [pod("node-a", "foo"), pod("node-b", "foo"), pod("node-x", "foo")]
    p2 = [pod("node-a", "foo"), pod("node-b", "foo"), pod("node-x", "foo"), pod("node-y", "foo")]
    p3 = [pod("node-a", "bar"), pod("node-a", "foo"), pod("node-b", "foo"), pod("node-x", "foo"), pod("node-y", "foo")]
    p4 = [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-b", "foo"), pod("node-x", "foo"), pod("node-x", "foo")]
    zp = _zone_pods()[0]
    return [
        pytest.param(incoming("foo", constraints=zone), abx, p1, p1[0], "node-a", [{"zone1": 1, "zone2": 1}], [1],
                     id="min-unchanged"),
        pytest.param(incoming("foo", constraints=zone), abxy, p2, p2[0], "node-a", [{"zone1": 1, "zone2": 2}], [1],
                     id="min-changed"),
        pytest.param(incoming("foo", constraints=zone), abxy, p3, p3[0], "node-a", [{"zone1": 2, "zone2": 2}], [2],
                     id="irrelevant-pod"),
        pytest.param(incoming("foo", constraints=zone), abxy, p2, pod("node-a", "bar"), "node-a",
                     [{"zone1": 2, "zone2": 2}], [2], id="non-existing-pod"),
        pytest.param(incoming("foo", constraints=ZN), abx, p4, p4[3], "node-x",
                     [{"zone1": 3, "zone2": 1}, {"node-a": 2, "node-b": 1, "node-x": 1}], [1, 1], id="two-constraints"),
        pytest.param(incoming("foo", affinity=node_affinity_not_in("foo", ["bar"]), constraints=zone), zp,
                     [pod("node-a", "foo", "zone=zone1"), pod("node-b", "foo", "zone=zone2")],
                     pod("node-a", "foo", "zone=zone1"), "node-a", [{"zone2": 1}], [1], id="affinity-unmatched-node"),
        pytest.param(incoming("foo", constraints=zone), zp,
                     [pod("node-a", "foo", "zone=zone1"), pod("node-b", "foo", "zone=zone2")],
                     pod("node-b", "foo", "zone=zone2"), "node-b", [{"zone1": 1, "zone2": 0}], [0],
                     id="affinity-matched-node"),
    ]


@pytest.mark.parametrize(("preemptor", "nodes", "existing", "removed", "on", "want", "want_min"), _remove_cases())
def test_pre_filter_state_remove_pod(preemptor: Pod, nodes: list[Node], existing: list[Pod], removed: Pod, on: str,
                                     want: list[dict[str, int]], want_min: list[int]) -> None:
    r = runner(nodes, existing)
    state, _, st = r.pre_filter(preemptor)
    assert st is None
    assert plugin(r).remove_pod(state, preemptor, PodInfo(removed), r.snapshot.get(on)) is None  # type: ignore[arg-type]
    s = state.read(PRE_FILTER_STATE_KEY)
    assert [s.domain_counts(i) for i in range(len(s.constraints))] == want
    assert [s.min_match(i) for i in range(len(s.constraints))] == want_min


def test_cloned_state_is_isolated_both_ways() -> None:
    p = incoming("foo", constraints=[spread(1, "node", HARD, FOO)])
    r = runner(_ab(), [pod("node-b", "foo")])
    pl = plugin(r)
    state, _, _ = r.pre_filter(p)
    clone = state.clone()
    pl.add_pod(clone, p, PodInfo(pod("node-a", "foo")), r.snapshot.get("node-a"))  # type: ignore[arg-type]
    assert state.read(PRE_FILTER_STATE_KEY).domain_counts(0) == {"node-a": 0, "node-b": 1}
    assert clone.read(PRE_FILTER_STATE_KEY).domain_counts(0) == {"node-a": 1, "node-b": 1}
    pl.remove_pod(state, p, PodInfo(pod("node-b", "foo")), r.snapshot.get("node-b"))  # type: ignore[arg-type]
    assert state.read(PRE_FILTER_STATE_KEY).domain_counts(0) == {"node-a": 0, "node-b": 0}
    assert clone.read(PRE_FILTER_STATE_KEY).domain_counts(0) == {"node-a": 1, "node-b": 1}
    assert clone.read(PRE_FILTER_STATE_KEY).min_match(0) == 1


def test_add_pod_changes_the_filter_verdict() -> None:
    p = incoming("foo", constraints=[spread(1, "node", HARD, FOO)])
    r = runner(_ab(), [pod("node-b", "foo")])
    pl = plugin(r)
    state, _, _ = r.pre_filter(p)
    a, b = r.snapshot.get("node-a"), r.snapshot.get("node-b")
    assert pl.filter(state, p, a) is None  # type: ignore[arg-type]
    assert pl.filter(state, p, b) is not None  # type: ignore[arg-type]
    pl.add_pod(state, p, PodInfo(pod("node-a", "foo")), a)  # type: ignore[arg-type]
    assert pl.filter(state, p, a) is None and pl.filter(state, p, b) is None  # type: ignore[arg-type]
    pl.add_pod(state, p, PodInfo(pod("node-a", "foo")), a)  # type: ignore[arg-type]
    assert pl.filter(state, p, a).code == U  # type: ignore[arg-type,union-attr]
    assert pl.filter(state, p, b) is None  # type: ignore[arg-type]
    rows = r.snapshot.order
    assert pl.filter_nodes(state, p, r.snapshot, rows).tolist() == [
        pl.filter(state, p, r.snapshot.infos[int(x)]) is None for x in rows]  # type: ignore[arg-type]


def test_min_stays_exact_when_several_domains_tie() -> None:
    # Three domains at 0: adding to two of them leaves the third as the minimum.
    nodes = [node(f"n{i}", f"node=n{i}") for i in range(3)]
    p = incoming("foo", constraints=[spread(1, "node", HARD, FOO)])
    r = runner(nodes)
    pl = plugin(r)
    state, _, _ = r.pre_filter(p)
    for n in ("n0", "n1"):
        pl.add_pod(state, p, PodInfo(pod(n, "foo")), r.snapshot.get(n))  # type: ignore[arg-type]
    assert state.read(PRE_FILTER_STATE_KEY).min_match(0) == 0


class FakeNominator:
    def __init__(self, pods: dict[str, list[Pod]]) -> None:
        self.pods = pods

    def pods_for_node(self, name: str) -> list[PodInfo]:
        return [PodInfo(p) for p in self.pods.get(name, [])]


def test_nominated_pods_are_counted_through_add_pod() -> None:
    p = incoming("foo", constraints=[spread(1, "node", HARD, FOO)], priority=0)
    nominated = pod("", "foo", priority=10)
    nodes = [node("node-a", "node=node-a"), node("node-b", "node=node-b")]
    r = PluginRunner(["PodTopologySpread"], nodes, [pod("node-b", "foo")],
                     args={"PodTopologySpread": {"defaultingType": "List"}},
                     nominator=FakeNominator({"node-a": [nominated]}))
    state, _, _ = r.pre_filter(p)
    st = r.fw.run_filter_plugins_with_nominated_pods(state, p, r.snapshot.get("node-a"))  # type: ignore[arg-type]
    assert st is None  # 1 (nominated) + 1 - 1 = 1 <= maxSkew
    r.fw.nominator = FakeNominator({"node-a": [nominated, pod("", "foo", priority=10)]})
    st = r.fw.run_filter_plugins_with_nominated_pods(state, p, r.snapshot.get("node-a"))  # type: ignore[arg-type]
    assert st is not None and st.code == U and st.reasons == (ERR_REASON_CONSTRAINTS_NOT_MATCH,)
    # The nominated pods were added to a clone: the state itself is untouched.
    assert state.read(PRE_FILTER_STATE_KEY).domain_counts(0) == {"node-a": 0, "node-b": 1}


# ---------------------------------------------------------------- Filter (TestSingleConstraint)

def _single_cases() -> list[Any]:
    p6 = [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-b", "foo"), pod("node-y", "foo"), pod("node-y", "foo"),
          pod("node-y", "foo")]
    n3 = [node("node-a", "node=node-a"), node("node-b", "node=node-b"), node("node-c", "node=node-c")]
    p5 = [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-b", "foo"), pod("node-b", "foo"), pod("node-c", "foo")]
    p3 = [pod("node-a", "foo"), pod("node-b", "foo"), pod("node-y", "foo")]
    pol = [node("node-a", "node=node-a", "foo"), node("node-b", "node=node-b", "foo"), node("node-x", "node=node-x", "foo"),
           node("node-y", "node=node-y")]
    pol_t = [*pol[:3], node("node-y", "node=node-y", taints=UNSCHED_TAINT)]
    zone_f = [spread(1, "zone", HARD, FOO)]
    node_f = [spread(1, "node", HARD, FOO)]
    return [
        pytest.param(incoming("foo", constraints=zone_f), N4(), [], [OK, OK, OK, OK], id="no-existing-pods"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, BAR)]), N4(), [], [OK, OK, OK, OK],
                     id="no-pods-pod-does-not-match-itself"),
        pytest.param(incoming("foo", constraints=zone_f), N4(),
                     [pod("node-a", "foo", ns="ns1"), pod("node-a", "foo", ns="ns2"), pod("node-x", "foo"),
                      pod("node-y", "foo")], [OK, OK, U, U], id="other-namespaces-not-counted"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, NIL)]), N4(),
                     [pod("node-x", "foo"), pod("node-y", "foo")], [OK, OK, OK, OK], id="null-selector"),
        pytest.param(incoming("foo", constraints=zone_f), N4(), p6, [OK, OK, OK, OK], id="zones-3-3"),
        pytest.param(incoming("foo", constraints=zone_f),
                     [A(), node("node-b", "zon=zone1", "node=node-b"), Xn(), Y()],
                     [pod("node-a", "foo"), pod("node-b", "foo"), pod("node-x", "foo"), pod("node-y", "foo")],
                     [OK, X, U, U], id="node-b-misses-zone-label"),
        pytest.param(incoming("foo", constraints=[spread(1, "rack", HARD, FOO)]), [A(), Xn()], [], [X, X],
                     id="no-node-has-rack"),
        pytest.param(incoming("foo", constraints=node_f), N4(), p6, [U, U, OK, U], id="nodes-2-1-0-3"),
        pytest.param(incoming("foo", constraints=[spread(2, "node", HARD, FOO)]), N4(), p6, [U, OK, OK, U],
                     id="nodes-2-1-0-3-max-skew-2"),
        pytest.param(incoming("bar", constraints=node_f), N4(), p6, [U, OK, OK, U], id="pod-does-not-match-itself"),
        pytest.param(incoming("foo", affinity=node_affinity_in("node", ["node-a", "node-y"]), constraints=node_f),
                     N4(), p6, [OK, OK, OK, U], id="node-affinity-a-y"),
        pytest.param(incoming("foo", constraints=node_f), [node("node-a", "node=node-a"), node("node-b", "node=node-b")],
                     [pod("node-a", "foo", terminating=True), pod("node-b", "foo")], [OK, U],
                     id="terminating-pods-excluded"),
        pytest.param(incoming("foo", affinity=node_affinity_not_in("node", ["node-b"]), constraints=zone_f), N4(),
                     [pod("node-b", "foo"), pod("node-b", "foo"), pod("node-y", "foo")], [OK, OK, U, U],
                     id="node-affinity-not-in-b"),
        pytest.param(incoming("foo", constraints=[spread(2, "node", HARD, FOO, min_domains=4)]), n3, p5, [U, U, OK],
                     id="min-domains-4-of-3"),
        pytest.param(incoming("foo", constraints=[spread(2, "node", HARD, FOO, min_domains=2)]), n3, p5, [OK, OK, OK],
                     id="min-domains-2-of-3"),
        pytest.param(incoming("foo", constraints=[spread(2, "zone", HARD, FOO, min_domains=3)]), N4(), p3,
                     [U, U, OK, OK], id="zone-min-domains-3-of-2"),
        pytest.param(incoming("foo", constraints=[spread(2, "zone", HARD, FOO, min_domains=1)]), N4(), p3,
                     [OK, OK, OK, OK], id="zone-min-domains-1-of-2"),
        pytest.param(incoming("foo", node_selector={"foo": ""}, constraints=node_f), pol, p3, [U, U, OK, OK],
                     id="affinity-policy-honor-node-selector"),
        pytest.param(incoming("foo", node_selector={"foo": ""},
                              constraints=[spread(1, "node", HARD, FOO, affinity_policy="Ignore")]), pol, p3,
                     [U, U, OK, U], id="affinity-policy-ignore-node-selector"),
        pytest.param(incoming("foo", affinity=node_affinity_in("foo", [""]), constraints=node_f), pol, p3,
                     [U, U, OK, OK], id="affinity-policy-honor-node-affinity"),
        pytest.param(incoming("foo", affinity=node_affinity_in("foo", [""]),
                              constraints=[spread(1, "node", HARD, FOO, affinity_policy="Ignore")]), pol, p3,
                     [U, U, OK, U], id="affinity-policy-ignore-node-affinity"),
        pytest.param(incoming("foo", constraints=[spread(1, "node", HARD, FOO, taints_policy="Honor")]), pol_t, p3,
                     [U, U, OK, OK], id="taints-policy-honor"),
        pytest.param(incoming("foo", constraints=node_f), pol_t, p3, [U, U, OK, U], id="taints-policy-ignore"),
    ]


def _codes(result: dict[str, Status | None]) -> list[Code]:
    return [Code.SUCCESS if s is None else s.code for s in result.values()]


@pytest.mark.parametrize(("p", "nodes", "pods", "want"), _single_cases())
def test_single_constraint(p: Pod, nodes: list[Node], pods: list[Pod], want: list[Code]) -> None:
    got = runner(nodes, pods).filter(p)
    assert list(got) == [n.name for n in nodes]
    assert _codes(got) == want
    for s in got.values():
        if s is not None:
            want_reason = ERR_REASON_NODE_LABEL_NOT_MATCH if s.code == X else ERR_REASON_CONSTRAINTS_NOT_MATCH
            assert s.reasons == (want_reason,) and s.plugin == "PodTopologySpread"


# ---------------------------------------------------------------- Filter (TestMultipleConstraints)

def _multi_cases() -> list[Any]:
    zf_nb = [spread(1, "zone", HARD, FOO), spread(1, "node", HARD, BAR)]
    p6 = [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-b", "foo"), pod("node-y", "foo"), pod("node-y", "foo"),
          pod("node-y", "foo")]
    pol = [node("node-a", "zone=zone1", "node=node-a", "foo"), node("node-b", "zone=zone1", "node=node-b", "foo"),
           node("node-x", "zone=zone2", "node=node-x", "foo"), node("node-y", "zone=zone2", "node=node-y")]
    pol_t = [*pol[:3], node("node-y", "zone=zone2", "node=node-y", taints=UNSCHED_TAINT)]
    mix = [node("node-a", "zone=zone1", "node=node-a", "foo"), node("node-b", "zone=zone1", "node=node-b"),
           node("node-x", "zone=zone2", "node=node-x", "foo"),
           node("node-y", "zone=zone2", "node=node-y", "foo", taints=UNSCHED_TAINT)]
    p3 = [pod("node-a", "foo"), pod("node-b", "foo"), pod("node-y", "foo")]
    bar_foo = [spread(1, "zone", HARD, BAR), spread(1, "zone", HARD, FOO)]
    p_bf = [pod("node-a", "foo", "bar"), pod("node-a", "foo"), pod("node-b", "foo", "bar"), pod("node-y", "foo"),
            pod("node-y", "foo", "bar"), pod("node-y", "foo")]
    return [
        pytest.param(incoming("foo", constraints=ZN), N4(), p6, [U, U, OK, U], id="zone-3-3-node-2-1-0-3"),
        pytest.param(incoming("foo", constraints=ZN), N4(), [*p6, pod("node-y", "foo")], [U, U, U, U],
                     id="zone-3-4-node-2-1-0-4"),
        pytest.param(incoming("foo", "bar", constraints=zf_nb), N4(), [pod("node-a", "foo"), pod("node-y", "bar")],
                     [U, U, OK, U], id="selectors-1-0-and-1-0-0-1"),
        pytest.param(incoming("foo", "bar", constraints=zf_nb), N4(),
                     [pod("node-a", "foo"), pod("node-x", "bar"), pod("node-y", "bar")], [U, U, U, U],
                     id="selectors-1-0-and-0-0-1-1"),
        pytest.param(incoming("foo", "bar", constraints=zf_nb), N4(),
                     [pod("node-a", "foo"), pod("node-a", "foo", "bar"), pod("node-y", "foo"),
                      pod("node-y", "foo", "bar"), pod("node-y", "foo")], [U, OK, U, U],
                     id="selectors-2-3-and-1-0-0-1"),
        pytest.param(incoming("bar", constraints=zf_nb), N4(),
                     [pod("node-a", "foo"), pod("node-x", "bar"), pod("node-y", "bar")], [OK, OK, U, U],
                     id="no-self-match-on-zone"),
        pytest.param(incoming("foo", constraints=ZN), [A(), B(), node("node-x", "zone=zone2"), Y()],
                     [pod("node-a", "foo"), pod("node-y", "foo")], [U, OK, X, U], id="node-x-misses-node-label"),
        pytest.param(incoming("foo", node_selector={"foo": ""},
                              constraints=[spread(1, "zone", HARD, FOO),
                                           spread(1, "node", HARD, FOO, affinity_policy="Ignore")]), pol, p3,
                     [U, U, OK, U], id="zone-honor-ignore-node-ignore-ignore"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", HARD, FOO, taints_policy="Honor"),
                                                  spread(1, "node", HARD, FOO)]), pol_t, p3, [U, U, OK, U],
                     id="zone-honor-honor-node-honor-ignore"),
        pytest.param(incoming("foo", node_selector={"foo": ""}, constraints=ZN), mix, p3, [U, OK, OK, U],
                     id="zone-honor-ignore-node-honor-ignore"),
        pytest.param(incoming("foo", node_selector={"foo": ""},
                              constraints=[spread(1, "zone", HARD, FOO, taints_policy="Honor"),
                                           spread(1, "node", HARD, FOO, affinity_policy="Ignore")]), mix, p3,
                     [U, U, OK, U], id="zone-honor-honor-node-ignore-ignore"),
        pytest.param(incoming("foo", "bar", constraints=bar_foo), N4(), p_bf, [U, U, OK, OK], id="two-zone-3-3-2-1"),
        pytest.param(incoming("foo", "bar", constraints=bar_foo), N4(), [*p_bf, pod("node-y", "foo")], [U, U, U, U],
                     id="two-zone-3-4-2-1"),
    ]


@pytest.mark.parametrize(("p", "nodes", "pods", "want"), _multi_cases())
def test_multiple_constraints(p: Pod, nodes: list[Node], pods: list[Pod], want: list[Code]) -> None:
    assert _codes(runner(nodes, pods).filter(p)) == want


def test_first_failing_constraint_decides_the_reason() -> None:
    # Constraint 0 fails on skew before constraint 1 finds the missing label.
    # node-a has no rack label; zone1's count comes from node-b (which has every key).
    nodes = [A(), node("node-b", "zone=zone1", "rack=r1"), node("node-x", "zone=zone2", "rack=r1")]
    pods = [pod("node-b", "foo"), pod("node-b", "foo")]
    p = incoming("foo", constraints=[spread(1, "zone", HARD, FOO), spread(1, "rack", HARD, FOO)])
    got = runner(nodes, pods).filter(p)
    assert got["node-a"] is not None and got["node-a"].reasons == (ERR_REASON_CONSTRAINTS_NOT_MATCH,)
    assert got["node-a"].code == U
    p = incoming("foo", constraints=[spread(1, "rack", HARD, FOO), spread(1, "zone", HARD, FOO)])
    got = runner(nodes, pods).filter(p)
    assert got["node-a"] is not None and got["node-a"].reasons == (ERR_REASON_NODE_LABEL_NOT_MATCH,)
    assert got["node-a"].code == X


def test_empty_selector_counts_nothing_but_the_pod_matches_itself() -> None:
    # An empty labelSelector matches every pod, yet upstream's countPodsMatchSelector counts 0:
    # skew = 0 + 1 - 0 on every node, so maxSkew 1 admits all, whatever the spread.
    p = incoming("foo", constraints=[spread(1, "node", HARD, EMPTY)])
    r = runner([node("node-a", "node=node-a"), node("node-b", "node=node-b")],
               [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-a", "foo")])
    assert _codes(r.filter(p)) == [OK, OK]
    counts, _, _ = prefilter_counts(r, p)
    assert counts == [{"node-a": 0, "node-b": 0}]
    # ... but AddPod does count a pod that matches it (upstream uses Matches there, not Empty()).
    state, _, _ = r.pre_filter(p)
    plugin(r).add_pod(state, p, PodInfo(pod("node-a", "x")), r.snapshot.get("node-a"))  # type: ignore[arg-type]
    assert state.read(PRE_FILTER_STATE_KEY).domain_counts(0) == {"node-a": 1, "node-b": 0}


def test_counts_follow_cache_changes_incrementally() -> None:
    p = incoming("foo", constraints=[spread(1, "node", HARD, FOO)])
    nodes = [node("node-a", "node=node-a"), node("node-b", "node=node-b")]
    first = pod("node-a", "foo")
    r = runner(nodes, [first])
    assert _codes(r.filter(p)) == [U, OK]
    r.cache.add_pod(pod("node-b", "foo"))
    r.refresh()
    assert _codes(r.filter(p)) == [OK, OK]
    # A label change that keeps the node's pod count: the row is recounted by generation.
    relabeled = Pod({**first.deepcopy_raw(), "metadata": {**first.deepcopy_raw()["metadata"], "labels": {}}})
    r.cache.update_pod(first, relabeled)
    r.refresh()
    assert _codes(r.filter(p)) == [OK, U]
    counts, mins, _ = prefilter_counts(r, p)
    assert counts == [{"node-a": 0, "node-b": 1}] and mins == [0]
    r.cache.remove_node(nodes[1])
    r.refresh()
    counts, _, _ = prefilter_counts(r, p)
    assert counts == [{"node-a": 0}]


# ---------------------------------------------------------------- PreScore state

def _prescore(r: PluginRunner, p: Pod, candidates: list[str] | None = None) -> Any:
    state, _, st = r.pre_filter(p)
    assert st is None
    names = candidates if candidates is not None else r.snapshot.all_nodes().names
    rows = np.asarray([r.snapshot.row_of[n] for n in names], dtype=np.int64)
    st = r.fw.run_pre_score(state, p, r.snapshot.node_list(rows))
    assert st is None
    if "PodTopologySpread" in state.skip_score_plugins:
        return None
    return state.read(PRE_SCORE_STATE_KEY)


def _ps_summary(s: Any) -> tuple[list[tuple[int, str]], list[dict[str, int]], list[float], set[str]]:
    return ([(c.max_skew, c.topology_key) for c in s.constraints], [s.domain_counts(i) for i in range(len(s.constraints))],
            s.weights, s.ignored_names)


def test_pre_score_skips_without_soft_constraints() -> None:
    r = runner([node("node-a"), node("node-b")])
    assert _prescore(r, incoming()) is None
    r = runner([node("node-a", "planet=mars")],
               default_constraints=[{"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SOFT}],
               informers=FakeFactory(ReplicaSet=[replicaset("rs1", {"matchExpressions": [{"key": "tar",
                                                                                            "operator": "Exists"}]})]))
    assert _prescore(r, incoming("foo=bar", "baz=sup", owner_kind="ReplicaSet", owner_name="rs2")) is None


def test_pre_score_skips_without_nodes() -> None:
    assert _prescore(runner([]), incoming("foo", constraints=[spread(1, "zone", SOFT, FOO)])) is None


W = topology_normalizing_weight


def test_pre_score_state_normal_case() -> None:
    p = incoming("foo", constraints=[spread(1, "zone", SOFT, FOO), spread(1, HOST, SOFT, FOO)])
    s = _prescore(runner([A(), B(), Xn()]), p)
    assert _ps_summary(s) == ([(1, "zone"), (1, HOST)], [{"zone1": 0, "zone2": 0}, {}], [W(2), W(3)], set())


def test_pre_score_state_null_selector() -> None:
    s = _prescore(runner([A(), B(), Xn()]), incoming("foo", constraints=[spread(1, "zone", SOFT, NIL)]))
    assert _ps_summary(s) == ([(1, "zone")], [{"zone1": 0, "zone2": 0}], [W(2)], set())


def test_pre_score_state_node_without_zone_is_ignored() -> None:
    p = incoming("foo", constraints=[spread(1, "zone", SOFT, FOO), spread(1, HOST, SOFT, BAR)])
    s = _prescore(runner([A(), B(), node("node-x")]), p)
    assert _ps_summary(s) == ([(1, "zone"), (1, HOST)], [{"zone1": 0}, {}], [W(1), W(2)], {"node-x"})


def test_pre_score_state_system_defaults_and_a_replicaset() -> None:
    nodes = [node("node-a", f"{ZONE}=mars"), node("node-b", f"{ZONE}=mars"), node("node-c"), node("node-d")]
    r = runner(nodes, defaulting="System", informers=FakeFactory(ReplicaSet=[replicaset("rs1", FOO)]))
    s = _prescore(r, incoming("foo=tar", "baz=sup", owner_kind="ReplicaSet", owner_name="rs1"))
    # Nodes without a zone are not ignored under system defaulting: they form the zone "".
    assert _ps_summary(s) == ([(3, HOST), (5, ZONE)], [{}, {"mars": 0, "": 0}], [W(4), W(2)], set())


def test_pre_score_state_list_defaults_and_a_replicaset() -> None:
    defaults = [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": SOFT},
                {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": HARD},
                {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SOFT}]
    r = runner([node("node-a", "rack=rack1", "planet=mars")], default_constraints=defaults,
               informers=FakeFactory(ReplicaSet=[replicaset("rs1", FOO)]))
    s = _prescore(r, incoming("foo=tar", "baz=sup", owner_kind="ReplicaSet", owner_name="rs1"))
    assert _ps_summary(s) == ([(1, HOST), (2, "planet")], [{}, {"mars": 0}], [W(1), W(1)], set())


def test_pre_score_state_pod_constraints_win_over_defaults() -> None:
    r = runner([node("node-a", "planet=mars", "galaxy=andromeda")],
               default_constraints=[{"maxSkew": 2, "topologyKey": "galaxy", "whenUnsatisfiable": SOFT}],
               informers=FakeFactory(ReplicaSet=[replicaset("rs1", FOO)]))
    p = incoming("foo=bar", "baz=sup", owner_kind="ReplicaSet", owner_name="rs1",
                 constraints=[spread(1, "zone", HARD, BAR), spread(2, "planet", SOFT, ml(baz="sup"))])
    s = _prescore(r, p)
    assert _ps_summary(s) == ([(2, "planet")], [{"mars": 0}], [W(1)], set())


@pytest.mark.parametrize(("kw", "constraint", "tainted"), [
    pytest.param({"node_selector": {"foo": ""}}, spread(1, "zone", SOFT, BAR), False, id="affinity-honor"),
    pytest.param({"node_selector": {"foo": ""}}, spread(1, "zone", SOFT, BAR, affinity_policy="Ignore"), False,
                 id="affinity-ignore"),
    pytest.param({"affinity": node_affinity_in("foo", [""])}, spread(1, "zone", SOFT, BAR), False,
                 id="node-affinity-honor"),
    pytest.param({"affinity": node_affinity_in("foo", [""])}, spread(1, "zone", SOFT, BAR, affinity_policy="Ignore"),
                 False, id="node-affinity-ignore"),
    pytest.param({}, spread(1, "zone", SOFT, BAR, taints_policy="Honor"), True, id="taints-honor"),
    pytest.param({}, spread(1, "zone", SOFT, BAR), True, id="taints-ignore"),
])
def test_pre_score_state_domains_come_from_candidates(kw: dict[str, Any], constraint: dict[str, Any],
                                                      tainted: bool) -> None:
    nodes = [node("node-a", "zone=zone1", "foo"), node("node-b", "zone=zone1", "foo"),
             node("node-x", "zone=zone2", taints=UNSCHED_TAINT if tainted else None)]
    s = _prescore(runner(nodes), incoming("foo", constraints=[constraint], **kw))
    assert _ps_summary(s)[1:] == ([{"zone1": 0, "zone2": 0}], [W(2)], set())


# ---------------------------------------------------------------- Score (TestPodTopologySpreadScore)

def _hn(name: str, *labels: str) -> Node:
    return node(name, *labels)


def _score_cases() -> list[Any]:
    h_foo = [spread(1, HOST, SOFT, FOO)]
    abcd = [_hn("node-a"), _hn("node-b"), _hn("node-c"), _hn("node-d")]
    p2103 = [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-b", "foo"), pod("node-d", "foo"),
             pod("node-d", "foo"), pod("node-d", "foo")]
    p4321 = ([pod("node-a", "foo") for _ in range(4)] + [pod("node-b", "foo") for _ in range(3)]
             + [pod("node-c", "foo") for _ in range(2)] + [pod("node-d", "foo")])
    p4213 = ([pod("node-a", "foo") for _ in range(4)] + [pod("node-b", "foo") for _ in range(2)] + [pod("node-x", "foo")]
             + [pod("node-y", "foo") for _ in range(3)])
    zab = [node("node-a", "zone=zone1"), node("node-b", "zone=zone1"), node("node-x", "zone=zone2"),
           node("node-y", "zone=zone2")]
    zf_hb = [spread(1, "zone", SOFT, FOO), spread(1, HOST, SOFT, BAR)]
    p_sel = [pod("node-a", "foo"), pod("node-b", "foo", "bar"), pod("node-y", "foo"), pod("node-y", "bar")]
    nabc = [node("node-a", "node=node-a", "foo"), node("node-b", "node=node-b", "foo"), node("node-c", "node=node-c")]
    pabc = [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-b", "foo"), pod("node-c", "foo")]
    tabc = [node("node-a", "node=node-a"), node("node-b", "node=node-b"),
            node("node-c", "node=node-c", taints=UNSCHED_TAINT)]
    zd = [node("node-a", "zone=zone1"), node("node-b", "zone=zone1"), node("node-c", "zone=zone2"),
          node("node-d", "zone=zone2")]
    p_mlk = [pod("node-a", "foo"), pod("node-b", "foo", "bar"), pod("node-c", "foo"), pod("node-c", "bar")]
    return [
        pytest.param(incoming("foo", constraints=h_foo), [_hn("node-a"), _hn("node-b")], [], None,
                     {"node-a": 100, "node-b": 100}, id="no-existing-pods"),
        pytest.param(incoming("foo", constraints=h_foo), [_hn("node-a"), _hn("node-b")],
                     [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-b", "foo")], ["node-a"],
                     {"node-a": 100}, id="only-one-candidate"),
        pytest.param(incoming("foo", constraints=h_foo), [_hn("node-a"), _hn("node-b")],
                     [pod("node-a", "foo"), pod("node-b", "foo")], None, {"node-a": 100, "node-b": 100},
                     id="same-number-everywhere"),
        pytest.param(incoming("foo", constraints=h_foo), abcd, p2103, None,
                     {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0}, id="2-1-0-3"),
        pytest.param(incoming("foo", constraints=[spread(1, HOST, SOFT, NIL)]), abcd, p2103, None,
                     {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100}, id="null-selector"),
        pytest.param(incoming("foo", constraints=[spread(2, HOST, SOFT, FOO)]), abcd, p2103, None,
                     {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16}, id="2-1-0-3-max-skew-2"),
        pytest.param(incoming("foo", constraints=[spread(3, HOST, SOFT, FOO)]), abcd, p4321, None,
                     {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}, id="4-3-2-1-max-skew-3"),
        pytest.param(incoming("foo", constraints=h_foo),
                     [_hn("node-a"), _hn("node-b"), _hn("node-x"), _hn("node-y")], p4213, ["node-a", "node-b", "node-x"],
                     {"node-a": 33, "node-b": 83, "node-x": 100}, id="3-of-4-candidates"),
        pytest.param(incoming("foo", constraints=h_foo),
                     [_hn("node-a"), node("node-b", "n=node-b", hostname=False), _hn("node-x"), _hn("node-y")], p4213,
                     ["node-a", "node-b", "node-x"], {"node-a": 16, "node-b": 0, "node-x": 100},
                     id="candidate-without-topology-key"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", SOFT, FOO)]), zab, p4213,
                     ["node-a", "node-b", "node-x"], {"node-a": 75, "node-b": 75, "node-x": 100}, id="zone-3-of-4"),
        pytest.param(incoming("foo", constraints=[spread(1, "zone", SOFT, FOO), spread(1, HOST, SOFT, FOO)]), zab,
                     [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-b", "foo"), pod("node-x", "foo"),
                      pod("node-x", "foo")] + [pod("node-y", "foo") for _ in range(4)], ["node-a", "node-x"],
                     {"node-a": 100, "node-x": 63}, id="zone-and-host-2-of-4"),
        pytest.param(incoming("foo", "bar", constraints=[spread(1, "zone", SOFT, FOO), spread(1, "zone", SOFT, BAR)]),
                     [node("node-a", "zone=zone1", hostname=False), node("node-b", "zone=zone1", hostname=False),
                      node("node-x", "zone=zone2", hostname=False), node("node-y", "zone=zone2", hostname=False)],
                     [pod("node-a", "foo", "bar"), pod("node-a", "foo"), pod("node-b", "foo", "bar"),
                      pod("node-y", "foo"), pod("node-y", "foo", "bar"), pod("node-y", "foo")],
                     ["node-a", "node-x"], {"node-a": 85, "node-x": 100}, id="two-zone-constraints"),
        pytest.param(incoming("foo", "bar", constraints=zf_hb), zab, p_sel, None,
                     {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60}, id="zone-host-different-selectors"),
        pytest.param(incoming("foo", "bar", constraints=zf_hb), zab,
                     [pod("node-b", "bar"), pod("node-x", "foo"), pod("node-y", "foo", "bar")], None,
                     {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0}, id="zone-host-some-nodes-empty"),
        pytest.param(incoming("foo", "bar", constraints=zf_hb), zab, p_sel, ["node-a", "node-b", "node-x"],
                     {"node-a": 50, "node-b": 25, "node-x": 100}, id="zone-host-3-of-4"),
        pytest.param(incoming("foo", constraints=h_foo), [_hn("node-a"), _hn("node-b")],
                     [pod("node-a", "foo", ns="ns1"), pod("node-a", "foo"), pod("node-b", "foo"), pod("node-b", "foo")],
                     None, {"node-a": 100, "node-b": 33}, id="other-namespace-not-counted"),
        pytest.param(incoming("foo", constraints=h_foo), [_hn("node-a"), _hn("node-b")],
                     [pod("node-a", "foo", terminating=True), pod("node-b", "foo")], None,
                     {"node-a": 100, "node-b": 0}, id="terminating-excluded"),
        pytest.param(incoming("foo", constraints=[spread(2, "node", SOFT, FOO, min_domains=10)]),
                     [node("node-a", "node=node-a"), node("node-b", "node=node-b"), node("node-c", "node=node-c")],
                     [pod("node-a", "foo"), pod("node-a", "foo"), pod("node-b", "foo"), pod("node-b", "foo"),
                      pod("node-c", "foo")], None, {"node-a": 75, "node-b": 75, "node-c": 100},
                     id="min-domains-no-effect-when-soft"),
        pytest.param(incoming("foo", node_selector={"foo": ""}, constraints=[spread(1, "node", SOFT, FOO)]), nabc, pabc,
                     None, {"node-a": 0, "node-b": 33, "node-c": 100}, id="affinity-policy-honor"),
        pytest.param(incoming("foo", node_selector={"foo": ""},
                              constraints=[spread(1, "node", SOFT, FOO, affinity_policy="Ignore")]), nabc, pabc, None,
                     {"node-a": 66, "node-b": 100, "node-c": 100}, id="affinity-policy-ignore"),
        pytest.param(incoming("foo", affinity=node_affinity_in("foo", [""]), constraints=[spread(1, "node", SOFT, FOO)]),
                     nabc, pabc, None, {"node-a": 0, "node-b": 33, "node-c": 100}, id="node-affinity-honor"),
        pytest.param(incoming("foo", affinity=node_affinity_in("foo", [""]),
                              constraints=[spread(1, "node", SOFT, FOO, affinity_policy="Ignore")]), nabc, pabc, None,
                     {"node-a": 66, "node-b": 100, "node-c": 100}, id="node-affinity-ignore"),
        pytest.param(incoming("foo", constraints=[spread(1, "node", SOFT, FOO, taints_policy="Honor")]), tabc, pabc, None,
                     {"node-a": 0, "node-b": 33, "node-c": 100}, id="taints-policy-honor"),
        pytest.param(incoming("foo", constraints=[spread(1, "node", SOFT, FOO)]), tabc, pabc, None,
                     {"node-a": 66, "node-b": 100, "node-c": 100}, id="taints-policy-ignore"),
        pytest.param(incoming("foo", "bar", constraints=[spread(1, "zone", SOFT, EMPTY, match_label_keys=["foo"]),
                                                         spread(1, HOST, SOFT, EMPTY, match_label_keys=["bar"])]),
                     zd, p_mlk, None, {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
                     id="match-label-keys-empty-selector"),
        pytest.param(incoming("foo", "bar", "baz", constraints=[spread(1, "zone", SOFT, FOO),
                                                                spread(1, HOST, SOFT, BAR, match_label_keys=["baz"])]),
                     zd, [pod("node-a", "foo"), pod("node-b", "foo", "bar", "baz"), pod("node-c", "foo"),
                          pod("node-c", "bar"), pod("node-c", "bar", "baz")], None,
                     {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100}, id="match-label-keys-anded"),
        # Derived (not an upstream table row): upstream's "matchLabelKeys ignored when feature gate
        # disabled" case with the gate on, as in 1.36. No existing pod carries baz, so nothing
        # matches and every node ties.
        pytest.param(incoming("foo", "bar", "baz", constraints=[spread(1, "zone", SOFT, FOO, match_label_keys=["baz"]),
                                                                spread(1, HOST, SOFT, BAR, match_label_keys=["baz"])]),
                     zd, p_mlk, None, {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100},
                     id="match-label-keys-gate-on"),
    ]


@pytest.mark.parametrize(("p", "nodes", "pods", "candidates", "want"), _score_cases())
def test_score(p: Pod, nodes: list[Node], pods: list[Pod], candidates: list[str] | None, want: dict[str, int]) -> None:
    r = runner(nodes, pods, defaulting="System")
    assert r.score(p, nodes=candidates)["PodTopologySpread"] == want


def test_score_system_defaulting_with_a_service() -> None:
    p4321 = ([pod("node-a", "foo") for _ in range(4)] + [pod("node-b", "foo") for _ in range(3)]
             + [pod("node-c", "foo") for _ in range(2)] + [pod("node-d", "foo")])
    r = runner([_hn("node-a"), _hn("node-b"), _hn("node-c"), _hn("node-d")], p4321, defaulting="System",
               informers=FakeFactory(Service=[service({"foo": ""})]))
    # Same scores as one hostname constraint with maxSkew 3; nodes have no zone (not ignored).
    assert r.score(incoming("foo"))["PodTopologySpread"] == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_score_system_defaulting_by_the_controllers_selector() -> None:
    nodes = [node("node-a", f"{ZONE}=z1"), node("node-b", f"{ZONE}=z1"), node("node-c", f"{ZONE}=z2"), node("node-d")]
    owned = {"owner_kind": "ReplicaSet", "owner_name": "web"}
    pods = [pod("node-a", "app=web", **owned), pod("node-a", "app=web", **owned), pod("node-b", "app=web", **owned),
            pod("node-c", "app=other"), pod("node-d", "app=web", **owned),
            pod("node-c", "app=db", owner_kind="ReplicaSet", owner_name="db")]
    r = runner(nodes, pods, defaulting="System", informers=FakeFactory(ReplicaSet=[replicaset("web", ml(app="web"))]))
    s = _prescore(r, incoming("app=web", **owned))
    assert _ps_summary(s) == ([(3, HOST), (5, ZONE)], [{}, {"z1": 3, "z2": 0, "": 1}], [W(4), W(3)], set())
    w_h, w_z = W(4), W(3)
    raw = {"node-a": 2 * w_h + 2 + 3 * w_z + 4, "node-b": 1 * w_h + 2 + 3 * w_z + 4, "node-c": 0 * w_h + 2 + 0 + 4,
           "node-d": 1 * w_h + 2}  # node-d has no zone label: only the hostname constraint scores it
    ints = {k: math.floor(v + 0.5) for k, v in raw.items()}
    mx, mn = max(ints.values()), min(ints.values())
    assert r.score(incoming("app=web", **owned))["PodTopologySpread"] == {
        k: 100 * (mx + mn - v) // mx for k, v in ints.items()}
    # No constraints of its own and no controller: no default spreading at all.
    assert _prescore(r, incoming()) is None


def test_normalize_gives_zero_to_ignored_nodes_and_skips_them_for_min_max() -> None:
    p = incoming("foo", constraints=[spread(1, "zone", SOFT, FOO)])
    r = runner([A(), B(), node("node-q", "node=node-q")], [pod("node-a", "foo"), pod("node-q", "foo")])
    assert r.score(p)["PodTopologySpread"] == {"node-a": 100, "node-b": 100, "node-q": 0}


def test_score_rounds_half_away_from_zero() -> None:
    # Six zones seeded: weight ln(8) = 2.0794...; counts 0/1/2 with maxSkew 1 round to 0/2/4.
    from ksched.scheduler.plugins.podtopologyspread.scoring import _go_round, _round_half_away

    assert _go_round(2.5) == 3 and _go_round(0.5) == 1 and _go_round(1.4999999) == 1
    small = np.array([0.5, 1.5, 2.5, 2.4999, 0.0, 0.49999999999999994])
    assert _round_half_away(small).tolist() == [1, 2, 3, 2, 0, 0]
    big = np.tile(small, 10)  # the vectorized path (more than 32 values)
    assert _round_half_away(big).tolist() == [1, 2, 3, 2, 0, 0] * 10


# ---------------------------------------------------------------- queueing hints

def _plain() -> PodTopologySpread:
    return PodTopologySpread({"defaultingType": "List", "defaultConstraints": []}, None)


ZONE_FOO = [spread(1, "zone", HARD, FOO)]
ZONE_NODE = [spread(1, "zone", HARD, FOO), spread(1, "node", HARD, FOO)]
Q, S = QueueingHint.QUEUE, QueueingHint.QUEUE_SKIP


@pytest.mark.parametrize(("constraints", "old", "new", "want"), [
    pytest.param(ZONE_FOO, node("node-a", "zone=zone1"), node("node-a", "zone=zone2"), Q, id="topology-label-changed"),
    pytest.param(ZONE_FOO, node("node-a", "foo=bar1"), node("node-a", "foo=bar2"), S, id="unrelated-node-unrelated-label"),
    pytest.param(ZONE_NODE, node("node-a", "zone=zone1", "node=node1", "foo=bar"),
                 node("node-a", "zone=zone1", "node=node1"), S, id="matching-node-unrelated-label"),
    pytest.param(ZONE_FOO, None, node("node-a", "foo=bar"), S, id="add-unrelated-node"),
    pytest.param(ZONE_FOO, None, node("node-a", "zone=zone1"), Q, id="add-related-node"),
    pytest.param(ZONE_FOO, node("node-a", "foo=bar"), None, S, id="delete-unrelated-node"),
    pytest.param(ZONE_FOO, node("node-a", "zone=zone1"), None, Q, id="delete-related-node"),
    pytest.param(ZONE_NODE, None, node("node-a", "zone=zone1"), S, id="add-node-with-one-of-two-keys"),
    pytest.param(ZONE_NODE, None, node("node-a", "zone=zone1", "node=node1"), Q, id="add-node-with-all-keys"),
    pytest.param(ZONE_NODE, node("node-a", "zone=zone1"), node("node-a", "zone=zone1"), S,
                 id="update-node-with-one-of-two-keys"),
    pytest.param(ZONE_NODE, node("node-a", "zone=zone1", "node=node1"), node("node-a", "zone=zone1", "node=node2"), Q,
                 id="update-node-value-of-a-key"),
    pytest.param(ZONE_FOO, node("node-a", "foo"), node("node-a", "zone=zone1"), Q, id="node-gains-the-key"),
    pytest.param(ZONE_FOO, node("node-a", "zone=zone1"), node("node-a", "zone=zone1", taints=UNSCHED_TAINT), Q,
                 id="matching-node-taints-changed"),
    pytest.param(ZONE_FOO, node("node-a"), node("node-a", taints=UNSCHED_TAINT), S, id="unrelated-node-taints-changed"),
])
def test_hint_after_node_change(constraints: list[dict[str, Any]], old: Node | None, new: Node | None,
                                want: QueueingHint) -> None:
    assert _plain().is_schedulable_after_node_change(incoming(constraints=constraints), old, new) == want


BAR_NODE = [spread(1, "zone", HARD, FOO), spread(1, "node", HARD, BAR)]


@pytest.mark.parametrize(("constraints", "old", "new", "want"), [
    pytest.param(ZONE_FOO, None, pod("fake-node", "foo"), Q, id="add-matching-assigned-pod"),
    pytest.param(ZONE_FOO, None, pod("", "foo"), S, id="add-unscheduled-pod"),
    pytest.param(ZONE_FOO, pod("", "bar"), pod("", "foo"), S, id="update-unscheduled-pod"),
    pytest.param(ZONE_FOO, pod("", "foo"), None, S, id="delete-unscheduled-pod"),
    pytest.param(ZONE_FOO, None, pod("fake-node", "foo", ns="fake-namespace"), S, id="add-pod-other-namespace"),
    pytest.param(ZONE_FOO, None, pod("fake-node", "bar"), S, id="add-unmatching-pod"),
    pytest.param(ZONE_FOO, pod("fake-node", "foo"), None, Q, id="delete-matching-pod"),
    pytest.param(ZONE_FOO, pod("fake-node", "bar"), None, S, id="delete-unmatching-pod"),
    pytest.param(ZONE_FOO, pod("fake-node", "foo", "bar=bar1"), pod("fake-node", "foo", "bar=bar2"), S,
                 id="unrelated-label-changed"),
    pytest.param(ZONE_FOO, pod("fake-node"), pod("fake-node", "foo"), Q, id="matching-label-added"),
    pytest.param(ZONE_FOO, pod("fake-node", "foo"), pod("fake-node"), Q, id="matching-label-removed"),
    pytest.param(ZONE_FOO, pod("fake-node", "foo=foo1"), pod("fake-node", "foo=foo2"), S,
                 id="matching-label-value-changed"),
    pytest.param(BAR_NODE, pod("fake-node", "foo"), pod("fake-node", "foo", "bar=bar2"), Q,
                 id="second-constraint-label-added"),
    pytest.param(BAR_NODE, pod("fake-node", "foo"), pod("fake-node", "foo", "baz"), S, id="unrelated-label-added"),
    pytest.param(BAR_NODE, pod("fake-node", "foo", "bar"), pod("fake-node", "foo", "bar=bar2"), S,
                 id="second-constraint-value-changed"),
])
def test_hint_after_pod_change(constraints: list[dict[str, Any]], old: Pod | None, new: Pod | None,
                               want: QueueingHint) -> None:
    p = incoming("foo", constraints=constraints)
    assert _plain().is_schedulable_after_pod_change(p, old, new) == want


def test_hint_after_the_pod_gains_a_toleration() -> None:
    honor = incoming("foo", constraints=[spread(1, "zone", HARD, FOO, taints_policy="Honor")])
    updated = Pod({**honor.deepcopy_raw(), "spec": {**honor.deepcopy_raw()["spec"], "tolerations": TOLERATE_UNSCHED}})
    assert _plain().is_schedulable_after_pod_change(honor, honor, updated) == Q
    ignore = incoming("foo", constraints=[spread(1, "zone", HARD, FOO)])
    updated = Pod({**ignore.deepcopy_raw(), "spec": {**ignore.deepcopy_raw()["spec"], "tolerations": TOLERATE_UNSCHED}})
    assert _plain().is_schedulable_after_pod_change(ignore, ignore, updated) == S


def test_events_to_register() -> None:
    evs = _plain().events_to_register()
    assert [(e.event.resource, e.event.action) for e in evs] == [
        (EventResource.POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.UPDATE_POD_TOLERATION
         | ActionType.DELETE),
        (EventResource.NODE, ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL
         | ActionType.UPDATE_NODE_TAINT),
    ]
    assert all(e.hint is not None for e in evs)


def test_invalid_defaulting_type_is_refused() -> None:
    with pytest.raises(ValueError, match="defaultingType"):
        PodTopologySpread({"defaultingType": "Sometimes"}, None)


def test_normalize_score_directly() -> None:
    p = incoming("foo", constraints=[spread(1, "zone", SOFT, FOO)])
    r = runner([A(), B(), node("node-q", "node=node-q")], [pod("node-a", "foo")])
    state = CycleState()
    pl = plugin(r)
    nodes = r.snapshot.all_nodes()
    assert pl.pre_score(state, p, nodes) is None
    rows = np.asarray([r.snapshot.row_of[n] for n in ("node-a", "node-b", "node-q")], dtype=np.int64)
    nl = r.snapshot.node_list(rows)
    # node-q (no zone) is ignored whatever score it carries, and does not take part in min/max.
    scores = np.array([4, 2, 50], dtype=np.int64)
    assert pl.normalize_score(state, p, nl, scores) is None
    assert scores.tolist() == [100 * (4 + 2 - 4) // 4, 100, 0]
    scores = np.array([0, 0, 7], dtype=np.int64)
    assert pl.normalize_score(state, p, nl, scores) is None
    assert scores.tolist() == [100, 100, 0]
    assert pl.normalize_score(CycleState(), p, nl, scores) is not None  # no PreScore state: an error


def test_domain_sums_follow_node_label_changes() -> None:
    p = incoming("foo", constraints=[spread(1, "zone", HARD, FOO)])
    nodes = [A(), B(), Xn(), Y()]
    r = runner(nodes, [pod("node-a", "foo"), pod("node-b", "foo"), pod("node-y", "foo")])
    assert prefilter_counts(r, p)[0] == [{"zone1": 2, "zone2": 1}]
    # node-b moves to zone2, then loses its zone label, then gets a new zone.
    r.cache.update_node(nodes[1], node("node-b", "zone=zone2", "node=node-b"))
    r.refresh()
    assert prefilter_counts(r, p)[0] == [{"zone1": 1, "zone2": 2}]
    assert _codes(r.filter(p)) == [OK, U, U, U]
    r.cache.update_node(nodes[1], node("node-b", "node=node-b"))
    r.refresh()
    assert prefilter_counts(r, p)[0] == [{"zone1": 1, "zone2": 1}]
    assert _codes(r.filter(p)) == [OK, X, OK, OK]
    r.cache.update_node(nodes[1], node("node-b", "zone=zone9", "node=node-b"))
    r.refresh()
    assert prefilter_counts(r, p)[0] == [{"zone1": 1, "zone2": 1, "zone9": 1}]


def test_pre_filter_counts_only_the_nodes_it_is_given() -> None:
    # Upstream's PreFilter counts over the node list it receives (normally all nodes).
    p = incoming("foo", constraints=[spread(1, "zone", HARD, FOO)])
    r = runner(N4(), [pod("node-a", "foo"), pod("node-b", "foo"), pod("node-y", "foo")])
    state = CycleState()
    rows = np.asarray([r.snapshot.row_of[n] for n in ("node-a", "node-y")], dtype=np.int64)
    _, st = plugin(r).pre_filter(state, p, r.snapshot.node_list(rows))
    assert st is None
    assert state.read(PRE_FILTER_STATE_KEY).domain_counts(0) == {"zone1": 1, "zone2": 1}
    state = CycleState()
    plugin(r).pre_filter(state, p, r.snapshot.all_nodes())
    assert state.read(PRE_FILTER_STATE_KEY).domain_counts(0) == {"zone1": 2, "zone2": 1}


def test_many_cycles_with_incremental_sums_match_a_fresh_plugin() -> None:
    # Schedule pods one by one with one plugin instance (incremental sums); a new instance
    # computing from scratch must agree on every cycle.
    zones = [f"z{i % 3}" for i in range(30)]
    nodes = [node(f"n{i}", f"zone={zones[i]}") for i in range(30)]
    r = runner(nodes, [pod(f"n{i % 7}", "app=web") for i in range(20)])
    p_hard = incoming("app=web", constraints=[spread(2, "zone", HARD, ml(app="web")),
                                              spread(4, HOST, HARD, ml(app="web"))])
    p_soft = incoming("app=web", constraints=[spread(1, "zone", SOFT, ml(app="web")),
                                              spread(1, HOST, SOFT, ml(app="web"))])
    rng = np.random.default_rng(3)
    for step in range(40):
        fresh = runner([], [])
        fresh.cache, fresh.snapshot = r.cache, r.snapshot
        fresh.fw.set_snapshot(r.snapshot)
        assert r.filter(p_hard) == fresh.filter(p_hard)
        assert r.score(p_soft) == fresh.score(p_soft)
        target = f"n{int(rng.integers(30))}"
        if step % 5 == 4:
            victims = [pi.pod for pi in r.snapshot.get(target).pods]  # type: ignore[union-attr]
            if victims:
                r.cache.remove_pod(victims[0])
        else:
            r.cache.add_pod(pod(target, "app=web"))
        r.refresh()


def test_default_constraints_per_plugin_instance() -> None:
    p = incoming("app=web", owner_kind="ReplicaSet", owner_name="rs1")
    factory = FakeFactory(ReplicaSet=[replicaset("rs1", ml(app="web"))])

    class Handle:
        informers = factory

    system = PodTopologySpread({"defaultingType": "System"}, Handle())
    listed = PodTopologySpread({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 7, "topologyKey": "rack", "whenUnsatisfiable": HARD}]}, Handle())
    none = PodTopologySpread({"defaultingType": "List", "defaultConstraints": []}, Handle())
    for _ in range(2):
        assert [(c.max_skew, c.topology_key) for c in system.get_constraints(p, SOFT)] == [(3, HOST), (5, ZONE)]
        assert system.get_constraints(p, HARD) == ()
        assert [(c.max_skew, c.topology_key) for c in listed.get_constraints(p, HARD)] == [(7, "rack")]
        assert listed.get_constraints(p, SOFT) == ()
        assert none.get_constraints(p, SOFT) == () and none.get_constraints(p, HARD) == ()
    # Listers that cannot be tracked are read every time: a Service appears.
    factory = FakeFactory(Service=[])
    r = runner([], default_constraints=[{"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": HARD}],
               informers=factory)
    bare = incoming("app=web")
    assert plugin(r).get_constraints(bare, HARD) == ()
    factory.informers["Service"].objs.append(KubeObject(service({"app": "web"})))
    assert [c.topology_key for c in plugin(r).get_constraints(bare, HARD)] == ["node"]


@pytest.mark.parametrize("unlabelled", [[], ["node-b"], ["node-a", "node-c"], ["node-a", "node-b", "node-c"]])
def test_pre_score_ignored_nodes(unlabelled: list[str]) -> None:
    """The candidates without the constraint's key are ignored, by row and by name; with none
    ignored (the usual case) the rows are one shared read-only all-False array."""
    names = ["node-a", "node-b", "node-c", "node-d"]
    r = runner([node(n) if n in unlabelled else node(n, f"zone=z{i % 2}") for i, n in enumerate(names)])
    s = _prescore(r, incoming("foo", constraints=[spread(1, "zone", SOFT, FOO)]), names[:3])
    assert s is not None
    assert s.ignored_names == set(unlabelled)
    want = np.zeros(len(r.snapshot.infos), dtype=bool)
    for n in unlabelled:
        want[r.snapshot.row_of[n]] = True
    assert s.ignored_rows.tolist() == want.tolist()
    assert s.any_ignored == bool(unlabelled)
    if not unlabelled:
        assert not s.ignored_rows.flags.writeable
