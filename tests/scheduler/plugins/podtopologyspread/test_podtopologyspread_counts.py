"""PodTopologySpread on the snapshot's count index (``cache/pod_counts.py``, the fast path) against
the reference (every pod of every node counted again, ``Framework.vectorize = False``), on random
clusters changed step by step: pods added, removed, relabelled and marked terminating, nodes
added, relabelled and removed (their pods staying behind), with many selectors, namespaces and
topology keys. Both must give the same PreFilter state, Filter statuses, PreScore state and
normalized scores; the index is only ever moved forward, so its counts are what the pods that
changed made of them."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.plugins.podtopologyspread import PRE_FILTER_STATE_KEY, PRE_SCORE_STATE_KEY
from ksched.scheduler.plugins.podtopologyspread._index import _DomainSums
from ksched.testing import PluginRunner, make_node, make_pod

HOST = "kubernetes.io/hostname"
KEYS = ["zone", "rack", HOST]
NAMESPACES = ["default", "ns-a", "ns-b"]
APPS = [f"app{i}" for i in range(10)]
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}

SELECTORS: list[dict[str, Any] | None] = [
    *({"matchLabels": {"app": a}} for a in APPS),
    {"matchLabels": {"app": "app1", "tier": "x"}},
    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["app2", "app3", "app4"]}]},
    {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
    {},
    None,
]

node_labels = st.fixed_dictionaries({}, optional={
    "zone": st.sampled_from(["z0", "z1", "z2", "z3"]),
    "rack": st.sampled_from(["r0", "r1", "r2", "r3", "r4"]),
    "pool": st.sampled_from(["a", "b"]),
})
pod_labels = st.fixed_dictionaries({}, optional={
    "app": st.sampled_from(APPS),
    "tier": st.sampled_from(["x", "y"]),
    "ver": st.sampled_from(["1", "2"]),
})


@st.composite
def constraints(draw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"maxSkew": draw(st.integers(1, 3)), "topologyKey": draw(st.sampled_from(KEYS)),
                         "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]))}
    sel = draw(st.sampled_from(SELECTORS))
    if sel is not None:
        d["labelSelector"] = sel
        if draw(st.booleans()):
            d["matchLabelKeys"] = ["ver"]
    if draw(st.booleans()):
        d["minDomains"] = draw(st.integers(1, 6))
    if draw(st.booleans()):
        d["nodeAffinityPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
    if draw(st.booleans()):
        d["nodeTaintsPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
    return d


@st.composite
def incoming(draw: Any) -> Pod:
    kw: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        kw["node_selector"] = {"pool": draw(st.sampled_from(["a", "b"]))}
    if draw(st.integers(0, 4)) == 0:
        kw["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": [draw(st.sampled_from(["z0", "z1"]))]}]}]}}}
    if draw(st.booleans()):
        kw["tolerations"] = [TOLERATION]
    return make_pod("incoming", draw(st.sampled_from(NAMESPACES)), labels=draw(pod_labels),
                    topology_spread_constraints=draw(st.lists(constraints(), min_size=1, max_size=3)), **kw)


class _Cluster:
    """The runner's cache changed through its public methods, as the event handlers change it."""

    def __init__(self, runner: PluginRunner, nodes: list[Node], pods: list[Pod]) -> None:
        self.r = runner
        self.nodes = {n.name: n for n in nodes}
        self.pods = {p.name: p for p in pods if p.node_name}
        self.made = len(pods)

    def step(self, data: Any) -> None:
        cache = self.r.cache
        op = data.draw(st.sampled_from(["add", "add", "remove", "relabel", "terminate", "node_add", "node_relabel",
                                        "node_remove"]))
        live = sorted(self.nodes)
        if op == "add" and live:
            self.made += 1
            p = make_pod(f"p{self.made}", data.draw(st.sampled_from(NAMESPACES)), labels=data.draw(pod_labels),
                         node_name=data.draw(st.sampled_from(live)))
            cache.add_pod(p)
            self.pods[p.name] = p
        elif op in ("remove", "relabel", "terminate") and self.pods:
            p = self.pods[data.draw(st.sampled_from(sorted(self.pods)))]
            if op == "remove":
                cache.remove_pod(p)
                del self.pods[p.name]
                return
            raw = {**p.raw, "metadata": dict(p.raw["metadata"])}
            if op == "relabel":
                raw["metadata"]["labels"] = data.draw(pod_labels)
            else:
                raw["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
            new = Pod(raw)
            cache.update_pod(p, new)
            self.pods[p.name] = new
        elif op == "node_add":
            self.made += 1
            n = make_node(f"m{self.made}", labels=data.draw(node_labels),
                          taints=[TAINT] if data.draw(st.booleans()) else None)
            cache.add_node(n)
            self.nodes[n.name] = n
        elif op == "node_relabel" and live:
            old = self.nodes[data.draw(st.sampled_from(live))]
            raw = {**old.raw, "metadata": {**old.raw["metadata"],
                                           "labels": {**data.draw(node_labels), HOST: old.name}}}
            new = Node(raw)
            cache.update_node(old, new)
            self.nodes[new.name] = new
        elif op == "node_remove" and len(live) > 1:
            n = self.nodes.pop(data.draw(st.sampled_from(live)))
            cache.remove_node(n)


def _outcome(r: PluginRunner, pod: Pod, vectorize: bool) -> dict[str, Any]:
    r.fw.vectorize = vectorize
    pl = r.fw.plugins["PodTopologySpread"]
    state, _, st_ = r.pre_filter(pod)
    out: dict[str, Any] = {"pre_filter_status": st_ and (st_.code, st_.reasons)}
    s = state.get(PRE_FILTER_STATE_KEY)
    if s is not None:
        out["pre_filter"] = [(s.domain_counts(i), s.self_match[i], s.min_match(i))  # type: ignore[attr-defined]
                             for i in range(len(s.constraints))]  # type: ignore[attr-defined]
    infos = r.snapshot.all_nodes()
    out["filter"] = {}
    for ni in infos:
        f = r.fw.run_filter_plugins(state, pod, ni)
        out["filter"][ni.name] = None if f is None else (f.code, f.reasons)
    if vectorize and s is not None:
        got = pl.filter_nodes(state, pod, r.snapshot, r.snapshot.order)  # type: ignore[attr-defined]
        assert got.tolist() == [out["filter"][ni.name] is None for ni in infos]
    # PreScore and Score on the nodes that passed, as a cycle runs them.
    passed = [ni.name for ni in infos if out["filter"][ni.name] is None]
    if passed:
        rows = np.asarray([r.snapshot.row_of[n] for n in passed], dtype=np.int64)
        state2 = CycleState()
        st2 = pl.pre_score(state2, pod, r.snapshot.node_list(rows))  # type: ignore[attr-defined]
        out["pre_score_status"] = st2 and (st2.code, st2.reasons)
        ps = state2.get(PRE_SCORE_STATE_KEY)
        if ps is not None:
            out["pre_score"] = [(ps.domain_counts(i), ps.weights[i])  # type: ignore[attr-defined]
                                for i in range(len(ps.constraints))]  # type: ignore[attr-defined]
            out["score"] = r.score(pod, nodes=passed)["PodTopologySpread"]
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_count_index_and_per_node_counting_agree(data: Any) -> None:
    # The per-domain sums move changed rows one by one, or in bulk past SCALAR_ROWS: both ways.
    scalar_rows = _DomainSums.SCALAR_ROWS
    _DomainSums.SCALAR_ROWS = data.draw(st.sampled_from([0, scalar_rows]))
    try:
        _check_agreement(data)
    finally:
        _DomainSums.SCALAR_ROWS = scalar_rows


def _check_agreement(data: Any) -> None:
    nodes = [make_node(f"n{i}", labels=data.draw(node_labels), taints=[TAINT] if data.draw(st.booleans()) else None)
             for i in range(data.draw(st.integers(1, 10)))]
    pods = [make_pod(f"e{j}", data.draw(st.sampled_from(NAMESPACES)), labels=data.draw(pod_labels),
                     node_name=data.draw(st.sampled_from([n.name for n in nodes])),
                     deletion_timestamp="2024-01-01T00:00:00Z" if data.draw(st.integers(0, 9)) == 0 else None)
            for j in range(data.draw(st.integers(0, 30)))]
    r = PluginRunner(["PodTopologySpread"], nodes, pods,
                     args={"PodTopologySpread": {"defaultingType": "List", "defaultConstraints": []}})
    cluster = _Cluster(r, nodes, pods)
    # The same pods asked again after every change (the fast path's sums are kept per constraint
    # shape and moved by the rows that changed), and a new one each time.
    asked = data.draw(st.lists(incoming(), min_size=1, max_size=3))
    for _ in range(data.draw(st.integers(1, 6))):
        for _ in range(data.draw(st.integers(0, 6))):
            cluster.step(data)
        r.refresh()
        # Not every pod every time: then many rows changed between two asks (the sums' bulk path).
        for pod in [*(p for p in asked if data.draw(st.booleans())), data.draw(incoming())]:
            fast = _outcome(r, pod, True)
            assert fast == _outcome(r, pod, False)
    # The index kept up with every change: its counts equal a fresh count of the cluster.
    r.fw.vectorize = True
    index = r.snapshot.pod_counts()
    sel = Pod({"metadata": {"name": "x"}, "spec": {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "app1"}}}]}}).topology_spread_constraints[0].label_selector
    want = [sum(1 for pi in ni.pods if pi.pod.namespace == "default" and pi.pod.deletion_timestamp is None
                and pi.pod.labels.get("app") == "app1") if ni is not None else 0 for ni in r.snapshot.infos]
    assert index.counts("default", sel).tolist() == want
