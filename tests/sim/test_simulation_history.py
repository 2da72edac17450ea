"""A simulation's store keeps only the watch history its watches could resume from
(``Simulation``'s ``DELIVERED_HISTORY``): the outcome is the same as with the whole history,
however short the kept tail, and superseded versions are not kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ksched.api.loader import load_manifests
from ksched.sim import simulation
from ksched.sim.realistic import generate
from ksched.sim.report import build_report


def _run(d: Path) -> tuple[str, Any]:
    res = load_manifests([str(d)])
    sim = simulation.Simulation(None, seed=0)
    assert sim.load(res.objects, owned=True, validated=True) == []
    result = sim.run()
    return json.dumps(build_report(sim, result), indent=2), sim


@pytest.mark.parametrize("tail", [1, 7])
def test_the_outcome_does_not_depend_on_the_history_kept(tmp_path: Path, monkeypatch: Any, tail: int) -> None:
    d = generate(tmp_path / "m", nodes=8, pods=80, apps=5)
    monkeypatch.setattr(simulation, "DELIVERED_HISTORY", None)
    whole, sim_whole = _run(d)
    monkeypatch.setattr(simulation, "DELIVERED_HISTORY", tail)
    trimmed, sim = _run(d)
    assert trimmed == whole
    cache = sim.store.watch_cache
    assert len(cache._history["Pod"]) < len(sim_whole.store.watch_cache._history["Pod"]) == 80 * 3  # created, bound, started
    # What is still kept is what the watches had not taken at the last write (trimmed at writes):
    # once they have taken everything, only the tail is left.
    assert all(w.taken_rv == sim.store.resource_version for w in cache.watches("Pod"))
    cache._trim("Pod", sim.store.resource_version)
    assert len(cache._history["Pod"]) == tail
    reflectors = [i.reflector for i in sim.informers.informers.values()]
    assert reflectors and all(r.relists == 0 and r.rewatches == 0 for r in reflectors)
