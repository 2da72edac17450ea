"""The DaemonSet controller (upstream's ``pkg/controller/daemon/daemon_controller.go``): one pod
per eligible node. A node is eligible when the template's nodeName (if any) is the node, its
required node affinity and nodeSelector match and the node's NoSchedule and NoExecute taints are
tolerated -- with the tolerations every daemon pod gets; a pod whose node gains an untolerated
NoSchedule taint keeps running, NoExecute removes it. Pods are made from the template with
those tolerations, the revision-hash and template-generation labels, and a required node
affinity ``matchFields metadata.name In [<node>]``; the scheduler binds them. Failed pods are
deleted (``FailedDaemonPod``) with a per-node backoff of 1 s doubling to 15 min; surplus pods on
a node are deleted, keeping the oldest; pods for nodes that are gone and never scheduled are
deleted. Node additions, deletions and changes of labels, taints or spec re-sync the
DaemonSets they concern. The rolling update and history are in :mod:`.update`.

Divergences: no periodic resync; at most 250 creations and deletions per sync run one after
another in slow-start batches; nodes are visited in name order.
"""

from __future__ import annotations

import copy
from typing import Any

from ksched.api.apps import ROLLING_UPDATE, DaemonSet
from ksched.api.errors import ApiError, NotFound
from ksched.api.labels import NodeSelector
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.taints import NO_EXECUTE, NO_SCHEDULE, Toleration, find_untolerated_taint
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.client.record import EventRecorder
from ksched.clock import Clock
from ksched.controllers.controller import Controller
from ksched.controllers.controller_utils import (
    SLOW_START_INITIAL_BATCH_SIZE,
    ControllerRefManager,
    Expectations,
    PodControl,
    add_owner_index,
    available_at,
    controller_ref,
    is_pod_available,
    is_pod_ready,
    owned_pods,
    slow_start_batch,
)
from ksched.controllers.daemon.update import UpdateMixin
from ksched.controllers.daemon.util import (
    add_daemon_tolerations,
    allows_surge,
    create_pod_template,
    is_pod_updated,
    replace_node_name_affinity,
    target_node_name,
)
from ksched.controllers.podupdates import unowned_pod_update

__all__ = ["BURST_REPLICAS", "DaemonSetsController", "node_should_run_daemon_pod"]

BURST_REPLICAS = 250
FAILED_POD_BACKOFF = 1.0
FAILED_POD_MAX_BACKOFF = 15 * 60.0


def _target(obj: Any) -> Any:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def node_should_run_daemon_pod(node: Node, ds: DaemonSet) -> tuple[bool, bool]:
    """(should run, should continue running) a daemon pod on ``node`` (``NodeShouldRunDaemonPod``)."""
    spec = copy.deepcopy(ds.template.get("spec") or {})
    template_node = spec.get("nodeName") or ""
    if template_node and template_node != node.name:
        return False, False
    add_daemon_tolerations(spec)
    for k, v in (spec.get("nodeSelector") or {}).items():
        if node.labels.get(k) != v:
            return False, False
    req = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(req, dict) and not NodeSelector.from_dict(req).matches(node.name, node.labels):
        return False, False
    tolerations = [Toleration.from_dict(t) for t in spec.get("tolerations") or () if isinstance(t, dict)]
    if find_untolerated_taint(node.taints, tolerations, (NO_SCHEDULE, NO_EXECUTE)) is not None:
        # Scheduled daemon pods keep running if they tolerate the NoExecute taints.
        return False, find_untolerated_taint(node.taints, tolerations, (NO_EXECUTE,)) is None
    return True, True


class _Backoff:
    """Per-key backoff since the last update (client-go's flowcontrol.Backoff)."""

    def __init__(self, initial: float, maximum: float) -> None:
        self.initial = initial
        self.maximum = maximum
        self._entries: dict[str, tuple[float, float]] = {}  # key -> (backoff, last update)

    def _expired(self, now: float, last: float) -> bool:
        return now - last > 2 * self.maximum

    def in_backoff_since_update(self, key: str, now: float) -> bool:
        e = self._entries.get(key)
        if e is None or self._expired(now, e[1]):
            return False
        return now - e[1] < e[0]

    def get(self, key: str) -> float:
        e = self._entries.get(key)
        return e[0] if e is not None else 0.0

    def next(self, key: str, now: float) -> None:
        e = self._entries.get(key)
        if e is None or self._expired(now, e[1]):
            self._entries[key] = (self.initial, now)
        else:
            self._entries[key] = (min(2 * e[0], self.maximum), now)


def _pod_order(p: Pod) -> tuple[int, float, str]:
    """Scheduled first, then oldest, then by name (``podByCreationTimestampAndPhase``)."""
    return (0 if p.node_name else 1, p.creation_timestamp or 0.0, p.name)


class DaemonSetsController(UpdateMixin, Controller):
    """Keys are ``namespace/name`` of DaemonSets."""

    name = "daemonset"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.ds_informer = informers.informer("DaemonSet")
        self.history_informer = informers.informer("ControllerRevision")
        self.pod_informer = informers.informer("Pod")
        self.node_informer = informers.informer("Node")
        add_owner_index(self.pod_informer)
        self.recorder = EventRecorder(client, clock, component="daemonset-controller")
        self.pod_control = PodControl(client, self.recorder)
        self.expectations = Expectations(clock)
        self.failed_backoff = _Backoff(FAILED_POD_BACKOFF, FAILED_POD_MAX_BACKOFF)
        self.ds_informer.add_handler(EventHandler(self._enqueue, lambda old, new: self._enqueue(new),
                                                  self._ds_deleted))
        self.history_informer.add_handler(EventHandler(self._history_changed,
                                                       lambda old, new: self._history_changed(new),
                                                       self._history_changed))
        self.pod_informer.add_handler(EventHandler(self._pod_added, self._pod_updated, self._pod_deleted,
                                                    skip_update=unowned_pod_update))
        self.node_informer.add_handler(EventHandler(self._node_added, self._node_updated, self._node_deleted))

    # ---- events ---------------------------------------------------------------------------

    def _enqueue(self, ds: Any) -> None:
        self.queue.add(_target(ds).key)

    def _ds_deleted(self, obj: Any) -> None:
        ds = _target(obj)
        self.expectations.delete(ds.key)
        self.queue.add(ds.key)

    def _daemon_sets(self, namespace: str | None = None) -> list[DaemonSet]:
        objs = self.ds_informer.indexer.by_index("namespace", namespace) if namespace is not None \
            else self.ds_informer.list()
        if not objs:
            return []  # (every pod of a namespace without DaemonSets)
        return sorted((d for d in objs if isinstance(d, DaemonSet)), key=lambda d: d.key)

    def _resolve(self, namespace: str, ref: Any) -> DaemonSet | None:
        if ref is None or ref.kind != "DaemonSet":
            return None
        ds = self.ds_informer.get(f"{namespace}/{ref.name}")
        if not isinstance(ds, DaemonSet) or ds.uid != ref.uid:
            return None
        return ds

    def _matching(self, obj: Any) -> list[DaemonSet]:
        return [d for d in self._daemon_sets(obj.namespace) if not d.selector.is_empty()
                and d.selector.matches(obj.labels)]

    def _history_changed(self, obj: Any) -> None:
        h = _target(obj)
        ref = h.controller_ref()
        if ref is not None:
            ds = self._resolve(h.namespace, ref)
            if ds is not None:
                self.queue.add(ds.key)
            return
        for ds in self._matching(h):
            self.queue.add(ds.key)

    def _pod_added(self, pod: Pod) -> None:
        if pod.deletion_timestamp is not None:
            self._pod_deleted(pod)
            return
        ref = pod.controller_ref()
        if ref is not None:
            ds = self._resolve(pod.namespace, ref)
            if ds is not None:
                self.expectations.creation_observed(ds.key)
                self.queue.add(ds.key)
            return
        for ds in self._matching(pod):
            self.queue.add(ds.key)

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        if old.resource_version == new.resource_version:
            return
        if new.deletion_timestamp is not None:
            self._pod_deleted(new)
            return
        cur_ref, old_ref = new.controller_ref(), old.controller_ref()
        changed = (cur_ref and (cur_ref.kind, cur_ref.uid)) != (old_ref and (old_ref.kind, old_ref.uid))
        if changed and old_ref is not None:
            ds = self._resolve(old.namespace, old_ref)
            if ds is not None:
                self.queue.add(ds.key)
        if cur_ref is not None:
            ds = self._resolve(new.namespace, cur_ref)
            if ds is None:
                return
            self.queue.add(ds.key)
            if not is_pod_ready(old) and is_pod_ready(new) and ds.min_ready_seconds > 0:
                self.queue.add_after(ds.key, ds.min_ready_seconds + 1.0)
            return
        if old.labels != new.labels or changed:
            for ds in self._matching(new):
                self.queue.add(ds.key)

    def _pod_deleted(self, obj: Any) -> None:
        pod = _target(obj)
        ds = self._resolve(pod.namespace, pod.controller_ref())
        if ds is None:
            return
        self.expectations.deletion_observed(ds.key)
        self.queue.add(ds.key)

    def _node_added(self, node: Node) -> None:
        for ds in self._daemon_sets():
            if node_should_run_daemon_pod(node, ds)[0]:
                self.queue.add(ds.key)

    def _node_updated(self, old: Node, new: Node) -> None:
        if old.labels == new.labels and old.raw.get("spec") == new.raw.get("spec"):
            return  # status only (heartbeats): nothing a daemon pod's placement depends on
        for ds in self._daemon_sets():
            if node_should_run_daemon_pod(old, ds) != node_should_run_daemon_pod(new, ds):
                self.queue.add(ds.key)

    def _node_deleted(self, obj: Any) -> None:
        # Its never-scheduled daemon pods are left to the syncs to delete.
        for ds in self._daemon_sets():
            self.queue.add(ds.key)

    # ---- reads ----------------------------------------------------------------------------

    def _node(self, name: str) -> Node | None:
        n = self.node_informer.get(name)
        return n if isinstance(n, Node) else None

    def _nodes(self) -> list[Node]:
        return sorted((n for n in self.node_informer.list() if isinstance(n, Node)), key=lambda n: n.name)

    def _node_should_run(self, node: Node, ds: DaemonSet) -> tuple[bool, bool]:
        return node_should_run_daemon_pod(node, ds)

    def _daemon_pods(self, ds: DaemonSet) -> list[Pod]:
        """The pods this DaemonSet controls after claiming (``getDaemonPods``)."""
        manager = ControllerRefManager(self.client, ds, ds.selector,
                                       lambda: self.client.get("DaemonSet", ds.namespace, ds.name))
        claimed, errors = manager.claim(owned_pods(self.pod_informer, ds))
        if errors:
            raise errors[0]
        return [p for p in claimed if isinstance(p, Pod)]

    def _nodes_to_daemon_pods(self, ds: DaemonSet) -> dict[str, list[Pod]]:
        """Claimed pods by target node; finished pods being deleted left out."""
        out: dict[str, list[Pod]] = {}
        for p in self._daemon_pods(ds):
            if p.is_terminal and p.deletion_timestamp is not None:
                continue
            node = target_node_name(p)
            if node is None:
                continue
            out.setdefault(node, []).append(p)
        return out

    # ---- sync -----------------------------------------------------------------------------

    def sync(self, key: Any) -> None:
        ds = self.ds_informer.get(key)
        if not isinstance(ds, DaemonSet):
            self.expectations.delete(key)
            return
        nodes = self._nodes()
        if ds.selector.is_empty():
            self.recorder.event(ds, "Warning", "SelectingAll", "Select",
                                "This daemon set is selecting all pods. A non-empty selector is required.")
            return
        if ds.deletion_timestamp is not None:
            return
        current, old = self._construct_history(ds)
        hash_ = current.labels.get("controller-revision-hash", "")
        if not self.expectations.satisfied(key):
            self._update_status(ds, nodes, hash_, False)
            return
        err: ApiError | None = None
        try:
            self._manage(ds, nodes, hash_)
            if self.expectations.satisfied(key) and ds.update_strategy_type == ROLLING_UPDATE:
                self._rolling_update(ds, nodes, hash_)
            self._cleanup_history(ds, old)
        except ApiError as e:
            err = e
        self._update_status(ds, nodes, hash_, True)
        if err is not None:
            raise err

    def _manage(self, ds: DaemonSet, nodes: list[Node], hash_: str) -> None:
        node_pods = self._nodes_to_daemon_pods(ds)
        needing: list[str] = []
        to_delete: list[str] = []
        for node in nodes:
            n, d = self._pods_should_be_on_node(node, node_pods, ds, hash_)
            needing += n
            to_delete += d
        # Never-scheduled pods for nodes that are gone: nothing else would delete them.
        names = {n.name for n in nodes}
        for node_name, pods in sorted(node_pods.items()):
            if node_name not in names:
                to_delete += [p.name for p in pods if not p.node_name]
        self._sync_nodes(ds, to_delete, needing, hash_)

    def _pods_should_be_on_node(self, node: Node, node_pods: dict[str, list[Pod]], ds: DaemonSet,
                                hash_: str) -> tuple[list[str], list[str]]:
        should_run, should_continue = node_should_run_daemon_pod(node, ds)
        pods = node_pods.get(node.name)
        needing: list[str] = []
        to_delete: list[str] = []
        if should_run and pods is None:
            return [node.name], []
        if should_continue:
            running: list[Pod] = []
            for p in pods or ():
                if p.deletion_timestamp is not None:
                    continue
                if p.phase == "Failed":
                    backoff_key = f"{ds.uid}/{ds.generation}/{node.name}"
                    now = self.clock.now()
                    if self.failed_backoff.in_backoff_since_update(backoff_key, now):
                        self.queue.add_after(ds.key, self.failed_backoff.get(backoff_key))
                        continue
                    self.failed_backoff.next(backoff_key, now)
                    self.recorder.event(ds, "Warning", "FailedDaemonPod", "Delete",
                                        f"Found failed daemon pod {p.namespace}/{p.name} on node {node.name}, "
                                        "will try to kill it")
                    to_delete.append(p.name)
                elif p.phase == "Succeeded":
                    to_delete.append(p.name)
                else:
                    running.append(p)
            running.sort(key=_pod_order)
            if not allows_surge(ds):
                to_delete += [p.name for p in running[1:]]
                return needing, to_delete
            if len(running) <= 1:
                if not running and should_run:
                    needing.append(node.name)
                return needing, to_delete
            # With surge, two pods are allowed while the oldest new one is not yet available.
            oldest_new = oldest_old = None
            for p in running:
                if is_pod_updated(p, hash_, ds.template_generation):
                    if oldest_new is None:
                        oldest_new = p
                        continue
                elif oldest_old is None:
                    oldest_old = p
                    continue
                to_delete.append(p.name)
            if oldest_new is not None and oldest_old is not None and (
                    not is_pod_ready(oldest_old)
                    or is_pod_available(oldest_new, ds.min_ready_seconds, self.clock.now())):
                to_delete.append(oldest_old.name)
            return needing, to_delete
        if pods:
            to_delete += [p.name for p in pods if p.deletion_timestamp is None]
        return needing, to_delete

    def _sync_nodes(self, ds: DaemonSet, to_delete: list[str], needing: list[str], hash_: str) -> None:
        """Create pods for ``needing`` nodes and delete ``to_delete`` pods (``syncNodes``)."""
        key = ds.key
        creates = min(len(needing), BURST_REPLICAS)
        deletes = min(len(to_delete), BURST_REPLICAS)
        self.expectations.expect(key, adds=creates)
        self.expectations.expect_deletions(key, deletes)
        template = create_pod_template(ds.template, ds.template_generation, hash_)
        ref = controller_ref(ds)

        def create(i: int) -> None:
            node_name = needing[i]
            self.pod_control.create_pod(template, ds, ref,
                                        lambda raw: replace_node_name_affinity(raw["spec"], node_name))

        successes, first = slow_start_batch(creates, SLOW_START_INITIAL_BATCH_SIZE, create)
        if creates - successes > 0:
            # Failed creations will not be observed, skipped ones were never made.
            self.expectations.lower(key, adds=creates - successes)
        for name in to_delete[:deletes]:
            try:
                self.pod_control.delete_pod(ds.namespace, name, ds)
            except ApiError as e:
                self.expectations.deletion_observed(key)
                if not isinstance(e, NotFound) and first is None:
                    first = e
        if first is not None:
            raise first

    def _update_status(self, ds: DaemonSet, nodes: list[Node], hash_: str, observed: bool) -> None:
        node_pods = self._nodes_to_daemon_pods(ds)
        desired = current = misscheduled = ready = updated = available = 0
        now = self.clock.now()
        next_available: float | None = None
        for node in nodes:
            should_run, _ = node_should_run_daemon_pod(node, ds)
            pods = node_pods.get(node.name) or []
            if should_run:
                desired += 1
                if not pods:
                    continue
                current += 1
                pod = sorted(pods, key=_pod_order)[0]
                if is_pod_ready(pod):
                    ready += 1
                    if is_pod_available(pod, ds.min_ready_seconds, now):
                        available += 1
                    elif (t := available_at(pod, ds.min_ready_seconds)) is not None:
                        next_available = t if next_available is None else min(next_available, t)
                if is_pod_updated(pod, hash_, ds.template_generation):
                    updated += 1
            elif pods:
                misscheduled += 1
        status = dict(ds.status)
        for k, v in (("currentNumberScheduled", current), ("numberMisscheduled", misscheduled),
                     ("desiredNumberScheduled", desired), ("numberReady", ready)):
            status[k] = v
        for k, v in (("updatedNumberScheduled", updated), ("numberAvailable", available),
                     ("numberUnavailable", desired - available)):
            if v:
                status[k] = v
            else:
                status.pop(k, None)
        if observed and ds.generation:
            status["observedGeneration"] = ds.generation
        if status != ds.status:
            raw = dict(ds.raw)
            raw["status"] = status
            try:
                self.client.update_status(raw)
            except NotFound:
                pass
        if ds.min_ready_seconds > 0 and next_available is not None:
            self.queue.add_after(ds.key, max(0.0, next_available - now) + 0.001)

