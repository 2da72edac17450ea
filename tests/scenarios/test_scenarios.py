"""End-to-end scenarios: manifests in ``<scenario>/cluster.yaml``, run through ``ksched simulate --format json``,
checked against ``expect.yaml`` beside them.

expect.yaml::

    description: what the scenario shows
    seed: 0                       # optional
    config: config.yaml           # optional, relative to the scenario directory
    pods:
      ns/name: {node: n1}                        # bound to exactly this node
      ns/name: {node_in: [n1, n2]}               # bound to one of these
      ns/name: {node_not_in: [n3]}               # bound, but not there
      ns/name: {pending: true}                   # not bound
      ns/name: {message: "0/3 nodes are ..."}    # pending with exactly this message
      ns/name: {message_contains: ["Insufficient cpu"]}
      ns/name: {nominated: n1}                   # nominatedNodeName
      ns/name: {owner: ReplicaSet/web-7c94f5895c}  # its controller
      ns/name: {gone: true}                      # no longer exists (preempted)
    same_node: [[ns/a, ns/b]]                    # these pods share a node
    different_nodes: [[ns/a, ns/b, ns/c]]        # pairwise different nodes
    summary: {scheduled: 3, unschedulable: 1}    # any summary fields
    claims:                                      # ResourceClaims, by the pods they are reserved for
      ns/pod: [[request, device], ...]           # (request, device) of every claim the pod holds
      ns/pod: {shared_devices: 2}                # its devices, each shared (a shareID) with others
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ksched.cli.main import main

HERE = Path(__file__).parent
SCENARIOS = sorted(p for p in HERE.iterdir() if p.is_dir() and (p / "expect.yaml").exists())


def run_simulate(directory: Path, expect: dict[str, Any]) -> dict[str, Any]:
    args = ["simulate", str(directory / "cluster.yaml"), "--format", "json", "--quiet", "--seed", str(expect.get("seed", 0))]
    if expect.get("config"):
        args += ["--config", str(directory / expect["config"])]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(args)
    assert rc == 0, f"ksched simulate exited {rc}"
    return json.loads(out.getvalue())


def check(expect: dict[str, Any], report: dict[str, Any]) -> list[str]:
    pods = {f"{p['namespace']}/{p['name']}": p for p in report["pods"]}
    problems: list[str] = []
    for ref, want in (expect.get("pods") or {}).items():
        if "/" not in ref:
            ref = f"default/{ref}"
        got = pods.get(ref)
        if want.get("gone"):
            if got is not None:
                problems.append(f"{ref}: expected to be gone, still exists on {got['node']}")
            continue
        if got is None:
            problems.append(f"{ref}: no such pod in the report")
            continue
        node = got["node"]
        if "node" in want and node != want["node"]:
            problems.append(f"{ref}: on {node!r}, expected {want['node']!r} ({got['message']})")
        if "node_in" in want and node not in want["node_in"]:
            problems.append(f"{ref}: on {node!r}, expected one of {want['node_in']} ({got['message']})")
        if "node_not_in" in want and (node is None or node in want["node_not_in"]):
            problems.append(f"{ref}: on {node!r}, expected bound outside {want['node_not_in']}")
        if want.get("pending") and node is not None:
            problems.append(f"{ref}: bound to {node}, expected pending")
        if "message" in want and got["message"] != want["message"]:
            problems.append(f"{ref}: message\n  {got['message']!r}\nexpected\n  {want['message']!r}")
        for frag in want.get("message_contains") or ():
            if frag not in (got["message"] or ""):
                problems.append(f"{ref}: message {got['message']!r} lacks {frag!r}")
        if "owner" in want and got.get("owner") != want["owner"]:
            problems.append(f"{ref}: owner {got.get('owner')!r}, expected {want['owner']!r}")
        if "nominated" in want and got["nominatedNode"] != want["nominated"]:
            problems.append(f"{ref}: nominated {got['nominatedNode']!r}, expected {want['nominated']!r}")
        if "reason" in want and got["reason"] != want["reason"]:
            problems.append(f"{ref}: reason {got['reason']!r}, expected {want['reason']!r}")

    def node_of(ref: str) -> str | None:
        p = pods.get(ref if "/" in ref else f"default/{ref}")
        return p["node"] if p else None

    for group in expect.get("same_node") or ():
        nodes = {node_of(r) for r in group}
        if len(nodes) != 1 or None in nodes:
            problems.append(f"same_node {group}: on {[node_of(r) for r in group]}")
    for group in expect.get("different_nodes") or ():
        nodes = [node_of(r) for r in group]
        if None in nodes or len(set(nodes)) != len(nodes):
            problems.append(f"different_nodes {group}: on {nodes}")
    held: dict[str, list[dict[str, Any]]] = {}
    for c in report.get("resourceClaims") or ():
        for p in c["reservedFor"]:
            held.setdefault(f"{c['namespace']}/{p}", []).extend(c["devices"])
    for ref, want in (expect.get("claims") or {}).items():
        ref = ref if "/" in ref else f"default/{ref}"
        devs = held.get(ref, [])
        if isinstance(want, dict):
            n = sum(1 for d in devs if d.get("shareID"))
            if n != want.get("shared_devices", n):
                problems.append(f"{ref}: holds {n} shared devices, expected {want['shared_devices']}: {devs}")
        elif sorted([d["request"], d["device"]] for d in devs) != sorted(want):
            problems.append(f"{ref}: holds {[[d['request'], d['device']] for d in devs]}, expected {want}")
    for k, v in (expect.get("summary") or {}).items():
        if report["summary"].get(k) != v:
            problems.append(f"summary.{k} = {report['summary'].get(k)}, expected {v}")
    return problems


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_scenario(scenario: Path) -> None:
    expect = yaml.safe_load((scenario / "expect.yaml").read_text())
    report = run_simulate(scenario, expect)
    problems = check(expect, report)
    assert not problems, f"{scenario.name}: {expect.get('description', '')}\n" + "\n".join(problems)


def test_every_scenario_is_deterministic() -> None:
    """Same inputs and seed give the same report (checked on the first few scenarios)."""
    for scenario in SCENARIOS[:3]:
        expect = yaml.safe_load((scenario / "expect.yaml").read_text())
        assert run_simulate(scenario, expect) == run_simulate(scenario, expect)
