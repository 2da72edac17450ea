"""The validation's memo of valid values (``ksched.api.validation.MEMO_VALID``) against the
reference (every value checked in full): the same errors, in the same order, with the same
paths, for valid and invalid pods, whatever was validated before."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api import resource_validation, validation
from ksched.api.errors import FieldError
from ksched.api.validation import _Unkeyable, _value_key, validate


def _clear() -> None:
    resource_validation._VALID_CLAIM_SPECS.clear()
    validation._VALID_LABELS.clear()
    validation._VALID_LABEL_ITEMS.clear()
    validation._VALID_NAMESPACES.clear()
    validation._VALID_POD_SPECS.clear()


def reference(raw: Any) -> list[FieldError]:
    saved = validation.MEMO_VALID
    validation.MEMO_VALID = False
    try:
        return validate(raw)
    finally:
        validation.MEMO_VALID = saved


def memoized(raw: Any) -> list[FieldError]:
    assert validation.MEMO_VALID
    return validate(raw)


def _sel(app: str) -> dict[str, Any]:
    return {"matchLabels": {"app": app}}


# Pods of the shapes generated directories have (SimulateRealistic's five placements) and a
# few more fields each, all valid.
_PLACEMENTS: list[dict[str, Any]] = [
    {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                    "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": _sel("a")}]},
    {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": _sel("a"),
                                    "minDomains": 2}]},
    {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"labelSelector": _sel("a"), "topologyKey": "kubernetes.io/hostname"}}]}}},
    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["blue"]}]}]}}}},
    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]}]}}}},
    {"nodeSelector": {"pool": "blue", "example.com/tier": "web"}},
    {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoExecute",
                      "tolerationSeconds": 30}]},
    {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}], "priority": 10},
    {"schedulingGates": [{"name": "example.com/wait"}], "terminationGracePeriodSeconds": 0},
    {"preemptionPolicy": "Never", "nodeName": "node-1", "overhead": {"cpu": "10m"}},
    {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]},
    {},
]


_BARE = len(_PLACEMENTS) - 1


def _pod(i: int, placement: int, ns: str = "team-1", cpu: str = "250m") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.example.com/a:1.0",
                                            "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}
    spec.update(copy.deepcopy(_PLACEMENTS[placement]))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"a-{i:05d}", "namespace": ns, "labels": {"app": "a", "style": "s"}},
            "spec": spec}


def _paths(x: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _paths(v, (*at, k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _paths(v, (*at, i))


# Values a near miss puts somewhere: of every decoder type, equal under == but of other types
# (1, 1.0, True), valid in one place and not in another.
_ODD = [1, 0, -1, 101, True, False, 1.0, 2.5, -0.0, math.inf, None, "", "1", "x", "Bad_Name", "a" * 64,
        "a/b/c", "-x", "250m", "1.2.3", "Exists", "In", "DoNotSchedule", "hugepages-2Mi", "example.com/dev",
        [], ["a"], [1], {}, {"a": "b"}, {"a": 1}, {1: "a"}, {"name": "main", "image": "i"}]


def _at(x: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        x = x[k]
    return x


def _twins(x: Any) -> list[Any]:
    """Values equal to ``x`` under == (or nearly) but of another type."""
    if type(x) is int:
        return [float(x), str(x), *([bool(x)] if x in (0, 1) else [])]
    if type(x) is str:
        return [x.upper(), x + "-", [x], x.encode()]
    return []


@st.composite
def near_misses(draw: st.DrawFn) -> dict[str, Any]:
    raw = _pod(draw(st.integers(0, 3)), draw(st.integers(0, len(_PLACEMENTS) - 1)),
               ns=draw(st.sampled_from(["team-1", "team-2", "Bad_NS"])), cpu=draw(st.sampled_from(["250m", "1", "-1"])))
    for _ in range(draw(st.integers(0, 2))):
        paths = [p for p in _paths(raw) if p]
        numbers = [p for p in paths if type(_at(raw, p)) is int]
        at = draw(st.sampled_from(numbers if numbers and draw(st.booleans()) else paths))
        parent = _at(raw, at[:-1])
        twins = _twins(parent[at[-1]])
        if twins and draw(st.booleans()):
            parent[at[-1]] = draw(st.sampled_from(twins))
        elif draw(st.integers(0, 4)) == 0 and isinstance(parent, dict):
            del parent[at[-1]]
        else:
            parent[at[-1]] = copy.deepcopy(draw(st.sampled_from(_ODD)))
    return raw


@settings(max_examples=300, deadline=None)
@given(st.lists(near_misses(), min_size=1, max_size=8), st.lists(st.integers(0, 7), max_size=8))
def test_the_memo_gives_the_references_errors_for_any_sequence_of_pods(pods: list[dict[str, Any]],
                                                                         again: list[int]) -> None:
    """Valid and invalid pods in any order (some again: the memo's hits): each one's errors are
    the reference's, and validation changes nothing in the manifest."""
    _clear()
    seq = pods + [pods[i % len(pods)] for i in again]
    for raw in seq:
        before = copy.deepcopy(raw)
        want = reference(raw)
        assert memoized(raw) == want
        assert memoized(copy.deepcopy(raw)) == want
        assert raw == before


@settings(max_examples=200, deadline=None)
@given(near_misses())
def test_a_near_miss_of_a_remembered_pod_keeps_its_errors(raw: dict[str, Any]) -> None:
    """Every valid shape is remembered first; the near miss (one value changed, of any type)
    still gets the reference's errors."""
    _clear()
    for p in range(len(_PLACEMENTS)):
        for ns in ("team-1", "team-2"):
            for cpu in ("250m", "1"):
                assert memoized(_pod(0, p, ns, cpu)) == []
    assert memoized(raw) == reference(raw)


@pytest.mark.parametrize(("valid", "invalid"), [
    ({"maxSkew": 1}, {"maxSkew": True}),
    ({"maxSkew": 1}, {"maxSkew": 1.0}),
    ({"maxSkew": 1}, {"maxSkew": "x1"}),
    ({"minDomains": 2}, {"minDomains": 2.0}),
    ({"minDomains": 2}, {"minDomains": False}),
])
def test_values_equal_under_eq_but_of_another_type_are_not_taken_for_valid(valid: dict[str, Any],
                                                                          invalid: dict[str, Any]) -> None:
    _clear()
    good = _pod(0, 1)
    good["spec"]["topologySpreadConstraints"][0].update(valid)
    assert memoized(good) == []
    bad = _pod(1, 1)
    bad["spec"]["topologySpreadConstraints"][0].update(invalid)
    errs = memoized(bad)
    assert errs and errs == reference(bad)


def test_labels_and_namespaces_remembered_valid_still_refuse_their_misuses() -> None:
    _clear()
    assert memoized(_pod(0, _BARE)) == []
    # The same labels with a value of another type; the same namespace on a cluster-scoped kind.
    bad = _pod(1, _BARE)
    bad["metadata"]["labels"] = {"app": "a", "style": 1}
    assert [str(e) for e in memoized(bad)] == ['metadata.labels[style]: Invalid value: 1: label values must be strings']
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "namespace": "team-1"}}
    assert [str(e) for e in memoized(node)] == ["metadata.namespace: Forbidden: not allowed on this type"]
    # An unhashable label value: checked (and refused) in full.
    bad["metadata"]["labels"] = {"app": ["a"]}
    assert memoized(bad) == reference(bad) != []


def test_an_equal_spec_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo is used: a pod whose spec equals a valid one skips `_pod_spec`, and one that
    differs, or was invalid, does not."""
    _clear()
    calls: list[Any] = []
    full = validation._pod_spec

    def spy(v: Any, sp: Any, spec: Any) -> None:
        calls.append(spec)
        full(v, sp, spec)

    monkeypatch.setattr(validation, "_pod_spec", spy)
    assert memoized(_pod(0, 0)) == []
    assert memoized(_pod(1, 0)) == []
    assert len(calls) == 1
    assert memoized(_pod(2, 1)) == []
    assert len(calls) == 2
    bad = _pod(3, 0, cpu="-1")
    assert memoized(bad) != [] and memoized(bad) != []
    assert len(calls) == 4
    monkeypatch.setattr(validation, "MEMO_VALID", False)
    assert validate(_pod(4, 0)) == []
    assert len(calls) == 5


def test_the_memo_stays_bounded() -> None:
    _clear()
    for i in range(validation._MEMO_MAX + 10):
        raw = _pod(i, _BARE)
        raw["spec"]["priority"] = i
        assert memoized(raw) == []
    assert 0 < len(validation._VALID_POD_SPECS) <= validation._MEMO_MAX


def test_value_keys_tell_apart_what_validation_tells_apart() -> None:
    values = [1, True, 1.0, "1", None, 0, False, 0.0, -0.0, "", [], {}, [1], ["1"], {"a": 1}, {"a": "1"},
              {1: "a"}, {"1": "a"}, {"a": 1, "b": 2}, {"b": 2, "a": 1}, [[1]], [{"a": 1}], (1,), [(1,)], b"1",
              {"a": [1, {"b": 2.5}]}, {"a": [1, {"b": 2.5, "c": None}]}]
    keys = [_value_key(x) for x in values]
    assert len(set(keys)) == len(values)
    assert _value_key({"a": [1, {"b": 2.5}]}) == _value_key({"a": [1, {"b": 2.5}]})
    shared = "x"
    assert _value_key({"a": shared, "b": shared}) == _value_key({"a": "x", "b": "".join(["x"])})


class _Str(str):
    pass


@pytest.mark.parametrize("other", [object(), _Str("a"), math])
def test_other_types_have_no_key(other: Any) -> None:
    with pytest.raises(_Unkeyable):
        _value_key({"a": [other]})
    _clear()
    raw = _pod(0, _BARE)
    raw["spec"]["nodeSelector"] = {"a": other}
    assert memoized(raw) == reference(raw)
    assert not validation._VALID_POD_SPECS  # (a subclass of str is a valid label value: checked in full)


def _claims_pod(i: int, claim: str = "gpu") -> dict[str, Any]:
    raw = _pod(i, _BARE - 1)
    raw["spec"]["containers"][0]["resources"]["claims"] = [{"name": claim}]
    return raw


def test_the_claims_validator_remembers_valid_specs_too(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear()
    calls: list[Any] = []
    full = resource_validation._pod_claims_full

    def spy(v: Any, spec: Any) -> None:
        calls.append(spec)
        full(v, spec)

    monkeypatch.setattr(resource_validation, "_pod_claims_full", spy)
    assert memoized(_claims_pod(0)) == [] and memoized(_claims_pod(1)) == []
    assert len(calls) == 1
    bad = _claims_pod(2, claim="other")
    assert [str(e) for e in memoized(bad)] == ['spec.containers[0].resources.claims[0]: Not found: "other"']
    assert memoized(bad) == reference(bad)


def test_a_spec_changed_after_its_validation_is_not_taken_for_the_one_remembered() -> None:
    """The key the pod's validation computed is for the spec as it was: the same object,
    changed so that it has no key (a tuple) and invalid claims, is checked in full."""
    _clear()
    raw = _claims_pod(0)
    assert memoized(raw) == []
    raw["spec"]["containers"][0]["resources"]["claims"] = [{"name": "other"}]
    raw["spec"]["nodeSelector"] = {"a": ("x",)}
    assert memoized(raw) == reference(raw) != []
    assert validation.pod_spec_key(raw["spec"]) is None


_LABEL_KEYS = st.sampled_from(["app", "kubernetes.io/hostname", "pool", "Bad Key", "a/b/c", "x" * 64, "-k"])
_LABEL_VALUES = st.one_of(st.sampled_from(["x", "node-1", "", "-bad", "a" * 64, "zone-a"]),
                          st.text(alphabet="ab-.1", max_size=4), st.sampled_from([5, None, True]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(_LABEL_KEYS, _LABEL_VALUES, max_size=5), min_size=1, max_size=12),
       st.booleans())
def test_label_maps_checked_item_by_item_give_the_references_errors(maps: list[dict[str, Any]],
                                                                    cold: bool) -> None:
    """Label maps (of nodes: the same items but one) validated one after the other, each item
    remembered valid on its own: the same errors, in order, as checking every map in full."""
    if cold:
        _clear()
    for labels in maps:
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": labels}}
        assert memoized(copy.deepcopy(node)) == reference(node)
    for labels in maps:  # again, every valid item now remembered
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": labels}}
        assert memoized(copy.deepcopy(node)) == reference(node)
