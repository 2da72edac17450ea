"""The package layering of docs/architecture.md, enforced (as upstream enforces import
restrictions): ``api`` <- ``apiserver``, ``client`` <- ``scheduler``, ``controllers``,
``kubelet``, ``dispatch`` <- ``sim`` <- ``cli``; and no import cycle between modules, counting
every import (module level, in functions, under TYPE_CHECKING)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Top-level modules every layer may use: they import nothing else of ksched.
BASE = {"", "clock", "boundedcache", "aioserver", "healthz", "stepping"}

# Package (or top-level module) -> the packages it may import besides BASE and itself.
ALLOWED: dict[str, set[str]] = {
    "api": set(),
    "apiserver": {"api"},
    "client": {"api"},
    "scheduler": {"api", "client"},
    "controllers": {"api", "client"},
    "kubelet": {"api", "client", "scheduler"},  # node admission reuses the scheduler's fit checks
    "dispatch": {"api", "client", "scheduler"},
    "testing": {"api", "client", "scheduler"},  # helpers for plugin authors' tests
    "plugins": {"api", "scheduler"},  # the import surface for plugin authors
    "sim": {"api", "apiserver", "client", "scheduler", "controllers", "kubelet", "dispatch"},
    "cli": {"api", "apiserver", "client", "scheduler", "controllers", "kubelet", "dispatch", "sim", "testing",
            "plugins"},
}


def _modules() -> dict[str, Path]:
    out = {}
    for p in (SRC / "ksched").rglob("*.py"):
        parts = list(p.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every ksched module ``path`` imports, anywhere in it."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                node.module.split(".")[0] == "ksched":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "ksched")
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import (use absolute ksched imports)")
    return out


GRAPH = {m: {i for i in _imports(p) if i != m} for m, p in MODULES.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_package_has_a_layer() -> None:
    layers = {_layer(m) for m in MODULES}
    assert layers <= BASE | set(ALLOWED), f"packages without a layer: {layers - BASE - set(ALLOWED)}"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layers_point_one_way(layer: str) -> None:
    allowed = ALLOWED[layer] | BASE | {layer}
    bad = sorted(f"{m} imports {i}" for m, deps in GRAPH.items() if _layer(m) == layer
                 for i in deps if _layer(i) not in allowed)
    assert not bad, "\n".join(bad)


def test_base_modules_import_nothing_of_ksched_but_each_other() -> None:
    bad = sorted(f"{m} imports {i}" for m, deps in GRAPH.items() if _layer(m) in BASE
                 for i in deps if _layer(i) not in BASE)
    assert not bad, "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_import_cycles() -> None:
    assert _cycles(GRAPH) == []


def test_the_checks_can_fail() -> None:
    """The cycle finder and the layer rule see what they are meant to see."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _layer("ksched.scheduler.cache.cache") == "scheduler" and _layer("ksched") == ""
    assert "ksched.api.errors" in GRAPH["ksched.apiserver.store"]
