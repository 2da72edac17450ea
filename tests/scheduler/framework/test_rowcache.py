"""The row cache (ksched.scheduler.framework.rowcache.RowResultCache) on its own, with fake
row-local plugins whose verdicts and scores depend only on a node's NodeInfo (its pod count
and ``color`` label) and the pod's ``shape`` label (their row-local key).

Whatever the cache reuses, its arrays must equal calling the per-node Filter/Score on every
row afresh (free rows: False / 0); it must call the plugins only for the rows that changed;
and a Score error must leave nothing behind that a later call would reuse."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.pod import Pod
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import (
    FilterPlugin,
    RowLocal,
    ScorePlugin,
    VectorizedFilter,
    VectorizedScore,
)
from ksched.scheduler.framework.rowcache import RowResultCache
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo
from ksched.testing import build_snapshot, make_node, make_pod

COLORS = ("red", "green", "blue", "")
SHAPES = ("a", "b", "c")


def verdict(salt: int, key: str, ni: NodeInfo) -> bool:
    assert ni.node is not None
    color = ni.node.labels.get("color", "")
    return (len(ni.pods) * (salt + 1) + ord(key) + len(color)) % 3 != 0


def value(salt: int, key: str, ni: NodeInfo) -> int:
    assert ni.node is not None
    color = ni.node.labels.get("color", "")
    return (len(ni.pods) * 7 + ord(key) * (salt + 3) + len(color) * 11) % 101 + 1  # never 0


class Fake(FilterPlugin, ScorePlugin, RowLocal):
    """Per-node Filter and Score, recording the nodes they are called for. ``fail_on``: nodes
    where Score reports an error."""

    name = "Fake"
    salt = 0

    def __init__(self) -> None:
        super().__init__()
        self.filter_calls: list[str] = []
        self.score_calls: list[str] = []
        self.fail_on: set[str] = set()

    def row_local_key(self, pod: Pod) -> Hashable:
        return pod.labels.get("shape", "a")

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        self.filter_calls.append(node_info.name)
        if verdict(self.salt, str(self.row_local_key(pod)), node_info):
            return None
        return Status(Code.UNSCHEDULABLE, "no")

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        self.score_calls.append(node_info.name)
        if node_info.name in self.fail_on:
            return 0, Status(Code.ERROR, f"cannot score {node_info.name}")
        return value(self.salt, str(self.row_local_key(pod)), node_info), None

    def reset_calls(self) -> None:
        self.filter_calls.clear()
        self.score_calls.clear()


class Other(Fake):
    name = "Other"
    salt = 1


class Vec(Fake, VectorizedFilter, VectorizedScore):
    """Also vectorized: records the rows of each filter_nodes/score_nodes call. ``decline``:
    filter_nodes returns None (the per-node Filter must then run)."""

    name = "Vec"
    salt = 2

    def __init__(self) -> None:
        super().__init__()
        self.filter_nodes_calls: list[list[int]] = []
        self.score_nodes_calls: list[list[int]] = []
        self.decline = False

    def filter_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray | None:
        self.filter_nodes_calls.append(rows.tolist())
        if self.decline:
            return None
        key = str(self.row_local_key(pod))
        return np.asarray([verdict(self.salt, key, snapshot.infos[r]) for r in rows.tolist()], dtype=bool)  # type: ignore[arg-type]

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        self.score_nodes_calls.append(rows.tolist())
        key = str(self.row_local_key(pod))
        return np.asarray([value(self.salt, key, snapshot.infos[r]) for r in rows.tolist()], dtype=np.int64)  # type: ignore[arg-type]

    def reset_calls(self) -> None:
        super().reset_calls()
        self.filter_nodes_calls.clear()
        self.score_nodes_calls.clear()


# ---------------------------------------------------------------- the cluster and the oracle


class Cluster:
    """A scheduler cache with nodes n0..n{k-1} and the one snapshot the row cache sees."""

    def __init__(self, n: int, colors: Sequence[str] | None = None) -> None:
        self.cache, self.snap = build_snapshot(
            [make_node(f"n{i}", labels={"color": (colors or COLORS)[i % len(colors or COLORS)]}) for i in range(n)])
        self.pods: dict[str, list[Pod]] = {}
        self.next_node = n
        self._seq = 0

    def refresh(self) -> None:
        self.cache.update_snapshot(self.snap)

    def live(self) -> list[str]:
        return sorted(n for n, ni in self.cache.nodes.items() if ni.node is not None)

    def row(self, name: str) -> int:
        return self.snap.row_of[name]

    def bind(self, node: str) -> None:
        self._seq += 1
        p = make_pod(f"p{self._seq}", node_name=node, uid=f"uid-p{self._seq}")
        self.cache.add_pod(p)
        self.pods.setdefault(node, []).append(p)

    def unbind(self, node: str) -> None:
        pods = self.pods.get(node)
        if pods:
            self.cache.remove_pod(pods.pop())

    def relabel(self, node: str, color: str) -> None:
        old = self.cache.nodes[node].node
        self.cache.update_node(old, make_node(node, labels={"color": color}))

    def add(self, color: str = "red") -> str:
        name = f"n{self.next_node}"
        self.next_node += 1
        self.cache.add_node(make_node(name, labels={"color": color}))
        return name

    def remove(self, node: str) -> None:
        node_obj = self.cache.nodes[node].node
        assert node_obj is not None
        self.cache.remove_node(node_obj)


def pod(shape: str) -> Pod:
    return make_pod(f"incoming-{shape}", labels={"shape": shape})


def fresh_mask(p: Fake, shape: str, snap: Snapshot) -> np.ndarray:
    return np.asarray([ni is not None and verdict(p.salt, shape, ni) for ni in snap.infos], dtype=bool)


def fresh_scores(p: Fake, shape: str, snap: Snapshot) -> np.ndarray:
    return np.asarray([value(p.salt, shape, ni) if ni is not None else 0 for ni in snap.infos], dtype=np.int64)


def check_all(rc: RowResultCache, plugins: Sequence[Fake], weights: Sequence[int], shape: str, c: Cluster) -> None:
    """Every form of the cache against the oracle, for one pod shape."""
    state, p, snap = CycleState(), pod(shape), c.snap
    for pl in plugins:
        np.testing.assert_array_equal(rc.filter_mask(pl, state, p, snap), fresh_mask(pl, shape, snap))
        got = rc.raw_scores(pl, state, p, snap)
        assert got is not None
        np.testing.assert_array_equal(got, fresh_scores(pl, shape, snap))
    want_mask = np.logical_and.reduce([fresh_mask(pl, shape, snap) for pl in plugins])
    np.testing.assert_array_equal(rc.combined_filter_mask(list(plugins), state, p, snap), want_mask)
    want_sum = sum(w * fresh_scores(pl, shape, snap) for pl, w in zip(plugins, weights, strict=True))
    got_sum = rc.combined_scores(list(zip(plugins, weights, strict=True)), state, p, snap)
    assert got_sum is not None
    np.testing.assert_array_equal(got_sum, want_sum)


# ---------------------------------------------------------------- equal to a fresh computation


@pytest.mark.parametrize("plugin_cls", [Fake, Vec])
@pytest.mark.parametrize("n", [5, 40])
def test_results_equal_a_fresh_per_node_computation(plugin_cls: type[Fake], n: int) -> None:
    c = Cluster(n)
    for i in range(0, n, 3):
        c.bind(f"n{i}")
    c.refresh()
    rc = RowResultCache()
    pl = plugin_cls()
    for shape in SHAPES:
        mask = rc.filter_mask(pl, CycleState(), pod(shape), c.snap)
        np.testing.assert_array_equal(mask, fresh_mask(pl, shape, c.snap))
        assert mask.any() and not mask.all()
        scores = rc.raw_scores(pl, CycleState(), pod(shape), c.snap)
        assert scores is not None
        np.testing.assert_array_equal(scores, fresh_scores(pl, shape, c.snap))


def test_vectorized_forms_run_for_many_rows_per_node_forms_for_few() -> None:
    c = Cluster(40)
    rc = RowResultCache()
    pl = Vec()
    state, p = CycleState(), pod("a")
    rc.filter_mask(pl, state, p, c.snap)
    rc.raw_scores(pl, state, p, c.snap)
    all_rows = sorted(c.row(n) for n in c.live())
    assert pl.filter_nodes_calls == [all_rows] and pl.score_nodes_calls == [all_rows]
    assert pl.filter_calls == [] and pl.score_calls == []
    # 30 rows change (> 24): one vectorized call over exactly those rows.
    pl.reset_calls()
    changed = [f"n{i}" for i in range(30)]
    for n in changed:
        c.bind(n)
    c.refresh()
    check_all(rc, [pl], [1], "a", c)
    rows = sorted(c.row(n) for n in changed)
    assert pl.filter_nodes_calls == [rows] and pl.score_nodes_calls == [rows]
    assert pl.filter_calls == [] and pl.score_calls == []
    # 3 rows change: per-node calls on those nodes only.
    pl.reset_calls()
    for n in ("n1", "n7", "n33"):
        c.bind(n)
    c.refresh()
    rc.filter_mask(pl, state, p, c.snap)
    rc.raw_scores(pl, state, p, c.snap)
    assert pl.filter_nodes_calls == [] and pl.score_nodes_calls == []
    assert sorted(pl.filter_calls) == sorted(pl.score_calls) == ["n1", "n33", "n7"]


def test_a_declined_vectorized_filter_falls_back_to_per_node_calls() -> None:
    c = Cluster(30)
    rc = RowResultCache()
    pl = Vec()
    pl.decline = True
    mask = rc.filter_mask(pl, CycleState(), pod("b"), c.snap)
    np.testing.assert_array_equal(mask, fresh_mask(pl, "b", c.snap))
    assert len(pl.filter_nodes_calls) == 1
    assert sorted(pl.filter_calls) == c.live()


# ---------------------------------------------------------------- only changed rows


def test_only_changed_rows_are_recomputed() -> None:
    c = Cluster(10)
    rc = RowResultCache()
    pl = Fake()
    state, p = CycleState(), pod("a")
    first = rc.filter_mask(pl, state, p, c.snap).copy()
    rc.raw_scores(pl, state, p, c.snap)
    assert sorted(pl.filter_calls) == sorted(pl.score_calls) == c.live()
    # Nothing changed: no calls, same values.
    pl.reset_calls()
    np.testing.assert_array_equal(rc.filter_mask(pl, state, p, c.snap), first)
    assert rc.raw_scores(pl, state, p, c.snap) is not None
    assert pl.filter_calls == [] and pl.score_calls == []
    # A pod bound to n3 and n5 relabelled: those two rows, nothing else.
    c.bind("n3")
    c.relabel("n5", "green")
    c.refresh()
    check_all(rc, [pl], [1], "a", c)
    assert sorted(pl.filter_calls) == sorted(pl.score_calls) == ["n3", "n5"]
    # Another key has its own entry: all rows for it.
    pl.reset_calls()
    rc.filter_mask(pl, state, pod("b"), c.snap)
    assert sorted(pl.filter_calls) == c.live()


def test_new_nodes_grow_the_arrays_and_only_they_are_computed() -> None:
    c = Cluster(5)
    rc = RowResultCache()
    pl = Fake()
    check_all(rc, [pl], [1], "c", c)
    pl.reset_calls()
    added = [c.add(color) for color in ("blue", "green", "")]
    c.refresh()
    assert len(c.snap.infos) == 8
    check_all(rc, [pl], [1], "c", c)
    assert sorted(pl.filter_calls) == sorted(pl.score_calls) == sorted(added)


def test_removed_nodes_rows_become_false_and_zero_and_free_rows_are_reused() -> None:
    c = Cluster(6)
    rc = RowResultCache()
    pl = Fake()
    state, p = CycleState(), pod("a")
    row = c.row("n2")
    assert rc.filter_mask(pl, state, p, c.snap)[row]  # passes before
    assert rc.raw_scores(pl, state, p, c.snap)[row] > 0  # type: ignore[index]
    pl.reset_calls()
    c.remove("n2")
    c.refresh()
    assert c.snap.infos[row] is None
    assert not rc.filter_mask(pl, state, p, c.snap)[row]
    assert rc.raw_scores(pl, state, p, c.snap)[row] == 0  # type: ignore[index]
    check_all(rc, [pl], [1], "a", c)
    assert pl.filter_calls == [] and pl.score_calls == []  # a free row needs no plugin
    # A new node takes the free row: computed, alone.
    name = c.add("green")
    c.refresh()
    assert c.row(name) == row
    rc.filter_mask(pl, state, p, c.snap)
    rc.raw_scores(pl, state, p, c.snap)
    assert pl.filter_calls == pl.score_calls == [name]
    check_all(rc, [pl], [1], "a", c)


def test_an_entry_of_another_snapshot_is_not_reused() -> None:
    a, b = Cluster(4, colors=["red"]), Cluster(7, colors=["green", ""])
    for i in range(4):
        b.bind(f"n{i}")
    b.refresh()
    rc = RowResultCache()
    pl = Fake()
    for c in (a, b, a, b):
        check_all(rc, [pl], [2], "b", c)


# ---------------------------------------------------------------- eviction


def test_least_recently_used_entry_is_dropped_and_recomputed_correctly() -> None:
    c = Cluster(6)
    rc = RowResultCache(max_entries=2)
    pl = Fake()
    state = CycleState()

    def computed(shape: str) -> bool:
        """Query ``shape``'s mask: whether it was computed (all rows) rather than reused."""
        pl.reset_calls()
        np.testing.assert_array_equal(rc.filter_mask(pl, state, pod(shape), c.snap), fresh_mask(pl, shape, c.snap))
        assert pl.filter_calls in ([], c.live())
        return bool(pl.filter_calls)

    assert computed("a") and computed("b")
    assert not computed("a")  # a is now the most recently used
    assert computed("c")  # a third key: b (least recently used) goes
    assert not computed("a")
    c.bind("n1")
    c.refresh()
    assert computed("b")  # dropped: computed again, on the changed cluster; c goes
    assert computed("c")  # ... and a goes
    assert computed("a")
    assert len(rc._entries) == 2


# ---------------------------------------------------------------- errors


def test_a_score_error_on_a_fresh_entry_returns_none_and_keeps_nothing() -> None:
    c = Cluster(6)
    rc = RowResultCache()
    pl = Fake()
    state, p = CycleState(), pod("a")
    pl.fail_on = {"n4"}
    assert rc.raw_scores(pl, state, p, c.snap) is None
    assert rc.combined_scores([(pl, 1)], state, p, c.snap) is None
    pl.fail_on = set()
    pl.reset_calls()
    check_all(rc, [pl], [1], "a", c)
    assert sorted(pl.score_calls) == c.live()  # nothing was kept: every row computed


@pytest.mark.parametrize("combined", [False, True])
def test_a_score_error_on_a_changed_row_leaves_no_stale_entry(combined: bool) -> None:
    """The entry is current; n4 changes and its Score fails: None. Once it scores again, the
    value at n4 is its new one (not the old, nor the 0 the failed refresh started from)."""
    c = Cluster(6)
    rc = RowResultCache()
    pl, other = Fake(), Other()
    state, p = CycleState(), pod("a")
    plugins = [(pl, 2), (other, 3)]

    def scores() -> np.ndarray | None:
        return rc.combined_scores(plugins, state, p, c.snap) if combined else rc.raw_scores(pl, state, p, c.snap)

    def want() -> np.ndarray:
        if combined:
            return 2 * fresh_scores(pl, "a", c.snap) + 3 * fresh_scores(other, "a", c.snap)
        return fresh_scores(pl, "a", c.snap)

    before = scores()
    assert before is not None
    before = before.copy()
    row = c.row("n4")
    c.bind("n4")
    c.bind("n4")
    c.refresh()
    assert want()[row] != before[row]
    pl.fail_on = {"n4"}
    assert scores() is None
    assert scores() is None  # still failing: not served from a half-refreshed entry
    pl.fail_on = set()
    got = scores()
    assert got is not None
    np.testing.assert_array_equal(got, want())
    check_all(rc, [pl, other], [2, 3], "a", c)


# ---------------------------------------------------------------- combined entries


def test_combined_entries_agree_with_the_per_plugin_arrays_through_changes() -> None:
    c = Cluster(30)
    rc = RowResultCache()
    plugins: list[Fake] = [Fake(), Other(), Vec()]
    weights = [1, 4, 2]
    for shape in SHAPES:
        check_all(rc, plugins, weights, shape, c)
    for pl in plugins:
        pl.reset_calls()
    c.bind("n2")  # one row: the combined entries are refreshed row by row
    c.refresh()
    state, p = CycleState(), pod("b")
    np.testing.assert_array_equal(
        rc.combined_filter_mask(plugins, state, p, c.snap),
        np.logical_and.reduce([fresh_mask(pl, "b", c.snap) for pl in plugins]))
    assert {tuple(pl.filter_calls) for pl in plugins} <= {(), ("n2",)}
    assert plugins[0].filter_calls == ["n2"]  # the plugins are asked in order until one rejects
    check_all(rc, plugins, weights, "b", c)
    for i in range(26):  # many rows: rebuilt from the per-plugin arrays
        c.bind(f"n{i}")
    c.relabel("n29", "")
    c.add("blue")  # and grown
    c.refresh()
    for shape in SHAPES:
        check_all(rc, plugins, weights, shape, c)


def test_combined_scores_are_kept_per_weights() -> None:
    c = Cluster(8)
    rc = RowResultCache()
    a, b = Fake(), Other()
    state, p = CycleState(), pod("c")
    for wa, wb in ((1, 1), (3, 1), (1, 5), (1, 1)):
        got = rc.combined_scores([(a, wa), (b, wb)], state, p, c.snap)
        assert got is not None
        np.testing.assert_array_equal(got, wa * fresh_scores(a, "c", c.snap) + wb * fresh_scores(b, "c", c.snap))


# ---------------------------------------------------------------- against recomputing from scratch

CHANGES = st.one_of(
    st.tuples(st.just("bind"), st.integers(0, 63)),
    st.tuples(st.just("unbind"), st.integers(0, 63)),
    st.tuples(st.just("relabel"), st.integers(0, 63), st.sampled_from(COLORS)),
    st.tuples(st.just("add"), st.sampled_from(COLORS)),
    st.tuples(st.just("remove"), st.integers(0, 63)),
    st.tuples(st.just("bind-many"), st.integers(20, 40)),  # many rows at once: the vectorized refresh
    st.tuples(st.just("none")),
)


def apply(c: Cluster, change: tuple[Any, ...]) -> None:
    op, *args = change
    live = c.live()
    if op == "add":
        c.add(args[0])
    elif op == "bind-many":
        for i in range(args[0]):
            c.bind(live[i % len(live)])
    elif op != "none":
        node = live[args[0] % len(live)]
        if op == "bind":
            c.bind(node)
        elif op == "unbind":
            c.unbind(node)
        elif op == "relabel":
            c.relabel(node, args[1])
        elif op == "remove" and len(live) > 1:
            c.remove(node)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 36), max_entries=st.sampled_from([1024, 1024, 12, 2]),
       steps=st.lists(st.tuples(CHANGES, st.sampled_from(SHAPES)), min_size=1, max_size=20),
       weights=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5)))
def test_random_changes_agree_with_recomputing_from_scratch(n: int, max_entries: int,
                                                            steps: list[tuple[tuple[Any, ...], str]],
                                                            weights: tuple[int, int, int]) -> None:
    """Each step changes the cluster, then asks the cache about a pod of one of a few shapes."""
    c = Cluster(n)
    rc = RowResultCache(max_entries=max_entries)
    plugins: list[Fake] = [Fake(), Vec(), Other()]
    for change, shape in steps:
        apply(c, change)
        c.refresh()
        check_all(rc, plugins, weights, shape, c)


# ---------------------------------------------------------------- the nominated-verdict memo


def test_nominated_verdicts_are_remembered_by_key_until_cleared() -> None:
    c = Cluster(3)
    rc = RowResultCache()
    pl = Fake()
    no = Status(Code.UNSCHEDULABLE, "no room with the nominated pods")
    k1 = (0, 5, ("a",), ("ns/nominated",))
    k2 = (1, 5, ("a",), ("ns/nominated",))
    assert rc.nominated_verdict(k1) == (False, None)
    rc.remember_nominated_verdict(k1, None)  # passes
    rc.remember_nominated_verdict(k2, no)
    assert rc.nominated_verdict(k1) == (True, None)
    assert rc.nominated_verdict(k2) == (True, no)
    assert rc.nominated_verdict((0, 6, ("a",), ("ns/nominated",))) == (False, None)
    rc.remember_nominated_verdict(k1, no)
    assert rc.nominated_verdict(k1) == (True, no)
    rc.filter_mask(pl, CycleState(), pod("a"), c.snap)
    pl.reset_calls()
    rc.clear()
    assert rc.nominated_verdict(k1) == (False, None) and rc.nominated_verdict(k2) == (False, None)
    rc.filter_mask(pl, CycleState(), pod("a"), c.snap)  # the row entries went too
    assert sorted(pl.filter_calls) == c.live()
