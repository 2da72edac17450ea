"""``Snapshot.live_rows`` (the rows holding a NodeInfo, kept between node changes) against
scanning every row, after every ``update_snapshot`` over random sequences of node additions,
removals, relabellings and pod assumptions; and the row cache's new entries built from it
(``rowcache.LIVE_ROWS``) against the scan, through whole simulations."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import placements
from ksched.scheduler.cache.cache import Cache
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework import rowcache
from ksched.sim.simulation import Simulation
from ksched.testing import make_node, make_pod

NODES = [f"n{i}" for i in range(10)]

_OP = st.tuples(st.sampled_from(["add_node", "remove_node", "relabel", "assume", "read"]),
                st.integers(0, len(NODES) - 1), st.integers(1, 1000))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_OP, min_size=1, max_size=6), min_size=1, max_size=14))
def test_live_rows_are_the_rows_with_a_node_info(batches: list[list[tuple[str, int, int]]]) -> None:
    cache = Cache()
    snap = Snapshot()
    pods: dict[str, str] = {}
    n = 0
    for batch in batches:
        for op, i, amount in batch:
            name = NODES[i]
            present = name in cache.nodes and cache.nodes[name].node is not None
            if op == "add_node" and not present:
                cache.add_node(make_node(name, cpu="64", memory="256Gi", pods=110))
            elif op == "remove_node" and present and not any(v == name for v in pods.values()):
                cache.remove_node(cache.nodes[name].node)
            elif op == "relabel" and present:
                old = cache.nodes[name].node
                cache.update_node(old, make_node(name, cpu="64", memory="256Gi", pods=110,
                                                 labels={"v": str(amount)}))
            elif op == "assume" and present:
                n += 1
                p = make_pod(f"p{n}", uid=f"u{n}", node_name=name, requests={"cpu": f"{amount}m"})
                cache.assume_pod(p)
                pods[p.name] = name
            elif op == "read":
                # Asked between updates too: what it gives is the snapshot's rows as they are.
                got = snap.live_rows()
                assert got.tolist() == [r for r, ni in enumerate(snap.infos) if ni is not None]
        cache.update_snapshot(snap)
        got = snap.live_rows()
        assert got.dtype == np.int64 and not got.flags.writeable
        assert got.tolist() == [r for r, ni in enumerate(snap.infos) if ni is not None]
        assert snap.live_rows() is got  # kept while no node changes


def _cluster(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [make_node(f"n{i:02d}", cpu=rng.choice(["2", "4", "8"]), memory="8Gi", pods=rng.choice([4, 110]),
                       labels={"topology.kubernetes.io/zone": rng.choice(("z1", "z2")),
                               "disk": rng.choice(("ssd", "hdd"))},
                       taints=[{"key": "d", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.2 else None).raw
             for i in range(rng.randint(5, 30))]
    templates: list[dict[str, Any]] = []
    for t in range(rng.randint(3, 8)):
        kw: dict[str, Any] = {"labels": {"app": f"t{t}"},
                              "requests": {"cpu": rng.choice(["100m", "500m", "1"]), "memory": "256Mi"}}
        if rng.random() < 0.3:
            kw["tolerations"] = [{"key": "d", "operator": "Exists"}]
        if rng.random() < 0.3:
            kw["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}}
        templates.append(kw)
    pods = [make_pod(f"p{i:03d}", uid="", **rng.choice(templates)).raw for i in range(rng.randint(20, 90))]
    return nodes, pods


def _placements(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    sim = Simulation(seed=seed, kubelet=False, record_events=False)
    assert not sim.load([*nodes, *pods[: len(pods) // 2]])
    sim.run()
    # Nodes leave and come back between the halves: rows freed and reused.
    for raw in nodes[:: 3]:
        sim.store.delete("Node", "", raw["metadata"]["name"])
    sim.run()
    for raw in nodes[:: 3]:
        sim.store.create(raw)
    for p in pods[len(pods) // 2:]:
        sim.store.create(p)
    sim.run()
    return placements(sim.store)


@pytest.mark.parametrize("seed", range(5))
def test_row_cache_entries_from_live_rows_place_pods_as_the_scan(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(8300 + seed)
    nodes, pods = _cluster(rng)
    kept = _placements(nodes, pods, seed)
    monkeypatch.setattr(rowcache, "LIVE_ROWS", False)
    assert _placements(nodes, pods, seed) == kept
    assert any(node for node, _ in kept.values())
