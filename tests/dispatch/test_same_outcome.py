"""Several scheduler instances reach the same outcome as one scheduler, on the bundled examples,
on the end-to-end scenario clusters (tests/scenarios) and on generated clusters where pods of
several priorities preempt under PDBs.

"The same outcome" (multisim.Envelope): one scheduler's outcome still depends on its random
tie-breaks and on the arrival order of pods of equal priority, which several instances cannot
reproduce; what it does not depend on -- measured over runs of one scheduler with different
seeds and arrival orders -- several instances must reproduce exactly:

* per priority, how many pods are bound and how many were preempted;
* per set of replicas (pods differing only in name), the same;
* per pod without replicas: bound, preempted, or pending with the same answer from
  preemption (the ``preemption:`` part of its message, up to node counts);
* per pod one scheduler always binds to the same node: that node;

and every outcome must be safe and settled: no node over-committed, no PDB left violated that
one scheduler leaves intact, no pending pod that fits a node or could preempt.

Instances see each other's writes at the start of each of their cycles here (the strict
comparison); with watches lagging several rounds behind, only safety and settledness are
required (a preemption decided on a stale view may pick other victims)."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from multisim import (
    Envelope,
    Outcome,
    Waves,
    generated_scenario,
    outcome,
    pod_class,
    reordered,
    run_many,
    run_one,
    store_of,
    verdict,
)

from ksched.api.loader import load_manifests
from ksched.api.pod import Pod
from ksched.client.rest import RestClient
from ksched.dispatch.dispatcher import _Todo
from ksched.dispatch.instance import PriorityBarrier
from ksched.scheduler.preemption import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER

REPO = Path(__file__).resolve().parents[2]
SCENARIO_DIR = REPO / "tests" / "scenarios"
ENVELOPE_RUNS = 8


def example_sets() -> list[Path]:
    """Every directory of examples/ holding a cluster: manifests that load without error and
    create pods (directly or through workloads)."""
    out = []
    for d in sorted(p for p in (REPO / "examples").iterdir() if p.is_dir()):
        res = load_manifests([d])
        kinds = {o.KIND for o in res.objects}
        if res.objects and not res.errors and "Node" in kinds and kinds - {"Node", "Namespace", "PriorityClass"}:
            out.append(d)
    return out


@functools.cache
def example_waves(name: str) -> Waves:
    return [list(load_manifests([REPO / "examples" / name]).objects)]


def scenario_clusters() -> list[str]:
    """The end-to-end scenarios of tests/scenarios run with the default configuration (instances
    run the default profile)."""
    out = []
    for d in sorted(p for p in SCENARIO_DIR.iterdir() if p.is_dir() and (p / "cluster.yaml").exists()):
        expect = yaml.safe_load((d / "expect.yaml").read_text()) if (d / "expect.yaml").exists() else {}
        if not (expect or {}).get("config"):
            out.append(d.name)
    return out


@functools.cache
def scenario_waves(name: str) -> Waves:
    res = load_manifests([SCENARIO_DIR / name / "cluster.yaml"])
    assert not res.errors, res.errors
    return [list(res.objects)]


def waves_of(key: str) -> Waves:
    kind, _, name = key.partition(":")
    if kind == "generated":
        return generated_scenario(int(name))
    return scenario_waves(name) if kind == "scenario" else example_waves(name)


@functools.cache
def one_scheduler(key: str) -> Envelope:
    """One scheduler's envelope of ``example:NAME``, ``scenario:NAME`` or ``generated:SEED``."""
    waves = waves_of(key)
    return Envelope.of([run_one(reordered(waves, i), seed=i) for i in range(ENVELOPE_RUNS)])


def test_the_examples_are_found() -> None:
    found = [p.name for p in example_sets()]
    assert {"cluster", "batch"} <= set(found) and "invalid" not in found and "plugins" not in found


def test_statefulset_pods_are_replicas_of_one_class() -> None:
    """A StatefulSet's pods differ in their ordinal's marks (hostname, pod-name and pod-index
    labels, claims from the volumeClaimTemplates) besides the name: one class, compared by
    counts. Pods of two sets, or with another claim, are not of it."""

    def ss_pod(name: str, owner: str = "kafka", claim: str = "") -> Pod:
        return Pod.from_dict({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "data", "labels": {
                "app": "kafka", "statefulset.kubernetes.io/pod-name": name,
                "apps.kubernetes.io/pod-index": name.rpartition("-")[2]},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": owner,
                                     "uid": f"uid-{owner}", "controller": True}]},
            "spec": {"hostname": name, "subdomain": "kafka", "containers": [{"name": "main", "image": "k"}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim or f"data-{name}"}}]}})

    assert pod_class(ss_pod("kafka-2")) == pod_class(ss_pod("kafka-24"))
    assert pod_class(ss_pod("kafka-2")) != pod_class(ss_pod("kafka-3", claim="shared"))
    bare = ss_pod("kafka-2")
    bare.raw["metadata"].pop("ownerReferences")
    assert pod_class(Pod.from_dict(bare.raw)) != pod_class(ss_pod("kafka-24"))


@pytest.mark.parametrize("example", [p.name for p in example_sets()])
def test_instances_reach_one_schedulers_outcome_on_the_examples(example: str) -> None:
    env = one_scheduler(f"example:{example}")
    # The envelope is not empty: one scheduler's outcome on the example is largely determined.
    assert env.bound_per_class
    waves = example_waves(example)
    for n, seed in ((2, 0), (2, 1), (3, 0), (3, 1)):
        out = run_many(waves, n, seed=seed, poll_prob=1.0)
        assert env.check(out) == [], (n, seed)
    for n, seed in ((2, 2), (3, 2)):
        out = run_many(waves, n, seed=seed, poll_prob=0.3)
        assert env.check_safe(out) == [], (n, seed)


# Scenarios whose one-scheduler outcome is determined (the same envelope from 8 runs as from 40)
# and that preempt under PDBs.
SCENARIOS = (6, 7, 9, 17, 23)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_instances_reach_one_schedulers_outcome_when_preempting_under_pdbs(scenario: int) -> None:
    env = one_scheduler(f"generated:{scenario}")
    assert env.preempted_per_priority.get(10, 0) > 0  # one scheduler preempts here
    assert set(env.bound_per_priority) >= {500, 1000}
    waves = generated_scenario(scenario)
    for n, seed in ((2, 0), (2, 1), (3, 0), (3, 1)):
        out = run_many(waves, n, seed=seed, poll_prob=1.0)
        assert env.check(out) == [], (n, seed)


def test_the_scenario_clusters_are_found() -> None:
    found = scenario_clusters()
    assert {"preemption", "pod-anti-affinity", "volumes", "topology-spread"} <= set(found)


@pytest.mark.parametrize("scenario", scenario_clusters())
def test_instances_reach_one_schedulers_outcome_on_the_scenario_clusters(scenario: str) -> None:
    """Each end-to-end scenario (affinity, spreading, ports, volumes, gates, preemption...):
    the same outcome, down to the node wherever one scheduler's choice is determined."""
    env = one_scheduler(f"scenario:{scenario}")
    waves = scenario_waves(scenario)
    for n, seed in ((2, 0), (2, 1), (3, 0), (3, 1)):
        out = run_many(waves, n, seed=seed, poll_prob=1.0)
        assert env.check(out) == [], (n, seed)
    for n, seed, poll in ((2, 2, 0.3), (3, 3, 0.1)):
        out = run_many(waves, n, seed=seed, poll_prob=poll)
        # Lagging watches: the resolver still keeps anti-affinity, spread and ReadWriteOncePod.
        assert env.check_safe(out) == [], (n, seed)


def test_the_preemption_scenario_pins_its_nodes_and_victims() -> None:
    """The envelope is not vacuous where it matters: one scheduler always preempts n2's two
    priority-1 pods for ``important`` and leaves ``polite`` pending, and so must N instances."""
    env = one_scheduler("scenario:preemption")
    assert env.nodes["default/important"] == "n2"
    assert env.preempted_per_priority == {1: 2} and list(env.preempted_per_class.values()) == [2]
    assert env.verdicts == {"default/important": "bound", "default/polite": "pending"}


@pytest.mark.parametrize("scenario", SCENARIOS[:3])
def test_instances_on_lagging_watches_stay_safe_and_settled(scenario: int) -> None:
    env = one_scheduler(f"generated:{scenario}")
    waves = generated_scenario(scenario)
    for n, seed in ((2, 5), (3, 5)):
        out = run_many(waves, n, seed=seed, poll_prob=0.3)
        assert out.overcommitted == {} and out.unsettled == [], (n, seed)
        assert set(out.pdb_violations) <= env.pdb_violations, (n, seed)


def test_the_comparison_catches_instances_that_ignore_the_priority_order(monkeypatch: Any) -> None:
    """Without the priority barrier and with pods dispatched in arrival order, instances bind
    low-priority pods that the higher-priority ones then preempt: more victims than one
    scheduler ever makes."""
    env = one_scheduler("generated:6")
    monkeypatch.setattr(PriorityBarrier, "holds", lambda self, pod: False)

    def arrival_order(self: _Todo, limit: int | None = None) -> list[tuple[str, int]]:
        keys = list(self._priority)[:limit] if limit is not None else list(self._priority)
        return [(k, self._priority[k]) for k in keys]

    monkeypatch.setattr(_Todo, "ordered", arrival_order)
    waves = generated_scenario(6)
    bad = [env.check(run_many(waves, n, seed=seed, poll_prob=1.0)) for n, seed in ((2, 0), (3, 0))]
    assert all(any(b.startswith("preempted_per_priority[10]") for b in found) for found in bad), bad


# ---------------------------------------------------------------------------- ksched serve


def _served_outcome(client: RestClient, loaded: list[Any], timeout: float) -> Outcome:
    """Wait until the served cluster is at rest (nothing terminating, every pending pod tried,
    nothing changing for a while), then its outcome."""
    deadline = time.monotonic() + timeout
    last: Any = None
    quiet = 0
    while True:
        pods = [p for p in client.list("Pod")[0] if isinstance(p, Pod)]
        at_rest = all(p.deletion_timestamp is None for p in pods) and all(
            p.node_name or (p.condition("PodScheduled") is not None and not p.nominated_node_name) for p in pods)
        sig = sorted((p.key, p.node_name, p.resource_version) for p in pods)
        quiet = quiet + 1 if at_rest and sig == last else 0
        last = sig
        if quiet >= 5:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"the served cluster did not come to rest in {timeout:.0f} s")
        time.sleep(1.0)
    objects = [o for kind in ("Namespace", "PriorityClass", "Node", "PodDisruptionBudget")
               for o in client.list(kind)[0]]
    preempted = {f"{(e.raw.get('involvedObject') or {}).get('namespace')}/{(e.raw.get('involvedObject') or {}).get('name')}"
                 for e in client.list("Event")[0] if e.raw.get("reason") == "Preempted"}
    present = {p.key for p in pods}
    gone: dict[str, Pod] = {}
    for o in loaded:
        if isinstance(o, Pod) and o.key not in present:
            raw = dict(o.raw)
            if o.key in preempted:
                raw["status"] = {"conditions": [{"type": DISRUPTION_TARGET, "status": "True",
                                                 "reason": PREEMPTION_BY_SCHEDULER}]}
            gone[o.key] = Pod.from_dict(raw)
    return outcome(store_of([*objects, *pods]), gone)


def _serve(example: Path, tmp: Path, schedulers: int) -> tuple[subprocess.Popen[str], list[int], Path]:
    """``ksched serve --load example`` (with ``--schedulers N`` when N > 1): the process, its
    children's pids, the kubeconfig it writes."""
    tmp.mkdir()
    kc = tmp / "kc"
    env_vars = dict(os.environ)
    env_vars["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env_vars.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "ksched.cli.main", "serve", "--listen", "127.0.0.1:0", "--load", str(example),
           "--kubeconfig-out", str(kc)]
    if schedulers > 1:
        cmd += ["--schedulers", str(schedulers)]
    proc = subprocess.Popen(cmd, cwd=tmp, env=env_vars, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return proc, [], kc


def _children(proc: subprocess.Popen[str]) -> list[int]:
    assert proc.stdout is not None
    for _ in range(2):
        line = proc.stdout.readline()
        if line.startswith("started "):
            return [int(part.rpartition("(pid ")[2].rstrip(")")) for part in line.strip().split(", ")]
    return []


def _listening(proc: subprocess.Popen[str], kc: Path, timeout: float = 300) -> None:
    """Wait until the server says it listens (it has written its kubeconfig by then)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        if "listening on" in line:
            break
    while not (kc.exists() and kc.stat().st_size > 0):
        assert proc.poll() is None and time.monotonic() < deadline, "ksched serve did not start"
        time.sleep(0.2)


def _stop(proc: subprocess.Popen[str], pids: list[int]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for pid in pids:  # never leave a child behind, whatever happened
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _served_summary(client: RestClient, out: Outcome) -> dict[str, Any]:
    """What the served runs are compared on: bound pods per priority, and the pending pods'
    verdicts (the ``preemption:`` part of their messages) with their counts."""
    pending = Counter(verdict(f) for f in out.fates.values() if f not in ("bound", "preempted", "deleted",
                                                                          "deleting", "absent"))
    preempted = sum(1 for e in client.list("Event")[0] if e.raw.get("reason") == "Preempted")
    return {"bound_per_priority": dict(sorted(out.bound_per_priority.items())), "pending": dict(sorted(pending.items())),
            "preempted": preempted}


def test_serve_with_two_scheduler_processes_reaches_one_schedulers_outcome(tmp_path: Path) -> None:
    """``ksched serve --schedulers 2`` (a dispatcher and two instances over HTTP, simulated
    kubelets) and ``ksched serve`` with one scheduler, side by side on examples/cluster, end the
    same: as many pods bound per priority, the same pending pods' verdicts, the same preemptions
    (none); and the two instances' outcome is safe and settled. (The served runs end before
    simulate's 660 virtual seconds of Jobs, so they are compared with each other, not with the
    simulated envelope.)"""
    example = REPO / "examples" / "cluster"
    one, one_pids, one_kc = _serve(example, tmp_path / "one", 1)
    two, two_pids, two_kc = _serve(example, tmp_path / "two", 2)
    try:
        two_pids.extend(_children(two))
        assert len(two_pids) == 3, two_pids
        env = one_scheduler(f"example:{example.name}")  # meanwhile
        loaded = example_waves(example.name)[0]
        _listening(one, one_kc)
        one_client, two_client = RestClient(kubeconfig=str(one_kc)), RestClient(kubeconfig=str(two_kc))
        out_two = _served_outcome(two_client, loaded, timeout=300)
        out_one = _served_outcome(one_client, loaded, timeout=300)
        assert env.check_safe(out_two) == []
        got, want = _served_summary(two_client, out_two), _served_summary(one_client, out_one)
        assert got == want
        assert sum(got["bound_per_priority"].values()) > 0
    finally:
        _stop(two, two_pids)
        _stop(one, one_pids)
