"""``ksched simulate --format json`` writes its report in pieces (``report.write_json``): the
same characters as ``print(json.dumps(report, indent=2))``, without the whole text in memory."""

from __future__ import annotations

import io
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.sim.realistic import generate, run_simulate_realistic
from ksched.sim.report import write_json

_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6)),
    lambda c: st.one_of(st.lists(c, max_size=5), st.dictionaries(st.text(max_size=5), c, max_size=5)),
    max_leaves=300)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=5), _json, max_size=6))
def test_write_json_is_print_of_dumps(report: dict[str, Any]) -> None:
    out = io.StringIO()
    n = write_json(report, out)
    assert out.getvalue() == json.dumps(report, indent=2, sort_keys=False) + "\n"
    assert n == len(out.getvalue())


def test_a_report_of_many_pieces_and_the_cli(tmp_path: Any, capsys: Any) -> None:
    from ksched.cli.main import main

    d = generate(tmp_path / "m", nodes=6, pods=60, apps=4)
    assert main(["simulate", "--format", "json", "-q", str(d)]) == 0
    printed = capsys.readouterr().out
    report = json.loads(printed)
    assert report["summary"]["pending"] == 0
    assert printed == json.dumps(report, indent=2, sort_keys=False) + "\n"
    big = {"pods": [report["pods"][0]] * 3000}  # more pieces than one write takes
    out = io.StringIO()
    write_json(big, out)
    assert out.getvalue() == json.dumps(big, indent=2) + "\n"
    res = run_simulate_realistic("small", nodes=6, pods=60, apps=4)
    assert res["report_bytes"] == len(printed) - 1


_ENTRY_KEYS = ["namespace", "name", "owner", "node", "phase", "reason", "message", "nominatedNode", "attempts"]


def test_pod_entries_are_plain_dicts_in_the_reports_key_order() -> None:
    """The pod entries are built as a class's attribute dicts (keys shared): each is a plain
    dict with the keys in the report's order, and the extra keys (the CPU and device managers'
    grants, the explanation) follow, as a dict literal would have them."""
    from ksched.sim.report import build_report
    from ksched.sim.simulation import Simulation

    sim = Simulation(explain=True)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", **extra},
             "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}}
            for i, (cpu, extra) in enumerate([("1", {}), ("9", {}),
                                              ("1", {"annotations": {"ksched.io/cpuset": "[1, 2]"}})])]
    assert sim.load([node, *pods]) == []
    report = build_report(sim, sim.run(), explain=True)
    entries = {e["name"]: e for e in report["pods"]}
    for e in entries.values():
        assert type(e) is dict
        extra = [k for k in e if k not in _ENTRY_KEYS]
        assert list(e)[:len(_ENTRY_KEYS)] == _ENTRY_KEYS and list(e) == _ENTRY_KEYS + extra
        literal = {k: e[k] for k in [*_ENTRY_KEYS, *extra]}
        assert json.dumps(e, indent=2) == json.dumps(literal, indent=2) and e == literal
    assert entries["p0"]["node"] == "n1" and entries["p1"]["node"] is None
    assert entries["p1"]["reason"] == "Unschedulable" and "explain" in entries["p1"]
    assert entries["p2"]["cpuset"] == [1, 2] and list(entries["p2"])[-2:] == ["cpuset", "explain"]


# Values of every kind ``json`` writes, and some it does not: floats of every class (NaN and the
# infinities), keys that are not strings, subclasses of the builtin types (left to ``json`` by
# the fast writer), tuples, and objects ``json`` refuses.
class _Str(str):
    pass


class _Int(int):
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6),
                     st.text(max_size=4).map(_Str), st.integers().map(_Int), st.just(object()))
_keys = st.one_of(st.text(max_size=5), st.integers(), st.floats(), st.booleans(), st.none(),
                  st.text(max_size=3).map(_Str))
_any = st.recursive(_scalars, lambda c: st.one_of(
    st.lists(c, max_size=5), st.lists(c, max_size=3).map(tuple),
    st.dictionaries(st.text(max_size=5), c, max_size=5), st.dictionaries(_keys, c, max_size=4),
    st.dictionaries(st.text(max_size=4), c, max_size=3).map(_Dict)), max_leaves=200)


def _write(report: Any, fast: bool) -> tuple[str, int] | tuple[type, str]:
    from ksched.sim import report as rep

    old = rep.FAST_JSON
    rep.FAST_JSON = fast
    try:
        out = io.StringIO()
        n = write_json(report, out)
        return out.getvalue(), n
    except (TypeError, ValueError) as e:
        return type(e), str(e)
    finally:
        rep.FAST_JSON = old


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.dictionaries(st.text(max_size=5), _any, max_size=6),
                 st.dictionaries(_keys, _any, max_size=4),
                 st.dictionaries(st.text(max_size=3), st.lists(st.dictionaries(
                     st.text(max_size=4), _scalars, max_size=6), max_size=30), max_size=3)))
def test_fast_writer_gives_the_json_encoders_text_or_error(report: dict[Any, Any]) -> None:
    """``write_json`` with ``FAST_JSON`` writes exactly what ``json``'s encoder writes (the
    reference), count included, and raises the same error where it refuses a value."""
    got = _write(report, True)
    assert got == _write(report, False)
    if isinstance(got[0], str):
        assert got == (json.dumps(report, indent=2) + "\n", len(got[0]))


def test_fast_writer_refuses_cycles_as_json_does() -> None:
    loop: list[Any] = [1]
    loop.append({"a": loop})
    d: dict[str, Any] = {"x": 1}
    d["self"] = d
    for report in ({"pods": loop}, {"a": {"b": [loop]}}, {"d": d}):
        assert _write(report, True) == _write(report, False)
        assert _write(report, True)[0] is ValueError
    top: dict[str, Any] = {"k": []}
    top["k"].append(top)
    assert _write(top, True) == _write(top, False) == (ValueError, "Circular reference detected")


def test_fast_writer_writes_flat_entries_and_big_lists_as_json() -> None:
    entries = [{"namespace": "ns", "name": f"p{i}", "owner": None, "node": "n\u00e9\n\"x\"", "attempts": i,
                "f": 0.1 * i, "ok": i % 2 == 0} for i in range(40_000)]
    report = {"pods": entries, "nodes": [], "summary": {"pods": 40_000, "seconds": float("inf")}}
    assert _write(report, True) == _write(report, False)
