"""Status-only pod updates swapped in place (``Cache(in_place_updates=True)``) against the
reference remove/add path (``in_place_updates=False``): random sequences of node changes,
assumptions, confirmations, status writes, real updates and removals leave the same NodeInfos,
the same snapshots and the same Filter/Score results (plugins whose indexes live across cycles
included) on either path."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ksched.api.labels import LabelSelector
from ksched.api.pod import Pod
from ksched.scheduler.cache.cache import Cache, unchanged_for_cache
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.testing import PluginRunner, make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
NODES = ["n0", "n1", "n2", "n3"]
PLUGINS = ["NodeResourcesFit", "NodePorts", "InterPodAffinity", "PodTopologySpread", "NodeResourcesBalancedAllocation"]

SPREAD = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
           "labelSelector": {"matchLabels": {"app": "a"}}}]
ANTI = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 10, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "b"}}, "topologyKey": ZONE}}]}}
REQ_ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "c"}}, "topologyKey": "kubernetes.io/hostname"}]}}


def _pod(name: str, node: str, kind: int, cpu: int, app: str) -> Pod:
    extra: dict[str, Any] = {}
    if kind == 1:
        extra["affinity"] = ANTI
    elif kind == 2:
        extra["affinity"] = REQ_ANTI
    elif kind == 3:
        extra["host_ports"] = [8000 + cpu % 2]
    elif kind == 4:
        extra["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": f"c{cpu % 2}"}}]
    return make_pod(name, uid=f"uid-{name}", node_name=node, requests={"cpu": f"{cpu}m", "memory": str(cpu * 1000)},
                    labels={"app": app}, **extra)


def _status_write(p: Pod, n: int) -> Pod:
    """The kubelet's write of the status subresource: phase Running, a condition, a new version."""
    raw = dict(p.raw)
    raw["metadata"] = {**p.raw["metadata"], "resourceVersion": str(1000 + n)}
    raw["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if n % 2 else "False"}],
                     "startTime": "2026-01-01T00:00:00Z"}
    return p.with_status(raw)


def _real_change(p: Pod, how: int, n: int) -> Pod:
    raw = copy.deepcopy(p.raw)
    raw["metadata"]["resourceVersion"] = str(2000 + n)
    if how == 0:
        raw["metadata"]["labels"] = {"app": "a" if p.labels.get("app") != "a" else "b"}
    elif how == 1:
        raw["spec"]["containers"][0]["resources"] = {"requests": {"cpu": f"{n % 700}m"}}
    elif how == 2:
        raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    else:
        raw["metadata"]["annotations"] = {"note": str(n)}
    return Pod(raw)


def _node_infos(c: Cache) -> dict[str, Any]:
    """Every NodeInfo of the cache, pods by object identity and in order."""
    return {name: ([id(pi.pod) for pi in ni.pods], [id(pi.pod) for pi in ni.pods_with_affinity],
                   [id(pi.pod) for pi in ni.pods_with_required_anti_affinity],
                   {k: v for k, v in ni.requested.items() if v}, list(ni.non_zero_requested),
                   {ip: dict(v) for ip, v in ni.used_ports.ports.items() if v}, dict(ni.pvc_ref_counts),
                   ni.node is not None)
            for name, ni in sorted(c.nodes.items())}


def _snapshot(s: Snapshot) -> dict[str, Any]:
    out: dict[str, Any] = {"order": s.all_nodes().names, "pvcs": sorted(s.used_pvcs),
                           "aff": sorted(n.name for n in s.have_pods_with_affinity),
                           "anti": sorted(n.name for n in s.have_pods_with_required_anti_affinity)}
    assert s.any_pods_with_affinity == bool(out["aff"])
    assert s.any_pods_with_required_anti_affinity == bool(out["anti"])
    width = min(len(s.table.cols), s.table.req.shape[1])
    for name in out["order"]:
        ni = s.get(name)
        assert ni is not None
        r = s.row_of[name]
        out[name] = ([(pi.pod.key, pi.pod.uid, pi.pod.phase, tuple(sorted(pi.pod.labels.items())),
                       pi.pod.deletion_timestamp) for pi in ni.pods],
                     [pi.pod.key for pi in ni.pods_with_affinity],
                     {k: v for k, v in ni.requested.items() if v}, list(ni.non_zero_requested),
                     s.table.req[r, :width].tolist(), s.table.nz[r].tolist())
    return out


SELECTORS = [LabelSelector.from_dict({"matchLabels": {"app": a}}) for a in "abc"]


def _pod_counts(s: Snapshot) -> list[Any]:
    """The snapshot's matching-pod counts (kept across updates) for each app, by node name, and
    the same counted afresh from its NodeInfos."""
    idx = s.pod_counts()
    out = []
    for sel in SELECTORS:
        for terminating in (False, True):
            counts = idx.counts("default", sel, terminating)
            kept = {ni.name: int(counts[s.row_of[ni.name]]) for ni in s.all_nodes()}
            fresh = {ni.name: sum(1 for pi in ni.pods if sel.matches(pi.pod.labels)
                                  and (terminating or pi.pod.deletion_timestamp is None)) for ni in s.all_nodes()}
            assert kept == fresh
            out.append(kept)
    return out


def _runner(in_place: bool) -> PluginRunner:
    r = PluginRunner(PLUGINS, [])
    r.cache = Cache(in_place_updates=in_place)
    r.snapshot = Snapshot(r.cache.table.cols)
    r.fw.set_snapshot(r.snapshot)
    return r


OPS = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 1023)), min_size=3, max_size=50)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
@example(ops=[(0, 0), (3, 0), (7, 0)])  # relabelled after the counts were built
@example(ops=[(0, 0), (3, 0), (7, 2)])  # deleted (terminating) after the counts were built
@example(ops=[(0, 0), (3, 0), (3, 4), (5, 4), (5, 0)])  # status writes move the pod to the end
@example(ops=[(0, 0), (2, 1), (4, 0), (5, 0)])  # assumed, confirmed, then a status write
def test_in_place_updates_agree_with_remove_and_add(ops: list[tuple[int, int]]) -> None:
    fast, ref = _runner(True), _runner(False)
    caches = (fast.cache, ref.cache)
    nodes: dict[str, Any] = {}
    bound: dict[str, Pod] = {}
    assumed: dict[str, Pod] = {}
    for n, (op, x) in enumerate(ops):
        if op == 0 or not nodes:
            name = NODES[x % len(NODES)]
            node = make_node(name, cpu=str(2 + x % 4), labels={ZONE: f"z{x % 2}"})
            for c in caches:
                c.update_node(nodes[name], node) if name in nodes else c.add_node(node)
            nodes[name] = node
        elif op == 1 and len(nodes) > 1 and x % 3 == 0:
            name = sorted(nodes)[x % len(nodes)]
            for c in caches:
                c.remove_node(nodes[name])
            del nodes[name]
        elif op in (2, 3):
            p = _pod(f"p{n}", NODES[x % len(NODES)], x % 5, x % 900, "abc"[x % 3])
            if op == 2:
                for c in caches:
                    c.assume_pod(p)
                assumed[p.uid] = p
            else:
                for c in caches:
                    c.add_pod(p)
                bound[p.uid] = p
        elif op == 4 and assumed:
            uid = sorted(assumed)[x % len(assumed)]
            p = assumed.pop(uid)
            confirmed = Pod({**p.raw, "metadata": {**p.raw["metadata"], "resourceVersion": str(n)}})
            for c in caches:
                c.add_pod(confirmed)
            bound[uid] = confirmed
        elif op in (5, 6, 7) and bound:
            uid = sorted(bound)[x % len(bound)]
            old = bound[uid]
            new = _status_write(old, n) if op != 7 else _real_change(old, x % 4, n)
            if op != 7:
                assert unchanged_for_cache(old, new)
            for c in caches:
                c.update_pod(old, new)
            bound[uid] = new
        elif op == 8 and (bound or assumed):
            pool = bound if bound and (x % 2 or not assumed) else assumed
            uid = sorted(pool)[x % len(pool)]
            p = pool.pop(uid)
            for c in caches:
                c.remove_pod(p)
        if (x >> 4) % 2 == 0:  # a scheduling cycle's view, about every other step
            fast.refresh()
            ref.refresh()
            assert _snapshot(fast.snapshot) == _snapshot(ref.snapshot)
            assert _pod_counts(fast.snapshot) == _pod_counts(ref.snapshot)
            if fast.snapshot.num_nodes and (x >> 5) % 2 == 0:
                incoming = _pod(f"in{n}", "", x % 5, x % 900, "abc"[x % 3])
                incoming.raw["spec"]["topologySpreadConstraints"] = SPREAD  # (read below via a fresh Pod)
                incoming = Pod(incoming.raw)
                assert fast.filter(incoming) == ref.filter(incoming)
                assert fast.score(incoming) == ref.score(incoming)
        assert _node_infos(fast.cache) == _node_infos(ref.cache)
        assert fast.cache.check_invariants() == [] and ref.cache.check_invariants() == []
    fast.refresh()
    ref.refresh()
    assert _snapshot(fast.snapshot) == _snapshot(ref.snapshot)
    # The snapshot holds the objects the cache holds: the old versions are not kept.
    for name in fast.snapshot.all_nodes().names:
        snap_ni, cache_ni = fast.snapshot.get(name), fast.cache.nodes[name]
        assert snap_ni is not None
        assert [id(pi.pod) for pi in snap_ni.pods] == [id(pi.pod) for pi in cache_ni.pods]


def test_a_status_write_bumps_no_generation_and_the_snapshot_gets_the_new_object() -> None:
    c = Cache()
    c.add_node(make_node("n1"))
    p = _pod("a", "n1", 1, 100, "a")
    q = _pod("b", "n1", 0, 200, "b")
    c.add_pod(p)
    c.add_pod(q)
    snap = Snapshot(c.table.cols)
    c.update_snapshot(snap)
    gen = c.generation
    copy_before = snap.get("n1")
    new = _status_write(p, 1)
    c.update_pod(p, new)
    assert c.generation == gen
    assert c.get_pod(p) is new
    # Moved to the end, as the remove/add would leave it.
    assert [pi.pod for pi in c.nodes["n1"].pods] == [q, new]
    c.update_snapshot(snap)
    assert snap.generation == gen and snap.get("n1") is copy_before
    assert [pi.pod for pi in snap.get("n1").pods] == [q, new]  # type: ignore[union-attr]
    assert [pi.pod for pi in snap.get("n1").pods_with_affinity] == [new]  # type: ignore[union-attr]
    # A real change takes the full path.
    relabeled = _real_change(new, 0, 2)
    c.update_pod(new, relabeled)
    assert c.generation > gen


def test_confirmation_gives_the_snapshot_the_bound_object() -> None:
    c = Cache()
    c.add_node(make_node("n1"))
    p = _pod("a", "n1", 0, 100, "a")
    c.assume_pod(p)
    snap = Snapshot(c.table.cols)
    c.update_snapshot(snap)
    bound = Pod({**p.raw, "metadata": {**p.raw["metadata"], "resourceVersion": "7"}})
    c.add_pod(bound)
    c.update_snapshot(snap)
    assert [pi.pod for pi in snap.get("n1").pods] == [bound]  # type: ignore[union-attr]
    ref = Cache(in_place_updates=False)
    ref.add_node(make_node("n1"))
    ref.assume_pod(p)
    rsnap = Snapshot(ref.table.cols)
    ref.update_snapshot(rsnap)
    ref.add_pod(bound)
    ref.update_snapshot(rsnap)
    assert [pi.pod for pi in rsnap.get("n1").pods] == [p]  # type: ignore[union-attr]  (the reference keeps it)


def test_what_counts_as_unchanged() -> None:
    p = _pod("a", "n1", 1, 100, "a")
    assert unchanged_for_cache(p, p)
    assert unchanged_for_cache(p, _status_write(p, 3))
    for how in range(4):
        assert not unchanged_for_cache(p, _real_change(p, how, 3)), how
    moved = Pod({**p.raw, "spec": {**p.raw["spec"], "nodeName": "n2"}})
    assert not unchanged_for_cache(p, moved)
    done = p.with_status({**p.raw, "status": {"phase": "Succeeded"}})
    assert not unchanged_for_cache(p, done)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["plain", "affinity", "anti"]), min_size=1, max_size=8), st.data())
def test_node_info_replace_pod_swaps_exactly_that_pod(kinds: list[str], data: st.DataObject) -> None:
    """NodeInfo.replace_pod (a confirmation) puts the new info where the old one was in every
    list that held it, and nothing else moves."""
    from ksched.scheduler.framework.types import NodeInfo, PodInfo

    aff = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}}]}}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}]}}
    ni = NodeInfo()
    ni.set_node(make_node("n"))
    infos = []
    for i, k in enumerate(kinds):
        pi = PodInfo(make_pod(f"p{i}", uid=f"u{i}", node_name="n",
                              affinity=aff if k == "affinity" else anti if k == "anti" else None))
        ni.add_pod(pi)
        infos.append(pi)
    j = data.draw(st.integers(0, len(infos) - 1))
    old = infos[j]
    new = old.with_pod(old.pod.shallow_copy())
    want = [[new if x is old else x for x in lst]
            for lst in (ni.pods, ni.pods_with_affinity, ni.pods_with_required_anti_affinity)]
    ni.replace_pod(old, new)
    got = [ni.pods, ni.pods_with_affinity, ni.pods_with_required_anti_affinity]
    assert [[id(x) for x in lst] for lst in got] == [[id(x) for x in lst] for lst in want]
