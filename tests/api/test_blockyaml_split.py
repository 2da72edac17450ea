"""``ksched.api.blockyaml.SPLIT_DOCUMENTS``: a text's distinct lines read once each, then its
lines looked up in one pass and cut at its ``---`` lines, against the reference (the text read
line by line, ``_documents``): the same documents, or the same decline, for every text (with
blank lines, comments, ``---`` lines anywhere, empty documents, junk lines) and whatever was
read before; with ``LINE_PREFIXES`` (a "key: value" line read from an earlier line of the same
beginning) and without."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.api.test_blockyaml import _ACCEPTED, _DECLINED, _LINE, _agrees, near_misses
from tests.api.test_blockyaml_plans import one_shape, one_shape_near_misses

from ksched.api import blockyaml
from ksched.api.blockyaml import read_documents


def reference(text: str) -> list[Any] | None:
    saved = blockyaml.SPLIT_DOCUMENTS
    blockyaml.SPLIT_DOCUMENTS = False
    try:
        return read_documents(text, {})
    finally:
        blockyaml.SPLIT_DOCUMENTS = saved


def split(text: str, prefixes: bool = True) -> list[Any] | None:
    assert blockyaml.SPLIT_DOCUMENTS and blockyaml.LINE_PREFIXES
    blockyaml.LINE_PREFIXES = prefixes
    try:
        return read_documents(text, {})
    finally:
        blockyaml.LINE_PREFIXES = True


def _same(text: str) -> None:
    want = repr(reference(text))
    assert repr(split(text)) == want, text
    assert repr(split(text, prefixes=False)) == want, text
    _agrees(text)


_EDGES = [
    "", "\n", "\n\n", "---", "---\n", "---\n---\n", "a: b", "a: b\n\n", "\na: b\n", "---\na: b",
    "a: b\n---", "a: b\n---\n", "a: b\n---\n\n", "a: b\n---\n# c\n", "# c\n---\na: b\n", "---\n# c\n---\na: b\n",
    "a: b\n---\n---\nc: d\n", "a: b\n---\nc: d\n---\ne: f\n", "  \na: b\n", "a: b\n  \n", "---\n\n",
    "a: b\n---\na: b\n---\na: c\n", "a: b\n...\n", "a: b\n--- \n", "a: b\n---x\n",
]


@pytest.mark.parametrize("text", _ACCEPTED + _DECLINED + _EDGES)
def test_fixed_texts_are_the_references(text: str) -> None:
    _same(text)


@st.composite
def with_junk(draw: st.DrawFn, base: st.SearchStrategy[str]) -> str:
    """A text with blank, comment, ``---`` and other lines of ``_LINE`` inserted, or its
    final line end dropped."""
    lines = draw(base).split("\n")
    for _ in range(draw(st.integers(0, 3))):
        lines.insert(draw(st.integers(0, len(lines))), draw(_LINE))
    text = "\n".join(lines)
    return text.rstrip("\n") if draw(st.booleans()) else text


@settings(max_examples=400, deadline=None)
@given(st.one_of(one_shape(), one_shape_near_misses(), near_misses(), with_junk(one_shape()),
                 with_junk(near_misses())), st.booleans())
def test_random_texts_are_the_references(text: str, cold: bool) -> None:
    if cold:
        blockyaml._plans.clear()
    _same(text)
    _same(text)  # every document's plan known now


@settings(max_examples=100, deadline=None)
@given(st.lists(_LINE, max_size=12))
def test_junk_is_the_references(lines: list[str]) -> None:
    _same("\n".join(lines))


_VALUES = st.one_of(st.sampled_from(["x", "app-0001-00002", "1", "yes", "~", "null", "2001-01-01", "-1", ".inf",
                                     "'q'", '"d"', "{}", "[]", "a b", "a:b", "a: b", "a ", "a #c", "'it''s'",
                                     "{a: 1}", "[1]", "&x a", "*x", "!!str 1", "|", ">", "", "0x_", "é", "a\tb"]),
                    st.text(alphabet="ab1 :'\"#-.{}[]", min_size=0, max_size=5))


@st.composite
def same_beginnings(draw: st.DrawFn) -> str:
    """Documents whose "key: value" lines repeat with other values (the pods of one app)."""
    lines = ["a: x", "  name: x", "- k: x", "  - k: x", "m:", "  n: x", "l:", "- x"]
    docs = []
    for _ in range(draw(st.integers(1, 4))):
        doc = ["kind: Pod", "metadata:", "  name: " + draw(_VALUES), "  namespace: t", "spec:",
               "  c:", "  - name: " + draw(_VALUES), "    image: " + draw(_VALUES)]
        if draw(st.booleans()):
            doc.append(draw(st.sampled_from(lines)).replace("x", draw(_VALUES)))
        docs.append("\n".join(doc))
    return "\n---\n".join(docs) + "\n"


@settings(max_examples=400, deadline=None)
@given(same_beginnings())
def test_lines_of_known_beginnings_are_the_references(text: str) -> None:
    _same(text)
