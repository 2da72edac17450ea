"""batch/v1 Job and CronJob in the API store: defaults (pkg/apis/batch/v1/defaults.go, with the
core pod defaults in templates), the Job strategy's generated selector and labels, validation
with upstream's field paths and messages, immutable fields, the status subresource, and the
generateName suffix (five characters of upstream's alphabet, base cut to 58)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from ksched.api.batch import CronJob, Job
from ksched.api.errors import Invalid
from ksched.api.kinds import kind_class
from ksched.apiserver.store import Store

POD_SPEC = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}


def mkjob(name: str = "pi", **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"template": {"spec": copy.deepcopy(POD_SPEC)}}
    s.update(spec)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"}, "spec": s}


def mkcronjob(name: str = "tick", schedule: str = "*/5 * * * *", **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": copy.deepcopy(POD_SPEC)}}}}
    s.update(spec)
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": "default"},
            "spec": s}


def invalid(store: Store, raw: dict[str, Any]) -> str:
    with pytest.raises(Invalid) as ei:
        store.create(raw)
    return ei.value.message


# ---------------------------------------------------------------- defaults and the generated selector


def test_job_defaults_and_generated_selector(store: Store) -> None:
    raw = mkjob()
    raw["spec"]["template"]["metadata"] = {"labels": {"app": "pi"}}
    job = store.create(raw)
    assert isinstance(job, Job)
    spec = job.raw["spec"]
    uid = job.uid
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert (spec["completionMode"], spec["suspend"], spec["podReplacementPolicy"]) == \
        ("NonIndexed", False, "TerminatingOrFailed")
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert spec["template"]["metadata"]["labels"] == {
        "app": "pi", "job-name": "pi", "batch.kubernetes.io/job-name": "pi",
        "controller-uid": uid, "batch.kubernetes.io/controller-uid": uid}
    # A Job without labels of its own takes its template's: the given ones when the template has
    # some (defaulting of the request), else the generated ones (defaulting on the read back).
    assert job.labels == {"app": "pi"}
    bare = store.create(mkjob("bare"))
    assert bare.labels == bare.raw["spec"]["template"]["metadata"]["labels"]
    assert bare.labels["batch.kubernetes.io/job-name"] == "bare"
    # The core pod defaults inside the template.
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] == 30
    assert spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    assert spec["template"]["spec"]["schedulerName"] == "default-scheduler"
    assert job.raw["status"] == {} and job.generation == 1
    assert kind_class("batch/v1", "Job") is Job


@pytest.mark.parametrize(("given", "want"), [
    ({}, (1, 1)),
    ({"parallelism": 3}, (None, 3)),
    ({"completions": 5}, (5, 1)),
    ({"completions": 5, "parallelism": 2}, (5, 2)),
])
def test_completions_and_parallelism_defaults(store: Store, given: dict[str, int],
                                              want: tuple[int | None, int]) -> None:
    job = store.create(mkjob(**given))
    assert (job.raw["spec"].get("completions"), job.raw["spec"]["parallelism"]) == want


def test_backoff_limit_per_index_defaults_backoff_limit_to_max_int32(store: Store) -> None:
    job = store.create(mkjob(completionMode="Indexed", completions=3, backoffLimitPerIndex=1))
    assert job.raw["spec"]["backoffLimit"] == 2**31 - 1


def test_a_pod_failure_policy_defaults_replacement_to_failed_and_condition_status(store: Store) -> None:
    job = store.create(mkjob(podFailurePolicy={"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}))
    assert job.raw["spec"]["podReplacementPolicy"] == "Failed"
    assert job.raw["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"] == [
        {"type": "DisruptionTarget", "status": "True"}]


def test_a_manual_selector_is_kept(store: Store) -> None:
    raw = mkjob(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    raw["spec"]["template"]["metadata"] = {"labels": {"app": "x"}}
    job = store.create(raw)
    assert job.raw["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    assert job.raw["spec"]["template"]["metadata"]["labels"] == {"app": "x"}


def test_cronjob_defaults(store: Store) -> None:
    cj = store.create(mkcronjob())
    assert isinstance(cj, CronJob)
    spec = cj.raw["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"], spec["successfulJobsHistoryLimit"],
            spec["failedJobsHistoryLimit"]) == ("Allow", False, 3, 1)
    assert spec["jobTemplate"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 30
    assert "completions" not in spec["jobTemplate"]["spec"]  # a template, not a Job: no Job defaults
    assert kind_class("batch/v1beta1", "CronJob") is CronJob
    assert cj.SHORT_NAMES == ("cj",)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(("spec", "message"), [
    ({"parallelism": -1}, 'spec.parallelism: Invalid value: -1: must be greater than or equal to 0'),
    ({"completions": -1}, 'spec.completions: Invalid value: -1: must be greater than or equal to 0'),
    ({"backoffLimit": -1}, 'spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0'),
    ({"activeDeadlineSeconds": -1},
     'spec.activeDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0'),
    ({"ttlSecondsAfterFinished": -1},
     'spec.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0'),
    ({"completionMode": "Sometimes"},
     'spec.completionMode: Unsupported value: "Sometimes": supported values: "NonIndexed", "Indexed"'),
    ({"completionMode": "Indexed", "completions": None, "parallelism": 2},
     "spec.completions: Required value: when completion mode is Indexed"),
    ({"backoffLimitPerIndex": 1}, "spec.backoffLimitPerIndex: Forbidden: requires indexed completion mode"),
    ({"podReplacementPolicy": "Never"},
     'spec.podReplacementPolicy: Unsupported value: "Never": supported values: "Failed", "TerminatingOrFailed"'),
])
def test_job_spec_validation(store: Store, spec: dict[str, Any], message: str) -> None:
    assert invalid(store, mkjob(**spec)) == f'Job.batch "pi" is invalid: {message}'
    assert store.count("Job") == 0


def test_a_job_pod_template_must_not_restart_always(store: Store) -> None:
    raw = mkjob()
    del raw["spec"]["template"]["spec"]["restartPolicy"]  # the pod default, Always
    assert invalid(store, raw) == ('Job.batch "pi" is invalid: spec.template.spec.restartPolicy: Unsupported value: '
                                   '"Always": supported values: "OnFailure", "Never"')


def test_the_template_is_validated_as_a_pod_with_its_path(store: Store) -> None:
    raw = mkjob()
    raw["spec"]["template"]["spec"]["containers"][0]["image"] = ""
    assert invalid(store, raw) == 'Job.batch "pi" is invalid: spec.template.spec.containers[0].image: Required value'


def test_selector_must_match_the_template_labels(store: Store) -> None:
    raw = mkjob(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    raw["spec"]["template"]["metadata"] = {"labels": {"app": "y"}}
    assert "spec.template.metadata.labels: Invalid value: dict: `selector` does not match template `labels`" \
        in invalid(store, raw)


def test_a_wrong_generated_label_is_refused(store: Store) -> None:
    raw = mkjob()
    raw["spec"]["template"]["metadata"] = {"labels": {"batch.kubernetes.io/job-name": "other"}}
    msg = invalid(store, raw)
    assert "spec.template.metadata.labels[batch.kubernetes.io/job-name]: Invalid value: \"other\": must be 'pi'" in msg


def test_an_indexed_job_name_must_make_valid_hostnames(store: Store) -> None:
    name = "a" * 62
    msg = invalid(store, mkjob(name, completionMode="Indexed", completions=10))
    assert f"metadata.name: Invalid value: \"{name}\": will not able to create pod with invalid DNS label: " \
           f"{name}-9" in msg


def test_pod_failure_policy_validation(store: Store) -> None:
    msg = invalid(store, mkjob(podFailurePolicy={"rules": [
        {"action": "Explode", "onExitCodes": {"operator": "In", "values": [0, 3, 2]}},
        {"action": "Ignore"}]}))
    assert 'spec.podFailurePolicy.rules[0].action: Unsupported value: "Explode": supported values: "Count", ' \
           '"FailIndex", "FailJob", "Ignore"' in msg
    assert "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In " \
           "operator" in msg
    assert "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Invalid value: 2: must be ordered" in msg
    assert "spec.podFailurePolicy.rules[1]: Required value: specifying one of OnExitCodes and OnPodConditions " \
           "is required" in msg
    raw = mkjob(podFailurePolicy={"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}]})
    raw["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    assert 'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when ' \
           "podFailurePolicy is specified" in invalid(store, raw)


@pytest.mark.parametrize(("raw", "message"), [
    (mkcronjob(schedule="not a schedule"),
     'spec.schedule: Invalid value: "not a schedule": expected exactly 5 fields, found 3: [not a schedule]'),
    (mkcronjob(schedule="TZ=UTC 0 * * * *"),
     'spec.schedule: Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field '
     "instead"),
    (mkcronjob(timeZone="Mars/Olympus"), 'spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus'),
    (mkcronjob(timeZone="Local"), 'spec.timeZone: Invalid value: "Local": timeZone must be an explicit time zone as '
                                  "defined in https://www.iana.org/time-zones"),
    (mkcronjob(concurrencyPolicy="Sometimes"),
     'spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"'),
    (mkcronjob(startingDeadlineSeconds=-5),
     "spec.startingDeadlineSeconds: Invalid value: -5: must be greater than or equal to 0"),
    (mkcronjob(successfulJobsHistoryLimit=-1),
     "spec.successfulJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0"),
    (mkcronjob("x" * 53), f'metadata.name: Invalid value: "{"x" * 53}": must be no more than 52 characters'),
])
def test_cronjob_validation(store: Store, raw: dict[str, Any], message: str) -> None:
    name = raw["metadata"]["name"]
    assert invalid(store, raw) == f'CronJob.batch "{name}" is invalid: {message}'


def test_a_cronjob_job_template_is_validated_with_its_path(store: Store) -> None:
    raw = mkcronjob()
    raw["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    raw["spec"]["jobTemplate"]["spec"]["selector"] = {"matchLabels": {"a": "b"}}
    msg = invalid(store, raw)
    assert 'spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: "Always"' in msg
    assert "spec.jobTemplate.spec.selector: Invalid value: dict: `selector` will be auto-generated" in msg


def test_a_cronjob_with_a_time_zone(store: Store) -> None:
    assert store.create(mkcronjob(timeZone="Europe/Berlin")).time_zone == "Europe/Berlin"  # type: ignore[attr-defined]


# ---------------------------------------------------------------- updates


def test_immutable_job_fields(store: Store) -> None:
    job = store.create(mkjob(completions=3))
    for field, value in (("completions", 4), ("completionMode", "Indexed")):
        raw = job.deepcopy_raw()
        raw["spec"][field] = value
        with pytest.raises(Invalid, match=rf"spec.{field}: Invalid value: field is immutable"):
            store.update(raw)
    raw = job.deepcopy_raw()
    raw["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    with pytest.raises(Invalid, match=r"spec.template: Invalid value: field is immutable"):
        store.update(raw)
    # Parallelism, suspend and the deadline may change; the generation counts spec changes.
    raw = job.deepcopy_raw()
    raw["spec"]["parallelism"] = 2
    raw["spec"]["activeDeadlineSeconds"] = 60
    updated = store.update(raw)
    assert updated.raw["spec"]["parallelism"] == 2 and updated.generation == 2


def test_an_elastic_indexed_job_may_change_completions_with_parallelism(store: Store) -> None:
    job = store.create(mkjob(completionMode="Indexed", completions=3, parallelism=3))
    raw = job.deepcopy_raw()
    raw["spec"]["completions"] = raw["spec"]["parallelism"] = 5
    assert store.update(raw).raw["spec"]["completions"] == 5


def test_job_status_is_a_subresource(store: Store) -> None:
    job = store.create(mkjob())
    raw = job.deepcopy_raw()
    raw["status"] = {"active": 1}
    assert store.update(raw).raw["status"] == {}  # the main resource ignores status
    assert store.update_status(raw).raw["status"] == {"active": 1}


# ---------------------------------------------------------------- generateName


def test_generate_name_as_upstream(store: Store) -> None:
    raw = mkjob()
    del raw["metadata"]["name"]
    raw["metadata"]["generateName"] = "x" * 70
    job = store.create(raw)
    assert re.fullmatch("x" * 58 + "[bcdfghjklmnpqrstvwxz2456789]{5}", job.name)
    # Deterministic on a virtual clock: the same store history gives the same names.
    names = []
    for _ in range(2):
        s = Store(store.clock)
        p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"},
             "spec": {"containers": [{"name": "c", "image": "i"}]}}
        names.append([s.create(copy.deepcopy(p)).name for _ in range(3)])
    assert names[0] == names[1] and len(set(names[0])) == 3
