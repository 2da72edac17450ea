"""``ksched bench SimulateRealistic``: ``ksched simulate`` end to end on a realistic cluster.

A seeded generator writes a manifest directory as a new user would have one: nodes in three
zones with a ``pool`` label, and apps of bare pods, each app with one of five placement styles
(soft zone spread, hard hostname spread, preferred hostname anti-affinity, required node
affinity on the pool label, or nothing). The run then takes exactly the path of
``ksched simulate DIR --format json``: read and parse the files, build and validate the
objects, create them in the embedded cluster (admission, the store, the informers), schedule
on the virtual clock until nothing more can change, build the report and serialize it.
Reported: seconds per phase, pods scheduled, and the process's peak RSS.

Not an upstream scheduler_perf workload (upstream has no ``simulate``); its mix follows the
issue that asked for it (issue 17).
"""

from __future__ import annotations

import random
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["SIZES", "RealisticSize", "generate", "run_simulate_realistic"]

try:
    _Dumper: type = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Dumper = yaml.SafeDumper


@dataclass(frozen=True, slots=True)
class RealisticSize:
    nodes: int
    pods: int
    apps: int


SIZES = {
    "small": RealisticSize(50, 500, 20),
    "full": RealisticSize(1000, 20_000, 200),
    "large": RealisticSize(5000, 100_000, 1000),
}

ZONES = ("zone-a", "zone-b", "zone-c")
POOLS = ("general", "compute", "memory")
STYLES = ("zone-spread", "hostname-spread", "anti-affinity", "node-affinity", "none")


def _node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    zone = ZONES[i % len(ZONES)]
    pool = POOLS[(i // len(ZONES)) % len(POOLS)]
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "200Gi"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": zone, "node.kubernetes.io/instance-type": f"{pool}-32",
            "pool": pool}},
        "status": {"capacity": capacity, "allocatable": dict(capacity),
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _placement(style: str, app: str, rng: random.Random) -> dict[str, Any]:
    sel = {"matchLabels": {"app": app}}
    if style == "zone-spread":
        return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                               "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": sel}]}
    if style == "hostname-spread":
        return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                               "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}]}
    if style == "anti-affinity":
        return {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"labelSelector": sel, "topologyKey": "kubernetes.io/hostname"}}]}}}
    if style == "node-affinity":
        pool = rng.choice(POOLS)
        return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": [pool]}]}]}}}}
    return {}


def _app_pods(a: int, count: int, rng: random.Random) -> list[dict[str, Any]]:
    app = f"app-{a:04d}"
    style = STYLES[a % len(STYLES)]
    cpu = rng.choice(("100m", "250m", "500m", "1"))
    mem = rng.choice(("128Mi", "256Mi", "512Mi", "1Gi"))
    ns = f"team-{a % 10}"
    placement = _placement(style, app, rng)
    out = []
    for i in range(count):
        spec: dict[str, Any] = {
            "containers": [{"name": "main", "image": f"registry.example.com/{app}:1.0",
                            "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
        }
        spec.update(placement)
        out.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"{app}-{i:05d}", "namespace": ns,
                                 "labels": {"app": app, "style": style}},
                    "spec": spec})
    return out


def generate(directory: str | Path, nodes: int, pods: int, apps: int, seed: int = 0) -> Path:
    """Write the manifests into ``directory`` (``nodes.yaml``, one ``app-NNNN.yaml`` per app);
    the same arguments always write the same files."""
    if nodes < 1 or pods < 0 or apps < 1:
        raise ValueError("need at least one node and one app, and no negative pod count")
    rng = random.Random(seed)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "nodes.yaml", "w", encoding="utf-8") as f:
        yaml.dump_all((_node(i) for i in range(nodes)), f, Dumper=_Dumper, sort_keys=False)
    base, extra = divmod(pods, apps)
    for a in range(apps):
        with open(d / f"app-{a:04d}.yaml", "w", encoding="utf-8") as f:
            yaml.dump_all(_app_pods(a, base + (1 if a < extra else 0), rng), f, Dumper=_Dumper, sort_keys=False)
    return d


class _Discard:
    """A text stream that keeps nothing (the report is written as ``ksched simulate`` writes it
    to its standard output)."""

    def write(self, text: str) -> int:
        return len(text)


def _peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run_simulate_realistic(size: str = "full", seed: int = 0, nodes: int | None = None, pods: int | None = None,
                           apps: int | None = None, directory: str | None = None) -> dict[str, Any]:
    """Generate the manifests (in ``directory``, or a temporary one) and run them through the
    ``ksched simulate --format json`` path, timing each phase. Returns the JSON-able result."""
    from ksched.api.loader import LoadResult, build_objects, read_manifests
    from ksched.sim.gcpacing import fewer_collections
    from ksched.sim.report import build_report, write_json
    from ksched.sim.simulation import Simulation

    s = SIZES[size]
    n_nodes, n_pods, n_apps = nodes or s.nodes, pods if pods is not None else s.pods, apps or s.apps
    with tempfile.TemporaryDirectory(prefix="ksched-simulate-") as tmp:
        where = Path(directory or tmp)
        t = time.perf_counter()
        generate(where, n_nodes, n_pods, n_apps, seed)
        gen_s = time.perf_counter() - t
        input_bytes = sum(p.stat().st_size for p in where.iterdir())
        rss_before = _peak_rss_mib()
        # From here on: what `ksched simulate DIR --format json` does.
        # As `ksched simulate` does: one block of fewer collections from the read to the report.
        with fewer_collections():
            c0 = time.process_time()
            t0 = time.perf_counter()
            res = LoadResult()
            manifests = read_manifests([str(where)], res)
            t_read = time.perf_counter()
            c_read = time.process_time()
            build_objects(manifests, res, unknown_kinds="skip")
            t_build = time.perf_counter()
            c_build = time.process_time()
            errors = [str(e) for e in res.errors]
            sim = Simulation(None, seed=seed)
            existing = [i for i, m in enumerate(res.manifests) if m.existing]
            refs = [m.ref for m in res.manifests]
            errors += [f"{res.manifests[i].where}: {refs[i]}: {e.message}"
                       for i, e in sim.load(res.objects, existing, owned=True, validated=True)]
            t_load = time.perf_counter()
            c_load = time.process_time()
            del manifests, res
            result = sim.run()
            t_sched = time.perf_counter()
            c_sched = time.process_time()
            report = build_report(sim, result)
            report_chars = write_json(report, _Discard()) - 1  # as the CLI writes it, less the newline
            t_end = time.perf_counter()
            c_end = time.process_time()
    summary = report.get("summary", {})
    total = t_end - t0
    return {
        "workload": "SimulateRealistic",
        "size": size,
        "nodes": n_nodes,
        "pods": n_pods,
        "apps": n_apps,
        "input_mib": round(input_bytes / 2**20, 1),
        "errors": errors[:10],
        "scheduled": result.scheduled,
        "pending": summary.get("pending"),
        "read_seconds": round(t_read - t0, 3),
        "build_seconds": round(t_build - t_read, 3),
        "create_seconds": round(t_load - t_build, 3),
        "load_seconds": round(t_load - t0, 3),
        "schedule_seconds": round(t_sched - t_load, 3),
        "report_seconds": round(t_end - t_sched, 3),
        "total_seconds": round(total, 3),
        "pods_per_second": round(n_pods / total, 1) if total > 0 else None,
        # CPU seconds of this process (user + system): on a shared machine, steadier than wall time.
        "load_cpu_seconds": round(c_load - c0, 3),
        "read_cpu_seconds": round(c_read - c0, 3),
        "build_cpu_seconds": round(c_build - c_read, 3),
        "create_cpu_seconds": round(c_load - c_build, 3),
        "schedule_cpu_seconds": round(c_sched - c_load, 3),
        "total_cpu_seconds": round(c_end - c0, 3),
        "report_bytes": report_chars,
        "peak_rss_mib": _peak_rss_mib(),
        "peak_rss_before_load_mib": rss_before,
        "generate_seconds": round(gen_s, 2),
        "config": {"seed": seed, "python": sys.version.split()[0]},
    }
