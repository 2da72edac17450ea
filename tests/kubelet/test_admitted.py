"""The kubelet's kept per-node pods (``ksched.kubelet.admitted``) against looking them up in the
informer at every use (``FakeKubelet(admitted_index=False)``, the reference): on random clusters
where pods start, are refused at admission (sent to a full node directly), exit, crash-loop,
are OOM-killed and evicted under memory pressure, deleted, and their nodes fail, come back and
are drained, every use of a node's pods sees the same pods (the same versions), the kept
request sums are the sums of those pods' requests, and whole runs end the same."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api_objects import summed_requests
from ksched.api.pod import Pod
from ksched.kubelet.admitted import AdmittedPods
from ksched.kubelet.fake import FakeKubelet
from ksched.kubelet.predicate import general_predicates
from ksched.sim.simulation import Simulation
from ksched.sim.timeline import parse_timeline

NODES = ("n0", "n1", "n2")


def _reference(k: FakeKubelet, node: str) -> tuple[list[Pod], bool]:
    kept, k._admitted = k._admitted, None
    try:
        return k.admitted_pods(node), k.any_usage(node)
    finally:
        k._admitted = kept


def _versions(pods: list[Pod]) -> dict[str, str]:
    return {p.key: p.resource_version for p in pods}


class _Checked:
    """Compares the kept pods with the reference at every use and after every kubelet step."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.checks = 0
        self.others_checks = 0
        kept_pods = FakeKubelet.admitted_pods
        step = FakeKubelet.step

        def admitted_pods(k: FakeKubelet, node_name: str, but: str = "") -> list[Pod]:
            got = kept_pods(k, node_name, but)
            if k._admitted is not None:
                self.check(k, node_name)
                ref, _ = _reference(k, node_name)
                assert _versions(got) == _versions([p for p in ref if p.uid != but])
            return got

        def checked_step(k: FakeKubelet) -> int:
            for n in NODES:
                self.check(k, n)
            out = step(k)
            for n in NODES:
                self.check(k, n)
            return out

        others = AdmittedPods.others

        def checked_others(a: AdmittedPods, node_name: str, key: str, uid: str) -> tuple[int, Any]:
            # (fake.ONE_OTHERS_LOOKUP: the one call is the two reads it replaces)
            got = others(a, node_name, key, uid)
            assert got[0] == a.count(node_name, but=uid)
            assert got[1] == (None if key in a else a.requested(node_name))
            assert got[1] is None or got[1] is a.requested(node_name) or not got[1]
            self.others_checks += 1
            return got

        monkeypatch.setattr(FakeKubelet, "admitted_pods", admitted_pods)
        monkeypatch.setattr(FakeKubelet, "step", checked_step)
        monkeypatch.setattr(AdmittedPods, "others", checked_others)

    def check(self, k: FakeKubelet, node: str) -> None:
        if k._admitted is None:
            return
        ref, usage = _reference(k, node)
        kept = k._admitted.pods(node)
        assert _versions(kept) == _versions(ref)
        assert len(kept) == len(ref)
        assert k._admitted.requested(node) == summed_requests(ref)
        assert k._admitted.any_usage(node) == usage
        self.checks += 1


def _pod(i: int, cpu: int, node: str | None, usage: int | None, run: int | None, code: int, policy: str,
         limit: bool) -> dict[str, Any]:
    ann: dict[str, str] = {}
    if usage is not None:
        ann["ksched.io/usage-memory"] = f"{usage}Mi"
    if run is not None:
        ann["ksched.io/run-seconds"] = str(run)
        ann["ksched.io/exit-code"] = str(code)
    res: dict[str, Any] = {"requests": {"cpu": f"{cpu}m", "memory": "256Mi"}}
    if limit:
        res["limits"] = {"memory": "1Gi"}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "img", "resources": res}], "restartPolicy": policy}
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default", "annotations": ann}, "spec": spec}


_pods = st.lists(st.tuples(
    st.integers(100, 1500),  # cpu request (m)
    st.sampled_from([None, None, *NODES]),  # sent to a node directly (admission may refuse it)
    st.sampled_from([None, None, 300, 1500]),  # memory usage (Mi)
    st.sampled_from([None, None, 40, 300]),  # run seconds
    st.sampled_from([0, 1]),  # exit code
    st.sampled_from(["Always", "OnFailure", "Never"]),
    st.booleans()), min_size=1, max_size=12)

_events = st.lists(st.tuples(
    st.integers(1, 1800),
    st.sampled_from(["failNode", "restoreNode", "drain", "uncordon", "delete", "setUsage", "apply"]),
    st.integers(0, 11)), max_size=6)


def _cluster(index: bool, pods: list[tuple[Any, ...]], events: list[tuple[int, str, int]], seed: int) -> Simulation:
    sim = Simulation(seed=seed, admitted_index=index)
    sim.load([{"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
               "status": {"allocatable": {"cpu": "2", "memory": "3000Mi", "pods": "4"}}} for n in NODES])
    sim.load([_pod(i, *p) for i, p in enumerate(pods)])
    sim.run(max_seconds=0)
    actions = []
    for at, op, i in sorted(events):
        node = NODES[i % len(NODES)]
        if op in ("failNode", "restoreNode", "drain", "uncordon"):
            actions.append({"at": at, op: node})
        elif op == "delete":
            actions.append({"at": at, "delete": [{"kind": "Pod", "namespace": "default", "name": f"p{i}"}]})
        elif op == "setUsage":
            actions.append({"at": at, "setUsage": {"node": node, "memory": f"{600 * (i % 6)}Mi"}})
        else:
            actions.append({"at": at, "apply": [_pod(100 + i, 200, node if i % 2 else None, 800, None, 0,
                                                       "Always", False)]})
    sim.use_timeline(parse_timeline({"kind": "Timeline", "events": actions}, "test"))
    sim.run(max_seconds=3600)
    return sim


def _outcome(sim: Simulation) -> dict[str, Any]:
    state = []
    for o in sim.store.items("Pod"):
        md = {k: v for k, v in o.raw.get("metadata", {}).items() if k != "resourceVersion"}
        state.append({**o.raw, "metadata": md})
    state.sort(key=lambda r: r["metadata"]["name"])
    assert sim.kubelet is not None
    return {"rows": list(sim.history.rows), "pods": state, "passes": sim.kubelet.pressure.passes}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(_pods, _events, st.integers(0, 3))
def test_kept_pods_agree_with_the_informer_at_every_use(monkeypatch: pytest.MonkeyPatch, pods: list[tuple[Any, ...]],
                                                         events: list[tuple[int, str, int]], seed: int) -> None:
    with monkeypatch.context() as m:
        checked = _Checked(m)
        fast = _cluster(True, pods, events, seed)
        assert checked.checks > 0
        assert checked.others_checks > 0 or not pods
    ref = _cluster(False, pods, events, seed)
    assert _outcome(fast) == _outcome(ref)


def test_the_random_clusters_refuse_evict_and_restart() -> None:
    """The generator reaches what the index must follow: refusals at admission, evictions,
    restarts, deletions (a test of the test)."""
    pods = [(1500, "n0", None, None, 0, "Always", False), (1500, "n0", None, None, 0, "Always", False),
            (200, None, 1500, None, 0, "Always", False), (200, None, 1500, None, 0, "Always", False),
            (200, None, None, 40, 1, "Always", True), (200, None, None, 40, 0, "Never", False)]
    events = [(100, "setUsage", 3), (120, "setUsage", 4), (130, "setUsage", 5), (600, "delete", 4),
              (700, "drain", 1)]
    sim = _cluster(True, pods, events, 0)
    whats = {r[2] for r in sim.history.rows}
    assert {"rejected", "evicted", "restarted"} <= whats, whats
    assert _outcome(sim) == _outcome(_cluster(False, pods, events, 0))


def test_an_update_keeps_a_pods_place_and_a_deletion_frees_its_requests() -> None:
    admitted = {"a", "b"}
    idx = AdmittedPods(lambda p: p.name in admitted and bool(p.node_name) and not p.is_terminal)

    def pod(name: str, cpu: str, rv: str, phase: str = "Running") -> Pod:
        return Pod({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": "d", "resourceVersion": rv, "uid": f"u-{name}"},
                    "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i", "resources": {
                        "requests": {"cpu": cpu}}}]}, "status": {"phase": phase}})

    idx.put(pod("a", "1", "1"))
    idx.put(pod("b", "500m", "2"))
    idx.put(pod("c", "2", "3"))  # not admitted
    idx.put(pod("a", "1", "4"))
    assert [(p.name, p.resource_version) for p in idx.pods("n")] == [("a", "4"), ("b", "2")]
    assert idx.requested("n") == {"cpu": 1500}
    assert [p.name for p in idx.pods("n", but="u-a")] == ["b"]
    assert [p.name for p in idx.pods("n", but="u-c")] == ["a", "b"]
    idx.put(pod("b", "500m", "5", phase="Succeeded"))  # terminal: no longer runs there
    assert [p.name for p in idx.pods("n")] == ["a"]
    assert idx.requested("n") == {"cpu": 1000}
    idx.discard("d/a")
    assert idx.pods("n") == [] and idx.requested("n") == {}
    assert not idx.any_usage("n")


def test_a_status_write_keeps_the_charge_and_a_changed_part_recharges() -> None:
    """``put`` of a version sharing every part requests and usage are read from (a status write,
    ``Pod.with_status``) keeps the charge; one whose annotations or containers differ is charged
    anew."""
    idx = AdmittedPods(lambda p: True)
    base = Pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "d", "uid": "u-a"},
                "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i", "resources": {
                    "requests": {"cpu": "1"}}}]}, "status": {"phase": "Pending"}})
    idx.put(base)
    running = base.with_status({**base.raw, "status": {"phase": "Running"}})
    idx.put(running)
    assert idx.requested("n") == {"cpu": 1000} and not idx.any_usage("n")
    assert idx.pods("n") == [running]
    # versions that share every parsed part but one (as another write could make them)
    usage = running.shallow_copy()
    usage.annotations = {"ksched.io/usage-memory": "1Gi"}
    usage._cache = None
    idx.put(usage)
    assert idx.any_usage("n") and idx.requested("n") == {"cpu": 1000}
    bigger = usage.shallow_copy()
    bigger.containers = Pod({**base.raw, "spec": {"nodeName": "n", "containers": [
        {"name": "c", "image": "i", "resources": {"requests": {"cpu": "2"}}}]}}).containers
    bigger._cache = None
    idx.put(bigger)
    assert idx.requested("n") == {"cpu": 2000} and idx.any_usage("n")
    idx.discard("d/a")
    assert idx.requested("n") == {} and not idx.any_usage("n")


@pytest.mark.parametrize(("requests", "want"), [
    ({"cpu": "500m"}, (True, "")),
    ({"cpu": "1500m"}, (False, "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000")),
    ({"memory": "3Gi"}, (True, "")),
    ({"memory": "3584Mi"}, (False, "Node didn't have enough resource: memory, requested: 3758096384, "
                                   "used: 1073741824, capacity: 4294967296")),
])
def test_the_fit_check_reads_the_kept_sums_as_it_adds_them_up(requests: dict[str, str],
                                                              want: tuple[bool, str]) -> None:
    from ksched.api.node import Node

    node = Node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                 "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}})

    def pod(name: str, req: dict[str, str]) -> Pod:
        return Pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "d"},
                    "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i",
                                                              "resources": {"requests": req}}]}})

    others = [pod("a", {"cpu": "600m", "memory": "512Mi"}), pod("b", {"cpu": "400m", "memory": "512Mi"})]
    new = pod("x", requests)
    plain = general_predicates(new, node, others)
    kept = general_predicates(new, node, others, summed_requests(others))
    assert (plain.admit, plain.message) == (kept.admit, kept.message) == want
