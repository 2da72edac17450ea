"""The simulated pods' resource usage: what the node's stats (cAdvisor, the summary API) would
report, from annotations on the pod (or its template, which pods copy).

``ksched.io/usage-<resource>`` (resource: ``cpu``, ``memory``, ``ephemeral-storage``, ``pids``,
``inodes``) gives the pod's usage, split over its containers in proportion to their requests
of that resource (equally when none requests it); ``ksched.io/usage-<resource>.<container>``
gives one container's own usage (the pod-wide value is then split over the others). A value is

* a quantity: constant (``512Mi``, ``250m``, ``40``);
* steps: ``"0s: 100Mi, 5m: 1Gi, 1h: 200Mi"`` -- each value holds from its time until the next;
* a ramp: ``"ramp(0s: 100Mi, 10m: 2Gi)"`` -- linear between the points, the last value after.

Times count from when the containers (re)started (``30``, ``30s``, ``5m``, ``1.5h``); before
the first point the first value holds. The node's own usage (system daemons, the kubelet,
images) comes from the same annotations on the Node, counted from the node's creation.

CPU usage above a container's cpu limit is throttled to the limit; memory above a container's
memory limit is an OOM kill (``ksched.kubelet.fake``). Divergences: usage is a model, not a
measurement; working set = usage (no inactive file cache); a container's usage does not depend
on what else runs on the node.

A pod's parsed profiles and its split over containers are worked out once per pod object (kept
in ``Pod.cached``; a write gives a new object) and evaluated at each reading;
``container_usage_reference`` works everything out on each call, and a test holds the two equal.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from dataclasses import dataclass

from ksched.api.node import Node
from ksched.api.pod import Container, Pod, resource_units

__all__ = ["USAGE_ANNOTATION", "UsageError", "UsageProfile", "container_usage", "container_usage_reference",
           "node_system_usage", "parse_profile", "pod_usage"]

USAGE_ANNOTATION = "ksched.io/usage-"
RESOURCES = ("cpu", "memory", "ephemeral-storage", "pids", "inodes")

_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
_UNITS = {None: 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


class UsageError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class UsageProfile:
    """Usage over time since the containers started: points (seconds, amount), steps or a ramp."""

    times: tuple[float, ...]
    values: tuple[int, ...]
    ramp: bool = False

    @property
    def constant(self) -> bool:
        return len(set(self.values)) <= 1

    def at(self, t: float) -> int:
        ts, vs = self.times, self.values
        i = bisect.bisect_right(ts, t) - 1
        if i < 0:
            return vs[0]
        if not self.ramp or i + 1 >= len(ts):
            return vs[i]
        t0, t1, v0, v1 = ts[i], ts[i + 1], vs[i], vs[i + 1]
        return int(v0 + (v1 - v0) * (t - t0) / (t1 - t0))

    def changing_after(self, t: float) -> float | None:
        """The next time after ``t`` the amount changes: ``t`` itself inside a ramp segment that
        moves, the next step otherwise, None once it stays put."""
        ts, vs = self.times, self.values
        i = bisect.bisect_right(ts, t) - 1
        if self.ramp and 0 <= i < len(ts) - 1 and vs[i] != vs[i + 1]:
            return t
        for j in range(max(i + 1, 0), len(ts)):
            if vs[j] != (vs[j - 1] if j > 0 else vs[0]):
                return ts[j]
        return None

    def next_point(self, t: float) -> float | None:
        """The first point after ``t`` (where a step or a ramp segment ends), None after the last."""
        i = bisect.bisect_right(self.times, t)
        return self.times[i] if i < len(self.times) else None

    def first_above(self, limit: int, t: float) -> float | None:
        """The first time at or after ``t`` the amount exceeds ``limit`` (None: never)."""
        ts, vs = self.times, self.values
        if self.at(t) > limit:
            return t
        i = max(bisect.bisect_right(ts, t) - 1, 0)
        for j in range(i, len(ts)):
            if self.ramp and j + 1 < len(ts) and vs[j + 1] > limit >= vs[j]:
                t0, t1, v0, v1 = ts[j], ts[j + 1], vs[j], vs[j + 1]
                # int(v0 + (v1-v0)(x-t0)/(t1-t0)) > limit from the first x past the crossing
                x = t0 + (limit + 1 - v0) * (t1 - t0) / (v1 - v0)
                return max(t, x)
            if ts[j] >= t and vs[j] > limit:
                return ts[j]
        return None


def _parse_time(text: str) -> float:
    m = _TIME.match(text)
    if m is None:
        raise UsageError(f"invalid time {text.strip()!r} (want seconds, or a number with s, m or h)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _amount(resource: str, text: str) -> int:
    try:
        v = resource_units(resource, text.strip())
    except (ValueError, TypeError) as e:
        raise UsageError(f"invalid quantity {text.strip()!r}: {e}") from None
    if v < 0:
        raise UsageError("usage must not be negative")
    return v


def parse_profile(text: str, resource: str, where: str = "usage") -> UsageProfile:
    """A usage annotation's value as a profile (see the module's documentation); errors start
    with ``where``."""
    try:
        return _parse_profile(text, resource)
    except UsageError as e:
        raise UsageError(f"{where}: {e}") from None


@functools.lru_cache(maxsize=16384)
def _parse_profile(text: str, resource: str) -> UsageProfile:
    body = text.strip()
    ramp = body.startswith("ramp(")
    if ramp:
        if not body.endswith(")"):
            raise UsageError("a ramp ends with ')'")
        body = body[5:-1]
    if ":" not in body:
        if ramp:
            raise UsageError("a ramp needs time: amount points")
        return UsageProfile((0.0,), (_amount(resource, body),))
    times: list[float] = []
    values: list[int] = []
    for part in body.split(","):
        if not part.strip():
            continue
        t, sep, q = part.partition(":")
        if not sep:
            raise UsageError(f"{part.strip()!r} is not 'time: amount'")
        tt = _parse_time(t)
        if times and tt <= times[-1]:
            raise UsageError(f"times must increase ({part.strip()!r})")
        times.append(tt)
        values.append(_amount(resource, q))
    if not times:
        raise UsageError("no points")
    return UsageProfile(tuple(times), tuple(values), ramp)


def _profiles(annotations: dict[str, str], resource: str, where: str) -> tuple[UsageProfile | None,
                                                                               dict[str, UsageProfile]]:
    key = USAGE_ANNOTATION + resource
    pod_level = annotations.get(key)
    per: dict[str, UsageProfile] = {}
    prefix = key + "."
    for k, v in annotations.items():
        if k.startswith(prefix):
            per[k[len(prefix):]] = parse_profile(v, resource, f"{where}: metadata.annotations[{k}]")
    whole = parse_profile(pod_level, resource, f"{where}: metadata.annotations[{key}]") if pod_level else None
    return whole, per


_NO_USAGE: tuple[UsageProfile | None, dict[str, UsageProfile]] = (None, {})


def _pod_profiles(pod: Pod, resource: str) -> tuple[UsageProfile | None, dict[str, UsageProfile]]:
    """The pod's profiles of ``resource``, parsed once per pod object (a pod's annotations do
    not change within one object: a write gives a new one). Errors are not kept."""
    cache = pod.cached()
    key = ("usage", resource)
    got = cache.get(key)
    if got is None:
        got = _profiles(pod.annotations, resource, f"pod {pod.key}") if has_usage(pod) else _NO_USAGE
        cache[key] = got
    return got  # type: ignore[no-any-return]


def _all_profiles(pod: Pod) -> tuple[UsageProfile, ...]:
    """Every profile of the pod, all resources (once per pod object)."""
    cache = pod.cached()
    got = cache.get("usage-all")
    if got is None:
        out: list[UsageProfile] = []
        for resource in RESOURCES:
            whole, per = _pod_profiles(pod, resource)
            if whole is not None:
                out.append(whole)
            out.extend(per.values())
        got = cache["usage-all"] = tuple(out)
    return got  # type: ignore[no-any-return]


def has_usage(pod: Pod) -> bool:
    if not pod.annotations:
        return False  # (nothing to keep on the pod: no scratch dict made for it)
    cache = pod.cached()
    got = cache.get("has-usage")
    if got is None:
        got = cache["has-usage"] = any(k.startswith(USAGE_ANNOTATION) for k in pod.annotations)
    return got  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class _Plan:
    """How a pod's usage of one resource splits over its containers (from its profiles,
    requests and limits; evaluated at a time by ``container_usage``)."""

    own: tuple[tuple[str, UsageProfile], ...]  # containers with their own profile
    whole: UsageProfile | None  # the pod-wide profile, split over ``rest``
    rest: tuple[str, ...]
    shares: tuple[float, ...]
    names: tuple[str, ...]  # every container
    caps: tuple[tuple[str, int], ...]  # cpu limits (cpu only)


def _plan(pod: Pod, resource: str) -> _Plan | None:
    cache = pod.cached()
    key = ("usage-plan", resource)
    if key in cache:
        return cache[key]  # type: ignore[no-any-return]
    whole, per = _pod_profiles(pod, resource)
    plan: _Plan | None = None
    if whole is not None or per:
        own = tuple((c.name, per[c.name]) for c in pod.containers if c.name in per)
        rest = [c for c in pod.containers if c.name not in per]
        reqs = [c.requests.get(resource, 0) for c in rest]
        s = sum(reqs)
        shares = tuple(r / s for r in reqs) if s else (1 / len(rest),) * len(rest) if rest else ()
        caps = tuple((c.name, c.limits["cpu"]) for c in pod.containers
                     if resource == "cpu" and "cpu" in c.limits)
        plan = _Plan(own, whole, tuple(c.name for c in rest), shares, tuple(c.name for c in pod.containers), caps)
    cache[key] = plan
    return plan


def container_usage(pod: Pod, resource: str, since_start: float) -> dict[str, int] | None:
    """Each container's usage ``since_start`` seconds after the containers started, or None when
    the pod declares no usage of ``resource``. CPU is throttled at each container's limit."""
    plan = _plan(pod, resource)
    if plan is None:
        return None
    out = {name: p.at(since_start) for name, p in plan.own}
    whole, rest = plan.whole, plan.rest
    if whole is not None and rest:
        total = whole.at(since_start)
        last = len(rest) - 1
        given = 0
        for i, name in enumerate(rest):
            amount = total - given if i == last else int(total * plan.shares[i])
            out[name] = amount
            given += amount
    if len(out) < len(plan.names):
        for name in plan.names:
            out.setdefault(name, 0)
    for name, cap in plan.caps:
        if out[name] > cap:
            out[name] = cap
    return out


def container_usage_reference(pod: Pod, resource: str, since_start: float) -> dict[str, int] | None:
    """``container_usage`` worked out from the pod's containers on every call (the reference
    that the plan-based form is tested against)."""
    whole, per = _pod_profiles(pod, resource)
    if whole is None and not per:
        return None
    out: dict[str, int] = {}
    rest: list[Container] = []
    for c in pod.containers:
        p = per.get(c.name)
        if p is not None:
            out[c.name] = p.at(since_start)
        else:
            rest.append(c)
    if whole is not None and rest:
        total = whole.at(since_start)
        reqs = [c.requests.get(resource, 0) for c in rest]
        s = sum(reqs)
        shares = [r / s for r in reqs] if s else [1 / len(rest)] * len(rest)
        given = 0
        for i, c in enumerate(rest):
            amount = total - given if i == len(rest) - 1 else int(total * shares[i])
            out[c.name] = amount
            given += amount
    for c in pod.containers:
        out.setdefault(c.name, 0)
        if resource == "cpu" and "cpu" in c.limits:
            out[c.name] = min(out[c.name], c.limits["cpu"])
    return out


def pod_usage(pod: Pod, resource: str, since_start: float) -> int | None:
    """The pod's usage of ``resource`` (its containers' sum), None when it declares none."""
    plan = _plan(pod, resource)
    if plan is None:
        return None
    if plan.caps:
        return sum(container_usage(pod, resource, since_start).values())  # type: ignore[union-attr]
    # the split over the other containers adds up to the pod-wide amount
    total = sum(p.at(since_start) for _, p in plan.own)
    if plan.whole is not None and plan.rest:
        total += plan.whole.at(since_start)
    return total


def next_usage_change(pod: Pod, since_start: float) -> float | None:
    """Seconds after the start when any of the pod's usages may next change (None: never)."""
    best: float | None = None
    for p in _all_profiles(pod):
        t = p.changing_after(since_start)
        if t is not None and (best is None or t < best):
            best = t
    return best


def next_usage_point(pod: Pod, since_start: float) -> float | None:
    """Seconds after the start of the pod's next profile point (its usages are linear until
    then); None after the last."""
    best: float | None = None
    for p in _all_profiles(pod):
        t = p.next_point(since_start)
        if t is not None and (best is None or t < best):
            best = t
    return best


def first_oom(pod: Pod, since_start: float) -> tuple[float, str] | None:
    """When (seconds after the start) a container's memory first exceeds its memory limit, and
    which container; None if never."""
    whole, per = _pod_profiles(pod, "memory")
    if whole is None and not per:
        return None
    limited = [c for c in pod.containers if "memory" in c.limits]
    best: tuple[float, str] | None = None

    def consider(t: float | None, name: str) -> None:
        nonlocal best
        if t is not None and (best is None or t < best[0]):
            best = (t, name)

    rest = [c for c in pod.containers if c.name not in per]
    reqs = [c.requests.get("memory", 0) for c in rest]
    s = sum(reqs)
    for c in limited:
        limit = c.limits["memory"]
        p = per.get(c.name)
        if p is not None:
            consider(p.first_above(limit, since_start), c.name)
        elif whole is not None:
            # The container's share of the pod-wide amount crosses its limit when the whole does
            # at limit / share.
            share = (c.requests.get("memory", 0) / s) if s else 1 / len(rest)
            if share > 0:
                consider(whole.first_above(math.ceil((limit + 1) / share) - 1, since_start), c.name)
    return best


def node_system_usage(node: Node, resource: str, now: float) -> int:
    """What the node's own daemons use (the node's ``ksched.io/usage-<resource>``), 0 without it."""
    text = node.annotations.get(USAGE_ANNOTATION + resource)
    if not text:
        return 0
    p = parse_profile(text, resource, f"node {node.name}: metadata.annotations[{USAGE_ANNOTATION + resource}]")
    return p.at(now - (node.creation_timestamp or 0.0))
