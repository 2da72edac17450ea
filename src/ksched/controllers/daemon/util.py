"""DaemonSet helpers (upstream's ``pkg/controller/daemon/util/daemonset_util.go``): the
tolerations every daemon pod gets, the required node affinity that pins a daemon pod to its node
(``matchFields metadata.name In [node]``), reading a pod's target node back, whether a pod is at
the current template, and the rolling-update surge and unavailability.
"""

from __future__ import annotations

import copy
from typing import Any

from ksched.api.apps import (
    CONTROLLER_REVISION_HASH_LABEL,
    ROLLING_UPDATE,
    TEMPLATE_GENERATION_LABEL,
    DaemonSet,
    scaled_value,
)
from ksched.api.pod import Pod

__all__ = [
    "add_daemon_tolerations",
    "allows_surge",
    "create_pod_template",
    "is_pod_updated",
    "replace_node_name_affinity",
    "surge_count",
    "target_node_name",
    "unavailable_count",
]

OBJECT_NAME_FIELD = "metadata.name"


def _daemon_tolerations(host_network: bool) -> list[dict[str, Any]]:
    out = [
        # Not evicted by the node lifecycle controller when the node turns not ready or unreachable.
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
        # TaintNodesByCondition: daemon pods tolerate the condition taints.
        {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    ]
    if host_network:
        out.append({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"})
    return out


def _matches(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """``Toleration.MatchToleration``: same key, operator, value and effect."""
    return all((a.get(k) or "") == (b.get(k) or "") for k in ("key", "operator", "value", "effect"))


def add_or_update_toleration(spec: dict[str, Any], toleration: dict[str, Any]) -> None:
    tols = list(spec.get("tolerations") or [])
    for i, t in enumerate(tols):
        if _matches(toleration, t):
            if t != toleration:
                tols[i] = dict(toleration)
                spec["tolerations"] = tols
            return
    spec["tolerations"] = [*tols, dict(toleration)]


def add_daemon_tolerations(spec: dict[str, Any]) -> None:
    """``AddOrUpdateDaemonPodTolerations``, in place."""
    for t in _daemon_tolerations(bool(spec.get("hostNetwork"))):
        add_or_update_toleration(spec, t)


def create_pod_template(template: dict[str, Any], generation: int | None, hash_: str) -> dict[str, Any]:
    """The template daemon pods are made from (``CreatePodTemplate``): the daemon tolerations, the
    template-generation and revision-hash labels."""
    out = copy.deepcopy(template)
    add_daemon_tolerations(out.setdefault("spec", {}))
    labels = out.setdefault("metadata", {}).setdefault("labels", {})
    if generation is not None:
        labels[TEMPLATE_GENERATION_LABEL] = str(generation)
    if hash_:
        labels[CONTROLLER_REVISION_HASH_LABEL] = hash_
    return out


def replace_node_name_affinity(spec: dict[str, Any], node_name: str) -> None:
    """Pin a daemon pod to its node: the required node affinity becomes ``metadata.name In
    [node]`` (``ReplaceDaemonSetPodNodeNameNodeAffinity``), in place."""
    term = {"matchFields": [{"key": OBJECT_NAME_FIELD, "operator": "In", "values": [node_name]}]}
    affinity = spec.get("affinity")
    if not isinstance(affinity, dict):
        affinity = spec["affinity"] = {}
    na = affinity.get("nodeAffinity")
    if not isinstance(na, dict):
        na = affinity["nodeAffinity"] = {}
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(req, dict):
        na["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term]}
    else:
        req["nodeSelectorTerms"] = [term]


def target_node_name(pod: Pod) -> str | None:
    """The node a daemon pod is for: its nodeName, else the single ``metadata.name In`` value of
    its required node affinity (``GetTargetNodeName``); None when it names none."""
    if pod.node_name:
        return pod.node_name
    na = ((pod.raw.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in req.get("nodeSelectorTerms") or ():
        for e in (term or {}).get("matchFields") or ():
            if e.get("key") == OBJECT_NAME_FIELD and e.get("operator") == "In":
                values = e.get("values") or []
                return str(values[0]) if len(values) == 1 else None
    return None


def is_pod_updated(pod: Pod, hash_: str, generation: int | None) -> bool:
    """At the current template: its revision hash or template generation label says so."""
    template_matches = generation is not None and pod.labels.get(TEMPLATE_GENERATION_LABEL) == str(generation)
    hash_matches = bool(hash_) and pod.labels.get(CONTROLLER_REVISION_HASH_LABEL) == hash_
    return hash_matches or template_matches


def surge_count(ds: DaemonSet, number_to_schedule: int) -> int:
    if ds.update_strategy_type != ROLLING_UPDATE:
        return 0
    ru = (ds.spec.get("updateStrategy") or {}).get("rollingUpdate")
    if not isinstance(ru, dict) or ru.get("maxSurge") is None:
        return 0
    return scaled_value(ru["maxSurge"], number_to_schedule, True)


def unavailable_count(ds: DaemonSet, number_to_schedule: int) -> int:
    if ds.update_strategy_type != ROLLING_UPDATE:
        return 0
    ru = (ds.spec.get("updateStrategy") or {}).get("rollingUpdate")
    if not isinstance(ru, dict):
        return 0
    return scaled_value(ru.get("maxUnavailable"), number_to_schedule, True)


def allows_surge(ds: DaemonSet) -> bool:
    return surge_count(ds, 1) != 0
