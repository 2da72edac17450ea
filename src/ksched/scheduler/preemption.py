"""Preemption machinery shared by PostFilter plugins (upstream's framework/preemption package):
the Evaluator (eligibility, candidate nodes, dry run, best candidate), the Executor (delete the
victims with a DisruptionTarget condition, reject victims waiting at Permit, clear lower-priority
nominations; synchronously or "asynchronously" with the PreEnqueue bookkeeping), and the pure
helpers (PDB violation split, pickOneNodeForPreemption, pod importance).

Read against kubernetes/kubernetes ``pkg/scheduler/framework/preemption/{preemption,executor}.go``
and ``pkg/scheduler/util/utils.go`` as of the 1.36 line (the Executor split, async preemption).

Deliberate differences from upstream, all for determinism:

* The dry run visits the candidate nodes one after another from the random offset (upstream runs
  ``parallelism`` of them at once); it stops at the same condition, so it behaves as upstream
  with ``parallelism = 1``.
* Nodes whose Filter status is ``Unschedulable`` are listed in snapshot order (upstream walks a
  map), and ties left after every pickOneNodeForPreemption criterion go to the first candidate in
  dry-run order (non-violating candidates first) instead of the first of a Go map iteration.
* "Asynchronous" preemption runs its work through ``Executor.runner``, which by default calls it
  at once; the PreEnqueue bookkeeping (``preempting``, last pending victim) is kept so a deferred
  runner gives upstream's gating.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ksched.api.errors import ApiError, NotFound, aggregate_error_message
from ksched.api.meta import format_time
from ksched.api.pdb import PodDisruptionBudget
from ksched.api.pod import Pod
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import PostFilterResult
from ksched.scheduler.framework.status import Code, Diagnosis, Status, fit_error_message
from ksched.scheduler.framework.types import NodeInfo, PodInfo

__all__ = [
    "DISRUPTION_TARGET",
    "MAX_INT32",
    "PREEMPTION_BY_SCHEDULER",
    "PREEMPTION_NOT_HELPFUL",
    "Candidate",
    "Evaluator",
    "Executor",
    "PreemptionDecision",
    "PreemptionInterface",
    "Victims",
    "aggregate_error_message",
    "filter_pods_with_pdb_violation",
    "get_earliest_pod_start_time",
    "more_important_pod",
    "nodes_for_status_code",
    "pdb_selects_pod",
    "pick_one_node_for_preemption",
    "pod_start_time",
]

log = logging.getLogger(__name__)

MAX_INT32 = 2**31 - 1
MIN_INT64 = -(2**63)
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


# ---------------------------------------------------------------------------- data


@dataclass(slots=True)
class Victims:
    """The pods to preempt on one node (most important first) and how many of them violate a PDB."""

    pods: list[Pod] = field(default_factory=list)
    num_pdb_violations: int = 0


@dataclass(slots=True)
class Candidate:
    """A node the preemptor could be nominated to, with the victims that make room there."""

    name: str
    victims: Victims


@dataclass(slots=True)
class PreemptionDecision:
    """What the last PostFilter call decided, for ``--explain``."""

    preemptor: str
    eligible: bool = True
    reason: str = ""
    potential_nodes: list[str] = field(default_factory=list)
    offset: int = 0
    num_candidates: int = 0
    candidates: list[Candidate] = field(default_factory=list)
    node_statuses: dict[str, Status] = field(default_factory=dict)
    selected: str = ""
    victims: list[str] = field(default_factory=list)
    status_code: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "preemptor": self.preemptor,
            "eligible": self.eligible,
            "reason": self.reason,
            "potentialNodes": list(self.potential_nodes),
            "offset": self.offset,
            "numCandidates": self.num_candidates,
            "candidates": [{"node": c.name, "victims": [p.key for p in c.victims.pods],
                            "numPDBViolations": c.victims.num_pdb_violations} for c in self.candidates],
            "nodeStatuses": {n: {"code": str(s.code), "plugin": s.plugin, "reason": s.message()}
                             for n, s in self.node_statuses.items()},
            "selectedNode": self.selected,
            "victims": list(self.victims),
            "code": self.status_code,
            "message": self.message,
        }


class PreemptionInterface(Protocol):
    """What a preemption PostFilter plugin supplies to the Evaluator (upstream's preemption.Interface)."""

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]: ...

    def candidates_to_victims_map(self, candidates: Sequence[Candidate]) -> dict[str, Victims]: ...

    def pod_eligible_to_preempt_others(self, pod: Pod, nominated_node_status: Status | None) -> tuple[bool, str]: ...

    def select_victims_on_node(self, state: CycleState, pod: Pod, node_info: NodeInfo,
                               pdbs: Sequence[PodDisruptionBudget]) -> tuple[list[Pod], int, Status | None]: ...

    def ordered_score_funcs(self, nodes_to_victims: dict[str, Victims]) -> list[Callable[[str], int]] | None: ...


# ---------------------------------------------------------------------------- helpers


def pod_start_time(pod: Pod, now: float) -> float:
    """``status.startTime``, or now for pods that have not started (assumed, just bound)."""
    st = pod.start_time
    return st if st is not None else now


def more_important_pod(a: Pod, b: Pod, now: float) -> bool:
    """Higher priority first; equal priority: the one that started earlier."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return pod_start_time(a, now) < pod_start_time(b, now)


def sort_by_importance(pods: list[Any], more_important: Callable[[Pod, Pod], bool],
                       pod_of: Callable[[Any], Pod]) -> None:
    """Sort in place, most important first (stable for ties)."""

    def cmp(x: Any, y: Any) -> int:
        px, py = pod_of(x), pod_of(y)
        if more_important(px, py):
            return -1
        if more_important(py, px):
            return 1
        return 0

    pods.sort(key=functools.cmp_to_key(cmp))


def get_earliest_pod_start_time(victims: Victims, now: float) -> float | None:
    """The earliest start time among the victims of the highest priority."""
    pods = victims.pods
    if not pods:
        return None
    earliest = pod_start_time(pods[0], now)
    max_prio = pods[0].priority
    for p in pods:
        if p.priority == max_prio:
            t = pod_start_time(p, now)
            if t < earliest:
                earliest = t
        elif p.priority > max_prio:
            max_prio = p.priority
            earliest = pod_start_time(p, now)
    return earliest


def pdb_selects_pod(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    """Same namespace and a selector that matches; a nil or empty selector matches nothing here."""
    if pdb.namespace != pod.namespace:
        return False
    sel = pdb.selector
    if sel.is_nothing() or sel.is_empty():
        return False
    return sel.matches(pod.labels)


def filter_pods_with_pdb_violation(pod_infos: Sequence[PodInfo], pdbs: Sequence[PodDisruptionBudget]
                                   ) -> tuple[list[PodInfo], list[PodInfo]]:
    """Split (stably) into pods whose preemption would violate a PDB and the others.

    Each PDB starts at its ``status.disruptionsAllowed``; every matching pod not already in the
    PDB's ``disruptedPods`` takes one; a pod that takes a PDB below zero is violating.
    """
    allowed = [pdb.disruptions_allowed for pdb in pdbs]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pi in pod_infos:
        pod = pi.pod
        violated = False
        # A pod without labels matches no PDB.
        if pod.labels:
            for i, pdb in enumerate(pdbs):
                if not pdb_selects_pod(pdb, pod):
                    continue
                # Already processed by the eviction API: not counted again.
                if pod.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pi)
    return violating, non_violating


def pick_one_node_for_preemption(nodes_to_victims: dict[str, Victims],
                                 score_funcs: Sequence[Callable[[str], int]] | None = None,
                                 now: float | None = None) -> str:
    """The node to preempt on. Without score functions, upstream's criteria in order: fewest PDB
    violations, lowest highest-victim priority, lowest sum of (priority + MaxInt32 + 1), fewest
    victims, latest earliest start time among the highest-priority victims, then the first node
    (in the map's order). Victims must be sorted most important first."""
    if not nodes_to_victims:
        return ""
    t_now = time.time() if now is None else now
    candidates = list(nodes_to_victims)
    if not score_funcs:
        def min_pdb(node: str) -> int:
            return -nodes_to_victims[node].num_pdb_violations

        def min_highest_priority(node: str) -> int:
            return -nodes_to_victims[node].pods[0].priority

        def min_sum_priorities(node: str) -> int:
            return -sum(p.priority + MAX_INT32 + 1 for p in nodes_to_victims[node].pods)

        def min_num_pods(node: str) -> int:
            return -len(nodes_to_victims[node].pods)

        def latest_start_time(node: str) -> int:
            t = get_earliest_pod_start_time(nodes_to_victims[node], t_now)
            if t is None:
                return MIN_INT64
            return round(t * 1e9)

        score_funcs = [min_pdb, min_highest_priority, min_sum_priorities, min_num_pods, latest_start_time]
    for f in score_funcs:
        selected: list[str] = []
        best = MIN_INT64
        for node in candidates:
            s = f(node)
            if s > best:
                best = s
                selected = []
            if s == best:
                selected.append(node)
        if len(selected) == 1:
            return selected[0]
        candidates = selected
    return candidates[0]


def nodes_for_status_code(diagnosis: Diagnosis, node_infos: Iterable[NodeInfo], code: Code) -> list[NodeInfo]:
    """Nodes whose status in the diagnosis has ``code``, in the given (snapshot) order. Nodes
    absent from the diagnosis take its absent status (UnschedulableAndUnresolvable when unset)."""
    absent_code = diagnosis.absent_status.code if diagnosis.absent_status is not None \
        else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    statuses = diagnosis.node_to_status
    out: list[NodeInfo] = []
    for ni in node_infos:
        st = statuses.get(ni.name)
        c = st.code if st is not None else absent_code
        if c == code:
            out.append(ni)
    return out


def _status_code(st: Status | None) -> Code:
    return Code.SUCCESS if st is None else st.code


def _now(handle: Any) -> float:
    clock = getattr(handle, "clock", None)
    return clock.now() if clock is not None else time.time()


def _pod_lister_get(handle: Any, namespace: str, name: str) -> tuple[Pod | None, bool]:
    """(pod, has_lister): the pod from the handle's Pod informer."""
    informers = getattr(handle, "informers", None)
    if informers is None:
        return None, False
    inf = informers.informer("Pod")
    obj = inf.get(f"{namespace}/{name}")
    return (obj if isinstance(obj, Pod) else None), True


# ---------------------------------------------------------------------------- executor


class Executor:
    """Carries out a preemption decision (upstream's preemption.Executor)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        # Pods (uid) whose asynchronous preemption is under way: PreEnqueue keeps them out of activeQ.
        self.preempting: set[str] = set()
        # Preemptor uid -> (namespace, name) of the last victim it is waiting for.
        self.last_victims_pending: dict[str, tuple[str, str]] = {}
        # Runs the asynchronous part; the default runs it at once (see the module docstring).
        self.runner: Callable[[Callable[[], None]], None] = lambda fn: fn()
        # Makes the API calls that preempt one victim; replaceable in tests, as upstream's PreemptPod.
        self.preempt_pod: Callable[[Candidate, Pod, Pod, str], None] = self._preempt_pod
        # Removes a victim once it carries its DisruptionTarget condition: upstream deletes it.
        # Scheduler instances evict the victims a PDB covers instead (ksched.dispatch.instance),
        # so the API server charges each budget once however many instances preempt at once.
        self.remove_victim: Callable[[Candidate, Pod], None] = self._delete_victim

    @staticmethod
    def _uid(pod: Pod) -> str:
        return pod.uid or pod.key

    # ---- one victim

    def _preempt_waiting_pod(self, victim: Pod, plugin_name: str) -> bool:
        """Reject the victim in memory if it is still waiting at Permit (upstream's
        WaitingPod.Preempt): True if it was, False if it is not waiting (any more)."""
        h = self.handle
        get = getattr(h, "get_waiting_pod", None)
        wp = get(self._uid(victim)) if get is not None else None
        if wp is None or getattr(wp, "resolved", False):
            return False
        h.reject_waiting_pod(self._uid(victim), plugin_name, "preempted")
        return True

    def _preempt_pod(self, c: Candidate, preemptor: Pod, victim: Pod, plugin_name: str) -> None:
        """Preempt a victim waiting at Permit in memory; otherwise add a DisruptionTarget condition
        and delete it. A victim already gone is not an error. Records a Preempted event."""
        h = self.handle
        message = f"Preempted by pod {preemptor.uid} on node {c.name}"
        if self._preempt_waiting_pod(victim, plugin_name):
            log.debug("preemptor %s preempted waiting pod %s on node %s", preemptor.key, victim.key, c.name)
            message += " (in kube-scheduler memory)."
        else:
            client = h.client
            cond = self._disruption_condition(preemptor, victim)
            if cond is not None:
                try:
                    client.patch("Pod", victim.namespace, victim.name, {"status": {"conditions": [cond]}},
                                 STRATEGIC_MERGE_PATCH, "status")
                except NotFound:
                    log.debug("victim %s is already deleted", victim.key)
                    return
            try:
                self.remove_victim(c, victim)
            except NotFound:
                log.debug("victim %s is already deleted", victim.key)
                return
            log.debug("preemptor %s preempted victim %s on node %s", preemptor.key, victim.key, c.name)
        rec = getattr(h, "event_recorder", None)
        if rec is not None:
            rec.event(victim, "Normal", "Preempted", "Preempting", message)

    def _delete_victim(self, c: Candidate, victim: Pod) -> None:
        self.handle.client.delete("Pod", victim.namespace, victim.name)

    def _disruption_condition(self, preemptor: Pod, victim: Pod) -> dict[str, Any] | None:
        """The DisruptionTarget condition to patch in, or None if the victim already has it."""
        cond: dict[str, Any] = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod",
        }
        gen = int(getattr(victim, "generation", 0) or 0)
        if gen:
            # PodObservedGenerationTracking (on by default since 1.34).
            cond["observedGeneration"] = gen
        old = victim.condition(DISRUPTION_TARGET)
        if old is not None:
            same = (old.get("status") == cond["status"] and old.get("reason") == cond["reason"]
                    and old.get("message") == cond["message"]
                    and int(old.get("observedGeneration") or 0) == int(cond.get("observedGeneration") or 0))
            if same:
                return None
            if old.get("status") == cond["status"] and old.get("lastTransitionTime"):
                cond["lastTransitionTime"] = old["lastTransitionTime"]
                if old.get("lastProbeTime") is not None:
                    cond["lastProbeTime"] = old["lastProbeTime"]
                return cond
        cond["lastTransitionTime"] = format_time(_now(self.handle))
        return cond

    # ---- a whole candidate

    def prepare_candidate(self, c: Candidate, preemptor: Pod, plugin_name: str) -> Status | None:
        """Synchronous preparation: preempt every victim not already being deleted, then clear the
        nominations of lower-priority pods on the node. Returns an Error status on the first failure."""
        self._observe_victims(len(c.victims.pods))
        for victim in c.victims.pods:
            if victim.deletion_timestamp is not None:
                log.debug("victim %s is already being deleted", victim.key)
                continue
            try:
                self.preempt_pod(c, preemptor, victim, plugin_name)
            except ApiError as e:
                return Status.as_error(e)
        errs = self.clear_nominated_node_name(self.lower_priority_nominated_pods(preemptor, c.name))
        if errs:
            log.info("cannot clear nominatedNodeName of lower-priority pods on %s: %s", c.name,
                     aggregate_error_message(errs))
        return None

    def prepare_candidate_async(self, c: Candidate, preemptor: Pod, plugin_name: str) -> None:
        """Asynchronous preparation (SchedulerAsyncPreemption): the preemptor is marked as
        preempting until the work is done; the last victim is preempted on its own so PreEnqueue
        can tell a finished preemption from one under way. On an API error the preemptor is
        activated."""
        victims = [v for v in c.victims.pods if v.deletion_timestamp is None]
        if not victims:
            return
        self._observe_victims(len(c.victims.pods))
        uid = self._uid(preemptor)
        self.preempting.add(uid)

        def work() -> None:
            failed = False
            try:
                errs = self.clear_nominated_node_name(self.lower_priority_nominated_pods(preemptor, c.name))
                if errs:
                    log.info("cannot clear nominatedNodeName of lower-priority pods on %s: %s", c.name,
                             aggregate_error_message(errs))
                    failed = True
                preempt_last = True
                if len(victims) > 1:
                    for v in victims[:-1]:
                        try:
                            self.preempt_pod(c, preemptor, v, plugin_name)
                        except ApiError as e:
                            log.info("async preemption of %s failed: %s", v.key, e)
                            failed = True
                            preempt_last = False
                            break
                if preempt_last:
                    last = victims[-1]
                    self.last_victims_pending[uid] = (last.namespace, last.name)
                    try:
                        self.preempt_pod(c, preemptor, last, plugin_name)
                    except ApiError as e:
                        log.info("async preemption of the last victim %s failed: %s", last.key, e)
                        failed = True
            finally:
                self.preempting.discard(uid)
                self.last_victims_pending.pop(uid, None)
                if failed:
                    activator = getattr(self.handle, "pod_activator", None)
                    if activator is not None:
                        activator([preemptor])

        self.runner(work)

    def is_pod_running_preemption(self, uid: str) -> bool:
        """Whether the pod's asynchronous preemption is still under way."""
        if uid not in self.preempting:
            return False
        pending = self.last_victims_pending.get(uid)
        if pending is None:
            return True
        victim, has_lister = _pod_lister_get(self.handle, pending[0], pending[1])
        if not has_lister or victim is None:
            return False
        return victim.deletion_timestamp is None

    # ---- nominations

    def lower_priority_nominated_pods(self, preemptor: Pod, node_name: str) -> list[Pod]:
        nom = getattr(self.handle, "nominator", None)
        if nom is None:
            return []
        prio = preemptor.priority
        return [pi.pod for pi in nom.pods_for_node(node_name) if pi.pod.priority < prio]

    def clear_nominated_node_name(self, pods: Iterable[Pod]) -> list[str]:
        """Patch ``status.nominatedNodeName`` away for pods that have one (errors are returned).
        The nomination is also dropped from the nominator, which is where upstream ends up once
        the pod update arrives."""
        errs: list[str] = []
        nom = getattr(self.handle, "nominator", None)
        for p in pods:
            if not p.nominated_node_name:
                continue
            try:
                self.handle.client.patch("Pod", p.namespace, p.name, {"status": {"nominatedNodeName": None}},
                                         STRATEGIC_MERGE_PATCH, "status")
            except ApiError as e:
                errs.append(str(e))
                continue
            if nom is not None:
                nom.delete(p)
        return errs

    def _observe_victims(self, n: int) -> None:
        m = getattr(self.handle, "metrics", None)
        hist = getattr(m, "preemption_victims", None)
        if hist is not None:
            hist.observe(n)


# ---------------------------------------------------------------------------- evaluator


class Evaluator:
    """Runs one preemption attempt for a preemptor pod (upstream's preemption.Evaluator)."""

    def __init__(self, plugin_name: str, handle: Any, interface: PreemptionInterface, executor: Executor,
                 enable_async_preemption: bool = True) -> None:
        self.plugin_name = plugin_name
        self.handle = handle
        self.interface = interface
        self.executor = executor
        self.enable_async_preemption = enable_async_preemption
        self.pdb_lister: Callable[[], list[PodDisruptionBudget]] = self._list_pdbs
        self.last_decision: PreemptionDecision | None = None

    def _list_pdbs(self) -> list[PodDisruptionBudget]:
        informers = getattr(self.handle, "informers", None)
        if informers is None:
            return []
        return [o for o in informers.informer("PodDisruptionBudget").list() if isinstance(o, PodDisruptionBudget)]

    def preempt(self, state: CycleState, pod: Pod, diagnosis: Diagnosis
                ) -> tuple[PostFilterResult | None, Status | None]:
        """(result, status) as upstream's Evaluator.Preempt:

        * (None, Error): a transient error; the nomination is left alone.
        * (None, Unschedulable): not eligible (e.g. waiting for victims to terminate).
        * (result with "", Unschedulable): preemption cannot help; the nomination is cleared.
        * (result with a node, None): the happy path.
        """
        decision = PreemptionDecision(preemptor=pod.key)
        self.last_decision = decision
        result, status = self._preempt(state, pod, diagnosis, decision)
        decision.status_code = str(_status_code(status))
        decision.message = status.message() if status is not None else ""
        return result, status

    def _preempt(self, state: CycleState, pod: Pod, diagnosis: Diagnosis, decision: PreemptionDecision
                 ) -> tuple[PostFilterResult | None, Status | None]:
        # 0) The latest version of the preemptor.
        latest, has_lister = _pod_lister_get(self.handle, pod.namespace, pod.name)
        if has_lister:
            if latest is None:
                return None, Status.as_error(NotFound.of("pods", pod.name))
            pod = latest

        # 1) Is the preemptor eligible?
        nominated_status = diagnosis.status_of(pod.nominated_node_name) if pod.nominated_node_name else None
        if pod.nominated_node_name and nominated_status is None:
            nominated_status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        ok, msg = self.interface.pod_eligible_to_preempt_others(pod, nominated_status)
        if not ok:
            decision.eligible = False
            decision.reason = msg
            return None, Status(Code.UNSCHEDULABLE, msg)

        # 2) Candidates.
        snapshot = self.handle.snapshot
        all_nodes = list(snapshot.all_nodes())
        candidates, node_statuses, err = self.find_candidates(state, all_nodes, pod, diagnosis, decision)
        if err and not candidates:
            return None, Status.as_error(err)
        if not candidates:
            d = Diagnosis()
            d.node_to_status = dict(node_statuses)
            d.absent_status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, PREEMPTION_NOT_HELPFUL)
            return PostFilterResult(""), Status(Code.UNSCHEDULABLE, fit_error_message(len(all_nodes), d))

        # 3) Extenders: ksched has none that take part in preemption.

        # 4) The best candidate.
        best = self.select_candidate(candidates)
        if best is None or not best.name:
            return None, Status(Code.UNSCHEDULABLE, "no candidate node for preemption")
        decision.selected = best.name
        decision.victims = [p.key for p in best.victims.pods]

        # 5) Preparation before nominating.
        if self.enable_async_preemption:
            self.executor.prepare_candidate_async(best, pod, self.plugin_name)
        else:
            st = self.executor.prepare_candidate(best, pod, self.plugin_name)
            if st is not None and st.code != Code.SUCCESS:
                return None, st
        return PostFilterResult(best.name), None

    def find_candidates(self, state: CycleState, all_nodes: Sequence[NodeInfo], pod: Pod, diagnosis: Diagnosis,
                        decision: PreemptionDecision | None = None
                        ) -> tuple[list[Candidate], dict[str, Status], str]:
        """(candidates, statuses of the nodes tried without success, aggregated error message)."""
        if not all_nodes:
            return [], {}, "no nodes available"
        potential = nodes_for_status_code(diagnosis, all_nodes, Code.UNSCHEDULABLE)
        if decision is not None:
            decision.potential_nodes = [ni.name for ni in potential]
        if not potential:
            log.debug("preemption will not help schedule pod %s on any node", pod.key)
            return [], {}, ""
        pdbs = self.pdb_lister()
        offset, num = self.interface.get_offset_and_num_candidates(len(potential))
        if decision is not None:
            decision.offset = offset
            decision.num_candidates = num
        candidates, statuses, errs = self.dry_run_preemption(state, pod, potential, pdbs, offset, num)
        if decision is not None:
            decision.candidates = list(candidates)
            decision.node_statuses = dict(statuses)
        return candidates, statuses, aggregate_error_message(errs)

    def dry_run_preemption(self, state: CycleState, pod: Pod, potential_nodes: Sequence[NodeInfo],
                           pdbs: Sequence[PodDisruptionBudget], offset: int, num_candidates: int
                           ) -> tuple[list[Candidate], dict[str, Status], list[str]]:
        """Simulate preemption on the nodes from ``offset`` (wrapping around) on copies of the
        NodeInfo and CycleState. Stops once there is a non-violating candidate and at least
        ``num_candidates`` candidates; each kind keeps at most ``num_candidates``. Returns the
        non-violating candidates then the violating ones, the statuses of the nodes that gave
        none, and the error messages met."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        errs: list[str] = []
        n = len(potential_nodes)
        for i in range(n):
            ni = potential_nodes[(offset + i) % n].clone()
            pods, num_violations, st = self.interface.select_victims_on_node(state.clone(), pod, ni, pdbs)
            ok = st is None or st.code == Code.SUCCESS
            if ok and pods:
                c = Candidate(ni.name, Victims(list(pods), num_violations))
                target = non_violating if num_violations == 0 else violating
                if len(target) < num_candidates:
                    target.append(c)
                if non_violating and len(non_violating) + len(violating) >= num_candidates:
                    break
                continue
            if ok:
                st = Status.as_error(f'expected at least one victim pod on node "{ni.name}"')
            assert st is not None
            if st.code == Code.ERROR:
                errs.append(st.message())
            statuses[ni.name] = st
        return non_violating + violating, statuses, errs

    def select_candidate(self, candidates: Sequence[Candidate]) -> Candidate | None:
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        victims_map = self.interface.candidates_to_victims_map(candidates)
        score_funcs = self.interface.ordered_score_funcs(victims_map)
        node = pick_one_node_for_preemption(victims_map, score_funcs, _now(self.handle))
        v = victims_map.get(node)
        if v is not None:
            return Candidate(node, v)
        log.error("no candidate selected among %s", [c.name for c in candidates])
        return candidates[0]
