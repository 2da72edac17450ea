"""The kubelet's timer queue with one FIFO per due time (``timers.BucketTimers``) against one heap
of the entries (``timers.HeapTimers``, the reference): random pushes (many sharing a due time,
some earlier than what is queued, some equal as int and float) and pops, interleaved, give the
same entries in the same order, the same next due time and the same length at every step, and
``pop_due`` pops what ``next_due``/``pop`` would."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.kubelet import fake, timers
from ksched.kubelet.timers import BucketTimers, HeapTimers, new_timers

_DUES = st.one_of(st.sampled_from([0, 0.0, 1.0, 1, 2.5, 3.0, 10.0]),
                  st.floats(min_value=-5, max_value=50, allow_nan=False, allow_infinity=False))
_OPS = st.lists(st.one_of(st.tuples(st.just("push"), _DUES), st.just(("pop", None)),
                          st.tuples(st.sampled_from(["drain", "drain_due"]), _DUES)), max_size=120)


def _run(q: Any, ops: list[tuple[str, Any]]) -> list[Any]:
    seq = itertools.count()
    out: list[Any] = []
    for op, due in ops:
        if op == "push":
            n = next(seq)
            q.push((due, n, "start", f"ns/p{n}", f"uid{n}", n % 3))
        elif op == "pop":
            out.append(q.pop() if q else None)
        else:  # what the kubelet's step does: every entry due by then, pushing as it goes
            while (e := (q.pop() if q and q.next_due() <= due else None) if op == "drain" else q.pop_due(due)):
                out.append(e)
                if e[1] % 4 == 0:
                    n = next(seq)
                    q.push((due, n, "exit", e[3], e[4], e[5] + 1))
        out.append((len(q), bool(q), q.next_due() if q else None))
    return out


@settings(max_examples=300)
@given(_OPS)
def test_buckets_pop_what_the_heap_pops(ops: list[tuple[str, Any]]) -> None:
    assert _run(BucketTimers(), ops) == _run(HeapTimers(), ops)
    # and pop_due drains what next_due and pop drain
    plain = [("drain", due) if op == "drain_due" else (op, due) for op, due in ops]
    assert _run(BucketTimers(), ops) == _run(BucketTimers(), plain) == _run(HeapTimers(), plain)


def test_a_batch_at_one_instant_keeps_its_push_order() -> None:
    q = BucketTimers()
    for n in range(5):
        q.push((2.0, n, "start", f"ns/p{n}", "u", 0))
    q.push((1.0, 5, "exit", "ns/x", "u", 0))
    q.push((2, 6, "start", "ns/p6", "u", 0))  # an int due equal to 2.0: the same bucket, after the others
    assert q.next_due() == 1.0 and len(q) == 7
    assert [q.pop()[1] for _ in range(7)] == [5, 0, 1, 2, 3, 4, 6]
    assert not q and len(q) == 0


def test_the_flag_chooses_the_queue(monkeypatch: Any) -> None:
    assert isinstance(new_timers(), BucketTimers)
    monkeypatch.setattr(timers, "BUCKETED_TIMERS", False)
    assert isinstance(new_timers(), HeapTimers)
    assert fake.new_timers is new_timers  # the kubelet asks the flag at construction
