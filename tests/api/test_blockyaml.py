"""``ksched.api.blockyaml``: on every text it accepts, exactly the documents PyYAML's safe loader
gives (the loader's reference path); every other text (anything outside its subset, anything
PyYAML refuses) is declined and read by PyYAML as before, errors and all."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.api.test_loader_fast import _CASES, _safe, _tree

from ksched.api import loader
from ksched.api.blockyaml import read_documents


def _agrees(text: str) -> bool:
    """Whether the reader accepted ``text``; when it did, its documents are PyYAML's (same
    types, values and key order: the reprs are equal) and the plain loader's."""
    got = read_documents(text, {})
    if got is None:
        return False
    assert repr(got) == repr(_safe(text)), text
    assert repr(got) == repr(list(loader._yaml_documents(text))), text
    return True


_ACCEPTED = [
    "",
    "# only a comment\n",
    "a: 1\n",
    "---\na: x\n---\nb: y\n",
    "a:\n  b: c\n  d:\n  - 1\n  - x: y\n    z: '2'\n  e: \"q\"\n",
    "a:\n- b\n- c\nd: e\n",
    "k: v\nk: w\n",  # a repeated key: the last value, at the first key's place
    "m: {}\nl: []\ns: ''\n",
    "v:\n  yes1: yes\n  on1: on\n  oct: 0644\n  under: 1_000\n  tilde: ~\n  t: 2001-12-14\n  f: 1.5e3\n",
    "image: registry.example.com/app:1.0\nurl: http://x.y/z\nsp: a b c\nneg: -1\n",
    "a:\n\n  b: c   \n" .replace("   \n", "\n"),  # blank lines are skipped
    "a:\n  # a comment\n  b: c\n",
]

_DECLINED = [
    "a: &x 1\nb: *x\n",  # anchors, aliases
    "a: !!str 1\n",  # tags
    "a: [1, 2]\n",  # flow collections with content
    "a: |\n  text\n",  # block scalars
    "a: b\n  c\n",  # a multi-line plain scalar
    "a:\nb: c\n",  # "key:" and nothing (null)
    "- a\n- b\n",  # a top-level sequence
    "a: b # comment\n",
    "a: 'it''s'\n",
    "a: \"tab\\t\"\n",
    "a:\tb\n",
    "a: b\r\n",
    "yes: b\n",  # a key PyYAML reads as a boolean
    "1: b\n",
    "<<: {a: 1}\n",
    "a: b\n...\n",
    "%YAML 1.1\n---\na: b\n",
    "--- a\n",
    "---\n---\na: b\n",  # an empty document
    "a: b\n---\n",
    "a: b: c\n",  # PyYAML: mapping values are not allowed here
    "a:\n  b: c\n d: e\n",  # a column no collection has
    "a:\n    b: c\n  d: e\n",
    "a: =\n",  # PyYAML's value tag: no constructor
    "a: b \n",  # trailing space
    "a: x\u00e9\n",  # not ASCII
]


@pytest.mark.parametrize("text", _ACCEPTED)
def test_accepted_texts_give_pyyamls_documents(text: str) -> None:
    assert _agrees(text)


@pytest.mark.parametrize("text", _DECLINED)
def test_texts_outside_the_subset_are_declined(text: str) -> None:
    assert read_documents(text, {}) is None


@pytest.mark.parametrize("text", _CASES)
def test_the_loaders_table_agrees_or_is_declined(text: str) -> None:
    _agrees(text)


def test_generated_manifests_are_read_here_and_equal_pyyamls(tmp_path: Path) -> None:
    from ksched.sim.realistic import generate

    generate(tmp_path, 6, 25, 5, 0)
    files = sorted(tmp_path.iterdir())
    assert files
    for f in files:
        assert _agrees(f.read_text()), f


def test_the_loader_reads_declined_files_with_pyyaml_and_keeps_its_errors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "a.yaml"
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n---\nkind: [\n")
    g = tmp_path / "b.yaml"
    g.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n")
    for block in (True, False):  # the reference: PyYAML reads every file
        monkeypatch.setattr(loader, "BLOCK_YAML", block)
        res = loader.LoadResult()
        manifests = loader.read_manifests([str(f), str(g)], res)
        assert [m.raw for m in manifests] == [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": n}}
                                              for n in ("a", "b")]
        assert [str(e) for e in res.errors] == [
            f"{f}[1]: invalid YAML: line 7, column 1: did not find expected node content"]


@settings(max_examples=200, deadline=None)
@given(st.lists(_tree, min_size=1, max_size=3), st.integers(2, 4))
def test_random_documents_agree_or_are_declined(docs: list[Any], indent: int) -> None:
    text = yaml.safe_dump_all(docs, default_flow_style=False, indent=indent)
    _agrees(text)


_SIMPLE_KEY = st.sampled_from(["a", "b", "app", "k.x/y-z", "name"])
_SIMPLE_VALUE = st.one_of(st.sampled_from(["x", "1", "yes", "0644", "1_000", "~", "null", "2001-01-01", "-1",
                                           "1.5", ".inf", "a b", "a:b", "registry/x:1.0"]),
                          st.text(alphabet="ab1 ", min_size=1, max_size=4))
_simple_tree = st.recursive(_SIMPLE_VALUE, lambda c: st.one_of(
    st.lists(c, min_size=1, max_size=3), st.dictionaries(_SIMPLE_KEY, c, min_size=1, max_size=3)), max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(_SIMPLE_KEY, _simple_tree, min_size=1, max_size=4), min_size=1, max_size=3))
def test_simple_manifests_are_accepted_and_agree(docs: list[Any]) -> None:
    """Block mappings of plain words, numbers and strings PyYAML dumps unquoted or in single
    quotes: in the subset but for sequences of sequences (the reader is not declining its way
    to agreement)."""
    text = yaml.safe_dump_all(docs, default_flow_style=False)
    accepted = _agrees(text)
    # Outside the subset: trailing spaces, '' inside quotes, nested sequences, and a run of spaces
    # inside a plain value ("a: 1  1", which the reader declines rather than fold).
    assert accepted or any(m in text for m in (" \n", "''", "- - ")) or re.search(r"\S  ", text), text


_GOOD_VALUES = ["", "", "", "x", "'q'", '"d"', "{}", "[]", "yes", "0644", "1_000", "~", "2001-01-01", "-1", "a b",
                "x:y"]
_BAD_VALUES = ["a: b", "a #c", "&a x", "*a", "!t x", "|", ">", "[1]", "x:", "=", "'it''s'", '"a\\tb"', "{a: 1}",
               "- x", "a  b", "x\t", "x "]
_LINE = st.one_of(
    st.sampled_from(["---", "...", "# c", "", "  ", "%YAML 1.1", "--- x"]),
    st.builds(lambda ind, dash, key, sep, value: " " * ind + dash + key + sep + value,
              st.sampled_from([0, 0, 2, 2, 4, 1, 3]), st.sampled_from(["", "", "- ", "- - "]),
              st.sampled_from(["a", "b", "c.d/e", "a", "b", "", "on", "1", "<<", "? a", "'q'", "a b"]),
              st.sampled_from([": ", ": ", ":", ":", " :", ""]),
              st.one_of(st.sampled_from(_GOOD_VALUES), st.sampled_from(_GOOD_VALUES), st.sampled_from(_BAD_VALUES))))


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINE, max_size=12))
def test_junk_is_declined_or_agrees(lines: list[str]) -> None:
    _agrees("\n".join(lines) + "\n")
    _agrees("\n".join(lines))


@st.composite
def near_misses(draw: st.DrawFn) -> str:
    """A text in the subset with a few lines changed: re-indented, replaced by a line of
    ``_LINE``, or with a value of ``_GOOD_VALUES``/``_BAD_VALUES`` appended."""
    docs = draw(st.lists(st.dictionaries(_SIMPLE_KEY, _simple_tree, min_size=1, max_size=4), min_size=1, max_size=2))
    lines = yaml.safe_dump_all(docs, default_flow_style=False).split("\n")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.integers(0, 3))
        if how == 0:
            lines[i] = " " * draw(st.integers(0, 5)) + lines[i].lstrip(" ")
        elif how == 1:
            lines[i] = draw(_LINE)
        elif how == 2:
            lines[i] += draw(st.sampled_from(_GOOD_VALUES + _BAD_VALUES))
        else:
            lines.insert(i, draw(_LINE))
    return "\n".join(lines)


@settings(max_examples=400, deadline=None)
@given(near_misses())
def test_near_misses_are_declined_or_agree(text: str) -> None:
    _agrees(text)
