"""A simulated node agent, on the cluster's clock: bound pods start (Running, Ready, container
statuses) after a start-up delay; their containers run for ``ksched.io/run-seconds`` (for ever
without it) and exit with ``ksched.io/exit-code``, after which the pod succeeds or fails, or the
containers restart with the kubelet's CrashLoopBackOff, per the pod's restartPolicy; a deleted
pod's containers stop promptly (``ksched.io/termination-seconds``, default 1 s, at most the
grace period) and the kubelet then deletes the pod for good, as its status manager does
(``ksched.kubelet.runtime`` has the rules and the status it writes).

It is what the simulator needs of a kubelet for scheduling and the controllers to behave as on
a real cluster: preemption victims and deleted pods go away, PodDisruptionBudgets see healthy
pods, Jobs see their pods finish, and pods get a ``startTime`` (preemption prefers to keep
older pods).

Before a bound pod starts, its node's admit handlers (``ksched.kubelet.admission``: the eviction
manager, the CPU, topology and device managers of nodes that declare a NUMA layout or kubelet
settings (``ksched.kubelet.cm``), the node's fit check) are asked whether it may run there beside
the pods the node already admitted; what an admitted pod was given is written on it
(``ksched.io/cpuset``, ``ksched.io/devices``), and the devices' capacity and allocatable on the
node's status; a refused pod ends
``Failed`` with the handler's reason and "Pod was rejected: <message>" and a Warning event, as
the kubelet's ``rejectPod``. A pod bound to a node that does not exist stays Pending (no kubelet
runs there) until the node appears.

Each node also has the kubelet's node-side duties: heartbeats (a Lease and the Ready condition,
``ksched.kubelet.nodestatus``), resource usage from ``ksched.io/usage-*`` annotations
(``ksched.kubelet.usage``) with OOM kills -- a container whose memory goes above its limit exits
137 ``OOMKilled`` and restarts per the restartPolicy with the same CrashLoopBackOff -- and
node-pressure eviction (``ksched.kubelet.eviction``, run by ``ksched.kubelet.pressure``). A
failed node (``fail_node``) does nothing until ``restore_node``: its pods' timers wait.

Divergences: one agent acts for every node; a pod's containers start, exit, are OOM-killed and
restart together; see ``ksched.kubelet.runtime`` for the containers.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ksched.api.errors import ApiError, NotFound
from ksched.api.meta import format_time
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.resources import qos_class
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.client.record import EventRecorder
from ksched.kubelet import predicate
from ksched.kubelet import runtime as rt
from ksched.kubelet.admission import ContainerManagerHandler, build_admit_handlers
from ksched.kubelet.admitted import AdmittedPods
from ksched.kubelet.cm.node_managers import NodeManagers
from ksched.kubelet.eviction import EvictionManager
from ksched.kubelet.evictionapi import EvictionConfig
from ksched.kubelet.gpushare import ANNOTATION_GPU_COUNT, ANNOTATION_GPU_MILLI, GpuShareAdmitHandler
from ksched.kubelet.lifecycle import (
    AdmitHandlerFactory,
    NodeHandle,
    PodAdmitAttributes,
    PodAdmitHandlers,
    PodAdmitResult,
)
from ksched.kubelet.nodestatus import NodeHeartbeats
from ksched.kubelet.predicate import PredicateAdmitHandler
from ksched.kubelet.pressure import NodePressure
from ksched.kubelet.timers import new_timers
from ksched.kubelet.usage import USAGE_ANNOTATION, UsageError, first_oom, has_usage

__all__ = ["FakeKubelet"]

log = logging.getLogger(__name__)

# ``_schedule_exit`` asks ``first_oom`` only for a pod with usage annotations (``has_usage``,
# kept on the pod); False: for every pod (the reference; the same None for the others).
OOM_ONLY_WITH_USAGE = True

# ``_admit`` answers for a node whose chain is the default one (``ksched.kubelet.admission``: the
# eviction manager, the container managers' handler of this kubelet, the GPU-share plugin, the
# predicate handler, in that order) without going through the chain when the first three admit
# by construction -- the eviction manager has no pressure condition, the node has no resource
# managers, the pod names no GPU share -- asking the predicate handler alone: the chain's answer
# (the first three answer ADMITTED and change nothing), without a call, a ``getattr`` and a
# closure per handler and pod. Anything else takes the chain. False: the chain for every pod
# (the reference; tests/kubelet/test_fused_admission.py holds both to the same answers).
FUSED_ADMISSION = True

# ``_patch_status`` writes through the in-process client's ``pod_status_writer``
# (``Store.patch_pod_status``: the same write without the generic patch entry's checks, the
# ``{"status": ...}`` wrapper and the client's call) when the client's class has one and keeps its
# ``patch`` (``_status_writer``: looked up on the class, so a wrapper forwarding attributes does
# not qualify); False: ``client.patch`` (the
# reference; tests/kubelet/test_direct_status_write.py runs both).
DIRECT_STATUS_WRITE = True

# ``_admit`` reads the node's other pods' count and request sum in one ``AdmittedPods.others``
# call (nothing changes the kept pods between the reference's reads of the two); False:
# ``_others_requested`` and ``AdmittedPods.count`` where each is read (the reference;
# tests/kubelet/test_admitted.py, tests/sim/test_kubelet_start_flags_agree.py).
ONE_OTHERS_LOOKUP = True

START, EXIT, RESTART, STOP, OOM, EVICTED = "start", "exit", "restart", "stop", "oom", "evicted"
OOM_EXIT_CODE = 137
_NODE_INDEX = "kubelet-node"


@dataclass(slots=True)
class _Run:
    """What the agent remembers of a pod's containers (one per pod it ran: slots, about 100
    bytes instead of 350 with an instance dict)."""

    started: float | None = None  # when the current containers started
    restarts: int = 0
    last_state: dict[str, Any] | None = None
    finished: float | None = None  # when the last containers exited
    epoch: int = 0  # bumped on every transition: older timers are stale
    stopping: bool = False
    admitted: bool = False  # the node's admit handlers let it run
    evicting: tuple[str, bool] | None = None  # the eviction's message, and whether the containers are killed


def _status_writer(client: Any) -> Callable[[str, str, dict[str, Any]], Any] | None:
    """The client's ``pod_status_writer()`` (``DIRECT_STATUS_WRITE``) when its class has one and
    does not override the ``patch`` of the class that defines it (a client that watches or
    changes its patches gets them all); else None."""
    cls = type(client)
    for klass in cls.__mro__:
        if "pod_status_writer" in vars(klass):
            if getattr(cls, "patch", None) is not getattr(klass, "patch", None):
                return None
            return client.pod_status_writer()  # type: ignore[no-any-return]
    return None


class FakeKubelet:
    """One agent for every node (it acts for all of them)."""

    def __init__(self, client: Any, informers: InformerFactory, clock: Any, startup_delay: float = 0.0,
                 admit_handler_factories: list[AdmitHandlerFactory] | None = None,
                 record_events: bool = True, eviction_configs: list[EvictionConfig] | None = None,
                 lazy_leases: bool = False, admitted_index: bool = True) -> None:
        self.client = client
        self.clock = clock
        self.startup_delay = startup_delay
        self.admit_handler_factories = admit_handler_factories
        self._admit_handlers: dict[str, PodAdmitHandlers] = {}
        # node name -> the ``get_node`` of the handle its handlers were built with (``self.node``
        # of the name): a handler holding it gets the node ``_start`` has just looked up.
        self._node_getters: dict[str, Callable[[], Node | None]] = {}
        self.recorder = EventRecorder(client, clock, component="kubelet", enabled=record_events)
        # The in-process client takes the status patches over (no copy): they are built anew for
        # each write, from parts nothing mutates.
        self._owned = {"owned": True} if hasattr(client, "store") else {}
        self._write_status = _status_writer(client)
        self.heartbeats = NodeHeartbeats(client, clock, lazy=lazy_leases)
        self.pressure = NodePressure(self, eviction_configs)
        self._deferred: dict[str, list[tuple[str, str, str]]] = {}  # down node -> (action, key, uid)
        self._bad_usage: set[str] = set()
        self.backoff = rt.CrashLoopBackOff()
        # (due, seq, action, key, uid, epoch), taken in (due, seq) order (``ksched.kubelet.timers``).
        self._timers = new_timers()
        self._seq = itertools.count()
        self._runs: dict[str, _Run] = {}
        # The pods each node runs, kept as they change (``ksched.kubelet.admitted``); None: looked
        # up in the informer's index at every use (the reference).
        self._admitted = AdmittedPods(self._is_admitted) if admitted_index else None
        # Admission asks the handlers that can answer from the node's pod count and request sum
        # without the list of its pods (``_admit``); False: the list for every handler (the reference).
        self.admit_without_pods = True
        # The fused admission (``FUSED_ADMISSION``) stands in for this kubelet's container managers'
        # answer only while it is this class's (a subclass may answer otherwise).
        self._fusable = type(self).container_manager_admit_pod is FakeKubelet.container_manager_admit_pod
        self.informer = informers.informer("Pod")
        self.informer.indexer.add_indexer(_NODE_INDEX, _node_index)
        self.informer.add_handler(EventHandler(self._on_add, self._on_update, self._on_delete))
        self.node_managers = NodeManagers()
        self._cm_annotations: dict[str, dict[str, str]] = {}  # pod uid -> what the managers gave it
        self.nodes = informers.informer("Node")
        self.nodes.add_handler(EventHandler(self._on_node_add, self._on_node_update, self._on_node_delete))

    # ---------------------------------------------------------------- timers

    def _at(self, due: float, action: str, pod: Pod, run: _Run) -> None:
        self._timers.push((due, next(self._seq), action, pod.key, pod.uid, run.epoch))

    def next_wakeup(self) -> float | None:
        times = [t for t in (self._timers.next_due() if self._timers else None, self.pressure.next_wakeup(),
                             self.heartbeats.next_wakeup(self.node)) if t is not None]
        return min(times) if times else None

    def _run(self, pod: Pod) -> _Run:
        run = self._runs.get(pod.uid)
        if run is None:
            run = self._runs[pod.uid] = _Run()
        return run

    # ---------------------------------------------------------------- informer handlers

    def _on_add(self, pod: Pod) -> None:
        if self._admitted is not None:
            self._admitted.put(pod)
        if not pod.node_name or pod.is_terminal:
            return
        if pod.deletion_timestamp is not None:
            self._schedule_stop(pod)
        elif pod.phase == "Pending":
            self._at(self.clock.now() + self.startup_delay, START, pod, self._run(pod))
        elif pod.phase == "Running":
            self._adopt_running(pod)

    def _on_update(self, old: Pod, new: Pod) -> None:
        if self._admitted is not None:
            self._admitted.put(new)
        if new.is_terminal:
            self.node_managers.remove_pod(new)
            return
        if not new.node_name:
            return
        if new.deletion_timestamp is not None and (old.deletion_timestamp is None or
                                                   new.deletion_timestamp < old.deletion_timestamp):
            self._schedule_stop(new)
        elif not old.node_name and new.phase == "Pending" and new.deletion_timestamp is None:
            self._at(self.clock.now() + self.startup_delay, START, new, self._run(new))
        elif old.annotations is not new.annotations and _usage_annotations(old) != _usage_annotations(new):
            self._bad_usage.discard(new.uid)
            self.pressure.kick(new.node_name)

    def _on_delete(self, obj: Any) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if self._admitted is not None:
            self._admitted.discard(obj.key)
        self.node_managers.remove_pod(pod)
        self._runs.pop(pod.uid, None)
        self.backoff.forget(pod.uid)
        self._bad_usage.discard(pod.uid)
        if pod.node_name:
            self.pressure.kick(pod.node_name)

    def _on_node_add(self, node: Node) -> None:
        """A node appears: its kubelet registers (lease, Ready) and the pods already bound to it
        start now."""
        self.heartbeats.saw_node(node.name)
        self.node_managers.on_node(node)
        # In name order (the index has none), so the same pods start first in every run.
        for pod in sorted(self.informer.indexer.by_index(_NODE_INDEX, node.name), key=_key):
            if isinstance(pod, Pod) and pod.phase == "Pending" and pod.deletion_timestamp is None:
                self._at(self.clock.now() + self.startup_delay, START, pod, self._run(pod))
        self.pressure.kick(node.name)

    def _on_node_update(self, old: Node, new: Node) -> None:
        self.node_managers.on_node(new)
        if _usage_annotations(old) != _usage_annotations(new) or old.capacity != new.capacity:
            self.pressure.kick(new.name)

    def _on_node_delete(self, obj: Any) -> None:
        node = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self._admit_handlers.pop(node.name, None)
        self._node_getters.pop(node.name, None)
        self.node_managers.on_node_deleted(node.name)
        self.heartbeats.forget(node.name)
        self.pressure.forget(node.name)
        self._deferred.pop(node.name, None)

    # ---------------------------------------------------------------- node failures

    def fail_node(self, name: str) -> None:
        """The node's kubelet stops: no heartbeats, no status, its pods' containers frozen."""
        self.heartbeats.fail(name)

    def restore_node(self, name: str) -> None:
        """The node's kubelet is back: it heartbeats, posts Ready, and carries on with its pods."""
        node = self.node(name)
        if name not in self.heartbeats.down or node is None:
            self.heartbeats.down.discard(name)
            return
        self.heartbeats.restore(node)
        now = self.clock.now()
        for action, key, uid in self._deferred.pop(name, []):
            pod = self.informer.get(key)
            run = self._runs.get(uid)
            if isinstance(pod, Pod) and run is not None and pod.uid == uid:
                self._timers.push((now, next(self._seq), action, key, uid, run.epoch))
        for p in sorted(self.admitted_pods(name), key=_key):
            if p.phase == "Running" and p.deletion_timestamp is None and (p.condition("Ready") or {}).get(
                    "status") != "True":
                run = self._runs.get(p.uid)
                if run is not None and run.started is not None and not run.last_state:
                    self._patch_status(p, {"conditions": rt.pod_conditions(p, now, ready=True)})
        self.pressure.kick(name)

    def is_down(self, name: str) -> bool:
        return name in self.heartbeats.down

    # ---------------------------------------------------------------- usage

    def since_start(self, pod: Pod) -> float | None:
        """Seconds since the pod's containers (re)started; None when they are not running."""
        run = self._runs.get(pod.uid)
        if run is None or run.started is None or run.stopping or pod.is_terminal:
            return None
        if run.finished is not None and run.finished >= run.started:
            return None  # exited, waiting to restart
        return self.clock.now() - run.started

    def bad_usage(self, pod: Pod, err: Exception) -> None:
        """A usage annotation that does not parse: a Warning event once, the pod counts no usage."""
        if pod.uid in self._bad_usage:
            return
        self._bad_usage.add(pod.uid)
        log.warning("kubelet: %s", err)
        self.recorder.event(pod, "Warning", "InvalidUsage", "", str(err))

    def evict(self, pod: Pod, message: str, now: float, grace_period: int = 1) -> float:
        """The eviction manager's kill (TerminatePodAbnormallyAndWait): an Evicted event and the
        DisruptionTarget condition (TerminationByKubelet) now; the containers get SIGTERM and the
        grace period, and go on running (and using what they use) until they stop or are killed
        (``runtime.kill_delay``), when the pod becomes Failed, reason Evicted. Returns when that
        is."""
        run = self._runs.get(pod.uid)
        self.recorder.event(pod, "Warning", "Evicted", "", message)
        conds = [c for c in pod.conditions if c.get("type") != "DisruptionTarget"]
        conds.append({"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                      "message": message, "lastProbeTime": None, "lastTransitionTime": format_time(now)})
        running = run is not None and self.since_start(pod) is not None
        delay, killed = rt.kill_delay(pod, grace_period) if running else (0.0, False)
        if run is not None:
            run.epoch += 1  # a pending exit, OOM kill or restart no longer happens
            run.evicting = (message, killed)
        try:
            if delay > 0 and run is not None:
                self._patch_status(pod, {"conditions": conds})
                self._at(now + delay, EVICTED, pod, run)
            else:
                self._evicted_status(pod, run, now, message, killed, conds)
        except ApiError as e:
            log.debug("kubelet: evicting %s: %s", pod.key, e)
        return now + delay

    def _evicted(self, pod: Pod, run: _Run, now: float) -> bool:
        """An evicted pod's containers have stopped: Failed, reason Evicted."""
        if pod.is_terminal or run.evicting is None:
            return False
        message, killed = run.evicting
        conds = [c for c in pod.conditions if c.get("type") == "DisruptionTarget"]
        self._evicted_status(pod, run, now, message, killed, conds)
        self.pressure.kick(pod.node_name)
        return True

    def _evicted_status(self, pod: Pod, run: _Run | None, now: float, message: str, killed: bool,
                        disruption: list[dict[str, Any]]) -> None:
        conds = [c for c in rt.pod_conditions(pod, now, ready=False, reason="PodFailed")
                 if c.get("type") != "DisruptionTarget"]
        conds.extend(c for c in disruption if c.get("type") == "DisruptionTarget")
        status: dict[str, Any] = {"phase": "Failed", "reason": "Evicted", "message": message, "conditions": conds}
        if run is not None:
            run.epoch += 1
            run.stopping = True  # no usage from now on
            if run.started is not None:
                code = rt.SIGKILL_EXIT_CODE if killed else rt.SIGTERM_EXIT_CODE
                status["containerStatuses"] = [
                    rt.container_status(pod, c, rt.terminated(pod, c.name, run.restarts, code, run.started, now),
                                        run.restarts, (run.last_state or {}).get(c.name)) for c in pod.containers]
        self._patch_status(pod, status)

    # ---------------------------------------------------------------- admission

    def node(self, name: str) -> Node | None:
        n = self.nodes.get(name)
        return n if isinstance(n, Node) else None

    def admit_handlers(self, node_name: str) -> PodAdmitHandlers:
        """The node's admit handlers, built once from the factories."""
        chain = self._admit_handlers.get(node_name)
        if chain is None:
            handle = NodeHandle(node_name, lambda: self.node(node_name), self.clock, self)
            self._node_getters[node_name] = handle.get_node
            chain = self._admit_handlers[node_name] = build_admit_handlers(handle, self.admit_handler_factories)
        return chain

    def _is_admitted(self, pod: Pod) -> bool:
        """Whether the node runs ``pod`` (this version of it): bound, not terminated, and admitted
        by the node's handlers or found past Pending."""
        if not isinstance(pod, Pod) or not pod.node_name:
            return False
        phase = pod.phase
        if phase != "Pending":
            return phase != "Succeeded" and phase != "Failed"  # (``is_terminal``, inline: 4 calls a pod)
        run = self._runs.get(pod.uid)
        return run is not None and run.admitted

    def admitted_pods(self, node_name: str, but: str = "") -> list[Pod]:
        """The pods the node runs: admitted (or found running) and not terminated."""
        if self._admitted is not None:
            return self._admitted.pods(node_name, but)
        out = []
        for p in self.informer.indexer.by_index(_NODE_INDEX, node_name):
            if not isinstance(p, Pod) or p.uid == but or p.is_terminal:
                continue
            run = self._runs.get(p.uid)
            if p.phase != "Pending" or (run is not None and run.admitted):
                out.append(p)
        return out

    def any_usage(self, node_name: str) -> bool:
        """Whether a pod the node runs declares usage (``ksched.io/usage-*``)."""
        if self._admitted is not None:
            return self._admitted.any_usage(node_name)
        return any(has_usage(p) for p in self.admitted_pods(node_name))

    def _others_requested(self, pod: Pod) -> dict[str, int] | None:
        """The sum of the requests of the pods ``pod``'s node runs beside it, when kept."""
        if self._admitted is None or pod.key in self._admitted:
            return None
        return self._admitted.requested(pod.node_name)

    def _admit(self, pod: Pod, node: Node | None = None) -> PodAdmitResult:
        """The node's admit handlers' answer for ``pod`` beside the pods the node runs. With the
        node's pods kept (``admitted_index``) and ``admit_without_pods`` on, each handler that can
        answers from their number and request sum, and the list is made only for one that
        cannot (``PodAdmitHandlers.admit_without_pods``); the reference builds it for all. With
        ``FUSED_ADMISSION``, a node with the default chain whose first three handlers admit by
        construction asks only the predicate handler (given ``node``, the pod's node as
        ``self.node`` has just returned it, when its ``get_node`` is the kubelet's)."""
        node_name = pod.node_name
        chain = self.admit_handlers(node_name)
        admitted = self._admitted
        if admitted is None or not self.admit_without_pods:
            return chain.admit(PodAdmitAttributes(pod, tuple(self.admitted_pods(node_name, but=pod.uid)),
                                                  self._others_requested(pod)))
        if ONE_OTHERS_LOOKUP:
            count, others_requested = admitted.others(node_name, pod.key, pod.uid)
        else:
            others_requested = self._others_requested(pod)
            count = -1  # (counted where read, as the reference)
        if FUSED_ADMISSION and self._fusable:
            hs = chain.handlers
            if len(hs) == 4:
                ev, cm, gpu, pred = hs
                ann = pod.annotations
                if (type(ev) is EvictionManager and not ev.conditions and type(cm) is ContainerManagerHandler
                        and cm.kubelet is self and not self.node_managers.manages(node_name)
                        and type(gpu) is GpuShareAdmitHandler and ANNOTATION_GPU_MILLI not in ann
                        and ANNOTATION_GPU_COUNT not in ann and type(pred) is PredicateAdmitHandler):
                    if count < 0:
                        count = admitted.count(node_name, but=pod.uid)
                    if node is not None and predicate.ADMIT_BY_TEMPLATE \
                            and pred.get_node is self._node_getters.get(node_name):
                        result = pred.admit_by_template(pod, count, others_requested, node)
                    else:
                        result = pred.admit_without_pods(pod, count, others_requested)
                    if result is not None:
                        return result
                    return pred.admit(PodAdmitAttributes(pod, tuple(self.admitted_pods(node_name, but=pod.uid)),
                                                         others_requested))
        return chain.admit_without_pods(
            pod, count if count >= 0 else admitted.count(node_name, but=pod.uid), others_requested,
            lambda: PodAdmitAttributes(pod, tuple(self.admitted_pods(node_name, but=pod.uid)), others_requested))

    def container_manager_admit(self, attrs: PodAdmitAttributes) -> PodAdmitResult:
        """The node's CPU, topology and device managers (``ksched.kubelet.cm``); what they give an
        admitted pod is written on it once every handler has admitted it."""
        return self.container_manager_admit_pod(attrs.pod)

    def container_manager_admit_pod(self, pod: Pod) -> PodAdmitResult:
        """:meth:`container_manager_admit`, which reads only the pod."""
        result, annotations = self.node_managers.admit(pod)
        if result.admit and annotations:
            self._cm_annotations[pod.uid] = annotations
        return result

    def _reject(self, pod: Pod, reason: str, message: str) -> None:
        """rejectPod: a Warning event, and the pod Failed with the reason (no containers run)."""
        self.recorder.event(pod, "Warning", reason, "Admit", message)
        self._patch_status(pod, {"phase": "Failed", "reason": reason, "message": f"Pod was rejected: {message}",
                                 "qosClass": qos_class(pod)})

    def _adopt_running(self, pod: Pod) -> None:
        """A pod found Running (an agent started on a persisted cluster): its containers started
        at the pod's startTime."""
        run = self._run(pod)
        run.admitted = True
        if self._admitted is not None:
            self._admitted.put(pod)
        if run.started is not None:
            return
        run.started = pod.start_time if pod.start_time is not None else self.clock.now()
        run.restarts = max((int(c.get("restartCount") or 0) for c in
                            (pod.raw.get("status") or {}).get("containerStatuses") or ()), default=0)
        self._schedule_exit(pod, run)

    def _schedule_exit(self, pod: Pod, run: _Run) -> None:
        secs = rt.run_seconds(pod)
        if secs is not None and run.started is not None:
            self._at(max(self.clock.now(), run.started + secs), EXIT, pod, run)
        if run.started is not None:
            try:
                # (a pod without usage annotations is never OOM-killed: first_oom's None)
                oom = first_oom(pod, 0.0) if has_usage(pod) or not OOM_ONLY_WITH_USAGE else None
            except UsageError as e:
                self.bad_usage(pod, e)
                oom = None
            if oom is not None and (secs is None or oom[0] < secs):
                self._at(max(self.clock.now(), run.started + oom[0]), OOM, pod, run)

    def _schedule_stop(self, pod: Pod) -> None:
        run = self._run(pod)
        delay, _ = rt.stop_delay(pod)
        run.epoch += 1  # a pending exit or restart no longer happens
        run.stopping = True
        self._at(self.clock.now() + delay, STOP, pod, run)

    # ---------------------------------------------------------------- step

    def heartbeat(self) -> int:
        """Register new nodes and renew the live nodes' leases that are due."""
        return self.heartbeats.register_pending(self.node) + self.heartbeats.renew()

    def step(self) -> int:
        """Heartbeats, then every container start, exit, OOM kill, restart and stop whose time
        has come, then the eviction managers' passes. Returns how many things changed."""
        now = self.clock.now()
        n = self.heartbeat()
        for name, patch in self.node_managers.node_status_patches():
            try:
                self.client.patch("Node", "", name, patch, "application/merge-patch+json", "status")
                n += 1
            except ApiError as e:
                log.debug("kubelet: status of node %s: %s", name, e)
        timers = self._timers
        while (entry := timers.pop_due(now)) is not None:
            _, _, action, key, uid, epoch = entry
            pod = self.informer.get(key)
            run = self._runs.get(uid)
            if not isinstance(pod, Pod) or pod.uid != uid or run is None or run.epoch != epoch:
                continue
            if pod.node_name in self.heartbeats.down:
                self._deferred.setdefault(pod.node_name, []).append((action, key, uid))
                continue
            try:
                if getattr(self, f"_{action}")(pod, run, now):
                    n += 1
            except NotFound:
                pass
            except ApiError as e:
                log.debug("kubelet: %s of %s failed: %s", action, key, e)
        return n + self.pressure.step()

    def _patch_status(self, pod: Pod, status: dict[str, Any]) -> None:
        write = self._write_status
        if write is not None and DIRECT_STATUS_WRITE:
            write(pod.namespace, pod.name, status)
            return
        self.client.patch("Pod", pod.namespace, pod.name, {"status": status}, "application/merge-patch+json",
                          "status", **self._owned)

    def _start(self, pod: Pod, run: _Run, now: float) -> bool:
        if not pod.node_name or pod.phase != "Pending" or pod.deletion_timestamp is not None:
            return False
        node = self.node(pod.node_name)
        if node is None:
            return False  # no kubelet there: it starts if the node appears
        if not run.admitted:
            result = self._admit(pod, node)
            annotations = self._cm_annotations.pop(pod.uid, None)
            if not result.admit:
                self.node_managers.remove_pod(pod)  # a later handler refused: what it was given is free
                run.epoch += 1
                self._reject(pod, result.reason, result.message)
                return True
            run.admitted = True
            if self._admitted is not None:
                self._admitted.put(pod)
            if annotations:
                self.client.patch("Pod", pod.namespace, pod.name, {"metadata": {"annotations": annotations}},
                                  "application/merge-patch+json")
        run.started = now
        run.finished = None
        run.epoch += 1
        status: dict[str, Any] = {
            "phase": "Running", "startTime": format_time(now),
            "conditions": rt.pod_conditions(pod, now, ready=True),
            "containerStatuses": rt.started_statuses(pod, now)}
        if pod.init_containers:
            status["initContainerStatuses"] = rt.init_container_statuses(pod, now)
        self._patch_status(pod, status)
        self._schedule_exit(pod, run)
        self.pressure.kick(pod.node_name)
        return True

    def _exit(self, pod: Pod, run: _Run, now: float) -> bool:
        return self._containers_exit(pod, run, now, rt.exit_code(pod))

    def _oom(self, pod: Pod, run: _Run, now: float) -> bool:
        """A container's memory went above its limit: the runtime kills it (137, OOMKilled)."""
        return self._containers_exit(pod, run, now, OOM_EXIT_CODE, "OOMKilled")

    def _containers_exit(self, pod: Pod, run: _Run, now: float, code: int, reason: str | None = None) -> bool:
        """The containers exit: the pod is done, or they restart (now, or after their back-off)."""
        if pod.deletion_timestamp is not None or pod.is_terminal:
            return False
        run.epoch += 1
        run.finished = now
        last = {c.name: rt.terminated(pod, c.name, run.restarts, code, run.started, now, reason)
                for c in pod.containers}
        self.pressure.kick(pod.node_name)
        if not rt.should_restart(rt.restart_policy(pod), code):
            self._finish(pod, run, now, code, last)
            return True
        run.last_state = last
        if not self.backoff.in_backoff_since(pod.uid, now, now):
            self.backoff.next(pod.uid, now, now)
            self._restart_now(pod, run, now)
            return True
        # CrashLoopBackOff: waiting, not ready, until the back-off has passed since the exit.
        delay = self.backoff.get(pod.uid)
        msg = {c.name: rt.crash_loop_message(delay, c.name, pod) for c in pod.containers}
        statuses = [rt.container_status(pod, c, {"waiting": {"reason": "CrashLoopBackOff", "message": msg[c.name]}},
                                        run.restarts, last[c.name]) for c in pod.containers]
        names = ", ".join(c.name for c in pod.containers)
        self._patch_status(pod, {"conditions": rt.pod_conditions(
            pod, now, ready=False, reason="ContainersNotReady", message=f"containers with unready status: [{names}]"),
            "containerStatuses": statuses})
        self._at(now + delay, RESTART, pod, run)
        return True

    def _restart(self, pod: Pod, run: _Run, now: float) -> bool:
        if pod.deletion_timestamp is not None or pod.is_terminal or run.finished is None:
            return False
        run.epoch += 1
        self.backoff.next(pod.uid, run.finished, now)
        self._restart_now(pod, run, now)
        return True

    def _restart_now(self, pod: Pod, run: _Run, now: float) -> None:
        run.restarts += 1
        run.started = now
        run.finished = None
        last = run.last_state or {}
        self._patch_status(pod, {
            "conditions": rt.pod_conditions(pod, now, ready=True),
            "containerStatuses": [rt.container_status(pod, c, rt.running(now), run.restarts, last.get(c.name),
                                                      ready=True) for c in pod.containers]})
        self._schedule_exit(pod, run)
        self.pressure.kick(pod.node_name)

    def _finish(self, pod: Pod, run: _Run, now: float, code: int, states: dict[str, dict[str, Any]]) -> None:
        """All containers exited for good: the pod is Succeeded (all exit 0) or Failed."""
        status: dict[str, Any] = {
            "phase": "Succeeded" if code == 0 else "Failed",
            "conditions": rt.pod_conditions(pod, now, ready=False, reason="PodCompleted"),
            "containerStatuses": [rt.container_status(pod, c, states[c.name], run.restarts,
                                                      (run.last_state or {}).get(c.name))
                                  for c in pod.containers]}
        if any(c.is_sidecar for c in pod.init_containers):
            status["initContainerStatuses"] = [
                rt.container_status(pod, c, rt.terminated(pod, c.name, 0, 0, run.started, now), 0)
                for c in pod.init_containers]
        self._patch_status(pod, status)

    def _stop(self, pod: Pod, run: _Run, now: float) -> bool:
        """A deleted pod's containers have stopped: record it, then delete the pod for good
        (grace period 0, as the status manager does; finalizers still hold it)."""
        if not pod.is_terminal:
            _, killed = rt.stop_delay(pod)
            code = rt.SIGKILL_EXIT_CODE if killed else rt.SIGTERM_EXIT_CODE
            if run.started is not None:
                states = {c.name: rt.terminated(pod, c.name, run.restarts, code, run.started, now)
                          for c in pod.containers}
                self._finish(pod, run, now, code, states)
            else:
                self._patch_status(pod, {"phase": "Failed",
                                         "conditions": rt.pod_conditions(pod, now, ready=False,
                                                                         reason="PodCompleted")})
        run.epoch += 1
        self.client.delete("Pod", pod.namespace, pod.name, grace_period_seconds=0, uid=pod.uid)
        return True


def _node_index(pod: Any) -> tuple[str, ...]:
    """The kubelet's index of the pods by node (a tuple: no list made for each pod version)."""
    name = pod.node_name
    return (name,) if name else ()


def _usage_annotations(obj: Any) -> dict[str, str]:
    return {k: v for k, v in obj.annotations.items() if k.startswith(USAGE_ANNOTATION)}


def _key(obj: Any) -> str:
    return obj.key  # type: ignore[no-any-return]
