"""The topology manager's hint merge and policies (ksched.kubelet.cm.topologymanager.policy),
with upstream's tables (``topologymanager/policy_test.go`` commonPolicyMergeTestCases and the
best-effort merge cases; restricted merges as best-effort and admits iff the hint is
preferred)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.kubelet.cm.topologymanager import bitmask
from ksched.kubelet.cm.topologymanager.policy import Policy, TopologyHint, filter_single_numa_hints

NUMA = [0, 1, 2, 3]  # upstream's policy tests run on four NUMA nodes
ALL = (0, 1, 2, 3)


def H(nodes: tuple[int, ...] | None, preferred: bool) -> TopologyHint:
    return TopologyHint(None if nodes is None else bitmask.mask_of(nodes), preferred)


T, F = True, False

# (name, providers, expected best hint); a provider is {resource: [hints] | None} or None.
COMMON: list[tuple[str, list[Any], TopologyHint]] = [
    ("Two providers, 1 hint each, same mask, both preferred 1/2",
     [{"resource1": [H((0,), T)]}, {"resource2": [H((0,), T)]}], H((0,), T)),
    ("Two providers, 1 hint each, same mask, both preferred 2/2",
     [{"resource1": [H((1,), T)]}, {"resource2": [H((1,), T)]}], H((1,), T)),
    ("Two providers, 1 no hints, 1 single hint preferred 1/2", [None, {"resource": [H((0,), T)]}], H((0,), T)),
    ("Two providers, 1 no hints, 1 single hint preferred 2/2", [None, {"resource": [H((1,), T)]}], H((1,), T)),
    ("Two providers, 1 with 2 hints, 1 with single hint matching 1/2",
     [{"resource1": [H((0,), T), H((1,), T)]}, {"resource2": [H((0,), T)]}], H((0,), T)),
    ("Two providers, 1 with 2 hints, 1 with single hint matching 2/2",
     [{"resource1": [H((0,), T), H((1,), T)]}, {"resource2": [H((1,), T)]}], H((1,), T)),
    ("Two providers, both with 2 hints, matching narrower preferred hint from both",
     [{"resource1": [H((0,), T), H((1,), T)]}, {"resource2": [H((0,), T), H((0, 1), F)]}], H((0,), T)),
    ("Ensure less narrow preferred hints are chosen over narrower non-preferred hints",
     [{"resource1": [H((1,), T), H((0, 1), F)]}, {"resource2": [H((0,), T), H((1,), T), H((0, 1), F)]}],
     H((1,), T)),
    ("Multiple resources, same provider",
     [{"resource1": [H((1,), T), H((0, 1), F)], "resource2": [H((0,), T), H((1,), T), H((0, 1), F)]}],
     H((1,), T)),
]

BEST_EFFORT: list[tuple[str, list[Any], TopologyHint]] = [
    ("Two providers, 2 hints each, same mask (some with different bits), same preferred",
     [{"resource1": [H((0, 1), T), H((0, 2), T)]}, {"resource2": [H((0, 1), T), H((0, 2), T)]}], H((0, 1), T)),
    ("TopologyHint not set", [], H(ALL, T)),
    ("HintProvider returns empty non-nil map[string][]TopologyHint", [{}], H(ALL, T)),
    ("HintProvider returns -nil map[string][]TopologyHint from provider", [{"resource": None}], H(ALL, T)),
    ("HintProvider returns empty non-nil map[string][]TopologyHint from provider", [{"resource": []}], H(ALL, F)),
    ("Single TopologyHint with Preferred as true and NUMANodeAffinity as nil",
     [{"resource": [H(None, T)]}], H(ALL, T)),
    ("Single TopologyHint with Preferred as false and NUMANodeAffinity as nil",
     [{"resource": [H(None, F)]}], H(ALL, F)),
    ("Two providers, 1 hint each, no common mask",
     [{"resource1": [H((0,), T)]}, {"resource2": [H((1,), T)]}], H(ALL, F)),
    ("Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
     [{"resource1": [H((0,), T)]}, {"resource2": [H((0,), F)]}], H((0,), F)),
    ("Two providers, 1 hint each, same mask, 1 preferred, 1 not 2/2",
     [{"resource1": [H((1,), T)]}, {"resource2": [H((1,), F)]}], H((1,), F)),
    ("Two providers, 1 hint each, 1 wider mask, both preferred 1/2",
     [{"resource1": [H((0,), T)]}, {"resource2": [H((0, 1), T)]}], H((0,), F)),
    ("Two providers, 1 with 2 hints, 1 with single non-preferred hint matching",
     [{"resource1": [H((0,), T), H((1,), T)]}, {"resource2": [H((0, 1), F)]}], H((0,), F)),
    ("Two providers, 1 hint each, 1 wider mask, both preferred 2/2",
     [{"resource1": [H((1,), T)]}, {"resource2": [H((0, 1), T)]}], H((1,), F)),
    ("bestNonPreferredAffinityCount (1)",
     [{"resource1": [H((0, 1, 2, 3), F), H((0, 1), F)]}, {"resource2": [H((0, 1), F)]}], H((0, 1), F)),
    ("bestNonPreferredAffinityCount (2)",
     [{"resource1": [H((0, 1, 2, 3), F), H((0, 1), F)]}, {"resource2": [H((0, 3), F)]}], H((0, 3), F)),
    ("bestNonPreferredAffinityCount (3)",
     [{"resource1": [H((0, 1, 2, 3), F), H((0, 1), F)]}, {"resource2": [H((1, 2), F)]}], H((1, 2), F)),
    ("bestNonPreferredAffinityCount (4)",
     [{"resource1": [H((0, 1, 2, 3), F), H((0, 1), F)]}, {"resource2": [H((2, 3), F)]}], H((2, 3), F)),
    ("bestNonPreferredAffinityCount (5)",
     [{"resource1": [H((0, 1, 2, 3), F), H((0, 1), F)]}, {"resource2": [H((1, 2), F), H((2, 3), F)]}],
     H((1, 2), F)),
    ("bestNonPreferredAffinityCount (6)",
     [{"resource1": [H((0, 1, 2, 3), F), H((0, 1), F)]},
      {"resource2": [H((1, 2, 3), F), H((1, 2), F), H((1, 3), F), H((2, 3), F)]}], H((1, 2), F)),
]


@pytest.mark.parametrize(("name", "providers", "expected"), COMMON + BEST_EFFORT, ids=[c[0] for c in COMMON + BEST_EFFORT])
def test_best_effort_merge_and_admit(name: str, providers: list[Any], expected: TopologyHint) -> None:
    hint, admit = Policy("best-effort", NUMA).merge(providers)
    assert (hint, admit) == (expected, True)


@pytest.mark.parametrize(("name", "providers", "expected"), COMMON + BEST_EFFORT, ids=[c[0] for c in COMMON + BEST_EFFORT])
def test_restricted_merges_as_best_effort_and_admits_only_preferred(name: str, providers: list[Any],
                                                                    expected: TopologyHint) -> None:
    hint, admit = Policy("restricted", NUMA).merge(providers)
    assert hint.preferred == expected.preferred and admit == expected.preferred


# upstream's singleNumaNodePolicy.mergeTestCases, on two NUMA nodes, after the common cases.
SINGLE_NUMA: list[tuple[str, list[Any], TopologyHint]] = [
    ("TopologyHint not set", [], H(None, T)),
    ("HintProvider returns empty non-nil map[string][]TopologyHint", [{}], H(None, T)),
    ("HintProvider returns -nil map[string][]TopologyHint from provider", [{"resource": None}], H(None, T)),
    ("HintProvider returns empty non-nil map[string][]TopologyHint from provider", [{"resource": []}], H(None, F)),
    ("Single TopologyHint with Preferred as true and NUMANodeAffinity as nil",
     [{"resource": [H(None, T)]}], H(None, T)),
    ("Single TopologyHint with Preferred as false and NUMANodeAffinity as nil",
     [{"resource": [H(None, F)]}], H(None, F)),
    ("Two providers, 1 hint each, no common mask",
     [{"resource1": [H((0,), T)]}, {"resource2": [H((1,), T)]}], H(None, F)),
    ("Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
     [{"resource1": [H((0,), T)]}, {"resource2": [H((0,), F)]}], H(None, F)),
    ("Two providers, 1 hint each, same mask, 1 preferred, 1 not 2/2",
     [{"resource1": [H((1,), T)]}, {"resource2": [H((1,), F)]}], H(None, F)),
    ("Two providers, 1 with 2 hints, 1 with single non-preferred hint matching",
     [{"resource1": [H((0,), T), H((1,), T)]}, {"resource2": [H((0, 1), F)]}], H(None, F)),
    ("Single NUMA hint generation",
     [{"resource1": [H((0, 1), T)], "resource2": [H((0,), T), H((1,), T), H((0, 1), F)]}], H(None, F)),
    ("One no-preference provider",
     [{"resource1": [H((0,), T), H((1,), T), H((0, 1), F)]}, None], H((0,), T)),
]
SINGLE_NUMA_ALL = [(n, p, e) for n, p, e in COMMON] + SINGLE_NUMA


@pytest.mark.parametrize(("name", "providers", "expected"), SINGLE_NUMA_ALL, ids=[c[0] for c in SINGLE_NUMA_ALL])
def test_single_numa_node_merge(name: str, providers: list[Any], expected: TopologyHint) -> None:
    assert Policy("single-numa-node", [0, 1]).merge(providers) == (expected, expected.preferred)


# upstream's TestPolicySingleNumaNodeFilterHints
FILTER = [
    ("filter empty resources", [], []),
    ("filter hints with nil socket mask 1/2", [[H(None, F)], [H(None, T)]], [[], [H(None, T)]]),
    ("filter hints with nil socket mask 2/2", [[H((0,), T), H(None, F)], [H((1,), T), H(None, T)]],
     [[H((0,), T)], [H((1,), T), H(None, T)]]),
    ("filter hints with empty resource socket mask", [[H((1,), T), H((0,), T), H(None, F)], []],
     [[H((1,), T), H((0,), T)], []]),
    ("filter hints with wide sockemask",
     [[H((0,), T), H((1,), T), H((1, 2), F), H((0, 1, 2), F), H(None, F)],
      [H((1, 2), F), H((0, 1, 2), F), H((0, 2), F), H((3,), F)],
      [H((1, 2), F), H((0, 1, 2), F), H((0, 2), F)]],
     [[H((0,), T), H((1,), T)], [], []]),
]


@pytest.mark.parametrize(("name", "hints", "expected"), FILTER, ids=[f[0] for f in FILTER])
def test_single_numa_node_filter_hints(name: str, hints: list[list[TopologyHint]],
                                       expected: list[list[TopologyHint]]) -> None:
    assert filter_single_numa_hints(hints) == expected


def test_none_admits_everything_without_affinity() -> None:
    assert Policy("none", NUMA).merge([{"cpu": []}]) == (TopologyHint(), True)


def test_bitmask_order_and_iteration() -> None:
    assert [bitmask.bits(m) for m in bitmask.iterate_bit_masks([0, 1, 2])] == [
        [0], [1], [2], [0, 1], [0, 2], [1, 2], [0, 1, 2]]
    assert bitmask.is_narrower_than(bitmask.mask_of([1]), bitmask.mask_of([0, 1]))
    assert bitmask.is_narrower_than(bitmask.mask_of([0, 1]), bitmask.mask_of([0, 2]))
    assert str(H((0, 2), T)) == "{101 true}" and str(H(None, F)) == "{nil false}"


hints_st = st.lists(st.builds(H, st.one_of(st.none(), st.frozensets(st.integers(0, 2), min_size=1).map(
    lambda s: tuple(sorted(s)))), st.booleans()), max_size=3)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.none(), st.dictionaries(st.sampled_from(["a", "b"]), st.one_of(st.none(), hints_st),
                                                       max_size=2)), max_size=3))
def test_restricted_admits_iff_some_permutation_is_preferred(providers: list[Any]) -> None:
    """Restricted admits exactly when one hint per resource can be picked that are all preferred
    and agree on one mask (with a node in it): the merge always keeps a preferred permutation
    over a non-preferred one."""
    numa = [0, 1, 2]
    _, admit = Policy("restricted", numa).merge(providers)
    from itertools import product

    from ksched.kubelet.cm.topologymanager.policy import filter_providers_hints, merge_permutation
    full = bitmask.mask_of(numa)
    exists = any(m.preferred and m.numa_affinity for m in (
        merge_permutation(full, p) for p in product(*filter_providers_hints(providers))))
    assert admit == exists
    _, be_admit = Policy("best-effort", numa).merge(providers)
    assert be_admit
