"""Fake plugins and builders for the scheduler-core tests (as upstream's tf.* fakes in
pkg/scheduler/testing/framework): explicit profiles that do not depend on the default plugins."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.scheduler.cache.cache import Cache
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.config import SchedulerConfiguration, parse_configuration
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
)
from ksched.scheduler.framework.interface import (
    BindPlugin,
    EnqueueExtensions,
    FilterPlugin,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from ksched.scheduler.framework.runtime import Framework
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.registry import Registry
from ksched.scheduler.scheduler import Scheduler

# The finished core plugins; the default plugins (TaintToleration, NodeResourcesFit, ...) are not used.
CORE = ("PrioritySort", "SchedulingGates", "NodeName", "NodeUnschedulable", "DefaultBinder")


def profile_cfg(*extra: str | tuple[str, int], name: str = "default-scheduler", core: Sequence[str] = CORE,
                points: dict[str, Any] | None = None, pct: int | None = None,
                plugin_config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One profile: multiPoint = the core plugins + ``extra`` (name or (name, weight)), every
    default disabled."""
    enabled: list[dict[str, Any]] = [{"name": n} for n in core]
    for e in extra:
        if isinstance(e, tuple):
            enabled.append({"name": e[0], "weight": e[1]})
        else:
            enabled.append({"name": e})
    plugins: dict[str, Any] = {"multiPoint": {"enabled": enabled, "disabled": [{"name": "*"}]}}
    plugins.update(points or {})
    prof: dict[str, Any] = {"schedulerName": name, "plugins": plugins}
    if pct is not None:
        prof["percentageOfNodesToScore"] = pct
    if plugin_config:
        prof["pluginConfig"] = plugin_config
    return prof


def config(*profiles: dict[str, Any], **top: Any) -> SchedulerConfiguration:
    raw: dict[str, Any] = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                           "profiles": list(profiles) or [profile_cfg()]}
    raw.update(top)
    return parse_configuration(raw)


def framework(*extra: str | tuple[str, int], registry: Registry | None = None, **kw: Any) -> Framework:
    cfg = config(profile_cfg(*extra, **kw))
    return Framework(cfg.profiles[0], registry or Registry(load_entry_points=False))


# ---------------------------------------------------------------------------------------- fakes


class CallLog:
    """Records plugin calls in order: (plugin, extension point, detail)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    def add(self, plugin: str, point: str, detail: str = "") -> None:
        self.calls.append((plugin, point, detail))

    def points(self, point: str) -> list[str]:
        return [c[0] for c in self.calls if c[1] == point]

    def clear(self) -> None:
        self.calls.clear()


def fake_filter(name: str, fits: Callable[[Pod, NodeInfo], bool], *, code: Code = Code.UNSCHEDULABLE,
                reason: str | None = None, log: CallLog | None = None,
                events: Sequence[ClusterEventWithHint] | None = None) -> type:
    """A Filter plugin: rejects with ``code``/``reason`` where ``fits`` is false."""
    why = reason or f"node(s) rejected by {name}"

    class _F(FilterPlugin, EnqueueExtensions):
        def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
            if log is not None:
                log.add(name, "filter", node_info.name)
            if fits(pod, node_info):
                return None
            return Status(code, why)

        def events_to_register(self) -> list[ClusterEventWithHint]:
            if events is not None:
                return list(events)
            return [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
                    ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE))]

    _F.name = name
    _F.__name__ = _F.__qualname__ = name
    return _F


def slots_of(ni: NodeInfo) -> int:
    node = ni.node
    return int(node.labels.get("slots", "1000")) if node is not None else 0


def milli_cpu(pod: Pod) -> int:
    from ksched.api.resources import pod_requests

    return pod_requests(pod).get("cpu", 0)


def fits_resources(pod: Pod, ni: NodeInfo) -> bool:
    """A resource-accounting fit: free pod slots (label ``slots``) and CPU (allocatable)."""
    if ni.num_pods + 1 > slots_of(ni):
        return False
    return ni.requested.get("cpu", 0) + milli_cpu(pod) <= ni.allocatable.get("cpu", 0)


FakeFit = fake_filter("FakeFit", fits_resources, reason="Insufficient slots or cpu")


def fake_score(name: str, fn: Callable[[Pod, NodeInfo], int], *, normalize: Callable[[list[int]], list[int]] | None
               = None, log: CallLog | None = None, pre_score_skip: Callable[[Pod], bool] | None = None) -> type:
    """A Score plugin (with PreScore when ``pre_score_skip`` is given; NormalizeScore when
    ``normalize`` is)."""

    class _S(ScorePlugin):
        def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
            if log is not None:
                log.add(name, "score", node_info.name)
            return fn(pod, node_info), None

    cls: type = _S
    if pre_score_skip is not None:
        class _PS(_S, PreScorePlugin):
            def pre_score(self, state: CycleState, pod: Pod, nodes: Any) -> Status | None:
                if log is not None:
                    log.add(name, "preScore")
                return Status.skip() if pre_score_skip(pod) else None
        cls = _PS
    if normalize is not None:
        def normalize_score(self: Any, state: CycleState, pod: Pod, nodes: Any, scores: Any) -> Status | None:
            out = normalize([int(x) for x in scores])
            for i, v in enumerate(out):
                scores[i] = v
            return None
        cls = type(name, (cls, ScoreExtensions), {"normalize_score": normalize_score})
    cls.name = name
    cls.__name__ = cls.__qualname__ = name
    return cls


def label_score(name: str = "LabelScore", label: str = "score") -> type:
    """Scores a node by its integer label ``label`` (0 without it)."""
    return fake_score(name, lambda pod, ni: int(ni.node.labels.get(label, "0")) if ni.node else 0)


def fake_pre_filter(name: str, *, nodes: Callable[[Pod], set[str] | None] | None = None,
                    status: Callable[[Pod], Status | None] | None = None, log: CallLog | None = None,
                    with_filter: bool = False) -> type:
    """A PreFilter (optionally also a Filter that rejects everything, to observe Skip)."""

    class _P(PreFilterPlugin):
        def pre_filter(self, state: CycleState, pod: Pod, node_list: Any) -> tuple[PreFilterResult | None,
                                                                                    Status | None]:
            if log is not None:
                log.add(name, "preFilter")
            st = status(pod) if status is not None else None
            if st is not None and st.code != Code.SUCCESS:
                return None, st
            ns = nodes(pod) if nodes is not None else None
            return (PreFilterResult(ns) if ns is not None else None), None

    cls: type = _P
    if with_filter:
        class _PF(_P, FilterPlugin):
            def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
                if log is not None:
                    log.add(name, "filter", node_info.name)
                return Status(Code.UNSCHEDULABLE, f"rejected by {name}")
        cls = _PF
    cls.name = name
    cls.__name__ = cls.__qualname__ = name
    return cls


class RecordingReserve(ReservePlugin):
    """Reserve succeeds unless the pod has label ``fail-reserve`` equal to this plugin's name."""

    log: CallLog = CallLog()

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.log.add(self.name, "reserve", node_name)
        if pod.labels.get("fail-reserve") == self.name:
            return Status(Code.UNSCHEDULABLE, f"reserve failed at {self.name}")
        if pod.labels.get("error-reserve") == self.name:
            return Status.as_error(f"reserve error at {self.name}")
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.log.add(self.name, "unreserve", node_name)


def reserve_plugin(name: str, log: CallLog) -> type:
    return type(name, (RecordingReserve,), {"name": name, "log": log})


class WaitingPermit(PermitPlugin):
    """Permit: Wait (timeout ``permit-timeout`` label, default 10 s) for pods labelled ``wait``;
    reject pods labelled ``reject-permit``; ``error-permit`` -> Error."""

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        if "reject-permit" in pod.labels:
            return Status(Code.UNSCHEDULABLE, "rejected at permit"), 0
        if "error-permit" in pod.labels:
            return Status.as_error("permit error"), 0
        if "wait" in pod.labels:
            return Status(Code.WAIT, "wait"), float(pod.labels.get("permit-timeout", "10"))
        return None, 0


WaitingPermit.name = "WaitingPermit"


def bind_plugin(name: str, log: CallLog, *, skip: bool = False, error: bool = False,
                really_bind: bool = True) -> type:
    class _B(BindPlugin):
        def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
            log.add(name, "bind", node_name)
            if skip or pod.labels.get("skip-bind") == name:
                return Status.skip()
            if error or pod.labels.get("error-bind") == name:
                return Status.as_error(f"bind error at {name}")
            if really_bind:
                assert self.handle is not None
                self.handle.client.bind(pod, node_name)
            return None

    _B.name = name
    _B.__name__ = _B.__qualname__ = name
    return _B


def pre_bind_plugin(name: str, log: CallLog, *, fail: bool = False, only_labelled: bool = False) -> type:
    """A PreBind plugin with work for every pod, or (``only_labelled``) only for pods labelled
    ``prebind``."""

    class _PB(PreBindPlugin):
        def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
            if only_labelled and "prebind" not in pod.labels:
                return Status.skip()
            return None

        def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
            log.add(name, "preBind", node_name)
            if fail or "fail-prebind" in pod.labels:
                return Status.as_error("prebind failed")
            return None

    _PB.name = name
    return _PB


def post_bind_plugin(name: str, log: CallLog) -> type:
    class _PoB(PostBindPlugin):
        def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
            log.add(name, "postBind", node_name)

    _PoB.name = name
    return _PoB


def post_filter_plugin(name: str, *, code: Code = Code.UNSCHEDULABLE, message: str = "preemption: not helpful",
                       nominate: str = "") -> type:
    class _PF(PostFilterPlugin):
        def post_filter(self, state: CycleState, pod: Pod, diagnosis: Any) -> tuple[PostFilterResult | None,
                                                                                   Status | None]:
            if code == Code.SUCCESS:
                return PostFilterResult(nominate), None
            return (PostFilterResult(nominate) if nominate else None), Status(code, message)

    _PF.name = name
    return _PF


# ---------------------------------------------------------------------------------------- clusters


class Env:
    """An embedded store, an in-process client and a scheduler on a virtual clock."""

    def __init__(self, cfg: SchedulerConfiguration | None = None, plugins: Iterable[type] = (), *,
                 seed: int = 0, explain: bool = False, conflict_resolver: bool = True) -> None:
        self.clock = VirtualClock()
        # Pods state their priority without PriorityClasses, as in upstream's scheduler integration
        # tests (whose API server runs without the Priority admission plugin).
        self.store = Store(self.clock, auto_create_namespaces=True, conflict_resolver=conflict_resolver,
                           disable_admission_plugins=("Priority",))
        self.client = InProcessClient(self.store)
        reg = Registry(load_entry_points=False)
        for p in plugins:
            reg.add(p)
        self.registry = reg
        self.sched = Scheduler(self.client, cfg or config(), clock=self.clock, registry=reg, seed=seed,
                               explain=explain, record_attempts=True)

    def create(self, *objs: Any) -> None:
        for o in objs:
            self.store.create(o)

    def run(self) -> int:
        return self.sched.run_until_idle()

    def pod(self, name: str, namespace: str = "default") -> Pod:
        p = self.store.get("Pod", namespace, name)
        assert isinstance(p, Pod)
        return p

    def node_of(self, name: str) -> str:
        return self.pod(name).node_name

    def pods(self) -> list[Pod]:
        return list(self.store.list("Pod")[0])  # type: ignore[arg-type]

    def events(self, reason: str | None = None, name: str | None = None) -> list[Any]:
        evs = self.store.list("Event")[0]
        out = []
        for e in evs:
            if reason is not None and e.raw.get("reason") != reason:
                continue
            if name is not None and (e.raw.get("involvedObject") or {}).get("name") != name:
                continue
            out.append(e)
        return out

    def advance(self, seconds: float) -> int:
        self.clock.advance(seconds)
        return self.run()


def snapshot_of(cache: Cache) -> Snapshot:
    snap = Snapshot(cache.table.cols)
    cache.update_snapshot(snap)
    return snap
