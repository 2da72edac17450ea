"""``predicate.PARSED_OS_NAME``: the kubelet's per-template admission reads ``spec.os.name`` as
parsed with the pod (``Pod.os_name``) rather than from the manifest (the reference). On random
``spec.os`` values -- absent, null, empty, a map with or without a name of any type, not a map
(invalid) -- through every way a Pod is made (``Pod(raw)``, ``Pod.lean``, ``with_status``,
``admitted``, ``like``, ``shallow_copy``), the parsed value is the manifest's (or says to read
the manifest, where reading it fails), and the handler's answers (or errors) on nodes of either
OS are the same with the flag on and off."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.node import Node
from ksched.api.pod import OS_NAME_UNPARSED, Pod
from ksched.kubelet import predicate
from ksched.kubelet.predicate import PredicateAdmitHandler

_MISSING = object()
OS_VALUES = st.one_of(
    st.just(_MISSING), st.none(), st.just({}), st.just(""), st.just("linux"), st.just([1]),
    st.fixed_dictionaries({}, optional={"name": st.sampled_from(["linux", "windows", "", None, 3])}))


def _raw(name: str, os_: Any, labels: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}],
                            "nodeName": "n"}
    if os_ is not _MISSING:
        spec["os"] = os_
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": name,
                                                           "labels": dict(labels)},
            "spec": spec, "status": {"phase": "Pending"}}


def _reference(pod: Pod) -> Any:
    try:
        return ((pod.raw.get("spec") or {}).get("os") or {}).get("name")
    except AttributeError:
        return AttributeError


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    predicate.PARSED_OS_NAME = True
    predicate._templates.clear()


def _answer(handler: PredicateAdmitHandler, pod: Pod, node: Node, on: bool) -> Any:
    predicate.PARSED_OS_NAME = on
    try:
        r = handler.admit_by_template(pod, 0, {}, node)
    except AttributeError as e:
        return ("raised", str(e))
    return None if r is None else (r.admit, r.reason, r.message)


@settings(max_examples=200, deadline=None)
@given(OS_VALUES, OS_VALUES, st.dictionaries(st.just("kubernetes.io/os"), st.sampled_from(["linux", "windows"]),
                                             max_size=1), st.sampled_from(["linux", "windows", None]))
def test_the_parsed_os_name_is_the_manifests(a: Any, b: Any, labels: dict[str, str], node_os: str | None) -> None:
    first = Pod(_raw("p", a, labels))
    lean = Pod.lean(_raw("p", a, labels))
    own = _raw("q", b, labels)
    made = [first, lean, first.shallow_copy(), first.with_status({**first.raw, "status": {"phase": "Running"}}),
            Pod(own).admitted(own), first.like(_raw("r", a, labels))]
    node_labels = {"kubernetes.io/os": node_os} if node_os else {}
    node = Node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": node_labels},
                 "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}})
    handler = PredicateAdmitHandler(lambda: node)
    for p in made:
        ref = _reference(p)
        if p.os_name is OS_NAME_UNPARSED:
            assert ref is AttributeError
        else:
            assert p.os_name == ref and type(p.os_name) is type(ref)
        assert _answer(handler, p, node, True) == _answer(handler, p, node, False)
