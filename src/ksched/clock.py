"""Clocks: every timer in ksched (backoff, permit timeouts, unschedulable flushes, graceful
deletion, simulation) reads one, so a simulation on a virtual clock is deterministic and fast."""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "RealClock", "VirtualClock"]

# 2025-01-01T00:00:00Z: where simulations start unless told otherwise.
DEFAULT_EPOCH = 1_735_689_600.0


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    @property
    def virtual(self) -> bool: ...


class RealClock:
    """Wall-clock time."""

    virtual = False

    def now(self) -> float:
        return time.time()


class VirtualClock:
    """Time that moves only when told to."""

    virtual = True

    def __init__(self, start: float = DEFAULT_EPOCH) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._now += seconds

    def advance_to(self, t: float) -> None:
        if t > self._now:
            self._now = t
