"""The dispatcher: live instances from Leases, least-loaded choice, label policy, groups,
re-dispatch when an instance's lease runs out, and nothing touched that is not its business."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from dispatch_harness import node, pod

from ksched.api.errors import InternalError
from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.dispatch.dispatcher import Dispatcher
from ksched.dispatch.instance import GROUP_LABEL, INSTANCE_ANNOTATION, InstanceRegistration
from ksched.dispatch.policy import DispatchPolicy, PolicyError


class Env:
    def __init__(self, policy: DispatchPolicy | None = None, **kw: Any) -> None:
        self.clock = VirtualClock()
        self.store = Store(self.clock)
        self.client = InProcessClient(self.store)
        self.d = Dispatcher(self.client, clock=self.clock, policy=policy, **kw)
        self.regs: dict[str, InstanceRegistration] = {}

    def register(self, name: str, labels: dict[str, str] | None = None, duration: float = 10.0,
                 **kw: Any) -> InstanceRegistration:
        r = InstanceRegistration(self.client, name, labels=labels, clock=self.clock, lease_duration=duration, **kw)
        assert r.heartbeat()
        self.regs[name] = r
        return r

    def pods(self, n: int, prefix: str = "p", **kw: Any) -> None:
        for i in range(n):
            self.store.create(pod(f"{prefix}{i}", **kw))

    def assigned(self) -> dict[str, str]:
        return {p.name: p.annotations.get(INSTANCE_ANNOTATION, "") for p in self.store.items("Pod")}

    def bind(self, name: str, node_name: str = "n0") -> None:
        self.store.bind("default", name, node_name)


def test_no_live_instance_means_pods_wait_then_go_to_the_first_one() -> None:
    e = Env()
    e.pods(3)
    e.d.run_until_idle()
    assert set(e.assigned().values()) == {""}
    assert len(e.d.waiting) == 3
    e.register("a")
    e.d.run_until_idle()
    assert e.assigned() == {"p0": "a", "p1": "a", "p2": "a"}
    assert not e.d.waiting and e.d.dispatched == 3


def test_least_loaded_instance_wins_and_equal_load_spreads_evenly() -> None:
    e = Env()
    e.register("a")
    e.pods(6)
    e.d.run_until_idle()
    assert Counter(e.assigned().values()) == {"a": 6}
    e.register("b")
    e.register("c")
    e.pods(12, prefix="q")
    e.d.run_until_idle()
    got = Counter(v for k, v in e.assigned().items() if k.startswith("q"))
    # b and c catch up with a's 6 first; then the three share the rest evenly.
    assert got == {"b": 6, "c": 6}
    e.pods(3, prefix="r")
    e.d.run_until_idle()
    assert Counter(v for k, v in e.assigned().items() if k.startswith("r")) == {"a": 1, "b": 1, "c": 1}
    assert {n: e.d.load(n) for n in "abc"} == {"a": 7, "b": 7, "c": 7}


def test_bound_pods_no_longer_count_as_load() -> None:
    e = Env()
    e.store.create(node("n0", cpu="100"))
    e.register("a")
    e.register("b")
    e.pods(4)
    e.d.run_until_idle()
    on_a = [k for k, v in e.assigned().items() if v == "a"]
    for name in on_a:
        e.bind(name)
    e.d.run_until_idle()
    assert e.d.load("a") == 0 and e.d.load("b") == 2
    e.pods(2, prefix="q")
    e.d.run_until_idle()
    assert Counter(v for k, v in e.assigned().items() if k.startswith("q")) == {"a": 2}


def test_policy_sends_gpu_pods_to_gpu_instances_and_the_rest_by_default() -> None:
    policy = DispatchPolicy.from_dict({
        "rules": [
            {"name": "gpu", "pods": {"labelSelector": {"matchLabels": {"accelerator": "gpu"}}},
             "instances": {"labelSelector": {"matchLabels": {"gpu": "true"}}}},
            {"name": "batch", "pods": {"namespaces": ["batch"]},
             "instances": {"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "In",
                                                                    "values": ["batch"]}]}}},
        ],
        "default": {"instances": {"labelSelector": {"matchExpressions": [{"key": "gpu",
                                                                           "operator": "DoesNotExist"}]}}},
    })
    e = Env(policy)
    e.register("g1", {"gpu": "true"})
    e.register("g2", {"gpu": "true", "tier": "batch"})
    e.register("c1", {})
    e.register("b1", {"tier": "batch"})
    e.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "batch"}})
    e.pods(4, prefix="gpu", labels={"accelerator": "gpu"}, gpu=1)
    e.pods(4, prefix="cpu")
    e.pods(4, prefix="bat", namespace="batch")
    e.d.run_until_idle()
    got = e.assigned()
    assert Counter(v for k, v in got.items() if k.startswith("gpu")) == {"g1": 2, "g2": 2}
    assert Counter(v for k, v in got.items() if k.startswith("cpu")) == {"c1": 2, "b1": 2}
    assert Counter(v for k, v in got.items() if k.startswith("bat")) == {"g2": 2, "b1": 2}
    # Without a GPU instance, GPU pods wait rather than go anywhere else, no longer dispatched
    # to the dead instances (no instance holds its pods back for theirs).
    for name in ("g1", "g2"):
        e.regs[name].release()
    e.d.run_until_idle()
    got = e.assigned()
    assert {k for k in e.d.waiting} == {f"default/gpu{i}" for i in range(4)}
    assert all(got[f"gpu{i}"] == "" for i in range(4)) and e.d.released == 4
    assert Counter(v for k, v in got.items() if k.startswith("bat")) == {"b1": 4}
    e.register("g3", {"gpu": "true"})
    e.d.run_until_idle()
    assert {e.assigned()[f"gpu{i}"] for i in range(4)} == {"g3"}


def test_policy_file_errors_name_the_field(tmp_path: Any) -> None:
    with pytest.raises(PolicyError, match=r"rules\[0\]: 'pods' and 'instances' must be objects"):
        DispatchPolicy.from_dict({"rules": [{"pods": {}}]})
    with pytest.raises(PolicyError, match=r"rules\[0\].instances.labelSelector: 'Bogus' is not a valid"):
        DispatchPolicy.from_dict({"rules": [{"instances": {"labelSelector": {
            "matchExpressions": [{"key": "a", "operator": "Bogus"}]}}}]})
    with pytest.raises(PolicyError, match="kind 'Pod'"):
        DispatchPolicy.from_dict({"kind": "Pod"})
    f = tmp_path / "policy.yaml"
    f.write_text("rules:\n- instances: {labelSelector: {matchLabels: {gpu: 'true'}}}\n  pods:\n"
                 "    namespaces: ml\n")
    with pytest.raises(PolicyError, match=r"policy.yaml: rules\[0\].pods.namespaces: must be a list"):
        DispatchPolicy.load(f)


def test_pods_of_one_group_go_to_one_instance_even_across_waves_and_failover() -> None:
    e = Env()
    for n in "abc":
        e.register(n)
    e.pods(2, prefix="solo")
    e.pods(5, prefix="g", labels={GROUP_LABEL: "train"})
    e.d.run_until_idle()
    first = {v for k, v in e.assigned().items() if k.startswith("g")}
    assert len(first) == 1
    (owner,) = first
    # A later member joins the same instance even though it is now the most loaded.
    e.store.create(pod("late", labels={GROUP_LABEL: "train"}))
    e.pods(3, prefix="more")
    e.d.run_until_idle()
    assert e.assigned()["late"] == owner
    assert owner not in {v for k, v in e.assigned().items() if k.startswith("more")}
    # The same group name in another namespace is another group.
    e.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    e.store.create(pod("elsewhere", namespace="other", labels={GROUP_LABEL: "train"}))
    e.d.run_until_idle()
    assert e.assigned()["elsewhere"] != owner
    # The owner dies: the whole group moves together to one other instance.
    e.regs[owner].release()
    e.d.run_until_idle()
    moved = {v for k, v in e.assigned().items() if k.startswith("g") or k == "late"}
    assert len(moved) == 1 and moved != {owner}
    assert e.d.redispatched >= 6


def test_expired_lease_redispatches_unbound_pods_only_and_renewals_keep_an_instance() -> None:
    e = Env()
    e.store.create(node("n0", cpu="100"))
    a = e.register("a", duration=10)
    b = e.register("b", duration=10)
    e.pods(6)
    e.d.run_until_idle()
    on_a = sorted(k for k, v in e.assigned().items() if v == "a")
    assert len(on_a) == 3
    e.bind(on_a[0])
    # a keeps renewing for a while: nothing moves.
    for _ in range(5):
        e.clock.advance(4)
        a.heartbeat()
        b.heartbeat()
        e.d.run_until_idle()
    assert Counter(e.assigned().values()) == {"a": 3, "b": 3}
    # a stops renewing (killed): after its lease duration its pending pods go to b.
    for _ in range(2):
        e.clock.advance(4)
        b.heartbeat()
        e.d.run_until_idle()
    assert Counter(e.assigned().values()) == {"a": 3, "b": 3}  # 8 s < 10 s
    e.clock.advance(4)
    b.heartbeat()
    e.d.run_until_idle()
    got = e.assigned()
    assert got[on_a[0]] == "a"  # bound by a: its record stays
    assert all(got[k] == "b" for k in on_a[1:])
    assert e.d.redispatched == 2 and e.d.load("b") == 5
    assert [i.name for i in e.d.live_instances()] == ["b"]


def test_a_lease_first_seen_already_expired_is_dead_and_a_restart_takes_over() -> None:
    e = Env()
    a = e.register("a", duration=5)
    e.clock.advance(30)
    d2 = Dispatcher(e.client, clock=e.clock)  # a dispatcher starting now
    e.pods(2)
    d2.run_until_idle()
    assert set(e.assigned().values()) == {""} and len(d2.waiting) == 2
    # The same instance restarted (new process, new identity) takes its expired lease over.
    a2 = InstanceRegistration(e.client, "a", clock=e.clock, lease_duration=5, identity="a@new")
    assert a2.heartbeat()
    d2.run_until_idle()
    assert set(e.assigned().values()) == {"a"}
    # While a2 holds it, the old process cannot renew it.
    assert not a.heartbeat()


def test_released_lease_is_dead_at_once() -> None:
    e = Env()
    a = e.register("a", duration=60)
    e.register("b", duration=60)
    e.pods(4)
    e.d.run_until_idle()
    a.release()
    e.d.run_until_idle()
    assert set(e.assigned().values()) == {"b"}


def test_other_scheduler_names_bound_and_terminal_pods_are_left_alone() -> None:
    e = Env(scheduler_names=("default-scheduler", "ksched"))
    e.store.create(node("n0", cpu="100"))
    e.register("a")
    e.store.create(pod("mine"))
    e.store.create(pod("mine2", scheduler_name="ksched"))
    e.store.create(pod("theirs", scheduler_name="someone-else"))
    e.store.create(pod("bound"))
    e.bind("bound")
    e.d.run_until_idle()
    assert e.assigned() == {"mine": "a", "mine2": "a", "theirs": "", "bound": ""}


def test_patch_carries_the_resource_version_so_a_concurrent_change_wins() -> None:
    e = Env()
    e.store.create(node("n0", cpu="100"))
    e.register("a")
    e.pods(1)
    e.d.informers.poll()
    e.bind("p0")  # bound after the dispatcher's informer saw it pending
    # The dispatcher's copy is stale: its patch is refused and it does not retry blindly.
    e.d.dispatch()
    assert e.d.patch_conflicts == 1
    e.d.run_until_idle()
    p = e.store.get("Pod", "default", "p0")
    assert isinstance(p, Pod) and p.node_name == "n0" and INSTANCE_ANNOTATION not in p.annotations


def test_api_failures_are_retried() -> None:
    e = Env()
    e.register("a")
    e.pods(2)
    real = e.client.patch
    fails = {"n": 2}

    def flaky(*a: Any, **kw: Any) -> Any:
        if fails["n"] > 0:
            fails["n"] -= 1
            raise InternalError("etcd is having a bad day")
        return real(*a, **kw)

    e.client.patch = flaky  # type: ignore[method-assign]
    e.d.step()
    assert e.d.api_failures == 1
    e.d.run_until_idle()
    assert set(e.assigned().values()) == {"a"} and e.d.api_failures == 2


def test_partition_in_node_selector_picks_that_partitions_instance() -> None:
    e = Env()
    e.register("pa", partition_label="zone", partition="a")
    e.register("pb", partition_label="zone", partition="b")
    e.pods(4, prefix="za", node_selector={"zone": "a"})
    e.pods(2, prefix="zb", node_selector={"zone": "b"})
    e.pods(2, prefix="any")
    e.d.run_until_idle()
    got = e.assigned()
    assert {got[f"za{i}"] for i in range(4)} == {"pa"}
    assert {got[f"zb{i}"] for i in range(2)} == {"pb"}
    assert {got["any0"], got["any1"]} == {"pb"}  # least loaded


def test_threaded_dispatcher_follows_instances_coming_and_going() -> None:
    store = Store()
    client = InProcessClient(store)
    d = Dispatcher(client, workers=4)
    stop = threading.Event()
    ready = threading.Event()
    t = threading.Thread(target=d.run, args=(stop, ready), daemon=True)
    t.start()
    try:
        assert ready.wait(10)
        a = InstanceRegistration(client, "a", lease_duration=1, renew_interval=0.2)
        b = InstanceRegistration(client, "b", lease_duration=1, renew_interval=0.2)
        assert a.heartbeat() and b.heartbeat()
        for i in range(40):
            store.create(pod(f"p{i}"))

        def assigned() -> Counter[str]:
            return Counter(p.annotations.get(INSTANCE_ANNOTATION, "") for p in store.items("Pod"))

        deadline = time.monotonic() + 10
        while assigned().get("", 0) and time.monotonic() < deadline:
            b.heartbeat()
            a.heartbeat()
            time.sleep(0.05)
        assert assigned() == {"a": 20, "b": 20}
        # a dies (no more heartbeats): within its 1 s lease all its pods move to b.
        deadline = time.monotonic() + 10
        while assigned().get("a", 0) and time.monotonic() < deadline:
            b.heartbeat()
            time.sleep(0.1)
        assert assigned() == {"b": 40}
    finally:
        stop.set()
        t.join(10)
    assert not t.is_alive()


def test_a_patch_answer_arriving_after_the_pod_was_bound_does_not_resurrect_it() -> None:
    """Threaded mode: the informer may deliver the binding before the patch's own answer."""
    e = Env()
    e.store.create(node("n0", cpu="100"))
    e.register("a")
    e.pods(1)
    e.d.informers.poll()
    before = e.store.get("Pod", "default", "p0")
    patched = e.client.patch("Pod", "default", "p0", {"metadata": {"annotations": {INSTANCE_ANNOTATION: "a"}}})
    e.bind("p0")
    e.d.informers.poll()
    assert "default/p0" not in e.d.pending
    e.d._inflight["default/p0"] = "a"
    e.d._inflight_load["a"] = 1
    e.d._inflight_priority[0] = 1
    e.d._complete("default/p0", "a", "", before.resource_version, 0, patched)
    assert "default/p0" not in e.d.pending and e.d.load("a") == 0 and e.d.dispatched == 1
    assert not e.d._todo
