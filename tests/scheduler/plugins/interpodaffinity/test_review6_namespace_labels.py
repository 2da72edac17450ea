"""Review of InterPodAffinity's namespace labels memo (one per Namespace object the informer
holds): through random sequences of a namespace being created, relabelled, deleted (finalized)
and created again under the same name, with the informer polled at random points, the memoized
plugin's labels and Filter/Score answers equal those of a plugin that has never seen the
namespace before (the reference: labels read afresh)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.errors import ApiError
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.testing import PluginRunner, make_node, make_pod

_ZONE = "zone"
_TERM = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": _ZONE,
         "namespaceSelector": {"matchLabels": {"team": "t"}}}
_LABELS = st.sampled_from([{}, {"team": "t"}, {"team": "x"}, {"team": "t", "env": "p"}])
_ops = st.lists(st.one_of(st.tuples(st.just("create"), _LABELS), st.tuples(st.just("relabel"), _LABELS),
                          st.tuples(st.just("delete")), st.tuples(st.just("poll"))), max_size=12)


def _runner(f: InformerFactory) -> PluginRunner:
    nodes = [make_node("n1", labels={_ZONE: "z1"}), make_node("n2", labels={_ZONE: "z2"})]
    existing = [
        make_pod("anti", "b", node_name="n1", labels={"app": "y"},
                 affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_TERM]}}),
        make_pod("pref", "b", node_name="n2", labels={"app": "y"},
                 affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                     {"weight": 7, "podAffinityTerm": _TERM}]}}),
    ]
    return PluginRunner(["InterPodAffinity"], nodes, existing, informers=f)


@settings(max_examples=60, deadline=None)
@given(_ops)
def test_memoized_namespace_labels_equal_fresh_ones(ops: list[tuple[Any, ...]]) -> None:
    store = Store()
    f = InformerFactory(InProcessClient(store))
    inf = f.informer("Namespace")
    f.poll()
    memo = _runner(f)
    plugin = memo.fw.plugins["InterPodAffinity"]
    incoming = make_pod("p", "a", labels={"app": "x"})
    for op in ops:
        try:
            if op[0] == "create":
                store.create({"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": "a", "labels": dict(op[1])}})
            elif op[0] == "relabel":
                ns = store.get("Namespace", "", "a")
                store.update({**ns.raw, "metadata": {**ns.raw["metadata"], "labels": dict(op[1])}})
            elif op[0] == "delete":
                store.delete("Namespace", "", "a")
                ns = store.get("Namespace", "", "a")
                store.update({**ns.raw, "spec": {"finalizers": []}}, "finalize")
            else:
                f.poll()
        except ApiError:
            pass
        cur = inf.get("a")
        want = dict(cur.labels) if cur is not None else {}
        labels, key = plugin._namespace_labels_and_key("a")
        assert labels == want
        assert key == (frozenset(want.items()) if want else None)
        fresh = _runner(f)
        assert memo.filter(incoming) == fresh.filter(incoming)
        assert memo.score(incoming) == fresh.score(incoming)
        assert plugin.sign_pod(incoming) == fresh.fw.plugins["InterPodAffinity"].sign_pod(incoming)
