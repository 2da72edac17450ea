"""One scheduling attempt, as upstream's ``schedule_one.go``: ScheduleOne pops a pod and runs
its scheduling cycle -- schedulePod (PreFilter, Filter with the adaptive number of nodes to find
and the rotating start index, PostFilter on failure, PreScore, Score, select host), then
Reserve, Permit and assume -- and hands it to its binding cycle (WaitOnPermit, PreBind, Bind,
PostBind), which runs right after it (single-threaded) or on a thread pool. Failures anywhere
unreserve, forget the assumed pod, record the pod's condition and event, and requeue it.

:class:`ScheduleOne` holds these as methods of :class:`ksched.scheduler.scheduler.Scheduler`
(upstream defines them on ``*Scheduler`` in this file too); which nodes pass Filter is
``feasible_nodes.FeasibleNodeFinder``.

Divergence (no placement changes): a cycle that could leave an opportunistic-batching state
signs its pod before Score (upstream signs when it stores the results) and keeps its scores
per node only for a signable pod (``SIGN_BEFORE_KEEP``; off: the reference).
"""

from __future__ import annotations

import logging
import queue as _queue
import random
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ksched.api.errors import ApiError, BindingConflict
from ksched.api.meta import format_time
from ksched.api.pod import Pod
from ksched.scheduler.cache.cache import Cache, CacheError
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.explanation import Explanation
from ksched.scheduler.feasible_nodes import FeasibleNodeFinder, FilterError
from ksched.scheduler.framework.batch import (
    FLUSH_CLUSTER_CHANGED,
    FLUSH_NOT_ALL_NODES_EVALUATED,
    LazySignature,
    NodeHint,
    OpportunisticBatch,
    ScoredNodes,
)
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ASSIGNED_POD_DELETE
from ksched.scheduler.framework.interface import ExplainedPostFilter, PostFilterResult, ScorePluginForm
from ksched.scheduler.framework.runtime import Framework
from ksched.scheduler.framework.status import Code, Diagnosis, FitError, Status, WaitUntil, fit_error_message
from ksched.scheduler.framework.types import PodInfo, QueuedPodInfo
from ksched.scheduler.metrics import SchedulerMetrics
from ksched.scheduler.queue.scheduling_queue import PriorityQueue
from ksched.scheduler.recorder import EventRecorder

__all__ = [
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "Algorithm",
    "BindingTask",
    "NoNodesAvailable",
    "ScheduleOne",
    "ScheduleResult",
    "SchedulingError",
    "num_feasible_nodes_to_find",
    "pod_with_node",
]

log = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5

# Whether a cycle that could leave a batch state signs its pod before Score and keeps the
# scores per node only for a signable pod (False: kept for every such cycle, then dropped by
# ``store_schedule_results`` when the pod has no signature; the reference).
SIGN_BEFORE_KEEP = True

# Whether the assumed copy's PodInfo shares the queued PodInfo's derived values (requests,
# affinity terms: none reads spec.nodeName) instead of working them out again (False: a new
# PodInfo of the assumed pod; the reference, tests/scheduler/cache/test_assume_like_queued.py).
ASSUME_LIKE_QUEUED = True


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """Upstream's numFeasibleNodesToFind (adaptive when the percentage is 0)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage
    if pct == 0:
        pct = 50 - num_all_nodes // 125
        if pct < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            pct = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num = num_all_nodes * pct // 100
    if num < MIN_FEASIBLE_NODES_TO_FIND:
        return MIN_FEASIBLE_NODES_TO_FIND
    return num


@dataclass(slots=True)
class ScheduleResult:
    suggested_host: str
    evaluated_nodes: int
    feasible_nodes: int


REASON_UNSCHEDULABLE = "Unschedulable"
# Upstream's clearNominatedNode: a failure outside PostFilter drops the pod's nomination.
CLEAR_NOMINATION = PostFilterResult("", PostFilterResult.MODE_OVERRIDE)
REASON_SCHEDULER_ERROR = "SchedulerError"


@dataclass(slots=True)
class BindingTask:
    fw: Framework
    state: CycleState
    qpi: QueuedPodInfo
    assumed: Pod
    host: str
    start: float
    status: Status | None = None
    done: bool = False
    permit_passed: bool = False  # past WaitOnPermit: the pod is no longer in flight (upstream's Done)
    # PreBindPreFlight's verdict, run before WaitOnPermit: None (some PreBind has work), Skip
    # (none has), or the failure; unset until it ran.
    pre_flight: Status | None = None
    pre_flight_ran: bool = False
    # A PreBind plugin asked to be called again (WaitUntil): from which plugin, and when.
    pre_bind_from: int = 0
    retry_at: float | None = None


def pod_with_node(pod: Pod, node_name: str) -> Pod:
    """The assumed copy of a pod: spec.nodeName set (the stored object is untouched)."""
    p = pod.shallow_copy()
    raw = dict(pod.raw)
    spec = dict(raw.get("spec") or {})
    spec["nodeName"] = node_name
    raw["spec"] = spec
    p.raw = raw
    p.node_name = node_name
    return p


@dataclass(slots=True)
class _BatchCycle:
    """One cycle's dealings with its profile's opportunistic batch (framework/batch.py)."""

    batch: OpportunisticBatch
    cycle: int
    signature: LazySignature
    hint: NodeHint | None = None
    hint_used: bool = False
    # The cycle's Filter walk, if it made one: the candidate rows before rotation, whether every
    # one was processed, the PreFilter result's node names (None: all nodes).
    walk: tuple[np.ndarray, bool, frozenset[str] | None] | None = None


class Algorithm:
    """schedulePod: PreFilter, Filter, PreScore, Score, select host. Keeps the rotating start
    index between cycles, and asks the profile's opportunistic batch for a hint (given a
    ``cycle``: the scheduling cycle's number)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.next_start_node_index = 0
        self._batching: _BatchCycle | None = None

    def schedule_pod(self, fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot,
                     explain: Explanation | None = None, cycle: int | None = None) -> ScheduleResult:
        num_all = snapshot.num_nodes
        if num_all == 0:
            raise NoNodesAvailable()
        bc = self._batching = _BatchCycle(fw.batch, cycle, LazySignature(fw, pod)) \
            if cycle is not None and fw.batching else None
        feasible_rows, diagnosis = self.find_nodes_that_fit_pod(fw, state, pod, snapshot, explain)
        if len(feasible_rows) == 0:
            raise FitError(pod.key, num_all, diagnosis)
        infos = snapshot.infos
        if len(feasible_rows) == 1:
            host = infos[int(feasible_rows[0])].name  # type: ignore[union-attr]
            if explain is not None:
                explain.selected = host
            feasible = 1
            if bc is not None:
                hinted = bc.hint.name if bc.hint is not None else ""
                bc.batch.store_schedule_results(bc.signature, hinted, host, None, 0, bc.cycle, snapshot)
                if bc.hint_used and bc.hint is not None:
                    feasible = bc.hint.feasible  # as many as the unbatched cycle would have found
            return ScheduleResult(host, self._evaluated, feasible)
        nodes = snapshot.node_list(feasible_rows)
        st = fw.run_pre_score(state, pod, nodes)
        if st is not None:
            raise SchedulingError(st)
        record: dict[str, Any] | None = {} if explain is not None else None
        keep: list[tuple[ScorePluginForm, np.ndarray, np.ndarray]] | None = None
        ksched_reason = ""
        if bc is not None:
            ksched_reason = self._unbatchable(bc, fw, pod)
            # An unsignable pod (every pod of the default profile: PodTopologySpread's system
            # default constraints) leaves no batch state, whatever its scores: signed first (the
            # signature is needed below anyway), its scores are not kept node by node.
            if not ksched_reason and fw.signatures_enabled and \
                    (not SIGN_BEFORE_KEEP or bc.signature.value is not None):
                keep = []
        totals, st = fw.run_score(state, pod, snapshot, nodes, record, keep)
        if st is not None:
            raise SchedulingError(st)
        best = totals[totals.argmax()]  # the maximum (argmax: NumPy's C method, max() a Python wrapper)
        ties = (totals == best).nonzero()[0]
        pick = int(ties[0]) if len(ties) == 1 else int(ties[self.rng.randrange(len(ties))])
        host = infos[int(feasible_rows[pick])].name  # type: ignore[union-attr]
        if bc is not None:
            others: ScoredNodes | None = None
            if keep is not None and bc.walk is not None:
                cand = bc.walk[0]
                inv = np.zeros(len(infos), dtype=np.int64)
                inv[cand] = np.arange(len(cand), dtype=np.int64)
                base = totals.copy()
                for _, _, weighted in keep:
                    base -= weighted
                # NormalizeScore may read the PreScore state: a copy, which the binding cycle
                # (maybe on another thread) does not touch.
                others = ScoredNodes(feasible_rows.copy(), inv[feasible_rows], base,
                                     [(f, raw) for f, raw, _ in keep], state.clone() if keep else state,
                                     len(cand))
                others.remove_at(pick)
            hinted = bc.hint.name if bc.hint is not None else ""
            bc.batch.store_schedule_results(bc.signature, hinted, host, others, len(feasible_rows) - 1, bc.cycle,
                                            snapshot, bc.walk[2] if bc.walk is not None else None, ksched_reason)
        if explain is not None and record is not None:
            names = nodes.names
            for i, name in enumerate(names):
                entry: dict[str, Any] = {}
                for plugin, (raw, norm, weighted) in record.items():
                    entry[plugin] = {"raw": int(raw[i]) if raw is not None else None, "normalized": int(norm[i]),
                                     "weighted": int(weighted[i])}
                entry["total"] = int(totals[i])
                explain.scores[name] = entry
            explain.selected = host
        return ScheduleResult(host, self._evaluated, len(feasible_rows))

    @staticmethod
    def _unbatchable(bc: _BatchCycle, fw: Framework, pod: Pod) -> str:
        """Why this cycle's scored nodes cannot serve the next pod exactly (ksched's conditions,
        framework/batch.py); "" if they can."""
        if bc.walk is None or not bc.walk[1]:
            return FLUSH_NOT_ALL_NODES_EVALUATED
        uid = pod.uid or pod.key
        nom = fw.nominator
        if nom is not None:
            for nn in nom.node_names():
                if any((pi.pod.uid or pi.pod.key) != uid for pi in nom.pods_for_node(nn)):
                    return FLUSH_CLUSTER_CHANGED  # nominated pods change what later pods see
        return ""

    def find_nodes_that_fit_pod(self, fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot,
                                explain: Explanation | None) -> tuple[np.ndarray, Diagnosis]:
        diagnosis = Diagnosis()
        all_nodes = snapshot.all_nodes()
        self._evaluated = 0
        pre_res, st, narrowing = fw.run_pre_filter(state, pod, all_nodes)
        if st is not None:
            if st.code == Code.ERROR:
                raise SchedulingError(st)
            diagnosis.absent_status = st
            diagnosis.pre_filter_msg = st.message()
            for pl in narrowing:
                diagnosis.unschedulable_plugins.add(pl)
            if st.plugin:
                diagnosis.add_plugin_of(st)
            if explain is not None:
                for name in all_nodes.names:
                    explain.filters[name] = {"plugin": st.plugin, "code": str(st.code), "reason": st.message()}
            return snapshot.order[:0], diagnosis
        rows = snapshot.order
        keep: frozenset[str] | None = None
        if pre_res is not None and pre_res.node_names is not None:
            keep = frozenset(pre_res.node_names)
            rows = np.asarray([r for r in rows.tolist() if snapshot.infos[r].name in keep],  # type: ignore[union-attr]
                              dtype=np.int64)
        n = len(rows)
        num_all = len(all_nodes)
        # Opportunistic batching: the node the previous pod's results point to, if any (after
        # PreFilter, as upstream's GetNodeHint).
        bc = self._batching
        hint = None
        if bc is not None and n:
            hint = bc.hint = bc.batch.get_node_hint(state, pod, snapshot, bc.cycle, bc.signature, keep, n,
                                                    self.next_start_node_index % n, self.rng, explain is not None)
        # The nominated node (from a previous preemption) is tried first.
        nn = pod.nominated_node_name
        if nn and fw.filter_plugins:
            ni = snapshot.get(nn)
            if ni is not None and (pre_res is None or pre_res.node_names is None or nn in pre_res.node_names):
                st2 = fw.run_filter_plugins_with_nominated_pods(state, pod, ni)
                if st2 is None:
                    self._evaluated = 1
                    if explain is not None:
                        explain.filters[nn] = "passed"
                    return np.asarray([snapshot.row_of[nn]], dtype=np.int64), diagnosis
                if st2.code == Code.ERROR:
                    raise SchedulingError(st2)
        # The hint is tried the same way. It is what the whole walk below would choose, so the
        # walk's effects are kept: the start index moves on by every candidate node.
        if hint is not None and bc is not None:
            ni = snapshot.infos[hint.row]
            assert ni is not None
            if fw.run_filter_plugins_with_nominated_pods(state, pod, ni) is None:
                bc.hint_used = True
                self.next_start_node_index = (self.next_start_node_index + n) % num_all
                self._evaluated = n
                return np.asarray([hint.row], dtype=np.int64), diagnosis
            if hint.rng_state is not None:
                self.rng.setstate(hint.rng_state)  # the walk below draws as if no hint was picked
        if keep is not None:
            diagnosis.absent_status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                             f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(narrowing))}]")
            diagnosis.unschedulable_plugins.update(narrowing)
        if n == 0:
            return rows, diagnosis
        # As upstream: the nodes are visited from nodes[next % n] (n: the PreFilter subset, if
        # any), and the index then moves on by the nodes processed, modulo all nodes.
        num_to_find = num_feasible_nodes_to_find(fw.percentage_of_nodes_to_score, n)
        if not fw.has_score_plugins():
            num_to_find = 1
        start = self.next_start_node_index % n
        if not fw.filter_plugins:
            sel = np.roll(rows, -start)[:num_to_find]
            self.next_start_node_index = (self.next_start_node_index + len(sel)) % num_all
            self._evaluated = len(sel)
            return sel, diagnosis
        finder = FeasibleNodeFinder(fw, snapshot)
        # Most cycles: the first nodes of the walk all pass (only they are looked at).
        got = finder.find_in_window(state, pod, rows, start, num_to_find) if explain is None else None
        if got is not None:
            feasible, processed = got
        else:
            ordered = np.concatenate((rows[start:], rows[:start])) if start else rows
            try:
                feasible, processed = finder.find(state, pod, ordered, num_to_find, diagnosis, explain,
                                                  rotation=start if rows is snapshot.order else None)
            except FilterError as e:
                self.next_start_node_index %= num_all
                raise SchedulingError(e.status) from e
        self.next_start_node_index = (self.next_start_node_index + processed) % num_all
        self._evaluated = processed
        if bc is not None:
            bc.walk = (rows, processed == n, keep)
        return feasible, diagnosis


class NoNodesAvailable(Exception):
    def __str__(self) -> str:
        return "no nodes available to schedule pods"


class SchedulingError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


class ScheduleOne:
    """The scheduling and binding cycles, as methods of the Scheduler (which provides the
    attributes declared here)."""

    client: Any
    cache: Cache
    snapshot: Snapshot
    queue: PriorityQueue
    informers: Any
    profiles: dict[str, Framework]
    metrics: SchedulerMetrics
    algorithm: Algorithm
    explain_enabled: bool
    explanations: dict[str, Explanation]
    record_attempts: bool
    attempts: dict[str, int]
    scheduled: int
    failed_attempts: int
    metrics_observer: Callable[[float], None] | None
    clock: Any
    _executor: ThreadPoolExecutor | None
    _binding_tasks: deque[BindingTask]
    _stopping: Any  # threading.Event | None
    _completed: _queue.SimpleQueue[BindingTask]
    _nominations_written: dict[str, str]
    _wake: Any
    _recorder: Callable[[Pod], EventRecorder]
    responsible_for: Callable[[Pod], bool]

    # ---------------------------------------------------------------- the scheduling cycle

    def schedule_one(self) -> bool:
        """Pop one pod and run its scheduling cycle. False when no pod was ready."""
        qpi = self.queue.pop()
        if qpi is None:
            return False
        pod = qpi.pod
        fw = self.profiles.get(pod.scheduler_name)
        if fw is None or self._skip(pod):
            self.queue.done(pod)
            return True
        start = time.perf_counter()
        if self.record_attempts:
            self.attempts[pod.key] = qpi.attempts
        self.cache.update_snapshot(self.snapshot)
        state = CycleState()
        explain = Explanation() if self.explain_enabled else None
        try:
            result = self.algorithm.schedule_pod(fw, state, pod, self.snapshot, explain, self.queue.scheduling_cycle)
        except FitError as fe:
            # Upstream: clearNominatedNode unless a PostFilter plugin ran (then its result, if any).
            nominating: PostFilterResult | None = None if fw.has_post_filter_plugins() else CLEAR_NOMINATION
            if fw.has_post_filter_plugins():
                res, st = fw.run_post_filter(state, pod, fe.diagnosis)
                if st.code != Code.SUCCESS or res is None or not res.nominated_node_name:
                    fe.diagnosis.post_filter_msg = st.message()
                if res is not None and res.mode != PostFilterResult.MODE_NOOP:
                    nominating = res
            if explain is not None:
                for p in fw.points["postFilter"]:
                    decision = p.last_decision if isinstance(p, ExplainedPostFilter) else None
                    if decision is not None:
                        explain.preemption = decision.to_dict()
            qpi.unschedulable_plugins = set(fe.diagnosis.unschedulable_plugins)
            qpi.pending_plugins = set(fe.diagnosis.pending_plugins)
            msg = str(fe)
            if explain is not None:
                explain.message = msg
                self.explanations[pod.key] = explain
            self._record_attempt(fw, "unschedulable", start)
            self._handle_failure(fw, qpi, Status(Code.UNSCHEDULABLE, msg), REASON_UNSCHEDULABLE, nominating)
            return True
        except (SchedulingError, NoNodesAvailable) as e:
            msg = str(e)
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
            if explain is not None:
                explain.message = msg
                self.explanations[pod.key] = explain
            if isinstance(e, NoNodesAvailable):
                # Upstream: UnschedulableAndUnresolvable (reason Unschedulable), no rejector plugin.
                self._record_attempt(fw, "unschedulable", start)
                self._handle_failure(fw, qpi, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg),
                                     REASON_UNSCHEDULABLE, CLEAR_NOMINATION)
                return True
            self._record_attempt(fw, "error", start)
            self._handle_failure(fw, qpi, Status.as_error(msg), REASON_SCHEDULER_ERROR, CLEAR_NOMINATION)
            return True
        if explain is not None:
            self.explanations[pod.key] = explain
        host = result.suggested_host
        assumed = pod_with_node(pod, host)
        try:
            self.cache.assume_pod(assumed, qpi.pod_info if ASSUME_LIKE_QUEUED else None)
        except CacheError as e:
            self._record_attempt(fw, "error", start)
            self._handle_failure(fw, qpi, Status.as_error(str(e)), REASON_SCHEDULER_ERROR, CLEAR_NOMINATION)
            return True
        if fw.batching:
            fw.batch.pod_assumed(host, self.cache.generation)
        self.queue.nominator.delete(pod)
        st = fw.run_reserve(state, assumed, host)
        if st is not None:
            fw.run_unreserve(state, assumed, host)
            self._forget(assumed)
            self._fail_after_assume(fw, qpi, st, start, host)
            return True
        st = fw.run_permit(state, assumed, host)
        if st is not None and st.code != Code.WAIT:
            fw.run_unreserve(state, assumed, host)
            self._forget(assumed)
            self._fail_after_assume(fw, qpi, st, start, host)
            return True
        self._record_attempt(fw, "scheduled", start)
        task = BindingTask(fw, state, qpi, assumed, host, start)
        if self._executor is not None:
            self._executor.submit(self._run_binding_in_thread, task)
        else:
            self._binding_tasks.append(task)
        return True

    def _skip(self, pod: Pod) -> bool:
        if pod.deletion_timestamp is not None:
            self._recorder(pod).event(pod, "Warning", "FailedScheduling", "Scheduling",
                              f"skip schedule deleting pod: {pod.namespace}/{pod.name}")
            return True
        return self.cache.is_assumed(pod)

    def _forget(self, assumed: Pod) -> None:
        try:
            self.cache.forget_pod(assumed)
        except CacheError as e:
            log.error("scheduler cache forget_pod failed: %s", e)

    def _fail_after_assume(self, fw: Framework, qpi: QueuedPodInfo, st: Status, start: float,
                           host: str = "") -> None:
        if st.is_rejected():
            qpi.unschedulable_plugins = {st.plugin} if st.plugin and st.code != Code.PENDING else set()
            qpi.pending_plugins = {st.plugin} if st.plugin and st.code == Code.PENDING else set()
            self._record_attempt(fw, "unschedulable", start)
            # Upstream wraps a Reserve/Permit rejection in a FitError over the one chosen node.
            d = Diagnosis()
            d.node_to_status[host] = st
            st = Status(st.code, fit_error_message(1, d), plugin=st.plugin)
            self._handle_failure(fw, qpi, st, REASON_UNSCHEDULABLE, CLEAR_NOMINATION)
        else:
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
            self._record_attempt(fw, "error", start)
            self._handle_failure(fw, qpi, st, REASON_SCHEDULER_ERROR, CLEAR_NOMINATION)

    def _record_attempt(self, fw: Framework, result: str, start: float) -> None:
        d = time.perf_counter() - start
        self.metrics.attempts.record(result, fw.profile_name, d)
        if self.metrics_observer is not None:
            self.metrics_observer(d)
        if result != "scheduled":
            self.failed_attempts += 1

    # ---------------------------------------------------------------- the binding cycle

    def _pre_flight(self, task: BindingTask) -> Status | None:
        """The start of the binding cycle, before WaitOnPermit: PreBindPreFlight, and
        (NominatedNodeNameForExpectation, beta and on in 1.36) when PreBind has work to do or
        the pod waits at Permit, the chosen node is written as the pod's nominatedNodeName so
        others (an autoscaler, another scheduler) see where it is about to go; a pod bound at
        once needs no such note. Returns a failure to end the binding cycle with."""
        fw, pod, host = task.fw, task.assumed, task.host
        pf = fw.run_pre_bind_pre_flights(task.state, pod, host)
        task.pre_flight, task.pre_flight_ran = pf, True
        if pf is not None and pf.code not in (Code.SUCCESS, Code.SKIP):
            return pf
        waits = fw.get_waiting_pod(pod.uid or pod.key) is not None
        if (pf is None or waits) and task.qpi.pod.nominated_node_name != host:
            try:
                self.client.patch("Pod", pod.namespace, pod.name, {"status": {"nominatedNodeName": host}},
                                  "application/strategic-merge-patch+json", "status")
            except ApiError as e:
                return Status.as_error(f"updating the nominated node of {pod.key}: {e.message}")
            # A failure of this binding cycle takes it back (upstream's clearNominatedNode), whether
            # or not the informer shows it by then.
            self._nominations_written[pod.key] = host
        return None

    def _binding_cycle(self, task: BindingTask) -> Status | None:
        fw, state, pod, host = task.fw, task.state, task.assumed, task.host
        if not task.pre_flight_ran:
            st = self._pre_flight(task)
            if st is not None:
                return st
        st = fw.wait_on_permit_result(pod)
        if st is not None:
            return st
        task.permit_passed = True
        pf = task.pre_flight
        if pf is None:
            st = fw.run_pre_bind(state, pod, host, task.pre_bind_from)
            if isinstance(st, WaitUntil):
                task.pre_bind_from, task.retry_at = st.resume, st.retry_at
                return st
            task.retry_at = None
            if st is not None:
                return st
        st = fw.run_bind(state, pod, host)
        if st is not None:
            return st
        fw.run_post_bind(state, pod, host)
        return None

    def _run_binding_in_thread(self, task: BindingTask) -> None:
        try:
            task.status = self._pre_flight(task)
            if task.status is None:
                wp = task.fw.get_waiting_pod(task.assumed.uid or task.assumed.key)
                while wp is not None and not wp.resolved:
                    wp.wait(0.5)
                    now = self.clock.now()
                    wp.check_timeout(now)
                task.status = self._binding_cycle(task)
                while isinstance(task.status, WaitUntil):
                    if not self._sleep_until(task.status.retry_at):
                        task.status = Status.as_error("scheduler is stopping", task.status.plugin)
                        break
                    task.status = self._binding_cycle(task)
        except Exception as e:  # a plugin's crash fails this binding, not the scheduler
            log.exception("binding cycle crashed")
            task.status = Status.as_error(e)
        task.done = True
        self._completed.put(task)
        self._wake.set()

    def _sleep_until(self, t: float) -> bool:
        """Threaded mode: wait until the clock reaches ``t``; False if the scheduler stops first."""
        stopping = self._stopping
        while True:
            left = t - self.clock.now()
            if left <= 0:
                return True
            if stopping is not None and stopping.is_set():
                return False
            time.sleep(min(left, 0.2))

    def next_binding_retry(self) -> float | None:
        """Single-threaded mode: when the earliest binding cycle waiting in PreBind asks again."""
        ts = [t.retry_at for t in self._binding_tasks if t.retry_at is not None]
        return min(ts) if ts else None

    def run_bindings(self) -> int:
        """Single-threaded mode: run the binding cycles whose pods are not waiting at Permit
        (nor in PreBind until a later time)."""
        n = 0
        tasks = self._binding_tasks
        now = self.clock.now()
        for _ in range(len(tasks)):
            task = tasks.popleft()
            if task.retry_at is not None and now < task.retry_at:
                tasks.append(task)
                continue
            if isinstance(task.status, WaitUntil):
                task.status = None  # its time has come: PreBind is asked again
            try:
                if not task.pre_flight_ran:
                    task.status = self._pre_flight(task)
                if task.status is None:
                    wp = task.fw.get_waiting_pod(task.assumed.uid or task.assumed.key)
                    if wp is not None and not wp.resolved:
                        tasks.append(task)
                        continue
                    task.status = self._binding_cycle(task)
                    if isinstance(task.status, WaitUntil):
                        tasks.append(task)
                        n += 1
                        continue
            except Exception as e:
                log.exception("binding cycle crashed")
                task.status = Status.as_error(e)
            self._complete_binding(task)
            n += 1
        return n

    def _drain_completed(self) -> int:
        n = 0
        while True:
            try:
                task = self._completed.get_nowait()
            except _queue.Empty:
                return n
            self._complete_binding(task)
            n += 1

    def _complete_binding(self, task: BindingTask) -> None:
        pod = task.assumed
        if task.status is None or task.permit_passed:
            # Upstream calls Done once WaitOnPermit passes; a pod rejected while waiting is still
            # in flight, so the events seen meanwhile decide where it goes back to.
            self.queue.done(pod)
        if task.status is None:
            if self._nominations_written:  # empty unless some binding cycle wrote a nomination
                self._nominations_written.pop(pod.key, None)  # binding cleared it (the API server does)
            self.cache.finish_binding(pod)
            self.scheduled += 1
            self._recorder(pod).event(task.qpi.pod, "Normal", "Scheduled", "Binding",
                              f"Successfully assigned {pod.namespace}/{pod.name} to {task.host}")
            return
        st = task.status
        task.fw.run_unreserve(task.state, pod, task.host)
        self._forget(pod)
        qpi = task.qpi
        err = st.error
        if isinstance(err, BindingConflict):
            # The conflict resolver refused: another instance took the room. Fail fast, retry now,
            # with no backoff penalty: the informer shows the other binding by the next attempt.
            self.metrics.binding_conflicts.inc()
            self._recorder(pod).event(qpi.pod, "Warning", "FailedScheduling", "Scheduling",
                              f"Binding rejected: {err.message}")
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
            written = self._nominations_written.pop(pod.key, "")
            if written:
                # A failed binding all the same: upstream clears the nomination (clearNominatedNode).
                self.queue.nominator.delete(qpi.pod)
                try:
                    self.client.patch("Pod", pod.namespace, pod.name, {"status": {"nominatedNodeName": None}},
                                      "application/strategic-merge-patch+json", "status")
                except ApiError as e:
                    log.debug("clearing the nominated node of %s failed: %s", pod.key, e)
            self.queue.requeue_after_conflict(qpi)
            return
        if isinstance(err, ApiError):
            self.metrics.binding_errors.inc()
        if st.is_rejected():
            # Deferred and without the pod itself, as upstream (its own hints would requeue it).
            self._fail_after_assume(task.fw, qpi, st, task.start, task.host)
            others = [q for q in self.queue.unschedulable.values() if q is not qpi]
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, pod, None, others)
            return
        self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, pod, None)
        self._fail_after_assume(task.fw, qpi, st, task.start, task.host)

    # ---------------------------------------------------------------- failures

    def _handle_failure(self, fw: Framework, qpi: QueuedPodInfo, st: Status, reason: str,
                        nominating: PostFilterResult | None) -> None:
        pod = qpi.pod
        msg = st.message()
        written = self._nominations_written.pop(pod.key, "")
        self._recorder(pod).event(pod, "Warning", "FailedScheduling", "Scheduling", msg)
        inf = self.informers.informers.get("Pod")
        cached = inf.get(pod.key) if inf is not None else None
        nominated = ""
        if cached is None or (cached.uid and pod.uid and cached.uid != pod.uid):
            # Deleted meanwhile: nothing to requeue.
            self.queue.done(pod)
            return
        assert isinstance(cached, Pod)
        if cached.node_name:
            self.queue.done(pod)
            return
        if not self.responsible_for(cached):
            # Handed to another scheduler meanwhile (another instance): its verdict, not ours.
            self.queue.done(pod)
            return
        if cached is not pod:
            qpi.pod_info = PodInfo(cached)
        self.queue.add_unschedulable_if_not_present(qpi, self.queue.scheduling_cycle)
        if nominating is not None and nominating.mode == PostFilterResult.MODE_OVERRIDE:
            # Reserve (or clear) the nominated node in memory now, before the status patch
            # comes back through the informer.
            nominated = nominating.nominated_node_name
            if nominated:
                self.queue.nominator.add(qpi.pod_info, nominated)
            else:
                self.queue.nominator.delete(qpi.pod)
        self._update_pod_status(cached, reason, msg, nominated, nominating is not None, written)

    def _update_pod_status(self, pod: Pod, reason: str, message: str, nominated: str, set_nominated: bool,
                           written: str = "") -> None:
        """Upstream's updatePod: the PodScheduled condition, and the nominated node when
        ``set_nominated`` (ModeOverride) and it differs. ``pod`` is the informer's copy;
        ``written``: the nominated node this pod's binding cycle wrote, which that copy may not
        show yet: a binding that failed at once must still clear it."""
        cond = pod.condition("PodScheduled")
        same = cond is not None and cond.get("status") == "False" and cond.get("reason") == reason and \
            cond.get("message") == message
        nn_change = set_nominated and (written or pod.nominated_node_name) != nominated
        if same and not nn_change:
            return
        patch: dict[str, Any] = {"status": {}}
        if not same:
            ltt = cond.get("lastTransitionTime") if cond is not None and cond.get("status") == "False" else None
            patch["status"]["conditions"] = [{
                "type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                "lastProbeTime": None, "lastTransitionTime": ltt or format_time(self.clock.now())}]
        if nn_change:
            patch["status"]["nominatedNodeName"] = nominated or None
        try:
            self.client.patch("Pod", pod.namespace, pod.name, patch, "application/strategic-merge-patch+json",
                              "status")
        except ApiError as e:
            log.debug("updating the status of %s failed: %s", pod.key, e)
