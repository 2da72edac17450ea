"""``ksched.sim.loading.order`` returns the kind order at once when no object is another's owner
(no uid named, or no owner reference to a loaded uid): the same indices as the depth-first walk
it skips (``shortcut=False``, the reference), on random objects with and without uids and owners."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.sim.loading import order


def reference(raws: list[dict[str, Any]]) -> list[int]:
    """The walk for every input (what ``order`` did before its shortcuts)."""
    return order(raws, shortcut=False)


_UIDS = st.sampled_from(["", "", "a", "b", "c"])


@st.composite
def objects(draw: st.DrawFn) -> dict[str, Any]:
    md: dict[str, Any] = {"name": draw(st.sampled_from(["x", "y"]))}
    uid = draw(_UIDS)
    if uid:
        md["uid"] = uid
    owners = draw(st.lists(_UIDS, max_size=2))
    if owners:
        md["ownerReferences"] = [{"uid": o} for o in owners]
    return {"kind": draw(st.sampled_from(["Pod", "ReplicaSet", "Deployment", "Node", "Namespace", "Widget"])),
            "metadata": md}


@settings(max_examples=300, deadline=None)
@given(st.lists(objects(), max_size=10))
def test_order_is_the_walks(raws: list[dict[str, Any]]) -> None:
    assert order(raws) == reference(raws)


def test_manifests_without_uids_keep_the_kind_order() -> None:
    raws = [{"kind": k, "metadata": {"name": n, "ownerReferences": [{"uid": "u"}]}}
            for k, n in (("Pod", "p"), ("Node", "n"), ("Pod", "q"), ("Namespace", "ns"))]
    assert order(raws) == reference(raws) == [3, 1, 0, 2]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({"kind": st.sampled_from(["Pod", "Node", "Namespace", "Widget", 3, ""]),
                                       "metadata": st.just({"name": "x"})}), max_size=12))
def test_the_kind_order_is_by_rank_then_input_order(raws: list[dict[str, Any]]) -> None:
    """The stable sort by rank alone (``order``) is the sort by (rank, index) it replaced."""
    from ksched.sim.loading import LOAD_ORDER

    rank = {k: i for i, k in enumerate(LOAD_ORDER)}
    want = sorted(range(len(raws)), key=lambda i: (rank.get(str(raws[i].get("kind", "")), rank["*"]), i))
    assert order(raws) == want
