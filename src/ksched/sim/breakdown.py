"""Where a benchmark's time goes: wall time spent in the main phases of the scheduling and
binding cycles, per measured pod (``ksched bench --breakdown``).

The phases are timed by wrapping a handful of methods for the duration of a run (a timer
costs ~0.2 µs a call, so the figures run a few percent slower than a plain bench). Phases
nest: ``schedule_one`` contains ``schedule_pod``, which contains ``find_feasible`` and the
rest; ``bindings`` contains ``bind`` and ``event``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["PHASES", "Breakdown", "breakdown"]


def _targets() -> list[tuple[str, Any, str]]:
    from ksched.client.informer import InformerFactory
    from ksched.scheduler.cache.cache import Cache
    from ksched.scheduler.feasible_nodes import FeasibleNodeFinder
    from ksched.scheduler.framework.runtime import Framework
    from ksched.scheduler.preemption import Evaluator
    from ksched.scheduler.recorder import EventRecorder
    from ksched.scheduler.schedule_one import Algorithm, ScheduleOne

    return [
        ("schedule_one", ScheduleOne, "schedule_one"),
        ("snapshot", Cache, "update_snapshot"),
        ("schedule_pod", Algorithm, "schedule_pod"),
        ("pre_filter", Framework, "run_pre_filter"),
        ("find_feasible", FeasibleNodeFinder, "find_in_window"),  # and, when that gives no answer:
        ("find_feasible", FeasibleNodeFinder, "find"),
        ("pre_score", Framework, "run_pre_score"),
        ("score", Framework, "run_score"),
        ("post_filter", Framework, "run_post_filter"),
        ("preemption_dry_run", Evaluator, "dry_run_preemption"),
        ("assume", Cache, "assume_pod"),
        ("bindings", ScheduleOne, "run_bindings"),
        ("bind", Framework, "run_bind"),
        ("event", EventRecorder, "event"),
        ("informers", InformerFactory, "poll"),
    ]


PHASES = list(dict.fromkeys(name for name, _, _ in _targets()))


class Breakdown:
    """Accumulated seconds and calls per phase."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.calls: dict[str, int] = dict.fromkeys(PHASES, 0)

    def reset(self) -> None:
        for k in self.seconds:
            self.seconds[k] = 0.0
            self.calls[k] = 0

    def per_pod_us(self, pods: int) -> dict[str, float]:
        """Microseconds per measured pod in each phase that ran."""
        if pods <= 0:
            return {}
        return {k: round(v * 1e6 / pods, 1) for k, v in self.seconds.items() if self.calls[k]}


def _timed(fn: Callable[..., Any], name: str, b: Breakdown) -> Callable[..., Any]:
    clock = time.perf_counter
    seconds = b.seconds
    calls = b.calls

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds[name] += clock() - t
            calls[name] += 1

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


@contextmanager
def breakdown() -> Iterator[Breakdown]:
    """Time the phases while the block runs (in this process, all threads); restore after."""
    b = Breakdown()
    saved: list[tuple[Any, str, Any]] = []
    try:
        for name, cls, attr in _targets():
            orig = cls.__dict__[attr]
            saved.append((cls, attr, orig))
            setattr(cls, attr, _timed(orig, name, b))
        yield b
    finally:
        for cls, attr, orig in reversed(saved):
            setattr(cls, attr, orig)
