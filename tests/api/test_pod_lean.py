"""``Pod.lean`` (a listed pod decoded in two steps) reads exactly as ``Pod(raw)``: every
attribute, whichever is asked for first; and a scheduler cache built from lean pods equals one
built from fully decoded pods."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.meta import _slot_names
from ksched.api.node import Node
from ksched.api.pod import _DECODED_LATER, Pod
from ksched.scheduler.cache.cache import Cache
from ksched.sim.workloads import node_default, pod_default

_OPTIONAL: dict[str, Any] = {
    "nodeName": "node-1",
    "schedulerName": "other",
    "nodeSelector": {"zone": "a"},
    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}},
    "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                    {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
    "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
                                   "labelSelector": {"matchLabels": {"app": "x"}}, "matchLabelKeys": ["app"]}],
    "priority": 7,
    "priorityClassName": "high",
    "preemptionPolicy": "Never",
    "schedulingGates": [{"name": "wait"}],
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}, {"name": "e", "ephemeral": {}}],
    "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "1"}}, "restartPolicy": "Always"}],
    "overhead": {"cpu": "50m"},
    "resources": {"requests": {"memory": "1Gi"}, "limits": {"cpu": "2"}},
    "terminationGracePeriodSeconds": 5,
    "hostNetwork": True,
}
_STATUS: dict[str, Any] = {
    "phase": "Running",
    "conditions": [{"type": "PodScheduled", "status": "True"}],
    "nominatedNodeName": "node-2",
    "startTime": "2026-01-02T03:04:05Z",
}


def _manifest(spec_keys: list[str], status_keys: list[str]) -> dict[str, Any]:
    raw = pod_default("p")
    raw["metadata"]["labels"] = {"app": "x"}
    raw["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    for k in spec_keys:
        raw["spec"][k] = _OPTIONAL[k]
    raw["status"] = {k: _STATUS[k] for k in status_keys}
    return raw


def _plain(x: Any, depth: int = 0) -> Any:
    """``x`` as plain data: objects as their class name and attributes, recursively."""
    if isinstance(x, str | int | float | bool | type(None)) or depth > 8:
        return x if depth <= 8 else repr(x)
    if isinstance(x, list | tuple | frozenset | set):
        return [_plain(i, depth + 1) for i in x]
    if isinstance(x, dict):
        return {k: _plain(v, depth + 1) for k, v in x.items()}
    names = _slot_names(type(x)) or tuple(vars(x))
    return type(x).__name__, {n: _plain(getattr(x, n, None), depth + 1) for n in names}


def _view(pod: Pod, first: str | None = None) -> dict[str, Any]:
    """Every attribute (``first`` read before the others), as plain data."""
    out = {first: _plain(getattr(pod, first))} if first else {}
    for name in _slot_names(Pod):
        if name not in ("raw", "_cache") and name not in out:
            out[name] = _plain(getattr(pod, name))
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(sorted(_OPTIONAL)), unique=True), st.lists(st.sampled_from(sorted(_STATUS)), unique=True),
       st.sampled_from(sorted(_slot_names(Pod))))
def test_a_lean_pod_reads_as_a_fully_decoded_one(spec_keys: list[str], status_keys: list[str], first: str) -> None:
    raw = _manifest(spec_keys, status_keys)
    first = first if first not in ("raw", "_cache") else "name"
    assert _view(Pod.lean(raw), first) == _view(Pod(raw))


def test_a_lean_pod_decodes_the_rest_on_first_access_only() -> None:
    raw = _manifest(sorted(_OPTIONAL), sorted(_STATUS))
    pod = Pod.lean(raw)
    later = [n for n in _slot_names(Pod) if n in _DECODED_LATER]
    assert later and all(n in _slot_names(Pod) for n in _DECODED_LATER)

    def decoded() -> list[str]:
        out = []
        for n in later:
            try:
                object.__getattribute__(pod, n)
                out.append(n)
            except AttributeError:
                pass
        return out

    assert decoded() == []
    assert pod.node_name == "node-1" and pod.containers[0].requests == {"cpu": 100, "memory": 500 * 2**20}
    assert decoded() == []
    assert pod.priority == 7
    assert decoded() == later
    try:
        pod.no_such_attribute  # noqa: B018
    except AttributeError as e:
        assert "no_such_attribute" in str(e)
    else:
        raise AssertionError("an unknown attribute must raise AttributeError")


def test_a_cache_of_lean_pods_equals_one_of_full_pods() -> None:
    nodes = [Node(node_default(i)) for i in range(4)]
    raws = []
    for i in range(12):
        raw = _manifest(["nodeName", "tolerations", "volumes"] if i % 2 else ["nodeName", "affinity"], ["phase"])
        raw["metadata"]["name"] = f"p{i}"
        raw["metadata"]["uid"] = f"u{i}"
        raw["spec"]["nodeName"] = f"node-{i % 4}"
        raws.append(raw)
    caches = []
    for make in (Pod, Pod.lean):
        cache = Cache()
        for n in nodes:
            cache.add_node(n)
        for raw in raws:
            cache.add_pod(make(raw))
        assert not cache.check_invariants()
        caches.append(cache)
    full, lean = caches
    for name, ni in full.nodes.items():
        other = lean.nodes[name]
        assert ni.requested == other.requested and ni.non_zero_requested == other.non_zero_requested
        assert [p.pod.key for p in ni.pods] == [p.pod.key for p in other.pods]
        assert [p.pod.key for p in ni.pods_with_affinity] == [p.pod.key for p in other.pods_with_affinity]
        assert ni.pvc_ref_counts == other.pvc_ref_counts and ni.used_ports.ports == other.used_ports.ports


def test_a_lean_pod_becomes_a_plain_pod_once_decoded() -> None:
    """Until decoded in full a lean pod is of a subclass (with ``__getattr__``, which slows every
    attribute read); decoding makes it a plain Pod, and a copy of it is one too."""
    raw = _manifest(["nodeName", "tolerations"], ["phase"])
    pod = Pod.lean(raw)
    assert isinstance(pod, Pod) and type(pod) is not Pod and repr(pod) == repr(Pod(raw))
    copy = Pod.lean(raw).shallow_copy()
    assert type(copy) is Pod and _view(copy) == _view(Pod(raw))
    assert len(pod.tolerations) == 2 and type(pod) is Pod
    assert not hasattr(type(pod), "__getattr__")


_QUANTITY_TEXTS = st.one_of(
    st.sampled_from(["100m", "500Mi", "4", "32Gi", "1.5", "0", " 2 ", "1e3", "110", "2Ki", "0.001"]),
    st.from_regex(r"\A[0-9]{1,6}(\.[0-9]{1,3})?(m|k|M|G|Ki|Mi|Gi)?\Z"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]), _QUANTITY_TEXTS),
                max_size=6))
def test_resource_map_memo_agrees_with_resource_units(entries: list[tuple[str, str]]) -> None:
    """The memo of string quantities (reference: ``resource_units`` of each) gives the same
    units, before and after its first use, and when it is cleared for being full."""
    from ksched.api import pod as pod_module
    from ksched.api.pod import resource_map, resource_units

    d = dict(entries)
    want = {k: resource_units(k, v) for k, v in d.items()}
    assert resource_map(d) == want
    assert resource_map(d) == want  # from the memo
    saved = pod_module._UNITS_MAX
    pod_module._UNITS_MAX = 1
    pod_module._UNITS.clear()
    try:
        assert resource_map(d) == want and len(pod_module._UNITS) <= 1
    finally:
        pod_module._UNITS_MAX = saved


def test_resource_map_memo_keeps_rejecting_what_is_no_quantity() -> None:
    """Only strings are memoized: ``True`` (equal to 1 as a key) and other non-quantities still
    fail as ``resource_units`` fails, and a bad string fails every time."""
    import pytest

    from ksched.api.pod import resource_map
    from ksched.api.quantity import QuantityError

    assert resource_map({"cpu": "1"}) == {"cpu": 1000}
    assert resource_map({"cpu": 1}) == {"cpu": 1000}
    for bad in ({"cpu": True}, {"cpu": "1 Gi"}, {"cpu": "1 Gi"}, {"cpu": [1]}):
        with pytest.raises(QuantityError):
            resource_map(bad)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.datetimes(timezones=st.just(__import__("datetime").UTC)).map(
    lambda d: d.strftime("%Y-%m-%dT%H:%M:%SZ")), st.text(max_size=12)))
def test_parse_time_memo_agrees_with_parsing(text: str) -> None:
    """Timestamps parsed once by their text (reference: ``datetime.fromisoformat``): the same
    seconds, or None for what is no timestamp, on the first and on later reads."""
    from datetime import datetime

    from ksched.api.meta import parse_time

    try:
        want = datetime.fromisoformat(text).timestamp() if text else None
    except ValueError:
        want = None
    assert parse_time(text) == want
    assert parse_time(text) == want
