"""PreFilter and PreScore plugins left out by the pod's template (``runtime.TEMPLATE_SKIPS``)
against the reference (every plugin called in every cycle).

The contract first: whenever a plugin's ``pre_filter_skips(pod)`` / ``pre_score_skips(pod)``
says True, its ``pre_filter`` / ``pre_score`` returns Skip and writes nothing to the cycle
state; whenever its ``pre_filter_template_state(pod)`` / ``pre_score_template_state(pod)``
gives (key, value), the call succeeds having written that very value under that key and
nothing else; for pods of every shape (requests of core and extended resources, one of them a
DeviceClass's, or none, host
ports, volumes of every kind, node selectors, required and preferred node affinity) and plugin
arguments (NodeAffinity's addedAffinity, VolumeBinding's shape). Then the runtime: ``run_pre_filter`` and ``run_pre_score`` give the same results,
statuses, narrowing plugins, skip sets and state keys with the flag on and off, also when a
plugin stops PreFilter early (the skip set is then the reference's partial one). Last, whole
simulations place every pod alike and record the same events with the flag on and off."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import placements
from ksched.api.pod import Pod
from ksched.scheduler.config import SchedulerConfiguration, parse_configuration
from ksched.scheduler.framework import runtime
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.runtime import Framework
from ksched.scheduler.framework.status import Code, Status
from ksched.sim.simulation import Simulation
from ksched.testing import make_node, make_pod

_ADDED = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "b"]}]}]},
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 3, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}}]}
_SHAPE = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]

_VOLUMES: list[dict[str, Any]] = [
    {"name": "scratch", "emptyDir": {}},
    {"name": "cfg", "configMap": {"name": "cfg"}},
    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
    {"name": "missing", "persistentVolumeClaim": {"claimName": "missing"}},
    {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
    {"name": "ebs", "awsElasticBlockStore": {"volumeID": "vol-1"}},
]
_REQUIRED: list[dict[str, Any] | None] = [
    None,
    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]},
    {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0", "n1"]}]}]},
    # Two names ANDed in one term: no node at all (NodeAffinity stops PreFilter).
    {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0"]},
                                            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
]
_PREFERRED: list[list[dict[str, Any]] | None] = [
    None,
    [{"weight": 5, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]}}],
]


def _config(added: bool, shape: bool) -> SchedulerConfiguration | None:
    args = []
    if added:
        args.append({"name": "NodeAffinity", "args": {"addedAffinity": _ADDED}})
    if shape:
        args.append({"name": "VolumeBinding", "args": {"shape": _SHAPE}})
    if not args:
        return None
    return parse_configuration({"profiles": [{"schedulerName": "default-scheduler", "pluginConfig": args}]})


# The last one's extended resource is a DeviceClass's in _framework's cluster (DRA may provide it).
_REQUESTS: list[dict[str, str]] = [{"cpu": "100m"}, {}, {"memory": "64Mi", "example.com/foo": "1"},
                                   {"cpu": "100m", "example.com/bar": "1"}]


def _pod(name: str, ports: bool, volumes: list[int], selector: bool, required: int, preferred: int,
         requests: int = 0) -> Pod:
    affinity: dict[str, Any] = {}
    if _REQUIRED[required] is not None:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = _REQUIRED[required]
    if _PREFERRED[preferred] is not None:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = _PREFERRED[preferred]
    req = _REQUESTS[requests]
    limits = {k: v for k, v in req.items() if "/" in k} or None
    return make_pod(name, labels={"app": name}, requests=req, limits=limits, host_ports=(8080,) if ports else (),
                    volumes=[_VOLUMES[i] for i in volumes] or None, node_selector={"pool": "a"} if selector else None,
                    affinity={"nodeAffinity": affinity} if affinity else None)


def _framework(added: bool, shape: bool) -> tuple[Simulation, Framework]:
    sim = Simulation(_config(added, shape), seed=0, kubelet=False, record_events=False)
    nodes = [make_node(f"n{i}", labels={"pool": "ab"[i % 2]}).raw for i in range(4)]
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
           "spec": {"accessModes": ["ReadWriteOncePod"], "resources": {"requests": {"storage": "1Gi"}}}}
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "bar"},
                    "spec": {"extendedResourceName": "example.com/bar"}}
    assert not sim.load([*nodes, pvc, device_class])
    sim.run()
    fw = sim.scheduler.profiles["default-scheduler"]
    sim.scheduler.cache.update_snapshot(sim.scheduler.snapshot)
    return sim, fw


_shapes = st.tuples(st.booleans(), st.lists(st.sampled_from(range(len(_VOLUMES))), max_size=2, unique=True),
                    st.booleans(), st.sampled_from(range(len(_REQUIRED))), st.sampled_from(range(len(_PREFERRED))),
                    st.sampled_from(range(len(_REQUESTS))))


def _status(s: Status | None) -> Any:
    return None if s is None else (s.code, tuple(s.reasons), s.plugin)


@settings(max_examples=40, deadline=None)
@given(st.lists(_shapes, min_size=1, max_size=5), st.booleans(), st.booleans())
def test_skipping_plugins_skip_without_writing_state(shapes: list[Any], added: bool, shape: bool) -> None:
    _, fw = _framework(added, shape)
    nodes = fw.snapshot.all_nodes()
    for i, s in enumerate(shapes):
        pod = _pod(f"p{i}", *s)
        for p in fw.pre_filter_plugins:
            if getattr(p, "pre_filter_skips", None) is not None and p.pre_filter_skips(pod):  # type: ignore[attr-defined]
                state = CycleState()
                r, got = p.pre_filter(state, pod, nodes)
                assert r is None and got is not None and got.code == Code.SKIP, p.name
                assert not state._data, p.name
            elif getattr(p, "pre_filter_template_state", None) is not None:
                w = p.pre_filter_template_state(pod)  # type: ignore[attr-defined]
                if w is not None:
                    state = CycleState()
                    r, got = p.pre_filter(state, pod, nodes)
                    assert r is None and (got is None or got.code == Code.SUCCESS), p.name
                    assert list(state._data) == [w[0]] and state._data[w[0]] is w[1], p.name
        for p in fw.points["preScore"]:
            if getattr(p, "pre_score_skips", None) is not None and p.pre_score_skips(pod):
                state = CycleState()
                got = p.pre_score(state, pod, nodes)
                assert got is not None and got.code == Code.SKIP, p.name
                assert not state._data, p.name
            elif getattr(p, "pre_score_template_state", None) is not None:
                w = p.pre_score_template_state(pod)
                if w is not None:
                    state = CycleState()
                    got = p.pre_score(state, pod, nodes)
                    assert got is None or got.code == Code.SUCCESS, p.name
                    assert list(state._data) == [w[0]] and state._data[w[0]] is w[1], p.name


def _cycle(fw: Framework, pod: Pod) -> Any:
    state = CycleState()
    nodes = fw.snapshot.all_nodes()
    res, st_, narrowing = fw.run_pre_filter(state, pod, nodes)
    out: list[Any] = [None if res is None else res.node_names, _status(st_), narrowing,
                      sorted(state.skip_filter_plugins), _data(state)]
    if st_ is None:
        out.append(_status(fw.run_pre_score(state, pod, nodes)))
        out += [sorted(state.skip_score_plugins), _data(state)]
    return out


def _data(state: CycleState) -> list[tuple[str, Any]]:
    """The state's keys, in order of writing, with the value where it is a tuple (of the
    template) and the value's type otherwise (the contract test holds the template's values to
    identity)."""
    return [(k, v if isinstance(v, tuple) else (type(v).__module__, type(v).__qualname__))
            for k, v in state._data.items()]


@settings(max_examples=40, deadline=None)
@given(st.lists(_shapes, min_size=1, max_size=6), st.booleans(), st.booleans())
def test_runtime_agrees_with_the_reference(shapes: list[Any], added: bool, shape: bool) -> None:
    _, fw = _framework(added, shape)
    for i, s in enumerate(shapes):
        for name in (f"p{i}", f"q{i}"):  # the second pod of the template reads the kept plan
            pod = _pod(name, *s)
            with pytest.MonkeyPatch.context() as m:
                m.setattr(runtime, "TEMPLATE_SKIPS", False)
                want = _cycle(fw, pod)
            assert _cycle(fw, pod) == want


def test_plain_pods_call_only_the_plugins_that_may_not_skip() -> None:
    _, fw = _framework(False, False)
    called: list[str] = []
    for p in fw.pre_filter_plugins:
        orig = p.pre_filter

        def counting(state: Any, pod: Any, nodes: Any, _orig: Any = orig, _name: str = p.name) -> Any:
            called.append(_name)
            return _orig(state, pod, nodes)

        p.pre_filter = counting  # type: ignore[method-assign]
    state = CycleState()
    fw.run_pre_filter(state, _pod("plain", False, [], False, 0, 0), fw.snapshot.all_nodes())
    assert not {"NodePorts", "NodeAffinity", "VolumeRestrictions", "NodeVolumeLimits", "VolumeZone",
                "NodeResourcesFit"} & set(called)
    assert "PreFilterNodeResourcesFit" in state._data
    assert {"NodePorts", "NodeAffinity", "VolumeRestrictions", "NodeVolumeLimits",
            "VolumeZone"} <= state.skip_filter_plugins
    # Stopped early by NodeAffinity: only the plugins before it are in the skip set, as the reference.
    state = CycleState()
    _, got, _ = fw.run_pre_filter(state, _pod("stop", False, [], False, 3, 0), fw.snapshot.all_nodes())
    assert got is not None and got.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert not state.skip_filter_plugins


def _cluster(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(seed)
    nodes = [make_node(f"n{i}", cpu=rng.choice(["1", "2"]), labels={"pool": rng.choice("ab")},
                       allocatable={"example.com/foo": "2"} if rng.random() < 0.5 else None).raw
             for i in range(rng.randint(3, 10))]
    shapes = [(rng.random() < 0.3, rng.sample([0, 1, 5], rng.randint(0, 1)), rng.random() < 0.3,
               rng.choice([0, 0, 1, 2, 3]), rng.choice([0, 1]), rng.choice([0, 0, 1, 2]))
              for _ in range(rng.randint(2, 5))]
    pods = []
    for i in range(rng.randint(10, 40)):
        p = _pod(f"p{i}", *rng.choice(shapes)).raw
        p["metadata"]["labels"] = {"app": "same"}
        p["metadata"]["uid"] = ""
        pods.append(p)
    return nodes, pods


def simulations_agree_with(flag: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeded cluster simulated with ``runtime.<flag>`` on and off: the same placements and
    events, and some pod placed (shared with test_runtime_skip_states)."""
    nodes, pods = _cluster(seed)
    got = []
    for on in (True, False):
        monkeypatch.setattr(runtime, flag, on)
        sim = Simulation(_config(seed % 2 == 1, seed % 3 == 1), seed=seed, kubelet=False)
        assert not sim.load([*nodes, *pods])
        sim.run()
        events = sorted((e.reason, e.message) for e in sim.store.items("Event"))  # type: ignore[attr-defined]
        got.append((placements(sim.store), events))
    assert got[0] == got[1]
    assert any(n for n, _ in got[0][0].values())


@pytest.mark.parametrize("seed", range(6))
def test_simulations_agree_with_the_flag_on_and_off(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    simulations_agree_with("TEMPLATE_SKIPS", seed, monkeypatch)
