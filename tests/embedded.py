"""Driving an embedded cluster's controllers on its virtual clock in tests: ``advance`` moves
time forward through every delayed sync that comes due on the way (what ``Simulation.run`` does
for the controllers)."""

from __future__ import annotations

from ksched.clock import VirtualClock
from ksched.sim.cluster import EmbeddedCluster


def settle(cluster: EmbeddedCluster) -> None:
    cluster.controllers.settle()
    cluster.store.finalize_expired()


def advance(cluster: EmbeddedCluster, seconds: float) -> None:
    """Advance the cluster's clock by ``seconds``, running the controllers at each delayed sync
    (and finishing graceful deletions) on the way."""
    clock = cluster.clock
    assert isinstance(clock, VirtualClock)
    end = clock.now() + seconds
    settle(cluster)
    while True:
        times = [t for t in (cluster.next_wakeup(), cluster.store.next_deletion_deadline()) if t is not None]
        t = min(times) if times else None
        if t is None or t > end:
            break
        clock.advance_to(t)
        settle(cluster)
    clock.advance_to(end)
    settle(cluster)
