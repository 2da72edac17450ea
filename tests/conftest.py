"""Fixtures shared by test files of several directories. A directory's conftest.py or a test
file may override one by name (taking the parent as an argument to build on it)."""

from __future__ import annotations

import gc
import os

import pytest
from hypothesis import settings

from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.sim.cluster import EmbeddedCluster

# CI (.ci/run) tests the examples hypothesis derives from each test's own name, the same on every
# run: a red CI is then a change's doing and reproduces as it is. Runs elsewhere draw new examples
# each time (hypothesis' default) and keep finding what the fixed ones miss. No per-example
# deadline in CI: a loaded machine took over 200 ms for one example of a test that passes alone.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])


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
