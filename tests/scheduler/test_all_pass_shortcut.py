"""``feasible_nodes.ALL_PASS``: when the row cache's count says the cached plugins' combined
verdicts reject no row, the walk's window passes them without a look and the masks start from
all True. The count first: at every call it equals the rows the returned verdicts reject, as
rows are refreshed one by one while nodes fill up and empty again (pods deleted), on random
clusters with tainted nodes and nodes that take few pods. Then whole simulations of those
clusters: the same placements and messages with the flag on and off (and with the prefix walk
used wherever it can, which starts from all True as well)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from tests.scheduler.test_prefix_walk import _cluster

from api_objects import placements
from ksched.scheduler import feasible_nodes
from ksched.scheduler.framework.rowcache import RowResultCache
from ksched.sim.simulation import Simulation


def _nodes_pods(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """test_prefix_walk's clusters; for even seeds without taints (rows then fail only when
    full, so many cycles find every row passing)."""
    nodes, pods = _cluster(random.Random(8300 + seed))
    if seed % 2 == 0:
        for n in nodes:
            n.get("spec", {}).pop("taints", None)
    return nodes, pods


def _run(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    """Half the pods, then a third of the placed ones deleted, then the rest."""
    sim = Simulation(None, seed=seed, kubelet=False, record_events=False)
    assert not sim.load([*nodes, *pods[: len(pods) // 2]])
    sim.run()
    rng = random.Random(seed)
    placed = sorted(p.name for p in sim.store.items("Pod") if p.node_name)  # type: ignore[attr-defined]
    for name in rng.sample(placed, len(placed) // 3):
        sim.store.delete("Pod", "default", name)
    sim.run()
    for p in pods[len(pods) // 2:]:
        sim.store.create(p)
    sim.run()
    return placements(sim.store)


@pytest.mark.parametrize("seed", range(6))
def test_counts_match_the_verdicts(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, pods = _nodes_pods(seed)
    seen = {"calls": 0, "none": 0, "some": 0, "refreshed": 0}
    original = RowResultCache.combined_filter_mask_counted

    def checked(self: RowResultCache, plugins: Any, state: Any, pod: Any, snapshot: Any) -> tuple[np.ndarray, int]:
        before = len(self._entries)
        values, rejected = original(self, plugins, state, pod, snapshot)
        assert rejected == len(values) - int(np.count_nonzero(values))
        seen["calls"] += 1
        seen["none" if rejected == 0 else "some"] += 1
        seen["refreshed"] += len(self._entries) == before
        return values, rejected

    monkeypatch.setattr(RowResultCache, "combined_filter_mask_counted", checked)
    _run(nodes, pods, seed)
    # Most calls refreshed a kept entry (where the count is carried); seeds 0 and 2 meet both
    # cases in one run (rows flip as nodes fill up and empty).
    assert seen["refreshed"] > seen["calls"] // 2
    if seed in (0, 2):
        assert seen["none"] and seen["some"]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ratio", [1, feasible_nodes.PREFIX_WALK_MIN_RATIO])
def test_simulations_agree_with_the_flag_off(seed: int, ratio: int, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, pods = _nodes_pods(seed)
    monkeypatch.setattr(feasible_nodes, "PREFIX_WALK_MIN_RATIO", ratio)
    monkeypatch.setattr(feasible_nodes, "ALL_PASS", True)
    on = _run(nodes, pods, seed)
    monkeypatch.setattr(feasible_nodes, "ALL_PASS", False)
    off = _run(nodes, pods, seed)
    assert on == off
    assert any(node is not None for node, _ in on.values())
