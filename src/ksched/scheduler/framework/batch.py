"""Opportunistic batching (the OpportunisticBatching feature, beta and on in 1.36; KEP-5598):
upstream's ``pkg/scheduler/framework/runtime/batch.go``.

Pods of one workload often ask the same question: same requests, tolerations, affinity. When
such a pod takes the best node and that node can then take no more of them (one pod per node:
host ports, resources sized to the node), the next pod's answer is the previous pod's sorted
feasible nodes without the node taken. One :class:`OpportunisticBatch` per profile keeps

* the last cycle: its scheduling cycle number, the node chosen, whether it succeeded;
* the batch state: the pod signature, the previous pod's remaining scored nodes, when it was
  made (it expires after ``MAX_BATCH_AGE``, 500 ms).

``get_node_hint`` (at the start of a cycle, after PreFilter) gives a hint only when there is
state, this cycle directly follows the last one (no other profile's pod in between), the last
pod succeeded, the pod's signature (``Framework.sign_pod``) equals the state's, the state is
young enough, and the node chosen last time now *rejects* this pod in Filter -- so it was filled
one pod per node. The hint is then the best remaining node; it is filtered alone, like a
nominated node, and if it passes it is the result (PreScore and Score are skipped).
``store_schedule_results`` (after the decision) records the cycle; a used hint keeps the state,
otherwise the pod's other scored nodes become the new state if it is signable, or the state is
dropped. Metrics as upstream: ``scheduler_batch_attempts_total{profile,result}``,
``scheduler_batch_cache_flushed_total{profile,reason}``,
``scheduler_get_node_hint_duration_seconds`` and ``scheduler_store_schedule_results_duration_seconds``.

Divergence: when ksched batches
-------------------------------
Upstream accepts that a hint may differ from what a full cycle would choose (other pods bound
meanwhile, NormalizeScore over a different set of nodes, the rotating start of the node walk).
In ksched a hint never changes a placement: the batched pick is, node for node and random draw
for random draw, the unbatched cycle's, and ``next_start_node_index`` moves as it would have.
So ksched adds these conditions, and where one fails it does not give a hint (a hint is only
ever an optimisation):

* **Every candidate node was evaluated.** The state is stored only from a cycle whose Filter walk
  processed every candidate node (fewer feasible nodes than ``numFeasibleNodesToFind``: clusters
  under 100 nodes, ``percentageOfNodesToScore: 100``, or pods few nodes can take). A cycle that
  stopped early saw a window of the cluster the next cycle would not; such results are not
  stored (flush reason ``not_all_nodes_evaluated``, ksched's, counted without signing the pod:
  where upstream would count ``pod_not_batchable`` for an unsignable pod, ksched counts this).
* **Nothing else changed.** No hint unless the scheduler cache is exactly as the previous pod's
  assumption left it: that assumption was the only change between that pod's snapshot and this
  one's (cache generations), and no pod is nominated to any node; the PreFilter result
  (candidate nodes) is the same (flush reason ``cluster_changed``, ksched's). What plugins read
  beyond the cache is covered by their signatures: plugins whose answers depend on API objects
  for a pod refuse to sign it (see ``framework/signers.py``).
* **Scores as a full cycle would compute them.** The state keeps each NormalizeScore plugin's raw
  scores; the hint is picked from the remaining nodes with the normalization redone over them
  (upstream pops the previous order), the highest total winning and ties broken by the same
  seeded random draw, over the nodes in the order the unbatched walk would visit them from the
  current start index. A normalization that fails or leaves the 0..100 range gives no hint
  (``normalize_error``, as upstream's later releases name it).
* **A nominated pod gets no hint** (flush reason ``pod_nominated``, as upstream's later releases;
  1.36 pops a hint and tries the nominated node instead). Nor does a cycle explaining its
  decision (``ksched simulate --explain``), which needs every node's verdict.
* **A hint that fails Filter** (a plugin broke its signature's promise) restores the random
  source before the full cycle runs.

Placements, messages and nominated nodes are therefore those of the unbatched path, which
``tests/scheduler/test_batching_agrees.py`` checks on random clusters. Beyond the cache, the
time limit is read from the scheduler's clock (virtual in ``ksched simulate``).

Fast path: ``FAST_BOOKKEEPING`` (a cycle without a state to hint from and a decision that leaves
none, which is every pod of the default profile: the metrics counted inline, see the flag).
"""

from __future__ import annotations

import random
import time
from bisect import bisect_left
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ksched.api.pod import Pod
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import MAX_NODE_SCORE, MIN_NODE_SCORE, ScorePluginForm
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.metrics import BATCH_BUCKETS as _BUCKETS

if TYPE_CHECKING:
    from ksched.scheduler.cache.snapshot import Snapshot

__all__ = [
    "MAX_BATCH_AGE",
    "NodeHint",
    "OpportunisticBatch",
    "PodSignature",
    "ScoredNodes",
]

MAX_BATCH_AGE = 0.5  # seconds (upstream's maxBatchAge)

# Results of an attempt (upstream's metrics.BatchAttempt*).
ATTEMPT_NO_HINT = "no_hint"
ATTEMPT_HINT_USED = "hint_used"
ATTEMPT_HINT_NOT_USED = "hint_not_used"

# Why the state was found unusable (upstream's metrics.BatchFlush*) ...
FLUSH_POD_FAILED = "pod_failed"
FLUSH_POD_SKIPPED = "pod_skipped"
FLUSH_NODE_MISSING = "node_missing"
FLUSH_NODE_NOT_FULL = "node_not_full"
FLUSH_EMPTY_LIST = "empty_list"
FLUSH_EXPIRED = "expired"
FLUSH_POD_INCOMPATIBLE = "pod_incompatible"
FLUSH_POD_NOT_BATCHABLE = "pod_not_batchable"
# ... those of upstream's later releases ksched uses ...
FLUSH_POD_NOMINATED = "pod_nominated"
FLUSH_NORMALIZE_ERROR = "normalize_error"
# ... and ksched's own (see the module docstring).
FLUSH_CLUSTER_CHANGED = "cluster_changed"
FLUSH_NOT_ALL_NODES_EVALUATED = "not_all_nodes_evaluated"

PodSignature = tuple[tuple[str, Any], ...]

# The two bookkeeping cases of every pod that cannot be batched (every pod of the default
# profile: PodTopologySpread's system default constraints make it unsignable): no state to hint
# from, and a decision without a hint that leaves no state. They update the metrics' plain counts
# (``metrics.BatchStats``) in place, with the dict keys and histogram lists of this profile's
# labels kept, instead of through three calls each building its key; the same counts, buckets
# and sums (of shorter durations). False: through ``_attempt``, ``_flush`` and
# ``BatchStats.observe_*`` (the reference, tests/scheduler/framework/test_batch_fast_bookkeeping.py).
FAST_BOOKKEEPING = True


class Framework(Protocol):
    """What batching uses of its profile's framework (``runtime.Framework``)."""

    profile_name: str
    metrics: Any
    clock: Any

    def sign_pod(self, pod: Pod) -> PodSignature | None: ...

    def run_filter_plugins(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None: ...

    def nominated_node_names(self) -> list[str]: ...


class LazySignature:
    """A pod's signature, computed at most once per cycle and only when needed."""

    __slots__ = ("_done", "_fw", "_pod", "_value")

    def __init__(self, fw: Framework, pod: Pod) -> None:
        self._fw = fw
        self._pod = pod
        self._done = False
        self._value: PodSignature | None = None

    @property
    def value(self) -> PodSignature | None:
        if not self._done:
            self._value = self._fw.sign_pod(self._pod)
            self._done = True
        return self._value


def _without(a: np.ndarray, i: int) -> np.ndarray:
    """``np.delete(a, i)`` of a 1-d array and an index in range (a new array), without
    ``np.delete``'s generic handling, which costs several times more on the few hundred
    elements here."""
    out = np.empty(len(a) - 1, dtype=a.dtype)
    out[:i] = a[:i]
    out[i:] = a[i + 1:]
    return out


@dataclass(slots=True)
class ScoredNodes:
    """The feasible nodes of a cycle that evaluated every candidate node, less the ones taken
    since (upstream's SortedScoredNodes). ``rows`` are node rows; ``positions`` each one's index
    in the cycle's candidate rows before rotation (the walk visits them from the start index);
    ``base`` the weighted sum of the scores of the plugins that do not normalize; ``normalized``
    each normalizing plugin with its raw scores; ``state`` the cycle's CycleState after PreScore
    (NormalizeScore may read it)."""

    rows: np.ndarray
    positions: np.ndarray
    base: np.ndarray
    normalized: list[tuple[ScorePluginForm, np.ndarray]]
    state: CycleState
    num_candidates: int
    walk_start: int = -1  # the arrays are in the walk's order from this start (-1: not yet)

    def __len__(self) -> int:
        return len(self.rows)

    def _in_walk_order(self, start: int) -> None:
        """Reorder the arrays as the walk from ``start`` visits the nodes (kept by remove_at;
        without a PreFilter result the start does not move, so this sorts once)."""
        if start == self.walk_start:
            return
        order = np.argsort((self.positions - start) % self.num_candidates, kind="stable")
        self.rows = self.rows[order]
        self.positions = self.positions[order]
        self.base = self.base[order]
        self.normalized = [(f, raw[order]) for f, raw in self.normalized]
        self.walk_start = start

    def remove_at(self, i: int) -> None:
        self.rows = _without(self.rows, i)
        self.positions = _without(self.positions, i)
        self.base = _without(self.base, i)
        self.normalized = [(f, _without(raw, i)) for f, raw in self.normalized]

    def pick(self, fw: Framework, pod: Pod, snapshot: Snapshot, start: int,
             rng: random.Random) -> tuple[int, Any] | None:
        """The index (in ``rows``, which this may reorder) of the node an unbatched cycle starting
        its walk at ``start`` would choose among these (the only feasible nodes left), and the
        random source's state before the tie-break draw (None if none was needed); None if a
        normalization fails."""
        if len(self.rows) == 1:
            return 0, None  # one feasible node: taken without scoring
        self._in_walk_order(start)
        totals = self.base
        if self.normalized:
            totals = totals.copy()
            nodes = snapshot.node_list(self.rows)
            for form, raw in self.normalized:
                scores = raw.copy()
                st = form.normalize(self.state, pod, nodes, scores)
                if st is not None and st.code != Code.SUCCESS:
                    return None
                if form.check_range and (scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE):
                    return None
                totals += scores * form.weight
        ties = np.flatnonzero(totals == totals[totals.argmax()])
        if len(ties) == 1:
            return int(ties[0]), None
        saved = rng.getstate()
        return int(ties[rng.randrange(len(ties))]), saved


@dataclass(slots=True)
class _BatchState:
    signature: PodSignature
    nodes: ScoredNodes
    creation_time: float
    narrowing: frozenset[str] | None  # the PreFilter result's node names (None: all nodes)
    snapshot_generation: int  # of the snapshot the state's last decision read
    assumed_generation: int | None = None  # the cache's, right after that decision's pod was assumed
    awaiting_assume: bool = True


@dataclass(slots=True)
class _Cycle:
    cycle_count: int = -2
    chosen_node: str = ""
    succeeded: bool = False


@dataclass(slots=True)
class NodeHint:
    """A hint: the node's row and name, how many feasible nodes the unbatched cycle would have
    found, and the random source's state to restore if the hint is not used."""

    row: int
    name: str
    feasible: int
    rng_state: Any = None


class OpportunisticBatch:
    """One profile's batching state (see the module docstring)."""

    def __init__(self, fw: Framework) -> None:
        self.fw = fw
        self.state: _BatchState | None = None
        self.last_cycle = _Cycle()
        self.batched_pods = 0  # pods placed on a hint (upstream's test counter)
        self._stats_obj: Any = None
        # FAST_BOOKKEEPING: the no-hint attempt's key, the no-hint and store histograms' count
        # lists (once the first observation made them), and the flush keys by reason.
        self._no_hint_key: tuple[str, str] | None = None
        self._hint_counts: list[float] | None = None
        self._store_counts: list[float] | None = None
        self._flush_keys: dict[str, tuple[str, str]] = {}

    # ---------------------------------------------------------------- metrics

    def _stats(self) -> Any:
        st = self._stats_obj
        if st is None:
            m = self.fw.metrics  # set by the scheduler after the framework is built
            st = self._stats_obj = getattr(m, "batch", None) if m is not None else None
        return st

    def _attempt(self, result: str) -> None:
        st = self._stats()
        if st is not None:
            st.attempt(self.fw.profile_name, result)

    def _flush(self, reason: str) -> None:
        """upstream's logUnusableState: count why the state cannot be used."""
        st = self._stats()
        if st is not None:
            st.flush(self.fw.profile_name, reason)

    def _now(self) -> float:
        clock = self.fw.clock
        return float(clock.now()) if clock is not None else time.monotonic()

    # ---------------------------------------------------------------- the hint

    def get_node_hint(self, state: CycleState, pod: Pod, snapshot: Snapshot, cycle: int,
                      signature: LazySignature, narrowing: frozenset[str] | None, num_candidates: int,
                      start: int, rng: random.Random, explain: bool = False) -> NodeHint | None:
        """The node to try first for this pod, if the state allows one (see the module
        docstring); the node is removed from the state. ``start`` is where this cycle's walk
        over the ``num_candidates`` candidate nodes would begin."""
        t0 = time.perf_counter()
        if FAST_BOOKKEEPING and (self.state is None or explain):
            st = self._stats_obj
            if st is None:
                st = self._stats()
                if st is None:
                    return None
            k = self._no_hint_key
            if k is None:
                k = self._no_hint_key = (self.fw.profile_name, ATTEMPT_NO_HINT)
            a = st.attempts
            a[k] = a.get(k, 0) + 1
            counts = self._hint_counts
            if counts is None:
                st.observe_hint("no_hint", self.fw.profile_name, time.perf_counter() - t0)
                self._hint_counts = st.hint_seconds[("no_hint", self.fw.profile_name)]
                return None
            seconds = time.perf_counter() - t0
            counts[bisect_left(_BUCKETS, seconds)] += 1
            counts[-1] += seconds
            return None
        if self.state is None or explain:
            # Nothing to hint from (the common case where pods cannot be batched): no hint, and
            # nothing is found unusable.
            st = self._stats()
            if st is not None:
                profile = self.fw.profile_name
                st.attempt(profile, ATTEMPT_NO_HINT)
                st.observe_hint("no_hint", profile, time.perf_counter() - t0)
            return None
        hint: NodeHint | None = None
        try:
            if self._compatible(state, pod, snapshot, cycle, signature, narrowing,
                                                num_candidates):
                b = self.state
                assert b is not None
                nodes = b.nodes
                feasible = len(nodes)
                got = nodes.pick(self.fw, pod, snapshot, start, rng)
                if got is None:
                    self._flush(FLUSH_NORMALIZE_ERROR)
                else:
                    i, rng_state = got
                    row = int(nodes.rows[i])
                    nodes.remove_at(i)
                    ni = snapshot.infos[row]
                    assert ni is not None
                    hint = NodeHint(row, ni.name, feasible, rng_state)
            if hint is None:
                self._attempt(ATTEMPT_NO_HINT)
            return hint
        finally:
            st = self._stats()
            if st is not None:
                st.observe_hint("hint" if hint is not None else "no_hint", self.fw.profile_name,
                                time.perf_counter() - t0)

    def _compatible(self, state: CycleState, pod: Pod, snapshot: Snapshot, cycle: int,
                    signature: LazySignature, narrowing: frozenset[str] | None, num_candidates: int) -> bool:
        """upstream's batchStateCompatible, with ksched's conditions (module docstring)."""
        b = self.state
        if b is None or not len(b.nodes):
            return False
        if cycle != self.last_cycle.cycle_count + 1:
            self._flush(FLUSH_POD_SKIPPED)  # another profile's pod came in between
            return False
        if not self.last_cycle.succeeded:
            self._flush(FLUSH_POD_FAILED)
            return False
        sig = signature.value
        if sig is None or sig != b.signature:
            self._flush(FLUSH_POD_INCOMPATIBLE)
            return False
        if self._now() > b.creation_time + MAX_BATCH_AGE:
            self._flush(FLUSH_EXPIRED)
            return False
        if pod.nominated_node_name:
            self._flush(FLUSH_POD_NOMINATED)
            return False
        if (b.assumed_generation is None or snapshot.generation != b.assumed_generation
                or narrowing != b.narrowing or num_candidates != b.nodes.num_candidates
                or self.fw.nominated_node_names()):
            self._flush(FLUSH_CLUSTER_CHANGED)
            return False
        last = snapshot.get(self.last_cycle.chosen_node)
        if last is None:
            self._flush(FLUSH_NODE_MISSING)
            return False
        # Only if the node taken last time cannot take this pod too does the next best node of
        # the previous order answer for this pod: the taken node's new score is unknown.
        st = self.fw.run_filter_plugins(state, pod, last)
        if st is None or not st.is_rejected():
            self._flush(FLUSH_NODE_NOT_FULL)
            return False
        return True

    # ---------------------------------------------------------------- after the decision

    def store_schedule_results(self, signature: LazySignature, hinted: str, chosen: str,
                               other_nodes: ScoredNodes | None, num_other: int, cycle: int, snapshot: Snapshot,
                               narrowing: frozenset[str] | None = None, ksched_reason: str = "") -> None:
        """Record a decision. ``num_other``: how many other feasible nodes the pod had;
        ``other_nodes``: those nodes with their scores, if ksched's conditions to keep them hold
        (else ``ksched_reason`` says which failed)."""
        t0 = time.perf_counter()
        if FAST_BOOKKEEPING and not hinted and other_nodes is None:
            # No hint, and no state left (the reference's checks in its order; none but
            # empty_list reaches the signature when ksched_reason is set).
            last = self.last_cycle
            last.cycle_count, last.chosen_node, last.succeeded = cycle, chosen, True
            if num_other <= 0:
                reason = FLUSH_EMPTY_LIST
            elif ksched_reason:
                reason = ksched_reason
            else:
                reason = FLUSH_POD_NOT_BATCHABLE if signature.value is None else FLUSH_CLUSTER_CHANGED
            self.state = None
            st = self._stats_obj
            if st is None:
                st = self._stats()
                if st is None:
                    return
            k = self._flush_keys.get(reason)
            if k is None:
                k = self._flush_keys[reason] = (self.fw.profile_name, reason)
            f = st.flushed
            f[k] = f.get(k, 0) + 1
            counts = self._store_counts
            if counts is None:
                st.observe_store(self.fw.profile_name, time.perf_counter() - t0)
                self._store_counts = st.store_seconds[(self.fw.profile_name,)]
                return
            seconds = time.perf_counter() - t0
            counts[bisect_left(_BUCKETS, seconds)] += 1
            counts[-1] += seconds
            return
        try:
            last = self.last_cycle
            last.cycle_count, last.chosen_node, last.succeeded = cycle, chosen, True
            if hinted and hinted == chosen:
                self._attempt(ATTEMPT_HINT_USED)
                self.batched_pods += 1
                b = self.state
                if b is not None:
                    b.snapshot_generation = snapshot.generation
                    b.assumed_generation = None
                    b.awaiting_assume = True
                return
            if hinted:
                self._attempt(ATTEMPT_HINT_NOT_USED)
            if num_other <= 0:
                self._flush(FLUSH_EMPTY_LIST)
                self.state = None
                return
            if other_nodes is None and ksched_reason:
                # Checked before the signature, which is then not needed (signing costs more).
                self._flush(ksched_reason)
                self.state = None
                return
            sig = signature.value
            if sig is None or other_nodes is None:
                self._flush(FLUSH_POD_NOT_BATCHABLE if sig is None else FLUSH_CLUSTER_CHANGED)
                self.state = None
                return
            self.state = _BatchState(sig, other_nodes, self._now(), narrowing, snapshot.generation)
        finally:
            st = self._stats()
            if st is not None:
                st.observe_store(self.fw.profile_name, time.perf_counter() - t0)

    def pod_assumed(self, node_name: str, generation: int) -> None:
        """The decision's pod was assumed on ``node_name``; ``generation`` is the cache's after
        that. The state stays usable only if the assumption was the cache's one change since the
        decision's snapshot."""
        b = self.state
        if b is None or not b.awaiting_assume:
            return
        b.awaiting_assume = False
        if node_name == self.last_cycle.chosen_node and generation == b.snapshot_generation + 1:
            b.assumed_generation = generation
        else:
            b.assumed_generation = None
