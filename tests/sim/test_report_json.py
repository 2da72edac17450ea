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
