"""The out-of-tree plugin example in examples/plugins works as docs/writing-plugins.md says."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ksched.scheduler.config import load_configuration
from ksched.sim.simulation import Simulation
from ksched.testing import PluginRunner, make_node, make_pod

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "plugins"


@pytest.fixture(autouse=True)
def _path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("cost_aware", None)


def test_filter_and_score_by_cost() -> None:
    nodes = [make_node("cheap", labels={"example.com/hourly-cost": "100"}),
             make_node("mid", labels={"example.com/hourly-cost": "200"}),
             make_node("pricey", labels={"example.com/hourly-cost": "900"})]
    runner = PluginRunner(["cost_aware:CostAware"], nodes, args={"cost_aware:CostAware": {"maxHourlyCost": 300}})
    statuses = runner.filter(make_pod("p"))
    assert statuses["cheap"] is None and statuses["mid"] is None
    assert statuses["pricey"] is not None and statuses["pricey"].reasons == ("node(s) cost more than the pod may spend",)
    scores = runner.score(make_pod("p"), nodes=["cheap", "mid"])["cost_aware:CostAware"]
    assert scores == {"cheap": 50, "mid": 0}


def test_simulation_with_the_example_config(tmp_path: Path) -> None:
    cfg = load_configuration(EXAMPLES / "config.yaml")
    sim = Simulation(cfg, kubelet=False)
    sim.load([make_node("cheap", labels={"example.com/hourly-cost": "100"}).raw,
              make_node("pricey", labels={"example.com/hourly-cost": "900"}).raw,
              make_pod("p", uid="").raw])
    sim.run()
    pod = sim.store.get("Pod", "default", "p")
    assert pod.node_name == "cheap"
