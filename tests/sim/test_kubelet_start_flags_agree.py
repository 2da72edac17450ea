"""The simulated kubelet's per-template and per-node shortcuts of the node9 round against their
reference paths, in whole simulations: admission answered per template
(``predicate.ADMIT_BY_TEMPLATE``), the started pods' conditions lists and container statuses
made once per instant and template (``runtime.SHARE_CONDITION_LISTS``,
``runtime.STAMP_RUNNING_STATUSES``), the eviction manager's kick asking first whether the node
has anything to watch (``pressure.QUICK_KICK``), the OOM kill looked for only in pods with usage
annotations (``fake.OOM_ONLY_WITH_USAGE``), the admitted pods' request sums read per template
(``admitted.TEMPLATE_REQUESTS``), node11's timer queue with one FIFO per due time
(``timers.BUCKETED_TIMERS``), and kub13's admission asking only the predicate handler where the
rest of the default chain admits by construction (``fake.FUSED_ADMISSION``), and pod14's
admission reading the node's other pods in one call (``fake.ONE_OTHERS_LOOKUP``), status
writes straight to the store (``fake.DIRECT_STATUS_WRITE``) and the OS field as parsed
(``predicate.PARSED_OS_NAME``). The node-side
benchmark's day (usage, pressure, evictions, node failures, a drain) and a realistic directory
end with the same history, usage samples, passes, pods, nodes and Leases, and the same report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ksched.kubelet import admitted, fake, predicate, pressure, timers
from ksched.kubelet import runtime as rt
from ksched.sim.nodebench import node_side_day
from ksched.sim.realistic import generate

FLAGS = ((predicate, "ADMIT_BY_TEMPLATE"), (rt, "SHARE_CONDITION_LISTS"), (rt, "STAMP_RUNNING_STATUSES"),
         (pressure, "QUICK_KICK"), (fake, "OOM_ONLY_WITH_USAGE"), (admitted, "TEMPLATE_REQUESTS"),
         (timers, "BUCKETED_TIMERS"), (fake, "FUSED_ADMISSION"), (fake, "ONE_OTHERS_LOOKUP"),
         (fake, "DIRECT_STATUS_WRITE"), (predicate, "PARSED_OS_NAME"))


def _set(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    for mod, name in FLAGS:
        monkeypatch.setattr(mod, name, on)
    predicate._templates.clear()
    rt._lists.clear()
    rt._stamps.clear()
    admitted._templates.clear()


def _state(sim: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("Pod", "Node", "Lease", "Event"):
        objs = []
        for o in sim.store.items(kind):
            md = {k: v for k, v in o.raw.get("metadata", {}).items() if k not in ("resourceVersion", "uid")}
            objs.append(json.dumps({**o.raw, "metadata": md}, sort_keys=False, default=str))
        out[kind] = sorted(objs)
    return out


def test_the_node_side_day_ends_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, False)
    ref, r1 = node_side_day(9, 60, seed=3)
    _set(monkeypatch, True)
    fast, r2 = node_side_day(9, 60, seed=3)
    timings = ("seconds", "cpu_seconds")
    assert {k: v for k, v in r1.items() if not k.endswith(timings)} == {
        k: v for k, v in r2.items() if not k.endswith(timings)}
    assert r1["evicted_by_kubelet"] > 0  # the day has pressure and evictions
    assert list(fast.history.rows) == list(ref.history.rows)
    assert list(fast.history.samples) == list(ref.history.samples)
    assert fast.kubelet.pressure.passes == ref.kubelet.pressure.passes > 0
    assert _state(fast) == _state(ref)


def test_a_realistic_directory_reports_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ksched.api.loader import LoadResult, build_objects, read_manifests
    from ksched.sim.report import build_report
    from ksched.sim.simulation import Simulation

    generate(tmp_path, 12, 150, 10, seed=2)

    def run() -> tuple[str, dict[str, Any]]:
        res = LoadResult()
        build_objects(read_manifests([str(tmp_path)], res), res, unknown_kinds="skip")
        sim = Simulation(None, seed=0)
        sim.load(res.objects, [i for i, m in enumerate(res.manifests) if m.existing], owned=True, validated=True)
        result = sim.run()
        return json.dumps(build_report(sim, result), default=str), _state(sim)

    _set(monkeypatch, False)
    ref = run()
    _set(monkeypatch, True)
    assert run() == ref


def _oom_day() -> Any:
    from ksched.sim.simulation import Simulation

    def pod(name: str, annotations: dict[str, str], policy: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "annotations": annotations},
                "spec": {"nodeName": "n1", "restartPolicy": policy, "containers": [
                    {"name": "c", "image": "img", "resources": {"requests": {"memory": "1Gi"},
                                                                "limits": {"memory": "1Gi"}}}]}}

    sim = Simulation(seed=1)
    sim.load([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
               "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "20"}}}])
    sim.load([pod("oom-always", {"ksched.io/usage-memory": "0: 500Mi, 1m: 2Gi"}, "Always"),
              pod("oom-never", {"ksched.io/usage-memory": "0: 500Mi, 1m: 2Gi"}, "Never"),
              pod("bad", {"ksched.io/usage-memory": "lots"}, "Always"),
              pod("quiet", {"ksched.io/run-seconds": "90"}, "Never"),
              pod("plain", {}, "Always")])
    sim.run(max_seconds=200)
    return sim


def test_oom_kills_and_plain_pods_end_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, False)
    ref = _state(_oom_day())
    _set(monkeypatch, True)
    fast = _state(_oom_day())
    assert fast == ref
    assert any('"OOMKilled"' in p for p in ref["Pod"]) and any('"InvalidUsage"' in e for e in ref["Event"])
