"""Property: random small clusters and random pods through the real scheduling loop never
over-commit a node (the store's conflict resolver is off, so only the scheduler protects the
nodes), the cache stays consistent with the store, and once things settle no pending pod
would fit anywhere."""

from __future__ import annotations

from typing import Any

import pytest
from core_helpers import Env, FakeFit, config, profile_cfg, slots_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ksched.api.resources import pod_requests
from ksched.scheduler.framework.types import NodeInfo
from ksched.testing import make_node, make_pod

UPSTREAM_CORE = ("PrioritySort", "SchedulingGates", "NodeUnschedulable", "NodeName", "DefaultBinder")


def _fit_available() -> bool:
    try:
        from ksched.scheduler.plugins.noderesources.fit import Fit  # noqa: F401
    except Exception:
        return False
    return True


ops = st.lists(st.one_of(
    st.tuples(st.just("node"), st.integers(1, 4), st.integers(1, 4)),          # cpu cores, pod slots
    st.tuples(st.just("pod"), st.integers(1, 20), st.integers(0, 2)),          # cpu in 100m, priority
    st.tuples(st.just("delete"), st.integers(0, 1000), st.just(0)),
    st.tuples(st.just("time"), st.integers(0, 40), st.just(0)),
    st.tuples(st.just("steps"), st.integers(1, 3), st.just(0)),
), min_size=1, max_size=40)


class Checker:
    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        if plugin == "FakeFit":
            cfg = config(profile_cfg("FakeFit", ("LabelScore", 1), core=UPSTREAM_CORE))
            from core_helpers import label_score

            self.env = Env(cfg, (FakeFit, label_score()), conflict_resolver=False)
        else:
            cfg = config(profile_cfg(("NodeResourcesFit", 1), core=UPSTREAM_CORE))
            self.env = Env(cfg, conflict_resolver=False)
        self.nodes: dict[str, Any] = {}
        self.n_pods = 0

    def capacity(self, node: Any) -> dict[str, int]:
        alloc = dict(node.allocatable)
        if self.plugin == "FakeFit":
            return {"cpu": alloc["cpu"], "pods": slots_of(NodeInfo(node))}
        return {"cpu": alloc["cpu"], "memory": alloc["memory"], "pods": alloc["pods"]}

    def apply(self, op: tuple[str, int, int]) -> None:
        env = self.env
        kind, a, b = op
        if kind == "node":
            name = f"n{len(self.nodes)}"
            node = make_node(name, cpu=str(a), memory="8Gi", pods=b, labels={"slots": str(b)})
            env.store.create(node)
            self.nodes[name] = node
        elif kind == "pod":
            self.n_pods += 1
            env.store.create(make_pod(f"p{self.n_pods}", requests={"cpu": f"{a * 100}m", "memory": "100Mi"},
                                      priority=b))
        elif kind == "delete":
            pods = env.pods()
            if pods:
                victim = pods[a % len(pods)]
                env.store.delete("Pod", victim.namespace, victim.name, grace_period_seconds=0)
        elif kind == "time":
            env.clock.advance(a)
        else:
            for _ in range(a):
                env.sched.step()

    def check(self) -> None:
        env = self.env
        used: dict[str, dict[str, int]] = {}
        for p in env.pods():
            if not p.node_name or p.is_terminal:
                continue
            u = used.setdefault(p.node_name, {"pods": 0})
            u["pods"] += 1
            for k, v in pod_requests(p).items():
                u[k] = u.get(k, 0) + v
        for name, u in used.items():
            cap = self.capacity(self.nodes[name])
            for k, limit in cap.items():
                assert u.get(k, 0) <= limit, f"{name} over-committed on {k}: {u} > {cap}"
        assert env.sched.cache.check_invariants() == []

    def check_cache_matches_store(self) -> None:
        env = self.env
        cache = env.sched.cache
        for p in env.pods():
            cached = cache.get_pod(p)
            if p.node_name:
                assert cached is not None and cached.node_name == p.node_name, p.key
            else:
                assert cached is None or cache.is_assumed(p), p.key

    def settle(self) -> None:
        env = self.env
        env.run()
        for _ in range(12):  # past the 5-minute leftover flush
            env.advance(30)
        self.check()
        self.check_cache_matches_store()
        # Nothing pending would fit anywhere now.
        free: dict[str, dict[str, int]] = {n: self.capacity(node) for n, node in self.nodes.items()}
        for p in env.pods():
            if p.node_name:
                f = free[p.node_name]
                f["pods"] -= 1
                for k, v in pod_requests(p).items():
                    if k in f:
                        f[k] -= v
        for p in env.pods():
            if p.node_name:
                continue
            req = pod_requests(p)
            for name, f in free.items():
                fits = f["pods"] >= 1 and all(req.get(k, 0) <= f[k] for k in f if k != "pods")
                assert not fits, f"{p.key} is pending but fits on {name}: {req} <= {f}"


def _run(plugin: str, program: list[tuple[str, int, int]]) -> None:
    c = Checker(plugin)
    for op in program:
        c.apply(op)
        c.check()
    c.settle()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=ops)
def test_no_overcommit_fake_fit(program: list[tuple[str, int, int]]):
    _run("FakeFit", program)


@pytest.mark.skipif(not _fit_available(), reason="NodeResourcesFit is not available yet")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=ops)
def test_no_overcommit_node_resources_fit(program: list[tuple[str, int, int]]):
    _run("NodeResourcesFit", program)


def test_a_known_sequence():
    prog = [("node", 1, 2), ("pod", 6, 0), ("pod", 6, 1), ("pod", 3, 2), ("steps", 3, 0), ("node", 2, 1),
            ("delete", 0, 0), ("time", 5, 0), ("pod", 10, 0), ("steps", 3, 0)]
    _run("FakeFit", prog)


