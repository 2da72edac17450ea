"""InterPodAffinity's incremental pod index against a from-scratch oracle.

The plugin keeps its counts in an index that is updated only for the snapshot rows that changed.
These tests mutate a cluster at random (bind, assume, forget and remove pods; relabel, add and
remove nodes) and after every step compare the plugin's PreFilter counts, Filter verdicts and
PreScore/Score/NormalizeScore results with a direct transcription of upstream's algorithm that
walks every pod of the snapshot (``filtering.go`` / ``scoring.go``, v1.36).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from ksched.api.affinity import PodAffinityTerm
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.status import Code
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.interpodaffinity import PRE_FILTER_STATE_KEY, InterPodAffinity, _index
from ksched.scheduler.plugins.interpodaffinity._index import _DOMAINS
from ksched.testing import PluginRunner, make_node, make_pod

NAMESPACES = {"default": {}, "ns-a": {"team": "a"}, "ns-b": {"team": "b"}}
TOPO_KEYS = ["zone", "rack", "kubernetes.io/hostname", "missing"]


# ---------------------------------------------------------------------------------------------
# Oracle: upstream's algorithm, pod by pod


def _ns_ok_incoming(t: PodAffinityTerm, namespace: str) -> bool:
    sel = t.namespace_selector
    if sel is not None and sel.is_empty():
        return True
    if namespace in t.namespaces:
        return True
    return sel is not None and namespace in NAMESPACES and sel.matches(NAMESPACES[namespace])


def _inc(t: PodAffinityTerm, p: Pod) -> bool:
    return _ns_ok_incoming(t, p.namespace) and t.label_selector.matches(p.labels)


def _ext(t: PodAffinityTerm, incoming: Pod) -> bool:
    return t.matches_namespace(incoming.namespace, NAMESPACES.get(incoming.namespace, {})) and \
        t.label_selector.matches(incoming.labels)


def _live(infos: list[NodeInfo | None]) -> list[NodeInfo]:
    return [ni for ni in infos if ni is not None and ni.node is not None]


def oracle_prefilter(infos: list[NodeInfo | None], p: Pod) -> tuple[bool, Counter, Counter, Counter]:
    aff = p.affinity
    req_aff = aff.pod_affinity_required if aff else ()
    req_anti = aff.pod_anti_affinity_required if aff else ()
    existing: Counter = Counter()
    affc: Counter = Counter()
    antic: Counter = Counter()
    for ni in _live(infos):
        labels = ni.node.labels  # type: ignore[union-attr]
        for pi in ni.pods:
            for t in pi.required_anti_affinity_terms:
                if _ext(t, p) and t.topology_key in labels:
                    existing[(t.topology_key, labels[t.topology_key])] += 1
            if req_aff and all(_inc(t, pi.pod) for t in req_aff):
                for t in req_aff:
                    if t.topology_key in labels:
                        affc[(t.topology_key, labels[t.topology_key])] += 1
            for t in req_anti:
                if _inc(t, pi.pod) and t.topology_key in labels:
                    antic[(t.topology_key, labels[t.topology_key])] += 1
    skip = not existing and not req_aff and not req_anti
    return skip, existing, affc, antic


def oracle_filter(node: Node, p: Pod, existing: Counter, affc: Counter, antic: Counter) -> str | None:
    aff = p.affinity
    req_aff = aff.pod_affinity_required if aff else ()
    req_anti = aff.pod_anti_affinity_required if aff else ()
    labels = node.labels
    exist = True
    for t in req_aff:
        if t.topology_key not in labels:
            return "aff"
        if affc[(t.topology_key, labels[t.topology_key])] <= 0:
            exist = False
    if not exist and not (not +affc and all(_inc(t, p) for t in req_aff)):
        return "aff"
    for t in req_anti:
        if t.topology_key in labels and antic[(t.topology_key, labels[t.topology_key])] > 0:
            return "anti"
    for k, v in labels.items():
        if existing[(k, v)] > 0:
            return "existing"
    return None


def oracle_scores(infos: list[NodeInfo | None], p: Pod, hard: int, ignore: bool) -> dict[str, int] | None:
    aff = p.affinity
    pref = aff.pod_affinity_preferred if aff else ()
    pref_anti = aff.pod_anti_affinity_preferred if aff else ()
    if ignore and not (pref or pref_anti):
        return None
    topo: dict[str, dict[str, int]] = {}

    def add(t: PodAffinityTerm, w: int, labels: dict[str, str]) -> None:
        if t.topology_key in labels:
            d = topo.setdefault(t.topology_key, {})
            d[labels[t.topology_key]] = d.get(labels[t.topology_key], 0) + w

    for ni in _live(infos):
        labels = ni.node.labels  # type: ignore[union-attr]
        if not labels:
            continue
        for pi in ni.pods:
            for wt in pref:
                if _inc(wt.term, pi.pod):
                    add(wt.term, wt.weight, labels)
            for wt in pref_anti:
                if _inc(wt.term, pi.pod):
                    add(wt.term, -wt.weight, labels)
            if hard > 0:
                for t in pi.required_affinity_terms:
                    if _ext(t, p):
                        add(t, hard, labels)
            for wt in pi.preferred_affinity_terms:
                if _ext(wt.term, p):
                    add(wt.term, wt.weight, labels)
            for wt in pi.preferred_anti_affinity_terms:
                if _ext(wt.term, p):
                    add(wt.term, -wt.weight, labels)
    if not topo:
        return None
    raw: dict[str, int] = {}
    for ni in _live(infos):
        labels = ni.node.labels  # type: ignore[union-attr]
        raw[ni.name] = sum(vals.get(labels[k], 0) for k, vals in topo.items() if k in labels)
    return raw


# ---------------------------------------------------------------------------------------------
# Random clusters


def _selector(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(["app", "tier"])
    op = rng.choice(["In", "In", "NotIn", "Exists", "DoesNotExist"])
    e: dict[str, Any] = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        e["values"] = rng.sample(["a", "b", "c"], rng.randint(1, 2))
    return {"matchExpressions": [e]}


def _term(rng: random.Random) -> dict[str, Any]:
    t: dict[str, Any] = {"labelSelector": _selector(rng), "topologyKey": rng.choice(TOPO_KEYS)}
    r = rng.random()
    if r < 0.15:
        t["namespaceSelector"] = {"matchLabels": {"team": rng.choice(["a", "b"])}}
    elif r < 0.25:
        t["namespaceSelector"] = {}
    elif r < 0.35:
        t["namespaces"] = rng.sample(list(NAMESPACES), 2)
    return t


def _affinity(rng: random.Random, p_terms: float) -> dict[str, Any] | None:
    a: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        d: dict[str, Any] = {}
        if rng.random() < p_terms:
            d["requiredDuringSchedulingIgnoredDuringExecution"] = [_term(rng) for _ in range(rng.randint(1, 2))]
        if rng.random() < p_terms:
            d["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "podAffinityTerm": _term(rng)} for _ in range(rng.randint(1, 2))]
        if d:
            a[kind] = d
    return a or None


_seq = 0


def _pod(rng: random.Random, node: str = "", p_terms: float = 0.2) -> Pod:
    global _seq
    _seq += 1
    labels = {}
    if rng.random() < 0.9:
        labels["app"] = rng.choice(["a", "b", "c"])
    if rng.random() < 0.5:
        labels["tier"] = rng.choice(["a", "b"])
    return make_pod(f"p{_seq}", rng.choice(list(NAMESPACES)), labels=labels, node_name=node,
                    affinity=_affinity(rng, p_terms))


def _node_labels(rng: random.Random) -> dict[str, str]:
    labels = {}
    if rng.random() < 0.85:
        labels["zone"] = rng.choice(["z1", "z2", "z3"])
    if rng.random() < 0.7:
        labels["rack"] = rng.choice(["r1", "r2", "r3", "r4"])
    return labels


def _informers() -> InformerFactory:
    store = Store()
    for name, labels in NAMESPACES.items():
        if name != "default":
            store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    f = InformerFactory(InProcessClient(store))
    f.informer("Namespace")
    f.poll()
    return f


def _pairs(counts: dict[str, np.ndarray]) -> Counter:
    out: Counter = Counter()
    for key, arr in counts.items():
        inv = {i: v for v, i in _DOMAINS.get(key, {}).items()}
        for i in np.flatnonzero(arr).tolist():
            out[(key, inv[i])] = int(arr[i])
    return out


def _check(r: PluginRunner, incoming: list[Pod], hard: int, ignore: bool) -> None:
    p = r.fw.plugins["InterPodAffinity"]
    assert isinstance(p, InterPodAffinity)
    infos = r.snapshot.infos
    for pod in incoming:
        skip, existing, affc, antic = oracle_prefilter(infos, pod)
        state = CycleState()
        _, st = p.pre_filter(state, pod, r.snapshot.all_nodes())
        assert (st is not None and st.code == Code.SKIP) == skip
        if not skip:
            s = state.read(PRE_FILTER_STATE_KEY)
            assert _pairs(s.existing) == existing
            assert _pairs(s.aff) == affc
            assert _pairs(s.anti) == antic
            got = r.filter(pod)  # also checks vectorized == per-node
            for ni in r.snapshot.all_nodes():
                want = oracle_filter(ni.node, pod, existing, affc, antic)  # type: ignore[arg-type]
                st = got[ni.name]
                kind = None if st is None else {
                    "node(s) didn't match pod affinity rules": "aff",
                    "node(s) didn't match pod anti-affinity rules": "anti",
                    "node(s) didn't satisfy existing pods anti-affinity rules": "existing"}[st.message()]
                assert kind == want, (ni.name, pod.name)
        raw = oracle_scores(infos, pod, hard, ignore)
        got_raw = r.score(pod, normalize=False)["InterPodAffinity"]
        if raw is None:
            assert got_raw == {}
            continue
        assert got_raw == raw
        vals = np.array(list(raw.values()), dtype=np.int64)
        mn, mx = (int(vals.min()), int(vals.max())) if len(vals) else (0, 0)
        want_norm = {n: (int(100.0 * ((v - mn) / (mx - mn))) if mx > mn else 0) for n, v in raw.items()}
        assert r.score(pod)["InterPodAffinity"] == want_norm


@pytest.mark.parametrize("seed", range(8))
def test_incremental_index_matches_oracle(seed: int) -> None:
    _run_random_cluster(seed)


@pytest.mark.parametrize("seed", range(3))
def test_incremental_index_with_query_eviction_and_log_compaction(seed: int, monkeypatch: Any) -> None:
    """Queries evicted from the LRU and registries compacting their logs (which re-evaluates
    every query) must not change any result."""
    monkeypatch.setattr(_index, "_QUERY_MAX", 2)
    monkeypatch.setattr(_index, "_LOG_SLACK", -10**9)  # compact on every group removal
    _run_random_cluster(100 + seed)


def _run_random_cluster(seed: int) -> None:
    rng = random.Random(seed)
    hard = rng.choice([0, 1, 5])
    ignore = seed % 3 == 0
    nodes = [make_node(f"n{i}", labels=_node_labels(rng)) for i in range(24)]
    pods = [_pod(rng, rng.choice(nodes).name) for _ in range(60)]
    # Many pods with the same labels: groups large enough to keep per-domain arrays.
    pods += [make_pod(f"same{i}", labels={"app": "a"}, node_name=rng.choice(nodes).name,
                      affinity=_affinity(rng, 0.0)) for i in range(40)]
    r = PluginRunner(["InterPodAffinity"], nodes, pods, informers=_informers(),
                     args={"InterPodAffinity": {"hardPodAffinityWeight": hard,
                                                "ignorePreferredTermsOfExistingPods": ignore}})
    incoming = [_pod(rng, p_terms=0.6) for _ in range(6)]
    incoming.append(make_pod("inc-same", labels={"app": "a"}, affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}]}}))
    _check(r, incoming, hard, ignore)
    live_nodes = {n.name: n for n in nodes}
    bound = {p.uid: p for p in pods}
    assumed: dict[str, Pod] = {}
    c = r.cache
    for _ in range(25):
        op = rng.random()
        if op < 0.3:
            p = _pod(rng, rng.choice(list(live_nodes)), p_terms=0.3)
            c.add_pod(p)
            bound[p.uid] = p
        elif op < 0.45 and bound:
            p = bound.pop(rng.choice(list(bound)))
            c.remove_pod(p)
        elif op < 0.55:
            p = _pod(rng, rng.choice(list(live_nodes)), p_terms=0.3)
            c.assume_pod(p)
            assumed[p.uid] = p
        elif op < 0.6 and assumed:
            p = assumed.pop(rng.choice(list(assumed)))
            c.forget_pod(p)
        elif op < 0.8:
            name = rng.choice(list(live_nodes))
            old = live_nodes[name]
            new = make_node(name, labels=_node_labels(rng))
            c.update_node(old, new)
            live_nodes[name] = new
        elif op < 0.9:
            n = make_node(f"x{_seq}-{rng.randint(0, 10**6)}", labels=_node_labels(rng))
            c.add_node(n)
            live_nodes[n.name] = n
        elif len(live_nodes) > 3:
            name = rng.choice(list(live_nodes))
            c.remove_node(live_nodes.pop(name))
        r.refresh()
        _check(r, incoming, hard, ignore)


def test_index_is_rebuilt_for_another_snapshot() -> None:
    rng = random.Random(99)
    nodes = [make_node(f"n{i}", labels=_node_labels(rng)) for i in range(5)]
    pods = [_pod(rng, rng.choice(nodes).name, p_terms=0.5) for _ in range(20)]
    r1 = PluginRunner(["InterPodAffinity"], nodes, pods, informers=_informers())
    r2 = PluginRunner(["InterPodAffinity"], nodes, pods[:5], informers=_informers())
    p = r1.fw.plugins["InterPodAffinity"]
    assert isinstance(p, InterPodAffinity)
    idx1 = p.index(r1.snapshot.infos)
    assert idx1 is p.index(r1.snapshot.infos)
    idx2 = p.index(r2.snapshot.infos)
    assert idx2 is not idx1
    assert sum(g.total for g in idx2.sigs.items.values()) == 5


def test_cycle_work_is_proportional_to_changes(monkeypatch: Any) -> None:
    """After the first cycle, a cycle only re-reads the rows that changed and evaluates only the
    groups created since, however many pods and groups the cluster holds."""
    nodes = [make_node(f"n{i}", labels={"zone": f"z{i % 3}"}) for i in range(300)]
    # Unique labels per pod (as StatefulSet pods have): one signature group per pod.
    pods = [make_pod(f"s{i}", labels={"app": "db", "pod-name": f"s{i}"}, node_name=f"n{i}") for i in range(300)]
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}
    r = PluginRunner(["InterPodAffinity"], nodes, pods)
    p = r.fw.plugins["InterPodAffinity"]
    assert isinstance(p, InterPodAffinity)
    incoming = make_pod("inc", labels={"app": "web"}, affinity=anti)
    state = CycleState()
    assert p.pre_filter(state, incoming, r.snapshot.all_nodes())[1] is None
    assert _pairs(state.read(PRE_FILTER_STATE_KEY).anti) == {("zone", "z0"): 100, ("zone", "z1"): 100,
                                                            ("zone", "z2"): 100}
    applied: list[int] = []
    evaluated: list[Any] = []
    orig_apply = _index.Index._apply

    def counting_apply(self: Any, row: int, old: Any, new: Any) -> None:
        applied.append(row)
        orig_apply(self, row, old, new)

    monkeypatch.setattr(_index.Index, "_apply", counting_apply)
    q = p._index._queries  # type: ignore[union-attr]
    for query in q.values():
        pred = query.pred

        def counting(g: Any, _pred: Any = pred) -> bool:
            evaluated.append(g)
            return bool(_pred(g))
        query.pred = counting
    r.cache.add_pod(make_pod("new", labels={"app": "db", "pod-name": "new"}, node_name="n4"))
    r.refresh()
    state = CycleState()
    assert p.pre_filter(state, incoming, r.snapshot.all_nodes())[1] is None
    assert applied == [r.snapshot.row_of["n4"]]
    assert len(evaluated) == 1  # only the new pod's signature group
    assert _pairs(state.read(PRE_FILTER_STATE_KEY).anti)[("zone", "z1")] == 101
