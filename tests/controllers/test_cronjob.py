"""The CronJob controller against upstream's documented semantics
(https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ and pkg/controller/cronjob),
in whole simulations on the virtual clock: one Job per scheduled time named
``<cronjob>-<minutes since the epoch>`` with the scheduled-timestamp annotation (in the CronJob's
time zone), concurrency policies, startingDeadlineSeconds and missed times, history limits,
lastScheduleTime and lastSuccessfulTime, suspension, and upstream's event reasons and messages.
A hypothesis test checks the Jobs of random schedules against the schedule's own times."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import mknode
from ksched.api.batch import CronJob, Job
from ksched.api.cron import parse_standard
from ksched.api.meta import parse_time
from ksched.clock import DEFAULT_EPOCH
from ksched.controllers.cronjob import job_name, most_recent_schedule_time
from ksched.sim.simulation import Simulation

T0 = DEFAULT_EPOCH  # 2025-01-01T00:00:00Z, a Wednesday


def mkcronjob(schedule: str = "*/2 * * * *", run: float | None = 30, code: int = 0, name: str = "tick",
              **spec: Any) -> dict[str, Any]:
    ann = {} if run is None else {"ksched.io/run-seconds": str(run)}
    if code:
        ann["ksched.io/exit-code"] = str(code)
    s: dict[str, Any] = {"schedule": schedule, "jobTemplate": {
        "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"annotations": ann}, "spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}
    s.update(spec)
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": "default"},
            "spec": s}


class World:
    def __init__(self, *objs: dict[str, Any]) -> None:
        self.sim = Simulation()
        self.store = self.sim.store
        self.jobs_seen: dict[str, float] = {}
        self.watch = self.store.watch("Job")
        node = mknode("n1")
        node["status"]["allocatable"]["pods"] = "500"
        assert self.sim.load([node, *objs]) == []

    def until(self, t: float) -> None:
        """Run to ``t`` seconds after the start."""
        self.sim.run(max_seconds=t - (self.store.now() - T0), progress=lambda _: self._record())
        self.sim.clock.advance_to(T0 + t)
        self.sim.run(max_seconds=0, progress=lambda _: self._record())
        self._record()

    def _record(self) -> None:
        for ev in self.watch.drain():
            if ev.type == "ADDED" and isinstance(ev.object, Job):
                self.jobs_seen.setdefault(ev.object.name, self.store.now() - T0)

    def cronjob(self, name: str = "tick") -> CronJob:
        cj = self.store.get("CronJob", "default", name)
        assert isinstance(cj, CronJob)
        return cj

    def jobs(self) -> list[Job]:
        return sorted((j for j in self.store.items("Job") if isinstance(j, Job)), key=lambda j: j.name)

    def events(self) -> list[tuple[str, str]]:
        return [(e.reason, e.message) for e in self.store.items("Event")  # type: ignore[attr-defined]
                if e.involved_object.get("kind") == "CronJob"]

    def update(self, **spec: Any) -> None:
        raw = self.cronjob().deepcopy_raw()
        raw["spec"].update(spec)
        self.store.update(raw)


def minutes(t: float) -> int:
    return int(T0 + t) // 60


def test_a_job_per_scheduled_time() -> None:
    w = World(mkcronjob(successfulJobsHistoryLimit=10))
    w.until(7 * 60)
    cj = w.cronjob()
    # Created 100 ms after each time, as the controller wakes up then.
    assert w.jobs_seen == {f"tick-{minutes(t)}": pytest.approx(t + 0.1) for t in (120, 240, 360)}
    job = w.jobs()[0]
    assert job.labels == {"team": "a"}
    assert job.annotations == {"note": "x", "batch.kubernetes.io/cronjob-scheduled-timestamp": "2025-01-01T00:02:00Z"}
    assert job.raw["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "tick",
                                                       "uid": cj.uid, "controller": True,
                                                       "blockOwnerDeletion": True}]
    assert cj.raw["status"]["lastScheduleTime"] == "2025-01-01T00:06:00Z"
    assert cj.raw["status"]["lastSuccessfulTime"] == "2025-01-01T00:06:31Z"
    assert "active" not in cj.raw["status"]  # the 00:06 Job finished at 00:06:31
    assert w.events()[:2] == [("SuccessfulCreate", f"Created job tick-{minutes(120)}"),
                              ("SawCompletedJob", f"Saw completed job: tick-{minutes(120)}, condition: Complete")]


def test_the_active_list_while_a_job_runs() -> None:
    w = World(mkcronjob(run=None))
    w.until(121)
    (job,) = w.jobs()
    assert w.cronjob().raw["status"]["active"] == [{"kind": "Job", "namespace": "default", "name": job.name,
                                                    "uid": job.uid, "apiVersion": "batch/v1",
                                                    "resourceVersion": w.cronjob().raw["status"]["active"][0][
                                                        "resourceVersion"]}]


@pytest.mark.parametrize(("policy", "jobs_at_7m", "active"), [
    ("Allow", 3, 3),    # every two minutes, each running for ever
    ("Forbid", 1, 1),   # the first keeps running: later times are skipped
    ("Replace", 1, 1),  # each new one replaces the running one
])
def test_concurrency_policies(policy: str, jobs_at_7m: int, active: int) -> None:
    w = World(mkcronjob(run=None, concurrencyPolicy=policy))
    w.until(7 * 60)
    live = [j for j in w.jobs() if j.deletion_timestamp is None]
    assert len(live) == jobs_at_7m
    assert len(w.cronjob().raw["status"]["active"]) == active
    if policy == "Forbid":
        assert ("JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy "
                                    "is Forbid") in w.events()
        assert live[0].name == f"tick-{minutes(120)}"
    if policy == "Replace":
        assert live[0].name == f"tick-{minutes(360)}"
        assert ("SuccessfulDelete", f"Deleted job tick-{minutes(120)}") in w.events()


def test_history_limits_keep_the_newest_finished_jobs() -> None:
    w = World(mkcronjob(schedule="* * * * *", run=10, successfulJobsHistoryLimit=2))
    w.until(6 * 60 + 30)
    names = [j.name for j in w.jobs()]
    assert names == [f"tick-{minutes(t)}" for t in (300, 360)]
    assert ("SuccessfulDelete", f"Deleted job tick-{minutes(60)}") in w.events()


def test_failed_jobs_history_limit() -> None:
    w = World(mkcronjob(schedule="* * * * *", run=5, code=1, failedJobsHistoryLimit=1))
    w.until(5 * 60 + 30)
    (job,) = w.jobs()
    assert job.name == f"tick-{minutes(300)}" and job.finished_condition()["type"] == "Failed"  # type: ignore[index]


def test_a_suspended_cronjob_creates_nothing_and_catches_up_with_the_latest_time_only() -> None:
    w = World(mkcronjob(suspend=True, run=None, concurrencyPolicy="Allow"))
    w.until(10 * 60 + 10)
    assert w.jobs() == []
    w.update(suspend=False)
    w.until(10 * 60 + 11)
    # Five times were missed (2, 4, 6, 8, 10 min): only the most recent one runs.
    assert [j.name for j in w.jobs()] == [f"tick-{minutes(600)}"]


def test_starting_deadline_skips_a_time_missed_by_too_much() -> None:
    w = World(mkcronjob(suspend=True, run=None, startingDeadlineSeconds=30))
    w.until(10 * 60 + 45)
    w.update(suspend=False)
    w.until(11 * 60)
    assert w.jobs() == []
    w.until(12 * 60 + 1)
    assert [j.name for j in w.jobs()] == [f"tick-{minutes(720)}"]
    w2 = World(mkcronjob(suspend=True, run=None, startingDeadlineSeconds=60))
    w2.until(10 * 60 + 45)
    w2.update(suspend=False)
    w2.until(10 * 60 + 46)
    assert [j.name for j in w2.jobs()] == [f"tick-{minutes(600)}"]


def test_too_many_missed_times() -> None:
    w = World(mkcronjob(schedule="* * * * *", suspend=True, run=None))
    w.until(150 * 60 + 30)
    w.update(suspend=False)
    w.until(150 * 60 + 31)
    assert ("TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or "
                                  "check clock skew") in w.events()
    assert [j.name for j in w.jobs()] == [f"tick-{minutes(150 * 60)}"]


def test_a_time_zone() -> None:
    w = World(mkcronjob(schedule="0 9 * * *", timeZone="Europe/Berlin", run=None))
    w.until(8 * 3600 + 1)  # 09:00 in Berlin is 08:00 UTC in winter
    (job,) = w.jobs()
    assert job.name == f"tick-{minutes(8 * 3600)}"
    assert job.annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"] == "2025-01-01T09:00:00+01:00"


def test_deleting_a_cronjob_deletes_its_jobs_and_their_pods() -> None:
    w = World(mkcronjob(run=None))
    w.until(5 * 60)
    assert len(w.jobs()) == 2 and len(w.store.items("Pod")) == 2
    w.store.delete("CronJob", "default", "tick", propagation_policy="Background")
    w.until(6 * 60)
    assert w.jobs() == [] and w.store.items("Pod") == []


def test_changing_the_schedule_requeues_for_the_new_one() -> None:
    w = World(mkcronjob(schedule="0 * * * *", run=None))
    w.until(30)
    w.update(schedule="*/5 * * * *")
    w.until(5 * 60 + 1)
    assert [j.name for j in w.jobs()] == [f"tick-{minutes(300)}"]


# ---------------------------------------------------------------- the schedule arithmetic


def test_job_names_are_minutes_since_the_epoch() -> None:
    cj = CronJob({"metadata": {"name": "tick"}})
    assert job_name(cj, T0 + 120) == "tick-28928162"


def test_most_recent_schedule_time() -> None:
    cj = CronJob({"metadata": {"name": "c", "creationTimestamp": "2025-01-01T00:00:00Z"}, "spec": {}})
    sched = parse_standard("*/10 * * * *")
    assert most_recent_schedule_time(cj, T0 + 300, sched, True)[1:] == (None, "none")
    assert most_recent_schedule_time(cj, T0 + 605, sched, True)[1:] == (T0 + 600, "few")
    assert most_recent_schedule_time(cj, T0 + 3605, sched, True)[1:] == (T0 + 3600, "few")
    assert most_recent_schedule_time(cj, T0 + 101 * 600 + 5, sched, True)[1:] == (T0 + 101 * 600, "many")
    # Irregular schedules: the most recent time itself, not an estimate.
    monthly = parse_standard("0 0 5 * *")
    assert most_recent_schedule_time(cj, T0 + 100 * 86400, monthly, True)[1] == parse_time("2025-04-05T00:00:00Z")


@settings(max_examples=12, deadline=None)
@given(schedule=st.sampled_from(["* * * * *", "*/3 * * * *", "5,17,40 * * * *", "0 */2 * * *", "@hourly",
                                 "@every 7m", "30 1-3 * * *"]),
       hours=st.integers(1, 3), run=st.integers(1, 50))
def test_one_job_per_scheduled_time_with_its_name(schedule: str, hours: int, run: int) -> None:
    w = World(mkcronjob(schedule=schedule, run=run, successfulJobsHistoryLimit=1000))
    w.until(hours * 3600 + 0.5)  # a Job is created 100 ms after its time
    sched = parse_standard(schedule)
    times = []
    t = sched.next(T0)
    while t is not None and t <= T0 + hours * 3600:
        times.append(t)
        t = sched.next(t)
    assert sorted(w.jobs_seen) == sorted(f"tick-{int(t) // 60}" for t in times)
    # Every Job but one still running at the end has succeeded.
    assert all(j.is_succeeded for j in w.jobs() if j.name != f"tick-{int(times[-1]) // 60}") if times else True
    if times:
        assert w.cronjob().last_schedule_time == times[-1]
