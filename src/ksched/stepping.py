"""Driving a single-threaded component (the scheduler, the dispatcher) whose ``step()`` says
whether anything happened and whose ``idle()`` says whether anything is left to do without time
passing or the cluster changing. A base utility: it imports nothing of ksched."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["run_until_idle"]


def run_until_idle(step: Callable[[], bool], idle: Callable[[], bool], max_steps: int | None = None) -> int:
    """Call ``step`` until a step does nothing and ``idle()`` holds, or for ``max_steps``
    steps; the steps taken (the last, empty one not counted). Does not advance any clock."""
    n = 0
    while max_steps is None or n < max_steps:
        if not step() and idle():
            return n
        n += 1
    return n
