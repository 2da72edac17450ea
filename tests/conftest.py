"""Fixtures shared by test files of several directories. A directory's conftest.py or a test
file may override one by name (taking the parent as an argument to build on it)."""

from __future__ import annotations

import gc

import pytest

from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.sim.cluster import EmbeddedCluster


def pytest_unconfigure(config: pytest.Config) -> None:
    """An xdist worker ends without walking its heap once more. After the last test pytest
    collects garbage once (to report unraisable exceptions), and execnet gives a worker 5 s to
    finish once the session is over before it sends the worker SIGINT (and 10 s later calls
    os._exit(1)): a full collection over a worker's millions of objects took longer than that on
    a loaded machine (9-15 s), which printed a KeyboardInterrupt traceback and could fail the run.
    Everything alive now is moved out of the collector's reach (gc.freeze); the unraisable
    exceptions a test's garbage raises were already reported while the tests ran."""
    if hasattr(config, "workerinput"):
        gc.freeze()


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
