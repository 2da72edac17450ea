"""The ResourceQuota admission plugin (``staging/src/k8s.io/apiserver/pkg/admission/plugin/
resourcequota/controller.go`` CheckRequest), the last plugin to run: a new object that a quota of
its namespace covers must state what the quota limits (pods: every container's limited
cpu/memory requests and limits), the quota's usage must be known, and its usage added to
``status.used`` must stay within ``status.hard``. The store then writes the charged usage in the
same step as the object, so two creations can never both take the last of a quota.
"""

from __future__ import annotations

from collections.abc import Iterable

from ksched.api.meta import KubeObject
from ksched.api.quota import (
    ResourceList,
    add,
    constraints,
    less_than_or_equal,
    mask,
    matches,
    matching_resources,
    parse_resource_list,
    pretty_print,
    pretty_print_names,
    usage,
)
from ksched.api.resourcequota import ResourceQuota

__all__ = ["QuotaRefused", "check_request"]


class QuotaRefused(Exception):
    """Quota admission's refusal; the message follows ``is forbidden:``."""


def check_request(obj: KubeObject, quotas: Iterable[ResourceQuota], now: float, *,
                  force: bool = False) -> list[tuple[ResourceQuota, ResourceList]]:
    """The quotas to charge and each one's new ``status.used``; raises QuotaRefused.
    ``force``: an object that exists already elsewhere (imported) is charged, never refused."""
    cls = type(obj)
    interesting: list[ResourceQuota] = []
    for q in sorted(quotas, key=lambda q: q.name):
        if not matches(q, obj):
            continue
        restricted = matching_resources(cls, q.status_hard)
        why = constraints(obj, restricted)
        if why and not force:
            raise QuotaRefused(f"failed quota: {q.name}: {why}")
        used = q.status_used
        if any(r not in used for r in q.status_hard if r in restricted):
            if force:
                continue  # the controller counts it when it computes the usage
            raise QuotaRefused(f"status unknown for quota: {q.name}, resources: {pretty_print_names(restricted)}")
        interesting.append(q)
    if not interesting:
        return []
    delta = {k: v for k, v in usage(obj, now).items() if v.nanos}
    negative = [k for k, v in delta.items() if v.nanos < 0]
    if negative:
        raise QuotaRefused(f"quota usage is negative for resource(s): {pretty_print_names(negative)}")
    if not delta:
        return []
    out = []
    for q in interesting:
        hard = parse_resource_list(q.status_hard)
        used = parse_resource_list(q.status_used)
        requested = mask(delta, hard)
        new_used = add(used, requested)
        ok, exceeded = less_than_or_equal(mask(new_used, requested), hard)
        if not ok and not force:
            raise QuotaRefused(f"exceeded quota: {q.name}, requested: {pretty_print(mask(requested, exceeded))}, "
                               f"used: {pretty_print(mask(used, exceeded))}, "
                               f"limited: {pretty_print(mask(hard, exceeded))}")
        out.append((q, new_used))
    return out
