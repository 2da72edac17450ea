"""Scenario timelines (ksched.sim.timeline, ``ksched simulate --timeline``): the zone-outage
example (zone fails, its nodes go Unknown and are tainted at the zone's eviction rate, their pods
are evicted 300 s later and the Deployment's and the Job's replacements land in the other zones;
the zone comes back; a drain; the Job's pods complete on the clock), its report and plot, the
same result for the same timeline and seed, each action, malformed timelines refused with their
path, and the node-pressure and GPU-failure examples."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from api_objects import mknode, mkpod
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.cli.main import main
from ksched.sim.simulation import Simulation
from ksched.sim.timeline import TimelineError, parse_timeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kubelet"


def simulate(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["simulate", *args, "--quiet"])
    return rc, out.getvalue(), err.getvalue()


def zone_outage(*extra: str) -> dict[str, Any]:
    rc, out, err = simulate(str(EXAMPLES / "zone-outage.yaml"), "--timeline",
                            str(EXAMPLES / "zone-outage-timeline.yaml"), "--format", "json", "--seed", "1", *extra)
    assert rc == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_zone_outage_example() -> None:
    report = zone_outage()
    ev = [(e["t"], e["source"], e["what"], e["detail"]) for e in report["timeline"]["events"]]

    def at(what: str, contains: str) -> list[float]:
        return [t for t, _, w, d in ev if w == what and contains in d]

    assert at("failZone", "zone-a: a1, a2") == [120.0]
    # last heartbeat at 120 s; Unknown after the 50 s grace period, on the 5 s monitor grid
    assert at("condition", "a1 Ready=Unknown (NodeStatusUnknown)") == [175.0]
    assert at("tainted", "a1 node.kubernetes.io/unreachable:NoSchedule") == [175.0]
    # NoExecute in the next pass, then a2 10 s later (zone-a's 0.1 node/s)
    noexec = sorted(at("tainted", "node.kubernetes.io/unreachable:NoExecute"))
    assert noexec == [180.0, 190.0]
    evicted = [(t, d) for t, s, w, d in ev if w == "evicted" and s == "taint-eviction-controller"]
    assert [t for t, _ in evicted] == [480.0, 490.0, 490.0]  # 300 s of DefaultTolerationSeconds
    assert all(" on a1:" in d or " on a2:" in d for _, d in evicted)
    assert sum(d.startswith("default/web-") for _, d in evicted) == 1
    # the Deployment's and the Job's replacements land in the other zones
    replaced = [d for t, _, w, d in ev if w == "placed" and 480 <= t < 1200]
    assert len(replaced) == 3 and all(d.split(" on ")[1][0] in "bc" for d in replaced)
    assert sum(d.startswith("default/web-") for d in replaced) == 1
    assert at("restoreZone", "zone-a") == [1200.0]
    assert at("condition", "a1 Ready=True (KubeletReady)") == [1200.0]
    assert at("untainted", "a1 node.kubernetes.io/unreachable:NoExecute") == [1205.0]
    assert at("drain", "c2: evicted 2") == [1500.0]
    assert at("tainted", "c2 node.kubernetes.io/unschedulable:NoSchedule") == [1505.0]
    # the Job's pods complete on the clock: the first ones an hour after they started
    done = [t for t, _, w, _ in ev if w == "completed"]
    assert len(done) == 6 and min(done) == 3600.0
    usage = report["timeline"]["usage"]
    b1 = [u["memory"] for u in usage if u["node"] == "b1" and u["t"] >= 300]
    assert b1[0] >= 6 << 30  # setUsage at 5 min: the node's own 6Gi, plus its pod


def test_same_timeline_and_seed_same_result() -> None:
    assert zone_outage() == zone_outage()


def test_report_and_plot(tmp_path: Path) -> None:
    md = tmp_path / "out" / "report.md"
    rc, out, _ = simulate(str(EXAMPLES / "zone-outage.yaml"), "--timeline", str(EXAMPLES / "zone-outage-timeline.yaml"),
                          "--report", str(md))
    assert rc == 0
    assert "Timeline" in out and "taint-eviction-controller" in out
    text = md.read_text()
    assert "## Timeline" in text and "![node memory over time](report-timeline.png)" in text
    assert "| 0:02:00 | timeline | failZone | zone-a: a1, a2 |" in text
    png = md.with_name("report-timeline.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000


def test_each_action() -> None:
    sim = Simulation(seed=1)
    t0 = sim.clock.now()
    n1 = mknode("n1")
    n1["metadata"]["labels"] = {"topology.kubernetes.io/zone": "z"}
    sim.load([n1, mknode("n2"), mkpod("gone", nodeName="n2"), mkpod("kept", nodeName="n2")])
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
           "spec": {"parallelism": 1, "completions": 5, "template": {"spec": {
               "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}
    doc = {"kind": "Timeline", "events": [
        {"at": "10s", "apply": [job, mkpod("new", nodeName="n1")]},
        {"at": "20s", "delete": [{"kind": "Pod", "namespace": "default", "name": "gone"}]},
        {"at": "30s", "patch": {"kind": "Node", "name": "n2", "patch": {"metadata": {"labels": {"x": "y"}}}}},
        {"at": "40s", "scale": {"kind": "Job", "namespace": "default", "name": "j", "replicas": 3}},
        {"at": "50s", "setUsage": {"pod": "default/kept", "memory": "1Gi", "cpu": "250m"}},
        {"at": "60s", "markDeviceUnhealthy": {"node": "n1", "resource": "example.com/gpu", "device": "gpu-0"}},
        {"at": "60s", "markDeviceUnhealthy": {"node": "n1", "resource": "example.com/gpu", "device": "gpu-1"}},
        {"at": "70s", "markDeviceHealthy": {"node": "n1", "resource": "example.com/gpu", "device": "gpu-0"}},
        {"at": "80s", "cordon": "n2"},
        {"at": "90s", "uncordon": "n2"},
        {"at": "100s", "failZone": "z"},
        {"at": "110s", "restoreNode": "n1"},
    ]}
    sim.use_timeline(parse_timeline(doc))
    sim.run(max_seconds=95)
    pods = {p.name: p for p in sim.store.list("Pod")[0] if isinstance(p, Pod)}
    assert "gone" not in pods and pods["new"].phase == "Running"
    j = sim.store.get("Job", "default", "j")
    assert j.raw["spec"]["parallelism"] == 3
    assert pods["kept"].annotations["ksched.io/usage-memory"] == "1Gi"
    n1o, n2o = (sim.store.get("Node", "", n) for n in ("n1", "n2"))
    assert isinstance(n1o, Node) and isinstance(n2o, Node)
    assert n1o.annotations["ksched.io/unhealthy-devices"] == "gpu-1"
    assert n2o.labels["x"] == "y" and not n2o.unschedulable
    assert sim.clock.now() - t0 <= 95
    assert sim.kubelet is not None and not sim.kubelet.is_down("n1")
    sim.run(max_seconds=105 - (sim.clock.now() - t0))
    assert sim.kubelet.is_down("n1")
    sim.run()
    assert not sim.kubelet.is_down("n1")
    whats = [r[2] for r in sim.history.rows if r[1] == "timeline"]
    assert whats == ["apply", "delete", "patch", "scale", "setUsage", "markDeviceUnhealthy", "markDeviceUnhealthy",
                     "markDeviceHealthy", "cordon", "uncordon", "failZone", "restoreNode"]
    assert sim.timeline.errors == []


@pytest.mark.parametrize(("doc", "msg"), [
    ({"kind": "Pod"}, "t.yaml: kind: want Timeline"),
    ({"kind": "Timeline", "apiVersion": "v2"}, "apiVersion: want ksched.io/v1alpha1"),
    ({"kind": "Timeline"}, "events: want a list"),
    ({"kind": "Timeline", "events": [{"failNode": "n1"}]}, r"events\[0\]: want at: TIME and one action"),
    ({"kind": "Timeline", "events": [{"at": "soon", "failNode": "n1"}]}, r"events\[0\].at: invalid time 'soon'"),
    ({"kind": "Timeline", "events": [{"at": 1, "explode": "n1"}]}, r"events\[0\].explode: unknown action"),
    ({"kind": "Timeline", "events": [{"at": 1, "failNode": "n1", "cordon": "n1"}]}, "want exactly one action"),
    ({"kind": "Timeline", "events": [{"at": 1, "scale": {"kind": "Job", "name": "j", "replicas": -1}}]},
     r"events\[0\].scale.replicas: want a non-negative integer"),
    ({"kind": "Timeline", "events": [{"at": 1, "setUsage": {"pod": "default/p", "memory": "lots"}}]},
     r"events\[0\].setUsage.memory: invalid quantity 'lots'"),
    ({"kind": "Timeline", "events": [{"at": 1, "delete": [{"kind": "Pod"}]}]},
     r"events\[0\].delete\[0\]: want \{kind, namespace, name\}"),
    ({"kind": "Timeline", "events": [{"at": 1, "markDeviceUnhealthy": {"node": "n1"}}]},
     r"markDeviceUnhealthy: want \{node, resource, device\}"),
])
def test_malformed_timelines_are_refused_with_their_path(doc: dict[str, Any], msg: str) -> None:
    with pytest.raises(TimelineError, match=msg):
        parse_timeline(doc, "t.yaml")


def test_the_cli_refuses_a_bad_timeline_before_simulating(tmp_path: Path) -> None:
    bad = tmp_path / "t.yaml"
    bad.write_text("kind: Timeline\nevents:\n- {at: 1m, failNode: a1, cordon: a1}\n")
    rc, out, err = simulate(str(EXAMPLES / "zone-outage.yaml"), "--timeline", str(bad))
    assert rc == 2 and "want exactly one action, found 2" in err.replace("\n", "") and out == ""


def test_gpu_failure_example(tmp_path: Path) -> None:
    """examples/kubelet/gpu-failure*.yaml: a dead GPU leaves allocatable, the next GPU pod goes to
    the other node (without the failure it takes the node it prefers), the pod using a GPU that
    dies keeps running with it."""
    import yaml

    def run(timeline: Path) -> dict[str, Any]:
        rc, out, err = simulate(str(EXAMPLES / "gpu-failure.yaml"), "--timeline", str(timeline), "--format", "json")
        assert rc == 0, err
        return json.loads(out)  # type: ignore[no-any-return]

    report = run(EXAMPLES / "gpu-failure-timeline.yaml")
    ev = [(e["t"], e["what"], e["detail"]) for e in report["timeline"]["events"]]
    assert (0.0, "placed", "default/infer on gpu-1") in ev
    assert (60.0, "markDeviceUnhealthy", "gpu-1: nvidia.com/gpu gpu-1-b") in ev
    assert (120.0, "placed", "default/train on gpu-2") in ev
    pods = {p["name"]: p for p in report["pods"]}
    assert pods["infer"]["phase"] == "Running" and pods["infer"]["devices"] == {"app": {"nvidia.com/gpu": ["gpu-1-a"]}}
    assert pods["train"]["devices"] == {"app": {"nvidia.com/gpu": ["gpu-2-a"]}}
    gpu1 = next(n for n in report["nodes"] if n["name"] == "gpu-1")
    # at the end gpu-1-a (in use) is dead and gpu-1-b is back
    assert gpu1["allocatable"]["nvidia.com/gpu"] == "1"
    doc = yaml.safe_load((EXAMPLES / "gpu-failure-timeline.yaml").read_text())
    doc["events"] = [e for e in doc["events"] if e.get("at") != "1m"]
    healthy = tmp_path / "healthy.yaml"
    healthy.write_text(yaml.safe_dump(doc))
    pods = {p["name"]: p for p in run(healthy)["pods"]}
    assert pods["train"]["node"] == "gpu-1"


def test_node_pressure_example_with_its_timeline() -> None:
    """examples/kubelet/node-pressure*.yaml: BestEffort evicted first, then the Burstable pod over
    its request, never the Guaranteed one; while n1 has MemoryPressure (and its taint) a new
    BestEffort pod that prefers n1 goes to n2; once the pressure is over it lands on n1."""
    rc, out, err = simulate(str(EXAMPLES / "node-pressure.yaml"), "--kubelet-config",
                            str(EXAMPLES / "kubelet-config.yaml"), "--timeline",
                            str(EXAMPLES / "node-pressure-timeline.yaml"), "--format", "json")
    assert rc == 0, err
    report = json.loads(out)
    ev = [(e["t"], e["source"], e["what"], e["detail"]) for e in report["timeline"]["events"]]
    evicted = [(t, d.split(" on ")[0]) for t, s, w, d in ev if w == "evicted"]
    assert evicted == [(221.0, "default/best-effort"), (601.0, "default/burstable-over")]
    assert [(t, w) for t, _, w, d in ev if "n1 node.kubernetes.io/memory-pressure" in d] == [
        (165.0, "tainted"), (525.0, "untainted"), (605.0, "tainted"), (905.0, "untainted")]
    assert (240.0, "scheduler", "placed", "default/during-pressure on n2") in ev
    assert (1200.0, "scheduler", "placed", "default/after-pressure on n1") in ev
    pods = {p["name"]: p for p in report["pods"]}
    assert pods["guaranteed"]["phase"] == "Running" and pods["burstable-under"]["phase"] == "Running"


def test_kubelet_actions_without_kubelets_are_refused_not_fatal() -> None:
    rc, _, err = simulate(str(EXAMPLES / "zone-outage.yaml"), "--timeline", str(EXAMPLES / "zone-outage-timeline.yaml"),
                          "--no-kubelet")
    assert rc == 0
    assert "events[0]: failZone: no kubelets are simulated (--no-kubelet)" in err
    assert "events[2]: restoreZone: no kubelets are simulated (--no-kubelet)" in err
