"""The loader's fast path gives what the plain one gives: the YAML documents equal PyYAML's safe
loader's (every scalar type, aliases, merge keys, tags, broken documents); and on the way into
``ksched simulate`` a malformed object still gets its precise error (file, document index, List
item, field path)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api import loader
from ksched.cli.main import main

_CASES = [
    "a: 1\nb: [1, 2.5, true, null, ~, 0x1f, 0o17, 1_000, .inf, -.Inf, .nan, 2001-12-14t21:59:43.10-05:00]\n",
    "d: 2002-12-14\nyes: no\non: off\nY: n\n",
    "base: &b {x: 1}\nd:\n  <<: *b\n  y: 2\n",
    "&a [*a]\n",
    "? [1, 2]\n: x\n",
    "!!str 12\n---\nfoo\n---\n",
    "a: !!binary aGVsbG8=\n",
    "x: &s {k: v}\ny: *s\n",
    "1: a\n'2': b\n\"3\": c\n",
    "a: {b: c\n",
    "---\na: 1\n---\n- x\n---\nb: [\n",
    "a: !!set {x, y}\n",
    "o: !!omap [a: 1]\n",
    "k: v\nk: w\n",
    "a: !custom x\n",
    "s: 'quoted 1'\nt: \"true\"\nu: |\n  block\n  text\n",
]


def _safe(text: str) -> Any:
    try:
        return list(yaml.load_all(text, Loader=yaml.CSafeLoader))
    except yaml.YAMLError as e:
        return type(e).__name__


def _fast(text: str) -> Any:
    try:
        return list(loader._yaml_documents(text))
    except yaml.YAMLError as e:
        return type(e).__name__


@pytest.mark.parametrize("text", _CASES)
def test_fast_yaml_equals_the_safe_loader(text: str) -> None:
    assert repr(_fast(text)) == repr(_safe(text))


def test_aliases_are_the_same_object_as_the_safe_loader_gives() -> None:
    [d] = list(loader._yaml_documents("x: &s {k: v}\ny: *s\n"))
    assert d["x"] is d["y"]
    [r] = list(loader._yaml_documents("&a [*a]\n"))
    assert r[0] is r


_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8),
                    st.floats(allow_nan=False), st.sampled_from(["yes", "on", "0x1f", "1e3", "~", "2001-01-01", ""]))
_tree = st.recursive(_scalar, lambda c: st.one_of(st.lists(c, max_size=4),
                                                   st.dictionaries(st.text(max_size=6), c, max_size=4)),
                     max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(st.lists(_tree, min_size=1, max_size=3), st.sampled_from(["block", "flow"]))
def test_fast_yaml_equals_the_safe_loader_on_random_documents(docs: list[Any], style: str) -> None:
    text = yaml.safe_dump_all(docs, default_flow_style=(style == "flow"))
    assert repr(_fast(text)) == repr(_safe(text))


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=":-[]{}&*!|>'\"# \nab1", max_size=60))
def test_fast_yaml_equals_the_safe_loader_on_junk(text: str) -> None:
    assert repr(_fast(text)) == repr(_safe(text))


_GOOD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ok", "namespace": "default"},
         "spec": {"containers": [{"name": "c", "image": "i"}]}}


def _simulate(paths: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["simulate", "--format", "json", "-q", *paths])
    return code, err.getvalue()


def test_simulate_reports_a_malformed_object_with_file_index_and_field_path(tmp_path: Path) -> None:
    bad = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "lots"}}}]}}
    f = tmp_path / "pods.yaml"
    f.write_text(yaml.safe_dump_all([_GOOD, bad]))
    lst = tmp_path / "list.yaml"
    lst.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
        _GOOD | {"metadata": {"name": "ok2"}}, {**bad, "metadata": {"name": "bad2"}, "spec": {"containers": []}}]}))
    code, err = _simulate([str(f), str(lst)])
    assert code != 0
    assert f'{f}[1]: Pod bad: spec.containers[0].resources.requests.cpu: invalid quantity "lots"' in err, err
    assert f"{lst}[0]: Pod bad2: items[1].spec.containers: Required value" in err, err
    assert "nothing was simulated" in err


def test_simulate_validates_each_pod_once_in_the_loader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation runs where its errors are reported best (the loader: file, index, path); the
    store, handed validated manifests, validates a pod again only where admission may have made
    it invalid (tests/sim/test_single_validation.py), which these pods' admission cannot; nothing
    else validates a pod on the way in."""
    from ksched.api import scheme as scheme_mod
    from ksched.api import validation

    calls: list[str] = []
    orig = validation.validate

    def counting(raw: Any) -> Any:
        if isinstance(raw, dict) and raw.get("kind") == "Pod":
            calls.append(raw["metadata"]["name"])
        return orig(raw)

    monkeypatch.setattr(scheme_mod, "validate", counting)
    f = tmp_path / "pods.yaml"
    f.write_text(yaml.safe_dump_all([_GOOD | {"metadata": {"name": f"p{i}"}} for i in range(3)]))
    code, err = _simulate([str(f)])
    assert code == 0, err
    created = sorted(c for c in calls)
    assert created == ["p0", "p1", "p2"], calls
