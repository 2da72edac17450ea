"""The GPU-sharing policies as Score plugins of the framework: FGD, BestFit, DotProd,
GpuPacking, GpuClustering and Random (artifact ``pkg/simulator/plugin/*_score.go``). Each wraps
a policy of this package: ``score`` is the policy's per-node reference on the node's
:func:`~.nodestate.node_view`, ``score_nodes`` its vectorized form on the snapshot's
:class:`~.nodestate.GpuNodeTable`. All but Random are row-local (keyed by the pod's shape).

Use them with GpuShare (Filter/Reserve/Bind) and, as the paper's experiments, alone with a
large weight (1000) and the default score plugins disabled; see examples/gpu/.

FGD's args: ``typicalPods`` (a list of ``{cpu, milli, count, models, weight}``, cpu in milli),
or ``typicalPodsFrom`` (a pod trace file, openb or generic, whose pods define them), with
``typicalPodThreshold`` (95). With neither, FGD learns them from the pods it scores: the shapes
seen so far, recomputed each time their number doubles.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from typing import Any, ClassVar

import numpy as np

from ksched.api.gpu import GpuRequest, GpuSpecError
from ksched.api.pod import Pod
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import (
    NodeList,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    RowLocal,
    ScoreExtensions,
    ScorePlugin,
    VectorizedScore,
)
from ksched.scheduler.framework.status import Status
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.gpushare.bestfit import BestFit as BestFitPolicy
from ksched.scheduler.plugins.gpushare.clustering import GpuClustering as GpuClusteringPolicy
from ksched.scheduler.plugins.gpushare.dotprod import DotProd as DotProdPolicy
from ksched.scheduler.plugins.gpushare.fgd import FGD as FGDPolicy
from ksched.scheduler.plugins.gpushare.fgdpack import FGDPack as FGDPackPolicy
from ksched.scheduler.plugins.gpushare.frag import TypicalPods, typical_pods
from ksched.scheduler.plugins.gpushare.nodestate import (
    Reservations,
    node_view,
    pod_shape,
    reservations_of,
    table_of,
)
from ksched.scheduler.plugins.gpushare.packing import GpuPacking as GpuPackingPolicy
from ksched.scheduler.plugins.gpushare.plugin import CHOOSER_KEY, read_shape
from ksched.scheduler.plugins.gpushare.policy import GpuPolicy, min_max_normalize
from ksched.scheduler.plugins.gpushare.randomfit import Random as RandomPolicy
from ksched.scheduler.plugins.gpushare.selection import choose_gpus
from ksched.scheduler.plugins.gpushare.shape import NodeView, PodShape

__all__ = ["FGD", "BestFit", "FGDPack", "DotProd", "GpuClustering", "GpuPacking", "GpuScoreBase", "GpuScorePlugin", "Random"]


class GpuScoreBase(PreScorePlugin, ScorePlugin, VectorizedScore):
    """A policy as a Score plugin."""

    policy_class: ClassVar[type[GpuPolicy]]

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.policy: GpuPolicy = self.make_policy()
        self._own_reservations = Reservations()

    def make_policy(self) -> GpuPolicy:
        return self.policy_class()

    def _shape(self, state: CycleState, pod: Pod) -> PodShape:
        return read_shape(state, pod)

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        try:
            self._shape(state, pod)
        except GpuSpecError as e:
            return Status.as_error(e, self.name)
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        view = node_view(node_info, reservations_of(self.handle, self._own_reservations))
        return self.policy.score_node(view, self._shape(state, pod)), None

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        cols = table_of(snapshot).refresh(snapshot)
        return self.policy.score_rows(cols, rows, self._shape(state, pod))



class GpuScorePlugin(GpuScoreBase, RowLocal):
    """A row-local policy as a Score plugin: a node's score depends on the node and the pod's
    shape only."""

    def row_local_key(self, pod: Pod) -> Hashable:
        try:
            return pod_shape(pod)
        except GpuSpecError as e:
            return ("invalid", str(e))


class BestFit(GpuScorePlugin, ScoreExtensions):
    name = "BestFit"
    policy_class = BestFitPolicy

    def normalize_score(self, state: CycleState, pod: Pod, nodes: NodeList, scores: np.ndarray) -> Status | None:
        min_max_normalize(scores)
        return None


class DotProd(GpuScorePlugin):
    name = "DotProd"
    policy_class = DotProdPolicy


class GpuPacking(GpuScorePlugin):
    name = "GpuPacking"
    policy_class = GpuPackingPolicy


class GpuClustering(GpuScorePlugin):
    name = "GpuClustering"
    policy_class = GpuClusteringPolicy


def _typical_from_args(args: dict[str, Any]) -> TypicalPods | None:
    threshold = float(args.get("typicalPodThreshold", 95))
    if args.get("typicalPods"):
        shapes: list[PodShape] = []
        weights: list[int] = []
        for i, d in enumerate(args["typicalPods"]):
            try:
                g = GpuRequest.make(int(d.get("milli", 0)), int(d.get("count", 0)), d.get("models") or None,
                                    f"typicalPods[{i}]")
                shapes.append(PodShape(int(d.get("cpu", 0)), g.milli, g.count, g.models))
                weights.append(int(d.get("weight", 1)))
            except (TypeError, ValueError, AttributeError) as e:
                raise ValueError(f"FGD: typicalPods[{i}]: {e}") from None
        return TypicalPods(tuple(shapes), tuple(weights))
    src = args.get("typicalPodsFrom")
    if src:
        from ksched.scheduler.plugins.gpushare.tracefile import trace_shapes

        return typical_pods(trace_shapes(str(src)), threshold)
    return None


class FGD(GpuScorePlugin, PreFilterPlugin):
    """Fragmentation gradient descent; publishes its GPU choice for GpuShare's Reserve in
    PreFilter (which runs even when a single feasible node makes Score unnecessary)."""

    name = "FGD"
    policy_class = FGDPolicy

    def make_policy(self) -> GpuPolicy:
        self.threshold = float(self.args.get("typicalPodThreshold", 95))
        typ = _typical_from_args(self.args)
        self.learning = typ is None
        self._seen: Counter[PodShape] = Counter()
        self._seen_n = 0
        self._next_refresh = 1
        self.version = 0
        return FGDPolicy(typ if typ is not None else TypicalPods((), ()))

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        state.write(CHOOSER_KEY, self._choose)
        return None, None

    def _choose(self, view: NodeView, shape: PodShape) -> tuple[int, ...] | None:
        return self.policy.choose(view, shape)

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        st = super().pre_score(state, pod, nodes)
        if st is not None:
            return st
        if self.learning:
            self._observe(self._shape(state, pod))
        return None

    def _observe(self, shape: PodShape) -> None:
        self._seen[PodShape(shape.cpu, shape.milli, shape.count, shape.models)] += 1
        self._seen_n += 1
        if self._seen_n >= self._next_refresh:
            self._next_refresh *= 2
            self.policy = FGDPolicy(typical_pods(self._seen.elements(), self.threshold))
            self.version += 1

    def row_local_key(self, pod: Pod) -> Hashable:
        return (super().row_local_key(pod), self.version)


class FGDPack(FGD, ScoreExtensions):
    """Ours: FGD's score first, BestFit among its ties (min-max normalized)."""

    name = "FGDPack"

    def make_policy(self) -> GpuPolicy:
        fgd = super().make_policy()
        return FGDPackPolicy(fgd.typical)  # type: ignore[attr-defined]

    def _observe(self, shape: PodShape) -> None:
        super()._observe(shape)
        if not isinstance(self.policy, FGDPackPolicy):
            self.policy = FGDPackPolicy(self.policy.typical)  # type: ignore[attr-defined]

    def normalize_score(self, state: CycleState, pod: Pod, nodes: NodeList, scores: np.ndarray) -> Status | None:
        min_max_normalize(scores)
        return None


class Random(GpuScoreBase, PreFilterPlugin):
    """One feasible node drawn uniformly in PreScore scores 100; sharing pods get a random GPU
    (the chooser is published in PreFilter)."""

    name = "Random"
    policy_class = RandomPolicy
    _KEY = "Random/chosen"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.rng = np.random.default_rng(int(self.args.get("seed", 0)))

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        st = super().pre_score(state, pod, nodes)
        if st is not None:
            return st
        state.write(self._KEY, nodes.names[RandomPolicy.draw(len(nodes), self.rng)] if len(nodes) else "")
        return None

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        state.write(CHOOSER_KEY, self._choose)
        return None, None

    def _choose(self, view: NodeView, shape: PodShape) -> tuple[int, ...] | None:
        return choose_gpus(view.free, shape, "random", self.rng)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        return (100 if node_info.name == state.get(self._KEY) else 0), None

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        chosen = snapshot.row_of.get(state.get(self._KEY) or "", -1)
        return np.where(rows == chosen, 100, 0).astype(np.int64)
