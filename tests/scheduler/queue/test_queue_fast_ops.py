"""``scheduling_queue.FAST_QUEUE``: ``pop``, ``done`` and ``add`` of a pod that goes straight
through, written out; the reference (False) makes every call the general way. Random sequences
of adds (gated, blocked, nominated, priorities), pops, dones, failures back to the queue
(backoff, unschedulable), deletions, events, activations, holds and clock advances must leave
both queues in the same state after every operation, popping the same pods in the same order
and calling ``on_change`` as often, with and without a sort key."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_queue import new_queue

from ksched.api.pod import Pod
from ksched.clock import VirtualClock
from ksched.scheduler.framework.events import NODE_ADD
from ksched.scheduler.framework.types import QueuedPodInfo
from ksched.scheduler.queue import scheduling_queue
from ksched.testing import make_pod

_OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 7), st.integers(0, 5)),
    st.tuples(st.sampled_from(["pop", "done", "fail", "delete", "event", "tick", "hold", "activate", "conflict"]),
              st.integers(0, 7), st.integers(0, 5))), max_size=60)


def _pod(i: int, v: int) -> Pod:
    return make_pod(f"p{i}", uid=f"u{i}", priority=v % 3, scheduling_gates=("g",) if v == 4 else (),
                    labels={"blocked": "yes"} if v == 5 else {}, nominated_node_name="n1" if v == 3 else "")


def _state(q: scheduling_queue.PriorityQueue) -> Any:
    def where(d: dict[str, QueuedPodInfo]) -> list[Any]:
        return [(uid, qpi.where, qpi.attempts, qpi.seq, qpi.gated, qpi.gating_plugin, qpi.initial_attempt_timestamp,
                 qpi.backoff_expiration, qpi.pod.resource_version) for uid, qpi in d.items()]
    return (where(q.pods), list(q.in_flight), list(q._in_flight_start.items()), q._events_base,
            len(q._in_flight_events), sorted(q.unschedulable), q.scheduling_cycle,
            sorted(q.nominator.node_of.items()), len(q._active), len(q._backoff), len(q._error_backoff))


def _run(fast: bool, sort_key: bool, ops: list[tuple[str, int, int]]) -> list[Any]:
    saved = scheduling_queue.FAST_QUEUE
    scheduling_queue.FAST_QUEUE = fast
    try:
        clock = VirtualClock()
        q = new_queue(clock, sort_key=sort_key)
        log: list[Any] = []
        q.on_change = lambda: log.append("changed")
        popped: dict[int, QueuedPodInfo] = {}
        for op, i, v in ops:
            if op in ("done", "fail", "conflict") and popped:
                i = sorted(popped)[i % len(popped)]  # one of the pods in flight
            if op == "add":
                log.append(("add", q.add(_pod(i, v)).where))
            elif op == "pop":
                qpi = q.pop()
                log.append(("pop", None if qpi is None else qpi.pod.name))
                if qpi is not None:
                    popped[int(qpi.pod.name[1:])] = qpi
            elif op == "done" and i in popped:
                q.done(popped.pop(i).pod)
            elif op == "fail" and i in popped:
                qpi = popped.pop(i)
                qpi.unschedulable_plugins = {"NodeFit"} if v % 2 else set()
                q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle - v % 2)
            elif op == "conflict" and i in popped:
                q.requeue_after_conflict(popped.pop(i))
            elif op == "delete":
                q.delete(_pod(i, 0))
            elif op == "event":
                log.append(("moved", q.move_all_to_active_or_backoff(NODE_ADD, None, None)))
            elif op == "tick":
                clock.advance(v * 0.7)
                log.append(("flushed", q.flush_backoff_completed()))
            elif op == "hold":
                q.hold = None if v % 2 else (lambda p, v=v: p.priority == v % 3)
            elif op == "activate":
                q.activate([_pod(i, 0)])
            log.append(_state(q))
        q.hold = None
        while (qpi := q.pop()) is not None:
            log.append(("drain", qpi.pod.name))
            q.done(qpi.pod)
            log.append(_state(q))
        return log
    finally:
        scheduling_queue.FAST_QUEUE = saved


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_OPS, st.booleans())
# An event while a pod is in flight, kept until its attempt is done (then dropped), and a deleted
# pod's stale entry at the head of activeQ.
@example([("add", 0, 0), ("pop", 0, 0), ("event", 0, 0), ("done", 0, 0), ("add", 1, 1), ("add", 2, 0),
          ("delete", 1, 0), ("pop", 0, 0)], True)
def test_fast_queue_ops_are_the_reference(ops: list[tuple[str, int, int]], sort_key: bool) -> None:
    assert _run(True, sort_key, ops) == _run(False, sort_key, ops)


@pytest.mark.parametrize("sort_key", [True, False])
def test_a_straight_run_pops_in_priority_order_both_ways(sort_key: bool) -> None:
    ops = [("add", i, i) for i in range(6)] + [("pop", 0, 0), ("done", 5, 0), ("pop", 0, 0), ("pop", 0, 0)]
    fast = _run(True, sort_key, ops)
    assert fast == _run(False, sort_key, ops)
    # p4 is gated and p5 blocked (held in unschedulable pods); p0 and p3 tie on priority.
    assert [e for e in fast if isinstance(e, tuple) and e[0] in ("pop", "drain")] == [
        ("pop", "p2"), ("pop", "p1"), ("pop", "p0"), ("drain", "p3")]
