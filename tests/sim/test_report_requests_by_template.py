"""The report's requested-per-node figures with each pod's requests read from the kubelet's memo
per template (``report.REQUESTS_BY_TEMPLATE``) against ``pod_requests`` of each pod (the
reference): a realistic directory (replicas of apps sharing their parsed containers) and
replicas beside pods with pod-level requests or init containers (which change the sum) give
the same report; no requests are kept on the pods."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ksched.api.loader import LoadResult, build_objects, read_manifests
from ksched.kubelet import admitted
from ksched.sim import report
from ksched.sim.realistic import generate
from ksched.sim.report import build_report
from ksched.sim.simulation import Simulation


def _run(directory: Path) -> tuple[Simulation, Any]:
    res = LoadResult()
    build_objects(read_manifests([str(directory)], res), res, unknown_kinds="skip")
    sim = Simulation(None, seed=0)
    sim.load(res.objects, [i for i, m in enumerate(res.manifests) if m.existing], owned=True, validated=True)
    return sim, sim.run()


def _both(sim: Simulation, result: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    admitted._templates.clear()
    monkeypatch.setattr(report, "REQUESTS_BY_TEMPLATE", False)
    ref = json.dumps(build_report(sim, result))
    monkeypatch.setattr(report, "REQUESTS_BY_TEMPLATE", True)
    fast = json.dumps(build_report(sim, result))
    return ref, fast


def test_a_realistic_directory_reports_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generate(tmp_path, 10, 120, 8, seed=4)
    sim, result = _run(tmp_path)
    ref, fast = _both(sim, result, monkeypatch)
    assert fast == ref and '"requested"' in fast
    assert all("requests" not in (p._cache or {}) for p in sim.store.items("Pod"))


def _pod(name: str, cpu: str, overhead: str | None = None, pod_cpu: str | None = None,
         init_cpu: str | None = None) -> str:
    spec = [f"  containers:\n  - name: c\n    image: i\n    resources:\n      requests:\n        cpu: {cpu}"]
    if init_cpu is not None:
        spec.append(f"  initContainers:\n  - name: i\n    image: i\n    resources:\n      requests:\n"
                    f"        cpu: {init_cpu}")
    if overhead is not None:
        spec.append(f"  overhead:\n    cpu: {overhead}")
    if pod_cpu is not None:
        spec.append(f"  resources:\n    requests:\n      cpu: {pod_cpu}")
    return ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  labels:\n    app: a\nspec:\n"
            + "\n".join(spec) + "\n")


def test_pod_level_requests_and_init_containers_report_the_same(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    node = ("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nstatus:\n  allocatable:\n    cpu: '64'\n"
            "    memory: 64Gi\n    pods: '110'\n")
    pods = [_pod("a", "1"), _pod("b", "1"), _pod("c", "1", pod_cpu="3"), _pod("d", "1", init_cpu="5"),
            _pod("e", "2"), _pod("f", "1"), _pod("g", "1", pod_cpu="3")]
    (tmp_path / "all.yaml").write_text("---\n".join([node, *pods]))
    sim, result = _run(tmp_path)
    ref, fast = _both(sim, result, monkeypatch)
    assert fast == ref
    # 1+1+3+5+2+1+3 cores of requests (the pod-level requests and the init container's replace the sum)
    assert json.loads(fast)["nodes"][0]["requested"]["cpu"] == "16"
