"""Trace replay for GPU-sharing policies: the FGD paper's protocol, and arrivals and departures
on a virtual clock.

The engine keeps the cluster as one :class:`~ksched.scheduler.plugins.gpushare.columns.GpuColumns`
(plus pod counts) and places one pod at a time with the same policy code the scheduler plugins
run (``ksched.scheduler.plugins.gpushare``): Filter = CPU, memory and pod-count fit (the default
NodeResourcesFit) and the Open-Gpu-Share GPU fit; Score = one policy; the node with the highest
score wins; GPUs are chosen as the policy says. Per pod shape it keeps the feasibility and scores
of every node and recomputes only the nodes that changed since (what the framework's
``RowLocal`` cache does), so a run over the 1213-node openb cluster takes seconds.
``tests/sim/test_replay_vs_scheduler.py`` proves the placements equal those of the ordinary
scheduler with the same plugins on a small trace.

Protocol ``paper`` (artifact ``pkg/simulator/core.go`` ``Simulate``, ``SortClusterPods``,
``TunePodsByNodeTotalResource``), one seeded generator for every draw, in this order:

1. typical pods from the trace as given;
2. pods sorted by name, then shuffled;
3. tuned to ``tune`` x the cluster's GPU milli: below it, pods sampled with replacement from the
   name-sorted trace are appended (``<name>-tuned-<i>``) until the first draw whose *per-GPU*
   milli would pass the target (the artifact's quirk, kept); above it, random pods are removed
   until the total is at or below it;
4. node tie-break ranks from a permutation (the artifact's ``%04d-`` name prefixes: ties go to
   the lexicographically smallest name, i.e. the lowest rank);
5. each pod in turn: its GPU milli counts as arrived; it is placed or dropped (never retried);
   pods never leave.

Protocol ``timeline``: pods arrive at their ``arrival`` time and leave at their ``departure``
time on a virtual clock; a pod that fits nowhere waits and is retried (in arrival order) after
departures, until its own departure time passes. Pods without times arrive in file order, one
second apart, and never leave.

Metrics (artifact ``scripts/analysis.py``, ``merge_alloc_discrete.py``): after every pod the GPU
allocation ``used milli / GPUs / 10`` (%) against ``round(arrived milli / GPUs / 10)``; curve
column k is the mean allocation over the pods whose arrival column is k (or within +-1 when
none is). Fragmentation against the typical pods is tracked the same way.

Divergences from the artifact: NumPy's PCG64 generator replaces Go's global math/rand (the
protocol is the same, the draws are not); memory is checked by the fit filter as the artifact's
vendored NodeResourcesFit does, pod count against ``max_pods`` (1001 in the openb node list).
"""

from __future__ import annotations

import heapq
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ksched.api.gpu import MILLI
from ksched.scheduler.plugins.gpushare.columns import GpuColumns
from ksched.scheduler.plugins.gpushare.fgd import FGD
from ksched.scheduler.plugins.gpushare.frag import CompiledTypical, TypicalPods, typical_pods
from ksched.scheduler.plugins.gpushare.policies import make_policy
from ksched.scheduler.plugins.gpushare.policy import GpuPolicy
from ksched.scheduler.plugins.gpushare.shape import NodeView, PodShape, shape_of
from ksched.sim.trace import TraceNode, TracePod

__all__ = ["PROTOCOLS", "ReplayEngine", "ReplayOptions", "ReplayResult", "curve_columns", "pod_shape",
           "replay", "tune_pods"]

PROTOCOLS = ("paper", "timeline")


def pod_shape(p: TracePod) -> PodShape:
    """A trace pod as the policies see it: non-zero CPU (100m for none, as the artifact's
    GetPodResource), the real request for fit checks."""
    return shape_of(p.cpu_milli or 100, p.gpu, p.memory_mib, p.cpu_milli)


@dataclass(slots=True)
class ReplayOptions:
    policy: str = "FGD"
    seed: int = 42
    tune: float = 1.3
    protocol: str = "paper"
    shuffle: bool = True
    typical_threshold: float = 95.0
    # "rank": the artifact's (lowest seeded rank wins ties); "scheduler": ksched's selectHost
    # (a uniform draw among the tied nodes in node order from random.Random(seed)).
    tie_break: str = "rank"


@dataclass(slots=True)
class ReplayResult:
    policy: str
    seed: int
    tune: float
    protocol: str
    pods: int
    scheduled: int
    total_gpus: int
    curve: list[dict[str, float]]
    final: dict[str, float]
    seconds: float
    typical_pods: int
    placements: list[tuple[str, str, tuple[int, ...]]] = field(default_factory=list)
    timeline: list[dict[str, float]] = field(default_factory=list)
    workload: str = ""

    def to_dict(self, placements: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "policy": self.policy, "seed": self.seed, "tune": self.tune, "protocol": self.protocol,
            "workload": self.workload, "pods": self.pods, "scheduled": self.scheduled,
            "failed": self.pods - self.scheduled, "total_gpus": self.total_gpus,
            "typical_pods": self.typical_pods, "final": self.final, "curve": self.curve,
            "seconds": round(self.seconds, 3),
        }
        if self.timeline:
            d["timeline"] = self.timeline
        if placements:
            d["placements"] = [{"pod": p, "node": n, "gpus": list(g)} for p, n, g in self.placements]
        return d


def tune_pods(pods: Sequence[TracePod], capacity_milli: int, tune: float, rng: np.random.Generator,
              shuffle: bool = True) -> list[TracePod]:
    """Steps 2-3 of the paper's protocol: sort by name, shuffle, inflate (or deflate) to
    ``tune`` x ``capacity_milli`` of GPU requests."""
    by_name = sorted(pods, key=lambda p: p.name)
    out = list(by_name)
    if shuffle:
        out = [out[i] for i in rng.permutation(len(out))]
    if tune <= 0:
        return out
    target = tune * capacity_milli
    total = sum(p.gpu_total for p in out)
    if total < target:
        i = 0
        n = len(by_name)
        while True:
            p = by_name[int(rng.integers(n))]
            if total + (p.gpu.milli if p.gpu is not None else 0) > target:
                break
            out.append(p.renamed(f"{p.name}-tuned-{i}"))
            total += p.gpu_total
            i += 1
    else:
        while total > target and out:
            j = int(rng.integers(len(out)))
            total -= out[j].gpu_total
            out.pop(j)
    return out


class _ShapeEntry:
    __slots__ = ("choice", "feasible", "scores", "tick")

    def __init__(self, n: int) -> None:
        self.feasible = np.zeros(n, dtype=bool)
        self.scores = np.zeros(n, dtype=np.int64)
        self.choice: np.ndarray | None = None
        self.tick = -1


class ReplayEngine:
    """The cluster state and the placement of one pod at a time."""

    def __init__(self, nodes: Sequence[TraceNode], policy: GpuPolicy, typical: TypicalPods,
                 rng: np.random.Generator, rank: np.ndarray | None = None, tie_break: str = "rank",
                 tie_rng: random.Random | None = None) -> None:
        n = len(nodes)
        self.nodes = list(nodes)
        self.names = [x.name for x in nodes]
        self.policy = policy
        self.rng = rng
        self.rank = np.arange(n, dtype=np.int64) if rank is None else np.asarray(rank, dtype=np.int64)
        self.tie_break = tie_break
        self.tie_rng = tie_rng or random.Random(0)
        g = max((x.gpus for x in nodes), default=1) or 1
        cols = self.cols = GpuColumns(n, g)
        for r, x in enumerate(nodes):
            cols.set_row(r, NodeView(x.cpu_milli, [MILLI] * x.gpus, x.model, x.memory_mib))
        self.pods_left = np.asarray([x.max_pods for x in nodes], dtype=np.int64)
        self.cpu_cap = np.asarray([x.cpu_milli for x in nodes], dtype=np.int64)
        self.mem_cap = np.asarray([x.memory_mib for x in nodes], dtype=np.int64)
        self.total_gpus = int(cols.count.sum())
        self.typical = typical
        self.compiled = CompiledTypical(typical, g)
        self.frag = self.compiled.frag(cols.free, cols.cpu_left, cols.model, cols.models)
        self.frag_total = int(self.frag.sum())
        self.used_milli = 0
        self.gen = np.zeros(n, dtype=np.int64)
        self.tick = 0
        self._entries: dict[PodShape, _ShapeEntry] = {}
        self._all = np.arange(n, dtype=np.int64)
        self._is_fgd = isinstance(policy, FGD)
        self._bound: dict[str, tuple[int, tuple[int, ...], PodShape]] = {}

    # ---- placement ---------------------------------------------------------------------

    def _entry(self, shape: PodShape) -> _ShapeEntry:
        e = self._entries.get(shape)
        if e is None:
            e = self._entries[shape] = _ShapeEntry(len(self.names))
            rows = self._all
        elif e.tick == self.tick:
            return e
        else:
            rows = np.flatnonzero(self.gen > e.tick)
        if len(rows):
            cols = self.cols
            ok = (cols.cpu_left[rows] >= shape.cpu_request) & (cols.mem_left[rows] >= shape.mem) & \
                (self.pods_left[rows] > 0) & cols.gpu_fit(rows, shape)
            e.feasible[rows] = ok
            if self.policy.row_local:
                fr = rows[ok]
                if len(fr):
                    if self._is_fgd:
                        sc, ch = self.policy.score_and_choice_rows(  # type: ignore[attr-defined]
                            cols, fr, shape, self.frag[fr])
                        if e.choice is None:
                            e.choice = np.full(len(self.names), -1, dtype=np.int64)
                        e.choice[fr] = ch
                    else:
                        sc = self.policy.score_rows(cols, fr, shape)
                    e.scores[fr] = sc
        e.tick = self.tick
        return e

    def select(self, shape: PodShape) -> int:
        """The row the pod goes to, or -1."""
        e = self._entry(shape)
        feas = np.flatnonzero(e.feasible)
        if not len(feas):
            return -1
        if not self.policy.row_local:  # Random: a uniform draw over the feasible nodes in name order
            if len(feas) == 1:
                return int(feas[0])  # one feasible node: the scheduler skips scoring (no draw)
            ordered = feas[np.argsort(self.rank[feas], kind="stable")]
            return int(ordered[self.policy.draw(len(ordered), self.rng)])  # type: ignore[attr-defined]
        sc = e.scores[feas]
        ties = feas[sc == sc.max()]
        if len(ties) == 1:
            return int(ties[0])
        if self.tie_break == "scheduler":
            return int(ties[self.tie_rng.randrange(len(ties))])
        return int(ties[np.argmin(self.rank[ties])])

    def choose_gpus(self, row: int, shape: PodShape) -> tuple[int, ...]:
        if not shape.needs_gpu:
            return ()
        if self._is_fgd and shape.is_sharing:  # FGD and FGDPack: the GPU their score chose
            e = self._entries[shape]
            assert e.choice is not None
            return (int(e.choice[row]),)
        got = self.policy.choose(self.cols.view(row), shape, self.rng)
        assert got is not None, "a feasible node must have GPUs for the pod"
        return got

    def _apply(self, row: int, shape: PodShape, gpus: tuple[int, ...], sign: int) -> None:
        cols = self.cols
        cols.cpu_left[row] -= sign * shape.cpu_request
        cols.mem_left[row] -= sign * shape.mem
        self.pods_left[row] -= sign
        if gpus:
            for i in gpus:
                cols.free[row, i] -= sign * shape.milli
            cols.tags[row, cols.tag_index(shape.tag)] += sign
            self.used_milli += sign * shape.gpu_total
        self.tick += 1
        self.gen[row] = self.tick
        r = np.asarray([row])
        f = int(self.compiled.frag(cols.free[r], cols.cpu_left[r], cols.model[r], cols.models)[0])
        self.frag_total += f - int(self.frag[row])
        self.frag[row] = f

    def place(self, name: str, shape: PodShape) -> tuple[int, tuple[int, ...]] | None:
        row = self.select(shape)
        if row < 0:
            return None
        gpus = self.choose_gpus(row, shape)
        self._apply(row, shape, gpus, 1)
        self._bound[name] = (row, gpus, shape)
        return row, gpus

    def remove(self, name: str) -> bool:
        b = self._bound.pop(name, None)
        if b is None:
            return False
        self._apply(b[0], b[2], b[1], -1)
        return True

    # ---- metrics -----------------------------------------------------------------------

    def snapshot_metrics(self) -> dict[str, float]:
        cap = self.total_gpus * MILLI or 1
        idle = cap - self.used_milli
        frag = self.frag_total / self.compiled.weight_total
        return {
            "gpu_alloc_pct": self.used_milli / cap * 100,
            "frag_pct": frag / cap * 100,
            "frag_rate_pct": frag / idle * 100 if idle > 0 else 0.0,
            "cpu_alloc_pct": float((self.cpu_cap - self.cols.cpu_left).sum() / max(self.cpu_cap.sum(), 1) * 100),
            "mem_alloc_pct": float((self.mem_cap - self.cols.mem_left).sum() / max(self.mem_cap.sum(), 1) * 100),
        }


def curve_columns(arrived_pct: np.ndarray, values: dict[str, np.ndarray], top: int) -> list[dict[str, float]]:
    """The artifact's discrete curve: column k = mean over samples with round(arrived) == k, or
    within +-1 when there is none; columns with no sample at all are left out."""
    col = np.round(arrived_pct).astype(np.int64)
    out = []
    for k in range(0, top + 1):
        m = col == k
        if not m.any():
            m = np.abs(col - k) <= 1
            if not m.any():
                continue
        row = {"arrived_pct": float(k)}
        for name, v in values.items():
            row[name] = round(float(v[m].mean()), 4)
        out.append(row)
    return out


def replay(nodes: Sequence[TraceNode], pods: Sequence[TracePod], options: ReplayOptions,
           record_placements: bool = False, workload: str = "",
           progress: Callable[[int, int], None] | None = None) -> ReplayResult:
    """Replay ``pods`` on ``nodes`` with one policy under one protocol."""
    if options.protocol not in PROTOCOLS:
        raise ValueError(f'unknown protocol "{options.protocol}" (one of {", ".join(PROTOCOLS)})')
    t0 = time.perf_counter()
    rng = np.random.default_rng(options.seed)
    typical = typical_pods((pod_shape(p) for p in pods), options.typical_threshold)
    policy = make_policy(options.policy, typical)
    nodes = sorted(nodes, key=lambda x: x.name)
    total_gpus = sum(x.gpus for x in nodes)
    if options.protocol == "paper":
        seq = tune_pods(pods, total_gpus * MILLI, options.tune, rng, options.shuffle)
    else:
        seq = list(pods)
    rank = rng.permutation(len(nodes)) if options.protocol == "paper" else np.arange(len(nodes))
    if options.tie_break == "scheduler":
        # As ksched's scheduler with seed s: selectHost draws from random.Random(s), the Random
        # plugin (node, then GPU) from its own generator seeded with s; nodes in creation order.
        rank = np.arange(len(nodes))
        rng = np.random.default_rng(options.seed)
    engine = ReplayEngine(nodes, policy, typical, rng, rank, options.tie_break, random.Random(options.seed))
    shapes: dict[tuple[int, int, int, Any, int], PodShape] = {}

    def shape(p: TracePod) -> PodShape:
        g = p.gpu
        k = (p.cpu_milli, p.memory_mib, g.milli if g else 0, g.count if g else 0, g.models if g else None)
        s = shapes.get(k)
        if s is None:
            s = shapes[k] = pod_shape(p)
        return s

    placements: list[tuple[str, str, tuple[int, ...]]] = []
    cap = total_gpus * MILLI or 1
    n = len(seq)
    arrived = np.zeros(n)
    alloc = np.zeros(n)
    frag = np.zeros(n)
    scheduled = 0
    timeline: list[dict[str, float]] = []
    if options.protocol == "paper":
        acc = 0
        wt = engine.compiled.weight_total
        for i, p in enumerate(seq):
            acc += p.gpu_total
            got = engine.place(p.name, shape(p))
            if got is not None:
                scheduled += 1
                if record_placements:
                    placements.append((p.name, engine.names[got[0]], got[1]))
            arrived[i] = acc
            alloc[i] = engine.used_milli
            frag[i] = engine.frag_total / wt
            if progress is not None and i % 1000 == 0:
                progress(i, n)
    else:
        scheduled = _run_timeline(engine, seq, shape, arrived, alloc, frag, placements if record_placements else None,
                                  timeline)
    arrived_pct = arrived / cap * 100
    curve = curve_columns(arrived_pct, {"gpu_alloc_pct": alloc / cap * 100, "frag_pct": frag / cap * 100},
                          int(np.ceil(arrived_pct.max())) if n else 0)
    final = engine.snapshot_metrics()
    if options.protocol == "paper" and curve:
        k = round(options.tune * 100)
        at = [c for c in curve if c["arrived_pct"] == k]
        if at:
            final["gpu_alloc_pct"] = at[0]["gpu_alloc_pct"]
        final["gpu_alloc_pct_end"] = float(alloc[-1] / cap * 100) if n else 0.0
    final = {k: round(v, 4) for k, v in final.items()}
    return ReplayResult(policy.name, options.seed, options.tune, options.protocol, n, scheduled, total_gpus,
                        curve, final, time.perf_counter() - t0, len(typical.shapes), placements, timeline, workload)


def _run_timeline(engine: ReplayEngine, seq: list[TracePod], shape: Callable[[TracePod], PodShape],
                  arrived: np.ndarray, alloc: np.ndarray, frag: np.ndarray,
                  placements: list[tuple[str, str, tuple[int, ...]]] | None,
                  timeline: list[dict[str, float]]) -> int:
    """Arrivals and departures in time order; waiting pods retried after departures."""
    order = sorted(range(len(seq)), key=lambda i: (seq[i].arrival if seq[i].arrival is not None else float(i), i))
    departures: list[tuple[float, int]] = []
    waiting: list[int] = []
    scheduled = 0
    acc = 0
    wt = engine.compiled.weight_total
    cap = engine.total_gpus * MILLI or 1
    t0 = None
    sample_every = max(1, len(seq) // 400)

    def try_place(i: int, now: float) -> bool:
        nonlocal scheduled
        p = seq[i]
        got = engine.place(p.name, shape(p))
        if got is None:
            return False
        scheduled += 1
        if placements is not None:
            placements.append((p.name, engine.names[got[0]], got[1]))
        if p.departure is not None:
            heapq.heappush(departures, (p.departure, i))
        return True

    for step, i in enumerate(order):
        p = seq[i]
        now = p.arrival if p.arrival is not None else float(i)
        if t0 is None:
            t0 = now
        freed = False
        while departures and departures[0][0] <= now:
            _, j = heapq.heappop(departures)
            freed |= engine.remove(seq[j].name)
        if freed and waiting:
            still = []
            for j in waiting:
                q = seq[j]
                if q.departure is not None and q.departure <= now:
                    continue  # given up: deleted before it could run
                if not try_place(j, now):
                    still.append(j)
            waiting = still
        acc += p.gpu_total
        if not try_place(i, now):
            waiting.append(i)
        arrived[step] = acc
        alloc[step] = engine.used_milli
        frag[step] = engine.frag_total / wt
        if step % sample_every == 0 or step == len(order) - 1:
            timeline.append({"time_s": round(now - t0, 3), "gpu_alloc_pct": round(engine.used_milli / cap * 100, 4),
                             "frag_pct": round(engine.frag_total / wt / cap * 100, 4), "waiting": len(waiting)})
    return scheduled
