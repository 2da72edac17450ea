"""The scheduler cache's swaps with their searches in C (``cache.FAST_SWAPS``) against the
reference loops (``_swap_in``, ``NodeInfo.replace_pod``): the same lists, object by object, for
any pod present or absent, moved or swapped in place; and whole caches driven alike with the
flag on and off hold the same NodeInfos and give the same snapshots (pod objects by identity),
the same pod counts and the same affinity counter."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ksched.api.labels import LabelSelector
from ksched.api.pod import Pod
from ksched.scheduler.cache import cache as cache_mod
from ksched.scheduler.cache.cache import Cache
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.testing import make_node, make_pod

AFF = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "podAffinityTerm": {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}}]}}
ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}]}}
KINDS = ["plain", "affinity", "anti"]


def _affinity(kind: str) -> dict[str, Any] | None:
    return AFF if kind == "affinity" else ANTI if kind == "anti" else None


def _lists(ni: NodeInfo) -> list[list[int]]:
    return [[id(x.pod) for x in lst] for lst in (ni.pods, ni.pods_with_affinity, ni.pods_with_required_anti_affinity)]


@contextmanager
def _flag(on: bool) -> Iterator[None]:
    saved = cache_mod.FAST_SWAPS
    cache_mod.FAST_SWAPS = on
    try:
        yield
    finally:
        cache_mod.FAST_SWAPS = saved


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(KINDS), min_size=0, max_size=10), st.data())
def test_fast_swap_leaves_the_lists_the_reference_leaves(kinds: list[str], data: st.DataObject) -> None:
    ni = NodeInfo()
    ni.set_node(make_node("n"))
    infos = []
    for i, k in enumerate(kinds):
        pi = PodInfo(make_pod(f"p{i}", uid=f"u{i}", node_name="n", affinity=_affinity(k)))
        ni.add_pod(pi)
        infos.append(pi)
    absent = PodInfo(make_pod("x", uid="ux", node_name="n", affinity=_affinity(data.draw(st.sampled_from(KINDS)))))
    old = data.draw(st.sampled_from([*infos, absent]))
    moved = data.draw(st.booleans())
    new = old.with_pod(old.pod.shallow_copy())
    ref, fast = ni.clone(), ni.clone()
    cache_mod._swap_in(ref, old, new, moved)
    cache_mod._swap_in_fast(fast, old, new, moved)
    assert _lists(fast) == _lists(ref)
    if old is absent:
        assert _lists(fast) == _lists(ni)
    elif not moved:
        conf = ni.clone()
        conf.replace_pod(old, new)  # the confirmation's reference
        assert _lists(fast) == _lists(conf)
    else:
        assert fast.pods[-1] is new


def _pod(name: str, node: str, kind: int, app: str) -> Pod:
    return make_pod(name, uid=f"uid-{name}", node_name=node, requests={"cpu": "100m"}, labels={"app": app},
                    affinity=_affinity(KINDS[kind % 3]))


def _status_write(p: Pod, n: int) -> Pod:
    raw = dict(p.raw)
    raw["metadata"] = {**p.raw["metadata"], "resourceVersion": str(1000 + n)}
    raw["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if n % 2 else "False"}]}
    return p.with_status(raw)


def _snap_lists(s: Snapshot) -> dict[str, list[list[int]]]:
    out = {}
    for name in s.all_nodes().names:
        ni = s.get(name)
        assert ni is not None
        out[name] = _lists(ni)
    return out


NODES = ["n0", "n1", "n2"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1023)), min_size=3, max_size=60))
@example([(0, 0), (1, 0), (4, 0), (2, 0), (4, 0), (3, 0)])  # assumed, synced, confirmed, written
@example([(1, 0), (2, 0), (4, 0), (2, 0), (4, 0)])  # assumed and confirmed between two syncs
def test_caches_with_and_without_fast_swaps_agree(ops: list[tuple[int, int]]) -> None:
    """Pods assumed, confirmed, status-written and removed, with snapshot updates in between:
    the snapshots hold the same objects in the same order with the flag on and off."""
    caches = {True: Cache(), False: Cache()}
    snaps = {on: Snapshot(c.table.cols) for on, c in caches.items()}
    for c in caches.values():
        for name in NODES:
            c.add_node(make_node(name, cpu="100"))
    assumed: dict[str, Pod] = {}
    bound: dict[str, Pod] = {}

    def each(f: Any) -> None:
        for on, c in caches.items():
            with _flag(on):
                f(c, snaps[on])

    for n, (op, x) in enumerate(ops):
        if op == 0:
            each(lambda c, s: c.update_snapshot(s))
        elif op in (1, 2):
            p = _pod(f"p{n}", NODES[x % len(NODES)], x, "ab"[x % 2])
            each(lambda c, s, p=p: c.assume_pod(p))
            assumed[p.uid] = p
        elif op == 4 and assumed:
            uid = sorted(assumed)[x % len(assumed)]
            p = assumed.pop(uid)
            confirmed = Pod({**p.raw, "metadata": {**p.raw["metadata"], "resourceVersion": str(n)}})
            each(lambda c, s, p=confirmed: c.add_pod(p))
            bound[uid] = confirmed
        elif op == 3 and bound:
            uid = sorted(bound)[x % len(bound)]
            old, new = bound[uid], _status_write(bound[uid], n)
            each(lambda c, s, old=old, new=new: c.update_pod(old, new))
            bound[uid] = new
        elif op == 5 and bound:
            uid = sorted(bound)[x % len(bound)]
            p = bound.pop(uid)
            each(lambda c, s, p=p: c.remove_pod(p))
        if x % 3 == 0:
            each(lambda c, s: c.update_snapshot(s))
            assert _snap_lists(snaps[True]) == _snap_lists(snaps[False])
            assert snaps[True].affinity_changes == snaps[False].affinity_changes
            for on in (True, False):
                idx = snaps[on].pod_counts()
                counts = idx.counts("default", LabelSelector.from_dict({"matchLabels": {"app": "a"}}), False)
                assert [int(counts[snaps[on].row_of[nm]]) for nm in NODES] == [
                    sum(1 for pi in caches[on].nodes[nm].pods if pi.pod.labels.get("app") == "a") for nm in NODES]
        assert {k: _lists(v) for k, v in caches[True].nodes.items()} == {
            k: _lists(v) for k, v in caches[False].nodes.items()}
    each(lambda c, s: c.update_snapshot(s))
    assert _snap_lists(snaps[True]) == _snap_lists(snaps[False])
    # Both hold the cache's own objects (the swaps reached the snapshot).
    for nm in NODES:
        ni = snaps[True].get(nm)
        assert ni is not None and _lists(ni) == _lists(caches[True].nodes[nm])
