"""The scheduling queue, as upstream's PriorityQueue (1.36): activeQ ordered by the QueueSort
plugin, backoffQ with per-pod exponential backoff aligned to 1 s windows, unschedulable pods
moved back by cluster events through queueing hints (and flushed after 5 minutes),
PreEnqueue gates, in-flight pods with the events seen while they were being scheduled, and
the nominator.

Every timer reads the clock; ``next_wakeup`` says when the queue next has work for a loop
driven by a virtual clock.

Fast path: ``FAST_QUEUE`` (a pod's pop, done and add written out; the reference behind it,
``tests/scheduler/queue/test_queue_fast_ops.py`` checks they agree).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ksched.api.pod import Pod
from ksched.api.resources import pod_requests
from ksched.clock import Clock
from ksched.scheduler.framework.events import (
    FORCE_ACTIVATE,
    UNSCHEDULABLE_TIMEOUT,
    ActionType,
    ClusterEvent,
    EventResource,
    QueueingHint,
    QueueingHintFn,
)
from ksched.scheduler.framework.status import Status
from ksched.scheduler.framework.types import PodInfo, QueuedPodInfo
from ksched.scheduler.queue.nominator import Nominator

__all__ = ["PriorityQueue", "QueueingHintEntry"]

# The queue's per-pod operations of a pod that goes straight through (``pop`` from a non-empty
# activeQ with nothing backing off and no hold, ``done``, ``add`` of a new pod) with their
# helpers (``_clean_head``, ``_qpi_of``, ``_uid``, ``_entry_current``, ``_push_active``) written
# out, ``_trim_events`` not called while no pod is in flight and no event kept, and
# ``flush_backoff_completed`` returning at once with nothing backing off (they have nothing to do
# then); False: every call the reference's way (``_pop_reference``, ``_done_reference``,
# ``_add_reference``). The same queue state, order and calls to ``on_change``, ``pre_enqueue``
# and ``sort_key``.
FAST_QUEUE = True

DEFAULT_POD_INITIAL_BACKOFF = 1.0
DEFAULT_POD_MAX_BACKOFF = 10.0
DEFAULT_POD_MAX_IN_UNSCHEDULABLE = 300.0
UNSCHEDULABLE_FLUSH_INTERVAL = 30.0
BACKOFF_ORDERING_WINDOW = 1.0

QUEUE_SKIP = 0
QUEUE_AFTER_BACKOFF = 1
QUEUE_IMMEDIATELY = 2

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
INFLIGHT = "inflight"


@dataclass(frozen=True, slots=True)
class QueueingHintEntry:
    plugin: str
    hint: QueueingHintFn | None


# Per profile: registered event -> plugins' hint functions.
QueueingHintMap = dict[ClusterEvent, list[QueueingHintEntry]]


class _Key:
    """Heap entry ordered by a QueueSort ``less`` (used when the plugin offers no sort key)."""

    __slots__ = ("less", "qpi", "seq")

    def __init__(self, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool], qpi: QueuedPodInfo, seq: int) -> None:
        self.less = less
        self.qpi = qpi
        self.seq = seq

    def __lt__(self, other: _Key) -> bool:
        if self.less(self.qpi, other.qpi):
            return True
        if self.less(other.qpi, self.qpi):
            return False
        return self.seq < other.seq


class PriorityQueue:
    def __init__(self, clock: Clock, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool],
                 sort_key: Callable[[QueuedPodInfo], Any] | None = None, *,
                 pre_enqueue: Callable[[Pod], Status | None] | None = None,
                 hints: dict[str, QueueingHintMap] | None = None,
                 profile_of: Callable[[Pod], str] | None = None,
                 initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF,
                 max_backoff: float = DEFAULT_POD_MAX_BACKOFF,
                 max_in_unschedulable: float = DEFAULT_POD_MAX_IN_UNSCHEDULABLE,
                 pop_from_backoff: bool = True) -> None:
        self.clock = clock
        self.less = less
        self.sort_key = sort_key
        self.pre_enqueue = pre_enqueue
        self.hints: dict[str, QueueingHintMap] = hints or {}
        self.profile_of = profile_of or (lambda p: p.scheduler_name)
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self.pop_from_backoff = pop_from_backoff
        self._active: list[Any] = []
        self._backoff: list[Any] = []
        self._error_backoff: list[Any] = []
        self.unschedulable: dict[str, QueuedPodInfo] = {}
        self.in_flight: dict[str, QueuedPodInfo] = {}
        self._in_flight_start: dict[str, int] = {}
        self._in_flight_events: list[tuple[ClusterEvent, Any, Any]] = []
        self._events_base = 0  # index of _in_flight_events[0] in the global event sequence
        self.pods: dict[str, QueuedPodInfo] = {}  # every pod the queue holds, by uid
        self.nominator = Nominator()
        self.scheduling_cycle = 0
        self._seq = itertools.count()
        self._last_unschedulable_flush = clock.now()
        self.on_change: Callable[[], None] | None = None
        # Keeps the pod at the head of the queue from being popped while it returns True (not
        # upstream: a scheduler instance holds back its pods while another instance has a pod
        # of higher priority still to try, see ksched.dispatch.instance.PriorityBarrier).
        self.hold: Callable[[Pod], bool] | None = None

    # ---------------------------------------------------------------- helpers

    @staticmethod
    def _uid(pod: Pod) -> str:
        return pod.uid or pod.key

    def _entry(self, qpi: QueuedPodInfo) -> Any:
        seq = next(self._seq)
        qpi.seq = seq
        if self.sort_key is not None:
            return (self.sort_key(qpi), seq, qpi)
        return _Key(self.less, qpi, seq)

    @staticmethod
    def _qpi_of(entry: Any) -> QueuedPodInfo:
        return entry[2] if isinstance(entry, tuple) else entry.qpi

    def _push_active(self, qpi: QueuedPodInfo) -> None:
        qpi.where = ACTIVE
        heapq.heappush(self._active, self._entry(qpi))
        if self.on_change is not None:
            self.on_change()

    def _push_backoff(self, qpi: QueuedPodInfo) -> None:
        qpi.where = BACKOFF
        exp = self.backoff_expiration(qpi)
        heap = self._backoff if qpi.unschedulable_count > 0 and qpi.consecutive_errors_count == 0 else \
            self._error_backoff
        heapq.heappush(heap, (exp, self._entry(qpi)))

    def new_queued_pod_info(self, pod: Pod) -> QueuedPodInfo:
        return QueuedPodInfo(PodInfo(pod), self.clock.now())

    # ---------------------------------------------------------------- backoff

    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        count = qpi.consecutive_errors_count if qpi.consecutive_errors_count > 0 else qpi.unschedulable_count
        if count <= 0 or self.max_backoff == 0:
            return 0.0
        d = self.initial_backoff * (2 ** (count - 1)) if count < 64 else self.max_backoff
        return min(d, self.max_backoff)

    def backoff_expiration(self, qpi: QueuedPodInfo) -> float:
        if qpi.backoff_expiration is None:
            d = self.backoff_duration(qpi)
            exp = qpi.timestamp + d
            if d > 0:
                # Aligned to the 1 s ordering window (SchedulerPopFromBackoffQ).
                exp = math.floor(exp / BACKOFF_ORDERING_WINDOW) * BACKOFF_ORDERING_WINDOW
            qpi.backoff_expiration = exp
        return qpi.backoff_expiration

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        if self.backoff_duration(qpi) == 0:
            return False
        now = math.floor(self.clock.now() / BACKOFF_ORDERING_WINDOW) * BACKOFF_ORDERING_WINDOW
        return self.backoff_expiration(qpi) >= now

    # ---------------------------------------------------------------- adding pods

    def _run_pre_enqueue(self, qpi: QueuedPodInfo) -> bool:
        if self.pre_enqueue is None:
            qpi.gated = False
            return True
        st = self.pre_enqueue(qpi.pod)
        if st is None or st.is_success():
            qpi.gated = False
            qpi.gating_plugin = ""
            return True
        qpi.gated = True
        qpi.gating_plugin = st.plugin
        return False

    def add(self, pod: Pod) -> QueuedPodInfo:
        """A new unscheduled pod: to activeQ, or held in unschedulable pods while gated."""
        if not FAST_QUEUE:
            return self._add_reference(pod)
        uid = pod.uid or pod.key
        pods = self.pods
        existing = pods.get(uid)
        if existing is not None:
            self.update(existing.pod, pod)
            return existing
        qpi = self.new_queued_pod_info(pod)
        pods[uid] = qpi
        pre_enqueue = self.pre_enqueue
        if pre_enqueue is None:  # _run_pre_enqueue
            qpi.gated = False
            admitted = True
        else:
            st = pre_enqueue(pod)
            if st is None or st.is_success():
                qpi.gated = False
                qpi.gating_plugin = ""
                admitted = True
            else:
                qpi.gated = True
                qpi.gating_plugin = st.plugin
                admitted = False
        if admitted:
            qpi.where = ACTIVE  # _push_active(qpi), with _entry(qpi)
            seq = next(self._seq)
            qpi.seq = seq
            sort_key = self.sort_key
            heapq.heappush(self._active, (sort_key(qpi), seq, qpi) if sort_key is not None
                           else _Key(self.less, qpi, seq))
            if self.on_change is not None:
                self.on_change()
        else:
            qpi.where = UNSCHEDULABLE
            self.unschedulable[uid] = qpi
        if pod.nominated_node_name:
            self.nominator.add(qpi.pod_info)
        return qpi

    def _add_reference(self, pod: Pod) -> QueuedPodInfo:
        uid = self._uid(pod)
        existing = self.pods.get(uid)
        if existing is not None:
            self.update(existing.pod, pod)
            return existing
        qpi = self.new_queued_pod_info(pod)
        self.pods[uid] = qpi
        if self._run_pre_enqueue(qpi):
            self._push_active(qpi)
        else:
            qpi.where = UNSCHEDULABLE
            self.unschedulable[uid] = qpi
        if pod.nominated_node_name:
            self.nominator.add(qpi.pod_info)
        return qpi

    def activate(self, pods: Iterable[Pod]) -> None:
        """Move pods to activeQ at once (the podsToActivate mechanism). A pod in flight gets a
        ForceActivate event meant for it alone, so it is requeued if its attempt fails."""
        for pod in pods:
            qpi = self.pods.get(self._uid(pod))
            if qpi is None:
                continue
            if qpi.where == INFLIGHT:
                self._in_flight_events.append((FORCE_ACTIVATE, None, qpi.pod))
                continue
            if qpi.where not in (BACKOFF, UNSCHEDULABLE):
                continue
            self._move_to_active_or_backoff(qpi, QUEUE_IMMEDIATELY, FORCE_ACTIVATE)

    def update(self, old: Pod | None, new: Pod) -> None:
        uid = self._uid(new)
        qpi = self.pods.get(uid)
        if qpi is None:
            self.add(new)
            return
        if old is not None and old.resource_version == new.resource_version and old is not new:
            return
        prev = qpi.pod
        qpi.pod_info = PodInfo(new)
        if new.nominated_node_name or self.nominator.nominated_node(prev):
            self.nominator.update(prev, qpi.pod_info)
        where = qpi.where
        if where == INFLIGHT:
            # Remembered for the pod's return (upstream's addEventsIfPodInFlight): the update may
            # resolve what rejects it in this attempt.
            for ev in pod_update_events(prev, new):
                self._in_flight_events.append((ev, prev, new))
            return
        if where in (ACTIVE, BACKOFF):
            return  # heaps hold the qpi by reference; order keys depend on priority/timestamp only
        if where != UNSCHEDULABLE:
            return
        if qpi.gated:
            if self._run_pre_enqueue(qpi):
                # Gates removed: the pod becomes schedulable now.
                del self.unschedulable[uid]
                self._push_active(qpi)
            return
        events = pod_update_events(prev, new)
        if not events:
            return  # status-only changes do not make a pod schedulable
        for ev in events:
            strategy = self._worth_requeuing(qpi, ev, prev, new)
            if strategy != QUEUE_SKIP:
                del self.unschedulable[uid]
                self._requeue(qpi, strategy, ev)
                return

    def delete(self, pod: Pod) -> None:
        uid = self._uid(pod)
        qpi = self.pods.pop(uid, None)
        self.nominator.delete(pod)
        if qpi is None:
            return
        if qpi.where == UNSCHEDULABLE:
            self.unschedulable.pop(uid, None)
        qpi.where = ""  # lazily dropped from heaps

    # ---------------------------------------------------------------- pop / done

    def _clean_head(self, heap: list[Any], backoff: bool) -> None:
        while heap:
            e = heap[0][1] if backoff else heap[0]
            qpi = self._qpi_of(e)
            want = BACKOFF if backoff else ACTIVE
            if qpi.where == want and self.pods.get(self._uid(qpi.pod)) is qpi and self._entry_current(qpi, e):
                return
            heapq.heappop(heap)

    @staticmethod
    def _entry_current(qpi: QueuedPodInfo, e: Any) -> bool:
        seq = e[1] if isinstance(e, tuple) else e.seq
        return qpi.seq == seq

    def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule, or None when there is none (non-blocking). With
        SchedulerPopFromBackoffQ, an empty activeQ yields the head of backoffQ."""
        if FAST_QUEUE and self._active and not self._backoff and not self._error_backoff and self.hold is None:
            # flush_backoff_completed has nothing to flush (it reads the clock, no more).
            active = self._active
            pods = self.pods
            while active:  # _clean_head(active, False)
                e = active[0]
                if isinstance(e, tuple):
                    qpi = e[2]
                    seq = e[1]
                else:
                    qpi = e.qpi
                    seq = e.seq
                if qpi.where == ACTIVE:
                    pod = qpi.pod_info.pod
                    if pods.get(pod.uid or pod.key) is qpi and qpi.seq == seq:
                        break
                heapq.heappop(active)
            if active:
                e = heapq.heappop(active)
                qpi = e[2] if isinstance(e, tuple) else e.qpi
                pod = qpi.pod_info.pod
                uid = pod.uid or pod.key
                qpi.where = INFLIGHT
                qpi.attempts += 1
                if qpi.initial_attempt_timestamp is None:
                    qpi.initial_attempt_timestamp = self.clock.now()
                qpi.backoff_expiration = None
                self.scheduling_cycle += 1
                self.in_flight[uid] = qpi
                start = self._in_flight_start
                start.pop(uid, None)
                start[uid] = self._events_base + len(self._in_flight_events)
                return qpi
            # (activeQ held only stale entries: the reference's way finds nothing either.)
        return self._pop_reference()

    def _pop_reference(self) -> QueuedPodInfo | None:
        self.flush_backoff_completed()
        self._clean_head(self._active, False)
        hold = self.hold
        if self._active:
            if hold is not None and hold(self._qpi_of(self._active[0]).pod):
                return None
            qpi = self._qpi_of(heapq.heappop(self._active))
        elif self.pop_from_backoff:
            # Only pods rejected by plugins; pods that hit errors wait out their backoff.
            self._clean_head(self._backoff, True)
            if not self._backoff or (hold is not None and hold(self._qpi_of(self._backoff[0][1]).pod)):
                return None
            qpi = self._qpi_of(heapq.heappop(self._backoff)[1])
        else:
            return None
        uid = self._uid(qpi.pod)
        qpi.where = INFLIGHT
        qpi.attempts += 1
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = self.clock.now()
        qpi.backoff_expiration = None
        self.scheduling_cycle += 1
        self.in_flight[uid] = qpi
        self._in_flight_start.pop(uid, None)  # (re)inserted last: starts stay in order
        self._in_flight_start[uid] = self._events_base + len(self._in_flight_events)
        return qpi

    def done(self, pod: Pod) -> None:
        """The pod's scheduling attempt is over (its binding cycle got past Permit). The pod
        stays known until the informer reports it bound or deleted, or it is handed back."""
        if not FAST_QUEUE:
            self._done_reference(pod)
            return
        uid = pod.uid or pod.key
        self.in_flight.pop(uid, None)
        start = self._in_flight_start
        start.pop(uid, None)
        qpi = self.pods.get(uid)
        if qpi is not None and qpi.where == INFLIGHT:
            qpi.where = ""
        if start or self._in_flight_events:
            self._trim_events()
        # (else _trim_events adds 0 to _events_base and clears an empty list)

    def _done_reference(self, pod: Pod) -> None:
        uid = self._uid(pod)
        self.in_flight.pop(uid, None)
        self._in_flight_start.pop(uid, None)
        qpi = self.pods.get(uid)
        if qpi is not None and qpi.where == INFLIGHT:
            qpi.where = ""
        self._trim_events()

    def requeue_after_conflict(self, qpi: QueuedPodInfo) -> None:
        """A binding refused by the conflict resolver: straight back to activeQ, no backoff."""
        uid = self._uid(qpi.pod)
        self.in_flight.pop(uid, None)
        self._in_flight_start.pop(uid, None)
        self._trim_events()
        if self.pods.get(uid) is not qpi:
            return
        qpi.timestamp = self.clock.now()
        qpi.backoff_expiration = None
        self._push_active(qpi)

    def _trim_events(self) -> None:
        if not self._in_flight_start:
            self._events_base += len(self._in_flight_events)
            self._in_flight_events.clear()
            return
        # Pods enter _in_flight_start when popped, with the sequence number of the next event:
        # in insertion order those numbers never decrease, so the first entry is the oldest
        # in-flight pod's (O(1) instead of a min() over every pod in flight, thousands while
        # bindings queue up behind a remote API server).
        first = next(iter(self._in_flight_start.values()))
        drop = first - self._events_base
        if drop > 0:
            del self._in_flight_events[:drop]
            self._events_base = first

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo, scheduling_cycle: int) -> None:
        """A failed attempt: back to unschedulable pods, backoffQ or activeQ depending on the
        events that happened while the pod was in flight."""
        pod = qpi.pod
        uid = self._uid(pod)
        start = self._in_flight_start.pop(uid, None)
        self.in_flight.pop(uid, None)
        if self.pods.get(uid) is not qpi:
            self._trim_events()
            return  # deleted meanwhile
        qpi.timestamp = self.clock.now()
        qpi.backoff_expiration = None
        if qpi.unschedulable_plugins or qpi.pending_plugins:
            qpi.unschedulable_count += 1
            qpi.consecutive_errors_count = 0
        else:
            qpi.consecutive_errors_count += 1
        # As upstream (addNominatedPod with no nominating info): the nomination follows the pod
        # object's status; the failure handler then applies a PostFilter override.
        self.nominator.delete(pod)
        if pod.nominated_node_name:
            self.nominator.add(qpi.pod_info)
        strategy = QUEUE_SKIP
        if not qpi.unschedulable_plugins and not qpi.pending_plugins:
            strategy = QUEUE_AFTER_BACKOFF  # an error: always retried after backoff
        elif start is None:
            strategy = QUEUE_AFTER_BACKOFF  # no longer in flight (failed in binding): retry after backoff
        else:
            events = self._in_flight_events[max(0, start - self._events_base):]
            for ev, old, new in events:
                s = self._worth_requeuing(qpi, ev, old, new)
                if s > strategy:
                    strategy = s
                    if s == QUEUE_IMMEDIATELY:
                        break
        self._trim_events()
        if strategy == QUEUE_SKIP:
            qpi.where = UNSCHEDULABLE
            self.unschedulable[uid] = qpi
        else:
            self._requeue(qpi, strategy, None)

    # ---------------------------------------------------------------- events

    def _requeue(self, qpi: QueuedPodInfo, strategy: int, event: ClusterEvent | None) -> None:
        """To activeQ or backoffQ; PreEnqueue runs first (as upstream's moveToActiveQ and, with
        PopFromBackoffQ, moveToBackoffQ) and a gated pod goes to unschedulable pods instead."""
        if self.pre_enqueue is not None and not self._run_pre_enqueue(qpi):
            qpi.where = UNSCHEDULABLE
            self.unschedulable[self._uid(qpi.pod)] = qpi
            return
        if strategy == QUEUE_IMMEDIATELY or not self.is_backing_off(qpi):
            self._push_active(qpi)
        else:
            self._push_backoff(qpi)

    def _move_to_active_or_backoff(self, qpi: QueuedPodInfo, strategy: int, event: ClusterEvent) -> None:
        uid = self._uid(qpi.pod)
        if qpi.where == UNSCHEDULABLE:
            self.unschedulable.pop(uid, None)
        elif qpi.where == BACKOFF and strategy == QUEUE_IMMEDIATELY:
            pass  # the stale backoff entry is skipped when popped
        else:
            return
        self._requeue(qpi, strategy, event)

    def _worth_requeuing(self, qpi: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any) -> int:
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if qpi.gated:
            rejectors = {qpi.gating_plugin} if qpi.gating_plugin else set()
        if not rejectors:
            return QUEUE_AFTER_BACKOFF
        if event.is_wildcard():
            # A wildcard event carrying a pod (ForceActivate of an in-flight pod) is for that pod only.
            if isinstance(new, Pod) and self._uid(new) != self._uid(qpi.pod):
                return QUEUE_SKIP
            return QUEUE_AFTER_BACKOFF
        hint_map = self.hints.get(self.profile_of(qpi.pod))
        if not hint_map:
            return QUEUE_AFTER_BACKOFF
        strategy = QUEUE_SKIP
        pod = qpi.pod
        for registered, entries in hint_map.items():
            if not registered.match(event):
                continue
            for e in entries:
                if e.plugin not in rejectors:
                    continue
                if e.hint is None:
                    h = QueueingHint.QUEUE
                else:
                    try:
                        h = e.hint(pod, old, new)
                    except Exception:
                        h = QueueingHint.QUEUE
                if h == QueueingHint.QUEUE_SKIP:
                    continue
                if e.plugin in qpi.pending_plugins:
                    return QUEUE_IMMEDIATELY
                strategy = QUEUE_AFTER_BACKOFF
        return strategy

    def interested(self, event: ClusterEvent) -> bool:
        for hm in self.hints.values():
            for registered in hm:
                if registered.match(event):
                    return True
        return False

    def move_all_to_active_or_backoff(self, event: ClusterEvent, old: Any = None, new: Any = None,
                                      pods: Iterable[QueuedPodInfo] | None = None) -> int:
        """A cluster event: requeue the unschedulable pods it may help (by their rejectors'
        queueing hints) and remember it for pods in flight. Returns how many moved."""
        if self.in_flight:
            self._in_flight_events.append((event, old, new))
        if not self.unschedulable:
            return 0
        if not event.is_wildcard() and not self.interested(event):
            return 0
        cands = list(self.unschedulable.values()) if pods is None else list(pods)
        moved = 0
        for qpi in cands:
            if qpi.where != UNSCHEDULABLE:
                continue
            if qpi.gated and event is not UNSCHEDULABLE_TIMEOUT and event is not FORCE_ACTIVATE:
                # Gated pods only move by their gating plugin's events.
                s = self._worth_requeuing(qpi, event, old, new)
                if s == QUEUE_SKIP or not self._run_pre_enqueue(qpi):
                    continue
            else:
                s = self._worth_requeuing(qpi, event, old, new)
                if s == QUEUE_SKIP:
                    continue
            self._move_to_active_or_backoff(qpi, s, event)
            moved += 1
        return moved

    def assigned_pod_added(self, pod: Pod, event: ClusterEvent) -> int:
        """An assigned pod appeared: only pods whose required affinity terms match it, or that
        PodTopologySpread rejected in its namespace, can gain from it."""
        if self.in_flight:
            self._in_flight_events.append((event, None, pod))
        if not self.unschedulable:
            return 0
        cands = [q for q in self.unschedulable.values() if _cross_topology(q, pod)]
        if not cands:
            return 0
        if self.in_flight:
            self._in_flight_events.pop()
        return self.move_all_to_active_or_backoff(event, None, pod, cands)

    # ---------------------------------------------------------------- timers

    def flush_backoff_completed(self) -> int:
        if FAST_QUEUE and not self._backoff and not self._error_backoff:
            return 0  # (every scheduling step asks; the clock's reading has no effect)
        now = self.clock.now()
        moved = 0
        for heap in (self._backoff, self._error_backoff):
            while heap:
                exp, e = heap[0]
                qpi = self._qpi_of(e)
                if qpi.where != BACKOFF or self.pods.get(self._uid(qpi.pod)) is not qpi or \
                        not self._entry_current(qpi, e):
                    heapq.heappop(heap)
                    continue
                if exp >= math.floor(now / BACKOFF_ORDERING_WINDOW) * BACKOFF_ORDERING_WINDOW and \
                        self.backoff_duration(qpi) > 0:
                    break
                heapq.heappop(heap)
                if not self.pop_from_backoff and self.pre_enqueue is not None and not self._run_pre_enqueue(qpi):
                    # Without PopFromBackoffQ, PreEnqueue runs on the way to activeQ.
                    qpi.where = UNSCHEDULABLE
                    self.unschedulable[self._uid(qpi.pod)] = qpi
                    continue
                self._push_active(qpi)
                moved += 1
        return moved

    def flush_unschedulable_leftover(self, force: bool = False) -> int:
        """Every 30 s: pods unschedulable for longer than 5 minutes go back (UnschedulableTimeout)."""
        now = self.clock.now()
        if not force and now - self._last_unschedulable_flush < UNSCHEDULABLE_FLUSH_INTERVAL:
            return 0
        self._last_unschedulable_flush = now
        old = [q for q in self.unschedulable.values()
               if now - q.timestamp > self.max_in_unschedulable and not q.gated]
        if not old:
            return 0
        return self.move_all_to_active_or_backoff(UNSCHEDULABLE_TIMEOUT, pods=old)

    def next_backoff_wakeup(self) -> float | None:
        """When the next backing-off pod becomes ready."""
        best: float | None = None
        for heap in (self._backoff, self._error_backoff):
            for exp, e in heap:
                qpi = self._qpi_of(e)
                if qpi.where == BACKOFF and self._entry_current(qpi, e):
                    t = exp + BACKOFF_ORDERING_WINDOW
                    if best is None or t < best:
                        best = t
        return best

    def next_flush_wakeup(self) -> float | None:
        """When the periodic flush next moves a pod that has been unschedulable for too long."""
        oldest = min((q.timestamp for q in self.unschedulable.values() if not q.gated), default=None)
        if oldest is None:
            return None
        due = oldest + self.max_in_unschedulable
        flush = self._last_unschedulable_flush + UNSCHEDULABLE_FLUSH_INTERVAL
        while flush <= due:
            flush += UNSCHEDULABLE_FLUSH_INTERVAL
        return flush

    def next_wakeup(self) -> float | None:
        """When the queue next has something to do by itself (backoff expiry, flush)."""
        times = [t for t in (self.next_backoff_wakeup(), self.next_flush_wakeup()) if t is not None]
        return min(times) if times else None

    # ---------------------------------------------------------------- introspection

    def active_count(self) -> int:
        return sum(1 for e in self._active if self._qpi_of(e).where == ACTIVE and
                   self._entry_current(self._qpi_of(e), e))

    def backoff_count(self) -> int:
        return sum(1 for h in (self._backoff, self._error_backoff) for _, e in h
                   if self._qpi_of(e).where == BACKOFF and self._entry_current(self._qpi_of(e), e))

    def has_active(self) -> bool:
        self._clean_head(self._active, False)
        return bool(self._active)

    def has_poppable(self) -> bool:
        """Whether ``pop`` would return a pod now."""
        hold = self.hold
        if self.has_active():
            return hold is None or not hold(self._qpi_of(self._active[0]).pod)
        if not self.pop_from_backoff:
            return False
        self._clean_head(self._backoff, True)
        return bool(self._backoff) and (hold is None or not hold(self._qpi_of(self._backoff[0][1]).pod))

    def pending_pods(self) -> list[QueuedPodInfo]:
        return list(self.pods.values())

    def __len__(self) -> int:
        return len(self.pods)


def _cross_topology(qpi: QueuedPodInfo, assigned: Pod) -> bool:
    pi = qpi.pod_info
    pod = pi.pod
    for t in pi.required_affinity_terms:
        if t.label_selector.matches(assigned.labels) and (
                assigned.namespace in t.namespaces or t.namespace_selector is not None):
            return True
    return "PodTopologySpread" in qpi.unschedulable_plugins and pod.namespace == assigned.namespace


def pod_update_events(old: Pod, new: Pod) -> list[ClusterEvent]:
    """What changed in an unscheduled pod that may matter to scheduling (upstream's
    PodSchedulingPropertiesChange)."""
    evs: list[ClusterEvent] = []
    if old.labels != new.labels:
        evs.append(ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_LABEL, "UpdatePodLabel"))
    if old.scheduling_gates and not new.scheduling_gates:
        evs.append(ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
                                "UpdatePodSchedulingGatesEliminated"))
    if [t.key_tuple() for t in old.tolerations] != [t.key_tuple() for t in new.tolerations]:
        evs.append(ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION,
                                "UpdatePodToleration"))
    old_spec = old.raw.get("spec") or {}
    new_spec = new.raw.get("spec") or {}
    if _requests_decreased(old, new):
        evs.append(ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCALE_DOWN,
                                "UpdatePodScaleDown"))
    os_, ns_ = old.raw.get("status") or {}, new.raw.get("status") or {}
    if os_.get("resourceClaimStatuses") != ns_.get("resourceClaimStatuses") or \
            os_.get("extendedResourceClaimStatus") != ns_.get("extendedResourceClaimStatus"):
        evs.append(ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM,
                                "UpdatePodGeneratedResourceClaim"))
    if not evs and {k: v for k, v in old_spec.items() if k != "schedulingGates"} != \
            {k: v for k, v in new_spec.items() if k != "schedulingGates"}:
        evs.append(ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_OTHER, "UpdatePodOther"))
    return evs


def _requests_decreased(old: Pod, new: Pod) -> bool:
    a = pod_requests(old)
    b = pod_requests(new)
    return any(b.get(k, 0) < v for k, v in a.items())

