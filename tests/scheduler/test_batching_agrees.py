"""Opportunistic batching never changes a placement: whole simulations with batching on and off
place every pod on the same node, with the same FailedScheduling messages and nominated nodes,
on random clusters and workloads where batching does kick in (a profile without
PodTopologySpread's system default constraints; replicas that fit one per node through host
ports or through requests sized to the nodes; nodes of varied sizes, taints, labels and images;
NormalizeScore plugins whose scores change once the best node is gone; preemption, cordons and
new nodes in between). And with the default profile nothing is batched (system default
topology spreading makes every pod unsignable)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from ksched.scheduler.config import parse_configuration
from ksched.sim.simulation import Simulation
from ksched.testing import make_node, make_pod

ZONES = ("z1", "z2", "z3")

NO_SYSTEM_DEFAULTS = {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": []}}


def _config(second_profile: bool) -> dict[str, Any]:
    profiles: list[dict[str, Any]] = [{"schedulerName": "default-scheduler", "pluginConfig": [NO_SYSTEM_DEFAULTS]}]
    if second_profile:
        # Same plugins, other weights: a pod of this profile in between breaks a batch.
        profiles.append({"schedulerName": "other", "pluginConfig": [NO_SYSTEM_DEFAULTS],
                         "plugins": {"multiPoint": {"enabled": [{"name": "NodeAffinity", "weight": 7}]}}})
    return {"profiles": profiles}


def _cluster(rng: random.Random, num_nodes: int) -> list[dict[str, Any]]:
    nodes = []
    for i in range(num_nodes):
        labels = {"topology.kubernetes.io/zone": rng.choice(ZONES)}
        if rng.random() < 0.5:
            labels["disk"] = rng.choice(["ssd", "hdd"])
        taints = None
        r = rng.random()
        if r < 0.1:
            taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
        elif r < 0.35:
            taints = [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]
        nodes.append(make_node(f"n{i}", cpu=rng.choice(["2", "4", "8"]), memory=rng.choice(["4Gi", "8Gi", "16Gi"]),
                               pods=rng.choice([4, 10, 110]), labels=labels, taints=taints,
                               images=[(["app:1"], 300 * 1024 * 1024)] if rng.random() < 0.3 else ()).raw)
    return nodes


def _template(rng: random.Random, t: int) -> dict[str, Any]:
    kw: dict[str, Any] = {"labels": {"app": f"t{t}"}}
    r = rng.random()
    if r < 0.4:
        kw["host_ports"] = [8000 + rng.randint(0, 2)]  # one per node (templates may share a port)
        kw["requests"] = {"cpu": rng.choice(["100m", "500m"]), "memory": rng.choice(["128Mi", "1Gi"])}
    elif r < 0.7:
        kw["requests"] = {"cpu": rng.choice(["1500m", "3", "5"]), "memory": rng.choice(["1Gi", "3Gi", "6Gi"])}
    else:
        kw["requests"] = {"cpu": rng.choice(["100m", "250m", "1"]), "memory": rng.choice(["128Mi", "512Mi"])}
    if rng.random() < 0.25:
        kw["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    if rng.random() < 0.2:
        kw["tolerations"] = [*kw.get("tolerations", []), {"key": "spot", "operator": "Equal", "value": "true",
                                                          "effect": "PreferNoSchedule"}]
    r = rng.random()
    if r < 0.35:
        # Preferred node affinity normalizes by the best node: removing that node changes the
        # other nodes' normalized scores, and so their order once Fit's scores are added.
        prefs = [{"weight": rng.randint(1, 100), "preference": {"matchExpressions": [
            {"key": "disk", "operator": "In", "values": [rng.choice(["ssd", "hdd"])]}]}}]
        if rng.random() < 0.5:
            prefs.append({"weight": rng.randint(1, 100), "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [f"n{rng.randint(0, 9)}"]}]}})
        kw["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": prefs}}
    elif r < 0.42:
        kw["node_selector"] = {"topology.kubernetes.io/zone": rng.choice(ZONES)}
    elif r < 0.45:
        # PreFilter narrows the candidates to these nodes: the walk's start index then moves
        # on by fewer nodes than there are, which later cycles see.
        kw["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]}
            for n in sorted({f"n{rng.randint(0, 20)}" for _ in range(8)})]}}}
    elif r < 0.5:
        kw["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": f"t{t}"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    elif r < 0.55:
        kw["topology_spread_constraints"] = [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": f"t{t}"}}}]
    if rng.random() < 0.3:
        kw["images"] = ["app:1"]
    if rng.random() < 0.2:
        kw["priority"] = rng.choice([0, 1000])
    return kw


def _workload(rng: random.Random, second_profile: bool) -> list[list[dict[str, Any]]]:
    """Waves of pods: replicas of a template created one after another (so that consecutive
    pods share a signature), now and then another template's or profile's pod in between."""
    templates = [_template(rng, t) for t in range(rng.randint(2, 5))]
    waves = []
    i = 0
    for _ in range(rng.randint(2, 4)):
        wave = []
        for _ in range(rng.randint(1, 3)):
            kw = rng.choice(templates)
            for _ in range(rng.randint(3, 25)):
                extra: dict[str, Any] = {}
                if rng.random() < 0.05:
                    kw2 = rng.choice(templates)
                    if second_profile and rng.random() < 0.5:
                        extra["scheduler_name"] = "other"
                    wave.append(make_pod(f"p{i}", uid="", **kw2, **extra).raw)
                    i += 1
                wave.append(make_pod(f"p{i}", uid="", **kw).raw)
                i += 1
        waves.append(wave)
    return waves


def _run(batching: bool, seed: int, nodes: list[dict[str, Any]], waves: list[list[dict[str, Any]]],
         second_profile: bool, between: list[str]) -> tuple[dict[str, Any], int]:
    """Per pod: its node, its PodScheduled message and its nominated node; after every wave,
    the node walk's start index and the state of the random source (tie-breaks); and how many
    pods were placed on a hint."""
    sim = Simulation(parse_configuration(_config(second_profile)), seed=seed, kubelet=False, record_events=False,
                     disable_admission_plugins=("Priority",),
                     batching=batching)
    assert not sim.load(nodes)
    after_waves = []
    for w, wave in enumerate(waves):
        for p in wave:
            sim.store.create(p)
        sim.run()
        after_waves.append((sim.scheduler.algorithm.next_start_node_index, sim.scheduler.rng.getstate()))
        action = between[w] if w < len(between) else ""
        if action == "cordon":
            sim.store.patch("Node", "", "n0", {"spec": {"unschedulable": True}})
        elif action == "add":
            sim.store.create(make_node(f"extra{w}", cpu="8", memory="16Gi", pods=4).raw)
    out: dict[str, Any] = {"after waves": after_waves}
    for p in sim.store.items("Pod"):
        cond = p.condition("PodScheduled") or {}  # type: ignore[attr-defined]
        out[p.name] = (p.node_name or None, str(cond.get("message") or ""),  # type: ignore[attr-defined]
                       p.nominated_node_name)  # type: ignore[attr-defined]
    batched = sum(fw.batch.batched_pods for fw in sim.scheduler.profiles.values())
    return out, batched


@pytest.mark.parametrize("seed", range(16))
def test_batching_never_changes_a_placement(seed: int) -> None:
    rng = random.Random(5000 + seed)
    nodes = _cluster(rng, rng.randint(4, 60))
    second = rng.random() < 0.3
    waves = _workload(rng, second)
    between = [rng.choice(["", "", "cordon", "add"]) for _ in waves]
    batched, n_batched = _run(True, seed, nodes, waves, second, between)
    plain, n_plain = _run(False, seed, nodes, waves, second, between)
    assert batched == plain
    assert n_plain == 0
    assert any(v[0] is not None for k, v in batched.items() if k != "after waves")
    _BATCHED[seed] = n_batched


_BATCHED: dict[int, int] = {}


def test_batching_kicks_in_across_the_random_workloads() -> None:
    """The agreement above is not vacuous: most of those workloads place many pods on hints."""
    for seed in range(16):
        if seed not in _BATCHED:  # run alone or on another worker: compute it here
            rng = random.Random(5000 + seed)
            nodes = _cluster(rng, rng.randint(4, 60))
            second = rng.random() < 0.3
            waves = _workload(rng, second)
            between = [rng.choice(["", "", "cordon", "add"]) for _ in waves]
            _BATCHED[seed] = _run(True, seed, nodes, waves, second, between)[1]
    assert sum(1 for n in _BATCHED.values() if n > 0) >= 12
    assert sum(_BATCHED.values()) >= 200


def test_preemption_and_nominated_pods_agree() -> None:
    """Small full nodes, low-priority replicas, then high-priority replicas that preempt them:
    nominated pods and pods with a nominated node are never batched wrongly."""
    def run(batching: bool) -> tuple[dict[str, tuple[str | None, str, str]], int]:
        sim = Simulation(parse_configuration(_config(False)), seed=3, kubelet=False, record_events=False,
                     disable_admission_plugins=("Priority",),
                         batching=batching)
        assert not sim.load([make_node(f"n{i}", cpu="2", memory="4Gi", pods=10).raw for i in range(12)])
        for i in range(12):
            sim.store.create(make_pod(f"low{i}", uid="", priority=0, requests={"cpu": "1500m"},
                                      host_ports=[80]).raw)
        sim.run()
        for i in range(8):
            sim.store.create(make_pod(f"high{i}", uid="", priority=1000, requests={"cpu": "1500m"},
                                      host_ports=[80]).raw)
        for i in range(8):
            sim.store.create(make_pod(f"more{i}", uid="", priority=0, requests={"cpu": "100m"},
                                      host_ports=[81]).raw)
        sim.run()
        out = {p.name: (p.node_name or None, str((p.condition("PodScheduled") or {}).get("message") or ""),
                        p.nominated_node_name) for p in sim.store.items("Pod")}
        return out, sim.scheduler.profiles["default-scheduler"].batch.batched_pods

    on, n_on = run(True)
    off, _ = run(False)
    assert on == off
    assert n_on > 0


def test_the_default_profile_batches_nothing() -> None:
    """PodTopologySpread's system default constraints make every pod unsignable: with the
    default configuration, identical one-per-node replicas get no hint at all."""
    sim = Simulation(seed=1, kubelet=False, record_events=False,
                     disable_admission_plugins=("Priority",))
    assert not sim.load([make_node(f"n{i}").raw for i in range(20)])
    for i in range(15):
        sim.store.create(make_pod(f"p{i}", uid="", requests={"cpu": "100m"}, host_ports=[8080]).raw)
    sim.run()
    assert sum(1 for p in sim.store.items("Pod") if p.node_name) == 15  # type: ignore[attr-defined]
    fw = sim.scheduler.profiles["default-scheduler"]
    assert fw.signatures_enabled  # every plugin signs, but...
    assert fw.batch.batched_pods == 0
    reg = sim.scheduler.metrics.registry
    labels = {"profile": "default-scheduler"}
    assert reg.get_sample_value("scheduler_batch_attempts_total", {**labels, "result": "hint_used"}) is None
    assert reg.get_sample_value("scheduler_batch_attempts_total", {**labels, "result": "no_hint"}) == 15
    # ... each decision is dropped as not batchable.
    assert reg.get_sample_value("scheduler_batch_cache_flushed_total",
                                {**labels, "reason": "pod_not_batchable"}) == 15
    assert reg.get_sample_value("scheduler_get_node_hint_duration_seconds_count", {**labels, "hinted": "no_hint"}) == 15
    assert reg.get_sample_value("scheduler_get_node_hint_duration_seconds_bucket",
                                {**labels, "hinted": "no_hint", "le": "+Inf"}) == 15
    assert reg.get_sample_value("scheduler_store_schedule_results_duration_seconds_count", labels) == 15
    assert reg.get_sample_value("scheduler_store_schedule_results_duration_seconds_sum", labels) > 0


def test_the_same_workload_without_system_defaults_is_batched() -> None:
    """The counterpart: the same pods with the defaults cleared are placed on hints, exactly as
    without batching."""
    def run(batching: bool) -> tuple[dict[str, str], int, Any]:
        sim = Simulation(parse_configuration(_config(False)), seed=1, kubelet=False, record_events=False,
                     disable_admission_plugins=("Priority",),
                         batching=batching)
        assert not sim.load([make_node(f"n{i}").raw for i in range(20)])
        for i in range(15):
            sim.store.create(make_pod(f"p{i}", uid="", requests={"cpu": "100m"}, host_ports=[8080]).raw)
        sim.run()
        return ({p.name: p.node_name for p in sim.store.items("Pod")},  # type: ignore[attr-defined]
                sim.scheduler.profiles["default-scheduler"].batch.batched_pods, sim.scheduler.metrics.registry)

    on, n_on, reg = run(True)
    off, n_off, reg_off = run(False)
    assert on == off
    assert (n_on, n_off) == (14, 0)  # every pod but the first
    labels = {"profile": "default-scheduler"}
    assert reg.get_sample_value("scheduler_batch_attempts_total", {**labels, "result": "hint_used"}) == 14
    assert reg.get_sample_value("scheduler_get_node_hint_duration_seconds_count", {**labels, "hinted": "hint"}) == 14
    # Off (the feature gate), nothing is attempted.
    assert reg_off.get_sample_value("scheduler_batch_attempts_total", {**labels, "result": "no_hint"}) is None


def test_prefilter_narrowing_moves_the_start_index_as_the_full_walk() -> None:
    """Replicas whose required node affinity names some nodes (PreFilter narrows the candidates
    to them) are batched; each batched cycle moves the walk's start index by as many nodes as the
    full walk would, so the pods after them break their ties identically."""
    names = [f"n{i}" for i in range(30)]

    def run(batching: bool) -> tuple[dict[str, str], int, int, Any]:
        sim = Simulation(parse_configuration(_config(False)), seed=7, kubelet=False, record_events=False,
                     disable_admission_plugins=("Priority",),
                         batching=batching)
        assert not sim.load([make_node(n, cpu="4", memory="8Gi").raw for n in names])
        aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]} for n in names[3:14]]}}}
        for i in range(9):
            sim.store.create(make_pod(f"narrow{i}", uid="", affinity=aff, host_ports=[9000],
                                      requests={"cpu": "100m"}).raw)
        for i in range(12):  # equal nodes everywhere: ties, broken from the walk's order
            sim.store.create(make_pod(f"tie{i}", uid="", requests={"cpu": "100m"}).raw)
        sim.run()
        return ({p.name: p.node_name for p in sim.store.items("Pod")},  # type: ignore[attr-defined]
                sim.scheduler.algorithm.next_start_node_index, sim.scheduler.profiles["default-scheduler"].batch.batched_pods,
                sim.scheduler.rng.getstate())

    on = run(True)
    off = run(False)
    assert on[0] == off[0]
    assert on[1] == off[1] != 0
    assert on[3] == off[3]
    assert on[2] == 8


def _scripted(batching: bool, between: Any, equal: bool = False) -> tuple[dict[str, str], dict[str, float], int]:
    """Three one-per-node replicas on nodes of which n0 scores best, then n1, n2... (or, if
    ``equal``, n1 to n5 tie after n0); the first is scheduled, ``between(sim)`` changes the
    cluster, then the others are. Returns the placements, the flush reasons counted and how many
    pods got a hint."""
    sim = Simulation(parse_configuration(_config(False)), seed=2, kubelet=False, record_events=False,
                     disable_admission_plugins=("Priority",),
                     batching=batching)
    # Emptier nodes score higher (LeastAllocated): n0 is the best, then n1, ...
    nodes = [make_node(f"n{i}", cpu=str(16 - (min(i, 1) if equal else i)), memory="32Gi").raw for i in range(6)]
    assert not sim.load(nodes)
    for i in range(3):
        sim.store.create(make_pod(f"p{i}", uid="", requests={"cpu": "1"}, host_ports=[80]).raw)
    sched = sim.scheduler
    while sched.step():  # p0 scheduled and bound, the state kept
        if any(p.node_name for p in sim.store.items("Pod") if p.name == "p0"):  # type: ignore[attr-defined]
            break
    between(sim)
    sim.run()
    reg = sched.metrics.registry
    flushed = {}
    for metric in reg.collect():
        for s in metric.samples:
            if s.name == "scheduler_batch_cache_flushed_total":
                flushed[s.labels["reason"]] = s.value
    placed = {p.name: p.node_name for p in sim.store.items("Pod")}  # type: ignore[attr-defined]
    return placed, flushed, sched.profiles["default-scheduler"].batch.batched_pods


@pytest.mark.parametrize("change", ["nothing", "node added", "pod bound elsewhere", "pod nominated"])
def test_a_change_to_the_cluster_between_two_replicas_stops_the_batch(change: str) -> None:
    """The batch state answers only for the cluster as the previous pod's assumption left it:
    a new node (which may now be the best), another pod bound to some node, or a pod nominated
    to one (counted by Filter for the next replica) make ksched drop it (cluster_changed);
    upstream would still hint."""
    def between(sim: Simulation) -> None:
        if change == "node added":
            sim.store.create(make_node("big", cpu="64", memory="128Gi").raw)
        elif change == "pod bound elsewhere":
            # n1, the next best node, becomes the fullest (still feasible).
            sim.store.create(make_pod("other", uid="", node_name="n1", requests={"cpu": "12"}).raw)
        elif change == "pod nominated":
            # A gated high-priority pod nominated to n3, one of the nodes tied after n0: Filter
            # counts it, so n3 leaves the ties the next replica's tie-break draws from.
            sim.store.create(make_pod("nominee", uid="", priority=1000, requests={"cpu": "15"},
                                      nominated_node_name="n3", scheduling_gates=["wait"]).raw)

    equal = change == "pod nominated"
    on, flushed, n_batched = _scripted(True, between, equal)
    off, _, _ = _scripted(False, between, equal)
    assert on == off
    if change == "nothing":
        assert n_batched == 2 and flushed == {}
        assert (on["p0"], on["p1"], on["p2"]) == ("n0", "n1", "n2")
    else:
        assert n_batched < 2
        assert flushed.get("cluster_changed", 0) >= 1
    if change == "pod bound elsewhere":
        assert on["p1"] == "n2"
    if change == "node added":
        assert on["p1"] == "big"
    if change == "pod nominated":
        assert on["p1"] != "n3"
