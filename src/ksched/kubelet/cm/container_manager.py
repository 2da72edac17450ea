"""A simulated node's resource managers put together (``pkg/kubelet/cm/container_manager_linux.go``):
the device manager and the CPU manager are the topology manager's hint providers (in that
order), and the topology manager is the pod admit handler that makes them allocate
(``GetAllocateResourcesPodAdmitHandler``).

The kubelet settings come from a subset of KubeletConfiguration (kubelet.config.k8s.io/v1beta1)
fields, given per node in the annotation ``ksched.io/kubelet-config`` (JSON or YAML)::

    ksched.io/kubelet-config: '{"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node",
                                "topologyManagerScope": "container", "reservedSystemCPUs": "0,8"}'

* ``cpuManagerPolicy``: ``none`` (default) or ``static``.
* ``topologyManagerPolicy``: ``none`` (default), ``best-effort``, ``restricted``,
  ``single-numa-node``; ``topologyManagerScope``: ``container`` (default) or ``pod``.
* ``reservedSystemCPUs``: the CPUs kept for the system (a cpuset list); without it the static
  policy reserves ceil(``kubeReserved.cpu`` + ``systemReserved.cpu``) CPUs, and without those
  fields ceil(capacity - allocatable) of the node's CPU, which is what they amount to (a node
  that states no CPU capacity has the CPUs of its layout).

The hardware comes from ``ksched.io/topology`` (``ksched.kubelet.cm.topology``), device health
from ``ksched.io/unhealthy-devices`` (``devicemanager.plugin``). What a pod was given is
written on the pod by the kubelet: ``ksched.io/cpuset`` (container -> exclusive CPUs, list
format) and ``ksched.io/devices`` (container -> resource -> device IDs), both JSON.

Divergences: no memory manager; the topology manager's ``max-allowable-numa-nodes`` (8) is
enforced but no other policy option is available.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import yaml

from ksched.api.node import Node
from ksched.api.pod import Pod, resource_units
from ksched.kubelet.cm.cpumanager.policy_static import StaticPolicy
from ksched.kubelet.cm.cpuset import format_cpuset, parse
from ksched.kubelet.cm.devicemanager.manager import DeviceManager
from ksched.kubelet.cm.devicemanager.plugin import (
    UNHEALTHY_DEVICES_ANNOTATION,
    SimulatedDevicePlugin,
    parse_unhealthy,
)
from ksched.kubelet.cm.topology import TOPOLOGY_ANNOTATION, NodeLayout, TopologyError, parse_layout
from ksched.kubelet.cm.topologymanager.policy import POLICIES, POLICY_NONE, Policy
from ksched.kubelet.cm.topologymanager.scope import SCOPE_CONTAINER, SCOPES, HintProvider, Scope
from ksched.kubelet.lifecycle import PodAdmitAttributes, PodAdmitResult

__all__ = [
    "CPUSET_ANNOTATION",
    "DEVICES_ANNOTATION",
    "KUBELET_CONFIG_ANNOTATION",
    "ManagerConfig",
    "NodeResourceManagers",
    "managers_for_node",
]

KUBELET_CONFIG_ANNOTATION = "ksched.io/kubelet-config"
CPUSET_ANNOTATION = "ksched.io/cpuset"
DEVICES_ANNOTATION = "ksched.io/devices"
MAX_ALLOWABLE_NUMA_NODES = 8
CPU_MANAGER_POLICIES = ("none", "static")


@dataclass(frozen=True)
class ManagerConfig:
    cpu_manager_policy: str = "none"
    topology_manager_policy: str = POLICY_NONE
    topology_manager_scope: str = SCOPE_CONTAINER
    reserved_system_cpus: frozenset[int] | None = None
    reserved_cpu_milli: int | None = None  # kubeReserved.cpu + systemReserved.cpu

    @classmethod
    def from_kubelet_config(cls, d: dict[str, Any], where: str) -> ManagerConfig:
        """The fields named in the module docstring, out of a KubeletConfiguration; other
        fields are left to the rest of the kubelet."""
        def choice(key: str, allowed: tuple[str, ...], default: str) -> str:
            v = d.get(key, default)
            if v not in allowed:
                raise TopologyError(f"{where}: {key}: {v!r} is not one of {', '.join(allowed)}")
            return str(v)

        reserved: frozenset[int] | None = None
        if d.get("reservedSystemCPUs") not in (None, ""):
            try:
                reserved = parse(str(d["reservedSystemCPUs"]))
            except ValueError as e:
                raise TopologyError(f"{where}: reservedSystemCPUs: {e}") from None
        milli: int | None = None
        for key in ("kubeReserved", "systemReserved"):
            block = d.get(key)
            if block is None:
                continue
            if not isinstance(block, dict):
                raise TopologyError(f"{where}: {key}: must be a map of resource to quantity")
            if "cpu" in block:
                try:
                    milli = (milli or 0) + resource_units("cpu", block["cpu"])
                except (ValueError, TypeError) as e:
                    raise TopologyError(f"{where}: {key}.cpu: {e}") from None
        return cls(choice("cpuManagerPolicy", CPU_MANAGER_POLICIES, "none"),
                   choice("topologyManagerPolicy", POLICIES, POLICY_NONE),
                   choice("topologyManagerScope", SCOPES, SCOPE_CONTAINER), reserved, milli)

    @classmethod
    def from_node(cls, node: Node) -> ManagerConfig:
        where = f"node {node.name}: annotation {KUBELET_CONFIG_ANNOTATION}"
        text = node.annotations.get(KUBELET_CONFIG_ANNOTATION)
        if not text:
            return cls()
        try:
            d = json.loads(text)
        except ValueError:
            try:
                d = yaml.safe_load(text)
            except yaml.YAMLError as e:
                raise TopologyError(f"{where}: not JSON or YAML: {e}") from None
        if not isinstance(d, dict):
            raise TopologyError(f"{where}: must be an object of KubeletConfiguration fields")
        return cls.from_kubelet_config(d, where)


class NodeResourceManagers:
    """The CPU, device and topology managers of one node; ``admit`` is its pod admit handler."""

    def __init__(self, node: Node, layout: NodeLayout | None, config: ManagerConfig) -> None:
        self.node_name = node.name
        self.layout = layout
        self.config = config
        numa_nodes = layout.topology.numa_nodes if layout is not None else (0,)
        if config.topology_manager_policy != POLICY_NONE and len(numa_nodes) > MAX_ALLOWABLE_NUMA_NODES:
            raise TopologyError(f"node {node.name}: unsupported on machines with more than "
                                f"{MAX_ALLOWABLE_NUMA_NODES} NUMA Nodes")
        self.scope = Scope(Policy(config.topology_manager_policy, numa_nodes), config.topology_manager_scope, [])
        self.devices = DeviceManager(numa_nodes, self.scope)
        self.cpu: StaticPolicy | None = None
        providers: list[HintProvider] = [self.devices]
        if config.cpu_manager_policy == "static":
            if layout is None:
                raise TopologyError(f"node {node.name}: cpuManagerPolicy static needs the node's CPU layout in "
                                    f"annotation {TOPOLOGY_ANNOTATION}")
            if config.reserved_cpu_milli is not None:
                milli = config.reserved_cpu_milli
            else:  # a node that states no capacity has the CPUs of its layout
                capacity = node.capacity.get("cpu", layout.topology.num_cpus * 1000)
                milli = max(0, capacity - node.allocatable.get("cpu", capacity))
            self.cpu = StaticPolicy(layout.topology, math.ceil(milli / 1000), self.scope,
                                    config.reserved_system_cpus, node.name)
            providers.append(self.cpu)
        self.scope.providers = providers
        unhealthy = parse_unhealthy(node.annotations.get(UNHEALTHY_DEVICES_ANNOTATION))
        self.plugins: list[SimulatedDevicePlugin] = []
        if layout is not None:
            for resource in layout.device_resources():
                plugin = SimulatedDevicePlugin(resource, list(layout.devices), unhealthy)
                self.plugins.append(plugin)
                self.devices.register(plugin)

    # ---------------------------------------------------------------- the admit handler

    def admit(self, attrs: PodAdmitAttributes) -> PodAdmitResult:
        pod = attrs.pod
        active = {p.uid for p in attrs.other_pods} | {pod.uid}
        self._remove_stale(active)
        result = self.scope.admit(pod)
        if not result.admit:
            self.remove_pod(pod.uid)
        return result

    def _remove_stale(self, active: set[str]) -> None:
        self.devices.update_allocated_devices(active)
        if self.cpu is not None:
            for uid in [u for u in self.cpu.assignments if u not in active]:
                self.cpu.remove_pod(uid)
        for uid in {k[0] for k in self.scope.affinity} - active:
            self.scope.remove_pod(uid)

    def remove_pod(self, pod_uid: str) -> None:
        """The pod ended (or was refused): its CPUs and devices are free again."""
        self.devices.remove_pod(pod_uid)
        if self.cpu is not None:
            self.cpu.remove_pod(pod_uid)
        self.scope.remove_pod(pod_uid)

    # ---------------------------------------------------------------- what the kubelet reports

    def pod_annotations(self, pod: Pod) -> dict[str, str]:
        """``ksched.io/cpuset`` and ``ksched.io/devices`` for what the pod was given (absent
        when it was given nothing)."""
        out: dict[str, str] = {}
        if self.cpu is not None and (cpus := self.cpu.assigned(pod.uid)):
            order = [c.name for c in (*pod.init_containers, *pod.containers)]
            out[CPUSET_ANNOTATION] = json.dumps({c: format_cpuset(cpus[c]) for c in order if c in cpus})
        if devs := self.devices.devices_of(pod.uid):
            out[DEVICES_ANNOTATION] = json.dumps(devs, sort_keys=True)
        return out

    def set_unhealthy(self, unhealthy: frozenset[str]) -> bool:
        """New device health (the plugins' next ListAndWatch); True if a resource changed."""
        changed = False
        for plugin in self.plugins:
            if plugin.set_unhealthy(unhealthy):
                self.devices.update_devices(plugin.resource, plugin.list_and_watch())
                changed = True
        return changed

    def device_capacity(self) -> dict[str, tuple[int, int]]:
        return self.devices.get_capacity()


def managers_for_node(node: Node) -> NodeResourceManagers:
    """The node's managers from its annotations; TopologyError names the annotation and field
    that cannot be used."""
    text = node.annotations.get(TOPOLOGY_ANNOTATION)
    layout = parse_layout(text, node.name) if text else None
    return NodeResourceManagers(node, layout, ManagerConfig.from_node(node))
