"""The RuntimeClass admission plugin (``plugin/pkg/admission/runtimeclass/admission.go``): a new
pod naming a RuntimeClass gets the class's pod overhead (which the scheduler, the kubelet and
quota then count) and its scheduling constraints (node selector merged, tolerations merged
without duplicates, as ``pkg/util/tolerations`` MergeTolerations)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ksched.api.quota import parse_resource_list
from ksched.api.runtimeclass import RuntimeClass

__all__ = ["admit", "merge_tolerations", "validate"]


def _superset(ss: dict[str, Any], t: dict[str, Any]) -> bool:
    """Whether toleration ``ss`` tolerates everything ``t`` does (upstream's isSuperset)."""
    if ss == t:
        return True
    if t.get("key", "") != ss.get("key", "") and (ss.get("key", "") != "" or ss.get("operator") != "Exists"):
        return False
    if t.get("effect", "") != ss.get("effect", "") and ss.get("effect", "") != "":
        return False
    if ss.get("effect") == "NoExecute" and ss.get("tolerationSeconds") is not None:
        ts = t.get("tolerationSeconds")
        if ts is None or ts > ss["tolerationSeconds"]:
            return False
    op = ss.get("operator") or ""
    if op in ("Equal", ""):
        return t.get("operator") == "Equal" and t.get("value", "") == ss.get("value", "")
    return op == "Exists"


def merge_tolerations(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Both lists, without tolerations another one already covers (the first of equals kept)."""
    everything = [*first, *second]
    merged: list[dict[str, Any]] = []
    for i, t in enumerate(everything):
        if any(_superset(m, t) for m in merged):
            continue
        if any(t != t2 and _superset(t2, t) for t2 in everything[i + 1:]):
            continue
        merged.append(t)
    return merged


def admit(raw: dict[str, Any], get: Callable[[str], RuntimeClass | None]) -> str | None:
    """Set the overhead and merge the scheduling constraints of the pod's RuntimeClass (in
    place); why the pod is refused, else None."""
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return None
    name = spec.get("runtimeClassName")
    if name is None:
        return None
    rc = get(str(name))
    if rc is None:
        return f'pod rejected: RuntimeClass "{name}" not found'
    if rc.overhead is not None:
        pod_overhead = spec.get("overhead")
        if pod_overhead and parse_resource_list(pod_overhead) != parse_resource_list(rc.overhead):
            return "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
        spec["overhead"] = dict(rc.overhead)
    if rc.raw.get("scheduling") is not None:
        selector = spec.get("nodeSelector")
        if not selector:
            selector = dict(rc.node_selector) if rc.node_selector else selector
        else:
            selector = dict(selector)
            for k, v in rc.node_selector.items():
                if k in selector and selector[k] != v:
                    return (f"conflict: runtimeClass.scheduling.nodeSelector[{k}] = {v}; "
                            f"pod.spec.nodeSelector[{k}] = {selector[k]}")
                selector[k] = v
        if selector:
            spec["nodeSelector"] = selector
        tols = merge_tolerations(list(spec.get("tolerations") or ()), list(rc.tolerations))
        if tols:
            spec["tolerations"] = tols
    return None


def validate(raw: dict[str, Any], get: Callable[[str], RuntimeClass | None]) -> str | None:
    """Why the pod's overhead does not match its RuntimeClass's (None when it does)."""
    spec = raw.get("spec") or {}
    overhead = spec.get("overhead")
    if not overhead:
        return None
    name = spec.get("runtimeClassName")
    rc = get(str(name)) if name is not None else None
    if rc is not None and rc.overhead is not None:
        if parse_resource_list(rc.overhead) != parse_resource_list(overhead):
            return "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
        return None
    return "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
