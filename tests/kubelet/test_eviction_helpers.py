"""Eviction thresholds, signals and ranking (ksched.kubelet.evictionapi, .eviction), with the
cases of upstream's pkg/kubelet/eviction/helpers_test.go (ParseThresholdConfig, thresholdsMet
with and without minimum reclaim, the memory/disk/pid rank functions) as tables."""

from __future__ import annotations

from typing import Any

import pytest

from api_objects import mkpod
from ksched.api.pod import Pod
from ksched.kubelet import evictionapi as api
from ksched.kubelet.eviction import (
    EvictionManager,
    Observation,
    PodStats,
    eviction_message,
    rank,
    thresholds_met,
)
from ksched.kubelet.evictionapi import (
    EvictionConfigError,
    Threshold,
    ThresholdValue,
    config_for_node,
    parse_duration,
    parse_eviction_config,
)
from ksched.kubelet.lifecycle import PodAdmitAttributes

Mi = 1 << 20
Gi = 1 << 30


def q(v: int) -> ThresholdValue:
    return ThresholdValue(quantity=v)


def pct(p: float) -> ThresholdValue:
    return ThresholdValue(percentage=p)


# ---------------------------------------------------------------- ParseThresholdConfig


def sigs(cfg: dict[str, Any]) -> list[tuple[str, ThresholdValue, float, ThresholdValue | None, bool]]:
    return [(t.signal, t.value, t.grace_period, t.min_reclaim, t.hard) for t in parse_eviction_config(cfg).thresholds]


PARSE_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ThresholdValue, float, ThresholdValue | None, bool]]]] = [
    ("defaults when evictionHard is unset", {}, [
        ("memory.available", q(100 * Mi), 0.0, None, True),
        ("nodefs.available", pct(0.10), 0.0, None, True),
        ("nodefs.inodesFree", pct(0.05), 0.0, None, True),
        ("imagefs.available", pct(0.15), 0.0, None, True),
        ("imagefs.inodesFree", pct(0.05), 0.0, None, True),
        ("allocatableMemory.available", q(100 * Mi), 0.0, None, True)]),
    ("all flag values", {
        "evictionHard": {"memory.available": "150Mi"},
        "evictionSoft": {"memory.available": "300Mi"},
        "evictionSoftGracePeriod": {"memory.available": "30s"},
        "evictionMinimumReclaim": {"memory.available": "0"}}, [
        ("memory.available", q(150 * Mi), 0.0, q(0), True),
        ("allocatableMemory.available", q(150 * Mi), 0.0, q(0), True),
        ("memory.available", q(300 * Mi), 30.0, q(0), False)]),
    ("percentages and minimum reclaim", {
        "evictionHard": {"memory.available": "10%", "nodefs.available": "15%"},
        "evictionMinimumReclaim": {"memory.available": "5%", "nodefs.available": "2Gi"},
        "enforceNodeAllocatable": []}, [
        ("memory.available", pct(0.10), 0.0, pct(0.05), True),
        ("nodefs.available", pct(0.15), 0.0, q(2 * Gi), True)]),
    ("0% and 100% turn a threshold off", {"evictionHard": {"memory.available": "0%", "nodefs.available": "100%"}},
     []),
    ("an explicit evictionHard replaces the defaults", {"evictionHard": {"pid.available": "100"}},
     [("pid.available", q(100), 0.0, None, True)]),
    ("mergeDefaultEvictionSettings keeps the other defaults", {
        "evictionHard": {"memory.available": "1Gi"}, "mergeDefaultEvictionSettings": True,
        "enforceNodeAllocatable": []}, [
        ("memory.available", q(Gi), 0.0, None, True),
        ("nodefs.available", pct(0.10), 0.0, None, True),
        ("nodefs.inodesFree", pct(0.05), 0.0, None, True),
        ("imagefs.available", pct(0.15), 0.0, None, True),
        ("imagefs.inodesFree", pct(0.05), 0.0, None, True)]),
    ("soft with grace 0 is hard", {
        "evictionHard": {}, "evictionSoft": {"nodefs.available": "1Gi"},
        "evictionSoftGracePeriod": {"nodefs.available": "0s"}}, [("nodefs.available", q(Gi), 0.0, None, True)]),
]


@pytest.mark.parametrize(("case", "cfg", "want"), PARSE_CASES, ids=[c[0] for c in PARSE_CASES])
def test_parse_threshold_config(case: str, cfg: dict[str, Any], want: list[Any]) -> None:
    assert sigs(cfg) == want


PARSE_ERRORS = [
    ({"evictionSoft": {"memory.available": "150Mi"}},
     "grace period must be specified for the soft eviction threshold memory.available"),
    ({"evictionHard": {"memory.available": "-150Mi"}}, "must be positive"),
    ({"evictionHard": {"memory.available": "150%"}}, "must be >= 0% and <= 100%"),
    ({"evictionHard": {"memory.free": "1Gi"}}, "unsupported eviction signal memory.free"),
    ({"evictionHard": {"memory.available": "lots"}}, "invalid quantity 'lots'"),
    ({"evictionSoft": {"memory.available": "1Gi"}, "evictionSoftGracePeriod": {"memory.available": "soon"}},
     "invalid duration 'soon'"),
    ({"apiVersion": "kubelet.config.k8s.io/v1"}, "apiVersion must be kubelet.config.k8s.io/v1beta1"),
    ({"evictionMaxPodGracePeriod": "30s"}, "evictionMaxPodGracePeriod: must be an integer"),
]


@pytest.mark.parametrize(("cfg", "msg"), PARSE_ERRORS)
def test_parse_errors_name_the_field(cfg: dict[str, Any], msg: str) -> None:
    with pytest.raises(EvictionConfigError, match=msg.replace("(", r"\(").replace("%", "%")):
        parse_eviction_config(cfg)


def test_transition_period_max_grace_and_node_pools() -> None:
    c = parse_eviction_config({"evictionPressureTransitionPeriod": "1m30s", "evictionMaxPodGracePeriod": 60,
                               "nodeSelector": {"pool": "batch"}})
    assert (c.pressure_transition_period, c.max_pod_grace_period) == (90.0, 60)
    default = parse_eviction_config({})
    assert (default.pressure_transition_period, default.max_pod_grace_period) == (300.0, 0)
    assert config_for_node([c], {"pool": "batch"}) is c
    assert config_for_node([c], {"pool": "web"}).thresholds == default.thresholds
    assert [parse_duration(s, "x") for s in ("5m0s", "1h", "250ms", "0")] == [300.0, 3600.0, 0.25, 0.0]


# ---------------------------------------------------------------- thresholdsMet

MEM_1GI = Threshold("memory.available", q(Gi))
MEM_1GI_RECLAIM = Threshold("memory.available", q(Gi), min_reclaim=q(500 * Mi))
NODEFS_10PCT = Threshold("nodefs.available", pct(0.10))

# (case, thresholds, observations, enforce minimum reclaim, thresholds met)
MET_CASES = [
    ("empty", [], {}, False, []),
    ("threshold met", [MEM_1GI], {"memory.available": Observation(500 * Mi, 8 * Gi)}, False, [MEM_1GI]),
    ("threshold not met", [MEM_1GI], {"memory.available": Observation(2 * Gi, 8 * Gi)}, False, []),
    ("equal is not met", [MEM_1GI], {"memory.available": Observation(Gi, 8 * Gi)}, False, []),
    ("minimum reclaim met", [MEM_1GI_RECLAIM], {"memory.available": Observation(Gi, 8 * Gi)}, True,
     [MEM_1GI_RECLAIM]),
    ("minimum reclaim not met", [MEM_1GI_RECLAIM], {"memory.available": Observation(3 * Gi, 8 * Gi)}, True, []),
    ("minimum reclaim ignored when not enforced", [MEM_1GI_RECLAIM],
     {"memory.available": Observation(Gi, 8 * Gi)}, False, []),
    ("percentage of capacity", [NODEFS_10PCT], {"nodefs.available": Observation(9, 100)}, False, [NODEFS_10PCT]),
    ("percentage not met", [NODEFS_10PCT], {"nodefs.available": Observation(10, 100)}, False, []),
    ("signal not observed", [MEM_1GI], {"nodefs.available": Observation(0, 100)}, False, []),
]


@pytest.mark.parametrize(("case", "thresholds", "obs", "enforce", "want"), MET_CASES, ids=[c[0] for c in MET_CASES])
def test_thresholds_met(case: str, thresholds: list[Threshold], obs: dict[str, Observation], enforce: bool,
                        want: list[Threshold]) -> None:
    assert thresholds_met(thresholds, obs, enforce) == want


# ---------------------------------------------------------------- ranking


def pod(name: str, priority: int = 0, requests: dict[str, str] | None = None,
        limits: dict[str, str] | None = None) -> Pod:
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    return Pod(mkpod(name, priority=priority, containers=[{"name": "c", "image": "i", "resources": res}]))


def stats(p: Pod, **usage: int) -> PodStats:
    return PodStats(p, {"c": {k.replace("_", "-"): v for k, v in usage.items()}})


def names(ranked: list[PodStats]) -> list[str]:
    return [s.pod.name for s in ranked]


def test_memory_rank_exceeds_requests_then_priority_then_usage_over_request() -> None:
    """TestOrderedByExceedsRequestMemory / TestOrderedByPriority / TestOrderedByMemory."""
    below = stats(pod("below-requests", requests={"memory": "200Mi"}), memory=100 * Mi)
    above = stats(pod("above-requests", requests={"memory": "100Mi"}), memory=200 * Mi)
    assert names(rank("memory.available", [below, above])) == ["above-requests", "below-requests"]
    low = stats(pod("low-priority", priority=1), memory=Mi)
    high = stats(pod("high-priority", priority=2), memory=Mi)
    assert names(rank("memory.available", [high, low])) == ["low-priority", "high-priority"]
    # within the same priority, the larger usage above the request first
    best_effort = stats(pod("best-effort"), memory=500 * Mi)
    burstable_over = stats(pod("burstable-over", requests={"memory": "100Mi"}), memory=400 * Mi)
    burstable_under = stats(pod("burstable-under", requests={"memory": "1Gi"}), memory=400 * Mi)
    guaranteed = stats(pod("guaranteed", requests={"memory": "1Gi", "cpu": "1"},
                           limits={"memory": "1Gi", "cpu": "1"}), memory=900 * Mi)
    ranked = rank("memory.available", [guaranteed, burstable_under, burstable_over, best_effort])
    assert names(ranked) == ["best-effort", "burstable-over", "guaranteed", "burstable-under"]


def test_memory_rank_priority_beats_usage_among_pods_over_requests() -> None:
    a = stats(pod("prio-100", priority=100), memory=900 * Mi)
    b = stats(pod("prio-0", priority=0), memory=Mi)
    assert names(rank("memory.available", [a, b])) == ["prio-0", "prio-100"]


def test_pods_without_stats_rank_first() -> None:
    no_stats = PodStats(pod("no-stats", priority=100), None)
    over = stats(pod("over"), memory=Gi)
    assert names(rank("memory.available", [over, no_stats])) == ["no-stats", "over"]


def test_disk_rank_uses_ephemeral_storage_requests_and_inodes_have_none() -> None:
    under = stats(pod("under", requests={"ephemeral-storage": "2Gi"}), ephemeral_storage=Gi, inodes=10)
    over = stats(pod("over", requests={"ephemeral-storage": "100Mi"}), ephemeral_storage=200 * Mi, inodes=5)
    assert names(rank("nodefs.available", [under, over])) == ["over", "under"]
    assert names(rank("nodefs.inodesFree", [over, under])) == ["under", "over"]  # request 0: more inodes first


def test_pid_rank_is_priority_then_processes() -> None:
    a = stats(pod("few", priority=0), pids=10)
    b = stats(pod("many", priority=0), pids=100)
    c = stats(pod("low-many", priority=-1), pids=1)
    assert names(rank("pid.available", [a, b, c])) == ["low-many", "many", "few"]


def test_eviction_message_is_upstreams() -> None:
    p = pod("web", requests={"memory": "100Mi"})
    s = stats(p, memory=300 * Mi)
    obs = {"memory.available": Observation(50 * Mi, 8 * Gi)}
    t = Threshold("memory.available", q(100 * Mi))
    assert eviction_message("memory", s, [t], obs) == (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
        "Container c was using 300Mi, request is 100Mi, has larger consumption of memory. ")
    pt = Threshold("nodefs.available", pct(0.10))
    obs2 = {"nodefs.available": Observation(5 * Gi, 100 * Gi)}
    assert eviction_message("ephemeral-storage", stats(pod("x"), ephemeral_storage=0), [pt], obs2) == (
        "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 5Gi. ")


# ---------------------------------------------------------------- admission under pressure


@pytest.mark.parametrize(("conditions", "p", "want"), [
    (set(), pod("be"), (True, "", "")),
    ({"MemoryPressure"}, pod("burstable", requests={"memory": "1Mi"}), (True, "", "")),
    ({"MemoryPressure"}, pod("be"), (False, "Evicted", "The node had condition: [MemoryPressure]. ")),
    ({"DiskPressure"}, pod("burstable", requests={"memory": "1Mi"}),
     (False, "Evicted", "The node had condition: [DiskPressure]. ")),
    ({"MemoryPressure", "DiskPressure"}, pod("burstable", requests={"memory": "1Mi"}),
     (False, "Evicted", "The node had condition: [DiskPressure, MemoryPressure]. ")),
    ({"DiskPressure"}, pod("critical", priority=2000000000), (True, "", "")),
])
def test_admission_under_pressure(conditions: set[str], p: Pod, want: tuple[bool, str, str]) -> None:
    m = EvictionManager("n1", parse_eviction_config({}))
    m.conditions = conditions
    r = m.admit(PodAdmitAttributes(p))
    assert (r.admit, r.reason, r.message) == want


def test_best_effort_tolerating_memory_pressure_is_admitted() -> None:
    raw = mkpod("be", tolerations=[{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
                                    "effect": "NoSchedule"}])
    m = EvictionManager("n1", parse_eviction_config({}))
    m.conditions = {"MemoryPressure"}
    assert m.admit(PodAdmitAttributes(Pod(raw))).admit


def test_signals_have_their_conditions_and_resources() -> None:
    assert {s: (api.SIGNAL_CONDITION[s], api.SIGNAL_RESOURCE[s]) for s in api.SIGNALS} == {
        "memory.available": ("MemoryPressure", "memory"),
        "allocatableMemory.available": ("MemoryPressure", "memory"),
        "nodefs.available": ("DiskPressure", "ephemeral-storage"),
        "nodefs.inodesFree": ("DiskPressure", "inodes"),
        "imagefs.available": ("DiskPressure", "ephemeral-storage"),
        "imagefs.inodesFree": ("DiskPressure", "inodes"),
        "pid.available": ("PIDPressure", "pids"),
    }
