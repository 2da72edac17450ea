"""The bundled example (examples/cluster, what ``make demo`` simulates with ``--seed 1``) through
``ksched simulate``: its workloads make the pods a real cluster's controllers would, and the
demo still shows priorities, preemption, spreading, a PodDisruptionBudget, admission defaults,
provisioned claims and pods pending with upstream's reasons."""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ksched.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster"

# (namespace, owner kind, owner name without the pod-template hash, phase) -> pods.
OWNER_COUNTS = {
    ("web", "ReplicaSet", "frontend", "Running"): 18,
    ("web", "ReplicaSet", "checkout", "Running"): 9,
    ("web", "ReplicaSet", "cache", "Running"): 6,
    ("data", "ReplicaSet", "debug", "Running"): 20,
    ("data", "ReplicaSet", "dpdk-router", "Running"): 6,
    ("data", "ReplicaSet", "dpdk-gateway", "Running"): 6,
    ("data", "StatefulSet", "kafka", "Running"): 30,
    ("infra", "DaemonSet", "log-agent", "Running"): 31,
    ("infra", "ReplicaSet", "ingress-nginx", "Running"): 3,
    ("infra", "ReplicaSet", "ingress-nginx", "Pending"): 6,
    ("ml", "Job", "train-resnet", "Running"): 2,
    ("ml", "Job", "hparam-sweep", "Running"): 4,
    ("ml", "Job", "hparam-sweep", "Pending"): 4,
    ("ml", "Job", "retrain-yearly-28928165", "Running"): 1,
    ("ml", "", "too-many-gpus", "Pending"): 1,
    ("data", "", "giant-analytics", "Pending"): 1,
    ("batch", "", "waiting-for-quota", "Pending"): 1,
    **{("batch", "Job", f"etl-{i:02d}", "Succeeded"): 20 for i in range(12)},
}


def owner_key(p: dict[str, Any]) -> tuple[str, str, str, str]:
    owner = p.get("owner") or ""
    if not owner:
        return p["namespace"], "", p["name"], p["phase"]
    kind, _, name = owner.partition("/")
    if kind == "ReplicaSet":
        name = name.rsplit("-", 1)[0]  # the Deployment's name
    return p["namespace"], kind, name, p["phase"]


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["simulate", str(EXAMPLE), "--seed", "1", "--format", "json", "--quiet"]) == 0
    r: dict[str, Any] = json.loads(out.getvalue())
    return r


def test_the_workloads_make_the_pods_a_cluster_would(report: dict[str, Any]) -> None:
    assert Counter(owner_key(p) for p in report["pods"]) == OWNER_COUNTS
    kafka = sorted(p["name"] for p in report["pods"] if p["name"].startswith("kafka-"))
    assert kafka == sorted(f"kafka-{i}" for i in range(30))  # ordinal names
    agents = [p["node"] for p in report["pods"] if p["name"].startswith("log-agent-")]
    assert len(set(agents)) == len(report["nodes"]) == 31  # one per node, the cordoned one too
    assert report["summary"] == {"pods": 389, "scheduled": 376, "unschedulable": 12, "pending": 13,
                                 "seconds": 3602.0}


def test_spreading_priorities_and_preemption(report: dict[str, Any]) -> None:
    frontends = [p["node"] for p in report["pods"] if owner_key(p)[2] == "frontend"]
    assert len(set(frontends)) == 18  # at most one per node
    # general-<zone>-i; hugepages-i is in zone a, b, c for i = 0, 1, 2 (scripts/make_example.py).
    zones = Counter(n.split("-")[1] if n.startswith("general-") else "abc"[int(n[-1])] for n in frontends)
    assert sorted(zones.values()) == [6, 6, 6]  # maxSkew 1 over three zones
    # Every GPU is taken: the retraining preempted four one-GPU trials, whose replacements wait.
    jobs = {j["name"]: j for j in report["jobs"]}
    assert (jobs["hparam-sweep"]["failed"], jobs["hparam-sweep"]["active"]) == (4, 8)
    assert all(jobs[f"etl-{i:02d}"]["condition"] == "Complete" for i in range(12))
    retrain = [p for p in report["pods"] if owner_key(p)[2].startswith("retrain-yearly")]
    assert retrain[0]["node"].startswith("gpu-")


def test_pending_pods_say_why(report: dict[str, Any]) -> None:
    why = {p["name"]: (p["reason"], p["message"]) for p in report["pods"] if p["phase"] == "Pending"}
    assert why["waiting-for-quota"] == ("SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")
    assert "23 Insufficient cpu, 23 Insufficient memory" in why["giant-analytics"][1]
    assert "27 Insufficient nvidia.com/gpu" in why["too-many-gpus"][1]
    ingress = [m for n, (_, m) in why.items() if n.startswith("ingress-nginx-")]
    assert len(ingress) == 6 and all("3 node(s) didn't have free ports for the requested pod ports" in m
                                     for m in ingress)
    sweep = [m for n, (_, m) in why.items() if n.startswith("hparam-sweep-")]
    assert len(sweep) == 4 and all("Insufficient nvidia.com/gpu" in m for m in sweep)
