"""InterPodAffinity's queries found by token (``_index.QUERY_TOKENS``: by the identity of the key
object, else by its value), existing pods' term groups found by the identity of their keys
(``_index.TERM_GROUPS_BY_ID``), a pod added to a row counted in one call (``_index.FUSED_ADDS``)
and PreScore's resolved preferred terms kept per pod template
(``plugin.TEMPLATE_TERMS``), against the reference (all off: every term resolved and every
query and term group found by its key, each cycle).

Random clusters are changed one step at a time (pods with and without terms bound, assumed,
forgotten and removed; nodes relabelled, added and removed); after every step each incoming pod
(replicas of a few templates, with preferred and required terms, some with namespace selectors)
is filtered and scored with the flags on and then off, raw and normalized. Small token-map
bounds make the maps empty themselves during a run."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.scheduler.plugins.interpodaffinity.test_interpodaffinity_index import _informers
from tests.scheduler.plugins.interpodaffinity.test_interpodaffinity_kept_score import _node_labels, _pod

from ksched.api.pod import Pod
from ksched.scheduler.framework.template import template_cache
from ksched.scheduler.plugins.interpodaffinity import _index, plugin
from ksched.testing import PluginRunner, make_node, make_pod


def _set(mp: pytest.MonkeyPatch, on: bool) -> None:
    mp.setattr(_index, "QUERY_TOKENS", on)
    mp.setattr(_index, "TERM_GROUPS_BY_ID", on)
    mp.setattr(_index, "FUSED_ADDS", on)
    mp.setattr(plugin, "TEMPLATE_TERMS", on)


def _replica(tpl: Pod, i: int) -> Pod:
    """Another pod of ``tpl``'s template (same namespace, labels and spec)."""
    p = make_pod(f"{tpl.name}-r{i}", tpl.namespace, labels=dict(tpl.labels),
                 affinity=(tpl.raw.get("spec") or {}).get("affinity"))
    template_cache(p)
    return p


def _both(fast: PluginRunner, ref: PluginRunner, pod: Pod, mp: pytest.MonkeyPatch) -> None:
    """Verdicts and scores: ``fast`` (its index kept with the flags on) with the flags on,
    ``ref`` (kept with them off) with them off."""
    got = []
    for r, flag in ((fast, True), (ref, False)):
        _set(mp, flag)
        verdicts = {n: (None if s is None else (s.code, s.reasons)) for n, s in r.filter(pod).items()}
        _, _, st_ = r.pre_filter(pod)
        scores = None
        if st_ is None:
            scores = (r.score(pod, normalize=False)["InterPodAffinity"], r.score(pod)["InterPodAffinity"])
        got.append((verdicts, scores))
    assert got[0] == got[1], pod.name


def _run(rng: random.Random, mp: pytest.MonkeyPatch, steps: int, small: bool) -> None:
    if small:
        mp.setattr(_index, "_TOKENS_MAX", 3)
        mp.setattr(_index, "_TOKENS_BY_ID_MAX", 2)
        mp.setattr(_index, "_TERM_GROUPS_BY_ID_MAX", 2)
    nodes = {}
    for i in range(10):
        name = f"n{i}"
        nodes[name] = make_node(name, labels=_node_labels(rng, name))
    pods = [_pod(rng, rng.choice(list(nodes)), p_terms=0.4) for _ in range(25)]
    args = {"InterPodAffinity": {"hardPodAffinityWeight": rng.choice([0, 1, 5])}}
    runners = [PluginRunner(["InterPodAffinity"], list(nodes.values()), pods, informers=_informers(), args=args)
               for _ in range(2)]
    templates = [_pod(rng, p_terms=0.7) for _ in range(3)]
    pool = [_pod(rng, p_terms=0.8) for _ in range(3)] + templates
    seq = 0
    bound = {x.uid: x for x in pods}
    assumed: dict[str, Pod] = {}
    for _ in range(steps):
        for tpl in templates:
            seq += 1
            _both(runners[0], runners[1], _replica(tpl, seq), mp)
        for r in runners:
            r.refresh()
        _step(rng, runners, nodes, bound, assumed, pool)


class _Caches:
    """Every runner's cache: a method called on this is called on each of them."""

    def __init__(self, runners: list[PluginRunner]) -> None:
        self.caches = [r.cache for r in runners]

    def __getattr__(self, name: str) -> Any:
        return lambda *a: [getattr(c, name)(*a) for c in self.caches]


def _existing(rng: random.Random, node: str, pool: list[Pod]) -> Pod:
    """A new pod, or (mostly) a replica of a pooled one: pods of one template share term groups
    that queries' aggregates subscribe to, so an addition bumps them."""
    if pool and rng.random() < 0.7:
        tpl = rng.choice(pool)
        _seq[0] += 1
        p = make_pod(f"{tpl.name}-e{_seq[0]}", tpl.namespace, labels=dict(tpl.labels), node_name=node,
                     affinity=(tpl.raw.get("spec") or {}).get("affinity"))
        template_cache(p)
        return p
    return _pod(rng, node, p_terms=rng.choice([0.0, 0.5]))


_seq = [0]


def _step(rng: random.Random, runners: list[PluginRunner], nodes: dict[str, Any], bound: dict[str, Pod],
          assumed: dict[str, Pod], pool: list[Pod]) -> None:
    """One random change, made to every runner's cache."""
    c: Any = _Caches(runners)
    op = rng.random()
    live = list(nodes)
    if op < 0.4:
        x = _existing(rng, rng.choice(live), pool)
        c.add_pod(x)
        bound[x.uid] = x
    elif op < 0.45 and bound:
        c.remove_pod(bound.pop(rng.choice(list(bound))))
    elif op < 0.6:
        x = _existing(rng, rng.choice(live), pool)
        c.assume_pod(x)
        assumed[x.uid] = x
    elif op < 0.65 and assumed:
        c.forget_pod(assumed.pop(rng.choice(list(assumed))))
    elif op < 0.8:
        name = rng.choice(live)
        new = make_node(name, labels=_node_labels(rng, name))
        c.update_node(nodes[name], new)
        nodes[name] = new
    elif op < 0.9:
        name = f"x{rng.randint(0, 10**6)}"
        if name not in nodes:
            nodes[name] = make_node(name, labels=_node_labels(rng, name))
            c.add_node(nodes[name])
    elif len(nodes) > 3:
        c.remove_node(nodes.pop(rng.choice(live)))
    for r in runners:
        r.refresh()


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_query_tokens_and_template_terms_agree_with_reference(seed: int, small: bool) -> None:
    with pytest.MonkeyPatch.context() as mp:
        _run(random.Random(seed), mp, 16, small)


def test_template_terms_are_shared() -> None:
    """Replicas of one template get the same resolved terms (so the same query keys), unless a
    term's namespaceSelector names namespaces."""
    aff = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}}]}}
    r = PluginRunner(["InterPodAffinity"], [make_node("n0", labels={"zone": "z"})], [], informers=_informers())
    p = r.fw.plugins["InterPodAffinity"]
    a, b = (make_pod(n, labels={"app": "a"}, affinity=aff) for n in ("a", "b"))
    template_cache(a)
    template_cache(b)
    ta = p._preferred_terms(a, a.affinity.pod_affinity_preferred, a.affinity.pod_anti_affinity_preferred)
    tb = p._preferred_terms(b, b.affinity.pod_affinity_preferred, b.affinity.pod_anti_affinity_preferred)
    assert ta is tb and ta[0][1] == -5
    sel = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone",
                                          "namespaceSelector": {"matchLabels": {"team": "a"}}}}]}}
    c, d = (make_pod(n, labels={"app": "a"}, affinity=sel) for n in ("c", "d"))
    template_cache(c)
    template_cache(d)
    tc = p._preferred_terms(c, c.affinity.pod_affinity_preferred, c.affinity.pod_anti_affinity_preferred)
    td = p._preferred_terms(d, d.affinity.pod_affinity_preferred, d.affinity.pod_anti_affinity_preferred)
    assert tc is not td
