"""Test-only plugins and fakes for the DefaultPreemption tests (as upstream's preemption tests use
fake plugins), a builder for a framework around them, and checks of the fakes themselves.

``FakeFit`` is a small stand-in for NodeResourcesFit (requests against allocatable minus
requested, "Too many pods" / "Insufficient <resource>"), used until and besides the real plugin.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from ksched.api.errors import ApiError, NotFound
from ksched.api.meta import KubeObject
from ksched.api.node import Node
from ksched.api.pdb import PodDisruptionBudget
from ksched.api.pod import Pod
from ksched.clock import VirtualClock
from ksched.scheduler.config import EXTENSION_POINTS, PluginRef, PluginSet, Profile, parse_configuration
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import (
    FilterPlugin,
    NodeList,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
)
from ksched.scheduler.framework.runtime import Framework
from ksched.scheduler.framework.status import Code, Diagnosis, Status
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.scheduler.plugins.defaultpreemption import DefaultPreemption
from ksched.scheduler.plugins.registry import Registry
from ksched.scheduler.queue.nominator import Nominator
from ksched.testing import build_snapshot, make_node, make_pod


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


HAVE_FIT = _has("ksched.scheduler.plugins.noderesources.fit")
HAVE_INTERPODAFFINITY = _has("ksched.scheduler.plugins.interpodaffinity")
HAVE_PODTOPOLOGYSPREAD = _has("ksched.scheduler.plugins.podtopologyspread")

# The fit plugins the resource-based tables run with: the fake always, the real one once it exists.
FIT_PLUGINS = [
    "FakeFit",
    pytest.param("NodeResourcesFit", marks=pytest.mark.skipif(not HAVE_FIT, reason="NodeResourcesFit not written yet")),
]

# Upstream's test priorities and resources (defaultpreemption tests).
NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}


def epoch(seconds: int) -> str:
    """Start times upstream writes as Unix(0, n); seconds keep the same order here."""
    return f"1970-01-01T00:00:{seconds:02d}Z"


# ---------------------------------------------------------------------------- fake plugins


class FakeFit(PreFilterPlugin, FilterPlugin, PreFilterExtensions):
    """Requests against free allocatable: pods count first, then cpu, memory, then the rest."""

    name = "FakeFit"

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        state.write("FakeFit", dict(PodInfo(pod).requests))
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_add: PodInfo,
                node_info: NodeInfo) -> Status | None:
        return None

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        req: dict[str, int] = state.get("FakeFit") or dict(PodInfo(pod).requests)
        alloc, used = node_info.allocatable, node_info.requested
        reasons: list[str] = []
        if len(node_info.pods) + 1 > alloc.get("pods", 0):
            reasons.append("Too many pods")
        names = [r for r in ("cpu", "memory") if r in req] + sorted(r for r in req if r not in ("cpu", "memory", "pods"))
        for r in names:
            if req[r] > 0 and req[r] > alloc.get(r, 0) - used.get(r, 0):
                reasons.append(f"Insufficient {r}")
        return Status.unschedulable(*reasons) if reasons else None


class ErrorOnLabelPlugin(PreFilterPlugin, FilterPlugin, PreFilterExtensions):
    """Upstream's TestPlugin: AddPod/RemovePod fail on nodes labelled error=true."""

    name = "test-plugin"

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_add: PodInfo,
                node_info: NodeInfo) -> Status | None:
        if node_info.node is not None and node_info.node.labels.get("error") == "true":
            return Status.as_error(f"failed to add pod: {pod_to_schedule.name}")
        return None

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_info_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        if node_info.node is not None and node_info.node.labels.get("error") == "true":
            return Status.as_error(f"failed to remove pod: {pod_to_schedule.name}")
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return None


class FakeFilter(FilterPlugin):
    """Returns a configured code per node (Success by default) and counts its calls."""

    name = "FakeFilter"
    codes: dict[str, Code] = {}
    calls = 0

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        type(self).calls += 1
        code = self.codes.get(node_info.name, Code.SUCCESS)
        return None if code == Code.SUCCESS else Status(code, "injecting failure for pod " + pod.name)


class TrueFilter(FilterPlugin):
    name = "TrueFilter"

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return None


class FalseFilter(FilterPlugin):
    name = "FalseFilter"

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return Status.unschedulable("node(s) failed the FalseFilter")


class MatchFilter(FilterPlugin):
    """Passes only on the node whose name is the pod's name."""

    name = "MatchFilter"

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return None if node_info.name == pod.name else Status.unschedulable("node(s) didn't match the pod's name")


FAKE_PLUGINS: dict[str, type] = {c.name: c for c in (FakeFit, ErrorOnLabelPlugin, FakeFilter, TrueFilter,
                                                      FalseFilter, MatchFilter)}


# ---------------------------------------------------------------------------- fake cluster


class FakeClient:
    """Records the API calls preemption makes; pods named in ``fail_patch`` / ``fail_delete``
    fail with an ApiError, pods in ``missing`` are NotFound."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, str, str, Any, str, str]] = []
        self.deletes: list[tuple[str, str, str, int | None]] = []
        self.fail_patch: set[str] = set()
        self.fail_delete: set[str] = set()
        self.missing: set[str] = set()

    def patch(self, kind: str, namespace: str, name: str, patch: Any,
              content_type: str = "application/merge-patch+json", subresource: str = "") -> None:
        if name in self.fail_patch:
            raise ApiError("patch pod status failed")
        if name in self.missing:
            raise NotFound.of("pods", name)
        self.patches.append((kind, namespace, name, patch, content_type, subresource))

    def delete(self, kind: str, namespace: str, name: str, grace_period_seconds: int | None = None,
               uid: str | None = None) -> None:
        if name in self.fail_delete:
            raise ApiError("delete pod failed")
        if name in self.missing:
            raise NotFound.of("pods", name)
        self.deletes.append((kind, namespace, name, grace_period_seconds))

    @property
    def deleted_names(self) -> list[str]:
        return [d[2] for d in self.deletes]

    def patched(self, name: str) -> list[Any]:
        return [p[3] for p in self.patches if p[2] == name]


class FakeInformer:
    def __init__(self) -> None:
        self.objs: dict[str, KubeObject] = {}

    def add(self, obj: KubeObject) -> None:
        self.objs[obj.key] = obj

    def remove(self, key: str) -> None:
        self.objs.pop(key, None)

    def get(self, key: str) -> KubeObject | None:
        return self.objs.get(key)

    def list(self) -> list[KubeObject]:
        return list(self.objs.values())


class FakeInformers:
    def __init__(self) -> None:
        self.informers: dict[str, FakeInformer] = {}

    def informer(self, kind: str, **_: Any) -> FakeInformer:
        return self.informers.setdefault(kind, FakeInformer())


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str, str]] = []

    def event(self, obj: KubeObject, etype: str, reason: str, action: str, message: str) -> None:
        self.events.append((obj.key, etype, reason, action, message))


# ---------------------------------------------------------------------------- builder


@dataclass
class Env:
    fw: Framework
    plugin: DefaultPreemption
    client: FakeClient
    informers: FakeInformers
    recorder: FakeRecorder
    nominator: Nominator
    clock: VirtualClock
    activated: list[Pod] = field(default_factory=list)

    @property
    def snapshot(self) -> Any:
        return self.fw.snapshot

    def node_infos(self, names: Sequence[str] | None = None) -> list[NodeInfo]:
        infos = list(self.snapshot.all_nodes())
        if names is None:
            return sorted(infos, key=lambda ni: ni.name)
        by = {ni.name: ni for ni in infos}
        return [by[n] for n in names]

    def pre_filter(self, pod: Pod) -> CycleState:
        state = CycleState()
        _, st, _ = self.fw.run_pre_filter(state, pod, self.snapshot.all_nodes())
        assert st is None, f"unexpected PreFilter status {st!r}"
        return state

    def post_filter(self, pod: Pod, statuses: dict[str, Status], absent: Status | None = None
                    ) -> tuple[Any, Status]:
        state = self.pre_filter(pod)
        d = Diagnosis()
        d.node_to_status = dict(statuses)
        d.absent_status = absent
        return self.fw.run_post_filter(state, pod, d)


def build(plugins: Sequence[str], nodes: Iterable[Node], pods: Iterable[Pod] = (), *,
          preemptor: Pod | Sequence[Pod] | None = None, pdbs: Iterable[PodDisruptionBudget] = (),
          args: dict[str, Any] | None = None, async_preemption: bool = False,
          nominated: Iterable[tuple[Pod, str]] = ()) -> Env:
    """A framework with ``plugins`` (+ PrioritySort, DefaultBinder, DefaultPreemption), a snapshot
    of ``nodes`` and the bound ``pods``, fake client/informers/recorder and a nominator."""
    pods = list(pods)
    refs = [PluginRef(p) for p in plugins] + [PluginRef(n) for n in ("PrioritySort", "DefaultBinder",
                                                                     "DefaultPreemption")]
    base = parse_configuration({}).profiles[0].plugin_config
    plugin_config = {k: dict(v) for k, v in base.items()}
    if args:
        plugin_config["DefaultPreemption"] = {**plugin_config.get("DefaultPreemption", {}), **args}
    pm = {ep: PluginSet() for ep in EXTENSION_POINTS}
    pm["multiPoint"] = PluginSet(refs)
    profile = Profile("default-scheduler", pm, plugin_config)
    client, informers, recorder = FakeClient(), FakeInformers(), FakeRecorder()
    clock = VirtualClock()
    pod_inf = informers.informer("Pod")
    preemptors = [] if preemptor is None else ([preemptor] if isinstance(preemptor, Pod) else list(preemptor))
    for p in [*preemptors, *pods]:
        pod_inf.add(p)
    for pdb in pdbs:
        informers.informer("PodDisruptionBudget").add(pdb)
    fw = Framework(profile, Registry(dict(FAKE_PLUGINS), load_entry_points=False), client=client,
                   informers=informers, clock=clock, event_recorder=recorder)
    _, snap = build_snapshot(nodes, pods)
    fw.set_snapshot(snap)
    nom = Nominator()
    for p, node in nominated:
        nom.add(PodInfo(p), node)
    fw.nominator = nom
    env = Env(fw, fw.plugins["DefaultPreemption"], client, informers, recorder, nom, clock)  # type: ignore[arg-type]
    fw.pod_activator = env.activated.extend
    env.plugin.set_async_preemption(async_preemption)
    FakeFilter.codes = {}
    FakeFilter.calls = 0
    return env


def node(name: str, res: dict[str, str] | None = None, pods: int = 32, labels: dict[str, str] | None = None) -> Node:
    """Upstream's st.MakeNode().Capacity(res): the resources given plus 32 pods."""
    res = dict(res or {})
    return make_node(name, cpu=res.pop("cpu", None), memory=res.pop("memory", None), pods=pods, labels=labels,
                     allocatable=res or None)


def pod(name: str, *, node_name: str = "", priority: int | None = None, req: dict[str, str] | None = None,
        labels: dict[str, str] | None = None, start: int | None = None, ns: str = "default", uid: str | None = None,
        **kw: Any) -> Pod:
    return make_pod(name, ns, uid=uid or name, node_name=node_name, priority=priority, requests=req, labels=labels,
                    start_time=epoch(start) if start is not None else None, **kw)


def pdb(name: str, match_labels: dict[str, str] | None, allowed: int = 0, *, ns: str = "default",
        disrupted: Sequence[str] = (), selector: dict[str, Any] | None = None, min_available: Any = None
        ) -> PodDisruptionBudget:
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["selector"] = selector
    elif match_labels is not None:
        spec["selector"] = {"matchLabels": dict(match_labels)}
    if min_available is not None:
        spec["minAvailable"] = min_available
    status: dict[str, Any] = {"disruptionsAllowed": allowed}
    if disrupted:
        status["disruptedPods"] = dict.fromkeys(disrupted, "2025-01-01T00:00:00Z")
    return PodDisruptionBudget({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                "metadata": {"name": name, "namespace": ns}, "spec": spec, "status": status})


# ---------------------------------------------------------------------------- checks of the fakes


@pytest.mark.parametrize(("res", "pods_on_node", "req", "want"), [
    ({"cpu": "1"}, 0, {"cpu": "1"}, None),
    ({"cpu": "1"}, 0, {"cpu": "2"}, ("Insufficient cpu",)),
    ({"cpu": "1", "memory": "1"}, 0, {"cpu": "2", "memory": "2"}, ("Insufficient cpu", "Insufficient memory")),
    ({"cpu": "1", "nvidia.com/gpu": "1"}, 0, {"nvidia.com/gpu": "2"}, ("Insufficient nvidia.com/gpu",)),
])
def test_fake_fit(res: dict[str, str], pods_on_node: int, req: dict[str, str], want: tuple[str, ...] | None) -> None:
    env = build(["FakeFit"], [node("n", res)])
    p = pod("p", req=req)
    st = env.fw.run_filter_plugins(env.pre_filter(p), p, env.node_infos(["n"])[0])
    assert (st.reasons if st is not None else None) == want


def test_fake_fit_counts_pods() -> None:
    env = build(["FakeFit"], [node("n", pods=1)], [pod("a", node_name="n")])
    p = pod("p")
    st = env.fw.run_filter_plugins(env.pre_filter(p), p, env.node_infos(["n"])[0])
    assert st is not None and st.reasons == ("Too many pods",) and st.code == Code.UNSCHEDULABLE
