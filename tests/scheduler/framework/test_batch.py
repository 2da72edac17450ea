"""OpportunisticBatch on its own (framework/batch.py): upstream's TestBatchBasic cases (a hint
given or not per precondition, the state kept or dropped), ksched's extra conditions, and the
batched pick: NormalizeScore redone over the nodes left, ties broken by the same random draw
over the nodes in the walk's order."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.pod import Pod
from ksched.clock import VirtualClock
from ksched.scheduler.framework.batch import LazySignature, OpportunisticBatch, ScoredNodes
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import FastPath, ScorePluginForm
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.metrics import SchedulerMetrics
from ksched.scheduler.plugins.helper import default_normalize_score
from ksched.testing import build_snapshot, make_node, make_pod


def _blocking(uid: str) -> bool:
    return uid.startswith("b")


class FakeFramework:
    """Upstream's batch test plugin: a node holds at most one "blocking" pod (uid b-...), so
    blocking pods are one per node and others are not."""

    profile_name = "p"

    def __init__(self) -> None:
        self.metrics = SchedulerMetrics()
        self.clock = VirtualClock(1000.0)
        self.signature: Any = ("sig",)
        self.nominated: list[str] = []

    def sign_pod(self, pod: Pod) -> Any:
        return self.signature

    def run_filter_plugins(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if _blocking(pod.uid) and any(_blocking(pi.pod.uid) for pi in node_info.pods):
            return Status(Code.UNSCHEDULABLE, "unsched")
        return None

    def nominated_node_names(self) -> list[str]:
        return self.nominated

    def flushed(self, reason: str) -> float:
        return self.metrics.registry.get_sample_value(
            "scheduler_batch_cache_flushed_total", {"profile": "p", "reason": reason}) or 0.0

    def attempts(self, result: str) -> float:
        return self.metrics.registry.get_sample_value(
            "scheduler_batch_attempts_total", {"profile": "p", "result": result}) or 0.0


NODES = ("n1", "n2", "n3", "n4")


class World:
    """Four nodes; a batch over them; pods assumed through a real cache."""

    def __init__(self) -> None:
        self.fw = FakeFramework()
        self.cache, self.snap = build_snapshot(make_node(n) for n in NODES)
        self.batch = OpportunisticBatch(self.fw)  # type: ignore[arg-type]
        self.rng = random.Random(0)

    def scored(self, names: list[str] | None) -> ScoredNodes | None:
        """The other nodes of a decision, best first (descending totals, no ties)."""
        if names is None:
            return None
        rows = np.asarray([self.snap.row_of[n] for n in names], dtype=np.int64)
        positions = np.asarray([self.snap.position_in_order[int(r)] for r in rows], dtype=np.int64)
        base = np.asarray([100 - i for i in range(len(names))], dtype=np.int64)
        return ScoredNodes(rows, positions, base, [], CycleState(), self.snap.num_nodes)

    def hint(self, pod: Pod, cycle: int, **kw: Any) -> str:
        self.cache.update_snapshot(self.snap)
        h = self.batch.get_node_hint(CycleState(), pod, self.snap, cycle, LazySignature(self.fw, pod),  # type: ignore[arg-type]
                                     None, self.snap.num_nodes, 0, self.rng, **kw)
        return h.name if h is not None else ""

    def store(self, pod: Pod, hinted: str, chosen: str, others: list[str] | None, cycle: int) -> None:
        self.batch.store_schedule_results(LazySignature(self.fw, pod), hinted, chosen, self.scored(others),  # type: ignore[arg-type]
                                          len(others or ()), cycle, self.snap)
        self.cache.assume_pod(make_pod(pod.name, uid=pod.uid, node_name=chosen))
        self.batch.pod_assumed(chosen, self.cache.generation)

    def remaining(self) -> list[str]:
        st = self.batch.state
        if st is None or not len(st.nodes):
            return []
        return [self.snap.infos[int(r)].name for r in st.nodes.rows]  # type: ignore[union-attr]


CASES = [
    # name, first pod uid, first sig, first scheduled, first chosen, first others, skip a cycle,
    # second uid, second sig, second chosen, expected hint, expected state after
    ("a second pod with the same signature gets a hint",
     "b-1", "sig", True, "n3", ["n1"], False, "b-2", "sig", "n1", "n1", []),
    ("a second pod with a different signature doesn't get a hint",
     "a-1", "sig", True, "n3", ["n1"], False, "a-2", "sig2", "n1", "", []),
    ("a second pod doesn't get a hint if it's not 1-pod-per-node",
     "a-1", "sig", True, "n3", ["n1"], False, "a-2", "sig", "n1", "", []),
    ("pod doesn't get hint if previous pod didn't schedule",
     "b-1", "sig", False, "n3", ["n1"], False, "b-2", "sig", "n1", "", []),
    ("empty list", "b-1", "sig", True, "n3", [], False, "b-2", "sig", "n4", "", []),
    ("nil list", "b-1", "sig", True, "n3", None, False, "b-2", "sig", "n4", "", []),
    ("pod doesn't get hint because the previous pod is to a different profile",
     "b-1", "sig", True, "n3", ["n1"], True, "b-2", "sig", "n1", "", []),
    ("pod uses batch from preceding pod and leaves remaining batch to next pod",
     "b-1", "sig", True, "n3", ["n1", "n2"], False, "b-2", "sig", "n1", "n1", ["n2"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_batch_basic(case: tuple[Any, ...]) -> None:
    """upstream's TestBatchBasic: the first pod runs through, then the second pod's hint and the
    state left after its decision."""
    (_, uid1, sig1, scheduled1, chosen1, others1, skip, uid2, sig2, chosen2, want_hint, want_state) = case
    w = World()
    pod1 = make_pod("pod", uid=uid1)
    w.fw.signature = sig1
    assert w.hint(pod1, 1) == ""
    if scheduled1:
        w.store(pod1, "", chosen1, others1, 1)
    cycle = 3 if skip else 2
    pod2 = make_pod("pod2", uid=uid2)
    w.fw.signature = sig2
    hint = w.hint(pod2, cycle)
    assert hint == want_hint
    w.batch.store_schedule_results(LazySignature(w.fw, pod2), hint, chosen2, None, 0, cycle, w.snap)  # type: ignore[arg-type]
    assert w.remaining() == want_state
    if want_state:
        assert w.batch.state is not None and w.batch.state.signature == sig2


def test_hints_follow_the_sorted_nodes_until_none_is_left() -> None:
    w = World()
    pods = [make_pod(f"p{i}", uid=f"b-{i}") for i in range(4)]
    assert w.hint(pods[0], 1) == ""
    w.store(pods[0], "", "n4", ["n2", "n1", "n3"], 1)
    got = []
    for i in (1, 2, 3):
        h = w.hint(pods[i], i + 1)
        got.append(h)
        w.store(pods[i], h, h, None, i + 1)
    assert got == ["n2", "n1", "n3"]
    assert w.batch.batched_pods == 3
    assert w.fw.attempts("hint_used") == 3 and w.fw.attempts("no_hint") == 1
    assert w.hint(make_pod("p4", uid="b-4"), 5) == ""  # nothing left


def test_a_hint_not_taken_replaces_the_state() -> None:
    w = World()
    p1, p2 = make_pod("p1", uid="b-1"), make_pod("p2", uid="b-2")
    w.hint(p1, 1)
    w.store(p1, "", "n3", ["n1", "n2"], 1)
    assert w.hint(p2, 2) == "n1"
    w.store(p2, "n1", "n4", ["n2"], 2)  # chosen elsewhere: the new decision's nodes are the state
    assert w.fw.attempts("hint_not_used") == 1
    assert w.remaining() == ["n2"]


@pytest.mark.parametrize("why", ["expired", "pod_nominated", "cluster_changed", "nominated_pods",
                                 "node_not_full", "pod_incompatible", "pod_skipped"])
def test_each_condition_withholds_the_hint_and_counts_its_reason(why: str) -> None:
    w = World()
    p1 = make_pod("p1", uid="b-1")
    w.hint(p1, 1)
    w.store(p1, "", "n3", ["n1", "n2"], 1)
    p2 = make_pod("p2", uid="a-2" if why == "node_not_full" else "b-2",
                  nominated_node_name="n2" if why == "pod_nominated" else "")
    cycle = 2
    if why == "expired":
        w.fw.clock.advance(0.6)  # maxBatchAge is 500 ms
    elif why == "cluster_changed":
        w.cache.assume_pod(make_pod("elsewhere", uid="x", node_name="n2"))
    elif why == "nominated_pods":
        w.fw.nominated = ["n4"]
    elif why == "pod_incompatible":
        w.fw.signature = ("other",)
    elif why == "pod_skipped":
        cycle = 3
    assert w.hint(p2, cycle) == ""
    reason = "cluster_changed" if why == "nominated_pods" else why
    assert w.fw.flushed(reason) == 1
    assert w.fw.attempts("no_hint") == 2
    assert w.remaining() == ["n1", "n2"]  # found unusable, kept until the next decision replaces it


def test_the_state_is_young_enough_at_just_under_max_batch_age() -> None:
    w = World()
    p1, p2 = make_pod("p1", uid="b-1"), make_pod("p2", uid="b-2")
    w.hint(p1, 1)
    w.store(p1, "", "n3", ["n1"], 1)
    w.fw.clock.advance(0.5)
    assert w.hint(p2, 2) == "n1"


def test_an_unsignable_pod_drops_the_state() -> None:
    w = World()
    p1 = make_pod("p1", uid="b-1")
    w.fw.signature = None
    w.hint(p1, 1)
    w.store(p1, "", "n3", ["n1", "n2"], 1)
    assert w.batch.state is None and w.fw.flushed("pod_not_batchable") == 1
    w.fw.signature = ("sig",)
    w.batch.store_schedule_results(LazySignature(w.fw, p1), "", "n3", None, 0, 1, w.snap)  # type: ignore[arg-type]
    assert w.fw.flushed("empty_list") == 1


def test_an_assumption_that_was_not_the_only_change_voids_the_state() -> None:
    """Between the decision's snapshot and its pod's assumption something else changed in the
    cache (a threaded scheduler's informers): the state cannot be trusted."""
    w = World()
    p1, p2 = make_pod("p1", uid="b-1"), make_pod("p2", uid="b-2")
    w.hint(p1, 1)
    w.batch.store_schedule_results(LazySignature(w.fw, p1), "", "n3", w.scored(["n1"]), 1, 1, w.snap)  # type: ignore[arg-type]
    w.cache.assume_pod(make_pod("other", uid="o", node_name="n4"))
    w.cache.assume_pod(make_pod("p1", uid="b-1", node_name="n3"))
    w.batch.pod_assumed("n3", w.cache.generation)
    assert w.hint(p2, 2) == ""
    assert w.fw.flushed("cluster_changed") == 1


def _form(name: str, weight: int) -> ScorePluginForm:
    def normalize(state: CycleState, pod: Pod, nodes: Any, scores: np.ndarray) -> Status | None:
        return default_normalize_score(100, False, scores)

    return ScorePluginForm(None, FastPath.NODE, normalize, weight, False)  # type: ignore[arg-type]


def test_the_pick_redoes_normalize_score_over_the_nodes_left() -> None:
    """Upstream pops the previous order; ksched normalizes again without the node taken, as a
    full cycle would. Raw preferences 8 (taken), 4, 2; other scores 0, 10, 45 (weight 1):
    before, 50+10=60 against 25+45=70; after, 100+10=110 against 50+45=95."""
    _, snap = build_snapshot(make_node(n) for n in ("a", "b", "c"))
    rows = np.asarray([snap.row_of["b"], snap.row_of["c"]], dtype=np.int64)
    positions = np.asarray([snap.position_in_order[int(r)] for r in rows], dtype=np.int64)
    raw = np.asarray([4, 2], dtype=np.int64)
    base = np.asarray([10, 45], dtype=np.int64)
    nodes = ScoredNodes(rows, positions, base, [(_form("Pref", 1), raw)], CycleState(), 3)
    got = nodes.pick(None, make_pod(), snap, 0, random.Random(0))  # type: ignore[arg-type]
    assert got is not None and got[1] is None
    assert snap.infos[int(nodes.rows[got[0]])].name == "b"  # type: ignore[union-attr]
    # Upstream's order (the totals of the cycle that also scored "a") would have said "c".
    prev_totals = base + raw * 100 // 8
    assert int(np.argmax(prev_totals)) == 1


def test_a_tie_is_broken_by_the_draw_the_walk_would_make() -> None:
    """Ties are broken over the nodes in the order the walk visits them from the start index,
    with one draw of the seeded source; that draw is the one an unbatched cycle makes."""
    _, snap = build_snapshot(make_node(f"n{i}") for i in range(5))
    rows = np.asarray([snap.row_of[f"n{i}"] for i in (1, 2, 3, 4)], dtype=np.int64)
    positions = np.asarray([snap.position_in_order[int(r)] for r in rows], dtype=np.int64)
    base = np.asarray([7, 9, 9, 9], dtype=np.int64)
    for start in range(5):
        nodes = ScoredNodes(rows.copy(), positions.copy(), base.copy(), [], CycleState(), 5)
        rng = random.Random(42)
        got = nodes.pick(None, make_pod(), snap, start, rng)  # type: ignore[arg-type]
        assert got is not None and got[1] is not None  # the state before the draw, to restore
        # The unbatched cycle: walk order from ``start``, the tied nodes in it, one draw.
        walk = [f"n{(start + k) % 5}" for k in range(5)]
        tied = [n for n in walk if n in ("n2", "n3", "n4")]
        want = tied[random.Random(42).randrange(len(tied))]
        assert snap.infos[int(nodes.rows[got[0]])].name == want  # type: ignore[union-attr]
        ref = random.Random(42)
        ref.randrange(len(tied))
        assert rng.getstate() == ref.getstate()  # exactly one draw, of the same range


def test_one_node_left_is_taken_without_scoring_or_drawing() -> None:
    _, snap = build_snapshot([make_node("a"), make_node("b")])
    rows = np.asarray([snap.row_of["b"]], dtype=np.int64)

    def boom(*a: Any) -> Status | None:
        raise AssertionError("normalized a single node")

    nodes = ScoredNodes(rows, np.asarray([1]), np.asarray([0]),
                        [(ScorePluginForm(None, FastPath.NODE, boom, 1, False), np.asarray([3]))],  # type: ignore[arg-type]
                        CycleState(), 2)
    assert nodes.pick(None, make_pod(), snap, 0, random.Random(0)) == (0, None)  # type: ignore[arg-type]


def test_a_failing_or_out_of_range_normalization_gives_no_pick() -> None:
    _, snap = build_snapshot(make_node(n) for n in ("a", "b", "c"))
    rows = np.asarray([snap.row_of["b"], snap.row_of["c"]], dtype=np.int64)
    positions = np.asarray([1, 2])

    def failing(*a: Any) -> Status | None:
        return Status.as_error("no state")

    def too_big(state: Any, pod: Any, nodes: Any, scores: np.ndarray) -> Status | None:
        scores[:] = 101
        return None

    for norm, check in ((failing, False), (too_big, True)):
        nodes = ScoredNodes(rows, positions, np.asarray([0, 0]),
                            [(ScorePluginForm(None, FastPath.NODE, norm, 1, check), np.asarray([1, 2]))],  # type: ignore[arg-type]
                            CycleState(), 3)
        assert nodes.pick(None, make_pod(), snap, 0, random.Random(0)) is None  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=40), st.data())
def test_remove_at_is_np_delete(values: list[int], data: st.DataObject) -> None:
    """ScoredNodes.remove_at drops one entry of every array as np.delete would (its own slicing
    is the fast path), normalized raw scores included, and keeps each array's dtype."""
    i = data.draw(st.integers(0, len(values) - 1))
    rows = np.asarray(values, dtype=np.int64)
    base = np.asarray(values, dtype=np.int64) * 3
    raw = np.asarray(values, dtype=np.int64) // 7
    nodes = ScoredNodes(rows.copy(), rows.copy(), base.copy(), [(_form("Pref", 1), raw.copy())], CycleState(),
                        len(values))
    nodes.remove_at(i)
    for got, want in ((nodes.rows, rows), (nodes.positions, rows), (nodes.base, base), (nodes.normalized[0][1], raw)):
        assert got.dtype == want.dtype
        assert got.tolist() == np.delete(want, i).tolist()
