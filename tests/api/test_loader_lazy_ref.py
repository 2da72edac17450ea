"""``ksched.api.loader.LAZY_POD_REF`` (a pod's reference made only for its errors) against the
reference (every object's made first): the same objects and the same errors (file, index, item,
reference, field path, message) for random valid and malformed pods, alone or in a List."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api import loader
from ksched.api.loader import LoadResult, Manifest, build_objects


def _build(manifests: list[Manifest], lazy: bool) -> tuple[list[Any], list[Any]]:
    saved = loader.LAZY_POD_REF
    loader.LAZY_POD_REF = lazy
    try:
        res = build_objects(copy.deepcopy(manifests), LoadResult(), unknown_kinds="skip")
    finally:
        loader.LAZY_POD_REF = saved
    return [repr((type(o).__name__, o.raw)) for o in res.objects], [repr(e) for e in res.errors]


_BAD = st.sampled_from([
    ("spec", "containers", "x"),  # not a list
    ("spec", "containers", []),  # required
    ("spec", "priority", "high"),  # not an int
    ("spec", "nodeSelector", {"a": 1}),
    ("spec", "tolerations", [{"operator": "Bogus"}]),
    ("metadata", "name", "Bad_Name"),
    ("metadata", "name", None),
    ("metadata", "namespace", "Bad NS"),
    ("metadata", "labels", {"a": ["x"]}),
    ("spec", "affinity", {"nodeAffinity": "x"}),
    ("spec", "volumes", [{"name": "v", "persistentVolumeClaim": {}}]),
])


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": draw(st.sampled_from(["Pod", "Pod", "Pod", "ConfigMap"])),
                           "metadata": {"name": draw(st.sampled_from(["a", "b-1", "c"])),
                                        "namespace": draw(st.sampled_from(["team-1", "default"]))},
                           "spec": {"containers": [{"name": "main", "image": "x"}]}}
    if raw["kind"] == "ConfigMap":
        del raw["spec"]
        raw["data"] = draw(st.sampled_from([{"a": "b"}, {"a": 1}]))
    for where, field, value in draw(st.lists(_BAD, max_size=2)):
        if where in raw:
            raw[where][field] = value
    if draw(st.booleans()):
        del raw["metadata"]["namespace"]
    return raw


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(pods(), st.one_of(st.none(), st.integers(0, 3))), min_size=1, max_size=5))
def test_objects_and_errors_are_the_references(docs: list[tuple[dict[str, Any], int | None]]) -> None:
    manifests = [Manifest(raw, "f.yaml", i, item) for i, (raw, item) in enumerate(docs)]
    assert _build(manifests, True) == _build(manifests, False)


def test_a_malformed_pods_error_names_it() -> None:
    raw = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
           "spec": {"containers": "x"}}
    objs, errs = _build([Manifest(raw, "f.yaml", 3, 1)], True)
    assert not objs and errs and all("Pod ns/p" in e and "items[1].spec.containers" in e for e in errs)
