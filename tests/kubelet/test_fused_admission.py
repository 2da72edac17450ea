"""The kubelet's fused admission (``fake.FUSED_ADMISSION``: the predicate handler asked alone when
the default chain's eviction manager, container managers and GPU-share plugin admit by
construction) against the chain (the reference):

* random pods (requests, host ports, OS labels, node selectors, GPU-share annotations, best
  effort, critical) asked both ways on every node of a cluster (plain, NoExecute-tainted,
  GPU-sharing, with resource managers, under random pressure conditions) beside the pods the
  nodes already run: the same answer every time, and the fused path taken where it may;
* whole simulations that over-commit their nodes: the same pods, annotations and events;
* a node whose chain is not the default one (a handler added) is always asked through it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ksched.api.pod import Pod
from ksched.kubelet import fake
from ksched.kubelet.lifecycle import PodAdmitAttributes, PodAdmitHandlers, PodAdmitResult
from ksched.kubelet.predicate import PredicateAdmitHandler
from ksched.sim.simulation import Simulation

LAYOUT = {"sockets": 1, "coresPerNUMANode": 4, "threadsPerCore": 1}
GPU = {"alibabacloud.com/gpu-milli": "500", "alibabacloud.com/gpu-count": "1"}
NODES = ("n0", "n1", "n2", "n3")
CONDITIONS = (frozenset(), frozenset({"MemoryPressure"}), frozenset({"DiskPressure"}),
              frozenset({"MemoryPressure", "DiskPressure"}))


def _node(i: int) -> dict[str, Any]:
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": f"n{i}", "labels": {"zone": "ab"[i % 2]}, "annotations": {}},
                           "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "5"},
                                      "capacity": {"cpu": "4", "memory": "8Gi", "pods": "5"}}}
    if i == 1:
        raw["spec"] = {"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}
    if i == 2:
        raw["metadata"]["annotations"] = {"alibabacloud.com/gpu-count": "1", "alibabacloud.com/gpu-mem": "1"}
    if i == 3:  # resource managers (a static CPU policy: guaranteed pods get CPUs of their own)
        config = {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}
        raw["metadata"]["annotations"] = {"ksched.io/topology": json.dumps(LAYOUT),
                                          "ksched.io/kubelet-config": json.dumps(config)}
    return raw


def _pod(name: str, node: str, cpu: str | None, port: bool, os_label: str | None, gpu: bool,
         selector: str | None, tolerate: bool, critical: bool) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "i"}
    if cpu is not None:  # (None: best effort)
        res = {"cpu": cpu, "memory": "1Gi"}
        c["resources"] = {"requests": res, "limits": dict(res)}
    if port:
        c["ports"] = [{"containerPort": 80, "hostPort": 9000}]
    md: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": {},
                          "annotations": {}}
    if os_label:
        md["labels"]["kubernetes.io/os"] = os_label
    if gpu:
        md["annotations"].update(GPU)
    spec: dict[str, Any] = {"containers": [c], "nodeName": node}
    if selector:
        spec["nodeSelector"] = {"zone": selector}
    if tolerate:
        spec["tolerations"] = [{"key": "k", "operator": "Exists"},
                               {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists"}]
    if critical:
        spec["priorityClassName"] = "system-node-critical"
        spec["priority"] = 2000001000
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


_pod_args = st.tuples(st.sampled_from([None, "500m", "1", "2", "3"]), st.booleans(),
                      st.sampled_from([None, None, "linux", "windows"]), st.booleans(),
                      st.sampled_from([None, None, "a", "b"]), st.booleans(), st.booleans())


def _cluster(running: list[tuple[str, tuple[Any, ...]]]) -> Simulation:
    sim = Simulation(seed=0, record_events=False)
    sim.load([_node(i) for i in range(len(NODES))])
    sim.load([_pod(f"r{i}", node, *args) for i, (node, args) in enumerate(running)])
    sim.run(max_seconds=30)
    return sim


def _asked(k: fake.FakeKubelet, pod: Pod) -> tuple[PodAdmitResult, dict[str, str] | None]:
    """``_admit``'s answer and what the container managers gave the pod; then forgotten (the pod
    is asked again the other way)."""
    result = k._admit(pod, k.node(pod.node_name))
    given_ = k._cm_annotations.pop(pod.uid, None)
    k.node_managers.remove_pod(pod)
    return result, given_


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(NODES), _pod_args), max_size=10),
       st.lists(st.sampled_from(CONDITIONS), min_size=len(NODES), max_size=len(NODES)),
       st.lists(_pod_args, min_size=1, max_size=8))
def test_every_pod_gets_the_chains_answer_on_every_node(monkeypatch: pytest.MonkeyPatch,
                                                        running: list[tuple[str, tuple[Any, ...]]],
                                                        conditions: list[frozenset[str]],
                                                        asking: list[tuple[Any, ...]]) -> None:
    sim = _cluster(running)
    k = sim.kubelet
    assert k is not None
    for name, conds in zip(NODES, conditions, strict=True):
        k.pressure.manager(name).conditions = set(conds)
    fused: list[str] = []
    by_template = PredicateAdmitHandler.admit_by_template

    def seen(self: PredicateAdmitHandler, pod: Pod, *a: Any) -> Any:
        fused.append(pod.node_name)
        return by_template(self, pod, *a)

    chain_calls: list[int] = []
    chain = PodAdmitHandlers.admit_without_pods

    def through_chain(self: PodAdmitHandlers, *a: Any) -> Any:
        chain_calls.append(1)
        return chain(self, *a)

    monkeypatch.setattr(PredicateAdmitHandler, "admit_by_template", seen)
    monkeypatch.setattr(PodAdmitHandlers, "admit_without_pods", through_chain)
    for i, args in enumerate(asking):
        for node in NODES:
            pod = Pod(_pod(f"a{i}", node, *args))
            monkeypatch.setattr(fake, "FUSED_ADMISSION", False)
            want = _asked(k, pod)
            monkeypatch.setattr(fake, "FUSED_ADMISSION", True)
            fused.clear()
            before = len(chain_calls)
            got = _asked(k, pod)
            assert got == want, (node, args)
            plain = not k.pressure.manager(node).conditions and node != "n3" and not args[3]
            assert (len(chain_calls) == before) == plain  # fused exactly where the first three admit
            if plain:
                assert fused == [node]


def test_a_node_with_another_chain_is_asked_through_it(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = _cluster([])
    k = sim.kubelet
    assert k is not None

    class Refuse:
        def admit(self, attrs: PodAdmitAttributes) -> PodAdmitResult:
            return PodAdmitResult(False, "Nope", "no")

    k.admit_handlers("n0").add(Refuse())
    pod = Pod(_pod("a", "n0", "1", False, None, False, None, False, False))
    assert _asked(k, pod)[0] == PodAdmitResult(False, "Nope", "no")
    assert _asked(k, Pod(_pod("b", "n2", "1", False, None, False, None, False, False)))[0].admit
    # a predicate handler with a node getter of its own is asked with it, not given the node
    k.admit_handlers("n2").handlers[3] = PredicateAdmitHandler(lambda: None)
    node = k.node("n2")
    for fused in (False, True):
        monkeypatch.setattr(fake, "FUSED_ADMISSION", fused)
        pod = Pod(_pod("c", "n2", "1", False, None, False, None, False, False))
        assert k._admit(pod, node) == PodAdmitResult(False, "InvalidNodeInfo", "Kubelet cannot get node info.")


def _ended(sim: Simulation) -> dict[str, Any]:
    pods = {p.key: (p.phase, p.raw.get("status", {}).get("reason"), p.raw.get("status", {}).get("message"),
                    dict(p.annotations)) for p in sim.store.items("Pod")}
    events = sorted((e.raw.get("reason"), e.raw.get("message"), e.raw.get("involvedObject", {}).get("name"))
                    for e in sim.store.items("Event"))
    return {"pods": pods, "events": events}


def _run(pods: list[tuple[str, tuple[Any, ...]]]) -> Simulation:
    sim = Simulation(seed=0)
    sim.load([_node(i) for i in range(len(NODES))])
    sim.load([_pod(f"p{i}", node, *args) for i, (node, args) in enumerate(pods)])
    sim.run(max_seconds=60)
    return sim


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(NODES), _pod_args), min_size=1, max_size=14))
def test_simulations_end_the_same(monkeypatch: pytest.MonkeyPatch, pods: list[tuple[str, tuple[Any, ...]]]) -> None:
    monkeypatch.setattr(fake, "FUSED_ADMISSION", False)
    ref = _ended(_run(pods))
    monkeypatch.setattr(fake, "FUSED_ADMISSION", True)
    assert _ended(_run(pods)) == ref
