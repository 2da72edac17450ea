"""PodTopologySpread against a plain re-statement of upstream's algorithm (dicts, one node at a
time, no caches), on random clusters: Filter verdicts and reasons, AddPod/RemovePod, and
normalized scores must match. PluginRunner additionally checks the vectorized forms against the
per-node forms on every case."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from ksched.api.labels import LabelSelector
from ksched.api.node import Node
from ksched.api.pod import Pod, TopologySpreadConstraint
from ksched.api.taints import find_untolerated_taint
from ksched.scheduler.framework.status import Code
from ksched.scheduler.framework.types import PodInfo
from ksched.scheduler.plugins.podtopologyspread import PRE_FILTER_STATE_KEY
from ksched.testing import PluginRunner, make_node, make_pod

HOST = "kubernetes.io/hostname"
KEYS = ["zone", "rack", HOST]
SELECTORS: list[dict[str, Any] | None] = [
    {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
    {"matchLabels": {"app": "web"}},
    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]},
    {},
    None,
]
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


# ---------------------------------------------------------------- the reference


def _required_match(pod: Pod, node: Node) -> bool:
    for k, v in pod.node_selector.items():
        if node.labels.get(k) != v:
            return False
    aff = pod.affinity
    if aff is not None and aff.node_affinity is not None and aff.node_affinity.required is not None:
        return aff.node_affinity.required.matches(node.name, node.labels)
    return True


def _included(c: TopologySpreadConstraint, pod: Pod, node: Node) -> bool:
    if c.node_affinity_policy == "Honor" and not _required_match(pod, node):
        return False
    return not (c.node_taints_policy == "Honor" and find_untolerated_taint(node.taints, pod.tolerations) is not None)


def _count(pods: list[Pod], sel: LabelSelector, ns: str) -> int:
    if sel.is_empty():
        return 0
    return sum(1 for p in pods if p.deletion_timestamp is None and p.namespace == ns and sel.matches(p.labels))


def ref_counts(pod: Pod, nodes: list[Node], pods_on: dict[str, list[Pod]],
               hard: list[TopologySpreadConstraint]) -> list[dict[str, int]]:
    counts: list[dict[str, int]] = [{} for _ in hard]
    for n in nodes:
        if any(c.topology_key not in n.labels for c in hard):
            continue
        for i, c in enumerate(hard):
            if not _included(c, pod, n):
                continue
            v = n.labels[c.topology_key]
            counts[i][v] = counts[i].get(v, 0) + _count(pods_on.get(n.name, []), c.label_selector, pod.namespace)
    return counts


def ref_update(counts: list[dict[str, int]], pod: Pod, changed: Pod, node: Node,
               hard: list[TopologySpreadConstraint], delta: int) -> None:
    """Upstream's updateWithPod: selector Matches (no Empty() check, no terminating check)."""
    if changed.namespace != pod.namespace or any(c.topology_key not in node.labels for c in hard):
        return
    for i, c in enumerate(hard):
        if c.label_selector.matches(changed.labels) and _included(c, pod, node):
            v = node.labels[c.topology_key]
            counts[i][v] = counts[i].get(v, 0) + delta


def ref_filter(pod: Pod, nodes: list[Node], counts: list[dict[str, int]],
               hard: list[TopologySpreadConstraint]) -> dict[str, tuple[Code, str]]:
    out: dict[str, tuple[Code, str]] = {}
    for n in nodes:
        verdict = (Code.SUCCESS, "")
        for i, c in enumerate(hard):
            v = n.labels.get(c.topology_key)
            if v is None:
                verdict = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "missing")
                break
            minimum = 0 if len(counts[i]) < c.min_domains else min(counts[i].values(), default=2**31 - 1)
            self_match = 1 if c.label_selector.matches(pod.labels) else 0
            if counts[i].get(v, 0) + self_match - minimum > c.max_skew:
                verdict = (Code.UNSCHEDULABLE, "skew")
                break
        out[n.name] = verdict
    return out


def ref_scores(pod: Pod, all_nodes: list[Node], candidates: list[Node], pods_on: dict[str, list[Pod]],
               soft: list[TopologySpreadConstraint]) -> dict[str, int]:
    ignored = {n.name for n in candidates if any(c.topology_key not in n.labels for c in soft)}
    seeded: list[dict[str, int]] = [{} for _ in soft]
    for n in candidates:
        if n.name in ignored:
            continue
        for i, c in enumerate(soft):
            if c.topology_key != HOST:
                seeded[i].setdefault(n.labels[c.topology_key], 0)
    weights = []
    for i, c in enumerate(soft):
        size = len(candidates) - len(ignored) if c.topology_key == HOST else len(seeded[i])
        weights.append(math.log(size + 2))
    for n in all_nodes:
        if any(c.topology_key not in n.labels for c in soft):
            continue
        for i, c in enumerate(soft):
            if not _included(c, pod, n):
                continue
            v = n.labels[c.topology_key]
            if v in seeded[i] and c.topology_key != HOST:
                seeded[i][v] += _count(pods_on.get(n.name, []), c.label_selector, pod.namespace)
    raw: dict[str, int] = {}
    for n in candidates:
        if n.name in ignored:
            raw[n.name] = 0
            continue
        s = 0.0
        for i, c in enumerate(soft):
            v = n.labels.get(c.topology_key)
            if v is None:
                continue
            if c.topology_key == HOST:
                cnt = _count(pods_on.get(n.name, []), c.label_selector, pod.namespace)
            else:
                cnt = seeded[i][v]
            s += float(cnt) * weights[i] + float(c.max_skew - 1)
        raw[n.name] = math.floor(s) + (1 if s - math.floor(s) >= 0.5 else 0)
    kept = [raw[n.name] for n in candidates if n.name not in ignored]
    mn, mx = (min(kept), max(max(kept), 0)) if kept else (0, 0)
    out = {}
    for n in candidates:
        if n.name in ignored:
            out[n.name] = 0
        elif mx == 0:
            out[n.name] = 100
        else:
            out[n.name] = 100 * (mx + mn - raw[n.name]) // mx
    return out


# ---------------------------------------------------------------- random clusters


def random_cluster(rng: random.Random, n_nodes: int, n_pods: int) -> tuple[list[Node], list[Pod]]:
    nodes = []
    for i in range(n_nodes):
        labels = {}
        if rng.random() < 0.9:
            labels["zone"] = f"z{rng.randrange(3)}"
        if rng.random() < 0.7:
            labels["rack"] = f"r{rng.randrange(5)}"
        if rng.random() < 0.5:
            labels["pool"] = rng.choice(["a", "b"])
        taints = [TAINT] if rng.random() < 0.2 else None
        nodes.append(make_node(f"n{i}", labels=labels, taints=taints))
    pods = []
    for j in range(n_pods):
        labels = {}
        if rng.random() < 0.7:
            labels["app"] = rng.choice(["web", "db", "cache"])
        if rng.random() < 0.3:
            labels["tier"] = rng.choice(["x", "y"])
        pods.append(make_pod(f"e{j}", rng.choice(["default", "default", "other"]), labels=labels,
                             node_name=rng.choice(nodes).name,
                             deletion_timestamp="2024-01-01T00:00:00Z" if rng.random() < 0.05 else None))
    return nodes, pods


def random_pod(rng: random.Random, when: str) -> Pod:
    constraints = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        d: dict[str, Any] = {"maxSkew": rng.choice([1, 1, 2, 3]), "topologyKey": rng.choice(KEYS),
                             "whenUnsatisfiable": when if rng.random() < 0.8 else rng.choice(["DoNotSchedule",
                                                                                             "ScheduleAnyway"])}
        sel = rng.choice(SELECTORS)
        if sel is not None:
            d["labelSelector"] = sel
        if rng.random() < 0.3:
            d["minDomains"] = rng.randrange(1, 6)
        if rng.random() < 0.3:
            d["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.3:
            d["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
        constraints.append(d)
    kw: dict[str, Any] = {}
    if rng.random() < 0.3:
        kw["node_selector"] = {"pool": rng.choice(["a", "b"])}
    if rng.random() < 0.2:
        kw["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": [f"z{rng.randrange(3)}"]}]}]}}}
    if rng.random() < 0.3:
        kw["tolerations"] = [TOLERATION]
    labels = {"app": rng.choice(["web", "db"])} if rng.random() < 0.8 else {}
    return make_pod("incoming", labels=labels, topology_spread_constraints=constraints, **kw)


def _pods_on(pods: list[Pod]) -> dict[str, list[Pod]]:
    out: dict[str, list[Pod]] = {}
    for p in pods:
        out.setdefault(p.node_name, []).append(p)
    return out


def _runner(nodes: list[Node], pods: list[Pod]) -> PluginRunner:
    return PluginRunner(["PodTopologySpread"], nodes, pods,
                        args={"PodTopologySpread": {"defaultingType": "List", "defaultConstraints": []}})


@pytest.mark.parametrize("seed", range(40))
def test_filter_matches_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    nodes, pods = random_cluster(rng, rng.randrange(3, 25), rng.randrange(0, 60))
    r = _runner(nodes, pods)
    for _ in range(4):
        p = random_pod(rng, "DoNotSchedule")
        hard = [c for c in p.topology_spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]
        got = r.filter(p)
        if not hard:
            assert all(s is None for s in got.values())
            continue
        want = ref_filter(p, nodes, ref_counts(p, nodes, _pods_on(pods), hard), hard)
        for name, st in got.items():
            code, why = want[name]
            assert (Code.SUCCESS if st is None else st.code) == code, (seed, name)
            if why == "missing":
                assert st is not None and st.reasons[0].endswith("(missing required label)")


@pytest.mark.parametrize("seed", range(40))
def test_add_and_remove_pod_match_the_reference(seed: int) -> None:
    rng = random.Random(1000 + seed)
    nodes, pods = random_cluster(rng, rng.randrange(3, 15), rng.randrange(0, 40))
    r = _runner(nodes, pods)
    p = random_pod(rng, "DoNotSchedule")
    hard = [c for c in p.topology_spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]
    if not hard:
        return
    state, _, _ = r.pre_filter(p)
    pl = r.fw.plugins["PodTopologySpread"]
    want = ref_counts(p, nodes, _pods_on(pods), hard)
    present = list(pods)
    # Changes on one node, as preemption and nominated pods make them.
    target = rng.choice(nodes)
    for step in range(6):
        cand = [q for q in present if q.node_name == target.name]
        if cand and rng.random() < 0.5:
            changed, delta = rng.choice(cand), -1
            present.remove(changed)
            assert pl.remove_pod(state, p, PodInfo(changed), r.snapshot.get(target.name)) is None  # type: ignore[attr-defined]
        else:
            changed, delta = make_pod(f"x{seed}-{step}", labels={"app": rng.choice(["web", "db"])},
                                      node_name=target.name), 1
            present.append(changed)
            assert pl.add_pod(state, p, PodInfo(changed), r.snapshot.get(target.name)) is None  # type: ignore[attr-defined]
        ref_update(want, p, changed, target, hard, delta)
        s = state.read(PRE_FILTER_STATE_KEY)
        assert [s.domain_counts(i) for i in range(len(hard))] == want
        verdicts = ref_filter(p, nodes, want, hard)
        for n in nodes:
            st = pl.filter(state, p, r.snapshot.get(n.name))  # type: ignore[attr-defined]
            assert (Code.SUCCESS if st is None else st.code) == verdicts[n.name][0]
        rows = r.snapshot.order
        assert pl.filter_nodes(state, p, r.snapshot, rows).tolist() == [  # type: ignore[attr-defined]
            verdicts[r.snapshot.infos[int(x)].name][0] == Code.SUCCESS for x in rows]  # type: ignore[union-attr]


@pytest.mark.parametrize("seed", range(40))
def test_scores_match_the_reference(seed: int) -> None:
    rng = random.Random(2000 + seed)
    nodes, pods = random_cluster(rng, rng.randrange(2, 25), rng.randrange(0, 80))
    r = _runner(nodes, pods)
    for _ in range(4):
        p = random_pod(rng, "ScheduleAnyway")
        soft = [c for c in p.topology_spread_constraints if c.when_unsatisfiable == "ScheduleAnyway"]
        candidates = [n for n in nodes if rng.random() < 0.7] or nodes[:1]
        got = r.score(p, nodes=[n.name for n in candidates])["PodTopologySpread"]
        if not soft:
            assert got == {}
            continue
        assert got == ref_scores(p, nodes, candidates, _pods_on(pods), soft), seed


def test_vectorized_score_equals_per_node_on_a_larger_cluster() -> None:
    rng = random.Random(7)
    nodes, pods = random_cluster(rng, 300, 900)
    r = _runner(nodes, pods)
    for _ in range(5):
        p = random_pod(rng, "ScheduleAnyway")
        r.score(p)  # asserts vectorized == per-node
        r.filter(make_pod("h", labels=p.labels, topology_spread_constraints=[
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "web"}}}]))
    assert np.all(r.snapshot.order >= 0)
