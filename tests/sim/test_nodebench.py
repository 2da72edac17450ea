"""``ksched bench --node-side`` on a tiny cluster: a simulated day with a zone failure, memory
pressure and a drain runs, reports its timings and what happened, and the same seed gives the
same outcome."""

from __future__ import annotations

import contextlib
import io
import json

from ksched.cli.main import main
from ksched.sim.nodebench import run_node_side


def test_a_day_on_a_tiny_cluster() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["bench", "--node-side", "--nodes", "6", "--pods", "40"]) == 0
    r = json.loads(out.getvalue())
    assert (r["benchmark"], r["nodes"], r["pods"]) == ("NodeSideDay", 6, 40)
    assert 18 * 3600 <= r["simulated_seconds"] <= 86400.0  # until the last change (the drain at 18 h, ...)
    assert r["evicted_by_taint_manager"] > 0  # zone-a's pods, 300 s after their nodes went Unknown
    assert r["placed_during_day"] >= 40
    assert r["eviction_passes"] < 6 * 8640  # passes follow the usage profiles, not every 10 s tick
    keys = ("evicted_by_kubelet", "evicted_by_taint_manager", "placed_during_day", "pods_running_at_end")
    again = run_node_side(6, 40)
    assert {k: again[k] for k in keys} == {k: r[k] for k in keys}


def test_too_few_nodes_is_refused() -> None:
    assert main(["bench", "--node-side", "--nodes", "2"]) == 2
