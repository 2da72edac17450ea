"""The controller machinery of ksched.controllers.controller: the WorkQueue (a key queued at most
once, in arrival order; delayed adds on the clock; per-key exponential backoff, 5 ms doubling
to 1000 s, reset by ``forget``) and ``Controller.process`` (a sync raising ApiError is retried
after its backoff, a successful one resets it)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ksched.api.errors import Conflict
from ksched.clock import VirtualClock
from ksched.controllers.controller import RETRY_BASE_SECONDS, RETRY_MAX_SECONDS, Controller, WorkQueue


@pytest.fixture
def clock() -> VirtualClock:
    # From 0: times read as the delays that led to them (up to float rounding).
    return VirtualClock(0.0)


def drain(q: WorkQueue) -> list[Hashable]:
    out = []
    while (k := q.pop()) is not None:
        out.append(k)
    return out


# ---------------------------------------------------------------- WorkQueue: add and pop


def test_a_key_is_queued_once_and_keys_come_in_arrival_order(clock: VirtualClock) -> None:
    q = WorkQueue(clock)
    for k in ["b", "a", "b", "c", "a", "b"]:
        q.add(k)
    assert len(q) == 3
    assert drain(q) == ["b", "a", "c"]
    assert q.pop() is None and len(q) == 0


def test_a_popped_key_added_again_is_queued_again(clock: VirtualClock) -> None:
    """A key being synced that changes again must be synced again afterwards."""
    q = WorkQueue(clock)
    q.add("a")
    q.add("b")
    assert q.pop() == "a"
    q.add("a")
    assert drain(q) == ["b", "a"]


@given(st.lists(st.one_of(st.sampled_from("abcde"), st.none()), max_size=60))
def test_add_and_pop_match_a_deduplicating_fifo(ops: list[str | None]) -> None:
    """None pops; a letter adds. The model: a list without duplicates, appended at the end."""
    q = WorkQueue(VirtualClock(0.0))
    model: list[str] = []
    for op in ops:
        if op is None:
            assert q.pop() == (model.pop(0) if model else None)
        else:
            q.add(op)
            if op not in model:
                model.append(op)
        assert len(q) == len(model)
    assert drain(q) == model


# ---------------------------------------------------------------- WorkQueue: delayed adds


def test_add_after_waits_for_the_clock(clock: VirtualClock) -> None:
    q = WorkQueue(clock)
    q.add_after("a", 10)
    assert q.next_wakeup() == 10
    assert q.pop() is None and len(q) == 0
    clock.advance(9.5)
    assert q.pop() is None
    clock.advance_to(10)
    assert len(q) == 1
    assert q.pop() == "a"
    assert q.next_wakeup() is None and q.pop() is None


def test_add_after_without_delay_is_an_add(clock: VirtualClock) -> None:
    q = WorkQueue(clock)
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert q.next_wakeup() is None
    assert drain(q) == ["a", "b"]


def test_delayed_keys_become_ready_in_time_order_after_the_ready_ones(clock: VirtualClock) -> None:
    q = WorkQueue(clock)
    q.add_after("late", 5)
    q.add_after("early", 1)
    q.add_after("tie-1", 3)
    q.add_after("tie-2", 3)
    q.add("now")
    assert q.next_wakeup() == 1
    clock.advance(3)
    assert drain(q) == ["now", "early", "tie-1", "tie-2"]
    assert q.next_wakeup() == 5
    clock.advance(2)
    assert drain(q) == ["late"]


def test_a_delayed_key_already_queued_is_not_queued_twice(clock: VirtualClock) -> None:
    q = WorkQueue(clock)
    q.add("a")
    q.add_after("a", 1)
    clock.advance(1)
    assert drain(q) == ["a"]
    # Popped before its delayed add came due: queued again then.
    q.add("b")
    q.add_after("b", 1)
    assert q.pop() == "b"
    clock.advance(1)
    assert drain(q) == ["b"]


# ---------------------------------------------------------------- WorkQueue: backoff


def backoff_delays(q: WorkQueue, clock: VirtualClock, key: str, n: int) -> list[float]:
    """Fail ``key`` ``n`` times in a row: the delay of each retry, read back from the queue."""
    delays = []
    for _ in range(n):
        q.add_rate_limited(key)
        due = q.next_wakeup()
        assert due is not None
        delays.append(due - clock.now())
        assert q.pop() is None  # not before its time
        clock.advance_to(due)
        assert q.pop() == key
    return delays


def test_backoff_doubles_from_5ms_up_to_1000s(clock: VirtualClock) -> None:
    q = WorkQueue(clock)
    delays = backoff_delays(q, clock, "k", 22)
    assert delays[:4] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert delays == pytest.approx([min(RETRY_BASE_SECONDS * 2**i, RETRY_MAX_SECONDS) for i in range(22)])
    assert (RETRY_BASE_SECONDS, RETRY_MAX_SECONDS) == (0.005, 1000.0)
    assert delays[17] == pytest.approx(655.36) and delays[18:] == pytest.approx([1000.0] * 4)


def test_backoff_stays_at_the_cap_after_very_many_failures(clock: VirtualClock) -> None:
    q = WorkQueue(clock)
    for _ in range(1100):  # 2.0 ** 1024 would overflow a float
        q.add_rate_limited("k")
    clock.advance(RETRY_MAX_SECONDS)
    assert q.pop() == "k" and q.pop() is None and q.next_wakeup() is None
    assert backoff_delays(q, clock, "k", 1) == pytest.approx([RETRY_MAX_SECONDS])


def test_forget_resets_the_backoff_per_key(clock: VirtualClock) -> None:
    q = WorkQueue(clock)
    assert backoff_delays(q, clock, "a", 3) == pytest.approx([0.005, 0.01, 0.02])
    # Another key's failures are counted apart.
    assert backoff_delays(q, clock, "b", 1) == pytest.approx([0.005])
    assert backoff_delays(q, clock, "a", 1) == pytest.approx([0.04])
    q.forget("a")
    assert backoff_delays(q, clock, "a", 2) == pytest.approx([0.005, 0.01])
    assert backoff_delays(q, clock, "b", 1) == pytest.approx([0.01])
    q.forget("never-failed")  # nothing to forget: no error


# ---------------------------------------------------------------- Controller.process


class Flaky(Controller):
    """Syncs keys, raising Conflict (an ApiError) while ``failures[key]`` is positive."""

    name = "flaky"

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(None, None, clock)  # type: ignore[arg-type]
        self.synced: list[Any] = []
        self.failures: dict[Any, int] = {}

    def sync(self, key: Any) -> None:
        self.synced.append(key)
        if self.failures.get(key, 0) > 0:
            self.failures[key] -= 1
            raise Conflict(f"cannot sync {key}")


def test_process_syncs_at_most_limit_keys_in_order(clock: VirtualClock) -> None:
    c = Flaky(clock)
    for k in "abcd":
        c.queue.add(k)
    assert c.process(limit=3) == 3
    assert c.synced == ["a", "b", "c"]
    assert c.process() == 1 and c.synced == ["a", "b", "c", "d"]
    assert c.process() == 0


def test_an_api_error_retries_the_key_after_its_backoff(clock: VirtualClock) -> None:
    c = Flaky(clock)
    c.failures["a"] = 2
    c.queue.add("a")
    c.queue.add("b")
    assert c.process() == 2 and c.synced == ["a", "b"]
    assert c.next_wakeup() == 0.005
    assert c.process() == 0
    clock.advance_to(0.005)
    assert c.process() == 1 and c.synced == ["a", "b", "a"]
    assert c.next_wakeup() == pytest.approx(0.015)  # second failure in a row: 10 ms
    clock.advance_to(c.next_wakeup())  # type: ignore[arg-type]
    assert c.process() == 1 and c.synced == ["a", "b", "a", "a"]
    assert c.next_wakeup() is None
    # It synced: its next failure starts the backoff over.
    c.failures["a"] = 1
    c.queue.add("a")
    assert c.process() == 1
    due = c.next_wakeup()
    assert due is not None and due - clock.now() == pytest.approx(0.005)


def test_a_crashing_sync_is_logged_and_retried_without_stopping_the_others(
        clock: VirtualClock, caplog: pytest.LogCaptureFixture) -> None:
    """A bug in one sync must not fail the unrelated store write whose settle ran it, nor
    stop the keys queued after it: it is logged with its traceback and retried with backoff."""
    synced: list[str] = []

    class Broken(Controller):
        name = "broken"

        def sync(self, key: Any) -> None:
            if key == "a":
                raise KeyError(key)
            synced.append(key)

    c = Broken(None, None, clock)  # type: ignore[arg-type]
    c.queue.add("a")
    c.queue.add("b")
    with caplog.at_level("ERROR"):
        assert c.process() == 2
    assert synced == ["b"]
    assert "broken: syncing 'a' crashed" in caplog.text and "KeyError" in caplog.text
    due = c.next_wakeup()
    assert due is not None and due - clock.now() == pytest.approx(0.005)
