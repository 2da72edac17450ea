"""The assumed pod's PodInfo made from the queued pod's (``schedule_one.ASSUME_LIKE_QUEUED``,
``Cache.assume_pod(pod, like)``) against a new PodInfo of the assumed pod (the reference): the
same derived values for pods of every shape, and whole simulations that place every pod alike
with the same scheduler cache (requests per node, table rows)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import placements
from ksched.scheduler import schedule_one
from ksched.scheduler.framework import types
from ksched.scheduler.framework.types import PodInfo
from ksched.scheduler.schedule_one import pod_with_node
from ksched.sim.simulation import Simulation
from ksched.testing import make_node, make_pod

_SLOTS = [s for s in PodInfo.__slots__ if s != "pod"]

_requests = st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage"]),
                            st.sampled_from(["0", "1", "100m", "250m", "1Gi", "128Mi", "2"]), max_size=3)
_term = {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}
_affinity = st.sampled_from([
    None,
    {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term]}},
    {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 3, "podAffinityTerm": _term}]}},
    {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term]},
     "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 7, "podAffinityTerm": _term}]}},
])


@settings(max_examples=60)
@given(st.lists(_requests, min_size=1, max_size=3), st.lists(_requests, max_size=2),
       st.none() | _requests, _affinity, st.sampled_from(["n1", "node-b"]))
def test_like_queued_equals_a_new_pod_info(containers: list[dict[str, str]], inits: list[dict[str, str]],
                                           overhead: dict[str, str] | None, affinity: dict[str, Any] | None,
                                           node: str) -> None:
    pod = make_pod("p", containers=[{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(containers)],
                   init_containers=[{"name": f"i{i}", "resources": {"requests": r}} for i, r in enumerate(inits)],
                   overhead=overhead or None, affinity=affinity)
    queued = PodInfo(pod)
    assumed = pod_with_node(pod, node)
    got = queued.with_pod(assumed)
    want = PodInfo(assumed)
    assert got.pod is assumed
    for s in _SLOTS:
        assert getattr(got, s) == getattr(want, s), s
    assert got.has_affinity == want.has_affinity
    assert got.has_required_anti_affinity == want.has_required_anti_affinity


def _cluster(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(seed)
    nodes = [make_node(f"n{i}", cpu=rng.choice(["2", "4"]), memory="8Gi", pods=rng.choice([4, 110]),
                       labels={"zone": rng.choice(["z1", "z2"])},
                       allocatable={"nvidia.com/gpu": "2"} if rng.random() < 0.3 else None).raw
             for i in range(rng.randint(3, 12))]
    pods = []
    for i in range(rng.randint(10, 60)):
        req = {"cpu": rng.choice(["100m", "500m", "1"]), "memory": rng.choice(["128Mi", "1Gi"])}
        if rng.random() < 0.2:
            req["nvidia.com/gpu"] = "1"
        aff = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "a"}},
                                              "topologyKey": "zone"}}]}} if rng.random() < 0.3 else None
        pods.append(make_pod(f"p{i}", uid="", labels={"app": rng.choice(["a", "b"])}, requests=req,
                             limits={"nvidia.com/gpu": "1"} if "nvidia.com/gpu" in req else None,
                             init_containers=[{"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}]
                             if rng.random() < 0.2 else None, affinity=aff).raw)
    return nodes, pods


def _run(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], seed: int) -> tuple[Any, ...]:
    sim = Simulation(seed=seed, kubelet=False, record_events=False)
    assert not sim.load([*nodes, *pods])
    sim.run()
    cache = sim.scheduler.cache
    assert cache.check_invariants() == []
    placed = sorted(placements(sim.store).items())
    usage = sorted((name, sorted(ni.requested.items()), list(ni.non_zero_requested), len(ni.pods_with_affinity))
                   for name, ni in cache.nodes.items())
    t = cache.table
    rows = sorted((ni.name, t.req[ni.row].tolist(), t.nz[ni.row].tolist()) for ni in cache.nodes.values())
    return placed, usage, rows


@pytest.mark.parametrize("seed", range(6))
def test_simulations_agree_with_the_flag_on_and_off(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, pods = _cluster(seed)
    made = [0]
    orig = types.PodInfo.__init__

    def counting(self: PodInfo, pod: Any) -> None:
        made[0] += 1
        orig(self, pod)

    monkeypatch.setattr(types.PodInfo, "__init__", counting)
    got = []
    counts = []
    for flag in (True, False):
        monkeypatch.setattr(schedule_one, "ASSUME_LIKE_QUEUED", flag)
        made[0] = 0
        got.append(_run(nodes, pods, seed))
        counts.append(made[0])
    assert got[0] == got[1]
    assert any(n for _, (n, _msg) in got[0][0])
    # With the flag on, no PodInfo is made for an assumed pod.
    assumed = sum(1 for _, (n, _msg) in got[0][0] if n)
    assert counts[1] - counts[0] >= assumed
    assert np.all(np.asarray([len(r[1]) for r in got[0][2]]) > 0)
