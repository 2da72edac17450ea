"""Scenario timelines for ``ksched simulate --timeline FILE``: what happens to the cluster, and
when, on the virtual clock. The file holds one document::

    apiVersion: ksched.io/v1alpha1
    kind: Timeline
    events:
    - at: 2m                      # seconds after the start (30, 30s, 5m, 1.5h)
      failZone: zone-a            # one action per event
    - at: 30m
      restoreZone: zone-a

Actions:

* ``apply: [manifest, ...]`` -- create each object, or merge it into the existing one;
* ``delete: [{kind, namespace, name}, ...]``;
* ``patch: {kind, namespace, name, patch}`` -- a JSON merge patch;
* ``scale: {kind, namespace, name, replicas}`` -- ``spec.replicas`` (``spec.parallelism`` for a Job);
* ``failNode: NAME`` / ``restoreNode: NAME`` -- the node's kubelet stops (no heartbeats, its pods'
  containers frozen) or comes back; ``failZone: ZONE`` / ``restoreZone: ZONE`` -- every node
  labelled ``topology.kubernetes.io/zone=ZONE``;
* ``setUsage: {pod: NAMESPACE/NAME | node: NAME, cpu: .., memory: .., ...}`` -- the
  ``ksched.io/usage-<resource>`` annotations (a quantity or a profile, ``ksched.kubelet.usage``);
* ``cordon: NAME`` / ``uncordon: NAME`` -- ``spec.unschedulable``; ``drain: NAME`` -- cordon, then
  evict each of its pods through the Eviction API (PodDisruptionBudgets apply; DaemonSet and
  mirror pods stay), as ``kubectl drain``;
* ``markDeviceUnhealthy`` / ``markDeviceHealthy: {node, resource, device}`` -- the node annotation
  ``ksched.io/unhealthy-devices`` (a comma-separated list of device IDs) that the device manager
  (``ksched.kubelet.cm``) reads: an unhealthy device leaves the node's allocatable.

Events at the same time run in file order. The same timeline and seed give the same result.
:class:`History` records what happened over time (placements, evictions by whom and why,
restarts, rejections, node conditions and taints) and samples each node's usage against its
allocatable, for the report and its plot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ksched.api.errors import AlreadyExists, ApiError, BadRequest
from ksched.api.node import LABEL_ZONE, Node
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.kubelet.usage import (
    USAGE_ANNOTATION,
    UsageError,
    node_system_usage,
    parse_profile,
    pod_usage,
)

__all__ = ["History", "TimelineAction", "TimelineError", "TimelineRunner", "load_timeline", "parse_timeline"]

UNHEALTHY_DEVICES_ANNOTATION = "ksched.io/unhealthy-devices"
ACTIONS = ("apply", "delete", "patch", "scale", "failNode", "restoreNode", "failZone", "restoreZone", "setUsage",
           "cordon", "uncordon", "drain", "markDeviceUnhealthy", "markDeviceHealthy")
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
_UNITS = {None: 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


class TimelineError(ValueError):
    pass


@dataclass(frozen=True)
class TimelineAction:
    at: float
    op: str
    arg: Any
    where: str


def _time(v: Any, where: str) -> float:
    m = _TIME.match(str(v))
    if m is None:
        raise TimelineError(f"{where}.at: invalid time {v!r} (seconds, or a number with s, m or h)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _ref(d: Any, where: str, namespaced: bool = True) -> tuple[str, str, str]:
    if not isinstance(d, Mapping) or not d.get("kind") or not d.get("name"):
        raise TimelineError(f"{where}: want {{kind, namespace, name}}")
    return str(d["kind"]), str(d.get("namespace") or ("default" if namespaced else "")), str(d["name"])


def _check(op: str, arg: Any, where: str) -> None:
    """Refuse a malformed action before anything runs."""
    if op == "apply":
        if not isinstance(arg, list) or not all(isinstance(o, Mapping) and o.get("kind") for o in arg):
            raise TimelineError(f"{where}.apply: want a list of manifests")
    elif op == "delete":
        if not isinstance(arg, list):
            raise TimelineError(f"{where}.delete: want a list of {{kind, namespace, name}}")
        for i, r in enumerate(arg):
            _ref(r, f"{where}.delete[{i}]")
    elif op == "patch":
        _ref(arg, f"{where}.patch")
        if not isinstance(arg.get("patch"), Mapping):
            raise TimelineError(f"{where}.patch.patch: want a map (a JSON merge patch)")
    elif op == "scale":
        _ref(arg, f"{where}.scale")
        if not isinstance(arg.get("replicas"), int) or arg["replicas"] < 0:
            raise TimelineError(f"{where}.scale.replicas: want a non-negative integer")
    elif op in ("failNode", "restoreNode", "failZone", "restoreZone", "cordon", "uncordon", "drain"):
        if not isinstance(arg, str) or not arg:
            raise TimelineError(f"{where}.{op}: want a name")
    elif op == "setUsage":
        if not isinstance(arg, Mapping) or ("pod" in arg) == ("node" in arg):
            raise TimelineError(f"{where}.setUsage: want pod: NAMESPACE/NAME or node: NAME, and resources")
        for k, v in arg.items():
            if k in ("pod", "node"):
                continue
            try:
                parse_profile(str(v), k, f"{where}.setUsage.{k}")
            except UsageError as e:
                raise TimelineError(str(e)) from None
    elif op in ("markDeviceUnhealthy", "markDeviceHealthy") and (
            not isinstance(arg, Mapping) or not all(arg.get(k) for k in ("node", "resource", "device"))):
        raise TimelineError(f"{where}.{op}: want {{node, resource, device}}")


def parse_timeline(doc: Any, source: str = "timeline") -> list[TimelineAction]:
    """The actions of a Timeline document, ordered by time (file order among equal times)."""
    if not isinstance(doc, Mapping) or doc.get("kind") != "Timeline":
        raise TimelineError(f"{source}: kind: want Timeline")
    if doc.get("apiVersion", "ksched.io/v1alpha1") != "ksched.io/v1alpha1":
        raise TimelineError(f"{source}: apiVersion: want ksched.io/v1alpha1")
    events = doc.get("events")
    if not isinstance(events, list):
        raise TimelineError(f"{source}: events: want a list")
    out: list[TimelineAction] = []
    for i, ev in enumerate(events):
        where = f"{source}: events[{i}]"
        if not isinstance(ev, Mapping) or "at" not in ev:
            raise TimelineError(f"{where}: want at: TIME and one action")
        ops = [k for k in ev if k != "at"]
        unknown = [k for k in ops if k not in ACTIONS]
        if unknown:
            raise TimelineError(f"{where}.{unknown[0]}: unknown action (known: {', '.join(ACTIONS)})")
        if len(ops) != 1:
            raise TimelineError(f"{where}: want exactly one action, found {len(ops)}")
        op = ops[0]
        _check(op, ev[op], where)
        out.append(TimelineAction(_time(ev["at"], where), op, ev[op], where))
    return sorted(out, key=lambda a: a.at)


def load_timeline(path: str) -> list[TimelineAction]:
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
    except OSError as e:
        raise TimelineError(f"{path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise TimelineError(f"{path}: invalid YAML: {e}") from None
    if len(docs) != 1:
        raise TimelineError(f"{path}: want one Timeline document, found {len(docs)}")
    return parse_timeline(docs[0], path)


# ---------------------------------------------------------------- running


class TimelineRunner:
    """Applies a timeline's actions to a simulation as its clock reaches them."""

    def __init__(self, sim: Any, actions: list[TimelineAction], history: History | None = None) -> None:
        self.sim = sim
        self.start = sim.clock.now()
        self.actions = list(actions)
        self.done = 0
        self.history = history
        self.errors: list[str] = []

    def next_time(self) -> float | None:
        return self.start + self.actions[self.done].at if self.done < len(self.actions) else None

    def apply_due(self) -> int:
        now = self.sim.clock.now()
        n = 0
        while self.done < len(self.actions) and self.start + self.actions[self.done].at <= now + 1e-9:
            a = self.actions[self.done]
            self.done += 1
            try:
                detail = getattr(self, f"_{a.op}")(a.arg)
            except ApiError as e:
                detail = f"failed: {e}"
                self.errors.append(f"{a.where}: {a.op}: {e}")
            if self.history is not None:
                self.history.add("timeline", a.op, detail or _short(a.arg))
            n += 1
        return n

    # ---------------------------------------------------------------- actions

    @property
    def client(self) -> Any:
        return self.sim.client

    def _apply(self, objs: list[dict[str, Any]]) -> str:
        names = []
        for o in objs:
            md = o.get("metadata") or {}
            kind = o["kind"]
            try:
                self.client.create(json.loads(json.dumps(o)))
            except AlreadyExists:
                ns = md.get("namespace") or ("default" if kind not in ("Node", "Namespace") else "")
                self.client.patch(kind, ns, md.get("name", ""), o, "application/merge-patch+json")
            names.append(f"{kind}/{md.get('name', md.get('generateName', ''))}")
        return ", ".join(names)

    def _delete(self, refs: list[dict[str, Any]]) -> str:
        out = []
        for r in refs:
            kind, ns, name = _ref(r, "delete")
            self.client.delete(kind, ns if kind not in ("Node", "Namespace") else "", name)
            out.append(f"{kind}/{name}")
        return ", ".join(out)

    def _patch(self, arg: dict[str, Any]) -> str:
        kind, ns, name = _ref(arg, "patch")
        self.client.patch(kind, ns if kind not in ("Node", "Namespace") else "", name, arg["patch"],
                          "application/merge-patch+json")
        return f"{kind}/{name}"

    def _scale(self, arg: dict[str, Any]) -> str:
        kind, ns, name = _ref(arg, "scale")
        path = "parallelism" if kind == "Job" else "replicas"
        self.client.patch(kind, ns, name, {"spec": {path: arg["replicas"]}}, "application/merge-patch+json")
        return f"{kind}/{name} to {arg['replicas']}"

    def _zone_nodes(self, zone: str) -> list[str]:
        return sorted(n.name for n in self.sim.store.items("Node") if isinstance(n, Node)
                      and n.labels.get(LABEL_ZONE) == zone)

    def _kubelet(self) -> Any:
        if self.sim.kubelet is None:
            raise BadRequest("no kubelets are simulated (--no-kubelet)")
        return self.sim.kubelet

    def _failNode(self, name: str) -> str:
        self._kubelet().fail_node(name)
        return name

    def _restoreNode(self, name: str) -> str:
        self._kubelet().restore_node(name)
        return name

    def _failZone(self, zone: str) -> str:
        nodes = self._zone_nodes(zone)
        for n in nodes:
            self._kubelet().fail_node(n)
        return f"{zone}: {', '.join(nodes)}"

    def _restoreZone(self, zone: str) -> str:
        nodes = self._zone_nodes(zone)
        for n in nodes:
            self._kubelet().restore_node(n)
        return f"{zone}: {', '.join(nodes)}"

    def _setUsage(self, arg: dict[str, Any]) -> str:
        ann = {f"{USAGE_ANNOTATION}{k}": str(v) for k, v in arg.items() if k not in ("pod", "node")}
        if "pod" in arg:
            ns, _, name = str(arg["pod"]).rpartition("/")
            self.client.patch("Pod", ns or "default", name, {"metadata": {"annotations": ann}},
                              "application/merge-patch+json")
            return f"pod {arg['pod']}: " + ", ".join(f"{k}={v}" for k, v in arg.items() if k != "pod")
        self.client.patch("Node", "", str(arg["node"]), {"metadata": {"annotations": ann}},
                          "application/merge-patch+json")
        return f"node {arg['node']}: " + ", ".join(f"{k}={v}" for k, v in arg.items() if k != "node")

    def _cordon(self, name: str) -> str:
        self.client.patch("Node", "", name, {"spec": {"unschedulable": True}}, "application/merge-patch+json")
        return name

    def _uncordon(self, name: str) -> str:
        self.client.patch("Node", "", name, {"spec": {"unschedulable": None}}, "application/merge-patch+json")
        return name

    def _drain(self, name: str) -> str:
        self._cordon(name)
        evicted, refused = [], []
        for p in sorted((p for p in self.sim.store.items("Pod") if isinstance(p, Pod) and p.node_name == name
                         and not p.is_terminal and p.deletion_timestamp is None), key=lambda p: p.key):
            if any(r.get("kind") == "DaemonSet" for r in p.raw["metadata"].get("ownerReferences") or ()) or \
                    "kubernetes.io/config.mirror" in p.annotations:
                continue
            try:
                self.client.evict(p.namespace, p.name)
                evicted.append(p.name)
            except ApiError as e:
                refused.append(f"{p.name} ({e.message})")
        out = f"{name}: evicted {len(evicted)}"
        return out + (f"; refused: {', '.join(refused)}" if refused else "")

    def _devices(self, arg: dict[str, Any], unhealthy: bool) -> str:
        node = self.sim.store.get("Node", "", str(arg["node"]))
        have = [d for d in (node.annotations.get(UNHEALTHY_DEVICES_ANNOTATION, "") or "").split(",") if d]
        dev = str(arg["device"])  # the device manager's annotation lists device IDs
        if unhealthy and dev not in have:
            have.append(dev)
        elif not unhealthy and dev in have:
            have.remove(dev)
        self.client.patch("Node", "", node.name,
                          {"metadata": {"annotations": {UNHEALTHY_DEVICES_ANNOTATION: ",".join(have) or None}}},
                          "application/merge-patch+json")
        return f"{node.name}: {arg['resource']} {dev}"

    def _markDeviceUnhealthy(self, arg: dict[str, Any]) -> str:
        return self._devices(arg, True)

    def _markDeviceHealthy(self, arg: dict[str, Any]) -> str:
        return self._devices(arg, False)


def _short(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)[:120]


# ---------------------------------------------------------------- history


@dataclass
class History:
    """What happened, when: rows of (seconds since the start, source, what, detail), and samples
    of each node's memory and CPU usage against its allocatable."""

    clock: Any
    start: float
    rows: list[tuple[float, str, str, str]] = field(default_factory=list)
    samples: list[tuple[float, str, int, int, int, int]] = field(default_factory=list)  # t, node, mem, alloc, cpu, alloc
    sample_every: float = 60.0
    _last_sample: float = -1e18

    def add(self, source: str, what: str, detail: str) -> None:
        self.rows.append((round(self.clock.now() - self.start, 3), source, what, detail))

    def watch(self, client: Any, since_start: Callable[[Pod], float | None]) -> InformerFactory:
        """Informers on the cluster whose handlers record pod and node changes."""
        self._since_start = since_start
        f = InformerFactory(client)
        f.informer("Pod").add_handler(EventHandler(lambda p: self._pod(None, p), self._pod, self._pod_gone))
        f.informer("Node").add_handler(EventHandler(lambda n: None, self._node, lambda n: None))
        self._informers = f
        return f

    def _pod(self, old: Pod | None, new: Pod) -> None:
        ref = f"{new.namespace}/{new.name}"
        if new.node_name and (old is None or not old.node_name):
            self.add("scheduler", "placed", f"{ref} on {new.node_name}")
        st = new.raw.get("status") or {}
        if new.phase == "Failed" and (old is None or old.phase != "Failed"):
            reason = st.get("reason") or ""
            who = "kubelet" if reason or new.deletion_timestamp is not None else "containers"
            what = "evicted" if reason == "Evicted" else ("rejected" if reason else
                                                          "stopped" if new.deletion_timestamp is not None
                                                          else "failed")
            self.add(who, what, f"{ref} on {new.node_name}: {reason} {st.get('message') or ''}".strip())
        dt = new.condition("DisruptionTarget")
        if dt is not None and (old is None or old.condition("DisruptionTarget") is None):
            if dt.get("reason") == "DeletionByTaintManager":
                self.add("taint-eviction-controller", "evicted", f"{ref} on {new.node_name}: {dt.get('message')}")
            elif dt.get("reason") == "TerminationByKubelet" and new.phase != "Failed":
                self.add("kubelet", "evicting", f"{ref} on {new.node_name}")
        restarts = _restarts(new)
        if old is not None and restarts > _restarts(old):
            last = ((st.get("containerStatuses") or [{}])[0].get("lastState") or {}).get("terminated") or {}
            self.add("kubelet", "restarted", f"{ref} (restart {restarts}, {last.get('reason', 'exited')})")
        if new.phase == "Succeeded" and (old is None or old.phase != "Succeeded"):
            self.add("kubelet", "completed", ref)

    def _pod_gone(self, obj: Any) -> None:
        p = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.add("api", "deleted", f"{p.namespace}/{p.name}")

    def _node(self, old: Node, new: Node) -> None:
        before = {c.get("type"): c.get("status") for c in old.conditions}
        for c in new.conditions:
            if before.get(c.get("type")) != c.get("status") and (c.get("type") == "Ready" or c.get("status") != "False"
                                                                  or before.get(c.get("type")) is not None):
                self.add("node", "condition", f"{new.name} {c.get('type')}={c.get('status')} ({c.get('reason', '')})")
        ot = {(t.key, t.effect) for t in old.taints}
        nt = {(t.key, t.effect) for t in new.taints}
        for k, e in sorted(nt - ot):
            self.add("node", "tainted", f"{new.name} {k}:{e}")
        for k, e in sorted(ot - nt):
            self.add("node", "untainted", f"{new.name} {k}:{e}")

    def poll(self, sim: Any) -> None:
        """Record what the watches delivered; sample usage every ``sample_every`` seconds, and
        after something happened once a sixth of that has passed."""
        n = len(self.rows)
        self._informers.poll()
        now = self.clock.now()
        if now - self._last_sample >= self.sample_every or (
                len(self.rows) > n and now - self._last_sample >= self.sample_every / 6):
            self.sample(sim)

    def sample(self, sim: Any) -> None:
        """Each node's usage (pods' models plus the system's) against its allocatable."""
        now = self.clock.now()
        self._last_sample = now
        used: dict[str, list[int]] = {}
        for p in sim.store.items("Pod"):
            if not isinstance(p, Pod) or not p.node_name or p.is_terminal:
                continue
            since = self._since_start(p)
            if since is None:
                continue
            u = used.setdefault(p.node_name, [0, 0])
            for i, r in enumerate(("memory", "cpu")):
                try:
                    u[i] += pod_usage(p, r, since) or 0
                except UsageError:
                    pass
        for n in sorted((n for n in sim.store.items("Node") if isinstance(n, Node)), key=lambda n: n.name):
            u = used.get(n.name, [0, 0])
            try:
                mem = u[0] + node_system_usage(n, "memory", now)
                cpu = u[1] + node_system_usage(n, "cpu", now)
            except UsageError:
                mem, cpu = u
            self.samples.append((round(now - self.start, 3), n.name, mem, n.allocatable.get("memory", 0), cpu,
                                 n.allocatable.get("cpu", 0)))

    def to_dict(self) -> dict[str, Any]:
        return {"events": [{"t": t, "source": s, "what": w, "detail": d} for t, s, w, d in self.rows],
                "usage": [{"t": t, "node": n, "memory": m, "allocatableMemory": am, "cpu": c, "allocatableCpu": ac}
                          for t, n, m, am, c, ac in self.samples]}


def _restarts(p: Pod) -> int:
    return max((int(c.get("restartCount") or 0) for c in (p.raw.get("status") or {}).get("containerStatuses") or ()),
               default=0)


def plot_usage(history: dict[str, Any], png: str) -> None:
    """Memory usage / allocatable per node over time (PNG), with the evictions marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_node: dict[str, tuple[list[float], list[float]]] = {}
    for s in history["usage"]:
        xs, ys = by_node.setdefault(s["node"], ([], []))
        xs.append(s["t"] / 60)
        ys.append(100 * s["memory"] / s["allocatableMemory"] if s["allocatableMemory"] else 0.0)
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, (xs, ys) in sorted(by_node.items())[:20]:
        ax.step(xs, ys, where="post", label=name)
    for e in history["events"]:
        if e["what"] == "evicted":
            ax.axvline(e["t"] / 60, color="red", alpha=0.3, linewidth=1)
        elif e["source"] == "timeline":
            ax.axvline(e["t"] / 60, color="grey", alpha=0.4, linestyle=":", linewidth=1)
    ax.set_xlabel("minutes")
    ax.set_ylabel("memory used / allocatable (%)")
    ax.set_title("node memory over time (red: evictions, dotted: timeline events)")
    if by_node:
        ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
