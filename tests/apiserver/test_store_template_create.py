"""The store's create shortcuts of node11 against their references:

* ``Store.template_create``: a new pod's kind without the scheme's lookup, and a loaded pod
  stored with the admitted spec and the parse of an earlier pod of its namespace and labels
  (``share_admitted_specs``) not asked ``validate_admission`` again. Random loaded pods of a few
  templates between writes of the objects admission reads, with LimitRanges whose maximum and
  required limits refuse some templates (``validate_admission``'s LimitRanger), give the same
  stored manifests, parses, refusals and resourceVersions with the flag on and off.
* ``Store.nodes_as_given``: a Node validated as given (the loader's) is not validated again;
  random valid nodes with a namespace, a uid, a resourceVersion, deletion fields or a
  generateName (which the create drops or replaces) are stored or refused as before.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.api.test_pod_with_status import structure
from tests.apiserver.test_store_admitted_specs import _WRITES, _pod_raw, templates
from tests.sim.test_single_validation import cluster

from ksched.api.errors import ApiError
from ksched.api.pod import Pod
from ksched.api.validation import validate
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock

# LimitRanges that refuse (validate_admission), created and deleted between pods.
_STRICT: list[tuple[str, dict[str, Any]]] = [
    ("create", {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "max", "namespace": "default"},
                "spec": {"limits": [{"type": "Container", "max": {"cpu": "300m"}}]}}),
    ("delete", {"kind": "LimitRange", "namespace": "default", "name": "max"}),
    ("create", {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "podmax", "namespace": "limited"},
                "spec": {"limits": [{"type": "Pod", "max": {"memory": "100Mi"}}]}}),
    ("delete", {"kind": "LimitRange", "namespace": "limited", "name": "podmax"}),
]
_ALL_WRITES = _WRITES + _STRICT

_pod_op = st.tuples(st.just("pod"), st.integers(0, 2), st.integers(0, 9),
                    st.sampled_from([None, None, "default", "limited"]),
                    st.sampled_from([None, None, {"app": "a"}, {"app": "b"}]), st.integers(0, 5).map(lambda i: i == 0))
_op = st.one_of(_pod_op, _pod_op, _pod_op, st.tuples(st.just("write"), st.integers(0, len(_ALL_WRITES) - 1)))


def _strict_cluster(on: bool) -> Store:
    s = cluster()
    s.template_create = on
    s.create(copy.deepcopy(_STRICT[0][1]))  # refusing from the start: such pods never become a template's first
    return s


def _apply(store: Store, op: tuple[Any, ...], tpls: list[dict[str, Any]]) -> Any:
    try:
        if op[0] == "write":
            verb, what = _ALL_WRITES[op[1]]
            if verb == "create":
                return store.create(copy.deepcopy(what)).raw
            store.delete(what["kind"], what["namespace"], what["name"])
            return "deleted"
        raw = _pod_raw(tpls[op[1] % len(tpls)], *op[2:])
        if validate(raw):
            return "invalid"
        got = store.create(Pod(raw), owned=True, validated=True)
    except ApiError as e:
        return (type(e).__name__, e.message)
    return json.dumps(got.raw), structure(got)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.lists(templates(), min_size=1, max_size=3), st.lists(_op, min_size=8, max_size=30))
def test_template_create_stores_and_refuses_what_the_reference_does(tpls: list[dict[str, Any]],
                                                                    ops: list[tuple[Any, ...]]) -> None:
    fast, plain = _strict_cluster(True), _strict_cluster(False)
    for op in ops:
        assert _apply(fast, op, tpls) == _apply(plain, op, tpls)
    assert [json.dumps(p.raw) for p in fast.items("Pod")] == [json.dumps(p.raw) for p in plain.items("Pod")]
    assert fast.resource_version == plain.resource_version


def _pod(name: str, overhead: bool) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}]}
    if overhead:
        spec["overhead"] = {"cpu": "1"}  # without a RuntimeClass: validate_admission refuses it
    return Pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec})


def test_a_refused_first_pod_never_lets_its_template_through() -> None:
    """Each pod of a template ``validate_admission`` refuses is refused (admission keeps its
    spec, but no pod is stored to share the parse with); one it admits is stored with the
    first one's spec and parse."""
    for on in (True, False):
        s = cluster()
        s.template_create = on
        for i in range(3):
            try:
                s.create(_pod(f"o{i}", True), owned=True, validated=True)
                raise AssertionError("admitted")
            except ApiError as e:
                assert "Pod Overhead set without corresponding RuntimeClass" in e.message
        a = s.create(_pod("a", False), owned=True, validated=True)
        b = s.create(_pod("b", False), owned=True, validated=True)
        assert b.raw["spec"] is a.raw["spec"] and b.containers is a.containers


def test_the_pod_kind_needs_no_lookup() -> None:
    s = Store(VirtualClock())
    got = s.create({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    assert type(got) is Pod and got.raw["apiVersion"] == "v1"


_NAMES = st.from_regex(r"[a-z]([-a-z0-9]{0,8}[a-z0-9])?", fullmatch=True)


@st.composite
def nodes(draw: st.DrawFn) -> dict[str, Any]:
    """Valid nodes with what a create drops or replaces, and a few other fields."""
    md: dict[str, Any] = {"name": draw(_NAMES)}
    if draw(st.booleans()):
        md["labels"] = draw(st.dictionaries(st.sampled_from(["zone", "kubernetes.io/hostname", "pool", "bad key"]),
                                            _NAMES, max_size=3))
    for f, v in (("namespace", st.sampled_from(["", "default", "Not-Valid", "kube-system"])),
                 ("uid", st.sampled_from(["u1", "", "not a uid"])),
                 ("resourceVersion", st.sampled_from(["5", "x", ""])),
                 ("deletionTimestamp", st.sampled_from(["2024-01-01T00:00:00Z", "bad"])),
                 ("deletionGracePeriodSeconds", st.sampled_from([0, 30, -1])),
                 ("generateName", st.sampled_from(["gen-", "Bad_"]))):
        if draw(st.integers(0, 3)) == 0:
            md[f] = draw(v)
    if draw(st.booleans()):
        md.pop("name")
        md.setdefault("generateName", "gen-")
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": md}
    if draw(st.booleans()):
        raw["spec"] = {"taints": [{"key": draw(_NAMES), "effect": draw(st.sampled_from(["NoSchedule", "Bad"]))}]}
    if draw(st.booleans()):
        raw["status"] = {"allocatable": {"cpu": draw(st.sampled_from(["4", "x"])), "pods": "110"}}
    return raw


def _outcome(store: Store, raw: dict[str, Any], existing: bool, validated: bool) -> Any:
    try:
        return json.dumps(store.create(copy.deepcopy(raw), owned=True, validated=validated, existing=existing).raw)
    except ApiError as e:
        return (type(e).__name__, e.message)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.lists(nodes(), min_size=1, max_size=6), st.booleans())
def test_a_node_validated_as_given_is_stored_or_refused_as_before(raws: list[dict[str, Any]], existing: bool) -> None:
    """What passed validation as given is handed over as validated (the loader's); the rest is
    not, and is refused with the same errors."""
    fast, plain = Store(VirtualClock()), Store(VirtualClock())
    plain.nodes_as_given = False
    for raw in raws:
        validated = not validate(copy.deepcopy(raw))
        assert _outcome(fast, raw, existing, validated) == _outcome(plain, raw, existing, validated)
    assert [json.dumps(n.raw) for n in fast.items("Node")] == [json.dumps(n.raw) for n in plain.items("Node")]


def test_a_namespaced_looking_node_is_stored_without_its_namespace() -> None:
    raw = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "namespace": "", "uid": "x"}}
    assert validate(copy.deepcopy(raw)) == []
    for on in (True, False):
        s = Store(VirtualClock())
        s.nodes_as_given = on
        got = s.create(copy.deepcopy(raw), owned=True, validated=True)
        assert "namespace" not in got.raw["metadata"] and got.raw["metadata"]["uid"] != "x"
