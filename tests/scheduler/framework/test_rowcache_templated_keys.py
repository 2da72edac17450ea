"""The row cache's combined keys kept in the pod's template dict (``rowcache.TEMPLATED_KEYS``)
against the reference (every plugin's ``row_local_key`` worked out in every cycle): the same key
for pods of every shape, also for the assumed copy of a pod (another spec.nodeName, the same
template dict) and for pods whose NodeResourcesFit key depends on the cluster's DeviceClasses
(never kept); whole simulations place every pod alike with the flag on and off."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import placements
from ksched.scheduler.framework import rowcache
from ksched.scheduler.framework.rowcache import RowResultCache
from ksched.scheduler.framework.template import template_cache
from ksched.scheduler.schedule_one import pod_with_node
from ksched.sim.simulation import Simulation
from ksched.testing import PluginRunner, make_node, make_pod

_FILTERS = ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeResourcesFit"]
_TOLERATIONS = [None, [{"key": "dedicated", "operator": "Exists"}],
                [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]]


def _plugin_lists() -> tuple[list[Any], list[tuple[Any, int]]]:
    r = PluginRunner([*_FILTERS, "NodeResourcesBalancedAllocation"], [make_node("n1")])
    fw = r.fw.plugins
    return [fw[n] for n in _FILTERS], [(fw["NodeResourcesFit"], 1), (fw["NodeResourcesBalancedAllocation"], 2)]


_requests = st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "example.com/foo"]),
                            st.sampled_from(["100m", "1", "128Mi", "2"]), max_size=3)


@settings(max_examples=60)
@given(st.lists(st.tuples(_requests, st.sampled_from(range(len(_TOLERATIONS))), st.sampled_from(["", "n1", "n2"])),
                min_size=1, max_size=6), st.sampled_from(["n1", "n3"]))
def test_kept_keys_equal_the_reference(shapes: list[tuple[dict[str, str], int, str]], host: str) -> None:
    filters, scores = _plugin_lists()
    rc = RowResultCache()
    for i, (req, tol, node) in enumerate(shapes):
        limits = {k: v for k, v in req.items() if "/" in k} or None
        pod = make_pod(f"p{i}", labels={"app": "a"}, requests=req, limits=limits,
                       tolerations=_TOLERATIONS[tol], node_name=node)
        for p in (pod, pod_with_node(pod, host)):  # the assumed copy shares the template dict
            for plugins, kind in ((filters, "combined"), (scores, "combined-score")):
                with pytest.MonkeyPatch.context() as m:
                    m.setattr(rowcache, "TEMPLATED_KEYS", False)
                    want = rc._combined_key(plugins, kind, p)
                assert rc._combined_key(plugins, kind, p) == want  # made (and maybe kept)
                assert rc._combined_key(plugins, kind, p) == want  # from the kept one, if any
                kept = any(k[:2] == ("rowcache.key", kind) for k in template_cache(p) if isinstance(k, tuple))
                core_only = all(k in ("cpu", "memory") for k in req)
                assert kept == core_only


def test_keys_are_kept_and_reused() -> None:
    filters, _ = _plugin_lists()
    rc = RowResultCache()
    calls = [0]
    orig = type(filters[3]).row_local_key

    def counting(self: Any, pod: Any) -> Any:
        calls[0] += 1
        return orig(self, pod)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(type(filters[3]), "row_local_key", counting)
        a = make_pod("a", labels={"app": "x"}, requests={"cpu": "1"})
        b = make_pod("b", labels={"app": "x"}, requests={"cpu": "1"})
        ka = rc._combined_key(filters, "combined", a)
        assert calls[0] == 1
        # Another pod of the template: the kept key, no plugin asked.
        assert rc._combined_key(filters, "combined", b) == ka and calls[0] == 1
        # Its assumed copy: the node name differs, so worked out again.
        kb = rc._combined_key(filters, "combined", pod_with_node(b, "n1"))
        assert calls[0] == 2 and kb != ka and kb[2][1] == "n1"
        # An extended resource: NodeResourcesFit's key may depend on DeviceClasses, never kept.
        g1 = make_pod("g1", labels={"app": "g"}, requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"})
        g2 = make_pod("g2", labels={"app": "g"}, requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"})
        rc._combined_key(filters, "combined", g1)
        rc._combined_key(filters, "combined", g2)
        assert calls[0] == 4


def _cluster(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(seed)
    nodes = []
    for i in range(rng.randint(3, 14)):
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.2 else None
        nodes.append(make_node(f"n{i}", cpu=rng.choice(["2", "4"]), memory="8Gi", pods=rng.choice([4, 110]),
                               taints=taints, unschedulable=rng.random() < 0.1,
                               allocatable={"nvidia.com/gpu": "2"} if rng.random() < 0.3 else None).raw)
    templates = []
    for t in range(rng.randint(2, 5)):
        req = {"cpu": rng.choice(["100m", "500m", "1"]), "memory": rng.choice(["128Mi", "1Gi"])}
        kw: dict[str, Any] = {"labels": {"app": f"t{t}"}, "requests": req,
                              "tolerations": rng.choice(_TOLERATIONS)}
        if rng.random() < 0.25:
            kw["requests"] = {**req, "nvidia.com/gpu": "1"}
            kw["limits"] = {"nvidia.com/gpu": "1"}
        if rng.random() < 0.15:
            kw["node_name"] = rng.choice(nodes)["metadata"]["name"]
        templates.append(kw)
    pods = [make_pod(f"p{i}", uid="", **rng.choice(templates)).raw for i in range(rng.randint(10, 60))]
    return nodes, pods


@pytest.mark.parametrize("seed", range(6))
def test_simulations_agree_with_the_flag_on_and_off(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, pods = _cluster(seed)
    got = []
    for flag in (True, False):
        monkeypatch.setattr(rowcache, "TEMPLATED_KEYS", flag)
        sim = Simulation(seed=seed, kubelet=False, record_events=False)
        assert not sim.load([*nodes, *pods])
        sim.run()
        got.append(placements(sim.store))
    assert got[0] == got[1]
    assert any(n for n, _ in got[0].values())
