"""SchedulerRunner: a scheduling loop that dies of an exception is reported (``crashed``), so
``ksched run``/``serve`` exit non-zero instead of living on without scheduling."""

from __future__ import annotations

import signal
import threading
from typing import Any

from ksched.dispatch.processes import wait_until_signalled
from ksched.scheduler.runner import SchedulerRunner


class _Loop:
    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.stopped = threading.Event()

    def run(self, stop: threading.Event, ready: threading.Event | None = None) -> None:
        if ready is not None:
            ready.set()
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
