"""``ksched.api.validation.FAST_METADATA`` (metadata known valid without building field paths)
against the reference (every metadata checked in full): the same errors, in the same order,
with the same paths, for random metadata of namespaced and cluster-scoped kinds, whatever the
memos hold (cold, or warmed by earlier validations)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api import validation
from ksched.api.errors import FieldError
from ksched.api.validation import validate


def _clear() -> None:
    validation._VALID_LABELS.clear()
    validation._VALID_LABEL_ITEMS.clear()
    validation._VALID_NAMESPACES.clear()


def reference(raw: Any) -> list[FieldError]:
    saved = validation.FAST_METADATA
    validation.FAST_METADATA = False
    try:
        return validate(raw)
    finally:
        validation.FAST_METADATA = saved


def fast(raw: Any) -> list[FieldError]:
    assert validation.FAST_METADATA
    return validate(raw)


def _show(errs: list[FieldError]) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in errs]


_NAMES = st.one_of(
    st.sampled_from(["a", "a", "ok-1", "ok-2", "app-0001-00001", "a.b", "a..b", "-a", "a-", "A", "a_b", "a.", ".a", "a\n", "", "1",
                     "x" * 253, "x" * 254, "a.-b", "a-.b", "é"]),
    st.text(alphabet="ab-.9Z\n_", max_size=8), st.none(), st.integers(0, 3), st.just(["a"]))
_NAMESPACES = st.one_of(st.sampled_from(["team-1", "team-1", "default", "", "Bad", "a" * 64, "a.b", "-x"]), st.none(),
                        st.integers(0, 2), st.just(True))
_LABEL_KEYS = st.sampled_from(["app", "style", "example.com/tier", "Bad Key", "", "a/b/c", "x" * 64])
_LABEL_VALUES = st.one_of(st.sampled_from(["a", "app-0001", "", "-bad", "x" * 64, "ok.v"]), st.integers(0, 2),
                          st.none(), st.just(["l"]))
_LABELS = st.one_of(st.none(), st.just({"app": "a"}), st.dictionaries(_LABEL_KEYS, _LABEL_VALUES, max_size=3), st.just([]),
                    st.just("x"))
_ANNOTATIONS = st.one_of(st.none(), st.just({}), st.dictionaries(st.sampled_from(["a", "b/c"]),
                                                                   st.one_of(st.text(max_size=3), st.integers()),
                                                                   max_size=2), st.just("x"))


@st.composite
def metadata(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from([None, "x", [], {}]))
    md: dict[str, Any] = {}
    for field, values in (("name", _NAMES), ("namespace", _NAMESPACES), ("labels", _LABELS),
                          ("annotations", _ANNOTATIONS), ("generateName", st.sampled_from(["g-", ""]))):
        if draw(st.booleans()):
            md[field] = draw(values)
    return md


_KINDS = [("v1", "Pod"), ("v1", "ConfigMap"), ("v1", "Node"), ("v1", "Namespace"), ("scheduling.k8s.io/v1",
                                                                                    "PriorityClass")]


def _manifest(kind: tuple[str, str], md: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"apiVersion": kind[0], "kind": kind[1]}
    if md is not None or kind[1] == "ConfigMap":
        raw["metadata"] = md
    if kind[1] == "Pod":
        raw["spec"] = {"containers": [{"name": "main", "image": "x"}]}
    if kind[1] == "PriorityClass":
        raw["value"] = 1
    return raw


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_KINDS), metadata()), min_size=1, max_size=6), st.booleans())
def test_random_metadata_gives_the_references_errors(objs: list[tuple[tuple[str, str], Any]], cold: bool) -> None:
    if cold:
        _clear()
    else:  # (what the memos hold after a pod of the common shape)
        fast(_manifest(("v1", "Pod"), {"name": "a", "namespace": "team-1", "labels": {"app": "a"}}))
    for kind, md in objs:
        raw = _manifest(kind, md)
        want = _show(reference(raw))
        assert _show(fast(raw)) == want, raw
        assert _show(fast(raw)) == want, raw  # with whatever it remembered now


@pytest.mark.parametrize("name", ["a\n", "a..b", "x" * 254, "A"])
def test_a_bad_name_with_known_namespace_and_labels_is_reported(name: str) -> None:
    good = {"name": "ok", "namespace": "team-1", "labels": {"app": "a"}}
    assert not fast(_manifest(("v1", "Pod"), good))
    raw = _manifest(("v1", "Pod"), {**good, "name": name})
    assert _show(fast(raw)) == _show(reference(raw))


def test_known_metadata_takes_the_fast_path() -> None:
    md = {"name": "a-1", "namespace": "team-1", "labels": {"app": "a"}}
    assert not fast(_manifest(("v1", "Pod"), md))  # (remembers the namespace and labels)
    assert validation._metadata_valid(_manifest(("v1", "Pod"), md), True, "subdomain")
    assert not validation._metadata_valid(_manifest(("v1", "Pod"), {**md, "annotations": {"a": "b"}}),
                                          True, "subdomain")


@pytest.mark.parametrize("kind", [("v1", "Node"), ("v1", "Namespace"), ("scheduling.k8s.io/v1", "PriorityClass")])
def test_a_known_namespace_on_a_cluster_scoped_kind_is_forbidden(kind: tuple[str, str]) -> None:
    assert not fast(_manifest(("v1", "Pod"), {"name": "a", "namespace": "team-1"}))
    raw = _manifest(kind, {"name": "n", "namespace": "team-1"})
    assert _show(fast(raw)) == _show(reference(raw)) != []
