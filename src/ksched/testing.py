"""Builders and runners for plugin tests (ksched's own, and those of users writing plugins).

``make_pod`` / ``make_node`` build typed objects from keyword arguments (as upstream's
``st.MakePod()``); ``build_snapshot`` puts nodes and pods in a cache and returns its snapshot;
``PluginRunner`` runs PreFilter/Filter/PreScore/Score/NormalizeScore of a set of plugins the way a
scheduling cycle does, in both the vectorized and per-node forms, and checks they agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.scheduler.cache.cache import Cache
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.config import PluginRef, PluginSet, Profile, parse_configuration
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import ScoreExtensions, VectorizedFilter, VectorizedScore
from ksched.scheduler.framework.runtime import Framework
from ksched.scheduler.framework.status import Code, Status

__all__ = ["PluginRunner", "build_snapshot", "make_node", "make_pod"]

_uid = 0


def _next_uid() -> str:
    global _uid
    _uid += 1
    return f"uid-{_uid}"


def _set_given(d: dict[str, Any], **fields: Any) -> None:
    """Set in ``d`` each of ``fields`` that is given (truthy), in the order given."""
    for k, v in fields.items():
        if v:
            d[k] = v


def make_pod(name: str = "pod", namespace: str = "default", *, uid: str | None = None,
             requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
             containers: list[dict[str, Any]] | None = None, init_containers: list[dict[str, Any]] | None = None,
             labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
             node_name: str = "", priority: int | None = None, tolerations: list[dict[str, Any]] | None = None,
             node_selector: dict[str, str] | None = None, affinity: dict[str, Any] | None = None,
             topology_spread_constraints: list[dict[str, Any]] | None = None,
             volumes: list[dict[str, Any]] | None = None, host_ports: Sequence[int | tuple[str, str, int]] = (),
             scheduler_name: str | None = None, overhead: dict[str, Any] | None = None,
             scheduling_gates: Sequence[str] = (), owner_kind: str | None = None, owner_name: str = "owner",
             phase: str | None = None, nominated_node_name: str = "", images: Sequence[str] = (),
             creation_timestamp: str | None = None, start_time: str | None = None,
             deletion_timestamp: str | None = None, preemption_policy: str | None = None,
             termination_grace_period_seconds: int | None = None,
             spec: dict[str, Any] | None = None) -> Pod:
    """A pod. ``requests``/``limits`` go to one container unless ``containers`` is given;
    ``host_ports`` are ports or (hostIP, protocol, port)."""
    md: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or _next_uid()}
    _set_given(md, labels=dict(labels or {}), annotations=dict(annotations or {}),
               creationTimestamp=creation_timestamp, deletionTimestamp=deletion_timestamp)
    if owner_kind:
        md["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind, "name": owner_name,
                                  "uid": f"{owner_name}-uid", "controller": True}]
    if containers is None:
        c: dict[str, Any] = {"name": "c0", "image": images[0] if images else "registry.k8s.io/pause:3.10"}
        res: dict[str, Any] = {}
        _set_given(res, requests=dict(requests or {}), limits=dict(limits or {}))
        if res:
            c["resources"] = res
        if host_ports:
            ports = []
            for hp in host_ports:
                if isinstance(hp, tuple):
                    ip, proto, port = hp
                    ports.append({"containerPort": port, "hostPort": port, "protocol": proto, "hostIP": ip})
                else:
                    ports.append({"containerPort": hp, "hostPort": hp, "protocol": "TCP"})
            c["ports"] = ports
        containers = [c]
        for i, img in enumerate(images[1:], 1):
            containers.append({"name": f"c{i}", "image": img})
    sp: dict[str, Any] = {"containers": containers}
    _set_given(sp, initContainers=init_containers, nodeName=node_name)
    if priority is not None:
        sp["priority"] = priority
    _set_given(sp, tolerations=tolerations, nodeSelector=node_selector, affinity=affinity,
               topologySpreadConstraints=topology_spread_constraints, volumes=volumes,
               schedulerName=scheduler_name, overhead=overhead,
               schedulingGates=[{"name": g} for g in scheduling_gates], preemptionPolicy=preemption_policy)
    if termination_grace_period_seconds is not None:
        sp["terminationGracePeriodSeconds"] = termination_grace_period_seconds
    if spec:
        sp.update(spec)
    status: dict[str, Any] = {}
    _set_given(status, phase=phase, nominatedNodeName=nominated_node_name, startTime=start_time)
    return Pod({"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": sp, "status": status})


def make_node(name: str = "node", *, cpu: Any = "4", memory: Any = "32Gi", pods: Any = 110,
              labels: dict[str, str] | None = None, taints: list[dict[str, Any]] | None = None,
              unschedulable: bool = False, images: Iterable[tuple[Sequence[str], int]] = (),
              allocatable: dict[str, Any] | None = None, capacity: dict[str, Any] | None = None,
              annotations: dict[str, str] | None = None) -> Node:
    """A Ready node; ``allocatable`` adds or overrides resources (e.g. ``nvidia.com/gpu``)."""
    alloc: dict[str, Any] = {k: str(v) for k, v in (("cpu", cpu), ("memory", memory), ("pods", pods))
                             if v is not None}
    if allocatable:
        alloc.update({k: str(v) for k, v in allocatable.items()})
    md: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    _set_given(md, annotations=annotations)
    spec: dict[str, Any] = {}
    _set_given(spec, taints=taints, unschedulable=bool(unschedulable))
    status: dict[str, Any] = {"capacity": dict(capacity or alloc), "allocatable": alloc,
                              "conditions": [{"type": "Ready", "status": "True"}]}
    if images:
        status["images"] = [{"names": list(n), "sizeBytes": s} for n, s in images]
    return Node({"apiVersion": "v1", "kind": "Node", "metadata": md, "spec": spec, "status": status})


def build_snapshot(nodes: Iterable[Node], pods: Iterable[Pod] = ()) -> tuple[Cache, Snapshot]:
    """A cache holding the nodes and the (bound) pods, and an up-to-date snapshot of it."""
    cache = Cache()
    for n in nodes:
        cache.add_node(n)
    for p in pods:
        if p.node_name:
            cache.add_pod(p)
    snap = Snapshot(cache.table.cols)
    cache.update_snapshot(snap)
    return cache, snap


class PluginRunner:
    """A framework with just the given plugins (plus PrioritySort and DefaultBinder so the
    profile is complete), on a snapshot of the given nodes and pods."""

    def __init__(self, plugins: Sequence[str | tuple[str, int]], nodes: Iterable[Node], pods: Iterable[Pod] = (),
                 args: dict[str, dict[str, Any]] | None = None, *, client: Any = None, informers: Any = None,
                 nominator: Any = None, clock: Any = None) -> None:
        refs = [PluginRef(p, 0) if isinstance(p, str) else PluginRef(p[0], p[1]) for p in plugins]
        names = {r.name for r in refs}
        extra = [PluginRef(n) for n in ("PrioritySort", "DefaultBinder") if n not in names]
        base = parse_configuration({}).profiles[0].plugin_config
        plugin_config = {k: dict(v) for k, v in base.items()}
        for k, v in (args or {}).items():
            plugin_config[k] = {**plugin_config.get(k, {}), **v}
        plugins_map = {ep: PluginSet() for ep in ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter",
                                                  "preScore", "score", "reserve", "permit", "preBind", "bind",
                                                  "postBind")}
        plugins_map["multiPoint"] = PluginSet(refs + extra)
        profile = Profile("default-scheduler", plugins_map, plugin_config)
        self.cache, self.snapshot = build_snapshot(nodes, pods)
        self.fw = Framework(profile, client=client, informers=informers, clock=clock)
        self.fw.set_snapshot(self.snapshot)
        self.fw.nominator = nominator

    def refresh(self) -> None:
        self.cache.update_snapshot(self.snapshot)

    def pre_filter(self, pod: Pod) -> tuple[CycleState, Any, Status | None]:
        state = CycleState()
        res, st, _ = self.fw.run_pre_filter(state, pod, self.snapshot.all_nodes())
        return state, res, st

    def filter(self, pod: Pod, check_vectorized: bool = True) -> dict[str, Status | None]:
        """PreFilter then every Filter plugin on every node: node name -> status (None = fits).
        A PreFilter rejection gives that status for every node. Raises AssertionError if a
        plugin's vectorized form disagrees with its per-node form."""
        state, res, st = self.pre_filter(pod)
        names = self.snapshot.all_nodes().names
        if st is not None:
            return dict.fromkeys(names, st)
        out: dict[str, Status | None] = {}
        for ni in self.snapshot.all_nodes():
            if res is not None and res.node_names is not None and ni.name not in res.node_names:
                out[ni.name] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "not in PreFilterResult")
                continue
            out[ni.name] = self.fw.run_filter_plugins(state, pod, ni)
        if check_vectorized:
            rows = self.snapshot.order
            for p in self.fw.filter_plugins:
                if not isinstance(p, VectorizedFilter) or p.name in state.skip_filter_plugins:
                    continue
                got = p.filter_nodes(state, pod, self.snapshot, rows)
                if got is None:
                    continue  # declined for this pod
                mask = np.asarray(got, dtype=bool)
                for i, ni in enumerate(self.snapshot.all_nodes()):
                    per = p.filter(state, pod, ni)
                    assert bool(mask[i]) == (per is None or per.code == Code.SUCCESS), (
                        f"{p.name}: vectorized says {bool(mask[i])} on {ni.name}, per-node says {per!r}")
        return out

    def score(self, pod: Pod, nodes: Sequence[str] | None = None, normalize: bool = True,
              weighted: bool = False) -> dict[str, dict[str, int]]:
        """PreFilter, PreScore and Score (+ NormalizeScore) on the given (default: all) nodes:
        plugin -> node -> score. Checks the vectorized and per-node forms agree."""
        state, _, st = self.pre_filter(pod)
        assert st is None, f"PreFilter rejected the pod: {st!r}"
        rows = self.snapshot.order
        if nodes is not None:
            rows = np.asarray([self.snapshot.row_of[n] for n in nodes], dtype=np.int64)
        nl = self.snapshot.node_list(rows)
        st = self.fw.run_pre_score(state, pod, nl)
        assert st is None, f"PreScore failed: {st!r}"
        out: dict[str, dict[str, int]] = {}
        for p in self.fw.score_plugins:
            if p.name in state.skip_score_plugins:
                out[p.name] = {}
                continue
            per = np.asarray([p.score(state, pod, ni)[0] for ni in nl], dtype=np.int64)
            if isinstance(p, VectorizedScore):
                v = np.asarray(p.score_nodes(state, pod, self.snapshot, rows), dtype=np.int64)
                assert (v == per).all(), f"{p.name}: vectorized scores {v.tolist()} != per-node {per.tolist()}"
            scores = per.copy()
            if normalize and isinstance(p, ScoreExtensions):
                s2 = p.normalize_score(state, pod, nl, scores)
                assert s2 is None or s2.code == Code.SUCCESS, f"{p.name}: normalize failed: {s2!r}"
            if weighted:
                scores = scores * self.fw.score_weights[p.name]
            out[p.name] = {n: int(s) for n, s in zip(nl.names, scores.tolist())}
        return out
