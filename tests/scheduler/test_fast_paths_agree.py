"""The fast paths (vectorized Filter/Score, row-local results reused across cycles, incremental
plugin state) and the plain per-node paths choose identical nodes, on random clusters with a
fixed seed, through whole simulations (node changes in between included)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from api_objects import placements
from ksched.sim.simulation import Simulation
from ksched.testing import make_node, make_pod

ZONES = ("z1", "z2", "z3")


def _cluster(rng: random.Random, num_nodes: tuple[int, int] = (5, 40),
             num_pods: tuple[int, int] = (10, 120)) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = []
    for i in range(rng.randint(*num_nodes)):
        labels = {"topology.kubernetes.io/zone": rng.choice(ZONES)}
        if rng.random() < 0.5:
            labels["disk"] = rng.choice(["ssd", "hdd"])
        taints = None
        r = rng.random()
        if r < 0.15:
            taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
        elif r < 0.3:
            taints = [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]
        extra = {"nvidia.com/gpu": str(rng.choice([1, 2, 4]))} if rng.random() < 0.2 else None
        nodes.append(make_node(f"n{i}", cpu=rng.choice(["2", "4", "8"]), memory=rng.choice(["4Gi", "8Gi", "16Gi"]),
                               pods=rng.choice([5, 10, 110]), labels=labels, taints=taints, allocatable=extra,
                               images=[(["app:1"], 300 * 1024 * 1024)] if rng.random() < 0.3 else ()).raw)
    templates = []
    for t in range(rng.randint(2, 6)):
        kw: dict[str, Any] = {"labels": {"app": f"t{t}"},
                              "requests": {"cpu": rng.choice(["100m", "250m", "500m", "1"]),
                                           "memory": rng.choice(["128Mi", "512Mi", "1Gi"])}}
        r = rng.random()
        if r < 0.2:
            kw["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        if rng.random() < 0.3:
            kw["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": rng.randint(1, 100), "preference": {"matchExpressions": [
                    {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}
        elif rng.random() < 0.2:
            kw["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": f"t{t}"}}, "topologyKey": "kubernetes.io/hostname"}]}}
        if rng.random() < 0.3:
            kw["topology_spread_constraints"] = [{
                "maxSkew": rng.randint(1, 3), "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
                "labelSelector": {"matchLabels": {"app": f"t{t}"}}}]
        if rng.random() < 0.15:
            kw["host_ports"] = [8000 + t]
        if rng.random() < 0.15:
            kw["requests"] = {**kw["requests"], "nvidia.com/gpu": "1"}
            kw["limits"] = {"nvidia.com/gpu": "1"}
        if rng.random() < 0.3:
            kw["images"] = ["app:1"]
        templates.append(kw)
    pods = []
    for i in range(rng.randint(*num_pods)):
        kw = dict(rng.choice(templates))
        pods.append(make_pod(f"p{i}", uid="", **kw).raw)
    return nodes, pods


def _outcomes(vectorize: bool, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], seed: int,
              cordon: str | None, explain: bool = False) -> dict[str, tuple[str | None, str]]:
    """Per pod: its node, and the message of its PodScheduled condition (for a pod that fits
    nowhere, the FitError message with its per-reason node counts)."""
    sim = Simulation(seed=seed, vectorize=vectorize, kubelet=False, record_events=False, explain=explain)
    assert not sim.load([*nodes, *pods[: len(pods) // 2]])
    sim.run()
    if cordon is not None:
        sim.store.patch("Node", "", cordon, {"spec": {"unschedulable": True}})
    for p in pods[len(pods) // 2:]:
        sim.store.create(p)
    sim.run()
    return placements(sim.store)


@pytest.mark.parametrize("seed", range(12))
def test_fast_and_per_node_paths_place_pods_identically(seed: int) -> None:
    rng = random.Random(seed)
    nodes, pods = _cluster(rng)
    cordon = nodes[0]["metadata"]["name"] if rng.random() < 0.5 else None
    fast = _outcomes(True, nodes, pods, seed, cordon)
    slow = _outcomes(False, nodes, pods, seed, cordon)
    assert fast == slow
    assert any(node is not None for node, _ in fast.values())


@pytest.mark.parametrize("seed", range(4))
def test_fast_and_per_node_paths_agree_when_the_walk_stops_early(seed: int) -> None:
    """Clusters of 110-160 nodes: the walk looks for 100 feasible nodes from a rotating start,
    so it stops before the end and wraps around; the fast path that looks only at the walk's
    first window (when all of it passes) must stop where the per-node walk stops."""
    rng = random.Random(2000 + seed)
    nodes, pods = _cluster(rng, num_nodes=(110, 160), num_pods=(60, 120))
    cordon = nodes[rng.randrange(len(nodes))]["metadata"]["name"]
    fast = _outcomes(True, nodes, pods, seed, cordon)
    slow = _outcomes(False, nodes, pods, seed, cordon)
    assert fast == slow
    assert any(node is not None for node, _ in fast.values())


@pytest.mark.parametrize("seed", range(6))
def test_fast_and_per_node_paths_explain_failures_identically(seed: int) -> None:
    """Crowded clusters (many pods, few small nodes): most pods fit nowhere, and the vectorized
    diagnosis (NodeResourcesFit's statuses for many nodes at once, masks for the rest) gives
    the same FitError messages as asking every plugin on every node."""
    rng = random.Random(1000 + seed)
    nodes, pods = _cluster(rng)
    nodes = nodes[: max(3, len(nodes) // 4)]
    pods = pods + [dict(p, metadata={**p["metadata"], "name": p["metadata"]["name"] + "-b"}) for p in pods]
    fast = _outcomes(True, nodes, pods, seed, None)
    slow = _outcomes(False, nodes, pods, seed, None)
    assert fast == slow
    # Explaining diagnoses every node, not only the processed ones: same decisions and messages.
    assert _outcomes(True, nodes, pods, seed, None, explain=True) == fast
    failed = [msg for node, msg in fast.values() if node is None]
    assert failed and all(m.startswith(f"0/{len(nodes)} nodes are available") for m in failed)


@pytest.mark.parametrize("seed", range(3))
def test_score_plugins_that_score_zero_left_out_place_pods_as_when_they_run(seed: int,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """ZeroScore plugins (DynamicResources for a pod without claims, ImageLocality for a pod
    whose images no node holds) are left out of Score: the same placements as when they score
    every node (their reference path), and they really are left out."""
    from ksched.scheduler.plugins.dynamicresources.plugin import _NO_CLAIMS, DynamicResources, _State
    from ksched.scheduler.plugins.imagelocality import ImageLocality

    rng = random.Random(3000 + seed)
    nodes, pods = _cluster(rng)
    calls: dict[str, int] = {"dra": 0, "image": 0}

    def counting(which: str, fn: Any) -> Any:
        def wrapped(self: Any, *args: Any) -> Any:
            calls[which] += 1
            return fn(self, *args)
        return wrapped

    for cls, which in ((DynamicResources, "dra"), (ImageLocality, "image")):
        for method in ("score", "score_nodes"):  # per node, vectorized
            monkeypatch.setattr(cls, method, counting(which, getattr(cls, method)))
    for vectorize in (True, False):
        calls.update(dra=0, image=0)
        left_out = _outcomes(vectorize, nodes, pods, seed, None)
        assert calls["dra"] == 0
        with monkeypatch.context() as m:
            m.setattr(DynamicResources, "scores_zero", lambda self, state, pod: False)
            m.setattr(ImageLocality, "scores_zero", lambda self, state, pod: False)
            image_calls = calls["image"]
            every = _outcomes(vectorize, nodes, pods, seed, None)
            assert calls["dra"] > 0 and calls["image"] > image_calls
        assert left_out == every
    assert any(node is not None for node, _ in left_out.values())
    # The state shared by pods without claims was never written to.
    assert _State() == _NO_CLAIMS
