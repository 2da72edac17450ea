"""PodTopologySpread's PreScore, Score and NormalizeScore (upstream's
``pkg/scheduler/framework/plugins/podtopologyspread/scoring.go``).

PreScore gathers the pod's soft (``ScheduleAnyway``) constraints, or the cluster default
constraints when the pod has none, and returns Skip when there are none. The raw score is
``round(sum_c(count_c * ln(size_c + 2) + maxSkew_c - 1))`` (``topology_normalizing_weight``),
counting hostname constraints per node and the others per domain of the candidate nodes. Nodes
missing a topology key are ignored (score 0) unless the constraints come from system
defaulting. NormalizeScore gives ``100 * (max + min - s) / max`` (100 for all when
``max == 0``). ``score_nodes`` gives the same raw scores for many rows at once, gathering the
per-domain counts by row.

Fast paths, each behind a module flag with its reference kept: ``KEYED_CANDIDATES`` (no
ignored-candidate masks when every node carries the keys), ``DOMAIN_NORMALIZE`` (one
domain-scoped constraint normalized per domain on the array Score returned) and
``FUSED_PRESCORE`` (a few domains' counts, terms and rounded terms in one Python pass) and
``CANDIDATE_DOMAINS`` (Score takes the candidates' domain ids PreScore gathered).

``_Scoring`` holds these extension points; the plugin class (``plugin.py``) mixes it in, as
upstream's methods of ``*PodTopologySpread`` in this file.

Divergences from upstream, knowingly:

- Score sums each constraint's term in constraint order in float64 as upstream does; Go may
  fuse a multiply-add on some CPUs (arm64), NumPy does not, so a raw score sitting exactly on a
  rounding boundary could differ by one there.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ksched.api.pod import Pod
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState, StateData
from ksched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    NodeList,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
    VectorizedScore,
)
from ksched.scheduler.framework.reduce import any_1d, max_1d, min_1d
from ksched.scheduler.framework.status import Status
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.podtopologyspread._index import (
    _domain_index,
    _domain_rows,
    _eligible_domains,
    _fit,
    _gather,
    _RowCache,
)
from ksched.scheduler.plugins.podtopologyspread.common import (
    NAME,
    SCHEDULE_ANYWAY,
    _Constraint,
    _count_matching,
)

__all__ = ["CANDIDATE_DOMAINS", "DOMAIN_NORMALIZE", "FUSED_PRESCORE", "KEYED_CANDIDATES", "PRE_SCORE_STATE_KEY", "topology_normalizing_weight"]

PRE_SCORE_STATE_KEY = "PreScore" + NAME

# PreScore for a pod with constraints of its own when every node carries every topology key
# (``_RowCache.all_keyed``, kept until the nodes change): no candidate is ignored, so the masks
# of ignored candidates (a comparison per constraint over the candidates, a reduction, a
# negation) are not built and the hostname constraints' domains not gathered; False: the masks
# on every cycle (the reference, tests/scheduler/plugins/podtopologyspread/
# test_podtopologyspread_domain_normalize.py).
KEYED_CANDIDATES = True

# NormalizeScore of one domain-scoped constraint over a few domains (a zone spread) when the
# scores are the very array Score returned for PreScore's candidates (no node ignored, the nodes
# unchanged since PreScore): each score is the rounded score of the node's domain, and the
# domains among the candidates are the seeded ones, so the minimum, the maximum and the
# normalized score are worked out per domain on Python ints and gathered by row with the domain
# ids Score gathered, instead of two reductions and three array operations over the candidates;
# False: over the scores (the reference, the same test module).
DOMAIN_NORMALIZE = True

# DOMAIN_NORMALIZE works on Python ints up to this many domains.
_DOMAIN_NORMALIZE_MAX = 32

# PreScore of a domain-scoped constraint over at most ``_FUSED_MAX`` domains (zones): the seeded
# counts, the score terms and (one constraint) their rounded values in one pass over Python
# lists, each turned into its array once, instead of ``np.where`` for the counts and then
# ``_terms`` and ``_round_half_away`` each converting to lists and back (NumPy's per-call
# overhead is most of the cost at this size). The floats are the same two roundings per term;
# False: ``np.where`` + ``_terms`` + ``_round_half_away`` (the reference,
# tests/scheduler/plugins/podtopologyspread/test_podtopologyspread_fused_prescore.py).
FUSED_PRESCORE = True
_FUSED_MAX = 32

# Score of one domain-scoped constraint on PreScore's candidates (the DOMAIN_NORMALIZE case)
# takes the candidates' domain ids PreScore gathered (``_PreScoreState.candidates``) instead of
# gathering them again from the same rows of the same nodes; False: gathered again (the
# reference, tests/scheduler/plugins/podtopologyspread/test_podtopologyspread_fused_prescore.py).
CANDIDATE_DOMAINS = True


class _PreScoreState(StateData):
    """Per soft constraint: normalizing weight, and for non-hostname constraints the matching
    pods per seeded domain (-1: not a domain of any candidate) with each domain's score term
    ``count * weight + maxSkew - 1`` (0.0 at id 0, a node without the label). Hostname
    constraints are counted per node in Score. Nodes to ignore, by row and by name."""

    __slots__ = ("any_ignored", "candidates", "constraints", "counts", "ignored_names", "ignored_rows", "namespace",
                 "rounded", "scored", "terms", "weights")

    def __init__(self, constraints: tuple[_Constraint, ...], counts: list[np.ndarray | None], weights: list[float],
                 ignored_rows: np.ndarray, ignored_names: set[str], namespace: str,
                 fused: list[tuple[np.ndarray, np.ndarray | None] | None] | None = None) -> None:
        self.constraints = constraints
        self.counts = counts
        self.weights = weights
        self.ignored_rows = ignored_rows
        self.ignored_names = ignored_names
        self.any_ignored = bool(ignored_names)
        self.namespace = namespace
        self.terms: list[np.ndarray | None] = []
        # One domain-scoped constraint: the rounded score is a function of the domain alone.
        self.rounded: np.ndarray | None = None
        for i, (c, cnt, w) in enumerate(zip(constraints, counts, weights, strict=True)):
            done = fused[i] if fused is not None else None
            if done is not None:  # FUSED_PRESCORE: worked out with the counts (``_fused_terms``)
                self.terms.append(done[0])
                if len(constraints) == 1:
                    self.rounded = done[1]
                continue
            if cnt is None:
                self.terms.append(None)
                continue
            self.terms.append(_terms(cnt, w, float(c.max_skew - 1)))
        if len(constraints) == 1 and self.terms[0] is not None and self.rounded is None:
            self.rounded = _round_half_away(self.terms[0])
        # DOMAIN_NORMALIZE: (candidate rows, id of the snapshot, its nodes_generation, their
        # domain ids) when the seeded domains are exactly the candidates' domains (set by
        # PreScore), and Score's (rows, domain ids by row, scores returned) for them.
        self.candidates: tuple[np.ndarray, int, int, np.ndarray] | None = None
        self.scored: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def domain_counts(self, i: int) -> dict[str, int]:
        """Seeded domain value -> matching pods (upstream's TopologyValueToPodCounts[i])."""
        counts = self.counts[i]
        if counts is None:
            return {}
        idx = _domain_index(self.constraints[i].topology_key)
        return {idx.values[d]: int(counts[d]) for d in np.flatnonzero(counts >= 0).tolist()}  # type: ignore[misc]


def _terms(counts: np.ndarray, weight: float, skew: float) -> np.ndarray:
    """``max(count, 0) * weight + skew`` per domain id, 0.0 at id 0. A few domains (zones) are
    worked out on Python floats, which are float64 with the same two roundings as NumPy's
    (``_terms_numpy``, the reference); NumPy's per-call overhead is most of the cost there."""
    if len(counts) > 32:
        return _terms_numpy(counts, weight, skew)
    out = [float(max(n, 0)) * weight + skew for n in counts.tolist()]
    out[0] = 0.0
    return np.array(out, dtype=np.float64)


def _fused_terms(sums: list[int], seeded: list[bool], weight: float, skew: float,
                 rounded: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """FUSED_PRESCORE: from the per-domain sums and which domains are seeded, the counts
    (``np.where(seeded, sums, -1)``), their terms (``_terms``) and, when ``rounded``, the terms
    rounded (``_round_half_away``), in one pass. Same float operations as ``_terms``."""
    cnt: list[int] = []
    terms: list[float] = []
    rnd: list[int] = []
    floor = math.floor
    for n, k in zip(sums, seeded, strict=True):
        if k:
            cnt.append(n)
            t = float(n if n > 0 else 0) * weight + skew
        else:
            cnt.append(-1)
            t = 0.0 * weight + skew
        terms.append(t)
        if rounded:
            f = floor(t)
            rnd.append(f + 1 if t - f >= 0.5 else f)
    terms[0] = 0.0
    if rounded:
        rnd[0] = 0
    return (np.array(cnt, dtype=np.int64), np.array(terms, dtype=np.float64),
            np.array(rnd, dtype=np.int64) if rounded else None)


def _terms_numpy(counts: np.ndarray, weight: float, skew: float) -> np.ndarray:
    t = np.maximum(counts, 0).astype(np.float64) * weight + skew
    t[0] = 0.0
    return t


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """Go's math.Round for non-negative values, exactly."""
    if len(x) <= 32:
        return np.array([_go_round(v) for v in x.tolist()], dtype=np.int64)
    f = np.floor(x)
    return (f + (x - f >= 0.5)).astype(np.int64)


def _go_round(x: float) -> int:
    f = math.floor(x)
    return int(f + 1) if x - f >= 0.5 else int(f)


_NONE_IGNORED = np.zeros(0, dtype=bool)


def _none_ignored(n: int) -> np.ndarray:
    """An all-False array of ``n`` rows, shared and read-only (``_PreScoreState.ignored_rows``
    when no node is ignored: read, never written)."""
    global _NONE_IGNORED
    if len(_NONE_IGNORED) != n:
        a = np.zeros(n, dtype=bool)
        a.flags.writeable = False
        _NONE_IGNORED = a
    return _NONE_IGNORED


def topology_normalizing_weight(size: int) -> float:
    """ln(size + 2): counts of smaller topologies are not watered down by bigger ones."""
    return math.log(size + 2)


class _Scoring(PreScorePlugin, ScorePlugin, VectorizedScore, ScoreExtensions):
    """PreScore, Score and NormalizeScore of ``PodTopologySpread``, which provides the attributes
    declared here."""

    system_defaulted: bool
    _rows: _RowCache
    get_constraints: Callable[[Pod, str], tuple[_Constraint, ...]]
    _snapshot: Callable[[], Snapshot | None]

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        snapshot = self._snapshot()
        if snapshot is None:
            return Status.as_error("PodTopologySpread needs the framework's snapshot", self.name)
        if snapshot.num_nodes == 0:
            return Status.skip()
        constraints = self.get_constraints(pod, SCHEDULE_ANYWAY)
        if not constraints:
            return Status.skip()
        # Nodes must carry every topology key unless the constraints come from system
        # defaulting (a node without a zone label still gets hostname spreading; its missing
        # label reads as the value "").
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        required = tuple(sorted({c.topology_key for c in constraints})) if require_all else ()
        frows = nodes.rows
        keyed = KEYED_CANDIDATES and require_all and self._rows.all_keyed(snapshot, required)
        if keyed:
            # Every node carries every key: no candidate is ignored; the hostname constraints'
            # domains are not read here.
            doms_f: list[np.ndarray | None] = [
                None if c.is_hostname else _domain_rows(snapshot, c.topology_key)[frows] for c in constraints]
            any_ignored = False
            kept = ignored_f = _NONE_IGNORED
            n_kept = len(frows)
        else:
            doms_f = [_domain_rows(snapshot, c.topology_key)[frows] for c in constraints]
            if require_all:
                ignored_f = doms_f[0] == 0  # type: ignore[operator]
                for d in doms_f[1:]:
                    ignored_f |= d == 0  # type: ignore[operator]
            else:
                ignored_f = np.zeros(len(frows), dtype=bool)
            any_ignored = bool(any_1d(ignored_f))
            kept = ~ignored_f
            n_kept = int(np.count_nonzero(kept)) if any_ignored else len(frows)
        counts: list[np.ndarray | None] = []
        weights: list[float] = []
        fused: list[tuple[np.ndarray, np.ndarray | None] | None] | None = [] if FUSED_PRESCORE else None
        for c, df in zip(constraints, doms_f, strict=True):
            if c.is_hostname:
                # Counted per node in Score; the domains are the candidate nodes.
                counts.append(None)
                weights.append(topology_normalizing_weight(n_kept))
                if fused is not None:
                    fused.append(None)
                continue
            rkey, row_dom = _eligible_domains(snapshot, pod, c, required, not require_all)
            size = len(_domain_index(c.topology_key))
            assert df is not None
            seeded_ids = df[kept] if any_ignored else df  # (df itself: not modified below)
            if not require_all:
                seeded_ids = np.where(seeded_ids == 0, _domain_index(c.topology_key).id_of(""), seeded_ids)
            seeded = np.zeros(size, dtype=bool)
            seeded[seeded_ids] = True
            # Matching pods of all nodes, in the domains of the candidates only.
            ds = self._rows.domain_sums(snapshot, pod.namespace, c.selector, rkey, row_dom, size)
            if fused is not None and size <= _FUSED_MAX:
                seeded_l = seeded.tolist()
                w = topology_normalizing_weight(seeded_l.count(True))
                weights.append(w)
                cnt, terms, rnd = _fused_terms(_fit(ds.sums, size)[:size].tolist(), seeded_l, w,
                                               float(c.max_skew - 1), len(constraints) == 1)
                counts.append(cnt)
                fused.append((terms, rnd))
                continue
            weights.append(topology_normalizing_weight(int(np.count_nonzero(seeded))))
            counts.append(np.where(seeded, _fit(ds.sums, size)[:size], -1))
            if fused is not None:
                fused.append(None)
        if any_ignored:
            ignored_rows = np.zeros(len(snapshot.infos), dtype=bool)
            ignored_rows[frows[ignored_f]] = True
            infos = snapshot.infos
            ignored_names = {infos[r].name for r in frows[ignored_f].tolist()}  # type: ignore[union-attr]
        else:
            # Every candidate carries the keys (the usual case): one shared all-False array.
            ignored_rows = _none_ignored(len(snapshot.infos))
            ignored_names = set()
        ps = _PreScoreState(constraints, counts, weights, ignored_rows, ignored_names, pod.namespace, fused)
        if require_all and not any_ignored and ps.rounded is not None:
            # The seeded domains are the candidates' domains (DOMAIN_NORMALIZE).
            assert doms_f[0] is not None  # (one constraint, not a hostname one: ``rounded``)
            ps.candidates = (frows, id(snapshot), snapshot.nodes_generation, doms_f[0])
        state.write(PRE_SCORE_STATE_KEY, ps)
        return None

    def _pre_score_state(self, state: CycleState) -> _PreScoreState | Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return Status.as_error(f'error reading "{PRE_SCORE_STATE_KEY}" from cycleState: not found', self.name)
        return s

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        s = self._pre_score_state(state)
        if isinstance(s, Status):
            return 0, s
        node = node_info.node
        if node is None:
            return 0, Status.as_error("node not found", self.name)
        if node.name in s.ignored_names:
            return 0, None
        labels = node.labels
        total = 0.0
        for i, c in enumerate(s.constraints):
            v = labels.get(c.topology_key)
            if v is None:
                continue
            if c.is_hostname:
                cnt = _count_matching(node_info.pods, c.selector, pod.namespace)
            else:
                counts = s.counts[i]
                assert counts is not None
                d = _domain_index(c.topology_key).ids.get(v)
                cnt = max(int(counts[d]), 0) if d is not None and d < len(counts) else 0
            total += float(cnt) * s.weights[i] + float(c.max_skew - 1)
        return _go_round(total), None

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        s = self._pre_score_state(state)
        if isinstance(s, Status):
            raise RuntimeError(s.message())
        constraints = s.constraints
        if s.rounded is not None:
            cand = s.candidates
            same = (cand is not None and rows is cand[0] and id(snapshot) == cand[1]
                    and snapshot.nodes_generation == cand[2])
            if same and CANDIDATE_DOMAINS:
                d = cand[3]  # type: ignore[index]
            else:
                d = _domain_rows(snapshot, constraints[0].topology_key)[rows]
            out = _gather(s.rounded, d)
            if same:
                s.scored = (rows, d, out)
        else:
            # Summed in constraint order, as upstream adds each term to the node's float score.
            total = np.zeros(len(rows), dtype=np.float64)
            for i, c in enumerate(constraints):
                d = _domain_rows(snapshot, c.topology_key)[rows]
                terms = s.terms[i]
                if terms is not None:
                    total += _gather(terms, d)
                    continue
                cnt = self._rows.counts(snapshot, s.namespace, c.selector)[rows]
                total += np.where(d != 0, cnt.astype(np.float64) * s.weights[i] + float(c.max_skew - 1), 0.0)
            out = _round_half_away(total)
        if s.any_ignored:
            out[s.ignored_rows[rows]] = 0
        return out

    def normalize_score(self, state: CycleState, pod: Pod, nodes: NodeList, scores: np.ndarray) -> Status | None:
        s = self._pre_score_state(state)
        if isinstance(s, Status):
            return s
        if len(scores) == 0:
            return None
        scored = s.scored
        if (DOMAIN_NORMALIZE and scored is not None and scored[2] is scores and scored[0] is nodes.rows
                and s.rounded is not None and len(s.rounded) <= _DOMAIN_NORMALIZE_MAX):
            # ``scores`` is Score's ``rounded[d]`` over PreScore's candidates, whose domains are the
            # seeded ones (``counts >= 0``): the same minimum, maximum and quotients per domain.
            rounded = s.rounded.tolist()
            assert s.counts[0] is not None
            vals = [v for v, c in zip(rounded, s.counts[0].tolist(), strict=True) if c >= 0]
            min_score = min(vals)
            max_score = max(max(vals), 0)
            if max_score == 0:
                scores[:] = MAX_NODE_SCORE
            else:
                table = [MAX_NODE_SCORE * (max_score + min_score - v) // max_score for v in rounded]
                scores[:] = np.array(table, dtype=np.int64)[scored[1]]
            return None
        if not s.any_ignored:
            min_score = int(min_1d(scores))
            max_score = max(int(max_1d(scores)), 0)
            if max_score == 0:
                scores[:] = MAX_NODE_SCORE
            else:
                scores[:] = MAX_NODE_SCORE * (max_score + min_score - scores) // max_score
            return None
        ignored = _gather(s.ignored_rows, nodes.rows)
        kept = ~ignored
        if any_1d(kept):
            vals = scores[kept]
            min_score = int(min_1d(vals))
            max_score = max(int(max_1d(vals)), 0)
            if max_score == 0:
                scores[kept] = MAX_NODE_SCORE
            else:
                scores[kept] = MAX_NODE_SCORE * (max_score + min_score - vals) // max_score
        scores[ignored] = 0
        return None
