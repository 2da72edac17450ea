"""The feasible-node walk on growing prefixes (``feasible_nodes.PREFIX_WALK``) against the
whole-mask steps (the flag off): the same feasible nodes and the same number of nodes
processed, directly on random verdicts (hypothesis) and through whole simulations of clusters
large enough that the walk stops early (the same placements, messages and evaluated-node
counts)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import placements
from ksched.scheduler import feasible_nodes
from ksched.scheduler.config import parse_configuration
from ksched.scheduler.feasible_nodes import FeasibleNodeFinder, _Plan
from ksched.scheduler.framework.interface import FilterPlugin, VectorizedFilter
from ksched.scheduler.framework.status import Status
from ksched.sim.simulation import Simulation
from ksched.testing import make_node, make_pod


class _Verdicts(FilterPlugin, VectorizedFilter):
    """A vectorized Filter whose verdict per row is fixed; counts the rows it was asked about."""

    def __init__(self, name: str, by_row: np.ndarray, declines: bool = False) -> None:
        self._name = name
        self.by_row = by_row
        self.declines = declines
        self.asked = 0

    @property
    def name(self) -> str:
        return self._name

    def filter(self, state: Any, pod: Any, node_info: Any) -> Status | None:  # pragma: no cover - unused
        raise AssertionError("per node")

    def filter_nodes(self, state: Any, pod: Any, snapshot: Any, rows: np.ndarray) -> np.ndarray | None:
        self.asked += len(rows)
        return None if self.declines else self.by_row[rows].copy()


class _RowCache:
    def __init__(self, combined: np.ndarray) -> None:
        self.combined = combined

    def combined_filter_mask(self, plugins: Any, state: Any, pod: Any, snapshot: Any) -> np.ndarray:
        return self.combined

    def combined_filter_mask_counted(self, plugins: Any, state: Any, pod: Any,
                                     snapshot: Any) -> tuple[np.ndarray, int]:
        return self.combined, len(self.combined) - int(np.count_nonzero(self.combined))


class _Framework:
    def __init__(self, plan: tuple[list[Any], list[Any], list[Any], list[Any]], combined: np.ndarray) -> None:
        self.plan = plan
        self.row_cache = _RowCache(combined)

    def filter_plan(self, skip: set[str]) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
        return self.plan

    def nominated_node_names(self) -> list[str]:
        return []


class _Snapshot:
    infos: list[Any] = []


class _State:
    skip_filter_plugins: set[str] = set()


@st.composite
def _walks(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(1, 300))
    rates = st.sampled_from([0.0, 0.01, 0.2, 0.5, 0.9, 0.99, 1.0])
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    combined = rng.random(n) < draw(rates) if draw(st.booleans()) else None
    vector = [rng.random(n) < draw(rates) for _ in range(draw(st.integers(0 if combined is not None else 1, 3)))]
    rows = rng.permutation(n).astype(np.int64)
    num_to_find = draw(st.integers(1, n))
    # What find_in_window may have left: verdicts of some plugins on the walk's first rows.
    declines = len(vector) > 0 and draw(st.integers(0, 9)) == 0
    # (find_in_window keeps no verdicts of a plugin that declined the pod: it stops there.)
    heads = {i: draw(st.integers(0, n)) for i in range(len(vector))
             if draw(st.booleans()) and not (declines and i == 0)}
    return {"n": n, "combined": combined, "vector": vector, "rows": rows, "num_to_find": num_to_find,
            "heads": heads, "declines": declines}


def _finder(w: dict[str, Any]) -> tuple[FeasibleNodeFinder, _Plan]:
    n = w["n"]
    vector = [_Verdicts(f"v{i}", m, declines=w["declines"] and i == 0) for i, m in enumerate(w["vector"])]
    cached: list[Any] = [object()] if w["combined"] is not None else []
    plan = ([*cached, *vector], cached, vector, [])
    fw = _Framework(plan, w["combined"] if w["combined"] is not None else np.ones(n, dtype=bool))
    finder = FeasibleNodeFinder(fw, _Snapshot())  # type: ignore[arg-type]
    rows = w["rows"]
    for i, k in w["heads"].items():
        finder._window_masks[f"v{i}"] = w["vector"][i][rows[:k]]
    return finder, _Plan(*[list(x) for x in plan])


@settings(max_examples=400, deadline=None)
@given(_walks())
def test_prefix_walk_finds_what_the_whole_mask_finds(w: dict[str, Any]) -> None:
    rows, num_to_find = w["rows"], w["num_to_find"]
    finder, plan = _finder(w)
    got = finder._prefix_walk(plan, _State(), None, rows, num_to_find)  # type: ignore[arg-type]
    ref_finder, ref_plan = _finder(w)
    whole = np.ones(len(rows), dtype=bool)
    if w["combined"] is not None:
        whole &= w["combined"][rows]
    for m in w["vector"]:
        whole &= m[rows]
    passing = np.flatnonzero(whole)
    if got is None:
        # Only when the whole mask must be looked at: too few pass, none of the first part
        # passes, or a plugin declines the pod; and then the whole-mask steps still find the
        # window's verdicts and the cached mask.
        assert w["declines"] or len(passing) < num_to_find or not whole[: num_to_find + (num_to_find >> 2) + 16].any()
        assert set(finder._window_masks) == {f"v{i}" for i in w["heads"]}
        return
    assert not w["declines"]
    feasible, processed = got
    assert feasible.tolist() == rows[passing[:num_to_find]].tolist()
    assert processed == int(passing[num_to_find - 1]) + 1
    assert finder._window_masks == {} and finder._combined is None
    # The whole-mask steps (the reference) agree.
    mask = ref_finder._fast_mask(ref_plan, _State(), None, rows, {})  # type: ignore[arg-type]
    ref = ref_finder._nominated_pass(ref_plan, _State(), None, rows, mask, {}, num_to_find, {})  # type: ignore[arg-type]
    assert ref[0].tolist() == feasible.tolist() and ref[1] == processed


def test_prefix_walk_asks_only_the_first_nodes() -> None:
    n = 5000
    by_row = np.ones(n, dtype=bool)
    by_row[::7] = False
    p = _Verdicts("v", by_row)
    fw = _Framework(([p], [], [p], []), np.ones(n, dtype=bool))
    finder = FeasibleNodeFinder(fw, _Snapshot())  # type: ignore[arg-type]
    rows = np.arange(n, dtype=np.int64)
    feasible, processed = finder._prefix_walk(_Plan([p], [], [p], []), _State(), None, rows, 500)  # type: ignore[arg-type,misc]
    assert len(feasible) == 500 and processed == int(np.flatnonzero(by_row)[499]) + 1
    assert p.asked < 1200


# ---------------------------------------------------------------- whole simulations


def _cluster(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = []
    for i in range(rng.randint(110, 260)):
        labels = {"topology.kubernetes.io/zone": rng.choice(("z1", "z2", "z3")),
                  "pool": rng.choice(("a", "b", "c", "d"))}
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.1 else None
        nodes.append(make_node(f"n{i:03d}", cpu=rng.choice(["2", "4", "8"]), memory=rng.choice(["4Gi", "8Gi"]),
                               pods=rng.choice([3, 10, 110]), labels=labels, taints=taints).raw)
    templates = []
    for t in range(rng.randint(3, 7)):
        kw: dict[str, Any] = {"labels": {"app": f"t{t}"},
                              "requests": {"cpu": rng.choice(["100m", "500m", "1"]),
                                           "memory": rng.choice(["128Mi", "1Gi"])}}
        r = rng.random()
        sel = {"matchLabels": {"app": f"t{t}"}}
        if r < 0.3:
            kw["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "pool", "operator": "In", "values": rng.sample(["a", "b", "c", "d"], rng.randint(1, 2))}]}]}}}
        elif r < 0.55:
            kw["topology_spread_constraints"] = [{
                "maxSkew": rng.randint(1, 2), "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}]
        elif r < 0.7:
            kw["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": sel, "topologyKey": "kubernetes.io/hostname"}]}}
        elif r < 0.8:
            kw["topology_spread_constraints"] = [{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}]
        if rng.random() < 0.15:
            kw["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        templates.append(kw)
    pods = [make_pod(f"p{i:03d}", uid="", **rng.choice(templates)).raw for i in range(rng.randint(80, 260))]
    return nodes, pods


def _outcomes(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], seed: int, *, vectorize: bool = True,
              explain: bool = False, percentage: int = 0) -> dict[str, tuple[str | None, str]]:
    config = parse_configuration({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                  "percentageOfNodesToScore": percentage})
    sim = Simulation(config, seed=seed, vectorize=vectorize, kubelet=False, record_events=False, explain=explain)
    assert not sim.load([*nodes, *pods[: len(pods) // 2]])
    sim.run()
    for p in pods[len(pods) // 2:]:
        sim.store.create(p)
    sim.run()
    return placements(sim.store)


@pytest.mark.parametrize("seed", range(8))
def test_prefix_walk_places_pods_as_the_whole_mask(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7100 + seed)
    nodes, pods = _cluster(rng)
    used = [0]
    original = FeasibleNodeFinder._prefix_walk

    def counting(self: FeasibleNodeFinder, *args: Any) -> Any:
        got = original(self, *args)
        used[0] += got is not None
        return got

    monkeypatch.setattr(FeasibleNodeFinder, "_prefix_walk", counting)
    # These clusters have 110-260 nodes and 100 to find: the walk on prefixes wherever it can.
    monkeypatch.setattr(feasible_nodes, "PREFIX_WALK_MIN_RATIO", 1)
    prefix = _outcomes(nodes, pods, seed)
    assert used[0] > 0  # the prefixes did decide cycles
    monkeypatch.setattr(feasible_nodes, "PREFIX_WALK", False)
    used[0] = 0
    whole = _outcomes(nodes, pods, seed)
    assert used[0] == 0
    assert prefix == whole
    assert prefix == _outcomes(nodes, pods, seed, vectorize=False)
    assert any(node is not None for node, _ in prefix.values())


def test_prefix_walk_only_where_the_nodes_are_many(monkeypatch: pytest.MonkeyPatch) -> None:
    """At the default ratio these clusters (fewer than 400 nodes, 100 to find) keep the whole
    mask; with 400 nodes and 100 to find (percentageOfNodesToScore 10) the prefixes are used."""
    used = [0]
    original = FeasibleNodeFinder._prefix_walk

    def counting(self: FeasibleNodeFinder, *args: Any) -> Any:
        used[0] += 1
        return original(self, *args)

    monkeypatch.setattr(FeasibleNodeFinder, "_prefix_walk", counting)
    nodes, pods = _cluster(random.Random(7100))
    _outcomes(nodes, pods, 0)
    assert used[0] == 0
    rng = random.Random(7200)
    big = [make_node(f"n{i:03d}", cpu="8", memory="8Gi", pods=110,
                     labels={"pool": rng.choice(("a", "b", "c", "d"))}).raw for i in range(400)]
    spread = {"labels": {"app": "s"}, "requests": {"cpu": "100m"}, "topology_spread_constraints": [{
        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "s"}}}]}
    few = [make_pod(f"p{i:03d}", uid="", **spread).raw for i in range(30)]
    placed = _outcomes(big, few, 0, percentage=10)
    assert used[0] > 0
    monkeypatch.setattr(feasible_nodes, "PREFIX_WALK", False)
    assert _outcomes(big, few, 0, percentage=10) == placed
