"""``pod.TERMINAL_SLOT``: ``Pod.is_terminal`` read from the ``_terminal`` slot that every place
setting ``phase`` sets, against the reference property (``phase in (Succeeded, Failed)``): on
random manifests through every way a Pod is made (``Pod(raw)``, ``Pod.lean``, ``with_status``,
``admitted``, ``like``, ``shallow_copy``), and in a whole simulation with pods that finish and
are evicted (the same history, passes and objects either way)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api import pod as pod_mod
from ksched.api.pod import Pod

PHASES = st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", "", None])


def _status(phase: str | None) -> dict[str, Any]:
    return {} if phase is None else {"phase": phase}


def _manifest(name: str, phase: str | None, node: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": name,
                                                           "labels": {"app": "a"}},
            "spec": spec, "status": _status(phase)}


@pytest.fixture
def reference_after() -> Iterator[None]:
    yield
    pod_mod.set_terminal_slot(True)


def _agrees(p: Pod) -> None:
    expect = pod_mod._TERMINAL_PROPERTY.fget(p)
    assert p._terminal is expect
    pod_mod.set_terminal_slot(True)
    assert p.is_terminal is expect
    pod_mod.set_terminal_slot(False)
    assert p.is_terminal is expect
    pod_mod.set_terminal_slot(True)


@settings(max_examples=150, deadline=None)
@given(PHASES, PHASES, PHASES, st.sampled_from(["", "n1"]))
def test_the_slot_is_the_property_however_the_pod_is_made(a: str | None, b: str | None, c: str | None,
                                                          node: str) -> None:
    raw = _manifest("p", a, node)
    full = Pod(raw)
    lean = Pod.lean(_manifest("p", a, node))
    made = [full, lean, full.shallow_copy(), lean.shallow_copy()]
    written = full.with_status({**raw, "status": _status(b)})
    made += [written, written.with_status({**raw, "status": _status(c)}),
             lean.with_status({**raw, "status": _status(b)})]
    own = _manifest("p", b, node)
    made.append(Pod(own).admitted(own))
    made.append(full.like(_manifest("q", c, node)))
    for p in made:
        _agrees(p)
    assert lean.tolerations == ()  # (decoding the rest keeps the slot)
    _agrees(lean)


def test_a_node_side_day_ends_the_same_either_way(reference_after: None) -> None:
    from ksched.sim.nodebench import node_side_day

    def state(sim: Any) -> list[str]:
        return sorted(json.dumps(o.raw, default=str) for kind in ("Pod", "Node") for o in sim.store.items(kind))

    pod_mod.set_terminal_slot(False)
    ref, r1 = node_side_day(9, 60, seed=3)
    pod_mod.set_terminal_slot(True)
    fast, r2 = node_side_day(9, 60, seed=3)
    timings = ("seconds", "cpu_seconds")
    assert {k: v for k, v in r1.items() if not k.endswith(timings)} == {
        k: v for k, v in r2.items() if not k.endswith(timings)}
    assert r1["evicted_by_kubelet"] > 0
    assert any(p.is_terminal for p in fast.store.items("Pod"))
    assert list(fast.history.rows) == list(ref.history.rows)
    assert fast.kubelet.pressure.passes == ref.kubelet.pressure.passes
    assert state(fast) == state(ref)
