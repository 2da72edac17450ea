"""Running a scheduler in its own thread (``ksched serve``, ``ksched run``), optionally under
leader election, as ``cmd/kube-scheduler/app/server.go`` Run does.

With an elector the scheduler is built and its informers started at once, so a standby keeps
its cache and queue warm and is ready (readyz) while it waits; it schedules only while it
leads. With ``delay_cache_until_active`` (the configuration's delayCacheUntilActive) it is
built only on becoming leader. Losing the lease sets ``lost`` and stops scheduling at once:
like kube-scheduler, which exits when it loses the lease, the process should exit (1) and be
restarted rather than risk acting on a lease it no longer holds. A clean ``stop()`` finishes
the bindings in flight, then releases the lease.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ksched.scheduler.scheduler import Scheduler

__all__ = ["SchedulerRunner", "guarded"]

log = logging.getLogger(__name__)


def guarded(loop: Callable[[], None], *crashed: threading.Event) -> Callable[[], None]:
    """``loop`` as a thread target that sets the ``crashed`` events (and logs the traceback) if
    it dies of an exception, so the process can exit non-zero rather than live on without
    scheduling."""

    def run() -> None:
        try:
            loop()
        except Exception:
            log.exception("the scheduling loop crashed")
            for ev in crashed:
                ev.set()

    return run


class SchedulerRunner:
    """Runs the Scheduler ``factory()`` builds in a thread, scheduling while it leads (always,
    without ``elector``). ``failed`` is set when the process should exit non-zero: the loop
    ``crashed`` or the lease was ``lost``."""

    def __init__(self, factory: Any, elector: Any = None, *, delay_cache_until_active: bool = False) -> None:
        self.factory = factory
        self.elector = elector
        self.delay_cache_until_active = delay_cache_until_active
        self.scheduler: Scheduler | None = None
        self._stop = threading.Event()
        self._sched_stop: threading.Event | None = None
        self._sched_thread: threading.Thread | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.ready = threading.Event()  # the informers have listed
        self.leading = threading.Event()  # pods are scheduled while set
        self.crashed = threading.Event()
        self.lost = threading.Event()
        self.failed = threading.Event()

    def handlers_synced(self) -> bool:
        """The readyz check sched-handler-sync: the scheduler's handlers have the initial objects."""
        s = self.scheduler
        return s is not None and s.handlers_synced.is_set()

    def _start_scheduler(self) -> None:
        with self._lock:
            if self.scheduler is not None or self._stop.is_set():
                return
            self.scheduler = self.factory()
            self._sched_stop = threading.Event()
            stop = self._sched_stop
            sched = self.scheduler
            target = guarded(lambda: sched.run(stop, self.ready, self.leading), self.crashed, self.failed)
            self._sched_thread = threading.Thread(target=target, name="scheduler", daemon=True)
            self._sched_thread.start()

    def _stop_scheduler(self) -> None:
        self.leading.clear()
        if self._sched_stop is not None:
            self._sched_stop.set()
        if self.scheduler is not None:
            self.scheduler.wake()
        if self._sched_thread is not None:
            self._sched_thread.join(30)
        self._sched_thread = None
        self.ready.clear()

    def _on_started_leading(self) -> None:
        self._start_scheduler()
        self.leading.set()
        s = self.scheduler
        if s is not None:
            s.wake()

    def _on_stopped_leading(self) -> None:
        led = self.leading.is_set()
        self.leading.clear()  # no new scheduling cycle from now on
        if led and not self._stop.is_set():
            log.error("leader election lost")
            self.lost.set()
            self.failed.set()

    def start(self) -> None:
        if self.elector is None:
            self.leading.set()
            self._start_scheduler()
            return
        if not self.delay_cache_until_active:
            self._start_scheduler()
        self._thread = threading.Thread(
            target=lambda: self.elector.run(self._stop, self._on_started_leading, self._on_stopped_leading),
            name="leader-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop scheduling (bindings in flight finish), then stop campaigning (releasing the
        lease if held)."""
        self._stop_scheduler()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
