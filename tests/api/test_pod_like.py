"""``Pod.like`` and the loader's shared parse of pods with equal specs (``loader.SHARE_POD_PARSE``)
against the reference (every pod parsed in full): the same objects, attribute by attribute,
and the same errors, with file, document and field path."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.api.test_pod_with_status import SPECS, STATUSES, structure

from ksched.api import loader
from ksched.api.loader import LoadResult, Manifest, build_objects
from ksched.api.pod import Pod

_VOLUMES = st.sampled_from([
    [], [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}],
])
_LABEL_KEYS = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone", "matchLabelKeys": ["version"]}]}}
_SPREAD_KEYS = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": "a"}}, "matchLabelKeys": ["version"]}]


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    spec = copy.deepcopy(draw(SPECS))
    vols = draw(_VOLUMES)
    if vols:
        spec["volumes"] = copy.deepcopy(vols)
    if draw(st.booleans()):
        spec["affinity"] = copy.deepcopy(_LABEL_KEYS)
    if draw(st.booleans()):
        spec["topologySpreadConstraints"] = copy.deepcopy(_SPREAD_KEYS)
    if draw(st.booleans()):
        spec["nodeSelector"] = {"pool": draw(st.sampled_from(["a", "b"]))}
    return spec


def manifest(name: str, spec: dict[str, Any], status: Any, ns: str | None, labels: dict[str, str] | None,
             ) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if ns is not None:
        md["namespace"] = ns
    if labels is not None:
        md["labels"] = labels
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": copy.deepcopy(spec)}
    if status is not None:
        raw["status"] = status
    return raw


# Statuses of every shape: valid ones, and ones validation does not check but parsing refuses.
_ANY_STATUS = st.one_of(st.none(), STATUSES, st.sampled_from([[], ["x"], "Running", 3, {"conditions": 3},
                                                               {"startTime": 5}]))
_LABELS = st.sampled_from([None, {}, {"app": "a"}, {"app": "a", "version": "1"}, {"app": "a", "version": "2"}])


def parse(raw: dict[str, Any]) -> Any:
    try:
        return structure(Pod(raw))
    except (ValueError, TypeError, AttributeError) as e:
        return type(e), str(e)


@settings(max_examples=200, deadline=None)
@given(specs(), _ANY_STATUS, _ANY_STATUS, st.sampled_from([None, "", "ns"]), _LABELS)
def test_like_is_a_full_parse(spec: dict[str, Any], status: Any, other_status: Any, ns: str | None,
                              labels: dict[str, str] | None) -> None:
    template_raw = manifest("first", spec, other_status if isinstance(other_status, dict) else None, ns, labels)
    template = Pod(template_raw)
    raw = manifest("second", spec, copy.deepcopy(status), ns, copy.deepcopy(labels))
    try:
        got: Any = template.like(raw)
    except (ValueError, TypeError, AttributeError) as e:
        got = type(e), str(e)
    else:
        assert got.raw is raw and got._cache is None
        assert got.containers is template.containers
        got = structure(got)
    assert got == parse(raw)
    assert structure(template) == structure(Pod(template_raw))  # the template is untouched


@st.composite
def directories(draw: st.DrawFn) -> list[Manifest]:
    """Pods of a few apps (each one spec), in some namespaces and with some labels, some with a
    status parsing refuses, some invalid."""
    apps = draw(st.lists(specs(), min_size=1, max_size=3))
    out = []
    for i in range(draw(st.integers(1, 12))):
        spec = apps[draw(st.integers(0, len(apps) - 1))]
        raw = manifest(f"p-{i}", spec, draw(_ANY_STATUS), draw(st.sampled_from([None, "ns", "other"])),
                       copy.deepcopy(draw(_LABELS)))
        if draw(st.integers(0, 5)) == 0:
            raw["spec"]["containers"][0]["name"] = "Bad_Name"
        out.append(Manifest(raw, "dir/pods.yaml", i))
    return out


def load(manifests: list[Manifest], share: bool) -> tuple[list[Any], list[str]]:
    saved = loader.SHARE_POD_PARSE
    loader.SHARE_POD_PARSE = share
    try:
        res = build_objects(copy.deepcopy(manifests), LoadResult())
    finally:
        loader.SHARE_POD_PARSE = saved
    return [structure(o) for o in res.objects], [str(e) for e in res.errors]


@settings(max_examples=150, deadline=None)
@given(directories())
def test_the_loader_builds_the_same_pods_and_errors_as_the_reference(manifests: list[Manifest]) -> None:
    assert load(manifests, True) == load(manifests, False)


def test_pods_of_one_app_share_their_parse_only_with_the_same_namespace_and_labels() -> None:
    spec = {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
            "affinity": copy.deepcopy(_LABEL_KEYS), "topologySpreadConstraints": copy.deepcopy(_SPREAD_KEYS)}
    raws = [manifest("a", spec, None, "ns", {"app": "a", "version": "1"}),
            manifest("b", spec, None, "ns", {"app": "a", "version": "1"}),
            manifest("c", spec, None, "ns", {"app": "a", "version": "2"}),
            manifest("d", spec, None, "other", {"app": "a", "version": "1"}),
            manifest("e", {**spec, "priority": 0}, None, "ns", {"app": "a", "version": "1"})]
    res = build_objects([Manifest(r, "f.yaml", i) for i, r in enumerate(raws)], LoadResult())
    assert not res.errors
    a, b, c, d, e = res.objects
    assert isinstance(a, Pod) and isinstance(b, Pod) and isinstance(c, Pod) and isinstance(d, Pod)
    assert isinstance(e, Pod)
    assert b.containers is a.containers and b.affinity is a.affinity
    assert b.topology_spread_constraints is a.topology_spread_constraints
    for other in (c, d, e):
        assert other.containers is not a.containers and other.affinity is not a.affinity
    # matchLabelKeys read the labels: c's selectors have version 2.
    assert c.affinity is not None and a.affinity is not None
    assert structure(c.affinity) != structure(a.affinity)
    for o, r in zip(res.objects, raws, strict=True):
        assert structure(o) == structure(Pod(r))


@pytest.mark.parametrize("status", [["x"], "Running", 3])
def test_a_status_parsing_refuses_keeps_its_error_when_the_spec_is_shared(status: Any) -> None:
    spec = {"containers": [{"name": "c", "image": "i"}]}
    ms = [Manifest(manifest("a", spec, None, "ns", None), "f.yaml", 0),
          Manifest(manifest("b", spec, status, "ns", None), "f.yaml", 1)]
    shared = load(ms, True)
    assert shared == load(ms, False)
    assert len(shared[0]) == 1 and len(shared[1]) == 1
    assert shared[1][0].startswith("f.yaml[1]: Pod ns/b: cannot parse: ")
