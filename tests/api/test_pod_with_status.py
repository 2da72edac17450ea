"""``Pod.with_status``: a pod with another status, sharing the parsed metadata and spec, is what
``Pod(raw)`` makes of the same manifest (every attribute, recursively), and the store's status
writes give the same objects as a full parse would."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.accounting import NodeAccounting
from ksched.api.meta import _slot_names
from ksched.api.pod import Pod
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock


def structure(x: Any, depth: int = 0) -> Any:
    """A comparable form of a parsed object: its slots (but per-object caches), recursively."""
    assert depth < 30
    if isinstance(x, dict):
        return {k: structure(v, depth + 1) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [structure(v, depth + 1) for v in x]
    if isinstance(x, str | int | float | bool | type(None)):
        return x
    slots = [n for n in _slot_names(type(x)) if n not in ("_cache", "raw", "__weakref__")]
    if not slots:
        return repr(x)
    return (type(x).__name__, {n: structure(getattr(x, n, None), depth + 1) for n in slots})


SPECS = st.fixed_dictionaries({"containers": st.just([{"name": "c", "image": "i", "resources": {
    "requests": {"cpu": "100m"}}, "ports": [{"containerPort": 80, "hostPort": 8080}]}])}, optional={
    "nodeName": st.sampled_from(["n1", "n2"]),
    "priority": st.integers(0, 10),
    "tolerations": st.just([{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]),
    "affinity": st.just({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}]}}),
    "topologySpreadConstraints": st.just([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "a"}}}]),
    "initContainers": st.just([{"name": "init", "image": "i", "restartPolicy": "Always"}]),
})
STATUSES = st.fixed_dictionaries({}, optional={
    "phase": st.sampled_from(["Pending", "Running", "Succeeded", "Failed", ""]),
    "conditions": st.lists(st.fixed_dictionaries({"type": st.sampled_from(["Ready", "PodScheduled"]),
                                                  "status": st.sampled_from(["True", "False"])}), max_size=2),
    "nominatedNodeName": st.sampled_from(["", "n3"]),
    "startTime": st.sampled_from([None, "2024-01-01T00:00:00Z", "2024-05-06T07:08:09Z"]),
    "qosClass": st.just("Burstable"),
})


def manifest(spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "a"}, "resourceVersion": "3",
        "creationTimestamp": "2024-01-01T00:00:00Z", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": True}]},
        "spec": spec, "status": status}


@settings(max_examples=200, deadline=None)
@given(SPECS, STATUSES, STATUSES)
def test_with_status_is_a_full_parse(spec: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> None:
    old = Pod(manifest(spec, before))
    old.cached()["requests"] = {"cpu": 100}  # a cached value is never carried over
    raw = dict(old.raw)
    raw["metadata"] = dict(old.raw["metadata"])
    raw["status"] = after
    new = old.with_status(raw)
    assert new.raw is raw and new._cache is None
    assert structure(new) == structure(Pod(raw))
    assert new.containers is old.containers  # the spec's parsed parts are shared
    assert structure(old) == structure(Pod(manifest(spec, before)))  # the old pod is untouched


def test_status_writes_in_the_store_share_the_spec_and_equal_a_full_parse() -> None:
    store = Store(VirtualClock())
    store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                  "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "10"}}})
    store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "a"}},
                  "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}})
    store.bind("default", "p", "n1")
    bound = store.get("Pod", "default", "p")
    running = store.patch("Pod", "default", "p", {"status": {"phase": "Running", "startTime": "2024-01-01T00:00:00Z",
                                                             "conditions": [{"type": "Ready", "status": "True"}]}},
                          subresource="status")
    assert isinstance(running, Pod) and running.containers is bound.containers
    assert running.phase == "Running" and running.start_time is not None
    assert structure(running) == structure(Pod(running.raw))
    assert store.accounting.usage["n1"].requested == {"cpu": 1000}
    done = store.patch("Pod", "default", "p", {"status": {"phase": "Succeeded"}}, subresource="status")
    assert structure(done) == structure(Pod(done.raw)) and done.is_terminal
    assert store.accounting.usage["n1"].pods == 0


def usage_from_scratch(pods: list[Pod]) -> dict[str, Any]:
    acc = NodeAccounting()
    for p in pods:
        acc.add(p)
    return {n: (u.requested, u.pods, u.ports, u.pod_keys) for n, u in acc.usage.items()}


@settings(max_examples=100, deadline=None)
@given(SPECS, st.lists(st.tuples(st.booleans(), STATUSES), min_size=1, max_size=6))
def test_node_accounting_of_status_writes_equals_a_recount(spec: dict[str, Any],
                                                           writes: list[tuple[bool, dict[str, Any]]]) -> None:
    """Accounting skips a write that charges the node the same (a status write sharing the
    parsed spec); what it holds is always what counting the current version from scratch gives."""
    acc = NodeAccounting()
    cur = Pod(manifest(spec, {}))
    acc.update(None, cur)
    for full_parse, status in writes:
        raw = dict(cur.raw)
        raw["status"] = status
        new = Pod(raw) if full_parse else cur.with_status(raw)
        acc.update(cur, new)
        cur = new
        assert {n: (u.requested, u.pods, u.ports, u.pod_keys) for n, u in acc.usage.items() if u.pods} == \
            {n: v for n, v in usage_from_scratch([cur]).items() if v[1]}


def derived(pod: Pod) -> tuple[Any, ...]:
    """What the store's, the kubelet's and the scheduler's readers cache on a pod object."""
    from ksched.api.resources import pod_container_requests, pod_non_zero_requests, pod_requests, qos_class
    from ksched.scheduler.plugins.interpodaffinity._index import pod_keys

    return (pod_requests(pod), pod_non_zero_requests(pod), pod_container_requests(pod), qos_class(pod),
            pod_keys(pod))


@settings(max_examples=100, deadline=None)
@given(SPECS, STATUSES, STATUSES)
def test_the_superseded_pod_lets_go_of_its_cached_values(spec: dict[str, Any], before: dict[str, Any],
                                                         after: dict[str, Any]) -> None:
    """A status write supersedes the old object: its cached values are dropped (memory), and a
    reader that still asks the old object gets the same values computed again."""
    old = Pod(manifest(spec, before))
    first = derived(old)
    cache = old._cache
    assert cache
    raw = dict(old.raw)
    raw["status"] = after
    new = old.with_status(raw)
    assert old._cache is None and new._cache is None
    assert cache  # dropped, not cleared: another object sharing the dict keeps its values
    assert derived(old) == first
    assert derived(new)[:3] == first[:3]  # requests read only the spec
