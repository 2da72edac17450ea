"""The framework runtime: one per profile. Instantiates the profile's plugins (multiPoint
expansion as upstream), and runs each extension point with upstream's contracts. Also signs
pods (upstream's ``SignPod``) and holds the profile's opportunistic batch (``batch.py``).

Fast paths: ``TEMPLATE_SKIPS`` (PreFilter and PreScore plugins whose call, for every pod of a
template, only Skips it or only writes one state value of the template are not called; see
``PreFilterPlugin``), and with it ``SKIP_STATES`` (nor are PreFilter plugins whose call only
writes a value of a kind the template decides and Skips: DynamicResources and VolumeBinding for
a plain pod).

Divergences in ``sign_pod``: a plugin that refuses a pod is asked first the next time (the
refusal decides alone, so the order is invisible), and two plugins giving one signer name
different values make the pod unsignable (upstream keeps the last)."""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ksched.api.pod import Pod
from ksched.scheduler.config import EXTENSION_POINTS, Profile
from ksched.scheduler.framework.batch import OpportunisticBatch, PodSignature
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ClusterEventWithHint
from ksched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    MAX_TOTAL_SCORE,
    MIN_NODE_SCORE,
    BindPlugin,
    EnqueueExtensions,
    FastPath,
    FilterPlugin,
    NodeList,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    RowLocal,
    ScoreExtensions,
    ScorePlugin,
    ScorePluginForm,
    SignPlugin,
    UniformScore,
    VectorizedFilter,
    VectorizedFilterStatuses,
    VectorizedScore,
    ZeroScore,
)
from ksched.scheduler.framework.rowcache import RowResultCache
from ksched.scheduler.framework.signers import SCHEDULER_NAME_SIGNER_NAME
from ksched.scheduler.framework.status import Code, Diagnosis, Status, WaitUntil
from ksched.scheduler.framework.template import template_cache
from ksched.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo
from ksched.scheduler.plugins.registry import Registry

# (Read as locals in the per-cycle loops.)
_SKIP_CODE = Code.SKIP
_SUCCESS_CODE = Code.SUCCESS
_NO_NAMES: frozenset[str] = frozenset()

# PreFilter and PreScore plugins that say, from the pod's template alone, that they would Skip
# it (``pre_filter_skips(pod)`` / ``pre_score_skips(pod)``: True only when the call would do
# nothing but return Skip) are not called: a plain pod's NodePorts, NodeAffinity and volume
# plugins. Nor are those whose call would do nothing but write one state value of the template
# and succeed (``pre_filter_template_state(pod)`` / ``pre_score_template_state(pod)``: that
# (key, value), else None): the runtime writes it in their place (NodeResourcesFit,
# BalancedAllocation, TaintToleration). False: every plugin called in every cycle (the
# reference, tests/scheduler/framework/test_runtime_template_skips.py).
TEMPLATE_SKIPS = True
# With TEMPLATE_SKIPS: nor are the PreFilter plugins called whose call would do nothing but write
# a new value (of a factory the template decides) and Skip (``pre_filter_skip_state(pod)``:
# (key, factory), else None): the runtime writes ``factory()`` in their turn and counts them
# skipped from the start. A plain pod's DynamicResources (no claims, no request a DeviceClass
# may stand for) and VolumeBinding (no claim-backed volume): about 2 us a pod. False: those two
# called (the reference, tests/scheduler/framework/test_runtime_skip_states.py).
SKIP_STATES = True
_TEMPLATE_METHODS = {"preFilter": ("pre_filter_skips", "pre_filter_template_state", "pre_filter_skip_state"),
                     "preScore": ("pre_score_skips", "pre_score_template_state", None)}
_FRAMEWORK_SERIALS = itertools.count(1)

if TYPE_CHECKING:
    from ksched.scheduler.cache.snapshot import Snapshot

__all__ = ["Framework", "FrameworkError", "WaitingPod"]

MAX_PERMIT_TIMEOUT = 15 * 60.0

_EP_TYPES: dict[str, type] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}


# Methods of the fast-path contract, and the class a plugin declares each with.
_DECLARED_BY: dict[str, type] = {
    "filter_nodes": VectorizedFilter,
    "score_nodes": VectorizedScore,
    "row_local_key": RowLocal,
    "filter_statuses": VectorizedFilterStatuses,
    "normalize_score": ScoreExtensions,
    "sign_pod": SignPlugin,
}


class FrameworkError(ValueError):
    """A profile that cannot be built (unknown plugin, double registration, bad weights)."""


class WaitingPod:
    """A pod held at Permit until every waiting plugin allows it, one rejects it, or time runs out."""

    def __init__(self, pod: Pod, deadlines: dict[str, float]) -> None:
        self.pod = pod
        self.pending = dict(deadlines)
        self.status: Status | None = None
        self.resolved = False
        self._event = threading.Event()

    def allow(self, plugin: str) -> None:
        self.pending.pop(plugin, None)
        if not self.pending and not self.resolved:
            self.resolved = True
            self._event.set()

    def reject(self, plugin: str, message: str) -> None:
        if self.resolved:
            return
        self.status = Status(Code.UNSCHEDULABLE, message, plugin=plugin)
        self.resolved = True
        self._event.set()

    def check_timeout(self, now: float) -> None:
        for plugin, deadline in list(self.pending.items()):
            if now >= deadline:
                self.reject(plugin, f"rejected due to timeout after waiting at plugin {plugin}")
                return

    def next_deadline(self) -> float | None:
        return min(self.pending.values()) if self.pending and not self.resolved else None

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)


class Framework:
    """Plugins of one profile, and the methods that run them."""

    def __init__(self, profile: Profile, registry: Registry | None = None, *, client: Any = None,
                 informers: Any = None, clock: Any = None, event_recorder: Any = None,
                 vectorize: bool = True, parallelism: int = 16,
                 percentage_of_nodes_to_score: int = 0, batching: bool = True) -> None:
        self.profile = profile
        self.profile_name = profile.scheduler_name
        self.registry = registry or Registry()
        self.client = client
        self.informers = informers
        self.clock = clock
        self.event_recorder = event_recorder
        self.vectorize = vectorize
        # OpportunisticBatching (beta, on in 1.36): False turns it off, as the feature gate.
        self.batching = batching
        self.parallelism = parallelism
        self.percentage_of_nodes_to_score = (profile.percentage_of_nodes_to_score
                                             if profile.percentage_of_nodes_to_score is not None
                                             else percentage_of_nodes_to_score)
        self._snapshot: Snapshot | None = None
        self.rng: random.Random = random.Random(0)  # the scheduler's seeded source (tie-breaks, preemption offsets)
        self.metrics: Any = None  # the scheduler's SchedulerMetrics
        self.nominator: Any = None  # set by the scheduler (the queue's nominator)
        self.pod_activator: Callable[[list[Pod]], None] | None = None
        self.waiting_pods: dict[str, WaitingPod] = {}
        # Row-local Filter verdicts and raw Scores reused across cycles (see rowcache.py).
        self.row_cache = RowResultCache()
        self._forms: dict[tuple[str, bool], Any] = {}
        # Per set of skipped plugins: the Filter plugins by form, and the Score plan (see
        # filter_plan, score_plan); a cycle's skip set is one of few.
        self._plans: dict[tuple[Any, ...], Any] = {}
        # TEMPLATE_SKIPS: this framework's name in template dicts (never reused), and per
        # (extension point, mask of skipping plugins, mask of writing ones) the steps and the
        # skipped names.
        self._serial = next(_FRAMEWORK_SERIALS)
        self._skip_plans: dict[tuple[str, int, int], tuple[list[Any], frozenset[str]]] = {}
        self._zero_scorers: list[ScorePlugin] | None = None  # the ZeroScore plugins, found on first use
        self._uniform_scorers: list[tuple[ScorePlugin, int]] | None = None  # UniformScore plugins, weights
        # The Filter walk's first-window attempts (feasible_nodes.py): [cycles to skip after the
        # latest failure, cycles still skipped].
        self.window_backoff = [0, 0]
        self.plugins: dict[str, Plugin] = {}
        self.score_weights: dict[str, int] = {}
        self.points: dict[str, list[Any]] = {ep: [] for ep in EXTENSION_POINTS}
        self._build()
        self._compute_signers()
        self.batch = OpportunisticBatch(self)

    # ---------------------------------------------------------------- construction

    def _instantiate(self, name: str) -> Plugin:
        p = self.plugins.get(name)
        if p is None:
            try:
                cls = self.registry.get(name)
            except LookupError as e:
                raise FrameworkError(str(e)) from e
            args = self.profile.plugin_config.get(name, {})
            p = cls(dict(args), self)
            for method, declared_by in _DECLARED_BY.items():
                if hasattr(p, method) and not isinstance(p, declared_by):
                    # Ignoring it would change scores or speed silently: say what is missing.
                    raise FrameworkError(f'plugin "{name}" defines {method} but does not derive from '
                                         f"{declared_by.__name__} (ksched.scheduler.framework.interface)")
            if p.name != name:
                # Referenced as module:Class (or another registry alias): the configuration's name
                # is the plugin's name everywhere (weights, statuses, events).
                p.name = name  # type: ignore[misc]
            self.plugins[name] = p
        return p

    def _build(self) -> None:
        prof = self.profile
        mp = prof.plugins["multiPoint"].enabled
        for ref in mp:
            self._instantiate(ref.name)
        for ep in EXTENSION_POINTS:
            for ref in prof.plugins[ep].enabled:
                self._instantiate(ref.name)
        mp_names = [r.name for r in mp]
        for ep in EXTENSION_POINTS:
            typ = _EP_TYPES[ep]
            ps = prof.plugins[ep]
            explicit = [r.name for r in ps.enabled]
            for n in explicit:
                if not isinstance(self.plugins[n], typ):
                    raise FrameworkError(f'plugin "{n}" does not extend {ep} plugin')
            disabled = {r.name for r in ps.disabled}
            if "*" in disabled:
                names = explicit
            else:
                override: list[str] = []
                multi: list[str] = []
                for n in mp_names:
                    if not isinstance(self.plugins[n], typ) or n in disabled:
                        continue
                    if n in explicit:
                        override.append(n)
                        continue
                    if n in multi:
                        raise FrameworkError(f'plugin "{n}" already registered as "{ep}"')
                    multi.append(n)
                names = [n for n in explicit if n in override] + multi + [n for n in explicit if n not in override]
            if len(set(names)) != len(names):
                raise FrameworkError(f"plugin registered more than once for {ep}: {names}")
            self.points[ep] = [self.plugins[n] for n in names]
            if ep == "score":
                weights = {r.name: r.weight for r in ps.enabled}
                for r in mp:
                    weights.setdefault(r.name, r.weight)
                for n in names:
                    w = weights.get(n, 0) or 1
                    self.score_weights[n] = w
        total = sum(self.score_weights.values()) * MAX_NODE_SCORE
        if total > MAX_TOTAL_SCORE:
            raise FrameworkError("total score of Score plugins could overflow")
        qs = self.points["queueSort"]
        if len(qs) != 1:
            raise FrameworkError(f"one queue sort plugin required for profile with scheduler name "
                                 f'"{self.profile_name}", got {len(qs)}')
        if not self.points["bind"]:
            raise FrameworkError(f'at least one bind plugin is needed for profile with scheduler name '
                                 f'"{self.profile_name}"')
        self.filter_plugins: list[FilterPlugin] = self.points["filter"]
        self.score_plugins: list[ScorePlugin] = self.points["score"]
        self.pre_filter_plugins: list[PreFilterPlugin] = self.points["preFilter"]

    # ---------------------------------------------------------------- signatures

    def _compute_signers(self) -> None:
        """upstream's computeBatchablePlugins: every PreFilter, Filter, PreScore and Score
        plugin must sign pods, or no pod of this profile is signed."""
        signers: list[SignPlugin] = []
        self.unsigned_plugins: list[str] = []
        seen: set[str] = set()
        for ep in ("preFilter", "filter", "preScore", "score"):
            for p in self.points[ep]:
                if p.name in seen:
                    continue
                seen.add(p.name)
                if isinstance(p, SignPlugin):
                    signers.append(p)
                else:
                    self.unsigned_plugins.append(p.name)
        self._signers = signers
        self.signatures_enabled = not self.unsigned_plugins

    def sign_pod(self, pod: Pod) -> PodSignature | None:
        """The pod's scheduling signature (upstream's SignPod): pods with equal signatures get
        the same feasibility and scores on every node in the same cluster state. None when a
        plugin cannot sign the pod (or does not sign pods at all)."""
        if not self.signatures_enabled:
            return None
        sig: dict[str, Any] = {SCHEDULER_NAME_SIGNER_NAME: pod.scheduler_name}
        signers = self._signers
        for i, p in enumerate(signers):
            fragments, st = p.sign_pod(pod)
            if st is not None and st.code != Code.SUCCESS:
                if i:
                    signers.insert(0, signers.pop(i))  # likely to refuse the next pod too
                return None
            for key, value in fragments or ():
                if key in sig and sig[key] != value:
                    return None
                sig[key] = value
        return tuple(sorted(sig.items(), key=lambda kv: kv[0]))

    # ---------------------------------------------------------------- handle

    @property
    def snapshot(self) -> Snapshot:
        assert self._snapshot is not None
        return self._snapshot

    def set_snapshot(self, snap: Snapshot) -> None:
        self._snapshot = snap

    def queue_sort(self) -> QueueSortPlugin:
        return self.points["queueSort"][0]  # type: ignore[no-any-return]

    def filter_forms(self) -> dict[str, FastPath]:
        """How each Filter plugin runs (see :class:`FastPath`)."""
        key = ("filter", self.vectorize)
        forms = self._forms.get(key)
        if forms is None:
            forms = {}
            for p in self.filter_plugins:
                if self.vectorize and isinstance(p, RowLocal):
                    forms[p.name] = FastPath.CACHED
                elif self.vectorize and isinstance(p, VectorizedFilter):
                    forms[p.name] = FastPath.VECTOR
                else:
                    forms[p.name] = FastPath.NODE
            self._forms[key] = forms
        return forms

    def score_forms(self) -> list[ScorePluginForm]:
        """How each Score plugin runs, in order."""
        key = ("score", self.vectorize)
        forms = self._forms.get(key)
        if forms is None:
            forms = []
            for p in self.score_plugins:
                norm = p.normalize_score if isinstance(p, ScoreExtensions) else None
                # Row-local raw scores are reused across cycles; a plugin that normalizes them
                # gains little from that over its own vectorized form, which it then keeps.
                if self.vectorize and isinstance(p, RowLocal) and \
                        (norm is None or not isinstance(p, VectorizedScore)):
                    form = FastPath.CACHED
                elif self.vectorize and isinstance(p, VectorizedScore):
                    form = FastPath.VECTOR
                else:
                    form = FastPath.NODE
                forms.append(ScorePluginForm(p, form, norm, self.score_weights[p.name],
                                             not type(p).__module__.startswith("ksched.scheduler.plugins.")))
            self._forms[key] = forms
        return forms  # type: ignore[no-any-return]

    def filter_plan(self, skip: set[str]) -> tuple[list[FilterPlugin], list[FilterPlugin], list[FilterPlugin],
                                                   list[FilterPlugin]]:
        """The Filter plugins not in ``skip``, in order: all of them, then those of each
        :class:`FastPath` (cached, vector, node). Shared lists: do not modify them."""
        key = ("filter", self.vectorize, frozenset(skip))
        plan = self._plans.get(key)
        if plan is None:
            forms = self.filter_forms()
            plugins = [p for p in self.filter_plugins if p.name not in skip]
            plan = self._plans[key] = (plugins,
                                       [p for p in plugins if forms[p.name] is FastPath.CACHED],
                                       [p for p in plugins if forms[p.name] is FastPath.VECTOR],
                                       [p for p in plugins if forms[p.name] is FastPath.NODE])
        return plan  # type: ignore[no-any-return]

    def score_plan(self, skip: set[str]) -> tuple[list[tuple[ScorePlugin, int]], list[ScorePluginForm],
                                                  list[ScorePluginForm]]:
        """For the Score plugins not in ``skip``: the row-local ones without NormalizeScore whose
        weighted sum the row cache keeps in one array (when there are at least two of them, else
        none), the other forms, and every form (when that array cannot be had). Shared lists:
        do not modify them."""
        key = ("score", self.vectorize, frozenset(skip))
        plan = self._plans.get(key)
        if plan is None:
            forms = [f for f in self.score_forms() if f.plugin.name not in skip]
            combined = [(f.plugin, f.weight) for f in forms
                        if f.form is FastPath.CACHED and f.normalize is None and not f.check_range]
            if len(combined) < 2:
                combined = []
            done = {p.name for p, _ in combined}
            plan = self._plans[key] = (combined, [f for f in forms if f.plugin.name not in done], forms)
        return plan  # type: ignore[no-any-return]

    def has_score_plugins(self) -> bool:
        return bool(self.score_plugins)

    def has_post_filter_plugins(self) -> bool:
        return bool(self.points["postFilter"])

    def events_to_register(self) -> dict[str, list[ClusterEventWithHint]]:
        """Plugin name -> its registered events (plugins that reject pods)."""
        out: dict[str, list[ClusterEventWithHint]] = {}
        rejecting = {p.name for ep in ("preEnqueue", "preFilter", "filter", "reserve", "permit")
                     for p in self.points[ep]}
        for name, p in self.plugins.items():
            if name not in rejecting:
                continue
            if isinstance(p, EnqueueExtensions):
                out[name] = list(p.events_to_register())
            else:
                # Plugins without EnqueueExtensions are requeued by every event (upstream's default).
                from ksched.scheduler.framework.events import ActionType, ClusterEvent, EventResource

                out[name] = [ClusterEventWithHint(ClusterEvent(EventResource.WILDCARD, ActionType.ALL))]
        return out

    # ---------------------------------------------------------------- queue-side

    def run_pre_enqueue(self, pod: Pod) -> Status | None:
        for p in self.points["preEnqueue"]:
            st = p.pre_enqueue(pod)
            if st is not None and st.code != Code.SUCCESS:
                return st.with_plugin(p.name)
        return None

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return bool(self.queue_sort().less(a, b))

    # ---------------------------------------------------------------- PreFilter

    def _template_plan(self, point: str, plugins: list[Any], pod: Pod) -> tuple[list[Any], frozenset[str],
                                                                             tuple[tuple[str, Any, bool], ...]]:
        """For ``TEMPLATE_SKIPS``: (the steps of ``point`` for this pod, in the plugins' order:
        a plugin to call, or None where a plugin's call comes down to a state write, the next of
        the writes; the names of the plugins that Skip the pod; the writes, (key, value, fresh)
        in order, ``fresh`` where the value is a factory to call). A plugin Skips when its
        ``<point>_skips(pod)`` says so, comes down to a write and a Skip (``SKIP_STATES``) when
        its ``pre_filter_skip_state(pod)`` gives (key, factory), and comes down to a write
        when its ``<point>_template_state(pod)`` gives one. Which plugins do these is kept in
        the pod's template dict as two bit masks, with the writes, under this framework's serial
        number (the dict outlives the simulation: it holds no plugin); the steps of each pair of
        masks are kept here."""
        t = template_cache(pod)
        skip_states = SKIP_STATES
        key = (point, self._serial, skip_states)
        got = t.get(key)
        if got is None:
            skips_m, state_m, skip_state_m = _TEMPLATE_METHODS[point]
            skip_mask = write_mask = 0
            writes: list[tuple[str, Any, bool]] = []
            for i, p in enumerate(plugins):
                f = getattr(p, skips_m, None)
                if f is not None and f(pod):
                    skip_mask |= 1 << i
                    continue
                if skip_states and skip_state_m is not None:
                    f = getattr(p, skip_state_m, None)
                    w = f(pod) if f is not None else None
                    if w is not None:
                        # Both bits: a write step, and the name skipped from the start.
                        skip_mask |= 1 << i
                        write_mask |= 1 << i
                        writes.append((w[0], w[1], True))
                        continue
                f = getattr(p, state_m, None)
                w = f(pod) if f is not None else None
                if w is not None:
                    write_mask |= 1 << i
                    writes.append((w[0], w[1], False))
            got = t[key] = (skip_mask, write_mask, tuple(writes))
        skip_mask, write_mask, writes_t = got
        plan = self._skip_plans.get((point, skip_mask, write_mask))
        if plan is None:
            plan = self._skip_plans[(point, skip_mask, write_mask)] = (
                [None if write_mask >> i & 1 else p for i, p in enumerate(plugins)
                 if write_mask >> i & 1 or not skip_mask >> i & 1],
                frozenset(p.name for i, p in enumerate(plugins) if skip_mask >> i & 1))
        return plan[0], plan[1], writes_t

    def _skipped_before(self, skipped: set[str], plugin: Any) -> set[str]:
        """Of a template plan's ``skipped`` names, those of the PreFilter plugins before
        ``plugin``: the skip set the reference loop had built when ``plugin`` stopped it."""
        plugins = self.pre_filter_plugins
        before = {p.name for p in plugins[:plugins.index(plugin)]}
        return {n for n in skipped if n in before}

    def run_pre_filter(self, state: CycleState, pod: Pod,
                       nodes: NodeList) -> tuple[PreFilterResult | None, Status | None, list[str]]:
        """(merged node subset, status, plugins that narrowed the nodes). As upstream, an
        Unschedulable status does not stop the other PreFilter plugins (preemption needs their
        state, k/k#119770); UnschedulableAndUnresolvable and errors do.

        ``TEMPLATE_SKIPS``: the plugins that say (``pre_filter_skips``) they Skip every pod of
        the pod's template are not called; their names are in the skip set from the start
        (cut back to those before the stopping plugin if one stops the loop, as the reference).
        Those that only write a state value of the template (``pre_filter_template_state``)
        are not called either: the value is written in their turn; nor (``SKIP_STATES``) are
        those that only write a new value and Skip (``pre_filter_skip_state``): the factory's
        value is written in their turn, and their names are skipped from the start."""
        result: PreFilterResult | None = None
        narrowing: list[str] = []
        plugins: list[Any] = self.pre_filter_plugins
        writes: tuple[tuple[str, Any, bool], ...] = ()
        if TEMPLATE_SKIPS:
            plugins, pre_skipped, writes = self._template_plan("preFilter", plugins, pod)
            skipped: set[str] = set(pre_skipped)
        else:
            pre_skipped = _NO_NAMES
            skipped = set()
        state.skip_filter_plugins = skipped
        rejected: Status | None = None
        skip, success = _SKIP_CODE, _SUCCESS_CODE
        wi = 0
        for p in plugins:
            if p is None:
                # A plugin whose PreFilter only writes this template's state (and succeeds), or
                # (SKIP_STATES) only writes a new value of the template's factory (and Skips).
                k, v, fresh = writes[wi]
                state.write(k, v() if fresh else v)
                wi += 1
                continue
            r, st = p.pre_filter(state, pod, nodes)
            if st is None:
                pass
            elif st.code == skip:
                skipped.add(p.name)
                continue
            elif st.code != success:
                st = st.with_plugin(p.name)
                if st.code == Code.UNSCHEDULABLE:
                    if rejected is None:
                        rejected = st
                    continue
                if pre_skipped:
                    state.skip_filter_plugins = self._skipped_before(skipped, p)
                if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    return None, st, []
                return None, st, []
            if r is not None and not r.all_nodes():
                narrowing.append(p.name)
                result = r if result is None else result.merge(r)
                if result.node_names is not None and not result.node_names:
                    if pre_skipped:
                        state.skip_filter_plugins = self._skipped_before(skipped, p)
                    names = sorted(narrowing)
                    msg = f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously" \
                        if len(names) > 1 else "node(s) didn't satisfy plugin " + names[0]
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg, plugin=p.name), narrowing
        if rejected is not None:
            return None, rejected, narrowing
        return result, None, narrowing

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: Pod, pod_info_to_add: PodInfo,
                                         node_info: NodeInfo) -> Status | None:
        return self._run_pre_filter_extensions("AddPod", state, pod, pod_info_to_add, node_info)

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: Pod, pod_info_to_remove: PodInfo,
                                            node_info: NodeInfo) -> Status | None:
        return self._run_pre_filter_extensions("RemovePod", state, pod, pod_info_to_remove, node_info)

    def _run_pre_filter_extensions(self, what: str, state: CycleState, pod: Pod, pod_info: PodInfo,
                                   node_info: NodeInfo) -> Status | None:
        for p in self.pre_filter_plugins:
            if p.name in state.skip_filter_plugins:
                continue
            ext = p.pre_filter_extensions()
            if ext is None:
                continue
            fn = ext.add_pod if what == "AddPod" else ext.remove_pod
            st = fn(state, pod, pod_info, node_info)
            if st is not None and st.code != Code.SUCCESS:
                return Status.as_error(f"running {what} on PreFilter plugin \"{p.name}\": {st.message()}", p.name)
        return None

    # ---------------------------------------------------------------- Filter

    def run_filter_plugins(self, state: CycleState, pod: Pod, node_info: NodeInfo,
                           plugins: list[FilterPlugin] | None = None) -> Status | None:
        """Every Filter plugin (or those of ``plugins``) on one node, in order; the first that
        rejects decides."""
        skip = state.skip_filter_plugins
        for p in self.filter_plugins if plugins is None else plugins:
            if p.name in skip:
                continue
            st = p.filter(state, pod, node_info)
            if st is not None and st.code != Code.SUCCESS:
                if st.code == Code.ERROR or st.is_rejected():
                    return st.with_plugin(p.name)
                return Status.as_error(f"plugin {p.name} returned an unexpected status {st!r}", p.name)
        return None

    def nominated_node_names(self) -> list[str]:
        """Nodes that pods are nominated to (by preemption), for the Filter pass with them."""
        nom = self.nominator
        return nom.node_names() if nom is not None else []

    def nominated_pods_to_add(self, pod: Pod, node_name: str) -> list[PodInfo]:
        nom = self.nominator
        if nom is None:
            return []
        uid = pod.uid or pod.key
        prio = pod.priority
        return [pi for pi in nom.pods_for_node(node_name)
                if (pi.pod.uid or pi.pod.key) != uid and pi.pod.priority >= prio]

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: Pod, node_info: NodeInfo,
                                               passes_without: bool = False) -> Status | None:
        """Two passes as upstream: with nominated pods of equal or higher priority added to the
        node, then (if any were added) without them; both must pass. ``passes_without``: the
        caller already knows every Filter plugin accepts the node without them."""
        nominated = self.nominated_pods_to_add(pod, node_info.name)
        if not nominated:
            return None if passes_without else self.run_filter_plugins(state, pod, node_info)
        state_with = state.clone()
        ni = node_info.clone()
        for pi in nominated:
            ni.add_pod(pi)
            st = self.run_pre_filter_extension_add_pod(state_with, pod, pi, ni)
            if st is not None:
                return st
        st = self.run_filter_plugins(state_with, pod, ni)
        if st is not None or passes_without:
            return st
        return self.run_filter_plugins(state, pod, node_info)

    # ---------------------------------------------------------------- PostFilter

    def run_post_filter(self, state: CycleState, pod: Pod,
                        diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        reasons: list[str] = []
        result: PostFilterResult | None = None
        plugin = ""
        for p in self.points["postFilter"]:
            r, st = p.post_filter(state, pod, diagnosis)
            if st is None or st.code == Code.SUCCESS:
                return r, Status(Code.SUCCESS, plugin=p.name)
            if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return r, st.with_plugin(p.name)
            if st.code != Code.UNSCHEDULABLE:
                return None, st.with_plugin(p.name)
            reasons.extend(st.reasons)
            if r is not None and r.mode != PostFilterResult.MODE_NOOP:
                result = r
            if not plugin:
                plugin = p.name  # the first failed plugin, as upstream
        return result, Status(Code.UNSCHEDULABLE, *reasons, plugin=plugin)

    # ---------------------------------------------------------------- PreScore / Score

    def run_pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        """``TEMPLATE_SKIPS``: the plugins that say (``pre_score_skips``) they Skip every pod of
        the pod's template are not called; their names are in the skip set from the start (the
        set is the cycle's only when every plugin ran, as the reference's). Those that only
        write a state value of the template (``pre_score_template_state``) are not called
        either: the value is written in their turn."""
        plugins: list[Any] = self.points["preScore"]
        writes: tuple[tuple[str, Any, bool], ...] = ()
        if TEMPLATE_SKIPS:
            plugins, pre_skipped, writes = self._template_plan("preScore", plugins, pod)
            skipped: set[str] = set(pre_skipped)
        else:
            skipped = set()
        skip, success = _SKIP_CODE, _SUCCESS_CODE
        wi = 0
        for p in plugins:
            if p is None:
                # A plugin whose PreScore only writes this template's state (and succeeds).
                k, v, _ = writes[wi]
                state.write(k, v)
                wi += 1
                continue
            st = p.pre_score(state, pod, nodes)
            if st is None:
                continue
            if st.code == skip:
                skipped.add(p.name)
                continue
            if st.code != success:
                return Status.as_error(f"running PreScore plugin \"{p.name}\": {st.message()}", p.name)
        state.skip_score_plugins = skipped
        return None

    def run_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: NodeList,
                  record: dict[str, Any] | None = None,
                  keep: list[tuple[ScorePluginForm, np.ndarray, np.ndarray]] | None = None,
                  ) -> tuple[np.ndarray, Status | None]:
        """Total weighted score per node (aligned with ``nodes``). ``record`` (if given) receives
        each plugin's raw, normalized and weighted scores; ``keep`` (if given), for each plugin
        that normalizes, its form, raw scores and weighted normalized scores (batching)."""
        n = len(nodes)
        rows = nodes.rows
        skip = state.skip_score_plugins
        if record is None:
            # Plugins that score 0 everywhere this cycle add nothing to any total (nor, kept for
            # opportunistic batching, to the next pod's: its equal signature scores 0 as well).
            zero = self._zero_scorers
            if zero is None:
                zero = self._zero_scorers = [p for p in self.score_plugins if isinstance(p, ZeroScore)]
            left_out = [p.name for p in zero
                        if p.name not in skip and p.scores_zero(state, pod)]  # type: ignore[attr-defined]
            if left_out:
                skip = skip.union(left_out)
        uniform = 0
        if record is None and keep is None and self.vectorize:
            # Plugins that give every node the same score this cycle add the same to every total:
            # added once, below, instead of scored node by node.
            same = self._uniform_scorers
            if same is None:
                same = self._uniform_scorers = [(p, self.score_weights[p.name]) for p in self.score_plugins
                                                if isinstance(p, UniformScore)]
            left_out = None
            for p, w in same:
                if p.name in skip:
                    continue
                v = p.uniform_score(state, pod)  # type: ignore[attr-defined]
                if v is not None:
                    uniform += v * w
                    left_out = [p.name] if left_out is None else [*left_out, p.name]
            if left_out:
                skip = skip.union(left_out)
        combined, rest, forms = self.score_plan(skip)
        total = None
        if record is None and combined:
            # Row-local plugins without NormalizeScore add up the same way on every cycle: one
            # array of their weighted sum, kept current as rows change.
            sums = self.row_cache.combined_scores(combined, state, pod, snapshot)
            if sums is not None:
                total = sums[rows]
                forms = rest
        if total is None:
            total = np.zeros(n, dtype=np.int64)
        for f in forms:
            p, form, norm, w, check = f
            cached = self.row_cache.raw_scores(p, state, pod, snapshot) if form is FastPath.CACHED else None
            if cached is not None:
                scores = cached[rows]
            elif form is FastPath.VECTOR or (form is FastPath.CACHED and isinstance(p, VectorizedScore)):
                scores = np.asarray(p.score_nodes(state, pod, snapshot, rows), dtype=np.int64)
            else:
                vals = []
                for ni in nodes:
                    s, st = p.score(state, pod, ni)
                    if st is not None and st.code != Code.SUCCESS:
                        return total, Status.as_error(f"running Score plugin \"{p.name}\": {st.message()}", p.name)
                    vals.append(s)
                scores = np.asarray(vals, dtype=np.int64)
            raw = scores.copy() if record is not None or (keep is not None and norm is not None) else None
            if norm is not None:
                st = norm(state, pod, nodes, scores)
                if st is not None and st.code != Code.SUCCESS:
                    return total, Status.as_error(f"running Normalize on Score plugin \"{p.name}\": {st.message()}",
                                                  p.name)
            if check and n and (scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE):
                bad = int(np.flatnonzero((scores < MIN_NODE_SCORE) | (scores > MAX_NODE_SCORE))[0])
                return total, Status.as_error(
                    f"plugin \"{p.name}\" returns an invalid score {int(scores[bad])}, it should in the range of "
                    f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing", p.name)
            total += scores * w
            if keep is not None and norm is not None:
                assert raw is not None
                keep.append((f, raw, scores * w))
            if record is not None:
                record[p.name] = (raw, scores.copy(), scores * w)
        if uniform:
            total += uniform
        return total, None

    # ---------------------------------------------------------------- Reserve / Permit

    def run_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for p in self.points["reserve"]:
            st = p.reserve(state, pod, node_name)
            if st is not None and st.code != Code.SUCCESS:
                if st.is_rejected():
                    return st.with_plugin(p.name)
                return Status.as_error(f"running Reserve plugin \"{p.name}\": {st.message()}", p.name)
        return None

    def run_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for p in reversed(self.points["reserve"]):
            p.unreserve(state, pod, node_name)

    def run_permit(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        now = self.clock.now() if self.clock is not None else 0.0
        waiting: dict[str, float] = {}
        for p in self.points["permit"]:
            st, timeout = p.permit(state, pod, node_name)
            if st is None or st.code == Code.SUCCESS:
                continue
            if st.is_rejected():
                return st.with_plugin(p.name)
            if st.code == Code.WAIT:
                waiting[p.name] = now + min(max(timeout, 0.0), MAX_PERMIT_TIMEOUT)
                continue
            return Status.as_error(f"running Permit plugin \"{p.name}\": {st.message()}", p.name)
        if waiting:
            self.waiting_pods[pod.uid or pod.key] = WaitingPod(pod, waiting)
            return Status(Code.WAIT, "one or more plugins asked to wait and no plugin rejected pod",
                          plugin=next(iter(waiting)))
        return None

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting_pods.get(uid)

    def reject_waiting_pod(self, uid: str, plugin: str = "", message: str = "removed") -> bool:
        wp = self.waiting_pods.get(uid)
        if wp is None:
            return False
        wp.reject(plugin, message)
        return True

    def wait_on_permit_result(self, pod: Pod) -> Status | None:
        """The outcome once a waiting pod is resolved (call when resolved)."""
        wp = self.waiting_pods.pop(pod.uid or pod.key, None)
        if wp is None:
            return None
        return wp.status

    def check_permit_timeouts(self, now: float) -> None:
        for wp in list(self.waiting_pods.values()):
            wp.check_timeout(now)

    def next_permit_deadline(self) -> float | None:
        ds = [d for wp in self.waiting_pods.values() if (d := wp.next_deadline()) is not None]
        return min(ds) if ds else None

    # ---------------------------------------------------------------- binding

    def run_pre_bind_pre_flights(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Success if some PreBind plugin has work to do, Skip if none has."""
        any_work = False
        skipped: set[str] = set()
        for p in self.points["preBind"]:
            st = p.pre_bind_pre_flight(state, pod, node_name)
            if st is not None and st.code == Code.SKIP:
                skipped.add(p.name)
                continue
            if st is not None and st.code != Code.SUCCESS:
                return st.with_plugin(p.name)
            any_work = True
        state.skip_pre_bind_plugins = skipped
        return None if any_work else Status.skip()

    def run_pre_bind(self, state: CycleState, pod: Pod, node_name: str, start: int = 0) -> Status | None:
        """The PreBind plugins from the ``start``-th on. A plugin's :class:`WaitUntil` is
        returned with ``resume`` set to that plugin: call again from there at ``retry_at``."""
        plugins = self.points["preBind"]
        for i in range(start, len(plugins)):
            p = plugins[i]
            if p.name in state.skip_pre_bind_plugins:
                continue
            st = p.pre_bind(state, pod, node_name)
            if isinstance(st, WaitUntil):
                st.plugin = st.plugin or p.name
                st.resume = i
                return st
            if st is not None and st.code != Code.SUCCESS:
                if st.is_rejected():
                    return st.with_plugin(p.name)
                return Status.as_error(f"running PreBind plugin \"{p.name}\": {st.message()}", p.name)
        return None

    def run_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for p in self.points["bind"]:
            st = p.bind(state, pod, node_name)
            if st is not None and st.code == Code.SKIP:
                continue
            if st is not None and st.code != Code.SUCCESS:
                if st.is_rejected():
                    return st.with_plugin(p.name)
                err = Status.as_error(f"running Bind plugin \"{p.name}\": {st.message()}", p.name)
                if st.error is not None:
                    err.error = st.error  # keep the API error (a 409 from the conflict resolver is retried)
                return err
            return None
        return Status.as_error("all bind plugins skipped")

    def run_post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for p in self.points["postBind"]:
            p.post_bind(state, pod, node_name)

    def __repr__(self) -> str:
        return f"Framework({self.profile_name}, plugins={list(self.plugins)})"
