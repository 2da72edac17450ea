"""A Job's podFailurePolicy applied to a failed pod, as upstream's
``pkg/controller/job/pod_failure_policy.go``: the rules in order, the first match wins;
``onExitCodes`` looks at terminated containers with a non-zero code (regular containers, then
init containers), ``onPodConditions`` at the pod's conditions."""

from __future__ import annotations

from typing import Any

from ksched.api.pod import Pod

__all__ = ["match_pod_failure_policy"]


def _matching_container(statuses: list[dict[str, Any]], req: dict[str, Any]) -> dict[str, Any] | None:
    values = set(req.get("values") or ())
    name = req.get("containerName")
    for cs in statuses:
        term = (cs.get("state") or {}).get("terminated")
        if term is None:
            continue  # still terminating: no exit code to match
        if name is not None and name != cs.get("name"):
            continue
        code = int(term.get("exitCode") or 0)
        if code == 0:
            continue
        if (code in values) == (req.get("operator") == "In"):
            return cs
    return None


def _matching_condition(pod: Pod, patterns: list[dict[str, Any]]) -> dict[str, Any] | None:
    for pattern in patterns:
        for c in pod.conditions:
            if c.get("type") == pattern.get("type") and c.get("status") == pattern.get("status", "True"):
                return c
    return None


def match_pod_failure_policy(policy: dict[str, Any] | None, pod: Pod) -> tuple[str | None, bool, str | None]:
    """(a message when the Job fails, whether the failure counts, the matching rule's action)."""
    if policy is None:
        return None, True, None
    status = pod.raw.get("status") or {}
    for index, rule in enumerate(policy.get("rules") or ()):
        action = rule.get("action")
        if rule.get("onExitCodes") is not None:
            req = rule["onExitCodes"]
            cs = _matching_container(status.get("containerStatuses") or [], req) or \
                _matching_container(status.get("initContainerStatuses") or [], req)
            if cs is None:
                continue
            if action == "FailJob":
                code = cs["state"]["terminated"]["exitCode"]
                return (f"Container {cs.get('name')} for pod {pod.namespace}/{pod.name} failed with exit code "
                        f"{code} matching {action} rule at index {index}"), True, action
        elif rule.get("onPodConditions") is not None:
            cond = _matching_condition(pod, rule["onPodConditions"])
            if cond is None:
                continue
            if action == "FailJob":
                return (f"Pod {pod.namespace}/{pod.name} has condition {cond.get('type')} matching {action} rule at "
                        f"index {index}"), True, action
        else:
            continue
        if action == "Ignore":
            return None, False, action
        if action in ("Count", "FailIndex"):
            return None, True, action
    return None, True, None
