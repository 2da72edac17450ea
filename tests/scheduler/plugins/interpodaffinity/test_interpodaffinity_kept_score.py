"""InterPodAffinity's PreScore for a pod without preferred terms of its own, kept across cycles
(``plugin.KEPT_EXISTING_SCORE``) against the reference (the index caught up and queried every
cycle).

Random clusters are changed one step at a time (pods with and without terms bound, assumed,
forgotten and removed; nodes relabelled, added and removed); after every step each incoming pod
(no preferred terms; some with required ones, which PreScore ignores) is scored with the flag on
and then off, raw and normalized, and the Skip decisions compared. The kept answer is only
reused while ``Snapshot.affinity_changes`` stands still, so a step that moves a pod with terms,
or relabels a node under one, must change it (``test_affinity_changes_moves``)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.scheduler.plugins.interpodaffinity.test_interpodaffinity_index import NAMESPACES, _informers

from ksched.api.pod import Pod
from ksched.scheduler.framework.types import PodInfo
from ksched.scheduler.plugins.interpodaffinity import InterPodAffinity, plugin
from ksched.testing import PluginRunner, make_node, make_pod

TOPO_KEYS = ["zone", "kubernetes.io/hostname", "rack"]


def _term(rng: random.Random) -> dict[str, Any]:
    t: dict[str, Any] = {"labelSelector": {"matchLabels": {"app": rng.choice(["a", "b", "c"])}},
                         "topologyKey": rng.choice(TOPO_KEYS)}
    if rng.random() < 0.2:
        t["namespaceSelector"] = {"matchLabels": {"team": rng.choice(["a", "b"])}}
    elif rng.random() < 0.2:
        t["namespaceSelector"] = {}
    return t


def _affinity(rng: random.Random, p_terms: float, preferred: bool = True) -> dict[str, Any] | None:
    a: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        d: dict[str, Any] = {}
        if rng.random() < p_terms:
            d["requiredDuringSchedulingIgnoredDuringExecution"] = [_term(rng)]
        if preferred and rng.random() < p_terms:
            d["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "podAffinityTerm": _term(rng)}]
        if d:
            a[kind] = d
    return a or None


_seq = [0]


def _pod(rng: random.Random, node: str = "", p_terms: float = 0.3, preferred: bool = True) -> Pod:
    _seq[0] += 1
    labels = {"app": rng.choice(["a", "b", "c"])} if rng.random() < 0.9 else {}
    return make_pod(f"p{_seq[0]}", rng.choice(list(NAMESPACES)), labels=labels, node_name=node,
                    affinity=_affinity(rng, p_terms, preferred))


def _node_labels(rng: random.Random, name: str) -> dict[str, str]:
    labels = {"kubernetes.io/hostname": name}
    if rng.random() < 0.85:
        labels["zone"] = rng.choice(["z1", "z2", "z3"])
    if rng.random() < 0.5:
        labels["rack"] = rng.choice(["r1", "r2"])
    return labels


def _both(r: PluginRunner, pod: Pod, monkeypatch: pytest.MonkeyPatch) -> None:
    """Raw and normalized scores, flag on (first: it may reuse a kept answer) and then off."""
    got = []
    for flag in (True, False):
        monkeypatch.setattr(plugin, "KEPT_EXISTING_SCORE", flag)
        got.append((r.score(pod, normalize=False)["InterPodAffinity"], r.score(pod)["InterPodAffinity"]))
    assert got[0] == got[1], pod.name


def _run(rng: random.Random, monkeypatch: pytest.MonkeyPatch, steps: int) -> int:
    """The random cluster's steps; returns how many flag-on PreScores reused a kept answer."""
    hard = rng.choice([0, 1, 5])
    nodes = {}
    for i in range(12):
        name = f"n{i}"
        nodes[name] = make_node(name, labels=_node_labels(rng, name))
    pods = [_pod(rng, rng.choice(list(nodes))) for _ in range(30)]
    r = PluginRunner(["InterPodAffinity"], list(nodes.values()), pods, informers=_informers(),
                     args={"InterPodAffinity": {"hardPodAffinityWeight": hard}})
    p = r.fw.plugins["InterPodAffinity"]
    assert isinstance(p, InterPodAffinity)
    p._existing_memo.clear()
    incoming = [_pod(rng, p_terms=0.3, preferred=False) for _ in range(4)]
    # Flag-on PreScores answered from a kept answer: those that did not ask the index.
    kept_calls = [0, 0]  # (calls, calls that asked the index)
    orig_index = InterPodAffinity.index
    orig_kept = InterPodAffinity._pre_score_existing_kept
    inside = [False]

    def counting_index(self: InterPodAffinity, infos: Any) -> Any:
        kept_calls[1] += inside[0]
        return orig_index(self, infos)

    def counting_kept(self: InterPodAffinity, *a: Any) -> Any:
        kept_calls[0] += 1
        inside[0] = True
        try:
            return orig_kept(self, *a)
        finally:
            inside[0] = False

    monkeypatch.setattr(InterPodAffinity, "index", counting_index)
    monkeypatch.setattr(InterPodAffinity, "_pre_score_existing_kept", counting_kept)
    bound = {x.uid: x for x in pods}
    assumed: dict[str, Pod] = {}
    c = r.cache
    for _ in range(steps):
        for pod in incoming:
            _both(r, pod, monkeypatch)
        random_change(rng, c, nodes, bound, assumed, (0.3, 0.45, 0.55, 0.6, 0.8, 0.9), [0.0, 0.4], 3)
        r.refresh()
    return kept_calls[0] - kept_calls[1]


@settings(max_examples=25)
@given(st.integers(0, 2**32 - 1))
def test_kept_prescore_agrees_with_reference(seed: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        _run(random.Random(seed), mp, 15)


def test_kept_prescore_is_reused() -> None:
    """Over many steps the fast path does reuse kept answers (else the test above proves
    nothing about it)."""
    with pytest.MonkeyPatch.context() as mp:
        assert _run(random.Random(7), mp, 40) > 20


def test_affinity_changes_moves() -> None:
    """The snapshot's counter moves exactly when a pod with terms comes or goes, or the node
    under one changes; a pod without terms, or a node without such pods, leaves it."""
    term = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "a"}},
                                          "topologyKey": "zone"}}]}}
    nodes = [make_node(f"n{i}", labels={"zone": f"z{i}"}) for i in range(3)]
    with_terms = make_pod("t", labels={"app": "a"}, node_name="n0", affinity=term)
    r = PluginRunner(["InterPodAffinity"], nodes, [with_terms])
    snap = r.snapshot

    def moved(change: Any) -> bool:
        before = snap.affinity_changes
        change()
        r.refresh()
        return snap.affinity_changes != before

    c = r.cache
    plain = make_pod("plain", labels={"app": "a"}, node_name="n0")
    assert not moved(lambda: c.add_pod(plain))  # same node as the term pod, no terms
    assert not moved(lambda: c.update_node(nodes[1], make_node("n1", labels={"zone": "z9"})))
    relabelled = make_node("n0", labels={"zone": "z7"})
    assert moved(lambda: c.update_node(nodes[0], relabelled))  # the node under a term pod
    other = make_pod("t2", labels={"app": "b"}, node_name="n2", affinity=term)
    assert moved(lambda: c.add_pod(other))
    assert moved(lambda: c.remove_pod(with_terms))
    assert not moved(lambda: c.remove_pod(plain))
    # The counter compares the lists of PodInfos with ``!=``: by identity only while PodInfo
    # keeps object's equality.
    assert PodInfo.__eq__ is object.__eq__


def random_change(rng: random.Random, c: Any, nodes: dict[str, Any], bound: dict[str, Any],
                  assumed: dict[str, Any], cuts: tuple[float, float, float, float, float, float],
                  p_terms: list[float], min_nodes: int) -> None:
    """One random change to the cache ``c``: by ``rng.random()`` against ``cuts``, a pod bound,
    removed, assumed or forgotten, a node relabelled, added, or removed while more than
    ``min_nodes`` remain (shared with test_interpodaffinity_fewer_arrays)."""
    op = rng.random()
    live = list(nodes)
    if op < cuts[0]:
        x = _pod(rng, rng.choice(live), p_terms=rng.choice(p_terms))
        c.add_pod(x)
        bound[x.uid] = x
    elif op < cuts[1] and bound:
        c.remove_pod(bound.pop(rng.choice(list(bound))))
    elif op < cuts[2]:
        x = _pod(rng, rng.choice(live), p_terms=rng.choice(p_terms))
        c.assume_pod(x)
        assumed[x.uid] = x
    elif op < cuts[3] and assumed:
        c.forget_pod(assumed.pop(rng.choice(list(assumed))))
    elif op < cuts[4]:
        name = rng.choice(live)
        new = make_node(name, labels=_node_labels(rng, name))
        c.update_node(nodes[name], new)
        nodes[name] = new
    elif op < cuts[5]:
        name = f"x{rng.randint(0, 10**6)}"
        if name not in nodes:
            nodes[name] = make_node(name, labels=_node_labels(rng, name))
            c.add_node(nodes[name])
    elif len(nodes) > min_nodes:
        c.remove_node(nodes.pop(rng.choice(live)))
