"""pods/binding and the conflict resolver: no binding may over-commit a node."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.accounting import NodeAccounting, host_port_conflict
from ksched.api.errors import Conflict, Invalid, NotFound
from ksched.api.pod import Pod
from ksched.api.watch import MODIFIED
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock


def ctr(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
        ports: list[dict[str, Any]] | None = None, name: str = "c") -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "img"}
    r: dict[str, Any] = {}
    if requests:
        r["requests"] = requests
    if limits:
        r["limits"] = limits
    if r:
        c["resources"] = r
    if ports:
        c["ports"] = ports
    return c


def mkpod(name: str, *containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": list(containers) or [ctr()]}
    s.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": s}


def mknode(name: str, **alloc: str) -> dict[str, Any]:
    a = {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    a.update(alloc)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": a}}


@pytest.fixture
def store(store: Store) -> Store:
    """The conftest's empty store, with node n1."""
    store.create(mknode("n1"))
    return store


def test_binding_sets_node_name_and_pod_scheduled(store: Store) -> None:
    p = store.create(mkpod("a"))
    w = store.watch("Pod", resource_version=store.resource_version)
    b = store.bind("default", "a", "n1", annotations={"ksched/profile": "x"})
    assert b.node_name == "n1" and b.raw["spec"]["nodeName"] == "n1"
    cond = b.condition("PodScheduled")
    assert cond is not None and cond["status"] == "True"
    assert int(b.resource_version) > int(p.resource_version)
    assert b.annotations == {"ksched/profile": "x"}
    assert store.get("Pod", "default", "a") is b
    evs = w.drain()
    assert [(e.type, e.object.node_name) for e in evs] == [(MODIFIED, "n1")]  # type: ignore[union-attr]
    # A fresh typed object parsed from the stored manifest agrees with the one handed out.
    again = Pod(b.raw)
    assert again.node_name == "n1" and again.annotations == b.annotations


def test_binding_clears_the_nominated_node(store: Store) -> None:
    """ClearingNominatedNodeNameAfterBinding (beta, on in 1.36): the API server drops
    status.nominatedNodeName when it binds the pod, whichever node was nominated."""
    store.create(mknode("n2"))
    store.create(mkpod("a"))
    store.patch("Pod", "default", "a", {"status": {"nominatedNodeName": "n2"}}, subresource="status")
    assert store.get("Pod", "default", "a").nominated_node_name == "n2"  # type: ignore[attr-defined]
    b = store.bind("default", "a", "n1")
    assert b.nominated_node_name == "" and "nominatedNodeName" not in b.raw["status"]
    assert Pod(b.raw).nominated_node_name == ""


def test_binding_happens_once(store: Store) -> None:
    store.create(mknode("n2"))
    store.create(mkpod("a"))
    store.bind("default", "a", "n1")
    with pytest.raises(Conflict) as ei:
        store.bind("default", "a", "n2")
    assert ei.value.code == 409
    assert 'already assigned to node "n1"' in ei.value.message
    assert store.get("Pod", "default", "a").node_name == "n1"  # type: ignore[attr-defined]


def test_binding_errors(store: Store) -> None:
    with pytest.raises(NotFound):
        store.bind("default", "nope", "n1")
    p = store.create(mkpod("a"))
    with pytest.raises(Invalid):
        store.bind("default", "a", "")
    with pytest.raises(Conflict):
        store.bind("default", "a", "n1", uid="not-the-uid")
    with pytest.raises(Conflict) as ei:
        store.bind("default", "a", "ghost")
    assert 'node "ghost" not found' in ei.value.message
    store.bind("default", "a", "n1", uid=p.uid)


def test_terminating_pod_cannot_be_bound() -> None:
    st = Store(VirtualClock())
    st.create(mknode("n1"))
    raw = mkpod("a")
    raw["metadata"]["finalizers"] = ["example.com/hold"]
    st.create(raw)
    st.delete("Pod", "default", "a")
    with pytest.raises(Conflict) as ei:
        st.bind("default", "a", "n1")
    assert "being deleted" in ei.value.message


# ---------------------------------------------------------------- the conflict resolver


@pytest.mark.parametrize(("alloc", "first", "second", "resource"), [
    ({"cpu": "2"}, {"cpu": "1500m"}, {"cpu": "600m"}, "cpu"),
    ({"memory": "1Gi"}, {"memory": "768Mi"}, {"memory": "512Mi"}, "memory"),
    ({"ephemeral-storage": "10Gi"}, {"ephemeral-storage": "6Gi"}, {"ephemeral-storage": "5Gi"}, "ephemeral-storage"),
    ({"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"}, "nvidia.com/gpu"),
    ({"hugepages-2Mi": "8Mi"}, {"hugepages-2Mi": "6Mi", "memory": "1Mi"}, {"hugepages-2Mi": "4Mi", "memory": "1Mi"},
     "hugepages-2Mi"),
])
def test_resource_over_commit_is_a_conflict(alloc: dict[str, str], first: dict[str, str], second: dict[str, str],
                                            resource: str) -> None:
    st = Store(VirtualClock())
    st.create(mknode("n", **alloc))
    scalar = resource.startswith(("nvidia", "hugepages"))
    lim1 = {k: v for k, v in first.items() if k != "memory"} if scalar else None
    lim2 = {k: v for k, v in second.items() if k != "memory"} if scalar else None
    st.create(mkpod("a", ctr(first, lim1)))
    st.create(mkpod("b", ctr(second, lim2)))
    st.bind("default", "a", "n")
    rv = st.resource_version
    with pytest.raises(Conflict) as ei:
        st.bind("default", "b", "n")
    msg = ei.value.message
    assert f"over-committed on {resource}" in msg and "node n" in msg
    assert st.resource_version == rv
    assert st.get("Pod", "default", "b").node_name == ""  # type: ignore[attr-defined]


def test_extended_resource_the_node_does_not_have(store: Store) -> None:
    store.create(mkpod("a", ctr({"example.com/fpga": "1"}, {"example.com/fpga": "1"})))
    with pytest.raises(Conflict) as ei:
        store.bind("default", "a", "n1")
    assert "example.com/fpga" in ei.value.message


def test_exact_fit_binds(store: Store) -> None:
    store.create(mkpod("a", ctr({"cpu": "3", "memory": "6Gi"})))
    store.create(mkpod("b", ctr({"cpu": "1", "memory": "2Gi"})))
    store.bind("default", "a", "n1")
    store.bind("default", "b", "n1")
    assert store.accounting.usage["n1"].requested["cpu"] == 4000


def test_pod_count_limit() -> None:
    st = Store(VirtualClock())
    st.create(mknode("n", pods="2"))
    for name in "abc":
        st.create(mkpod(name))
    st.bind("default", "a", "n")
    st.bind("default", "b", "n")
    with pytest.raises(Conflict) as ei:
        st.bind("default", "c", "n")
    assert "pod limit" in ei.value.message and "2 of 2" in ei.value.message


def test_overhead_and_init_containers_count() -> None:
    st = Store(VirtualClock())
    st.create(mknode("n", cpu="2"))
    st.create({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"},
               "handler": "kata", "overhead": {"podFixed": {"cpu": "250m"}}})
    st.create(mkpod("a", ctr({"cpu": "500m"}), initContainers=[ctr({"cpu": "1500m"}, name="i")],
                    runtimeClassName="kata"))
    st.create(mkpod("b", ctr({"cpu": "250m"})))
    st.create(mkpod("c", ctr({"cpu": "1m"})))
    st.bind("default", "a", "n")  # 1500m + 250m
    st.bind("default", "b", "n")  # 2000m: full
    with pytest.raises(Conflict):
        st.bind("default", "c", "n")


@pytest.mark.parametrize(("first", "second", "conflict"), [
    ({"hostPort": 80, "containerPort": 80}, {"hostPort": 80, "containerPort": 8080}, True),
    ({"hostPort": 80, "containerPort": 80}, {"hostPort": 81, "containerPort": 80}, False),
    ({"hostPort": 80, "containerPort": 80, "protocol": "UDP"}, {"hostPort": 80, "containerPort": 80}, False),
    ({"hostPort": 80, "containerPort": 80, "hostIP": "10.0.0.1"},
     {"hostPort": 80, "containerPort": 80, "hostIP": "10.0.0.2"}, False),
    ({"hostPort": 80, "containerPort": 80, "hostIP": "10.0.0.1"},
     {"hostPort": 80, "containerPort": 80, "hostIP": "10.0.0.1"}, True),
    ({"hostPort": 80, "containerPort": 80, "hostIP": "0.0.0.0"},
     {"hostPort": 80, "containerPort": 80, "hostIP": "10.0.0.2"}, True),
    ({"hostPort": 80, "containerPort": 80, "hostIP": "10.0.0.2"},
     {"hostPort": 80, "containerPort": 80}, True),  # no hostIP means 0.0.0.0
    ({"hostPort": 80, "containerPort": 80, "hostIP": "::"},
     {"hostPort": 80, "containerPort": 80, "hostIP": "10.0.0.2"}, True),
    ({"containerPort": 80}, {"containerPort": 80}, False),  # no host port: nothing to clash
])
def test_host_ports(store: Store, first: dict[str, Any], second: dict[str, Any], conflict: bool) -> None:
    store.create(mkpod("a", ctr(ports=[first])))
    store.create(mkpod("b", ctr(ports=[second])))
    store.bind("default", "a", "n1")
    if conflict:
        with pytest.raises(Conflict) as ei:
            store.bind("default", "b", "n1")
        assert "host port" in ei.value.message and ":80/" in ei.value.message
    else:
        store.bind("default", "b", "n1")


def test_sidecar_host_ports_count_but_plain_init_container_ports_do_not(store: Store) -> None:
    # upstream's GetHostPorts: restartable init containers (they run for the pod's life) and
    # regular containers; a plain init container has exited before the others start.
    port = [{"hostPort": 9000, "containerPort": 1}]
    sidecar = {**ctr(ports=port, name="s"), "restartPolicy": "Always"}
    store.create(mkpod("a", initContainers=[ctr(ports=port, name="i")]))
    store.create(mkpod("b", initContainers=[sidecar]))
    store.create(mkpod("c", ctr(ports=port)))
    store.bind("default", "a", "n1")
    store.bind("default", "b", "n1")
    with pytest.raises(Conflict):
        store.bind("default", "c", "n1")


def test_resources_are_freed_by_terminal_and_deleted_pods() -> None:
    st = Store(VirtualClock())
    st.create(mknode("n", cpu="1"))
    st.create(mkpod("a", ctr({"cpu": "1"})))
    st.create(mkpod("b", ctr({"cpu": "1"})))
    st.create(mkpod("c", ctr({"cpu": "1"})))
    st.bind("default", "a", "n")
    with pytest.raises(Conflict):
        st.bind("default", "b", "n")
    st.patch("Pod", "default", "a", {"status": {"phase": "Succeeded"}}, subresource="status")
    st.bind("default", "b", "n")  # a is done: its cpu is free
    # A gracefully terminating pod still holds its resources until it is gone.
    st.delete("Pod", "default", "b", grace_period_seconds=10)
    with pytest.raises(Conflict):
        st.bind("default", "c", "n")
    st.delete("Pod", "default", "b", grace_period_seconds=0)
    st.bind("default", "c", "n")


def test_resolver_can_be_switched_off() -> None:
    st = Store(VirtualClock(), conflict_resolver=False)
    st.create(mknode("n", cpu="1", pods="1"))
    for name in "ab":
        st.create(mkpod(name, ctr({"cpu": "1"}, ports=[{"hostPort": 80, "containerPort": 80}])))
        st.bind("default", name, "n")
    st.create(mkpod("c"))
    st.bind("default", "c", "no-such-node")  # as a real API server, binding does not look at nodes
    assert {p.node_name for p in st.items("Pod")} == {"n", "no-such-node"}  # type: ignore[attr-defined]


def test_accounting_follows_every_change() -> None:
    """After any sequence of binds, status changes and deletions, the per-node sums equal a
    recomputation from the stored pods."""
    st = Store(VirtualClock())
    st.create(mknode("n1", cpu="64", pods="1000"))
    st.create(mknode("n2", cpu="64", pods="1000"))
    for i in range(12):
        st.create(mkpod(f"p{i}", ctr({"cpu": f"{i + 1}00m", "memory": f"{i + 1}Mi"},
                                     ports=[{"hostPort": 1000 + i % 3, "containerPort": 1}] if i % 4 == 0 else None)))
    for i in range(12):
        try:
            st.bind("default", f"p{i}", "n1" if i % 2 else "n2")
        except Conflict:
            pass
    st.patch("Pod", "default", "p3", {"status": {"phase": "Failed"}}, subresource="status")
    st.delete("Pod", "default", "p5", grace_period_seconds=0)
    st.delete("Pod", "default", "p7")  # graceful: still counted
    fresh = NodeAccounting()
    for p in st.items("Pod"):
        fresh.add(p)  # type: ignore[arg-type]
    for node in ("n1", "n2"):
        a, b = st.accounting.usage[node], fresh.usage[node]
        assert {k: v for k, v in a.requested.items() if v} == {k: v for k, v in b.requested.items() if v}
        assert a.pods == b.pods and a.pod_keys == b.pod_keys
        assert a.ports == b.ports


def test_host_port_conflict_helper() -> None:
    used = {("TCP", 80): {"10.0.0.1"}}
    assert host_port_conflict(used, "10.0.0.1", "TCP", 80)
    assert host_port_conflict(used, "0.0.0.0", "TCP", 80)
    assert host_port_conflict(used, "", "TCP", 80)
    assert not host_port_conflict(used, "10.0.0.2", "TCP", 80)
    assert not host_port_conflict(used, "10.0.0.1", "UDP", 80)
    assert not host_port_conflict({}, "0.0.0.0", "TCP", 80)
