"""Review of the per-snapshot memos behind two score shortcuts, driven through node changes the
authors' tests do not make (taints and images changed on a live node, nodes removed while pods
are still bound to them, a node removed and added again under the same name, many pods asked
between changes):

- ``TaintToleration.uniform_score``: when it answers, every node's normalized score (the
  per-node ``score`` and ``normalize_score``, the reference) equals that answer, over all nodes
  and over any subset of them (the feasible nodes of a cycle);
- ``ImageLocality.scores_zero``: when it says so, ``score`` is 0 on every node; when it does not,
  some node holds one of the pod's images."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.scheduler.cache.cache import Cache
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.plugins.imagelocality import ImageLocality, normalized_image_name
from ksched.scheduler.plugins.tainttoleration import TaintToleration
from ksched.testing import make_node, make_pod

_TAINTS = [{"key": "a", "value": "1", "effect": "PreferNoSchedule"},
           {"key": "b", "effect": "PreferNoSchedule"},
           {"key": "a", "value": "1", "effect": "NoSchedule"}]
_TOLS = [{"key": "a", "operator": "Equal", "value": "1"}, {"key": "b", "operator": "Exists",
                                                           "effect": "PreferNoSchedule"},
         {"operator": "Exists"}, {"key": "a", "operator": "Exists", "effect": "NoSchedule"}]
_IMAGES = ["img-a", "img-b:1", "reg/img-c"]
_NAMES = ["n0", "n1", "n2"]

_node_op = st.tuples(st.sampled_from(["set", "remove"]), st.sampled_from(_NAMES),
                     st.lists(st.sampled_from(range(len(_TAINTS))), unique=True, max_size=2),
                     st.lists(st.sampled_from(_IMAGES), unique=True, max_size=2))
_pod_q = st.tuples(st.just("ask"), st.lists(st.sampled_from(range(len(_TOLS))), unique=True, max_size=2),
                   st.lists(st.sampled_from([*_IMAGES, "img-d"]), min_size=1, max_size=2),
                   st.lists(st.booleans(), min_size=3, max_size=3))


def _node(name: str, taints: list[int], images: list[str], k: int) -> Any:
    n = make_node(name, taints=[_TAINTS[t] for t in taints] or None,
                  images=[([normalized_image_name(i)], 300 * 1024 * 1024) for i in images])
    n.raw["metadata"]["resourceVersion"] = str(k)
    return n


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_node_op, _pod_q), max_size=25))
def test_uniform_and_zero_answers_agree_with_scoring_node_by_node(ops: list[tuple[Any, ...]]) -> None:
    cache = Cache()
    snap = Snapshot(cache.table.cols)
    handle = SimpleNamespace(snapshot=snap)
    tt = TaintToleration(None, handle)
    il = ImageLocality(None, handle)
    live: dict[str, Any] = {}
    bound = 0
    for k, op in enumerate(ops):
        if op[0] == "set":
            new = _node(op[1], op[2], op[3], k)
            old = live.get(op[1])
            if old is None:
                cache.add_node(new)
            else:
                cache.update_node(old, new)
            live[op[1]] = new
            # A pod bound there: the NodeInfo outlives the node if the node is removed.
            bound += 1
            cache.add_pod(make_pod(f"b{bound}", uid=f"b{bound}", node_name=op[1]))
            continue
        if op[0] == "remove":
            old = live.pop(op[1], None)
            if old is not None:
                cache.remove_node(old)
            continue
        cache.update_snapshot(snap)
        infos = [ni for ni in snap.infos if ni is not None and ni.node is not None]
        if not infos:
            continue
        pod = make_pod("p", tolerations=[_TOLS[t] for t in op[1]] or None,
                       containers=[{"name": f"c{i}", "image": img} for i, img in enumerate(op[2])])
        state = CycleState()
        nodes = snap.all_nodes()
        assert tt.pre_score(state, pod, nodes) is None
        got = tt.uniform_score(state, pod)
        for subset in (infos, [ni for ni, keep in zip(infos, op[3]) if keep]):
            if not subset:
                continue
            raw = np.asarray([tt.score(state, pod, ni)[0] for ni in subset], dtype=np.int64)
            assert tt.normalize_score(state, pod, nodes, raw) is None
            if got is not None:
                assert raw.tolist() == [got] * len(subset), (got, raw.tolist())
        if got is None:
            # Declined only where some node counts an intolerable PreferNoSchedule taint.
            assert any(tt.score(state, pod, ni)[0] for ni in infos)
        zero = il.scores_zero(state, pod)
        scores = [il.score(state, pod, ni)[0] for ni in infos]
        if zero:
            assert scores == [0] * len(infos)
        else:
            held = {img for ni in infos for img in ni.image_states}
            assert any(normalized_image_name(i) in held for i in op[2])
