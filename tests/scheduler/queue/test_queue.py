"""The scheduling queue and the nominator (upstream backend/queue/scheduling_queue_test.go,
backoff_queue_test.go) on a virtual clock."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.pod import Pod
from ksched.clock import VirtualClock
from ksched.scheduler.framework.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    UNSCHEDULABLE_TIMEOUT,
    ActionType,
    ClusterEvent,
    EventResource,
    QueueingHint,
)
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import PodInfo, QueuedPodInfo
from ksched.scheduler.plugins.queuesort import PrioritySort
from ksched.scheduler.queue.nominator import Nominator
from ksched.scheduler.queue.scheduling_queue import (
    ACTIVE,
    BACKOFF,
    INFLIGHT,
    UNSCHEDULABLE,
    PriorityQueue,
    QueueingHintEntry,
)
from ksched.testing import make_pod

NODE_UPDATE_TAINT = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT, "UpdateNodeTaint")
GATES_ELIMINATED = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
TOLERATION = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION)


def gates(pod: Pod) -> Status | None:
    if pod.scheduling_gates:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "gated", plugin="SchedulingGates")
    if pod.labels.get("blocked") == "yes":
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "blocked", plugin="Blocker")
    return None


def hint(result: QueueingHint | Exception) -> Any:
    def fn(pod: Pod, old: Any, new: Any) -> QueueingHint:
        if isinstance(result, Exception):
            raise result
        return result
    return fn


def gate_hint(pod: Pod, old: Any, new: Any) -> QueueingHint:
    ok = new is not None and new.uid == pod.uid and not new.scheduling_gates
    return QueueingHint.QUEUE if ok else QueueingHint.QUEUE_SKIP


def default_hints() -> dict[str, Any]:
    return {"default-scheduler": {
        NODE_ADD: [QueueingHintEntry("NodeFit", hint(QueueingHint.QUEUE)),
                   QueueingHintEntry("SkipOnNodeAdd", hint(QueueingHint.QUEUE_SKIP)),
                   QueueingHintEntry("Broken", hint(RuntimeError("boom")))],
        NODE_UPDATE_TAINT: [QueueingHintEntry("Taints", None)],
        ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE): [QueueingHintEntry("NodeFit", None)],
        GATES_ELIMINATED: [QueueingHintEntry("SchedulingGates", gate_hint)],
        TOLERATION: [QueueingHintEntry("Taints", hint(QueueingHint.QUEUE))],
        ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_LABEL): [QueueingHintEntry("Blocker", None)],
    }}


def new_queue(clock: VirtualClock | None = None, *, sort_key: bool = True, **kw: Any) -> PriorityQueue:
    clock = clock or VirtualClock()
    ps = PrioritySort()
    kw.setdefault("pre_enqueue", gates)
    kw.setdefault("hints", default_hints())
    return PriorityQueue(clock, ps.less, ps.sort_key if sort_key else None, **kw)


def fail(q: PriorityQueue, qpi: QueuedPodInfo, *plugins: str, pending: tuple[str, ...] = ()) -> None:
    qpi.unschedulable_plugins = set(plugins)
    qpi.pending_plugins = set(pending)
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)


def names(q: PriorityQueue) -> list[str]:
    out = []
    while (qpi := q.pop()) is not None:
        out.append(qpi.pod.name)
    return out


# ------------------------------------------------------------------------------------ ordering


@pytest.mark.parametrize("sort_key", [True, False])
def test_priority_sort_order(sort_key: bool):
    clock = VirtualClock()
    q = new_queue(clock, sort_key=sort_key)
    for name, prio in [("low", 1), ("mid-1", 5), ("high", 10), ("mid-2", 5), ("none", None)]:
        q.add(make_pod(name, priority=prio))
        clock.advance(1)
    assert names(q) == ["high", "mid-1", "mid-2", "low", "none"]


def test_pop_counts_attempts_and_cycles():
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    qpi = q.pop()
    assert qpi.attempts == 1 and qpi.where == INFLIGHT
    assert qpi.initial_attempt_timestamp == clock.now()
    assert q.scheduling_cycle == 1
    assert q.pop() is None
    fail(q, qpi, "NodeFit")
    clock.advance(100)
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    again = q.pop()
    assert again is qpi and again.attempts == 2 and q.scheduling_cycle == 2
    assert again.initial_attempt_timestamp == clock.now() - 100


def test_add_twice_is_an_update():
    q = new_queue()
    first = make_pod("p", uid="u1", labels={"v": "1"})
    first.resource_version = "1"
    second = make_pod("p", uid="u1", labels={"v": "2"})
    second.resource_version = "2"
    a = q.add(first)
    b = q.add(second)
    assert a is b and len(q) == 1
    assert q.pop().pod.labels == {"v": "2"}


# ------------------------------------------------------------------------------------ backoff


def test_backoff_flow():
    """TestBackOffFlow: 1, 2, 4, 8, 10, 10, 10 s, aligned to 1 s windows; a pod leaves backoff
    once the window of its expiry is over."""
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("test-pod", namespace="test-ns", uid="test-uid"))
    for i, want in enumerate([1, 2, 4, 8, 10, 10, 10]):
        ts = clock.now()
        qpi = q.pop()
        assert qpi.attempts == i + 1
        fail(q, qpi, "NodeFit")
        assert qpi.where == UNSCHEDULABLE
        q.move_all_to_active_or_backoff(UNSCHEDULABLE_TIMEOUT)
        assert qpi.where == BACKOFF
        assert q.backoff_duration(qpi) == want
        exp = q.backoff_expiration(qpi)
        assert exp == float(int(ts + want))
        clock.advance(0.001)
        q.flush_backoff_completed()
        assert qpi.where == BACKOFF
        clock.advance_to(exp + 0.999)
        q.flush_backoff_completed()
        assert qpi.where == BACKOFF  # still in the window of its expiry
        assert q.next_backoff_wakeup() == exp + 1
        clock.advance_to(exp + 1)
        q.flush_backoff_completed()
        assert qpi.where == ACTIVE


@pytest.mark.parametrize(("initial", "maximum", "counts", "want"), [
    (1, 10, [1, 2, 3, 4, 5, 6], [1, 2, 4, 8, 10, 10]),
    (2, 30, [1, 2, 3, 4, 5], [2, 4, 8, 16, 30]),
    (1, 10, [0], [0]),
    (1, 0, [1, 5], [0, 0]),
    (1, 10, [64, 1000], [10, 10]),
])
def test_backoff_durations(initial: float, maximum: float, counts: list[int], want: list[float]):
    q = new_queue(initial_backoff=initial, max_backoff=maximum)
    qpi = QueuedPodInfo(PodInfo(make_pod("p")), 0.0)
    got = []
    for c in counts:
        qpi.unschedulable_count = c
        got.append(q.backoff_duration(qpi))
    assert got == want


def test_backoff_counts_errors_separately():
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    qpi = q.pop()
    fail(q, qpi, "NodeFit")
    fail_count = (qpi.unschedulable_count, qpi.consecutive_errors_count)
    assert fail_count == (1, 0)
    clock.advance(100)
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    qpi = q.pop()
    fail(q, qpi)  # an error: no rejector plugins
    assert (qpi.unschedulable_count, qpi.consecutive_errors_count) == (1, 1)
    # Errors are retried after backoff without any event.
    assert qpi.where == BACKOFF
    clock.advance(2)
    qpi = q.pop()
    fail(q, qpi)
    assert q.backoff_duration(qpi) == 2  # the consecutive error count decides
    clock.advance(100)
    q.flush_backoff_completed()
    qpi = q.pop()
    fail(q, qpi, "NodeFit")
    assert (qpi.unschedulable_count, qpi.consecutive_errors_count) == (2, 0)
    assert q.backoff_duration(qpi) == 2


def test_backoff_queue_ordering_within_a_window():
    """TestBackoffQueueOrdering: pods whose expiries share a window pop by priority."""
    clock = VirtualClock()
    q = new_queue(clock, pre_enqueue=None)
    now = clock.now()
    specs = [("pod0", 1, 0.0), ("pod1", 1, -1.0), ("pod2", 2, -2.0 + 0.001), ("pod3", 1, -2.0), ("pod4", 2, -2.0),
             ("pod5", 1, -3.0)]
    for name, prio, dt in specs:
        qpi = QueuedPodInfo(PodInfo(make_pod(name, priority=prio)), now + dt)
        qpi.unschedulable_count = 1
        qpi.unschedulable_plugins = {"plugin"}
        q.pods[qpi.pod.uid] = qpi
        q._push_backoff(qpi)
    moved: list[str] = []
    push = q._push_active
    q._push_active = lambda qpi: (moved.append(qpi.pod.name), push(qpi))  # type: ignore[method-assign]
    q.flush_backoff_completed()
    assert moved == ["pod5", "pod4", "pod2", "pod3"]


def test_pop_from_backoff_when_active_is_empty_rejected_pods_only():
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("rejected", priority=1))
    q.add(make_pod("errored", priority=10))
    errored = q.pop()
    rejected = q.pop()
    fail(q, rejected, "NodeFit")
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    fail(q, errored)
    assert rejected.where == BACKOFF and errored.where == BACKOFF
    assert q.is_backing_off(rejected) and q.is_backing_off(errored)
    # activeQ is empty: the rejected pod is popped although it is still backing off.
    assert q.pop() is rejected
    assert q.pop() is None
    assert q.has_poppable() is False
    clock.advance(2)
    assert q.pop() is errored


def test_hold_keeps_the_head_of_active_and_backoff_from_being_popped():
    """``hold`` (used by scheduler instances to keep the priority order across instances):
    while it says so, neither activeQ's head nor (with activeQ empty) backoffQ's is popped."""
    clock = VirtualClock()
    q = new_queue(clock)
    held = {"limit": 5}
    q.hold = lambda pod: (pod.priority or 0) < held["limit"]
    q.add(make_pod("high", priority=10))
    q.add(make_pod("low", priority=1))
    assert q.pop().pod.name == "high"
    assert q.has_poppable() is False and q.pop() is None and q.active_count() == 1
    held["limit"] = 0
    low = q.pop()
    assert low is not None and low.pod.name == "low"
    fail(q, low, "NodeFit")
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    assert low.where == BACKOFF
    held["limit"] = 5
    assert q.has_poppable() is False and q.pop() is None
    q.hold = None
    assert q.has_poppable() is True and q.pop() is low


def test_pop_from_backoff_disabled():
    clock = VirtualClock()
    q = new_queue(clock, pop_from_backoff=False)
    q.add(make_pod("p"))
    qpi = q.pop()
    fail(q, qpi, "NodeFit")
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    assert q.pop() is None
    clock.advance(2)
    assert q.pop() is qpi


def test_max_backoff_zero_disables_backoff():
    clock = VirtualClock()
    q = new_queue(clock, max_backoff=0)
    q.add(make_pod("p"))
    qpi = q.pop()
    fail(q, qpi, "NodeFit")
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    assert qpi.where == ACTIVE


# ------------------------------------------------------------------------------------ events


def failed_pod(q: PriorityQueue, name: str, *plugins: str, pending: tuple[str, ...] = (), **kw: Any) -> QueuedPodInfo:
    q.add(make_pod(name, **kw))
    qpi = q.pop()
    assert qpi.pod.name == name
    fail(q, qpi, *plugins, pending=pending)
    assert qpi.where == UNSCHEDULABLE
    return qpi


def test_events_move_pods_only_through_their_rejectors_hints():
    clock = VirtualClock()
    q = new_queue(clock)
    fit = failed_pod(q, "fit", "NodeFit")
    skip = failed_pod(q, "skip", "SkipOnNodeAdd")
    broken = failed_pod(q, "broken", "Broken")
    taints = failed_pod(q, "taints", "Taints")
    clock.advance(5)  # past the 1 s backoff
    moved = q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    assert moved == 2
    assert fit.where == ACTIVE
    assert broken.where == ACTIVE  # a hint that raises counts as Queue
    assert skip.where == UNSCHEDULABLE
    assert taints.where == UNSCHEDULABLE
    # A plugin registered without a hint function is asked nothing: Queue.
    q.move_all_to_active_or_backoff(NODE_UPDATE_TAINT, object(), object())
    assert taints.where == ACTIVE
    assert skip.where == UNSCHEDULABLE


def test_event_moves_to_backoff_while_backing_off():
    clock = VirtualClock()
    q = new_queue(clock)
    fit = failed_pod(q, "fit", "NodeFit")
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    assert fit.where == BACKOFF


def test_pending_plugin_queue_goes_to_active_at_once():
    clock = VirtualClock()
    q = new_queue(clock)
    pend = failed_pod(q, "pend", pending=("NodeFit",))
    assert pend.unschedulable_count == 1
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    assert pend.where == ACTIVE  # no backoff for Pending rejections


def test_uninteresting_events_do_nothing():
    q = new_queue()
    fit = failed_pod(q, "fit", "NodeFit")
    ev = ClusterEvent(EventResource.PERSISTENT_VOLUME, ActionType.ADD, "PVAdd")
    assert not q.interested(ev)
    assert q.move_all_to_active_or_backoff(ev, None, object()) == 0
    assert fit.where == UNSCHEDULABLE


def test_wildcard_and_error_pods():
    clock = VirtualClock()
    q = new_queue(clock)
    a = failed_pod(q, "a", "SkipOnNodeAdd")
    clock.advance(5)
    q.move_all_to_active_or_backoff(UNSCHEDULABLE_TIMEOUT)
    assert a.where == ACTIVE


def test_events_while_in_flight():
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("helped"))
    q.add(make_pod("not-helped"))
    helped, not_helped = q.pop(), q.pop()
    # A node appears while both are being scheduled.
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    fail(q, helped, "NodeFit")
    fail(q, not_helped, "SkipOnNodeAdd")
    assert helped.where == BACKOFF
    assert not_helped.where == UNSCHEDULABLE
    # Events before the pod was popped do not count.
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())  # moves not_helped? no: its hint says skip
    assert not_helped.where == UNSCHEDULABLE
    clock.advance(5)
    q.flush_backoff_completed()
    again = q.pop()
    assert again is helped
    fail(q, again, "NodeFit")
    assert again.where == UNSCHEDULABLE


def test_in_flight_events_are_dropped_when_no_pod_is_in_flight():
    q = new_queue()
    q.add(make_pod("a"))
    a = q.pop()
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    fail(q, a, "NodeFit")
    assert q._in_flight_events == []
    q.add(make_pod("b"))
    b = q.pop()
    q.done(b.pod)
    assert q._in_flight_events == [] and q.in_flight == {}


def test_in_flight_events_kept_are_those_since_the_oldest_pod_in_flight():
    """Pods finish in any order: the events kept are exactly those since the oldest pod still
    in flight popped (the queue finds it without scanning every pod in flight)."""
    import random

    rng = random.Random(7)
    q = new_queue()
    popped: dict[str, int] = {}  # uid -> number of events recorded before its pop
    total = 0
    for i in range(300):
        if rng.random() < 0.5 or not popped:
            q.add(make_pod(f"p{i}", uid=f"u{i}"))
            qpi = q.pop()
            popped[qpi.pod.uid] = total
        if rng.random() < 0.7:
            q.move_all_to_active_or_backoff(NODE_ADD, None, object())
            total += 1
        if popped and rng.random() < 0.45:
            uid = rng.choice(sorted(popped))
            q.done(q.in_flight[uid].pod)
            del popped[uid]
        kept = total - min(popped.values()) if popped else 0
        assert len(q._in_flight_events) == kept


def test_in_flight_pod_update_is_remembered():
    """Upstream records a pod's own update while it is in flight (addEventsIfPodInFlight): a
    toleration added during the attempt requeues the pod when the taint rejected it."""
    clock = VirtualClock()
    q = new_queue(clock)
    old = make_pod("p", uid="u")
    q.add(old)
    qpi = q.pop()
    new = make_pod("p", uid="u", tolerations=[{"key": "k", "operator": "Exists"}])
    new.resource_version = "2"
    q.update(old, new)
    fail(q, qpi, "Taints")
    assert qpi.where != UNSCHEDULABLE
    assert qpi.pod is new


def test_in_flight_pod_activation_is_remembered():
    """Activate on an in-flight pod registers a ForceActivate event for that pod only."""
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("target"))
    q.add(make_pod("other"))
    target, other = q.pop(), q.pop()
    q.activate([target.pod])
    fail(q, target, "SkipOnNodeAdd")
    fail(q, other, "SkipOnNodeAdd")
    assert target.where in (ACTIVE, BACKOFF)
    assert other.where == UNSCHEDULABLE


def test_activate():
    clock = VirtualClock()
    q = new_queue(clock)
    a = failed_pod(q, "a", "SkipOnNodeAdd")
    b = failed_pod(q, "b", "NodeFit")
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    assert b.where == BACKOFF
    q.activate([a.pod, b.pod, make_pod("unknown")])
    assert a.where == ACTIVE and b.where == ACTIVE
    assert [x.pod.name for x in (q.pop(), q.pop())] == ["a", "b"]
    assert q.pop() is None  # no stale backoff entry comes back


def test_requeue_after_conflict_skips_backoff():
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    qpi = q.pop()
    q.requeue_after_conflict(qpi)
    assert qpi.where == ACTIVE and qpi.unschedulable_count == 0 and qpi.consecutive_errors_count == 0
    assert q.pop() is qpi and qpi.attempts == 2


def test_assigned_pod_add_only_considers_affinity_and_spread_pods():
    clock = VirtualClock()
    hints = {"default-scheduler": {
        ClusterEvent(EventResource.POD, ActionType.ALL): [QueueingHintEntry("InterPodAffinity", None),
                                                          QueueingHintEntry("PodTopologySpread", None),
                                                          QueueingHintEntry("NodeFit", None)]}}
    q = new_queue(clock, hints=hints)
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}
    wants_db = failed_pod(q, "wants-db", "InterPodAffinity", affinity=aff)
    spread = failed_pod(q, "spread", "PodTopologySpread", namespace="ns1")
    spread_other_ns = failed_pod(q, "spread-other", "PodTopologySpread", namespace="ns2")
    fit = failed_pod(q, "fit", "NodeFit")
    clock.advance(5)
    q.assigned_pod_added(make_pod("web", namespace="ns1", labels={"app": "web"}, node_name="n"), ASSIGNED_POD_ADD)
    assert spread.where == ACTIVE
    assert wants_db.where == UNSCHEDULABLE and spread_other_ns.where == UNSCHEDULABLE
    assert fit.where == UNSCHEDULABLE
    q.assigned_pod_added(make_pod("db", labels={"app": "db"}, node_name="n"), ASSIGNED_POD_ADD)
    assert wants_db.where == ACTIVE
    assert fit.where == UNSCHEDULABLE
    # A deletion considers every pod.
    q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, make_pod("x", node_name="n"), None)
    assert fit.where == ACTIVE


# ------------------------------------------------------------------------------------ gates


def test_gated_pod_stays_out_until_gates_are_removed():
    clock = VirtualClock()
    q = new_queue(clock)
    old = make_pod("gated", uid="g", scheduling_gates=["example.com/wait"])
    qpi = q.add(old)
    assert qpi.where == UNSCHEDULABLE and qpi.gated and qpi.gating_plugin == "SchedulingGates"
    assert q.pop() is None
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, object()) == 0
    clock.advance(3600)
    q.flush_unschedulable_leftover(force=True)
    assert qpi.where == UNSCHEDULABLE
    q.activate([old])  # ForceActivate cannot pass the gate either
    assert qpi.where == UNSCHEDULABLE and q.pop() is None
    # A label change is no gate removal.
    relabeled = make_pod("gated", uid="g", labels={"x": "y"}, scheduling_gates=["example.com/wait"])
    relabeled.resource_version = "2"
    q.update(old, relabeled)
    assert qpi.where == UNSCHEDULABLE
    ungated = make_pod("gated", uid="g")
    ungated.resource_version = "3"
    q.update(relabeled, ungated)
    assert qpi.where == ACTIVE and not qpi.gated
    assert q.pop() is qpi and qpi.attempts == 1


def test_other_pre_enqueue_plugin_events():
    clock = VirtualClock()
    q = new_queue(clock)
    old = make_pod("b", uid="b", labels={"blocked": "yes"})
    qpi = q.add(old)
    assert qpi.gated and qpi.gating_plugin == "Blocker"
    new = make_pod("b", uid="b", labels={"blocked": "no"})
    new.resource_version = "2"
    q.update(old, new)
    assert qpi.where == ACTIVE


def test_pre_enqueue_runs_again_when_a_failed_pod_is_requeued():
    """Upstream runs PreEnqueue whenever a pod moves to activeQ or (with PopFromBackoffQ)
    backoffQ: a plugin that now blocks it (e.g. async preemption in flight) keeps it out."""
    clock = VirtualClock()
    blocked: set[str] = set()

    def pre_enqueue(pod: Pod) -> Status | None:
        if pod.uid in blocked:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "preempting", plugin="DefaultPreemption")
        return None

    q = new_queue(clock, pre_enqueue=pre_enqueue)
    q.add(make_pod("p", uid="p"))
    qpi = q.pop()
    blocked.add("p")
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    fail(q, qpi, "NodeFit")
    assert qpi.where == UNSCHEDULABLE and qpi.gated
    assert q.pop() is None
    blocked.clear()
    q.activate([qpi.pod])
    assert q.pop() is qpi


# ------------------------------------------------------------------------------------ leftovers


def test_unschedulable_leftovers_flushed_after_five_minutes_every_30s():
    clock = VirtualClock()
    t0 = clock.now()
    q = new_queue(clock)
    qpi = failed_pod(q, "p", "SkipOnNodeAdd")
    assert q.next_flush_wakeup() == t0 + 330
    for t in range(30, 301, 30):
        clock.advance_to(t0 + t)
        q.flush_unschedulable_leftover()
        assert qpi.where == UNSCHEDULABLE, t
    clock.advance_to(t0 + 329)
    assert q.flush_unschedulable_leftover() == 0  # not a flush tick
    clock.advance_to(t0 + 330)
    assert q.flush_unschedulable_leftover() == 1
    assert qpi.where == ACTIVE


def test_next_wakeup():
    clock = VirtualClock()
    q = new_queue(clock)
    assert q.next_wakeup() is None
    a = failed_pod(q, "a", "NodeFit")
    t = clock.now()
    assert q.next_wakeup() == t + 330
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    assert a.where == BACKOFF
    assert q.next_wakeup() == t + 2


# ------------------------------------------------------------------------------------ deletion


def test_delete_unschedulable_and_in_flight_pods():
    clock = VirtualClock()
    q = new_queue(clock)
    a = failed_pod(q, "a", "NodeFit")
    q.delete(a.pod)
    assert len(q) == 0 and a.pod.uid not in q.unschedulable
    q.move_all_to_active_or_backoff(UNSCHEDULABLE_TIMEOUT)
    assert q.pop() is None
    q.add(make_pod("b"))
    b = q.pop()
    q.delete(b.pod)
    fail(q, b, "NodeFit")  # comes back after deletion: dropped
    assert len(q) == 0 and q.pop() is None
    q.add(make_pod("c"))
    c_pod = q.pods[next(iter(q.pods))].pod
    q.delete(c_pod)
    assert q.pop() is None


def test_counts():
    clock = VirtualClock()
    q = new_queue(clock)
    failed_pod(q, "a", "NodeFit")
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    q.add(make_pod("b"))
    assert q.active_count() == 1 and q.backoff_count() == 1 and len(q.unschedulable) == 0
    assert {p.pod.name for p in q.pending_pods()} == {"a", "b"}


# ------------------------------------------------------------------------------------ nominator


def test_nominator_add_update_delete():
    n = Nominator()
    p1 = make_pod("p1", uid="1")
    n.add(PodInfo(p1), "node1")
    assert n.nominated_node(p1) == "node1"
    assert [pi.pod.name for pi in n.pods_for_node("node1")] == ["p1"]
    # From status.nominatedNodeName.
    p2 = make_pod("p2", uid="2", nominated_node_name="node1")
    n.add(PodInfo(p2))
    assert [pi.pod.name for pi in n.pods_for_node("node1")] == ["p1", "p2"]
    # Re-nominating moves the pod (never twice).
    n.add(PodInfo(p1), "node2")
    assert [pi.pod.name for pi in n.pods_for_node("node1")] == ["p2"]
    assert [pi.pod.name for pi in n.pods_for_node("node2")] == ["p1"]
    # An update keeps the nomination unless the new object names another node.
    n.update(p1, PodInfo(make_pod("p1", uid="1", labels={"a": "b"})))
    assert n.nominated_node(p1) == "node2"
    n.update(p1, PodInfo(make_pod("p1", uid="1", nominated_node_name="node3")))
    assert n.nominated_node(p1) == "node3"
    # Bound pods are not nominated.
    n.update(p1, PodInfo(make_pod("p1", uid="1", node_name="node3")))
    assert n.nominated_node(p1) == ""
    n.delete(p2)
    assert n.pods_for_node("node1") == [] and len(n) == 0
    n.add(PodInfo(make_pod("x", uid="x")))  # nothing to nominate to
    assert len(n) == 0
    n.add(PodInfo(make_pod("y", uid="y", node_name="n")), "n")
    assert len(n) == 0


def test_nominator_returns_copies_of_its_lists():
    n = Nominator()
    n.add(PodInfo(make_pod("p", uid="p")), "node1")
    lst = n.pods_for_node("node1")
    lst.clear()
    assert len(n.pods_for_node("node1")) == 1


def test_queue_keeps_nominations():
    clock = VirtualClock()
    q = new_queue(clock)
    p = make_pod("p", uid="p", nominated_node_name="node1")
    q.add(p)
    assert q.nominator.nominated_node(p) == "node1"
    qpi = q.pop()
    fail(q, qpi, "NodeFit")
    assert q.nominator.nominated_node(p) == "node1"
    q.delete(p)
    assert q.nominator.nominated_node(p) == ""


def test_pre_enqueue_on_leaving_backoff_without_pop_from_backoff():
    clock = VirtualClock()
    blocked: set[str] = set()

    def pre_enqueue(pod: Pod) -> Status | None:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "no", plugin="Blocker") if pod.uid in blocked else None

    q = new_queue(clock, pre_enqueue=pre_enqueue, pop_from_backoff=False)
    q.add(make_pod("p", uid="p"))
    qpi = q.pop()
    fail(q, qpi, "NodeFit")
    q.move_all_to_active_or_backoff(NODE_ADD, None, object())
    assert qpi.where == BACKOFF
    blocked.add("p")
    clock.advance(2)
    q.flush_backoff_completed()
    assert qpi.where == UNSCHEDULABLE and qpi.gated
