"""NodePorts, with the cases of upstream's node_ports_test.go (1.36)."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.pod import Pod
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ActionType, EventResource, QueueingHint
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo, PodInfo
from ksched.scheduler.plugins.nodeports import ERR_REASON, NodePorts, fits
from ksched.testing import PluginRunner, make_node, make_pod

CONFLICT = Status(Code.UNSCHEDULABLE, "node(s) didn't have free ports for the requested pod ports")

_n = 0


def new_pod(host: str, *port_infos: str, **kw: Any) -> Pod:
    """Upstream's newPod: ports as "PROTOCOL/hostIP/hostPort"."""
    global _n
    _n += 1
    ports = []
    for info in port_infos:
        proto, ip, port = info.split("/")
        ports.append((ip, proto, int(port)))
    return make_pod(f"p{_n}", node_name=host, host_ports=ports, **kw)


CASES = [
    pytest.param(["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], None, id="other port"),
    pytest.param(["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], CONFLICT, id="same udp port"),
    pytest.param(["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], CONFLICT, id="same tcp port"),
    pytest.param(["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], None, id="different host ip"),
    pytest.param(["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], None, id="different protocol"),
    pytest.param(["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], CONFLICT,
                 id="second udp port conflict"),
    pytest.param(["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
                 CONFLICT, id="first tcp port conflict"),
    pytest.param(["TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], CONFLICT,
                 id="first tcp port conflict due to 0.0.0.0 hostIP"),
    pytest.param(["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], CONFLICT,
                 id="TCP hostPort conflict due to 0.0.0.0 hostIP"),
    pytest.param(["TCP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], CONFLICT,
                 id="second tcp port conflict to 0.0.0.0 hostIP"),
    pytest.param(["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], None, id="second different protocol"),
    pytest.param(["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"], CONFLICT,
                 id="UDP hostPort conflict due to 0.0.0.0 hostIP"),
    pytest.param(["TCP//8001"], ["TCP/10.1.1.1/8001"], CONFLICT, id="empty hostIP means 0.0.0.0"),
    pytest.param(["TCP/10.1.1.1/8001"], ["TCP//8001"], CONFLICT, id="existing empty hostIP means 0.0.0.0"),
]


@pytest.mark.parametrize(("want_ports", "used_ports", "want"), CASES)
def test_filter(want_ports: list[str], used_ports: list[str], want: Status | None) -> None:
    r = PluginRunner(["NodePorts"], [make_node("m1")], [new_pod("m1", *used_ports)])
    got = r.filter(new_pod("", *want_ports))["m1"]
    if want is None:
        assert got is None
    else:
        assert got == want and got is not None and got.plugin == "NodePorts"


def test_pre_filter_skips_pods_without_host_ports() -> None:
    r = PluginRunner(["NodePorts"], [make_node("m1")])
    state, _, st = r.pre_filter(make_pod("p"))
    assert st is None and "NodePorts" in state.skip_filter_plugins
    # container ports without a hostPort do not count either
    pod = make_pod("q", containers=[{"name": "c", "image": "x", "ports": [{"containerPort": 80}]}])
    state, _, st = r.pre_filter(pod)
    assert "NodePorts" in state.skip_filter_plugins
    _, st2 = NodePorts().pre_filter(CycleState(), pod, r.snapshot.all_nodes())
    assert st2 == Status.skip()


def test_filter_without_pre_filter_is_an_error() -> None:
    ni = NodeInfo(make_node("n"))
    st = NodePorts().filter(CycleState(), make_pod("p"), ni)
    assert st is not None and st.code == Code.ERROR
    assert st.message() == 'reading "PreFilterNodePorts" from cycleState: not found'


def sidecar_pod(name: str, node: str, port: int, restart_policy: str | None = "Always") -> Pod:
    init: dict[str, Any] = {"name": "side", "image": "x",
                            "ports": [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]}
    if restart_policy:
        init["restartPolicy"] = restart_policy
    return make_pod(name, node_name=node, init_containers=[init])


def test_sidecar_init_container_ports_count_but_plain_init_container_ports_do_not() -> None:
    r = PluginRunner(["NodePorts"], [make_node("m1")], [sidecar_pod("s", "m1", 8080)])
    assert r.filter(new_pod("", "TCP/0.0.0.0/8080"))["m1"] == CONFLICT
    r2 = PluginRunner(["NodePorts"], [make_node("m1")], [sidecar_pod("s", "m1", 8080, None)])
    assert r2.filter(new_pod("", "TCP/0.0.0.0/8080"))["m1"] is None
    # the incoming pod's sidecar ports are checked too
    r3 = PluginRunner(["NodePorts"], [make_node("m1")], [new_pod("m1", "TCP/0.0.0.0/9090")])
    assert r3.filter(sidecar_pod("in", "", 9090))["m1"] == CONFLICT


def test_exported_fits() -> None:
    ni = NodeInfo(make_node("n"))
    ni.add_pod(PodInfo(new_pod("n", "TCP/127.0.0.1/80")))
    assert not fits(new_pod("", "TCP/0.0.0.0/80"), ni)
    assert fits(new_pod("", "UDP/0.0.0.0/80"), ni)


def test_vectorized_filter_many_nodes() -> None:
    nodes = [make_node(f"n{i}") for i in range(30)]
    pods = [new_pod(f"n{i}", f"TCP/10.0.0.{i % 3}/{8000 + i % 4}") for i in range(0, 30, 2)]
    r = PluginRunner(["NodePorts"], nodes, pods)
    for spec in ("TCP/0.0.0.0/8000", "TCP/10.0.0.1/8001", "UDP/0.0.0.0/8000", "TCP/10.0.0.2/8002"):
        out = r.filter(new_pod("", spec))  # asserts vectorized == per-node
        proto, ip, port = spec.split("/")
        for i in range(30):
            used = i % 2 == 0 and proto == "TCP" and 8000 + i % 4 == int(port) and (
                ip == "0.0.0.0" or ip == f"10.0.0.{i % 3}")
            assert (out[f"n{i}"] == CONFLICT) == used, (spec, i)


def test_reason() -> None:
    assert ERR_REASON == "node(s) didn't have free ports for the requested pod ports"


# ---------------------------------------------------------------- events and hints


def test_events_to_register() -> None:
    evs = NodePorts().events_to_register()
    assert [(e.event.resource, e.event.action) for e in evs] == [
        (EventResource.POD, ActionType.DELETE), (EventResource.NODE, ActionType.ADD)]
    assert evs[0].hint is not None and evs[1].hint is None


def host_port_pod(port: int | None, node: str = "", nominated: str = "") -> Pod:
    return make_pod("x", node_name=node, nominated_node_name=nominated, host_ports=[port] if port else ())


HINT_CASES = [
    pytest.param(host_port_pod(None), QueueingHint.QUEUE_SKIP, id="skip-queue-on-unscheduled"),
    pytest.param(host_port_pod(None, "fake-node"), QueueingHint.QUEUE_SKIP, id="skip-queue-on-non-hostport"),
    pytest.param(host_port_pod(8081, "fake-node"), QueueingHint.QUEUE_SKIP,
                 id="skip-queue-on-unrelated-hostport"),
    pytest.param(host_port_pod(8080, "fake-node"), QueueingHint.QUEUE, id="queue-on-released-hostport"),
    pytest.param(host_port_pod(8080, nominated="fake-node"), QueueingHint.QUEUE,
                 id="queue-on-released-hostport-of-nominated-pod"),
    pytest.param(host_port_pod(8080), QueueingHint.QUEUE_SKIP, id="skip-unscheduled-with-same-port"),
]


@pytest.mark.parametrize(("deleted", "want"), HINT_CASES)
def test_hint_pod_deleted(deleted: Pod, want: QueueingHint) -> None:
    pod = make_pod("target", host_ports=[8080])
    assert NodePorts.is_schedulable_after_pod_deleted(pod, deleted, None) == want


def test_hint_pod_deleted_wrong_object_raises() -> None:
    with pytest.raises(TypeError):
        NodePorts.is_schedulable_after_pod_deleted(make_pod("t", host_ports=[8080]), "not-a-pod", None)
