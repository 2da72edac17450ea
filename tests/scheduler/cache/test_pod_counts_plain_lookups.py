"""``pod_counts.PLAIN_SELECTOR_LOOKUPS``: a PodCountIndex that finds its selectors by the identity
of the asker's key tuple and matches new signatures against its namespace's selectors only,
against the reference (every lookup by key, every kept selector visited), over random sequences
of pods added, relabelled (also as terminating) and removed in two namespaces, selectors asked
for as the same objects or parsed again, and few selectors kept (evictions): the same counts as
a fresh count, the same kept selectors in the same least-recently-used order, and no dropped
selector kept by the identity memo."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.labels import LabelSelector
from ksched.api.pod import Pod
from ksched.scheduler.cache import pod_counts
from ksched.scheduler.cache.pod_counts import PodCountIndex
from ksched.testing import build_snapshot, make_node, make_pod

NAMESPACES = ("default", "other")
SELECTOR_DICTS: list[dict[str, Any]] = [
    {"matchLabels": {"app": "a"}},
    {"matchLabels": {"app": "b", "tier": "x"}},
    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "c"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]},
    {"matchLabels": {"app": "c"}},
]
SHARED = [LabelSelector.from_dict(d) for d in SELECTOR_DICTS]

_LABELS = st.fixed_dictionaries({}, optional={"app": st.sampled_from("abc"), "tier": st.sampled_from("xy")})
_OP = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(NAMESPACES), _LABELS, st.integers(0, 3)),
    st.tuples(st.just("relabel"), st.integers(0, 100), _LABELS, st.booleans()),
    st.tuples(st.just("remove"), st.integers(0, 100)),
    st.tuples(st.just("ask"), st.sampled_from(NAMESPACES), st.integers(0, len(SELECTOR_DICTS) - 1), st.booleans(),
              st.booleans()),
)


def _fresh(snapshot: Any, namespace: str, sel: LabelSelector, terminating: bool) -> list[int]:
    return [sum(1 for pi in ni.pods if pi.pod.namespace == namespace and sel.matches(pi.pod.labels)
                and (terminating or pi.pod.deletion_timestamp is None)) if ni is not None else 0
            for ni in snapshot.infos]


def _ask(index: PodCountIndex, flag: bool, ns: str, sel: LabelSelector, term: bool) -> list[int]:
    old = pod_counts.PLAIN_SELECTOR_LOOKUPS
    pod_counts.PLAIN_SELECTOR_LOOKUPS = flag
    try:
        return index.counts(ns, sel, term).tolist()  # type: ignore[no-any-return]
    finally:
        pod_counts.PLAIN_SELECTOR_LOOKUPS = old


@settings(max_examples=120, deadline=None)
@given(st.lists(_OP, min_size=1, max_size=80), st.integers(1, 5))
def test_plain_lookups_agree_with_the_reference(ops: list[tuple[Any, ...]], max_selectors: int) -> None:
    old_max = PodCountIndex.MAX_SELECTORS
    PodCountIndex.MAX_SELECTORS = max_selectors
    try:
        _run(ops)
    finally:
        PodCountIndex.MAX_SELECTORS = old_max


def _run(ops: list[tuple[Any, ...]]) -> None:
    nodes = [make_node(f"n{i}") for i in range(4)]
    cache, snap = build_snapshot(nodes)
    fast = PodCountIndex(snap)
    ref = PodCountIndex(snap)
    pods: dict[str, Pod] = {}
    hits = 0
    for step, op in enumerate(ops):
        if op[0] == "add":
            p = make_pod(f"p{step}", op[1], labels=op[2], node_name=f"n{op[3]}")
            cache.add_pod(p)
            pods[p.name] = p
        elif op[0] == "relabel" and pods:
            old = pods[sorted(pods)[op[1] % len(pods)]]
            raw = {**old.raw, "metadata": {**old.raw["metadata"], "labels": op[2]}}
            if op[3]:
                raw["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
            pods[old.name] = Pod(raw)
            cache.update_pod(old, pods[old.name])
        elif op[0] == "remove" and pods:
            cache.remove_pod(pods.pop(sorted(pods)[op[1] % len(pods)]))
        elif op[0] == "ask":
            _, ns, i, term, shared = op
            sel = SHARED[i] if shared else LabelSelector.from_dict(SELECTOR_DICTS[i])
            cache.update_snapshot(snap)
            before = len(fast._by_id)
            got = _ask(fast, True, ns, sel, term)
            hits += len(fast._by_id) == before
            assert got == _ask(ref, False, ns, sel, term) == _fresh(snap, ns, sel, term)
            assert list(fast._selectors) == list(ref._selectors)
            assert sorted(id(e) for d in fast._by_ns.values() for e in d.values()) == sorted(
                id(e) for e in fast._selectors.values())
            # A dropped selector (and its counts array) is not kept alive by the identity memo.
            assert all(e.alive and e is fast._selectors[e.key] for _, e in fast._by_id.values())
    cache.update_snapshot(snap)
    for ns in NAMESPACES:
        for sel in SHARED:
            assert _ask(fast, True, ns, sel, False) == _ask(ref, False, ns, sel, False) == _fresh(snap, ns, sel, False)
            assert list(fast._selectors) == list(ref._selectors)


def test_a_selector_asked_for_again_is_found_by_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second ask with the same selector object does not look the key up (the key tuple's
    hash, which hashes each Requirement in Python, is not worked out), and a new signature is
    matched against its own namespace's selectors only."""
    cache, snap = build_snapshot([make_node("n0")], [make_pod("p0", labels={"app": "a"}, node_name="n0")])
    index = PodCountIndex(snap)
    sel = LabelSelector.from_dict({"matchLabels": {"app": "a"}})
    other = LabelSelector.from_dict({"matchLabels": {"app": "b"}})
    assert index.counts("default", sel).tolist() == [1]
    index.counts("other", other)
    calls: list[object] = []

    class Counting(dict):  # type: ignore[type-arg]
        def get(self, key: object, default: object = None) -> object:
            calls.append(key)
            return super().get(key, default)

    index._selectors = Counting(index._selectors)  # type: ignore[assignment]
    index._selectors.move_to_end = lambda key: None  # type: ignore[attr-defined]
    assert index.counts("default", sel).tolist() == [1]
    assert calls == []
    wanted: list[str] = []
    real = pod_counts._SelectorCounts.wants

    def wants(self: Any, sig: Any) -> bool:
        wanted.append(self.namespace)
        return real(self, sig)

    monkeypatch.setattr(pod_counts._SelectorCounts, "wants", wants)
    cache.add_pod(make_pod("p1", labels={"app": "c"}, node_name="n0"))
    cache.update_snapshot(snap)
    assert index.counts("default", sel).tolist() == [1]
    assert wanted == ["default"]  # the new signature: matched against "default"'s selector only
