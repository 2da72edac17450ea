"""Topology hints and how policies merge them (``pkg/kubelet/cm/topologymanager/policy.go``,
``policy_none.go``, ``policy_best_effort.go``, ``policy_restricted.go``,
``policy_single_numa_node.go``, ``numa_info.go``).

Each hint provider answers, per resource, a list of hints (a NUMA mask and whether it is
preferred), ``None`` for no preference, or an empty list when no placement is possible. The
merge takes one hint per resource in every combination, ANDs their masks (a permutation is
preferred iff every hint in it is preferred and all masks with an affinity are equal), and
keeps the best: preferred over not preferred, then the narrowest mask (fewest NUMA nodes, then
the lower-numbered ones); among non-preferred hints, the one whose width is closest to, but not
above, the widest of the providers' narrowest hints.

* ``none``: no merge, everything admitted.
* ``best-effort``: the best hint; always admits.
* ``restricted``: the best hint; admits iff it is preferred.
* ``single-numa-node``: only "don't care" hints and preferred single-node hints take part; an
  all-nodes result becomes "no affinity"; admits iff preferred.

Divergences: the alpha options (``prefer-closest-numa-nodes``, NUMA allocation strategies and
score weights) are not implemented; resources are merged in the order of their names (upstream
iterates a Go map).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Protocol

from ksched.kubelet.cm.topologymanager import bitmask

__all__ = [
    "POLICIES",
    "AffinityStore",
    "POLICY_BEST_EFFORT",
    "POLICY_NONE",
    "POLICY_RESTRICTED",
    "POLICY_SINGLE_NUMA_NODE",
    "Policy",
    "ProviderHints",
    "TopologyHint",
]

POLICY_NONE = "none"
POLICY_BEST_EFFORT = "best-effort"
POLICY_RESTRICTED = "restricted"
POLICY_SINGLE_NUMA_NODE = "single-numa-node"
POLICIES = (POLICY_NONE, POLICY_BEST_EFFORT, POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE)


@dataclass(frozen=True, slots=True)
class TopologyHint:
    """``numa_affinity`` None: no NUMA affinity (any node will do)."""

    numa_affinity: int | None = None
    preferred: bool = False

    def __str__(self) -> str:
        mask = "nil" if self.numa_affinity is None else "".join(
            "1" if self.numa_affinity >> i & 1 else "0" for i in reversed(range(max(self.numa_affinity.bit_length(), 1))))
        return f"{{{mask} {str(self.preferred).lower()}}}"


class AffinityStore(Protocol):
    """Where the hint providers read the affinity the topology manager chose for a container
    (upstream's topologymanager.Store)."""

    def get_affinity(self, pod_uid: str, container: str) -> TopologyHint: ...


# A provider's answer: resource name -> hints (None: no preference; []: impossible). A provider
# that answers None or {} has no preference for any resource.
ProviderHints = Mapping[str, Sequence[TopologyHint] | None] | None


def filter_providers_hints(providers_hints: Sequence[ProviderHints]) -> list[list[TopologyHint]]:
    out: list[list[TopologyHint]] = []
    for hints in providers_hints:
        if not hints:
            out.append([TopologyHint(None, True)])
            continue
        for resource in sorted(hints):
            h = hints[resource]
            if h is None:
                out.append([TopologyHint(None, True)])
            elif len(h) == 0:
                out.append([TopologyHint(None, False)])
            else:
                out.append(list(h))
    return out


def filter_single_numa_hints(all_hints: list[list[TopologyHint]]) -> list[list[TopologyHint]]:
    """single-numa-node keeps, per resource, the preferred hints without affinity or with one
    NUMA node."""
    return [[h for h in hints if h.preferred and (h.numa_affinity is None or bitmask.count(h.numa_affinity) == 1)]
            for hints in all_hints]


def _narrowest(hints: Sequence[TopologyHint]) -> TopologyHint | None:
    best: TopologyHint | None = None
    for h in hints:
        if h.numa_affinity is None:
            continue
        if best is None or bitmask.is_narrower_than(h.numa_affinity, best.numa_affinity):  # type: ignore[arg-type]
            best = h
    return best


def _max_of_min_affinity_counts(hints: Sequence[Sequence[TopologyHint]]) -> int:
    m = 0
    for resource_hints in hints:
        n = _narrowest(resource_hints)
        if n is not None:
            m = max(m, bitmask.count(n.numa_affinity))  # type: ignore[arg-type]
    return m


def merge_permutation(default_affinity: int, permutation: Sequence[TopologyHint]) -> TopologyHint:
    preferred = True
    merged = default_affinity
    first: int | None = None
    for h in permutation:
        if h.numa_affinity is not None:
            if first is None:
                first = h.numa_affinity
            elif h.numa_affinity != first:
                preferred = False
            merged &= h.numa_affinity
        if not h.preferred:
            preferred = False
    return TopologyHint(merged, preferred)


class HintMerger:
    def __init__(self, numa_nodes: Sequence[int], hints: list[list[TopologyHint]]) -> None:
        self.default_affinity = bitmask.mask_of(numa_nodes)
        self.hints = hints
        self.best_non_preferred = _max_of_min_affinity_counts(hints)

    @staticmethod
    def _fitter(current: TopologyHint, candidate: TopologyHint) -> TopologyHint:
        if candidate.numa_affinity == current.numa_affinity:
            return current
        a, b = current.numa_affinity or 0, candidate.numa_affinity or 0
        return current if bitmask.is_narrower_than(a, b) else candidate

    def compare(self, current: TopologyHint | None, candidate: TopologyHint) -> TopologyHint | None:
        cand_count = bitmask.count(candidate.numa_affinity or 0)
        if cand_count == 0:
            return current
        if current is None:
            return candidate
        if not current.preferred and candidate.preferred:
            return candidate
        if current.preferred and not candidate.preferred:
            return current
        if current.preferred and candidate.preferred:
            return self._fitter(current, candidate)
        best = self.best_non_preferred
        cur_count = bitmask.count(current.numa_affinity or 0)
        if cur_count > best:
            return self._fitter(current, candidate)
        if cur_count == best:
            return self._fitter(current, candidate) if cand_count == best else current
        if cand_count > best:
            return current
        if cand_count == best:
            return candidate
        return self._fitter(current, candidate)

    def merge(self) -> TopologyHint:
        best: TopologyHint | None = None
        for permutation in product(*self.hints):
            best = self.compare(best, merge_permutation(self.default_affinity, permutation))
        return best if best is not None else TopologyHint(self.default_affinity, False)


class Policy:
    """One of the four policies, for a machine with the given NUMA nodes."""

    def __init__(self, name: str, numa_nodes: Sequence[int]) -> None:
        if name not in POLICIES:
            raise ValueError(f"unknown policy: {name!r}")
        self.name = name
        self.numa_nodes = tuple(numa_nodes)

    def merge(self, providers_hints: Sequence[ProviderHints]) -> tuple[TopologyHint, bool]:
        if self.name == POLICY_NONE:
            return TopologyHint(), True
        filtered = filter_providers_hints(providers_hints)
        if self.name == POLICY_SINGLE_NUMA_NODE:
            filtered = filter_single_numa_hints(filtered)
            best = HintMerger(self.numa_nodes, filtered).merge()
            if best.numa_affinity == bitmask.mask_of(self.numa_nodes):
                best = TopologyHint(None, best.preferred)
            return best, best.preferred
        best = HintMerger(self.numa_nodes, filtered).merge()
        if self.name == POLICY_BEST_EFFORT:
            return best, True
        return best, best.preferred
