"""The predicate handler's answer per template (``PredicateAdmitHandler.admit_by_template``,
``predicate.ADMIT_BY_TEMPLATE``) against checking everything for every pod
(``admit_each_check``, the reference): replicas of a few templates (``Pod.like``: the parsed
parts shared), pods parsed on their own, and pods sharing a template's containers but not its
node selector, OS label or field, admitted one after another on a few node objects (with and
without NoExecute taints, pod limits, extended resources) beside others whose requests sum to
random amounts: the same answer every time, whatever the templates seen before."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.kubelet import predicate
from ksched.kubelet.predicate import PredicateAdmitHandler

RESOURCES = ("cpu", "memory", "ephemeral-storage", "example.com/gpu", "deviceclass.resource.kubernetes.io/gpu")
_amount = st.sampled_from(["0", "1", "2", "500m", "1Gi"])


def _raw(name: str, requests: dict[str, str], port: bool, labels: dict[str, str], spec: dict[str, Any],
         annotations: dict[str, str], node: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "img"}
    if requests:
        c["resources"] = {"requests": dict(requests)}
    if port:
        c["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": dict(labels),
                         "annotations": dict(annotations)},
            "spec": {"containers": [c], "nodeName": node, **spec}}


_spec = st.fixed_dictionaries({}, optional={
    "nodeSelector": st.dictionaries(st.just("zone"), st.sampled_from(["a", "b"]), min_size=1),
    "os": st.fixed_dictionaries({"name": st.sampled_from(["linux", "windows"])}),
    "tolerations": st.just([{"key": "k", "operator": "Exists"}]),
    "overhead": st.dictionaries(st.just("cpu"), st.sampled_from(["100m", "1"]), min_size=1),
    "affinity": st.sampled_from([
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
        {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}},
    ]),
})
_labels = st.dictionaries(st.sampled_from(["kubernetes.io/os", "app"]), st.sampled_from(["linux", "windows"]),
                          max_size=2)
_annotations = st.dictionaries(st.just("kubernetes.io/config.source"), st.sampled_from(["api", "file"]), max_size=1)
# Mostly plain templates (native requests, no OS label or field, no selector), the answers kept.
_templates = st.tuples(st.one_of(st.dictionaries(st.sampled_from(RESOURCES[:2]), _amount, max_size=2),
                                 st.dictionaries(st.sampled_from(RESOURCES), _amount, max_size=3)),
                       st.booleans().map(lambda b: b and False) | st.booleans(),
                       st.one_of(st.just({}), _labels), st.one_of(st.just({}), _spec), _annotations)


@st.composite
def _node(draw: st.DrawFn, name: str) -> Node:
    alloc = {"pods": draw(st.sampled_from(["1", "3", "110"])), "cpu": draw(st.sampled_from(["1", "4"])),
             "memory": draw(st.sampled_from(["1Gi", "8Gi"]))}
    alloc.update(draw(st.dictionaries(st.sampled_from(RESOURCES[3:]), _amount, max_size=2)))
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": draw(st.dictionaries(
                               st.sampled_from(["zone", "kubernetes.io/os"]), st.sampled_from(["a", "linux",
                                                                                               "windows"])))},
                           "status": {"allocatable": alloc}}
    effect = draw(st.sampled_from([None, "NoExecute", "NoSchedule"]))
    if effect:
        raw["spec"] = {"taints": [{"key": "k", "value": "v", "effect": effect}]}
    return Node(raw)


# One admission: which template, how the pod is made (0: a replica sharing the template's parsed
# parts, 1: parsed on its own, 2, 3, 4: the template's parts with another node selector, OS
# label, OS field), which node object, the other pods' count and requests.
_steps = st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0, 0, 0, 1, 2, 3, 4]), st.integers(0, 3), st.integers(0, 4),
                            st.dictionaries(st.sampled_from(RESOURCES), st.sampled_from([0, 500, 1000, 2**30]), max_size=2)),
                  min_size=1, max_size=25)


@settings(max_examples=300, deadline=None)
@given(st.lists(_templates, min_size=4, max_size=4), st.lists(_node("n1"), min_size=4, max_size=4), _steps,
       st.sampled_from([None, "n2"]))
def test_answers_per_template_are_the_references(templates: list[tuple[Any, ...]], nodes: list[Node],
                                                 steps: list[tuple[Any, ...]], other_node: str | None) -> None:
    predicate._templates.clear()  # (a bounded module-level memo: each example starts empty)
    bases = [Pod(_raw(f"t{i}", *t, node="n1")) for i, t in enumerate(templates)]
    current = [nodes[0]]
    fast = PredicateAdmitHandler(lambda: current[0])
    ref = PredicateAdmitHandler(lambda: current[0])
    for i, (which, how, node_i, count, used) in enumerate(steps):
        base, t = bases[which], templates[which]
        node = other_node if i % 7 == 6 and other_node else "n1"
        if how == 0:
            pod = base.like(_raw(f"p{i}", *t, node=node)) if node == "n1" else Pod(_raw(f"p{i}", *t, node=node))
        elif how == 1:
            pod = Pod(_raw(f"p{i}", *t, node=node))
        else:
            requests, port, labels, spec, annotations = t
            if how == 2:
                spec = {**spec, "nodeSelector": {"zone": "b"}}
            elif how == 3:
                labels = {**labels, "kubernetes.io/os": "windows"}
            else:
                spec = {**spec, "os": {"name": "windows"}}
            pod = base.like(_raw(f"p{i}", requests, port, labels, spec, annotations, node))
        current[0] = nodes[node_i]
        want = ref.admit_each_check(pod, count, used)
        assert fast.admit_by_template(pod, count, used) == want
        assert fast.admit_by_template(pod, count, None) is None
    gone = PredicateAdmitHandler(lambda: None)
    assert gone.admit_by_template(bases[0], 0, {}) == gone.admit_each_check(bases[0], 0, {})


def test_the_flag_chooses_the_path(monkeypatch: Any) -> None:
    node = Node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                 "status": {"allocatable": {"pods": "3", "cpu": "2", "memory": "1Gi"}}})
    pod = Pod(_raw("p", {"cpu": "1"}, False, {}, {}, {}, "n1"))
    seen: list[str] = []
    handler = PredicateAdmitHandler(lambda: node)
    monkeypatch.setattr(PredicateAdmitHandler, "admit_by_template",
                        lambda self, *a: seen.append("template") or self.admit_each_check(*a))
    assert handler.admit_without_pods(pod, 0, {}).admit
    monkeypatch.setattr(predicate, "ADMIT_BY_TEMPLATE", False)
    assert not handler.admit_without_pods(pod, 1, {"cpu": 1500}).admit
    assert seen == ["template"]
    assert handler.admit_without_pods(pod, 1, {"cpu": 1500}).reason == "OutOfcpu"
