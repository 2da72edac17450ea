"""The snapshot's matching-pod count index (``cache/pod_counts.py``): counts equal a fresh count
after any sequence of pod and node changes, selectors are created on first use and dropped when
too many or idle, signatures without pods are dropped."""

from __future__ import annotations

import random

import pytest

from ksched.api.labels import LabelSelector
from ksched.api.pod import Pod
from ksched.scheduler.cache.pod_counts import PodCountIndex
from ksched.testing import build_snapshot, make_node, make_pod

NAMESPACES = ("default", "other")
SELECTORS = [
    LabelSelector.from_dict({"matchLabels": {"app": "a"}}),
    LabelSelector.from_dict({"matchLabels": {"app": "b", "tier": "x"}}),
    LabelSelector.from_dict({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "c"]}]}),
    LabelSelector.from_dict({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
    LabelSelector.from_dict({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}),
    LabelSelector.from_dict({}),
    LabelSelector.nothing(),
]


def _fresh(snapshot: object, namespace: str, sel: LabelSelector, terminating: bool) -> list[int]:
    return [sum(1 for pi in ni.pods if pi.pod.namespace == namespace and sel.matches(pi.pod.labels)
                and (terminating or pi.pod.deletion_timestamp is None)) if ni is not None else 0
            for ni in snapshot.infos]  # type: ignore[attr-defined]


def _labels(rng: random.Random) -> dict[str, str]:
    out = {}
    if rng.random() < 0.8:
        out["app"] = rng.choice("abc")
    if rng.random() < 0.4:
        out["tier"] = rng.choice("xy")
    return out


@pytest.mark.parametrize("seed", range(8))
def test_counts_follow_every_change(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [make_node(f"n{i}") for i in range(rng.randint(1, 8))]
    cache, snap = build_snapshot(nodes)
    index = snap.pod_counts()
    pods: dict[str, Pod] = {}
    objs = {n.name: n for n in nodes}
    live = [n.name for n in nodes]
    for step in range(60):
        r = rng.random()
        if r < 0.45 or not pods:
            p = make_pod(f"p{step}", rng.choice(NAMESPACES), labels=_labels(rng), node_name=rng.choice(live))
            cache.add_pod(p)
            pods[p.name] = p
        elif r < 0.6:
            cache.remove_pod(pods.pop(rng.choice(sorted(pods))))
        elif r < 0.8:
            old = pods[rng.choice(sorted(pods))]
            raw = {**old.raw, "metadata": {**old.raw["metadata"], "labels": _labels(rng)}}
            if rng.random() < 0.3:
                raw["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
            pods[old.name] = Pod(raw)
            cache.update_pod(old, pods[old.name])
        elif r < 0.9:
            n = objs[f"m{step}"] = make_node(f"m{step}")
            cache.add_node(n)
            live.append(n.name)
        elif len(live) > 1:
            name = live.pop(rng.randrange(len(live)))
            cache.remove_node(objs[name])  # its pods stay behind, still counted
        if rng.random() < 0.5:
            cache.update_snapshot(snap)
            for ns in NAMESPACES:
                for sel in rng.sample(SELECTORS, 3):
                    term = rng.random() < 0.3
                    assert index.counts(ns, sel, term).tolist() == _fresh(snap, ns, sel, term), (seed, step)


def test_selectors_are_bounded_and_idle_ones_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    cache, snap = build_snapshot([make_node("n0")], [make_pod("p", labels={"app": "a"}, node_name="n0")])
    index = snap.pod_counts()
    monkeypatch.setattr(PodCountIndex, "MAX_SELECTORS", 3)
    sels = [LabelSelector.from_dict({"matchLabels": {"app": a}}) for a in "abcde"]
    for s in sels:
        index.counts("default", s)
    assert len(index) == 3
    # The oldest were dropped and are counted again from the signatures when asked for.
    assert index.counts("default", sels[0]).tolist() == [1]
    monkeypatch.setattr(PodCountIndex, "IDLE_SYNCS", 5)
    for i in range(1100):  # an idle check runs every 1024 catch-ups
        cache.add_pod(make_pod(f"q{i}", labels={"app": "z"}, node_name="n0"))
        cache.update_snapshot(snap)
        index.counts("default", sels[1])
    assert len(index) == 1
    assert index.counts("default", sels[1]).tolist() == [0]
    assert index.counts("default", LabelSelector.from_dict({"matchLabels": {"app": "z"}})).tolist() == [1100]


def test_signatures_without_pods_are_dropped() -> None:
    pods = [make_pod(f"p{i}", labels={"app": "a", "i": str(i)}, node_name="n0") for i in range(20)]
    cache, snap = build_snapshot([make_node("n0")], pods)
    index = snap.pod_counts()
    sel = LabelSelector.from_dict({"matchLabels": {"app": "a"}})
    assert index.counts("default", sel).tolist() == [20]
    assert index.signatures() == 20
    for p in pods[:15]:
        cache.remove_pod(p)
    cache.update_snapshot(snap)
    assert index.counts("default", sel).tolist() == [5]
    assert index.signatures() == 5
