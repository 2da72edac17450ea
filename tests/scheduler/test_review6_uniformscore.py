"""Review of UniformScore (TaintToleration's score added once when it is the same on every node)
through whole simulations the authors' do not run: pods that tolerate the PreferNoSchedule taint
some nodes carry (by Exists, by value, by an empty effect, or only for another effect), the
taint put on and taken off nodes between rounds, and scoring weights other than the default.
Placements and PodScheduled messages equal those of the per-node paths (``vectorize=False``,
where no shortcut runs), with opportunistic batching on and off."""

from __future__ import annotations

import random
from typing import Any

import pytest

from ksched.scheduler.config import parse_configuration
from ksched.sim.simulation import Simulation
from ksched.testing import make_node, make_pod

_SPOT = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}
_TOLERATIONS = [
    None,
    [{"key": "spot", "operator": "Exists"}],
    [{"key": "spot", "operator": "Equal", "value": "true", "effect": "PreferNoSchedule"}],
    [{"key": "spot", "operator": "Equal", "value": "false"}],
    [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
    [{"operator": "Exists"}],
]


def _objects(rng: random.Random) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    nodes = [make_node(f"n{i}", cpu=rng.choice(["2", "4"]), memory="8Gi",
                       labels={"topology.kubernetes.io/zone": rng.choice(["a", "b"])},
                       taints=[_SPOT] if rng.random() < 0.3 else None).raw for i in range(rng.randint(3, 9))]
    rounds = []
    k = 0
    for _ in range(3):
        pods = []
        for _ in range(rng.randint(4, 14)):
            kw: dict[str, Any] = {"requests": {"cpu": rng.choice(["100m", "300m", "700m"]), "memory": "256Mi"},
                                  "labels": {"app": rng.choice(["x", "y"])}}
            tol = rng.choice(_TOLERATIONS)
            if tol is not None:
                kw["tolerations"] = tol
            pods.append(make_pod(f"p{k}", uid="", **kw).raw)
            k += 1
        rounds.append(pods)
    return nodes, rounds


def _run(vectorize: bool, batching: bool, seed: int, weight: int | None) -> dict[str, Any]:
    rng = random.Random(seed)
    nodes, rounds = _objects(rng)
    kw: dict[str, Any] = {}
    if weight is not None:
        kw["config"] = parse_configuration({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [{"schedulerName": "default-scheduler", "plugins": {"score": {"enabled": [
                            {"name": "TaintToleration", "weight": weight}]}}}]})
    sim = Simulation(seed=seed, vectorize=vectorize, kubelet=False, record_events=False, batching=batching, **kw)
    fw = next(iter(sim.scheduler.profiles.values()))
    assert fw.score_weights["TaintToleration"] == (weight or 3)
    assert not sim.load(nodes)
    out: dict[str, Any] = {}
    for r, pods in enumerate(rounds):
        if r:
            # Taints put on and taken off between rounds (node updates).
            for n in nodes:
                if rng.random() < 0.4:
                    cur = sim.store.get("Node", "", n["metadata"]["name"])
                    taints = [] if cur.raw.get("spec", {}).get("taints") else [_SPOT]
                    sim.store.patch("Node", "", cur.name, {"spec": {"taints": taints}})
        for p in pods:
            sim.store.create(p)
        sim.run()
        for p in sim.store.items("Pod"):
            cond = p.condition("PodScheduled") or {}  # type: ignore[attr-defined]
            out[p.name] = (p.node_name or None, str(cond.get("message") or ""))  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("seed", range(8))
def test_uniform_taint_scores_place_pods_as_the_per_node_paths(seed: int) -> None:
    weight = (None, 1, 7)[seed % 3]
    for batching in (False, True):
        fast = _run(True, batching, seed, weight)
        slow = _run(False, batching, seed, weight)
        assert fast == slow
        assert any(node is not None for node, _ in fast.values())
