"""Eviction grace periods, as upstream's eviction manager (eviction_manager.go synchronize: 1 s
for a hard threshold, evictionMaxPodGracePeriod bound by the pod's terminationGracePeriodSeconds
for a soft one), the pod worker (pod_workers.go calculateEffectiveGracePeriod) and the runtime
(kuberuntime minimumGracePeriodInSeconds, 2 s) apply them: the grace period for each case, and
in whole simulations when the evicted pod ends on the virtual clock, that it keeps its usage
(and the node its pressure) meanwhile, and that no other pod is evicted before it is gone."""

from __future__ import annotations

from typing import Any

import pytest

from api_objects import mknode
from ksched.api.meta import parse_time
from ksched.api.pod import Pod
from ksched.kubelet.eviction import eviction_grace_period
from ksched.kubelet.evictionapi import parse_eviction_config
from ksched.kubelet.runtime import kill_delay
from ksched.sim.simulation import Simulation


def mkpod(tgps: int | None = None, termination_seconds: str | None = None, deletion_grace: int | None = None,
          usage: str = "3500Mi", name: str = "p") -> dict[str, Any]:
    ann = {"ksched.io/usage-memory": usage}
    if termination_seconds is not None:
        ann["ksched.io/termination-seconds"] = termination_seconds
    md: dict[str, Any] = {"name": name, "namespace": "default", "annotations": ann}
    if deletion_grace is not None:
        md.update(deletionTimestamp="2024-01-01T00:00:30Z", deletionGracePeriodSeconds=deletion_grace)
    spec: dict[str, Any] = {"nodeName": "n1", "containers": [{"name": "c", "image": "img"}]}
    if tgps is not None:
        spec["terminationGracePeriodSeconds"] = tgps
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


# (hard threshold, evictionMaxPodGracePeriod, pod terminationGracePeriodSeconds, deletion's grace
#  period, the grace period the pod gets)
GRACE_CASES = [
    (True, 0, 30, None, 1),        # hard: immediateEvictionGracePeriodSeconds
    (True, 60, 30, None, 1),       # whatever evictionMaxPodGracePeriod says
    (False, 20, 30, None, 20),     # soft: evictionMaxPodGracePeriod ...
    (False, 20, 10, None, 10),     # ... bound by the pod's own
    (False, 0, 45, None, 45),      # evictionMaxPodGracePeriod unset (0): the pod worker keeps the pod's own
    (False, 20, 0, None, 1),       # the pod asks for 0: never less than 1 s
    (False, 20, 30, 5, 5),         # a deletion under way with a shorter grace period stands
    (False, 20, 30, 40, 20),       # ... a longer one is cut short
    (True, 20, 30, 40, 1),
]


@pytest.mark.parametrize(("hard", "max_grace", "tgps", "deletion_grace", "want"), GRACE_CASES)
def test_eviction_grace_period(hard: bool, max_grace: int, tgps: int, deletion_grace: int | None, want: int) -> None:
    pod = Pod(mkpod(tgps, deletion_grace=deletion_grace))
    assert eviction_grace_period(pod, hard, max_grace) == want


# (grace period, ksched.io/termination-seconds, when the containers are gone, killed)
KILL_CASES = [
    (1, None, 1.0, False),    # the default container stops on SIGTERM within a second
    (1, "600", 2.0, True),    # killed once the runtime's 2 s minimum is over
    (1, "0.5", 0.5, False),
    (20, "600", 20.0, True),
    (20, "5", 5.0, False),
]


@pytest.mark.parametrize(("grace", "termination", "after", "killed"), KILL_CASES)
def test_kill_delay(grace: int, termination: str | None, after: float, killed: bool) -> None:
    assert kill_delay(Pod(mkpod(termination_seconds=termination)), grace) == (after, killed)


def node(name: str) -> dict[str, Any]:
    raw = mknode(name)
    raw["status"]["allocatable"]["memory"] = "4000Mi"
    return raw


def get(sim: Simulation, name: str) -> Pod:
    p = sim.store.get("Pod", "default", name)
    assert isinstance(p, Pod)
    return p


def run_until(sim: Simulation, t: float) -> None:
    sim.run(max_seconds=t - sim.clock.now())
    if sim.clock.now() < t:
        sim.clock.advance_to(t)
        sim.run(max_seconds=0)


HARD = {"evictionHard": {"memory.available": "1000Mi"}}
SOFT = {"evictionHard": {}, "evictionSoft": {"memory.available": "1000Mi"},
        "evictionSoftGracePeriod": {"memory.available": "30s"}}

# (kubelet config, evictionMaxPodGracePeriod, pod terminationGracePeriodSeconds,
#  ksched.io/termination-seconds, seconds after the start the eviction begins, and the pod ends)
SIM_CASES = [
    (HARD, 0, 30, "600", 0, 2.0),      # the first pass, at the start; hard: killed 2 s later
    (HARD, 0, 30, None, 0, 1.0),       # a default container stops on SIGTERM after 1 s
    (SOFT, 20, 30, "600", 30, 50.0),   # the soft grace period (30 s) is over at 30 s; evictionMaxPodGracePeriod
    (SOFT, 20, 10, "600", 30, 40.0),   # the pod's own, shorter
    (SOFT, 0, 45, "600", 30, 75.0),    # no evictionMaxPodGracePeriod: the pod's own
    (SOFT, 20, 30, "7", 30, 37.0),     # stops on SIGTERM before the grace period is over
]


@pytest.mark.parametrize(("cfg", "max_grace", "tgps", "termination", "begins", "ends"), SIM_CASES)
def test_when_the_evicted_pod_ends(cfg: dict[str, Any], max_grace: int, tgps: int, termination: str | None,
                                   begins: float, ends: float) -> None:
    sim = Simulation(seed=1, eviction_configs=[parse_eviction_config({**cfg, "evictionMaxPodGracePeriod": max_grace})])
    t0 = sim.clock.now()
    sim.load([node("n1")])
    sim.load([mkpod(tgps, termination)])
    run_until(sim, t0 + ends - 0.5)
    p = get(sim, "p")
    # terminating: still Running, with its usage, already a DisruptionTarget since the eviction began
    assert p.phase == "Running"
    dt = p.condition("DisruptionTarget")
    assert dt is not None and dt["reason"] == "TerminationByKubelet"
    assert parse_time(dt["lastTransitionTime"]) - t0 == begins
    n1 = sim.store.get("Node", "", "n1")
    assert next(c for c in n1.conditions if c["type"] == "MemoryPressure")["status"] == "True"
    assert sim.kubelet is not None and sim.kubelet.since_start(p) is not None
    run_until(sim, t0 + ends)
    st = get(sim, "p").raw["status"]
    assert (st["phase"], st["reason"]) == ("Failed", "Evicted")
    assert st["message"] == ("The node was low on resource: memory. Threshold quantity: 1000Mi, available: 500Mi. "
                             "Container c was using 3500Mi, request is 0, has larger consumption of memory. ")
    term = st["containerStatuses"][0]["state"]["terminated"]
    assert parse_time(term["finishedAt"]) - t0 == ends
    assert term["exitCode"] == (137 if termination == "600" else 143)
    assert next(c for c in st["conditions"] if c["type"] == "DisruptionTarget")["message"] == st["message"]


def test_no_other_pod_is_evicted_while_the_first_terminates() -> None:
    """Two BestEffort pods over a soft threshold: the manager waits for the first one's 20 s
    grace period without a pass (the node keeps its pressure, the second pod runs on) and, its
    usage gone, has nothing left to evict."""
    sim = Simulation(seed=1, eviction_configs=[parse_eviction_config({**SOFT, "evictionMaxPodGracePeriod": 20})])
    t0 = sim.clock.now()
    sim.load([node("n1")])
    sim.load([mkpod(30, "600", usage="2000Mi", name="big"), mkpod(30, "600", usage="1500Mi", name="small")])
    sim.use_timeline([])
    run_until(sim, t0 + 30)
    assert sim.kubelet is not None
    passes = sim.kubelet.pressure.passes
    run_until(sim, t0 + 49)
    assert sim.kubelet.pressure.passes == passes  # the manager waits for the kill
    assert get(sim, "big").phase == "Running" and get(sim, "small").phase == "Running"
    assert get(sim, "big").condition("DisruptionTarget") is not None
    assert get(sim, "small").condition("DisruptionTarget") is None
    sim.run(max_seconds=3600)
    assert get(sim, "big").raw["status"]["reason"] == "Evicted"
    assert get(sim, "small").phase == "Running"
    rows = [(t, what, detail) for t, _, what, detail in sim.history.rows if what in ("evicting", "evicted")]
    assert rows[0] == (30.0, "evicting", "default/big on n1")
    assert rows[1][:2] == (50.0, "evicted") and rows[1][2].startswith("default/big on n1: Evicted The node was low")
    assert len(rows) == 2
