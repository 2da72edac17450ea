"""The controllers are tested through an embedded cluster: ``store`` is its store, and every
write to it is followed by the controllers' reactions."""

from __future__ import annotations

import pytest

from ksched.apiserver.store import Store
from ksched.sim.cluster import EmbeddedCluster


@pytest.fixture
def store(embedded_cluster: EmbeddedCluster) -> Store:
    return embedded_cluster.store
