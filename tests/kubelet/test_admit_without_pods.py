"""Admission without the list of the node's pods (``PodAdmitHandlers.admit_without_pods``,
``FakeKubelet.admit_without_pods``) against the reference, every handler asked with the pods:

* the fit check (``predicate._fits_counted`` against ``_fits``) and the predicate handler on random
  pods, nodes and admitted pods (native, extended, DRA-extended and hugepage resources, zero
  requests, host ports, OS labels and fields, node selectors, NoExecute taints, static pods);
* the eviction manager's answer under each pressure condition;
* whole simulations whose pods are sent to nodes directly (over-committing them, with GPU-share
  annotations, host ports, OS labels, NoExecute taints): at every admission both ways answer the
  same, and runs end with the same pods and events.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api_objects import summed_requests
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.kubelet import fake
from ksched.kubelet.eviction import EvictionManager
from ksched.kubelet.evictionapi import EvictionConfig
from ksched.kubelet.lifecycle import PodAdmitAttributes, PodAdmitHandlers
from ksched.kubelet.predicate import PredicateAdmitHandler, _fits, _fits_counted
from ksched.sim.simulation import Simulation

RESOURCES = ("cpu", "memory", "ephemeral-storage", "example.com/gpu", "deviceclass.resource.kubernetes.io/gpu",
             "vendor.io/dev", "hugepages-2Mi", "requests.x/y")
_amount = st.sampled_from(["0", "1", "2", "3", "500m", "1Gi", "3Gi"])
_requests = st.dictionaries(st.sampled_from(RESOURCES), _amount, max_size=5)
_ports = st.lists(st.fixed_dictionaries({"containerPort": st.just(80), "hostPort": st.sampled_from([8080, 8081])},
                                        optional={"hostIP": st.sampled_from(["10.0.0.1", "10.0.0.2"])}),
                  max_size=2)


def _pod(name: str, requests: dict[str, str], ports: list[dict[str, Any]], labels: dict[str, str],
         spec: dict[str, Any], annotations: dict[str, str], node: str = "n1") -> Pod:
    c: dict[str, Any] = {"name": "c", "image": "img"}
    if requests:
        c["resources"] = {"requests": requests}
    if ports:
        c["ports"] = ports
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                                        "labels": labels, "annotations": annotations},
                           "spec": {"containers": [c], "nodeName": node, **spec}}
    return Pod(raw)


_labels = st.dictionaries(st.sampled_from(["kubernetes.io/os", "zone"]), st.sampled_from(["linux", "windows", "a"]),
                          max_size=2)
_spec = st.fixed_dictionaries({}, optional={
    "nodeSelector": st.dictionaries(st.just("zone"), st.sampled_from(["a", "b"]), min_size=1),
    "os": st.fixed_dictionaries({"name": st.sampled_from(["linux", "windows"])}),
    "tolerations": st.just([{"key": "k", "operator": "Exists"}]),
    "overhead": st.dictionaries(st.just("cpu"), st.sampled_from(["100m", "1"]), min_size=1),
    "nodeName": st.sampled_from(["n1", "n2"]),
})
_annotations = st.dictionaries(st.just("kubernetes.io/config.source"), st.sampled_from(["api", "file"]), max_size=1)
_pods = st.builds(lambda i, r, p, lab, s, a: _pod(f"p{i}", r, p, lab, s, a), st.integers(0, 9), _requests, _ports,
                  _labels, _spec, _annotations)


@st.composite
def _nodes(draw: st.DrawFn) -> Node:
    alloc = {"pods": draw(st.sampled_from(["0", "1", "2", "3", "110"]))}
    alloc.update(draw(st.dictionaries(st.sampled_from(RESOURCES), _amount, max_size=6)))
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": "n1", "labels": draw(_labels)}, "status": {"allocatable": alloc}}
    if draw(st.booleans()):
        raw["spec"] = {"taints": [{"key": "k", "value": "v", "effect": draw(st.sampled_from(["NoExecute",
                                                                                          "NoSchedule"]))}]}
    return Node(raw)


@settings(max_examples=400, deadline=None)
@given(_pods, _nodes(), st.lists(_pods, max_size=4))
def test_the_counted_fit_and_the_predicate_handler_answer_as_the_reference(pod: Pod, node: Node,
                                                                         others: list[Pod]) -> None:
    used = summed_requests(others)
    assert _fits_counted(pod, node, len(others), used) == _fits(pod, node, others, used) == _fits(pod, node, others)
    handler = PredicateAdmitHandler(lambda: node)
    want = handler.admit(PodAdmitAttributes(pod, tuple(others), used))
    assert want == handler.admit(PodAdmitAttributes(pod, tuple(others)))
    got = handler.admit_without_pods(pod, len(others), used)
    if pod.host_ports():
        assert got is None  # the ports check reads the other pods
    else:
        assert got == want
    assert handler.admit_without_pods(pod, len(others), None) is None
    gone = PredicateAdmitHandler(lambda: None)
    assert gone.admit_without_pods(pod, 0, {}) == (None if pod.host_ports() else gone.admit(PodAdmitAttributes(pod)))


@pytest.mark.parametrize("conditions", [set(), {"MemoryPressure"}, {"DiskPressure"},
                                        {"MemoryPressure", "DiskPressure"}])
@pytest.mark.parametrize("requests", [{}, {"cpu": "1"}])
@pytest.mark.parametrize("tolerate", [False, True])
def test_the_eviction_manager_answers_from_the_pod(conditions: set[str], requests: dict[str, str],
                                                   tolerate: bool) -> None:
    m = EvictionManager("n1", EvictionConfig())
    m.conditions = set(conditions)
    spec = {"tolerations": [{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists"}]} if tolerate else {}
    p = _pod("p", requests, [], {}, spec, {})
    assert m.admit_without_pods(p, 3, {}) == m.admit(PodAdmitAttributes(p, (p, p, p)))


class _Refuser:
    """A handler without ``admit_without_pods``: it sees the attributes' pods."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def admit(self, attrs: PodAdmitAttributes) -> Any:
        self.seen.append(len(attrs.other_pods))
        return PodAdmitHandlers().admit(attrs)


def test_a_handler_that_cannot_answer_without_the_pods_gets_them_built_once() -> None:
    chain = PodAdmitHandlers()
    a, b = _Refuser(), _Refuser()
    chain.add(a)
    chain.add(b)
    built: list[int] = []
    p = _pod("p", {}, [], {}, {}, {})

    def attrs() -> PodAdmitAttributes:
        built.append(1)
        return PodAdmitAttributes(p, (p, p))

    assert chain.admit_without_pods(p, 2, {}, attrs).admit
    assert (a.seen, b.seen, built) == ([2], [2], [1])


# ---------------------------------------------------------------- whole simulations

GPU = {"alibabacloud.com/gpu-milli": "500", "alibabacloud.com/gpu-count": "1"}


def _sim_pod(i: int, node: str, cpu: str, port: bool, os_label: str | None, gpu: bool, selector: str | None,
             ext: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
    if ext != "0":
        c["resources"]["requests"]["example.com/dev"] = ext
        c["resources"]["limits"] = {"example.com/dev": ext}
    if port:
        c["ports"] = [{"containerPort": 80, "hostPort": 9000}]
    md: dict[str, Any] = {"name": f"p{i}", "namespace": "default", "labels": {}, "annotations": {}}
    if os_label:
        md["labels"]["kubernetes.io/os"] = os_label
    if gpu:
        md["annotations"].update(GPU)
    spec: dict[str, Any] = {"containers": [c], "nodeName": node}
    if selector:
        spec["nodeSelector"] = {"zone": selector}
    if i % 5 == 4:
        spec["tolerations"] = [{"key": "k", "operator": "Exists"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


_sim_pods = st.lists(st.tuples(st.sampled_from(["n0", "n1", "n2"]), st.sampled_from(["500m", "1", "2", "3"]),
                               st.booleans(), st.sampled_from([None, "linux", "windows"]), st.booleans(),
                               st.sampled_from([None, "a", "b"]), st.sampled_from(["0", "1", "2"])),
                     min_size=1, max_size=14)


def _run(fast: bool, pods: list[tuple[Any, ...]], checked: list[int]) -> Simulation:
    sim = Simulation(seed=0)
    assert sim.kubelet is not None
    sim.kubelet.admit_without_pods = fast
    nodes = []
    for i in range(3):
        raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                               "metadata": {"name": f"n{i}", "labels": {"zone": "ab"[i % 2]}},
                               "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "4",
                                                          "example.com/dev": str(i)}}}
        if i == 2:
            raw["spec"] = {"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}
            raw["metadata"]["annotations"] = {"alibabacloud.com/gpu-count": "1", "alibabacloud.com/gpu-mem": "1"}
        nodes.append(raw)
    sim.load(nodes)
    sim.load([_sim_pod(i, *p) for i, p in enumerate(pods)])
    sim.run(max_seconds=60)
    return sim


def _ended(sim: Simulation) -> dict[str, Any]:
    pods = {p.key: (p.phase, p.raw.get("status", {}).get("reason"), p.raw.get("status", {}).get("message"),
                    dict(p.annotations)) for p in sim.store.items("Pod")}
    events = sorted((e.raw.get("reason"), e.raw.get("message"), e.raw.get("involvedObject", {}).get("name"))
                    for e in sim.store.items("Event"))
    return {"pods": pods, "events": events}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(_sim_pods)
def test_simulations_admit_and_refuse_the_same_pods(monkeypatch: pytest.MonkeyPatch,
                                                    pods: list[tuple[Any, ...]]) -> None:
    checked: list[int] = []
    quick = PodAdmitHandlers.admit_without_pods
    monkeypatch.setattr(fake, "FUSED_ADMISSION", False)  # (every admission through the chain, checked)

    def both(self: PodAdmitHandlers, pod: Pod, count: int, requests: Any, attrs: Any) -> Any:
        want = self.admit(attrs())
        # (the container managers keep what they gave: ask them again only after a refusal)
        got = quick(self, pod, count, requests, attrs)
        assert len(attrs().other_pods) == count
        assert (got.admit, got.reason, got.message) == (want.admit, want.reason, want.message)
        checked.append(1)
        return got

    ref = _ended(_run(False, pods, checked))
    monkeypatch.setattr(PodAdmitHandlers, "admit_without_pods", both)
    fast = _ended(_run(True, pods, checked))
    assert fast == ref
    if any(p[0] != "n2" for p in pods):  # (n2's NoExecute taint may have its pods deleted before they start)
        assert checked


def test_the_kubelet_takes_the_counted_path_and_refuses_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    quick = PodAdmitHandlers.admit_without_pods
    monkeypatch.setattr(fake, "FUSED_ADMISSION", False)  # (tests/kubelet/test_fused_admission.py: the fused one)

    def counted(self: PodAdmitHandlers, *a: Any) -> Any:
        calls.append(1)
        return quick(self, *a)

    monkeypatch.setattr(PodAdmitHandlers, "admit_without_pods", counted)
    pods = [("n0", "3", False, None, False, None, "0"), ("n0", "3", False, None, False, None, "0"),
            ("n1", "1", True, None, False, None, "0"), ("n1", "1", True, None, False, None, "0"),
            ("n0", "500m", False, "windows", False, None, "0"), ("n1", "1", False, None, True, None, "0")]
    fast = _ended(_run(True, pods, []))
    assert len(calls) == len(pods)
    ref = _ended(_run(False, pods, []))
    assert len(calls) == len(pods)  # the reference never asks that way
    assert fast == ref
    reasons = {k: v[1] for k, v in fast["pods"].items()}
    assert reasons["default/p1"] == "OutOfcpu" and reasons["default/p3"] == "NodePorts"
    assert reasons["default/p4"] == "PodOSSelectorNodeLabelDoesNotMatch"
