"""What kube-apiserver does to batch/v1 objects besides validating them: defaulting
(``pkg/apis/batch/v1/defaults.go``, with the core pod-spec defaults inside templates), the Job
strategy's ``PrepareForCreate`` (``pkg/registry/batch/job/strategy.go``: the generated selector
and template labels, an empty status, generation 1) and the immutable fields of an update
(``ValidateJobSpecUpdate``).

Divergences: a suspended Job that never started may not change its template's scheduling
directives (upstream allows node affinity, node selector, tolerations, labels, annotations and
scheduling gates then); ``completions`` may change only as an elastic Indexed Job (completions
= parallelism), as upstream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ksched.api.batch import (
    CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
)
from ksched.api.errors import FieldError
from ksched.apiserver.admission import default_pod

__all__ = ["PREPARE_FOR_CREATE", "UPDATE_STRATEGY", "default_cronjob", "default_job", "prepare_job_for_create",
           "validate_job_update"]


def _default_template(tpl: Any) -> None:
    """The core defaults of a pod template's spec (as SetObjectDefaults_Job applies them)."""
    if not isinstance(tpl, dict) or not isinstance(tpl.get("spec"), dict):
        return
    try:
        default_pod({"spec": tpl["spec"]})
    except (TypeError, AttributeError, ValueError):
        pass  # malformed: validation says where


def default_job_spec(spec: dict[str, Any]) -> None:
    """SetDefaults_Job's spec part (also what a CronJob's jobTemplate.spec gets, minus counts)."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = 2**31 - 1 if spec.get("backoffLimitPerIndex") is not None else 6
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    pfp = spec.get("podFailurePolicy")
    if isinstance(pfp, dict):
        for rule in pfp.get("rules") or ():
            if isinstance(rule, dict):
                for pattern in rule.get("onPodConditions") or ():
                    if isinstance(pattern, dict) and not pattern.get("status"):
                        pattern["status"] = "True"
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if pfp is not None else "TerminatingOrFailed"
    _default_template(spec.get("template"))


def default_job(raw: dict[str, Any]) -> None:
    """SetDefaults_Job, in place."""
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return
    default_job_spec(spec)
    tpl = spec.get("template")
    md = raw.get("metadata")
    if isinstance(tpl, dict) and isinstance(md, dict):
        tlabels = (tpl.get("metadata") or {}).get("labels") if isinstance(tpl.get("metadata"), dict) else None
        if tlabels and not md.get("labels"):
            md["labels"] = dict(tlabels)


def default_cronjob(raw: dict[str, Any]) -> None:
    """SetDefaults_CronJob, in place (the job template's pod template gets the core defaults)."""
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    jt = spec.get("jobTemplate")
    if isinstance(jt, dict) and isinstance(jt.get("spec"), dict):
        _default_template(jt["spec"].get("template"))


def _generate_selector(raw: dict[str, Any], uid: str) -> None:
    md = raw["metadata"]
    spec = raw["spec"]
    tpl = spec.get("template")
    if not isinstance(tpl, dict):
        return
    tmd = tpl.get("metadata")
    if tmd is None:
        tmd = tpl["metadata"] = {}
    if not isinstance(tmd, dict):
        return
    labels = tmd.get("labels")
    if labels is None:
        labels = tmd["labels"] = {}
    if not isinstance(labels, dict):
        return
    # A label the user set is kept: a conflict is refused by validation.
    for k in (LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL):
        labels.setdefault(k, str(md.get("name") or ""))
    for k in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        labels.setdefault(k, uid)
    sel = spec.get("selector")
    if sel is None:
        sel = spec["selector"] = {}
    if not isinstance(sel, dict):
        return
    ml = sel.get("matchLabels")
    if ml is None:
        ml = sel["matchLabels"] = {}
    if isinstance(ml, dict):
        ml.setdefault(CONTROLLER_UID_LABEL, uid)


def _generated_selector_errors(raw: dict[str, Any]) -> list[FieldError]:
    """validateGeneratedSelector: the template carries the generated labels."""
    md = raw["metadata"]
    spec = raw.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector") or spec.get("selector") is None:
        return []
    tpl = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    tmd = tpl.get("metadata") if isinstance(tpl.get("metadata"), dict) else {}
    labels = tmd.get("labels") if isinstance(tmd.get("labels"), dict) else {}
    errs = []
    for key, want in ((LEGACY_CONTROLLER_UID_LABEL, md.get("uid")), (LEGACY_JOB_NAME_LABEL, md.get("name")),
                      (CONTROLLER_UID_LABEL, md.get("uid")), (JOB_NAME_LABEL, md.get("name"))):
        path = f"spec.template.metadata.labels[{key}]"
        if key not in labels:
            errs.append(FieldError(path, f"Required value: must be '{want}'", "FieldValueRequired"))
        elif labels[key] != want:
            errs.append(FieldError(path, f'Invalid value: "{labels[key]}": must be \'{want}\''))
    return errs


def prepare_job_for_create(raw: dict[str, Any], new_uid: Callable[[], str]) -> list[FieldError]:
    """Defaults, the generated selector (with the Job's uid, assigned here), an empty status and
    generation 1. Returns the errors of the generated labels (empty when fine)."""
    md = raw.setdefault("metadata", {})
    if not isinstance(md, dict) or not isinstance(raw.get("spec"), dict):
        return []
    default_job(raw)
    md["uid"] = new_uid()
    md["generation"] = 1
    raw["status"] = {}
    if not raw["spec"].get("manualSelector"):
        _generate_selector(raw, md["uid"])
        # The API server defaults every object it reads back from storage: a Job without labels
        # of its own takes its template's, generated ones included (as kubectl describe shows).
        default_job(raw)
    return _generated_selector_errors(raw)


def prepare_cronjob_for_create(raw: dict[str, Any], new_uid: Callable[[], str]) -> list[FieldError]:
    md = raw.setdefault("metadata", {})
    if isinstance(md, dict):
        md["generation"] = 1
    raw["status"] = {}
    default_cronjob(raw)
    return []


def _immutable(path: str, old: Any, new: Any) -> list[FieldError]:
    if old == new:
        return []
    return [FieldError(path, "Invalid value: field is immutable")]


def validate_job_update(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """ValidateJobSpecUpdate's immutable fields."""
    o = old.get("spec") or {}
    n = new.get("spec") or {}
    if not isinstance(n, dict):
        return []
    default_job(new)
    errs: list[FieldError] = []
    elastic = n.get("completionMode") == "Indexed" and n.get("completions") == n.get("parallelism")
    if not elastic:
        errs += _immutable("spec.completions", o.get("completions"), n.get("completions"))
    for f in ("selector", "template", "completionMode", "podFailurePolicy", "backoffLimitPerIndex",
              "manualSelector"):
        errs += _immutable(f"spec.{f}", o.get(f), n.get(f))
    return errs


def update_cronjob(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    default_cronjob(new)
    return []


# Kind -> prepare(raw, new_uid) -> extra field errors, run before validation of a new object.
PREPARE_FOR_CREATE: dict[str, Callable[[dict[str, Any], Callable[[], str]], list[FieldError]]] = {
    "Job": prepare_job_for_create,
    "CronJob": prepare_cronjob_for_create,
}
# Kind -> check(old raw, new raw) -> field errors, run on a spec update (the new raw may be defaulted).
UPDATE_STRATEGY: dict[str, Callable[[dict[str, Any], dict[str, Any]], list[FieldError]]] = {
    "Job": validate_job_update,
    "CronJob": update_cronjob,
}
