"""``ksched.api.blockyaml``'s plans: documents of one shape (the same lines but for their values)
are built by replaying what building the first one did (``blockyaml.PLANS``). Against the
reference (every document built line by line) and PyYAML: the same documents, or the same
refusal, whatever values the lines of a shape carry and whatever was read before."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.api.test_blockyaml import _LINE, _SIMPLE_KEY, _SIMPLE_VALUE, _agrees, _simple_tree

from ksched.api import blockyaml
from ksched.api.blockyaml import read_documents


def reference(text: str) -> list[Any] | None:
    saved = blockyaml.PLANS
    blockyaml.PLANS = False
    try:
        return read_documents(text, {})
    finally:
        blockyaml.PLANS = saved


def planned(text: str) -> list[Any] | None:
    assert blockyaml.PLANS
    return read_documents(text, {})


@st.composite
def revalued(draw: st.DrawFn, tree: Any) -> Any:
    """``tree`` with other values at its leaves (of any kind: a plain word, a number, a
    boolean, a null, a timestamp, {} or [] change the shape, others keep it)."""
    if isinstance(tree, dict):
        return {k: draw(revalued(v)) for k, v in tree.items()}
    if isinstance(tree, list):
        return [draw(revalued(v)) for v in tree]
    return draw(st.one_of(st.just(tree), _SIMPLE_VALUE, st.sampled_from([{}, [], True, 3, None])))


@st.composite
def one_shape(draw: st.DrawFn) -> str:
    """Several documents of one structure with their leaves' values drawn again."""
    tree = draw(st.dictionaries(_SIMPLE_KEY, _simple_tree, min_size=1, max_size=4))
    docs = [tree] + [draw(revalued(tree)) for _ in range(draw(st.integers(1, 4)))]
    return yaml.safe_dump_all(docs, default_flow_style=False)


@settings(max_examples=300, deadline=None)
@given(one_shape(), st.booleans())
def test_documents_of_one_shape_are_the_references(text: str, cold: bool) -> None:
    if cold:
        blockyaml._plans.clear()
    want = reference(text)
    assert repr(planned(text)) == repr(want)
    assert repr(planned(text)) == repr(want)  # every document's plan known now
    _agrees(text)


@st.composite
def one_shape_near_misses(draw: st.DrawFn) -> str:
    lines = draw(one_shape()).split("\n")
    for _ in range(draw(st.integers(1, 2))):
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.integers(0, 2))
        if how == 0:
            lines[i] = " " * draw(st.integers(0, 5)) + lines[i].lstrip(" ")
        elif how == 1:
            lines[i] = draw(_LINE)
        else:
            lines.insert(i, draw(_LINE))
    return "\n".join(lines)


@settings(max_examples=300, deadline=None)
@given(one_shape(), one_shape_near_misses())
def test_a_near_miss_after_its_shape_is_known_is_the_references(known: str, text: str) -> None:
    planned(known)
    assert repr(planned(text)) == repr(reference(text))
    _agrees(text)


def test_generated_manifests_replay_their_plans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ksched.sim.realistic import generate

    generate(tmp_path, 6, 50, 5, 0)
    blockyaml._plans.clear()
    replays: list[int] = []
    replay = blockyaml._replay

    def spy(plan: Any, doc: Any, strings: dict[str, str]) -> Any:
        replays.append(len(doc))
        return replay(plan, doc, strings)

    monkeypatch.setattr(blockyaml, "_replay", spy)
    docs = 0
    for f in sorted(tmp_path.iterdir()):
        text = f.read_text()
        got = planned(text)
        assert got is not None and repr(got) == repr(reference(text))
        docs += len(got)
    assert docs == 56
    assert len(replays) >= 45  # all but the first pod of each of 5 apps, the first node


def test_a_replayed_document_is_its_own() -> None:
    """Replays make new collections (nothing shared with the first document) and take each
    line's own value."""
    text = "a:\n  b: 1\n  c:\n  - x\n  - d: {}\n---\na:\n  b: 2\n  c:\n  - y\n  - d: {}\n"
    blockyaml._plans.clear()
    first, second = planned(text) or []
    assert second == {"a": {"b": 2, "c": ["y", {"d": {}}]}}
    assert first == {"a": {"b": 1, "c": ["x", {"d": {}}]}}
    assert second["a"] is not first["a"] and second["a"]["c"][1]["d"] is not first["a"]["c"][1]["d"]
    again = planned(text) or []
    assert again == [first, second] and again[0]["a"] is not first["a"]
    mutated = copy.deepcopy(again)
    mutated[0]["a"]["b"] = 5
    assert planned(text) == [first, second]


def _steps(text: str) -> list[Any] | None:
    saved = blockyaml.COMPILED_PLANS
    blockyaml.COMPILED_PLANS = False
    try:
        return read_documents(text, {})
    finally:
        blockyaml.COMPILED_PLANS = saved


@settings(max_examples=300, deadline=None)
@given(st.one_of(one_shape(), one_shape_near_misses()), one_shape(), st.booleans())
def test_compiled_plans_build_what_their_steps_build(text: str, known: str, cold: bool) -> None:
    """A plan compiled into a function (``COMPILED_PLANS``) builds the documents its steps
    interpreted one by one build (the reference), which are those of building every document
    line by line; each replayed document has collections of its own."""
    if cold:
        blockyaml._plans.clear()
        blockyaml._compiled.clear()
    else:
        planned(known)
    assert blockyaml.COMPILED_PLANS
    want = reference(text)
    got = planned(text)
    assert repr(got) == repr(_steps(text)) == repr(want)
    assert repr(planned(text)) == repr(want)  # compiled now, if replayed
    if got:
        again = planned(text) or []
        assert all(a is not b for a, b in zip(again, got, strict=True))


def test_a_replayed_plan_is_compiled_once() -> None:
    text = "a:\n  b: 1\n  c:\n  - x\n  - d: {}\n  - []\n---\na:\n  b: 2\n  c:\n  - y\n  - d: []\n  - {}\n"
    blockyaml._plans.clear()
    blockyaml._compiled.clear()
    first = planned(text)
    assert first == [{"a": {"b": 1, "c": ["x", {"d": {}}, []]}}, {"a": {"b": 2, "c": ["y", {"d": []}, {}]}}]
    assert len(blockyaml._compiled) == 1
    fns = {id(f) for _, f in blockyaml._compiled.values()}
    assert planned(text) == first and {id(f) for _, f in blockyaml._compiled.values()} == fns
