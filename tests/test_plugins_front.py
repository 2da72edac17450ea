"""ksched.plugins, the one module out-of-tree plugins import from: its names, and the example
plugin using nothing else of ksched."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import ksched.plugins

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "plugins" / "cost_aware.py"

# Every exported name and the module that defines it.
DEFINED_IN = {
    **dict.fromkeys(
        ["Plugin", "PreEnqueuePlugin", "QueueSortPlugin", "PreFilterPlugin", "PreFilterExtensions",
         "PreFilterResult", "FilterPlugin", "PostFilterPlugin", "PostFilterResult", "PreScorePlugin",
         "ScorePlugin", "ScoreExtensions", "ReservePlugin", "PermitPlugin", "PreBindPlugin", "BindPlugin",
         "PostBindPlugin", "EnqueueExtensions", "Handle", "MAX_NODE_SCORE", "MIN_NODE_SCORE",
         "VectorizedFilter", "VectorizedScore", "RowLocal", "VectorizedFilterStatuses",
         "ExplainedPostFilter", "FastPath", "SignPlugin", "SignFragment"],
        "ksched.scheduler.framework.interface"),
    "Snapshot": "ksched.scheduler.cache.snapshot",
    **dict.fromkeys(["Status", "Code", "Diagnosis"], "ksched.scheduler.framework.status"),
    **dict.fromkeys(["CycleState", "StateData"], "ksched.scheduler.framework.cycle_state"),
    **dict.fromkeys(["NodeInfo", "NodeList", "PodInfo", "QueuedPodInfo"], "ksched.scheduler.framework.types"),
    **dict.fromkeys(["ClusterEvent", "ClusterEventWithHint", "ActionType", "EventResource", "QueueingHint"],
                    "ksched.scheduler.framework.events"),
    "Pod": "ksched.api.pod",
    "Node": "ksched.api.node",
}


def test_exports_exactly_these_names() -> None:
    assert len(ksched.plugins.__all__) == len(set(ksched.plugins.__all__))
    assert set(ksched.plugins.__all__) == set(DEFINED_IN)


@pytest.mark.parametrize("name", sorted(DEFINED_IN))
def test_each_name_is_the_defining_modules_object(name: str) -> None:
    got = getattr(ksched.plugins, name)
    assert got is getattr(importlib.import_module(DEFINED_IN[name]), name)
    if isinstance(got, type):
        assert got.__module__ == DEFINED_IN[name]  # defined there, not re-exported from elsewhere


def test_star_import_gives_every_name() -> None:
    ns: dict[str, object] = {}
    exec("from ksched.plugins import *", ns)
    assert set(ns) - {"__builtins__"} == set(DEFINED_IN)


def test_example_plugin_imports_ksched_only_through_the_front_module() -> None:
    tree = ast.parse(EXAMPLE.read_text(), filename=str(EXAMPLE))
    ksched_modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        ksched_modules.update(n for n in names if n == "ksched" or n.startswith("ksched."))
    assert ksched_modules == {"ksched.plugins"}
