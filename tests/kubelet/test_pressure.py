"""Node-pressure eviction and OOM kills in whole simulations (virtual clock): usage profiles
drive a node into memory pressure; the eviction manager evicts BestEffort first, then Burstable
pods over their requests, never Guaranteed pods within their limits; the node gets
MemoryPressure and the node lifecycle controller's memory-pressure taint, which keeps new
BestEffort pods off it; its kubelet refuses BestEffort pods sent to it directly."""

from __future__ import annotations

from typing import Any

from api_objects import mknode
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.kubelet.evictionapi import parse_eviction_config
from ksched.sim.simulation import Simulation

Mi = 1 << 20


def node(name: str, memory: str = "4000Mi", labels: dict[str, str] | None = None) -> dict[str, Any]:
    raw = mknode(name)
    raw["metadata"]["labels"] = {"kubernetes.io/hostname": name, **(labels or {})}
    raw["status"]["allocatable"]["memory"] = memory
    return raw


def pod(name: str, usage: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
        node_name: str = "", **spec: Any) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    s: dict[str, Any] = {"containers": [{"name": "c", "image": "img", "resources": res}], **spec}
    if node_name:
        s["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": {"ksched.io/usage-memory": usage}},
            "spec": s}


def run_until(sim: Simulation, t: float) -> None:
    sim.run(max_seconds=t - sim.clock.now())
    if sim.clock.now() < t:
        sim.clock.advance_to(t)
        sim.run(max_seconds=0)


def get(sim: Simulation, name: str) -> Pod:
    p = sim.store.get("Pod", "default", name)
    assert isinstance(p, Pod)
    return p


def getnode(sim: Simulation, name: str) -> Node:
    n = sim.store.get("Node", "", name)
    assert isinstance(n, Node)
    return n


def cond(obj: Pod | Node, ctype: str) -> dict[str, Any]:
    return next((c for c in obj.raw["status"].get("conditions") or () if c["type"] == ctype), {})


def test_memory_pressure_evicts_best_effort_then_burstable_over_requests_never_guaranteed() -> None:
    sim = Simulation(seed=1)
    t0 = sim.clock.now()
    sim.load([node("n1"), node("n2", memory="64Gi")])
    sim.load([
        pod("best-effort", "0: 1000Mi, 5m: 1600Mi", node_name="n1"),
        pod("burstable-over", "0: 1000Mi, 10m: 3000Mi", {"memory": "500Mi"}, node_name="n1"),
        pod("burstable-under", "500Mi", {"memory": "1000Mi"}, node_name="n1"),
        pod("guaranteed", "900Mi", {"memory": "1000Mi", "cpu": "1"}, {"memory": "1000Mi", "cpu": "1"},
            node_name="n1"),
    ])
    run_until(sim, t0 + 299)
    assert {get(sim, n).phase for n in ("best-effort", "burstable-over", "burstable-under", "guaranteed")} == \
        {"Running"}
    assert cond(getnode(sim, "n1"), "MemoryPressure")["status"] == "False"

    run_until(sim, t0 + 330)
    be = get(sim, "best-effort")
    st = be.raw["status"]
    assert (st["phase"], st["reason"]) == ("Failed", "Evicted")
    assert st["message"] == ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 0. "
                             "Container c was using 1600Mi, request is 0, has larger consumption of memory. ")
    dt = cond(be, "DisruptionTarget")
    assert (dt["status"], dt["reason"], dt["message"]) == ("True", "TerminationByKubelet", st["message"])
    assert get(sim, "burstable-over").phase == "Running"
    n1 = getnode(sim, "n1")
    mp = cond(n1, "MemoryPressure")
    assert (mp["status"], mp["reason"], mp["message"]) == ("True", "KubeletHasInsufficientMemory",
                                                           "kubelet has insufficient memory available")
    assert {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}.items() <= \
        next(t for t in n1.raw["spec"]["taints"] if t["key"] == "node.kubernetes.io/memory-pressure").items()
    events = [(e.raw["reason"], e.raw["involvedObject"]["name"]) for e in sim.store.list("Event")[0]]
    assert ("Evicted", "best-effort") in events and ("EvictionThresholdMet", "n1") in events

    # Under MemoryPressure: a new BestEffort pod goes elsewhere (the taint), and one sent to n1
    # directly is refused by its kubelet; a Burstable one is admitted.
    sim.load([pod("new-best-effort", "10Mi"), pod("direct-best-effort", "10Mi", node_name="n1"),
              pod("direct-burstable", "10Mi", {"memory": "10Mi"}, node_name="n1")])
    run_until(sim, t0 + 340)
    assert get(sim, "new-best-effort").node_name == "n2"
    d = get(sim, "direct-best-effort").raw["status"]
    assert (d["phase"], d["reason"], d["message"]) == (
        "Failed", "Evicted", "Pod was rejected: The node had condition: [MemoryPressure]. ")
    assert get(sim, "direct-burstable").phase == "Running"

    run_until(sim, t0 + 630)
    bo = get(sim, "burstable-over").raw["status"]
    assert (bo["phase"], bo["reason"]) == ("Failed", "Evicted")
    assert bo["message"] == ("The node was low on resource: memory. Threshold quantity: 100Mi, available: -410Mi. "
                             "Container c was using 3000Mi, request is 500Mi, has larger consumption of memory. ")
    assert get(sim, "guaranteed").phase == "Running"
    assert get(sim, "burstable-under").phase == "Running"

    # Pressure gone: the condition clears once unobserved for the 5 min transition period, and
    # the taint with it.
    sim.run()
    n1 = getnode(sim, "n1")
    assert cond(n1, "MemoryPressure")["status"] == "False"
    assert not any(t["key"] == "node.kubernetes.io/memory-pressure" for t in n1.raw["spec"].get("taints") or ())
    assert get(sim, "guaranteed").phase == "Running"


def test_soft_threshold_waits_for_its_grace_period_and_node_pools_get_their_config() -> None:
    batch = parse_eviction_config({
        "evictionHard": {}, "evictionSoft": {"memory.available": "1000Mi"},
        "evictionSoftGracePeriod": {"memory.available": "1m30s"}, "evictionMaxPodGracePeriod": 20,
        "nodeSelector": {"pool": "batch"}})
    sim = Simulation(seed=1, eviction_configs=[batch])
    t0 = sim.clock.now()
    sim.load([node("batch-1", labels={"pool": "batch"}), node("web-1")])
    sim.load([pod("a", "3500Mi", node_name="batch-1"), pod("b", "3500Mi", node_name="web-1")])
    run_until(sim, t0 + 85)
    assert get(sim, "a").phase == "Running"
    assert cond(getnode(sim, "batch-1"), "MemoryPressure")["status"] == "True"  # at once, grace or not
    run_until(sim, t0 + 100)
    a = get(sim, "a").raw["status"]
    assert (a["phase"], a["reason"]) == ("Failed", "Evicted")
    assert a["message"].startswith("The node was low on resource: memory. Threshold quantity: 1000Mi, "
                                   "available: 500Mi. ")
    # web-1 has the default thresholds (100Mi): 500Mi available is fine there
    assert get(sim, "b").phase == "Running"
    assert cond(getnode(sim, "web-1"), "MemoryPressure")["status"] == "False"


def test_critical_pods_are_not_evicted() -> None:
    sim = Simulation(seed=1, disable_admission_plugins=["Priority"])
    t0 = sim.clock.now()
    sim.load([node("n1")])
    sim.load([pod("critical", "3000Mi", node_name="n1", priority=2000000000),
              pod("normal", "1000Mi", {"memory": "2000Mi"}, node_name="n1")])
    run_until(sim, t0 + 20)
    assert get(sim, "critical").phase == "Running"
    assert get(sim, "normal").raw["status"]["reason"] == "Evicted"


def _oom_pod(name: str, policy: str) -> dict[str, Any]:
    return pod(name, "0: 500Mi, 1m: 2Gi", {"memory": "1Gi"}, {"memory": "1Gi"}, node_name="n1",
               restartPolicy=policy)


def test_memory_above_the_limit_is_an_oom_kill_with_restarts_and_back_off() -> None:
    sim = Simulation(seed=1)
    t0 = sim.clock.now()
    sim.load([node("n1", memory="64Gi")])
    sim.load([_oom_pod("always", "Always"), _oom_pod("never", "Never")])
    run_until(sim, t0 + 61)
    never = get(sim, "never").raw["status"]
    assert never["phase"] == "Failed"
    term = never["containerStatuses"][0]["state"]["terminated"]
    assert (term["reason"], term["exitCode"]) == ("OOMKilled", 137)
    cs = get(sim, "always").raw["status"]["containerStatuses"][0]
    assert cs["restartCount"] == 1 and "running" in cs["state"]
    assert (cs["lastState"]["terminated"]["reason"], cs["lastState"]["terminated"]["exitCode"]) == ("OOMKilled", 137)
    run_until(sim, t0 + 125)  # second OOM at 120 s: 10 s back-off
    cs = get(sim, "always").raw["status"]["containerStatuses"][0]
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert cs["state"]["waiting"]["message"].startswith("back-off 10s restarting failed container=c pod=always_default")
    run_until(sim, t0 + 131)
    cs = get(sim, "always").raw["status"]["containerStatuses"][0]
    assert cs["restartCount"] == 2 and "running" in cs["state"]


def test_a_bad_usage_annotation_is_reported_not_fatal() -> None:
    sim = Simulation(seed=1)
    sim.load([node("n1")])
    sim.load([pod("bad", "lots", node_name="n1"), pod("good", "100Mi", node_name="n1")])
    sim.run(max_seconds=60)
    assert get(sim, "bad").phase == "Running" and get(sim, "good").phase == "Running"
    msgs = [e.raw["message"] for e in sim.store.list("Event")[0] if e.raw["reason"] == "InvalidUsage"]
    assert msgs == ["pod default/bad: metadata.annotations[ksched.io/usage-memory]: invalid quantity 'lots': "
                    + msgs[0].split("invalid quantity 'lots': ", 1)[1]]


def test_same_seed_same_result() -> None:
    def once() -> list[tuple[str, str, str]]:
        sim = Simulation(seed=3)
        sim.load([node("n1"), node("n2", memory="3000Mi")])
        sim.load([pod(f"p{i}", f"0: 100Mi, {i + 1}m: 900Mi", {"memory": "200Mi"} if i % 2 else None)
                  for i in range(8)])
        sim.run(max_seconds=3600)
        return [(p.name, p.node_name, p.phase) for p in sim.store.list("Pod")[0] if isinstance(p, Pod)]

    first = once()
    assert any(phase == "Failed" for _, _, phase in first)
    assert once() == first
