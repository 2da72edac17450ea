"""Running a scheduler in its own thread (``ksched serve``, ``ksched run``), optionally only
while it holds a leader-election Lease."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ksched.scheduler.scheduler import Scheduler

__all__ = ["SchedulerRunner", "guarded"]

log = logging.getLogger(__name__)


def guarded(loop: Callable[[], None], crashed: threading.Event) -> Callable[[], None]:
    """``loop`` as a thread target that sets ``crashed`` (and logs the traceback) if it dies of
    an exception, so the process can exit non-zero rather than live on without scheduling."""

    def run() -> None:
        try:
            loop()
        except Exception:
            log.exception("the scheduling loop crashed")
            crashed.set()

    return run


class SchedulerRunner:
    """Builds a threaded Scheduler from ``factory()`` each time it starts leading (a fresh cache
    and queue, as a restarted kube-scheduler), and stops it when leadership is lost."""

    def __init__(self, factory: Any, elector: Any = None) -> None:
        self.factory = factory
        self.elector = elector
        self.scheduler: Scheduler | None = None
        self._stop = threading.Event()
        self._sched_stop: threading.Event | None = None
        self._sched_thread: threading.Thread | None = None
        self._thread: threading.Thread | None = None
        self.ready = threading.Event()
        # Set if the scheduling loop died of an unexpected exception: the process should exit
        # (non-zero) so whatever supervises it restarts it, rather than live on not scheduling.
        self.crashed = threading.Event()

    def _start_scheduler(self) -> None:
        self.scheduler = self.factory()
        self._sched_stop = threading.Event()
        stop = self._sched_stop
        sched = self.scheduler

        self._sched_thread = threading.Thread(target=guarded(lambda: sched.run(stop, self.ready), self.crashed),
                                              name="scheduler", daemon=True)
        self._sched_thread.start()

    def _stop_scheduler(self) -> None:
        if self._sched_stop is not None:
            self._sched_stop.set()
        if self._sched_thread is not None:
            self._sched_thread.join(30)
        self._sched_thread = None
        self.ready.clear()

    def start(self) -> None:
        if self.elector is None:
            self._start_scheduler()
            return
        self._thread = threading.Thread(
            target=lambda: self.elector.run(self._stop, self._start_scheduler, self._stop_scheduler),
            name="leader-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        self._stop_scheduler()
