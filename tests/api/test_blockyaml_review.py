"""Review of ``ksched.api.blockyaml`` (issue 17): texts on which the reader gave something else
than PyYAML's safe loader (other documents, or documents where PyYAML raises), each now declined
(read by PyYAML, errors included); the reader's shared state; differential fuzzing."""

from __future__ import annotations

import datetime
import math
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ksched.api import loader
from ksched.api.blockyaml import read_documents


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same types, dict keys in the same order (nan equals nan)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(type(x) is type(y) for x, y in zip(a, b)) and all(
            _same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, datetime.datetime):
        return a == b and a.utcoffset() == b.utcoffset()
    return bool(a == b)


def _pyyaml(text: str) -> Any:
    """PyYAML's documents (the pure and the C safe loader, and the loader's reference path agree),
    or the exception it raises."""
    try:
        docs = list(yaml.load_all(text, Loader=yaml.SafeLoader))
    except Exception as e:
        return e
    assert _same(docs, list(yaml.load_all(text, Loader=yaml.CSafeLoader)))
    assert _same(docs, list(loader._yaml_documents(text)))
    return docs


def _agrees(text: str) -> str:
    """The reader's documents are PyYAML's, or the reader declines: never other documents,
    documents where PyYAML raises, nor an exception of its own."""
    got = read_documents(text, {})
    if got is None:
        return "declined"
    want = _pyyaml(text)
    assert not isinstance(want, Exception), (text, want)
    assert _same(got, want), (text, got, want)
    ids = []
    stack = list(got)
    while stack:
        x = stack.pop()
        if isinstance(x, (dict, list)):
            ids.append(id(x))
            stack.extend(x.values() if isinstance(x, dict) else x)
    assert len(ids) == len(set(ids)), text  # no dict or list shared within or across documents
    return "accepted"


# NEL, LS and PS end a comment for PyYAML (what follows is content); non-printable characters
# are refused anywhere.
_COMMENTS = [
    "x: 1\n# c\x85y: 2\n",
    "x: 1\n# c\u2028y: 2\n",
    "x: 1\n  # c\u2029y: 2\n",
    "x: 1\n# c\x00\n",
    "x: 1\n# c\x0b\n",
    "x: 1\n# c\x0c\n",
    "x: 1\n# c\x7f\n",
    "x: 1\n# c\x9f\n",
    "x: 1\n# c\ufffe\n",
    "#\u2028\xa0\n",
]


@pytest.mark.parametrize("text", _COMMENTS)
def test_comments_with_line_breaks_or_unprintable_characters_are_declined(text: str) -> None:
    assert _agrees(text) == "declined"


def test_comments_of_printable_characters_are_read() -> None:
    assert _agrees("x: 1\n# café ✓ \xa0 \U0001f600 'q' \"d\" : - # \n  #\ny: 2\n") == "accepted"


# PyYAML's simple keys are at most 1024 characters: a longer one is an error ("mapping values are
# not allowed here"), wherever the key is.
_LONG_KEY_FORMS = ["{k}: 1\n", "a:\n  {k}: 1\n", "a:\n- {k}: 1\n", "{k}:\n  a: 1\n", "a:\n- b: 1\n  {k}:\n  - 2\n"]
_LONG_KEYS = [f.format(k="k" * 1025) for f in _LONG_KEY_FORMS]


@pytest.mark.parametrize("form", _LONG_KEY_FORMS)
def test_keys_longer_than_pyyamls_simple_keys_are_declined(form: str) -> None:
    assert _agrees(form.format(k="k" * 1024)) == "accepted"
    assert _agrees(form.format(k="k" * 1025)) == "declined"


# Plain scalars the safe constructor cannot build (a ValueError): PyYAML composes a whole document
# before building it, so a syntax error later in it is what it reports (a LoadError); the reader
# raised the ValueError at once (out of the loader).
_UNBUILDABLE = ["a: 0x_\nb: ,\n", "a: 2001-02-30\nb: [\n", "a:\n- 0b_\n- - x\n", "a: 0x_\n", "a: 1\n---\nb: 2001-13-01\n"]


@pytest.mark.parametrize("text", _UNBUILDABLE)
def test_scalars_the_safe_constructor_cannot_build_are_declined(text: str) -> None:
    assert read_documents(text, {}) is None


def _nested(depth: int) -> str:
    """Mappings and sequences ``depth`` levels deep."""
    lines, ind = [], 0
    for i in range(depth):
        if i % 3 == 2:
            col = ind - 1 if i % 2 else ind  # a sequence of mappings, at its key's column or deeper
            lines.append(" " * col + "- k:")
            ind = col + 3
        else:
            lines.append(" " * ind + "k:")
            ind += 1
    return "\n".join([*lines, " " * ind + "v: 1"]) + "\n"


def test_documents_nested_deeper_than_pyyaml_builds_are_declined() -> None:
    """PyYAML does not read a document nested this deep: up to 6.0.3 it builds documents
    recursively and raises RecursionError (out of the loader); 6.0.4's libyaml refuses it first
    ("exceeded maximum nesting depth"). The reader, a loop, gave the documents."""
    with pytest.raises((RecursionError, yaml.YAMLError)):
        list(loader._yaml_documents(_nested(1500)))
    assert read_documents(_nested(1500), {}) is None
    assert read_documents(_nested(150), {}) is None
    assert _agrees(_nested(60)) == "accepted"


def _loaded(text: str, monkeypatch: pytest.MonkeyPatch, block: bool) -> Any:
    monkeypatch.setattr(loader, "BLOCK_YAML", block)
    try:
        found, errors = loader.parse_documents(text, "f.yaml")
    except Exception as e:
        return f"raises {type(e).__name__}: {e}"
    return repr([(m.raw, m.index, m.item) for m in found]), [str(e) for e in errors]


@pytest.mark.parametrize("text", _COMMENTS + _LONG_KEYS + _UNBUILDABLE)
def test_the_loader_gives_the_same_documents_and_errors_either_way(text: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert _loaded(text, monkeypatch, True) == _loaded(text, monkeypatch, False)


def test_the_shared_resolver_keeps_nothing_per_text() -> None:
    """The module's one SafeLoader built every number, boolean and timestamp with
    ``construct_object``, whose ``constructed_objects`` kept each node and value for ever: three
    entries per file below, a leak in a long-running process."""
    from ksched.api import blockyaml

    before = len(blockyaml._resolver.constructed_objects)
    for i in range(200):
        assert read_documents(f"a: {i}\nb: yes\nc: 2001-01-{i % 28 + 1:02d}\nd: x{i}\n", {}) is not None
    assert len(blockyaml._resolver.constructed_objects) == before
    assert not blockyaml._resolver.recursive_objects


def test_concurrent_reads_give_each_text_its_documents() -> None:
    """Threads reading at once (the shared resolver and tag cache) get what one thread gets."""
    import sys
    import threading

    texts = [f"a: {i}\nb: yes\nc: 2001-01-{i % 28 + 1:02d}\nd:\n- x{i % 7}\n- k: 0x{i:x}\n  l: {i}.5\n" for i in range(300)]
    want = [repr(read_documents(t, {})) for t in texts]
    bad: list[int] = []

    def work(k: int) -> None:
        for j in range(len(texts)):
            i = (j * 7 + k * 13) % len(texts)
            if repr(read_documents(texts[i], {})) != want[i]:
                bad.append(i)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not bad


# Differential fuzzing: lines near the subset (every kind of line, key and value PyYAML reads
# specially, odd characters, other line breaks), and nested documents of the subset with a few
# lines changed; the reader agrees with PyYAML or declines.
_KEYS = ["a", "b", "a", "k.x/y-z", "yes", "no", "on", "Off", "y", "n", "null", "Null", "NULL", "0o17", "017", "0x1f",
         "1_000", ".inf", ".nan", "2001-01-01", "._", "...", "-a", "a-", "_", "1.5", "1e3", "08", "0b1", "True", "k" * 1025,
         "é", "a#b", "a:b", "?a", "'q'", '"q"', "@a", "`a", "<<", "=", "~", "a b"]
_VALUES = ["", "x", "yes", "no", "On", "OFF", "y", "n", "~", "null", "Null", "NULL", "0o17", "017", "0x1f", "1_000", "1:20",
           "-1:20.5", ".inf", "-.inf", ".nan", ".NaN", "+1", "-1", "0", "-0", "00", "0.", ".5", "1e3", "1.0e+3",
           "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5", "2001-1-1 1:2:3", "2001-02-30",
           "0x_", "._", "=", "a=b", "<<", "a:b", "a: b", "a:", "a #b", "a#b", "a -b", "- a", "-", "? a", "a,b", "[]", "{}",
           "[ ]", "[a]", "{a: 1}", "@a", "a@b", "`a", "é", "'q'", "'it''s'", "'a #b'", "' a '", "''", '""', '"a\\tb"',
           '"q"', "&a x", "*a", "!!str x", "|", ">", "%a", "a  b", "(a)", "$a", "~a", "...", "---", "-.", "."]
_CHARS = "\x00\x0b\x0c\x7f\x85\x9f\xa0\u2028\u2029\ufeff\ufffe\t\r é#:-?,[]{}@`'\"!&*|>%="
_JUNK_LINE = st.one_of(
    st.sampled_from(["---", "--- ", "---x", "--- a", "...", "", " ", "   ", "# c", "  # c", "#", "%YAML 1.1", "? a",
                     ": b", "-", "- ", "- - a"]),
    st.builds(lambda ind, c: " " * ind + "#" + c, st.integers(0, 4), st.text(alphabet=_CHARS + "ab", max_size=4)),
    st.builds(lambda ind, dash, key, sep, value, tail: " " * ind + dash + key + sep + value + tail,
              st.sampled_from([0, 0, 0, 2, 2, 4, 1, 3]), st.sampled_from(["", "", "", "- ", "-  ", "- - "]),
              st.sampled_from(_KEYS), st.sampled_from([": ", ": ", ":", ":", " :", ":  ", ""]),
              st.one_of(st.sampled_from(_VALUES), st.text(alphabet=_CHARS + "ab1", max_size=3)),
              st.sampled_from(["", "", "", "", " ", " # c", "\t", "#"])))


@st.composite
def _junk(draw: st.DrawFn) -> str:
    sep = draw(st.sampled_from(["\n"] * 8 + ["\r\n", "\r", "\x85", "\u2028"]))
    text = sep.join(draw(st.lists(_JUNK_LINE, max_size=10)))
    if draw(st.booleans()):
        text += sep
    return ("\ufeff" if draw(st.integers(0, 20)) == 0 else "") + text


def _block(draw: st.DrawFn, depth: int, ind: int, out: list[str]) -> None:
    """A block mapping of the subset at column ``ind``, with nested mappings (more indented) and
    sequences (at the key's column or deeper) of scalars and mappings."""
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(["a", "b", "c", "a", "k.x", "name", "y"]))
        kind = draw(st.integers(0, 4)) if depth < 4 else 0
        if kind <= 1:
            out.append(" " * ind + f"{key}: " + draw(st.sampled_from([*_VALUES[1:56], "x", "1", "a b", "'q'", '"d"'])))
            continue
        out.append(" " * ind + f"{key}:")
        if kind == 2:
            _block(draw, depth + 1, ind + draw(st.sampled_from([1, 2, 2, 4])), out)
            continue
        col = ind + draw(st.sampled_from([0, 0, 2, 1]))
        for _ in range(draw(st.integers(1, 3))):
            if draw(st.booleans()):
                out.append(" " * col + "- " + draw(st.sampled_from(["x", "1", "yes", "~", "a b", "{}", "[]"])))
            else:
                sub: list[str] = []
                _block(draw, depth + 1, 0, sub)
                out.append(" " * col + "- " + sub[0])
                out.extend(" " * (col + 2) + s for s in sub[1:])


@st.composite
def _near_subset(draw: st.DrawFn) -> str:
    lines: list[str] = []
    for i in range(draw(st.integers(1, 3))):
        if i or draw(st.booleans()):
            lines.append("---")
        _block(draw, 0, 0, lines)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))):
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.integers(0, 4))
        if how == 0:
            lines[i] = " " * draw(st.integers(0, 6)) + lines[i].lstrip(" ")
        elif how == 1:
            lines.insert(i, draw(_JUNK_LINE))
        elif how == 2:
            lines[i] += draw(st.sampled_from([" ", ":", " #c", "\t", "x", ": y", "\x85y: 1", "\u2028- z"]))
        elif how == 3:
            lines.insert(i, " " * draw(st.integers(0, 6)) + "#" + draw(st.text(alphabet=_CHARS + "a", max_size=3)))
        elif len(lines) > 1:
            del lines[i]
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n"]))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_junk())
def test_lines_near_the_subset_agree_or_are_declined(text: str) -> None:
    _agrees(text)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(_near_subset())
def test_nested_documents_near_the_subset_agree_or_are_declined(text: str) -> None:
    _agrees(text)
