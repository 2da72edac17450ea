"""A simulation nobody references any more is freed: its store, informers and scheduler (with
the DRA manager its DynamicResources plugin builds) are garbage once the Simulation is dropped.

A module-level map from each scheduler's InformerFactory to its DRA manager, keyed weakly, kept
every cluster alive for the life of the process (the manager references the factory's informers,
whose handlers reference the factory back): `ksched compare`, the test suite and any embedding
program that runs simulations one after another grew without bound."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from ksched.api.loader import load_manifests
from ksched.sim.simulation import Simulation

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dra-gpu"


def _run_once() -> tuple[weakref.ref[object], weakref.ref[object]]:
    sim = Simulation(seed=0)
    sim.load(load_manifests([EXAMPLE]).objects)
    sim.run(max_seconds=60)
    assert sim.informers.attachments.get("DRAManager") is not None  # DRA was in play
    return weakref.ref(sim.store), weakref.ref(sim.informers)


def test_a_dropped_simulation_with_dra_is_collected() -> None:
    store, informers = _run_once()
    gc.collect()
    assert store() is None
    assert informers() is None
