"""``ksched.sim.loading.order`` returns the kind order at once when no object is another's owner
(no uid named, or no owner reference to a loaded uid): the same indices as the depth-first walk
it skips (kept here as the reference), on random objects with and without uids and owners."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.sim import loading
from ksched.sim.loading import order


def reference(raws: list[dict[str, Any]]) -> list[int]:
    """The walk for every input (what ``order`` did before its shortcuts)."""
    rank = {k: i for i, k in enumerate(loading.LOAD_ORDER)}
    other = rank["*"]
    by_rank = sorted(range(len(raws)), key=lambda i: (rank.get(loading._kind(raws[i]), other), i))
    by_uid = {u: i for i, r in enumerate(raws) if (u := loading._uid(r))}
    dependents: dict[int, list[int]] = {}
    for i in by_rank:
        for u in loading._owner_uids(raws[i]):
            j = by_uid.get(u)
            if j is not None and j != i:
                dependents.setdefault(j, []).append(i)
    out: list[int] = []
    state: dict[int, int] = {}

    def visit(i: int) -> None:
        stack = [(i, iter(dependents.get(i, ())))]
        state[i] = 1
        while stack:
            node, it = stack[-1]
            for d in it:
                if state.get(d) is None:
                    state[d] = 1
                    stack.append((d, iter(dependents.get(d, ()))))
                    break
            else:
                stack.pop()
                state[node] = 2
                out.append(node)

    for i in by_rank:
        if state.get(i) is None:
            visit(i)
    return out


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
