"""SchedulerRunner: a scheduling loop that dies of an exception is reported (``crashed``), so
``ksched run``/``serve`` exit non-zero instead of living on without scheduling; under leader
election a standby keeps its scheduler warm without scheduling, schedules once it leads,
reports a lost lease (``lost``, the process exits), and a clean stop is not a loss."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

from ksched.dispatch.processes import wait_until_signalled
from ksched.scheduler.runner import SchedulerRunner


class _Loop:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.stopped = threading.Event()
        self.schedule: threading.Event | None = None
        self.handlers_synced = threading.Event()
        self.woken = 0

    def wake(self) -> None:
        self.woken += 1

    def run(self, stop: threading.Event, ready: threading.Event | None = None,
            schedule: threading.Event | None = None) -> None:
        self.schedule = schedule
        if ready is not None:
            ready.set()
        self.handlers_synced.set()
        if self.fail:
            raise RuntimeError("boom")
        stop.wait()
        self.stopped.set()


def _with_restored_signals(fn: Any) -> Any:
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        return fn()
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])


def test_a_crashing_loop_sets_crashed_and_ends_the_wait() -> None:
    runner = SchedulerRunner(lambda: _Loop(fail=True))
    runner.start()
    try:
        assert runner.crashed.wait(5)
        assert _with_restored_signals(lambda: wait_until_signalled(failed=runner.crashed)) is False
    finally:
        runner.stop()


def test_a_healthy_loop_runs_until_stopped() -> None:
    loop = _Loop(fail=False)
    runner = SchedulerRunner(lambda: loop)
    runner.start()
    assert runner.ready.wait(5)
    stop = threading.Event()
    stop.set()  # as if SIGTERM had arrived
    assert _with_restored_signals(lambda: wait_until_signalled(stop=stop, failed=runner.crashed)) is True
    runner.stop()
    assert loop.stopped.is_set() and not runner.crashed.is_set()


class _Elector:
    """Stands in for LeaderElector.run: the test decides when it leads and when it loses."""

    def __init__(self) -> None:
        self.lead = threading.Event()
        self.lose = threading.Event()

    def run(self, stop: threading.Event, on_started: Any, on_stopped: Any) -> None:
        try:
            while not stop.is_set() and not self.lead.wait(0.01):
                pass
            if stop.is_set():
                return
            on_started()
            while not stop.is_set() and not self.lose.wait(0.01):
                pass
        finally:
            on_stopped()


def _wait(pred: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return bool(pred())


def test_a_standby_is_warm_but_does_not_schedule_until_it_leads() -> None:
    loop = _Loop()
    el = _Elector()
    runner = SchedulerRunner(lambda: loop, el)
    runner.start()
    try:
        assert runner.ready.wait(5) and _wait(runner.handlers_synced)
        assert loop.schedule is runner.leading and not runner.leading.is_set()
        el.lead.set()
        assert runner.leading.wait(5) and _wait(lambda: loop.woken == 1)
    finally:
        runner.stop()
    assert loop.stopped.is_set() and not runner.lost.is_set() and not runner.failed.is_set()


def test_losing_the_lease_stops_scheduling_and_fails_the_process() -> None:
    loop = _Loop()
    el = _Elector()
    runner = SchedulerRunner(lambda: loop, el)
    runner.start()
    try:
        el.lead.set()
        assert runner.leading.wait(5)
        el.lose.set()
        assert runner.failed.wait(5) and runner.lost.is_set() and not runner.crashed.is_set()
        assert not runner.leading.is_set()
    finally:
        runner.stop()


def test_delay_cache_until_active_builds_the_scheduler_on_leading() -> None:
    built: list[_Loop] = []

    def factory() -> _Loop:
        built.append(_Loop())
        return built[-1]

    el = _Elector()
    runner = SchedulerRunner(factory, el, delay_cache_until_active=True)
    runner.start()
    try:
        time.sleep(0.1)
        assert built == [] and not runner.handlers_synced()
        el.lead.set()
        assert runner.leading.wait(5) and runner.ready.wait(5) and len(built) == 1
    finally:
        runner.stop()
    assert not runner.lost.is_set()
