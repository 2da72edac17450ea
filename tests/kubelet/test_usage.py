"""The usage model (ksched.kubelet.usage): constants, steps and ramps; the split over containers
by requests; per-container values; CPU throttled at limits; when memory first exceeds a limit."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from api_objects import mkpod
from ksched.api.pod import Pod
from ksched.kubelet.usage import (
    UsageError,
    container_usage,
    container_usage_reference,
    first_oom,
    next_usage_change,
    parse_profile,
    pod_usage,
)

Mi = 1 << 20


def pod(annotations: dict[str, str], containers: list[dict[str, Any]] | None = None) -> Pod:
    raw = mkpod("p", containers=containers or [{"name": "c", "image": "i"}])
    raw["metadata"]["annotations"] = annotations
    return Pod(raw)


def test_constant_steps_and_ramp() -> None:
    assert parse_profile("512Mi", "memory").at(1e6) == 512 * Mi
    steps = parse_profile("0s: 100Mi, 5m: 1Gi, 1h: 200Mi", "memory")
    assert [steps.at(t) for t in (0, 299, 300, 3599, 3600, 1e9)] == [100 * Mi, 100 * Mi, 1024 * Mi, 1024 * Mi,
                                                                      200 * Mi, 200 * Mi]
    ramp = parse_profile("ramp(0: 0, 100s: 1000m)", "cpu")
    assert [ramp.at(t) for t in (-5, 0, 50, 100, 200)] == [0, 0, 500, 1000, 1000]
    assert parse_profile("10s: 5, 1.5m: 7", "pids").at(0) == 5  # before the first point: the first value


@pytest.mark.parametrize(("text", "msg"), [
    ("lots", "invalid quantity 'lots'"),
    ("0s: 1Gi, 0s: 2Gi", "times must increase"),
    ("soon: 1Gi", "invalid time 'soon'"),
    ("ramp(1Gi)", "a ramp needs time: amount points"),
    ("ramp(0: 1Gi", r"a ramp ends with '\)'"),
    ("-1Gi", "must not be negative"),
])
def test_bad_profiles_say_what_is_wrong(text: str, msg: str) -> None:
    with pytest.raises(UsageError, match=msg):
        parse_profile(text, "memory", "pod default/p: metadata.annotations[ksched.io/usage-memory]")


def test_pod_usage_splits_by_requests_and_containers_may_have_their_own() -> None:
    cs = [{"name": "a", "image": "i", "resources": {"requests": {"memory": "300Mi"}}},
          {"name": "b", "image": "i", "resources": {"requests": {"memory": "100Mi"}}},
          {"name": "side", "image": "i"}]
    p = pod({"ksched.io/usage-memory": "800Mi", "ksched.io/usage-memory.side": "50Mi"}, cs)
    assert container_usage(p, "memory", 0) == {"a": 600 * Mi, "b": 200 * Mi, "side": 50 * Mi}
    assert pod_usage(p, "memory", 0) == 850 * Mi
    assert container_usage(p, "cpu", 0) is None
    even = pod({"ksched.io/usage-cpu": "3"}, [{"name": "x", "image": "i"}, {"name": "y", "image": "i"},
                                              {"name": "z", "image": "i"}])
    assert container_usage(even, "cpu", 0) == {"x": 1000, "y": 1000, "z": 1000}


def test_cpu_is_throttled_at_the_limit() -> None:
    p = pod({"ksched.io/usage-cpu": "4"}, [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1500m"}}}])
    assert container_usage(p, "cpu", 0) == {"c": 1500}


def test_first_oom_and_next_change() -> None:
    lim = [{"name": "c", "image": "i", "resources": {"limits": {"memory": "1Gi"}}}]
    assert first_oom(pod({"ksched.io/usage-memory": "2Gi"}, lim), 0) == (0, "c")
    assert first_oom(pod({"ksched.io/usage-memory": "512Mi"}, lim), 0) is None
    assert first_oom(pod({"ksched.io/usage-memory": "0: 512Mi, 10m: 2Gi"}, lim), 0) == (600.0, "c")
    ramp = pod({"ksched.io/usage-memory": "ramp(0: 0, 100s: 2Gi)"}, lim)
    t, _ = first_oom(ramp, 0) or (None, "")
    assert t is not None and 50 <= t <= 50.001
    assert container_usage(ramp, "memory", t)["c"] > 1 << 30 >= container_usage(ramp, "memory", t - 0.01)["c"]
    assert first_oom(pod({"ksched.io/usage-memory": "2Gi"}), 0) is None  # no limit: never
    steps = pod({"ksched.io/usage-memory": "0: 1Mi, 1m: 2Mi, 2m: 2Mi"})
    assert [next_usage_change(steps, t) for t in (0, 59.5, 60, 61)] == [60.0, 60.0, None, None]
    assert next_usage_change(ramp, 30) == 30 and next_usage_change(ramp, 100) is None


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 1 << 32)), min_size=2, max_size=6,
                unique_by=lambda x: x[0]),
       st.integers(0, 1 << 32), st.floats(0, 12_000), st.booleans())
@example(points=[(0, 0), (1, 4294941532), (2, 0)], limit=4294941491, start=0.0, ramp=True)
def test_first_above_is_the_first_time_above(points: list[tuple[int, int]], limit: int, start: float,
                                             ramp: bool) -> None:
    points.sort()
    body = ", ".join(f"{t}s: {v}" for t, v in points)
    p = parse_profile(f"ramp({body})" if ramp else body, "memory")
    t = p.first_above(limit, start)
    grid = [start + k * 5.0 for k in range(int((12_000 - start) / 5) + 1)]
    if t is None:
        assert all(p.at(x) <= limit for x in grid)
    else:
        # Above the limit at t or just past it: a narrow ramp peak may be above it for less
        # than a microsecond (hypothesis: a peak of 4294941532 at 1 s against 4294941491).
        assert t >= start and any(p.at(x) > limit for x in (t, math.nextafter(t, math.inf), t + 1e-9, t + 1e-6))
        assert all(p.at(x) <= limit for x in grid if x < t - 1e-6)


_profile_text = st.one_of(
    st.integers(0, 4096).map(lambda m: f"{m}Mi"),
    st.lists(st.integers(0, 4096), min_size=1, max_size=4).map(
        lambda vs: ", ".join(f"{60 * i}s: {v}Mi" for i, v in enumerate(vs))),
    st.lists(st.integers(0, 4096), min_size=2, max_size=4).map(
        lambda vs: "ramp(" + ", ".join(f"{90 * i}: {v}m" for i, v in enumerate(vs)) + ")"))


@st.composite
def _usage_pods(draw: st.DrawFn) -> Pod:
    names = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
    containers = []
    for n in names:
        res: dict[str, Any] = {}
        for kind in ("requests", "limits"):
            q = draw(st.dictionaries(st.sampled_from(["cpu", "memory"]), st.integers(1, 3000), max_size=2))
            if q:
                res[kind] = {r: (f"{v}m" if r == "cpu" else f"{v}Mi") for r, v in q.items()}
        containers.append({"name": n, "image": "i", "resources": res})
    annotations: dict[str, str] = {}
    for r in ("cpu", "memory", "pids"):
        if draw(st.booleans()):
            annotations[f"ksched.io/usage-{r}"] = draw(_profile_text)
        for n in draw(st.lists(st.sampled_from(["a", "b", "c", "gone"]), max_size=2, unique=True)):
            annotations[f"ksched.io/usage-{r}.{n}"] = draw(_profile_text)
    return pod(annotations, containers)


@settings(max_examples=200, deadline=None)
@given(_usage_pods(), st.floats(0, 600))
def test_container_usage_agrees_with_its_reference(p: Pod, t: float) -> None:
    """The per-pod plan (parsed once, split worked out once) against the per-call reference."""
    for r in ("cpu", "memory", "pids", "inodes"):
        got, want = container_usage(p, r, t), container_usage_reference(p, r, t)
        assert got == want and (got is None or list(got) == list(want or ())), r
        assert container_usage(p, r, t) == got  # and again, from the pod's cache


@settings(max_examples=200, deadline=None)
@given(_usage_pods(), st.floats(0, 600))
def test_pod_usage_is_the_sum_of_the_reference(p: Pod, t: float) -> None:
    for r in ("cpu", "memory", "pids", "inodes"):
        want = container_usage_reference(p, r, t)
        assert pod_usage(p, r, t) == (None if want is None else sum(want.values())), r
