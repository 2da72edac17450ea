"""DefaultPreemption: the PostFilter plugin that makes room for a pod by preempting lower-priority
pods (upstream's plugins/defaultpreemption/default_preemption.go, 1.36 line).

When no node fits a pod, it finds nodes where removing lower-priority pods would let the pod fit
(only nodes whose Filter status is ``Unschedulable``), simulates the removal on copies, reprieves
as many pods as possible (PDB-violating ones first, most important first), picks one node by
upstream's criteria, deletes the victims there and nominates the pod to it. With async
preemption (SchedulerAsyncPreemption, on by default) PreEnqueue keeps the pod out of activeQ while
its preemption is under way; see :mod:`ksched.scheduler.preemption` for how that work is run.

Args: ``minCandidateNodesPercentage`` (0..100, default 10) and ``minCandidateNodesAbsolute``
(>= 0, default 100), not both zero. ``is_eligible_pod`` and ``more_important_pod`` may be
replaced on the instance, as the exported fields of upstream's plugin.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from ksched.api.pdb import PodDisruptionBudget
from ksched.api.pod import Pod
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from ksched.scheduler.framework.interface import (
    EnqueueExtensions,
    ExplainedPostFilter,
    Handle,
    PostFilterPlugin,
    PostFilterResult,
    PreEnqueuePlugin,
)
from ksched.scheduler.framework.status import Code, Diagnosis, Status
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.scheduler.preemption import (
    DISRUPTION_TARGET,
    PREEMPTION_BY_SCHEDULER,
    Candidate,
    Evaluator,
    Executor,
    PreemptionDecision,
    Victims,
    filter_pods_with_pdb_violation,
    more_important_pod,
    pod_start_time,
    sort_by_importance,
)

__all__ = ["DefaultPreemption", "pod_terminating_by_preemption"]

NAME = "DefaultPreemption"
ASYNC_PREEMPTION_GATE = "SchedulerAsyncPreemption"

MSG_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_TERMINATING = "not eligible due to a terminating pod on the nominated node."
MSG_NO_VICTIMS = "No preemption victims found for incoming pod"
MSG_WAITING = "waiting for the preemption for this pod to be finished"

IsEligiblePodFunc = Callable[[NodeInfo, PodInfo, Pod], bool]
MoreImportantPodFunc = Callable[[Pod, Pod], bool]


class PreemptionArgsError(ValueError):
    pass


def validate_args(args: dict[str, Any]) -> tuple[int, int]:
    """(percentage, absolute) from DefaultPreemptionArgs, with upstream's validation."""
    pct = args.get("minCandidateNodesPercentage", 10)
    absolute = args.get("minCandidateNodesAbsolute", 100)
    errors: list[str] = []
    if isinstance(pct, bool) or not isinstance(pct, int) or not 0 <= pct <= 100:
        errors.append(f"minCandidateNodesPercentage: Invalid value: {pct!r}: not in valid range [0, 100]")
    if isinstance(absolute, bool) or not isinstance(absolute, int) or absolute < 0:
        errors.append(f"minCandidateNodesAbsolute: Invalid value: {absolute!r}: not in valid range [0, inf)")
    if not errors and pct == 0 and absolute == 0:
        errors.append("minCandidateNodesPercentage: Invalid value: 0: both minCandidateNodesPercentage and "
                      "minCandidateNodesAbsolute cannot be zero")
    if errors:
        raise PreemptionArgsError("; ".join(errors))
    return int(pct), int(absolute)


def pod_terminating_by_preemption(p: Pod) -> bool:
    """Terminating with a DisruptionTarget=True condition whose reason is PreemptionByScheduler."""
    if p.deletion_timestamp is None:
        return False
    for c in p.conditions:
        if c.get("type") == DISRUPTION_TARGET:
            return c.get("status") == "True" and c.get("reason") == PREEMPTION_BY_SCHEDULER
    return False


class DefaultPreemption(PostFilterPlugin, PreEnqueuePlugin, EnqueueExtensions, ExplainedPostFilter):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute = validate_args(self.args)
        h: Any = handle
        rng = getattr(h, "rng", None)
        self.rng: random.Random = rng if isinstance(rng, random.Random) else random.Random(0)
        gates = getattr(h, "feature_gates", None) or {}
        self.enable_async_preemption = bool(gates.get(ASYNC_PREEMPTION_GATE, True))
        self.executor = Executor(h)
        self.evaluator = Evaluator(NAME, h, self, self.executor, self.enable_async_preemption)
        # Default: no filtering beyond "lower priority than the preemptor".
        self.is_eligible_pod: IsEligiblePodFunc = lambda node_info, victim, preemptor: True
        # Default: higher priority, then longer running, is more important.
        self.more_important_pod: MoreImportantPodFunc = lambda a, b: more_important_pod(a, b, self._now())
        self._default_importance = self.more_important_pod
        informers = getattr(h, "informers", None)
        if informers is not None:
            # Upstream takes its Pod and PDB listers at construction, so they sync with the rest.
            informers.informer("Pod")
            informers.informer("PodDisruptionBudget")

    def _now(self) -> float:
        clock = getattr(self.handle, "clock", None)
        return clock.now() if clock is not None else time.time()

    @property
    def last_decision(self) -> PreemptionDecision | None:
        """The candidates, victims and chosen node of the last PostFilter call (for ``--explain``)."""
        return self.evaluator.last_decision

    def set_async_preemption(self, enabled: bool) -> None:
        self.enable_async_preemption = enabled
        self.evaluator.enable_async_preemption = enabled

    # ---------------------------------------------------------------- PostFilter

    def post_filter(self, state: CycleState, pod: Pod,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        metrics = getattr(self.handle, "metrics", None)
        attempts = getattr(metrics, "preemption_attempts", None)
        if attempts is not None:
            attempts.inc()
        result, st = self.evaluator.preempt(state, pod, diagnosis)
        msg = st.message() if st is not None else ""
        if msg:
            assert st is not None
            return result, Status(st.code, "preemption: " + msg, plugin=NAME, error=st.error)
        return result, st

    # ---------------------------------------------------------------- PreEnqueue / events

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not self.enable_async_preemption:
            return None
        if self.executor.is_pod_running_preemption(pod.uid or pod.key):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_WAITING, plugin=NAME)
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        if not self.enable_async_preemption:
            # PreEnqueue never rejects then.
            return []
        # Lets a pod gated here be looked at again after pod deletions; the decision to requeue
        # belongs to the plugins that rejected it in its last attempt, so this hint says Skip.
        return [ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"),
                                     self._after_assigned_pod_delete)]

    @staticmethod
    def _after_assigned_pod_delete(pod: Pod, old: Any, new: Any) -> QueueingHint:
        return QueueingHint.QUEUE_SKIP

    # ---------------------------------------------------------------- the preemption Interface

    def calculate_num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self.min_candidate_nodes_percentage // 100
        if n < self.min_candidate_nodes_absolute:
            n = self.min_candidate_nodes_absolute
        if n > num_nodes:
            n = num_nodes
        return n

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        offset = self.rng.randrange(num_nodes) if num_nodes > 0 else 0
        return offset, self.calculate_num_candidates(num_nodes)

    def candidates_to_victims_map(self, candidates: Sequence[Candidate]) -> dict[str, Victims]:
        return {c.name: c.victims for c in candidates}

    def ordered_score_funcs(self, nodes_to_victims: dict[str, Victims]) -> list[Callable[[str], int]] | None:
        return None

    def is_preemption_allowed(self, node_info: NodeInfo, victim: PodInfo, preemptor: Pod) -> bool:
        return victim.pod.priority < preemptor.priority and self.is_eligible_pod(node_info, victim, preemptor)

    def pod_eligible_to_preempt_others(self, pod: Pod, nominated_node_status: Status | None) -> tuple[bool, str]:
        """Not eligible with preemptionPolicy Never, or while a lower-priority pod on its
        nominated node is terminating because of preemption (unless that node is now
        UnschedulableAndUnresolvable for it)."""
        if pod.preemption_policy == "Never":
            return False, MSG_NEVER
        nom = pod.nominated_node_name
        if nom:
            if nominated_node_status is not None and nominated_node_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            ni = self.handle.snapshot.get(nom) if self.handle is not None else None
            if ni is not None:
                for pi in ni.pods:
                    if self.is_preemption_allowed(ni, pi, pod) and pod_terminating_by_preemption(pi.pod):
                        return False, MSG_TERMINATING
        return True, ""

    def select_victims_on_node(self, state: CycleState, pod: Pod, node_info: NodeInfo,
                               pdbs: Sequence[PodDisruptionBudget]) -> tuple[list[Pod], int, Status | None]:
        """The fewest pods to remove from ``node_info`` (a copy, as is ``state``) for ``pod`` to
        fit, most important first, and how many of them violate a PDB."""
        h: Any = self.handle

        def remove(pi: PodInfo) -> Status | None:
            if node_info.remove_pod(pi.pod) is None:
                return Status.as_error(f"no corresponding pod {pi.pod.name} in pods of node {node_info.name}")
            return h.run_pre_filter_extension_remove_pod(state, pod, pi, node_info)

        def add(pi: PodInfo) -> Status | None:
            node_info.add_pod(pi)
            return h.run_pre_filter_extension_add_pod(state, pod, pi, node_info)

        # Remove every pod that may be preempted, and see whether the pod fits without them.
        potential = [pi for pi in node_info.pods if self.is_preemption_allowed(node_info, pi, pod)]
        for pi in potential:
            st = remove(pi)
            if st is not None and st.code != Code.SUCCESS:
                return [], 0, _as_error(st)
        if not potential:
            return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_NO_VICTIMS)
        # Affinity of the preemptor to a victim is not considered, as upstream.
        st = h.run_filter_plugins_with_nominated_pods(state, pod, node_info)
        if st is not None and st.code != Code.SUCCESS:
            return [], 0, st

        self._sort_by_importance(potential)
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []

        def reprieve(pi: PodInfo) -> tuple[bool, Status | None]:
            st = add(pi)
            if st is not None and st.code != Code.SUCCESS:
                return False, _as_error(st)
            fits_st = h.run_filter_plugins_with_nominated_pods(state, pod, node_info)
            fits = fits_st is None or fits_st.code == Code.SUCCESS
            if not fits:
                st = remove(pi)
                if st is not None and st.code != Code.SUCCESS:
                    return False, _as_error(st)
                victims.append(pi)
            return fits, None

        num_violating = 0
        for pi in violating:
            fits, err = reprieve(pi)
            if err is not None:
                return [], 0, err
            if not fits:
                num_violating += 1
        for pi in non_violating:
            _, err = reprieve(pi)
            if err is not None:
                return [], 0, err
        if violating and non_violating:
            self._sort_by_importance(victims)
        return [pi.pod for pi in victims], num_violating, None

    def _sort_by_importance(self, infos: list[PodInfo]) -> None:
        """Most important first. The default order is a key sort (higher priority, then earlier
        start); a replaced ``more_important_pod`` is used as a comparison."""
        if self.more_important_pod is not self._default_importance:
            sort_by_importance(infos, self.more_important_pod, lambda pi: pi.pod)
            return
        now = self._now()
        infos.sort(key=lambda pi: (-pi.pod.priority, pod_start_time(pi.pod, now)))


def _as_error(st: Status) -> Status:
    if st.code == Code.ERROR:
        return st
    return Status(Code.ERROR, *st.reasons, plugin=st.plugin, error=st.error)
