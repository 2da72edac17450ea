"""The Job controller against upstream's documented semantics
(https://kubernetes.io/docs/concepts/workloads/controllers/job/ and pkg/controller/job), in
whole simulations (scheduler, simulated kubelet, controllers) on the virtual clock: completions
and parallelism, the pod failure back-off (10 s doubling) and backoffLimit (the Job fails after
exactly backoffLimit + 1 failures), OnFailure restarts, activeDeadlineSeconds, Indexed jobs
(names, labels, annotations, hostnames, completedIndexes, backoffLimitPerIndex), podFailurePolicy,
podReplacementPolicy, suspension, scaling down, the tracking finalizer and deletion with each
propagation policy. Conditions, reasons, messages and events are upstream's."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import mknode
from ksched.api.batch import Job
from ksched.api.pod import Pod
from ksched.api.watch import DELETED
from ksched.clock import DEFAULT_EPOCH
from ksched.controllers.job.backoff import BackoffStore, remaining_time
from ksched.controllers.job.indexed import first_pending_indexes, parse, to_string, with_indexes
from ksched.sim.simulation import Simulation

T0 = DEFAULT_EPOCH


def mkjob(name: str = "job", run: float | None = 10, code: int = 0, restart: str = "Never",
          **spec: Any) -> dict[str, Any]:
    ann = {}
    if run is not None:
        ann["ksched.io/run-seconds"] = str(run)
    if code:
        ann["ksched.io/exit-code"] = str(code)
    s: dict[str, Any] = {"template": {"metadata": {"annotations": ann},
                                      "spec": {"restartPolicy": restart,
                                               "containers": [{"name": "c", "image": "busybox"}]}}}
    s.update(spec)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"}, "spec": s}


class World:
    """A simulation with one big node; every pod event is recorded."""

    def __init__(self, *objs: dict[str, Any]) -> None:
        self.sim = Simulation()
        self.store = self.sim.store
        self.watch = self.store.watch("Pod")
        self.events: list[tuple[float, str, Pod]] = []
        node = mknode("n1")
        node["status"]["allocatable"]["pods"] = "200"
        assert self.sim.load([node, *objs]) == []

    def run(self, seconds: float = 7 * 24 * 3600) -> None:
        """Run until nothing more happens (or ``seconds`` pass)."""
        self.sim.run(max_seconds=seconds, progress=lambda _: self._record())
        self._record()

    def at(self, t: float) -> None:
        """Run up to ``t`` seconds after the start, then stay there."""
        self.run(t - (self.store.now() - T0))
        self.sim.clock.advance_to(T0 + t)
        self.run(0)

    def _record(self) -> None:
        for ev in self.watch.drain():
            if isinstance(ev.object, Pod):
                self.events.append((self.store.now() - T0, ev.type, ev.object))

    def job(self, name: str = "job") -> Job:
        j = self.store.get("Job", "default", name)
        assert isinstance(j, Job)
        return j

    def status(self, name: str = "job") -> dict[str, Any]:
        return self.job(name).raw["status"]  # type: ignore[no-any-return]

    def conditions(self, name: str = "job") -> list[tuple[str, str, str, str, float]]:
        from ksched.api.meta import parse_time

        return [(c["type"], c["status"], c.get("reason", ""), c.get("message", ""),
                 (parse_time(c["lastTransitionTime"]) or 0) - T0) for c in self.status(name).get("conditions") or ()]

    def pods(self) -> list[Pod]:
        return sorted((p for p in self.store.items("Pod") if isinstance(p, Pod)), key=lambda p: p.name)

    def created(self) -> list[tuple[float, str]]:
        """(time, name) of each pod the controller created, in creation order."""
        seen: dict[str, float] = {}
        for t, etype, p in self.events:
            if etype == "ADDED" and p.name not in seen:
                seen[p.name] = t
        return [(t, n) for n, t in seen.items()]

    def max_active(self) -> int:
        """The most pods active at once (not terminal, not being deleted)."""
        active: dict[str, bool] = {}
        best = 0
        for _, etype, p in self.events:
            active[p.uid] = etype != DELETED and p.phase not in ("Succeeded", "Failed") \
                and p.deletion_timestamp is None
            best = max(best, sum(active.values()))
        return best

    def job_events(self) -> list[tuple[str, str]]:
        return [(e.reason, e.message) for e in self.store.items("Event")  # type: ignore[attr-defined]
                if e.involved_object.get("kind") == "Job"]


# ---------------------------------------------------------------- completion


@pytest.mark.parametrize(("completions", "parallelism", "pods", "done_at", "max_active"), [
    (1, 1, 1, 11, 1),
    (3, 2, 3, 22, 2),  # two run 0-10; the sync a second later starts the third (11-21); done at 22
    (4, 4, 4, 11, 4),
    (2, 5, 2, 11, 2),  # never more than the completions left
    (5, 1, 5, 55, 1),
])
def test_completions_and_parallelism(completions: int, parallelism: int, pods: int, done_at: float,
                                     max_active: int) -> None:
    w = World(mkjob(completions=completions, parallelism=parallelism))
    w.run()
    st_ = w.status()
    assert st_["succeeded"] == completions and "failed" not in st_ and "active" not in st_
    assert w.conditions() == [
        ("SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods", done_at),
        ("Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods", done_at)]
    assert st_["completionTime"] == st_["conditions"][1]["lastTransitionTime"]
    assert st_["startTime"] == "2025-01-01T00:00:00Z" and st_["uncountedTerminatedPods"] == {}
    assert len(w.pods()) == pods and w.max_active() == max_active
    assert all(p.phase == "Succeeded" and p.finalizers == [] for p in w.pods())
    created = [m for r, m in w.job_events() if r == "SuccessfulCreate"]
    assert created == [f"Created pod: {p}" for _, p in w.created()]
    assert ("Completed", "Job completed") in w.job_events()


def test_a_work_queue_job_completes_once_a_pod_succeeded_and_none_is_left() -> None:
    w = World(mkjob(parallelism=3, completions=None))
    w.run()
    assert w.status()["succeeded"] == 3 and len(w.pods()) == 3
    assert w.conditions()[-1][:3] == ("Complete", "True", "CompletionsReached")


def test_pods_of_a_job() -> None:
    w = World(mkjob())
    w.run(5)
    job = w.job()
    (pod,) = w.pods()
    assert pod.name.startswith("job-") and len(pod.name) == 9
    assert pod.labels == {"batch.kubernetes.io/controller-uid": job.uid, "batch.kubernetes.io/job-name": "job",
                          "controller-uid": job.uid, "job-name": "job"}
    assert pod.finalizers == ["batch.kubernetes.io/job-tracking"]
    assert pod.raw["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": job.uid, "controller": True,
         "blockOwnerDeletion": True}]
    assert pod.annotations == {"ksched.io/run-seconds": "10"}
    st_ = w.status()
    assert (st_["active"], st_["ready"], st_["terminating"]) == (1, 1, 0)


# ---------------------------------------------------------------- failures and back-off


def backoff_model(limit: int, run: float) -> tuple[list[float], float]:
    """Creation times of the pods and when the Job fails: each failed pod is replaced
    10 s x 2^(failures-1) (at most 10 min) after it finished; the Job fails at the first sync
    that sees failure limit+1. The Job syncs a second after each change of its pods or its own
    status: after a pod is created (and starts, at once) it syncs at +1 (writing ready=1) and
    so again at +2, and a second after the pod fails."""
    created = [0.0]
    failures = 0
    while True:
        finished = created[-1] + run
        failures += 1
        if failures > limit:
            syncs = (created[-1] + 1, created[-1] + 2, finished + 1)
            return created, min(t for t in syncs if t >= finished)
        created.append(finished + min(10.0 * 2 ** (failures - 1), 600.0))


@settings(max_examples=25, deadline=None)
@given(limit=st.integers(0, 5), run=st.integers(1, 60))
def test_backoff_limit_fails_the_job_after_exactly_limit_plus_one_failures(limit: int, run: int) -> None:
    w = World(mkjob(run=run, code=1, backoffLimit=limit))
    w.run()
    created, failed_at = backoff_model(limit, run)
    assert [t for t, _ in w.created()] == created
    assert w.status()["failed"] == limit + 1 and "succeeded" not in w.status()
    assert w.conditions() == [
        ("FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit", failed_at),
        ("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit", failed_at)]
    assert ("BackoffLimitExceeded", "Job has reached the specified backoff limit") in w.job_events()


def test_a_success_resets_the_back_off() -> None:
    store = BackoffStore()
    from api_objects import mkpod

    def finished(name: str, t: float, phase: str) -> Pod:
        raw = mkpod(name)
        raw["status"] = {"phase": phase, "containerStatuses": [{"name": "c", "state": {"terminated": {
            "exitCode": 0, "finishedAt": f"2025-01-01T00:00:{t:02.0f}Z"}}}]}
        return Pod(raw)

    r = store.new_record("k", [], [finished("a", 10, "Failed"), finished("b", 20, "Failed")])
    assert (r.failures_after_last_success, r.last_failure_time) == (2, T0 + 20)
    store.update(r)
    # A success between failures: only the failures after it count.
    r = store.new_record("k", [finished("c", 30, "Succeeded")], [finished("d", 25, "Failed"),
                                                                 finished("e", 40, "Failed")])
    assert (r.failures_after_last_success, r.last_failure_time) == (1, T0 + 40)
    r = store.new_record("k", [finished("f", 50, "Succeeded")], [])
    assert (r.failures_after_last_success, r.last_failure_time) == (0, None)


@pytest.mark.parametrize(("failures", "elapsed", "remaining"), [
    (0, 0, 0), (1, 0, 10), (1, 4, 6), (1, 10, 0), (2, 0, 20), (3, 5, 35), (7, 0, 600), (20, 100, 500),
])
def test_remaining_back_off(failures: int, elapsed: float, remaining: float) -> None:
    assert remaining_time(100 + elapsed, failures, 100) == remaining


def test_on_failure_restarts_count_against_the_backoff_limit() -> None:
    w = World(mkjob(run=5, code=1, restart="OnFailure", backoffLimit=2))
    w.run()
    # Restarts at 5 (at once) and 20 (10 s back-off): two restarts reach the limit; the sync a
    # second later fails the Job and deletes the pod, which stops a second after.
    assert w.conditions()[0][:3] == ("FailureTarget", "True", "BackoffLimitExceeded")
    assert w.conditions()[0][4] == 21
    assert w.conditions()[1][:3] == ("Failed", "True", "BackoffLimitExceeded")
    assert w.status()["failed"] == 1 and len(w.created()) == 1 and w.pods() == []


def test_active_deadline() -> None:
    w = World(mkjob(run=None, activeDeadlineSeconds=30, parallelism=2, completions=4))
    w.run()
    assert w.conditions() == [
        ("FailureTarget", "True", "DeadlineExceeded", "Job was active longer than specified deadline", 30),
        # The pods were deleted at 30 and stopped at 31 (the kubelet stops both in one step); the
        # sync due a second after the deletion runs after that step and finishes it.
        ("Failed", "True", "DeadlineExceeded", "Job was active longer than specified deadline", 31)]
    assert w.status()["failed"] == 2 and w.pods() == []
    assert [m for r, m in w.job_events() if r == "SuccessfulDelete"] == [f"Deleted pod: {n}" for _, n in w.created()]


def test_a_deleted_pod_counts_as_failed_and_is_replaced_after_its_back_off() -> None:
    w = World(mkjob(run=None))
    w.at(20)
    (pod,) = w.pods()
    w.store.delete("Pod", "default", pod.name)  # kubectl delete pod: 30 s grace, stops in 1 s
    w.run(100)
    # Terminating counts as failed (podReplacementPolicy TerminatingOrFailed); the containers
    # stopped at 21: the replacement 10 s after.
    assert [t for t, _ in w.created()] == [0, 31]
    assert w.status()["failed"] == 1 and w.status()["active"] == 1


def test_replacement_policy_failed_waits_for_the_pod_to_terminate() -> None:
    w = World(mkjob(run=None, podReplacementPolicy="Failed"))
    w.at(20)
    (pod,) = w.pods()
    raw = copy.deepcopy(pod.raw)
    raw["metadata"]["annotations"]["ksched.io/termination-seconds"] = "25"
    w.store.update(raw)
    w.store.delete("Pod", "default", pod.name)
    w.run(100)
    # Failed at 45; the sync at 46; back-off 10 s from the failure: replaced at 55.
    assert [t for t, _ in w.created()] == [0, 55]


# ---------------------------------------------------------------- pod failure policy


def test_pod_failure_policy_fail_job() -> None:
    w = World(mkjob(run=5, code=42, backoffLimit=6, podFailurePolicy={"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}))
    w.run()
    (_, pod_name), = w.created()
    msg = f"Container c for pod default/{pod_name} failed with exit code 42 matching FailJob rule at index 0"
    assert w.conditions() == [("FailureTarget", "True", "PodFailurePolicy", msg, 6),
                              ("Failed", "True", "PodFailurePolicy", msg, 6)]
    assert w.status()["failed"] == 1


def test_pod_failure_policy_ignore_does_not_count() -> None:
    w = World(mkjob(run=5, code=3, backoffLimit=0, podFailurePolicy={"rules": [
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}}]}))
    w.run(100)
    # Ignored failures do not count towards backoffLimit (the Job goes on), but the back-off
    # still spaces the replacements (upstream's newBackoffRecord takes every failed pod).
    assert [t for t, _ in w.created()][:4] == [0, 15, 40, 85]
    assert "failed" not in w.status() and w.conditions() == []


def test_pod_failure_policy_on_pod_conditions() -> None:
    w = World(mkjob(run=None, backoffLimit=0, podFailurePolicy={"rules": [
        {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]}]}))
    w.run(5)
    (pod,) = w.pods()
    w.store.patch("Pod", "default", pod.name, {"status": {"phase": "Failed", "conditions": [
        *pod.conditions, {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC"}]}},
        subresource="status")
    w.run(20)
    assert w.conditions()[-1][:3] == ("Failed", "True", "BackoffLimitExceeded")


# ---------------------------------------------------------------- Indexed


def test_indexed_pods() -> None:
    w = World(mkjob("idx", completions=4, parallelism=2, completionMode="Indexed"))
    w.run()
    assert w.status("idx")["completedIndexes"] == "0-3" and w.status("idx")["succeeded"] == 4
    assert w.conditions("idx")[-1][:3] == ("Complete", "True", "CompletionsReached")
    for i, p in enumerate(w.pods()):
        assert p.name.startswith(f"idx-{i}-") and len(p.name) == len(f"idx-{i}-") + 5
        assert p.labels["batch.kubernetes.io/job-completion-index"] == str(i)
        assert p.annotations["batch.kubernetes.io/job-completion-index"] == str(i)
        assert p.raw["spec"]["hostname"] == f"idx-{i}"
        assert p.raw["spec"]["containers"][0]["env"] == [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {
            "fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}]
    # The two lowest indexes first, then the next two.
    assert [(t, n.split("-")[1]) for t, n in w.created()] == [(0, "0"), (0, "1"), (11, "2"), (11, "3")]


def test_backoff_limit_per_index_and_failed_indexes() -> None:
    w = World(mkjob("idx", run=5, code=1, completions=3, parallelism=3, completionMode="Indexed",
                    backoffLimitPerIndex=1))
    w.run()
    st_ = w.status("idx")
    assert st_["failedIndexes"] == "0-2" and st_["failed"] == 6
    assert w.conditions("idx")[-1][:4] == ("Failed", "True", "FailedIndexes", "Job has failed indexes")
    # Each index failed twice; the replacement carried the index's failure count.
    counts = sorted(p.annotations.get("batch.kubernetes.io/job-index-failure-count", "")
                    for _, _, p in w.events if p.name)
    assert "1" in counts and "0" in counts


def test_max_failed_indexes() -> None:
    w = World(mkjob("idx", run=5, code=1, completions=3, parallelism=1, completionMode="Indexed",
                    backoffLimitPerIndex=0, maxFailedIndexes=0))
    w.run()
    assert w.conditions("idx")[-1][:4] == ("Failed", "True", "MaxFailedIndexesExceeded",
                                           "Job has exceeded the specified maximal number of failed indexes")
    assert w.status("idx")["failedIndexes"] == "0"


@pytest.mark.parametrize(("text", "completions", "back"), [
    ("", 5, ""), ("0-3", 5, "0-3"), ("1,3-5,7", 10, "1,3-5,7"), ("0,1", 5, "0,1"), ("0-9", 5, "0-4"),
    ("x,2", 5, "2"), ("2,3,4", 10, "2-4"),
])
def test_index_intervals_round_trip(text: str, completions: int, back: str) -> None:
    assert to_string(parse(text, completions)) == back


def test_first_pending_indexes() -> None:
    taken = with_indexes((), [0, 2, 3, 7])
    assert first_pending_indexes(taken, 3, 10) == [1, 4, 5]
    assert first_pending_indexes(taken, 10, 6) == [1, 4, 5]
    assert first_pending_indexes((), 2, 2) == [0, 1]


# ---------------------------------------------------------------- suspension and scaling


def test_a_suspended_job_creates_nothing_until_resumed() -> None:
    w = World(mkjob(suspend=True))
    w.at(60)
    assert w.pods() == [] and "startTime" not in w.status()
    assert w.conditions() == [("Suspended", "True", "JobSuspended", "Job suspended", 0)]
    raw = w.job().deepcopy_raw()
    raw["spec"]["suspend"] = False
    w.store.update(raw)
    w.run()
    assert w.conditions()[0] == ("Suspended", "False", "JobResumed", "Job resumed", 60)
    assert w.status()["startTime"] == "2025-01-01T00:01:00Z"
    assert w.conditions()[-1][:3] == ("Complete", "True", "CompletionsReached")


def test_suspending_deletes_the_pods_without_counting_them() -> None:
    w = World(mkjob(run=None, parallelism=3, completions=3))
    w.run(5)
    raw = w.job().deepcopy_raw()
    raw["spec"]["suspend"] = True
    w.store.update(raw)
    w.run(30)
    assert w.pods() == [] and "failed" not in w.status() and "active" not in w.status()
    assert ("Suspended", "Job suspended") in w.job_events()


def test_scaling_parallelism_down_deletes_pods_without_counting_them() -> None:
    w = World(mkjob(run=None, parallelism=3, completions=10))
    w.run(5)
    raw = w.job().deepcopy_raw()
    raw["spec"]["parallelism"] = 1
    w.store.update(raw)
    w.run(30)
    assert len(w.pods()) == 1 and w.status()["active"] == 1 and "failed" not in w.status()


@settings(max_examples=20, deadline=None)
@given(completions=st.one_of(st.none(), st.integers(1, 6)), parallelism=st.integers(1, 4),
       run=st.integers(1, 30), fail_every=st.integers(0, 3), indexed=st.booleans())
def test_never_more_active_pods_than_parallelism(completions: int | None, parallelism: int, run: int,
                                                 fail_every: int, indexed: bool) -> None:
    if indexed and completions is None:
        completions = 3
    spec: dict[str, Any] = {"parallelism": parallelism, "completions": completions, "backoffLimit": 3}
    if indexed:
        spec["completionMode"] = "Indexed"
    w = World(mkjob(run=run, code=1 if fail_every == 1 else 0, **spec))
    w.run(3600)
    assert w.max_active() <= parallelism
    if completions is not None:
        assert w.max_active() <= completions
    st_ = w.status()
    conds = [c[0] for c in w.conditions()]
    if "Complete" in conds:
        assert st_.get("succeeded", 0) >= (completions or 1)
    # Every pod that finished has been counted (once) and released; none is left terminating.
    finished = sum(1 for p in w.pods() if p.phase in ("Succeeded", "Failed"))
    assert all(p.finalizers == [] for p in w.pods() if p.phase in ("Succeeded", "Failed"))
    assert finished <= st_.get("succeeded", 0) + st_.get("failed", 0) <= len(w.created())
    assert st_["terminating"] == 0 and st_["uncountedTerminatedPods"] == {}


# ---------------------------------------------------------------- deletion


def test_deleting_a_job_in_the_background_deletes_its_pods() -> None:
    w = World(mkjob(run=None, parallelism=2, completions=2))
    w.run(5)
    w.store.delete("Job", "default", "job", propagation_policy="Background")
    w.run(30)
    assert w.pods() == [] and w.store.try_get("Job", "default", "job") is None


def test_deleting_a_job_in_the_foreground_waits_for_its_pods() -> None:
    w = World(mkjob(run=None, parallelism=2, completions=2))
    w.run(5)
    w.store.delete("Job", "default", "job", propagation_policy="Foreground")
    w.run(0.5)
    assert w.job().finalizers == ["foregroundDeletion"]
    assert all(p.deletion_timestamp is not None for p in w.pods())
    w.run(30)
    assert w.pods() == [] and w.store.try_get("Job", "default", "job") is None


def test_deleting_a_job_by_default_orphans_its_pods_and_releases_them() -> None:
    w = World(mkjob(run=None, parallelism=2, completions=2))
    w.run(5)
    w.store.delete("Job", "default", "job")  # the API's default for a Job: Orphan
    w.run(30)
    assert w.store.try_get("Job", "default", "job") is None
    pods = w.pods()
    assert len(pods) == 2
    assert all(p.phase == "Running" and p.owner_references == () and p.finalizers == [] for p in pods)
