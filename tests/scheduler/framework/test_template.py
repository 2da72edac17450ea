"""Values shared by the pods of one template (``framework/template.py``) are those each pod
works out alone: the template key tells apart what a parser could tell apart, and every value
kept in the shared dict is the per-pod value, on random pods and through whole simulations."""

from __future__ import annotations

import copy
import datetime
import marshal
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.scheduler.test_fast_paths_agree import _cluster, _outcomes

from ksched.api.pod import Pod
from ksched.scheduler.framework import template
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.template import (
    known_template_cache,
    labels_frozenset,
    per_pod,
    spec_template_key,
    template_cache,
    template_key,
)
from ksched.scheduler.plugins.helper.node_affinity import get_required_node_affinity
from ksched.scheduler.plugins.imagelocality import _pod_images
from ksched.scheduler.plugins.interpodaffinity._index import pod_keys
from ksched.scheduler.plugins.nodeaffinity import _pod_preferred
from ksched.scheduler.plugins.nodeports import _wanted_ports
from ksched.scheduler.plugins.noderesources.fit import Fit
from ksched.scheduler.plugins.noderesources.resource_allocation import (
    ResourceSpec,
    pod_request_list,
    requests_row_key,
)
from ksched.scheduler.plugins.nodeunschedulable import NodeUnschedulable
from ksched.scheduler.plugins.podtopologyspread.common import _pod_constraints, _required_affinity
from ksched.scheduler.plugins.tainttoleration import (
    PRE_SCORE_STATE_KEY,
    TaintToleration,
    _pod_tolerations_key,
)
from ksched.scheduler.schedule_one import pod_with_node
from ksched.testing import make_pod


def _pod(spec: dict[str, Any], name: str = "p", labels: dict[str, str] | None = None,
         namespace: str = "default") -> Pod:
    return Pod({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace, "uid": name + "-uid",
                             "labels": dict(labels if labels is not None else {"app": "a"})},
                "spec": copy.deepcopy(spec)})


_SPEC = {"containers": [{"name": "c", "image": "app:1", "resources": {"requests": {"cpu": 1, "memory": "1Gi"}}}]}


def test_equal_namespace_labels_and_spec_share_one_dict() -> None:
    a, b = _pod(_SPEC, "a"), _pod(_SPEC, "b")
    assert template_key(a) == template_key(b)
    assert template_cache(a) is template_cache(b)
    assert template_cache(a) is not a.cached()


def _with(cpu: Any, first: str = "cpu", image: str = "app:1") -> dict[str, Any]:
    reqs = {"cpu": cpu, "memory": "1Gi"} if first == "cpu" else {"memory": "1Gi", "cpu": cpu}
    return {"containers": [{"name": "c", "image": image, "resources": {"requests": reqs}}]}


@pytest.mark.parametrize(("one", "other", "python_equal"), [
    (_with(1), _with(1.0), True),
    ({**_SPEC, "enableServiceLinks": 1}, {**_SPEC, "enableServiceLinks": True}, True),
    (_with(1), _with(1, first="memory"), True),
    (_with(1), _with("1"), False),
    (_with(1), _with(1, image="app:2"), False),
])
def test_values_equal_only_to_python_are_other_templates(one: dict[str, Any], other: dict[str, Any],
                                                         python_equal: bool) -> None:
    """``==`` takes 1, 1.0 and True for one value, and ignores the order of keys; the template key
    does not: a parser could tell them apart."""
    a, b = _pod(one), _pod(other)
    assert (a.raw["spec"] == b.raw["spec"]) is python_equal
    assert template_key(a) != template_key(b)
    assert template_cache(a) is not template_cache(b)


def test_namespace_and_labels_are_part_of_the_template() -> None:
    a = _pod(_SPEC)
    assert template_cache(a) is not template_cache(_pod(_SPEC, labels={"app": "b"}))
    assert template_cache(a) is not template_cache(_pod(_SPEC, namespace="other"))


def test_a_manifest_marshal_cannot_write_keeps_its_values_on_the_pod() -> None:
    spec = {**_SPEC, "x-when": datetime.datetime(2024, 1, 1)}
    a, b = _pod(spec, "a"), _pod(spec, "b")
    assert template_key(a) == b""
    assert template_cache(a) is a.cached()
    assert template_cache(b) is b.cached()
    assert template_cache(a) is a.cached()  # asked again


def test_per_pod_keeps_values_on_each_pod() -> None:
    a, b = _pod(_SPEC, "a"), _pod(_SPEC, "b")
    with per_pod():
        assert not template.SHARED
        assert template_cache(a) is a.cached()
        assert template_cache(b) is b.cached()
    assert template.SHARED


# ---------------------------------------------------------------- random pods

_quantity = st.one_of(st.sampled_from(["100m", "250m", "1", "2", "512Mi", "1Gi", "0"]),
                      st.integers(0, 4), st.sampled_from([0.5, 1.0, 2.0]))
_names = st.sampled_from(["a", "b", "c"])


@st.composite
def _specs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, str]]:
    labels = draw(st.dictionaries(_names, _names, max_size=2))

    def container(i: int, init: bool) -> dict[str, Any]:
        c: dict[str, Any] = {"name": f"{'i' if init else 'c'}{i}", "image": draw(st.sampled_from(
            ["app:1", "app", "docker.io/library/app:1", "registry.example.com/x:2"]))}
        reqs = draw(st.dictionaries(st.sampled_from(["cpu", "memory", "example.com/gpu", "ephemeral-storage"]),
                                    _quantity, max_size=3))
        if reqs:
            c["resources"] = {"requests": reqs}
        if draw(st.booleans()):
            c["ports"] = [{"containerPort": 80, "hostPort": draw(st.sampled_from([0, 80, 8080])),
                           "protocol": draw(st.sampled_from(["TCP", "UDP"]))}]
        if init and draw(st.booleans()):
            c["restartPolicy"] = "Always"
        return c

    spec: dict[str, Any] = {"containers": [container(i, False) for i in range(draw(st.integers(1, 2)))]}
    if draw(st.booleans()):
        spec["initContainers"] = [container(0, True)]
    if draw(st.booleans()):
        spec["overhead"] = {"cpu": draw(_quantity)}
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": draw(_names), "operator": draw(st.sampled_from(["Exists", "Equal"])),
                                "value": draw(_names), "effect": draw(st.sampled_from(
                                    ["", "NoSchedule", "PreferNoSchedule"]))}
                               for _ in range(draw(st.integers(1, 2)))]
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(st.dictionaries(_names, _names, min_size=1, max_size=2))
    aff: dict[str, Any] = {}
    if draw(st.booleans()):
        aff["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": draw(_names), "operator": "In", "values": [draw(_names)]}]}]}
    if draw(st.booleans()):
        aff["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": draw(st.integers(1, 100)), "preference": {"matchExpressions": [
                {"key": draw(_names), "operator": "Exists"}]}}]
    if aff:
        spec["affinity"] = {"nodeAffinity": aff}
    if draw(st.booleans()):
        spec["topologySpreadConstraints"] = [{
            "maxSkew": draw(st.sampled_from([1, 2])), "topologyKey": draw(st.sampled_from(
                ["kubernetes.io/hostname", "topology.kubernetes.io/zone"])),
            "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
            "labelSelector": {"matchLabels": draw(st.dictionaries(_names, _names, max_size=1))},
            **({"matchLabelKeys": draw(st.lists(_names, max_size=2, unique=True))} if draw(st.booleans()) else {}),
            **({"nodeAffinityPolicy": "Ignore"} if draw(st.booleans()) else {})}]
    return spec, labels


def _derived(pod: Pod, fit: Fit, unschedulable: NodeUnschedulable) -> dict[str, Any]:
    """Every value ``template_cache`` keeps, in a comparable form."""
    spec = ResourceSpec.of((("cpu", 1), ("memory", 1), ("example.com/gpu", 1)))
    fs = fit._pre_filter_state(pod)
    req = get_required_node_affinity(pod)
    pref = _pod_preferred(pod)
    out: dict[str, Any] = {
        "rowkey": requests_row_key(pod),
        "fit.row_local_key": fit.row_local_key(pod),
        "fit.state": (dict(fs.requests), fs.checks, fs.core_only),
        "requests.nz": pod_request_list(pod, spec, False),
        "requests.real": pod_request_list(pod, spec, True),
        "requests.containers": pod_request_list(pod, spec, True, pod_level=False),
        "tolerations": _pod_tolerations_key(pod),
        "unschedulable": unschedulable.row_local_key(pod),
        "ports": _wanted_ports(pod),
        "images": _pod_images(pod),
        "node_affinity.required": req.key,
        "node_affinity.preferred": pref.key if pref is not None else None,
        "spread.affinity": _required_affinity(pod).key,
    }
    cs = CycleState()
    TaintToleration({}, None).pre_score(cs, pod, None)  # type: ignore[arg-type]
    tt = cs.get(PRE_SCORE_STATE_KEY)
    out["tainttoleration.prescore"] = (tuple(t.key_tuple() for t in tt.tolerations), tt.key)
    for action in ("DoNotSchedule", "ScheduleAnyway"):
        out["spread." + action] = [(c.max_skew, c.topology_key, c.selector.key, c.min_domains, c.honor_affinity,
                                    c.honor_taints) for c in _pod_constraints(pod, action)]
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_specs(), min_size=1, max_size=3), st.lists(st.integers(0, 2), min_size=2, max_size=8))
def test_shared_values_are_the_per_pod_values(templates: list[tuple[dict[str, Any], dict[str, str]]],
                                              picks: list[int]) -> None:
    """Pods made from a few random templates (one after the other, in any order): every value
    read through the shared dict equals what the pod works out alone."""
    fit = Fit({}, None)
    unschedulable = NodeUnschedulable({}, None)
    for i, k in enumerate(picks):
        spec, labels = templates[k % len(templates)]
        shared = _derived(_pod(spec, f"p{i}", labels), fit, unschedulable)
        with per_pod():
            alone = _derived(_pod(spec, f"q{i}", labels), fit, unschedulable)
        assert shared == alone


# ---------------------------------------------------------------- whole simulations


@pytest.mark.parametrize("seed", range(6))
def test_shared_and_per_pod_values_place_pods_identically(seed: int) -> None:
    """Random clusters whose pods are replicas of a few templates, through whole simulations:
    the same nodes and messages with the values shared by template and kept per pod."""
    rng = random.Random(3000 + seed)
    nodes, pods = _cluster(rng)
    cordon = nodes[0]["metadata"]["name"] if rng.random() < 0.5 else None
    shared = _outcomes(True, nodes, pods, seed, cordon)
    with per_pod():
        alone = _outcomes(True, nodes, pods, seed, cordon)
    assert shared == alone
    assert any(node is not None for node, _ in shared.values())


def test_replicas_share_their_requests_key() -> None:
    """What the sharing is for: the second replica finds the first one's values."""
    a = make_pod("a", requests={"cpu": "1"}, labels={"app": "x"}, uid="u1")
    b = make_pod("b", requests={"cpu": "1"}, labels={"app": "x"}, uid="u2")
    assert requests_row_key(a) is requests_row_key(b)
    with per_pod():
        c = make_pod("c", requests={"cpu": "1"}, labels={"app": "x"}, uid="u3")
        assert requests_row_key(c) is not requests_row_key(a)
        assert requests_row_key(c) == requests_row_key(a)


# ---------------------------------------------------------------- known_template_cache (cycle6)


def test_known_template_cache_only_after_the_key_is_made() -> None:
    """A pod never through ``template_cache`` keeps its values on itself (no key is made for
    it); once the key is made, the pod and its shallow copies (the assumed pod) find the
    template's dict."""
    a = _pod(_SPEC, "a")
    assert known_template_cache(a) is a.cached()
    assert "template.cache" not in a.cached()
    t = template_cache(a)
    assert known_template_cache(a) is t
    assert known_template_cache(pod_with_node(a, "n1")) is t
    b = _pod(_SPEC, "b")
    assert known_template_cache(b) is b.cached()
    with per_pod():
        assert known_template_cache(a) is a.cached()


_pod_term = st.fixed_dictionaries({
    "topologyKey": st.sampled_from(["kubernetes.io/hostname", "topology.kubernetes.io/zone"]),
    "labelSelector": st.fixed_dictionaries({"matchLabels": st.dictionaries(_names, _names, max_size=2)}),
})


@st.composite
def _affinity_specs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, str], str]:
    labels = draw(st.dictionaries(_names, _names, max_size=2))
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "app:1"}]}
    aff: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        a: dict[str, Any] = {}
        if draw(st.booleans()):
            a["requiredDuringSchedulingIgnoredDuringExecution"] = draw(st.lists(_pod_term, min_size=1, max_size=2))
        if draw(st.booleans()):
            a["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": draw(st.integers(1, 100)), "podAffinityTerm": t}
                for t in draw(st.lists(_pod_term, min_size=1, max_size=2))]
        if a:
            aff[kind] = a
    if aff:
        spec["affinity"] = aff
    return spec, labels, draw(st.sampled_from(["default", "other"]))


def _keys(pod: Pod) -> Any:
    sig, terms = pod_keys(pod)
    return sig, [(key, kind, term.key(), weight, sign) for key, kind, term, weight, sign in terms], (
        labels_frozenset(pod))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_affinity_specs(), min_size=1, max_size=3), st.lists(st.integers(0, 2), min_size=2, max_size=8),
       st.lists(st.booleans(), min_size=8, max_size=8))
def test_pod_keys_shared_are_the_per_pod_keys(templates: list[tuple[dict[str, Any], dict[str, str], str]],
                                              picks: list[int], scheduled: list[bool]) -> None:
    """InterPodAffinity's keys and the label frozenset of pods of a few random templates, some
    through a scheduling cycle's ``template_cache`` (then read of the assumed copy), some not:
    equal to what each pod works out alone."""
    for i, k in enumerate(picks):
        spec, labels, ns = templates[k % len(templates)]
        pod = _pod(spec, f"p{i}", labels, ns)
        if scheduled[i]:
            template_cache(pod)
            pod = pod_with_node(pod, "n1")
        shared = _keys(pod)
        with per_pod():
            alone = _keys(_pod(spec, f"q{i}", labels, ns))
        assert shared == alone
        assert shared[0] == (ns, frozenset(labels.items()))


# ---------------------------------------------------------------- the key by spec object (tkey8)


def _value_key(pod: Pod) -> bytes:
    """What a template is: the namespace, labels and spec as values (with their types and key
    order), written without back-references or interning flags."""
    return marshal.dumps((pod.namespace, pod.labels, pod.raw.get("spec")), 2)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_specs(), min_size=1, max_size=3),
       st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["shared", "copy", "own"]),
                          st.sampled_from(["default", "other"])), min_size=2, max_size=10))
def test_spec_object_key_groups_pods_as_the_marshal_key(templates: list[tuple[dict[str, Any], dict[str, str]]],
                                                        picks: list[tuple[int, str, str]]) -> None:
    """Pods of a few random templates whose specs are one shared dict, equal dicts made apart
    (deep copies) or distinct specs: two pods have one ``spec_template_key`` exactly when their
    namespaces, labels and specs are equal values; pods the reference (``template_key``) puts
    together are together. (The reference can part equal values: ``marshal`` version 4 writes
    whether a string is interned and whether an object is referenced more than once, so a
    shared spec dict and an equal copy of it give other bytes.) ``template_cache`` finds one
    dict for the pods of one key, either way."""
    template._SPEC_BYTES.clear()
    template._TEMPLATES.clear()
    shared_specs = [copy.deepcopy(spec) for spec, _ in templates]
    pods = []
    for i, (k, how, ns) in enumerate(picks):
        spec, labels = templates[k % len(templates)]
        if how == "own":
            spec = {**spec, "priority": i}
        pod = _pod(spec, f"p{i}", labels, ns)
        if how == "shared":
            pod.raw["spec"] = shared_specs[k % len(templates)]
        pods.append(pod)
    for a in pods:
        for b in pods:
            same_value = _value_key(a) == _value_key(b)
            assert (spec_template_key(a) == spec_template_key(b)) is same_value
            if template_key(a) == template_key(b):
                assert same_value
    # and template_cache finds one dict per template either way
    for by_object in (True, False):
        template._TEMPLATES.clear()
        template.SPEC_BY_OBJECT = by_object
        try:
            fresh = [_pod(p.raw["spec"], p.name, p.labels, p.namespace) for p in pods]
            for p, q in zip(pods, fresh, strict=True):
                q.raw["spec"] = p.raw["spec"]  # the very spec object again
            for a in fresh:
                for b in fresh:
                    same = _value_key(a) == _value_key(b) if by_object else template_key(a) == template_key(b)
                    assert (template_cache(a) is template_cache(b)) is same
        finally:
            template.SPEC_BY_OBJECT = True


def test_interned_label_keys_are_one_template_by_spec_object() -> None:
    """The reference's ``marshal`` (version 4) writes whether a string is interned: equal labels
    whose keys were interned for one pod and not for another (a parser's strings, one pod's
    read again) are two templates to it, one by the spec object's key; the values are equal."""
    key = "".join(["st", "yle"])  # equal to "style", not interned
    a = _pod(_SPEC, "a", {"style": "x"})
    b = _pod(_SPEC, "b", {key: "x"})
    b.raw["spec"] = a.raw["spec"]
    assert a.labels == b.labels
    assert template_key(a) != template_key(b)
    assert spec_template_key(a) == spec_template_key(b)
    assert template_cache(a) is template_cache(b)


def test_spec_bytes_are_kept_by_the_spec_object() -> None:
    """The spec's bytes are written once per spec object; an entry for the same id but another
    object (an id reused after its object died) is not taken."""
    template._SPEC_BYTES.clear()
    a = _pod(_SPEC, "a")
    key = spec_template_key(a)
    assert key is not None
    assert template._SPEC_BYTES[id(a.raw["spec"])][0] is a.raw["spec"]
    b = _pod(_with(2), "b")
    template._SPEC_BYTES.put(id(b.raw["spec"]), ({"other": 1}, key[1]))  # a stale entry at b's spec's id
    kb = spec_template_key(b)
    assert kb is not None and kb[1] == marshal.dumps(b.raw["spec"], 2) != key[1]
    assert spec_template_key(_pod({**_SPEC, "x-when": datetime.datetime(2024, 1, 1)})) is None


@pytest.mark.parametrize("seed", range(3))
def test_spec_object_and_marshal_keys_place_pods_identically(seed: int) -> None:
    """Whole simulations: the same nodes and messages with the key by spec object and with the
    reference's key."""
    rng = random.Random(3100 + seed)
    nodes, pods = _cluster(rng)
    template._TEMPLATES.clear()
    by_object = _outcomes(True, nodes, pods, seed, None)
    template._TEMPLATES.clear()
    template.SPEC_BY_OBJECT = False
    try:
        reference = _outcomes(True, nodes, pods, seed, None)
    finally:
        template.SPEC_BY_OBJECT = True
    assert by_object == reference
    assert any(node is not None for node, _ in by_object.values())
