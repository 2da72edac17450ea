"""Fixtures shared by test files of several directories. A directory's conftest.py or a test
file may override one by name (taking the parent as an argument to build on it)."""

from __future__ import annotations

import pytest

from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.sim.cluster import EmbeddedCluster


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def store(clock: VirtualClock) -> Store:
    """An empty API store on the virtual clock, without controllers."""
    return Store(clock)


@pytest.fixture
def embedded_cluster(clock: VirtualClock) -> EmbeddedCluster:
    """A store with its controllers (PV binder, disruption), run after every write."""
    return EmbeddedCluster(clock)
