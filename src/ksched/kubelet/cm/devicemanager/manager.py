"""The kubelet's device plugin manager (``pkg/kubelet/cm/devicemanager/manager.go``,
``topology_hints.go``, ``pod_devices.go``): plugins register a resource, their ListAndWatch
responses give the node's capacity (all devices) and allocatable (healthy devices) for it, and
at admission each container gets concrete device IDs.

* Allocation per container, for each device resource in its limits: devices freed by the pod's
  finished init containers first, then the devices on the NUMA nodes of the topology manager's
  hint, then the others (devices on other NUMA nodes, then devices without topology). Fewer
  free healthy devices than asked: "requested number of devices unavailable for %s.
  Requested: %d, Available: %d" (the kubelet rejects the pod with UnexpectedAdmissionError).
* Hints per resource: every combination of NUMA nodes holding enough free healthy devices;
  those as narrow as the request could be on an idle node are preferred; a resource whose
  devices report no NUMA node has no preference.
* A pod's devices are freed when it ends (and lazily before each allocation, for pods no longer
  active, as upstream's UpdateAllocatedDevices).
* An unhealthy device under a running pod stays assigned to it; only allocatable drops.

Divergences: no checkpoint file; no GetPreferredAllocation; devices of one device group have
one NUMA node; where upstream iterates Go sets (random order) devices are taken in natural
order of their IDs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ksched.api.pod import Container, Pod
from ksched.api.resources import is_extended_resource
from ksched.kubelet.cm.admission import AllocationError
from ksched.kubelet.cm.devicemanager.plugin import API_VERSION, HEALTHY, Device, SimulatedDevicePlugin
from ksched.kubelet.cm.topologymanager import bitmask
from ksched.kubelet.cm.topologymanager.policy import AffinityStore, ProviderHints, TopologyHint

__all__ = ["DeviceAllocationError", "DeviceManager", "RegistrationError"]


class DeviceAllocationError(AllocationError):
    """A container's devices cannot be found; the message is upstream's."""


class RegistrationError(Exception):
    pass


def _natural(s: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


class _NoAffinity:
    def get_affinity(self, pod_uid: str, container: str) -> TopologyHint:
        return TopologyHint()


class DeviceManager:
    def __init__(self, numa_nodes: Sequence[int], affinity: AffinityStore | None = None) -> None:
        self.numa_nodes = tuple(numa_nodes)
        self.affinity: AffinityStore = affinity if affinity is not None else _NoAffinity()
        self.plugins: dict[str, SimulatedDevicePlugin] = {}
        self.all_devices: dict[str, dict[str, Device]] = {}
        self.healthy: dict[str, set[str]] = {}
        self.allocated: dict[str, set[str]] = {}
        # pod uid -> container -> resource -> device IDs
        self.pod_devices: dict[str, dict[str, dict[str, frozenset[str]]]] = {}
        self.devices_to_reuse: dict[str, dict[str, set[str]]] = {}

    # ---------------------------------------------------------------- registration, ListAndWatch

    def register(self, plugin: SimulatedDevicePlugin) -> None:
        """The Register RPC, then the first ListAndWatch response."""
        if plugin.version != API_VERSION:
            raise RegistrationError(f"requested API version {plugin.version!r} is not supported by kubelet. "
                                    f"Supported version is {API_VERSION!r}")
        if not is_extended_resource(plugin.resource):
            raise RegistrationError(f"the ResourceName {plugin.resource!r} is invalid")
        self.plugins[plugin.resource] = plugin
        self.update_devices(plugin.resource, plugin.list_and_watch())

    def update_devices(self, resource: str, devices: Iterable[Device]) -> None:
        """A ListAndWatch response: the resource's device list is replaced."""
        devs = {d.id: d for d in devices}
        self.all_devices[resource] = devs
        self.healthy[resource] = {d.id for d in devs.values() if d.health == HEALTHY}
        self.allocated.setdefault(resource, set())

    def get_capacity(self) -> dict[str, tuple[int, int]]:
        """resource -> (capacity: every device, allocatable: the healthy ones)."""
        return {r: (len(devs), len(self.healthy.get(r, ()))) for r, devs in sorted(self.all_devices.items())}

    def is_device_plugin_resource(self, resource: str) -> bool:
        return resource in self.all_devices

    # ---------------------------------------------------------------- pods

    def container_request(self, container: Container) -> dict[str, int]:
        limits = container.limits or container.requests
        return {r: n for r, n in sorted(limits.items()) if self.is_device_plugin_resource(r) and n > 0}

    def devices_of(self, pod_uid: str) -> dict[str, dict[str, list[str]]]:
        return {c: {r: sorted(ids, key=_natural) for r, ids in res.items()}
                for c, res in self.pod_devices.get(pod_uid, {}).items()}

    def remove_pod(self, pod_uid: str) -> None:
        conts = self.pod_devices.pop(pod_uid, None)
        self.devices_to_reuse.pop(pod_uid, None)
        for res in (conts or {}).values():
            for r, ids in res.items():
                self.allocated.get(r, set()).difference_update(ids)

    def update_allocated_devices(self, active: Iterable[str]) -> None:
        """Free the devices of pods that are no longer active."""
        keep = set(active)
        for uid in [u for u in self.pod_devices if u not in keep]:
            self.remove_pod(uid)

    def _container_devices(self, pod_uid: str, container: str, resource: str) -> frozenset[str] | None:
        return self.pod_devices.get(pod_uid, {}).get(container, {}).get(resource)

    # ---------------------------------------------------------------- topology hints

    def _has_topology(self, resource: str) -> bool:
        return any(d.numa_node is not None for d in self.all_devices.get(resource, {}).values())

    def _available(self, resource: str) -> set[str]:
        return self.healthy.get(resource, set()) - self.allocated.get(resource, set())

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints:
        return self._hints(pod, self.container_request(container), container.name)

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints:
        return self._hints(pod, self.pod_request(pod), None)

    def pod_request(self, pod: Pod) -> dict[str, int]:
        """Per resource: max of the init containers' peak and the long-running containers' sum."""
        out: dict[str, int] = {}
        resources = {r for c in (*pod.init_containers, *pod.containers) for r in self.container_request(c)}
        for r in resources:
            by_init = by_sidecars = 0
            for c in pod.init_containers:
                n = self.container_request(c).get(r, 0)
                if c.is_sidecar:
                    by_sidecars += n
                else:
                    by_init = max(by_init, by_sidecars + n)
            by_app = sum(self.container_request(c).get(r, 0) for c in pod.containers)
            out[r] = max(by_init, by_app + by_sidecars)
        return out

    def _hints(self, pod: Pod, requests: dict[str, int], container: str | None) -> ProviderHints:
        hints: dict[str, list[TopologyHint] | None] = {}
        for resource, requested in requests.items():
            if not self._has_topology(resource):
                hints[resource] = None
                continue
            if container is not None:
                allocated = self._container_devices(pod.uid, container, resource)
            else:
                ids = [res.get(resource, frozenset()) for res in self.pod_devices.get(pod.uid, {}).values()]
                allocated = frozenset().union(*ids) if ids else None
            if allocated:
                hints[resource] = ([] if len(allocated) != requested else
                                   self.generate_hints(resource, set(allocated), set(), requested))
                continue
            available = self._available(resource)
            reusable = self.devices_to_reuse.get(pod.uid, {}).get(resource, set())
            if len(available | reusable) < requested:
                hints[resource] = []
                continue
            hints[resource] = self.generate_hints(resource, available, reusable, requested)
        return hints or None

    def generate_hints(self, resource: str, available: set[str], reusable: set[str], request: int) -> list[TopologyHint]:
        devs = self.all_devices[resource]
        min_affinity = len(self.numa_nodes)
        hints: list[TopologyHint] = []

        def in_mask(mask: int, d: str) -> bool:
            n = devs[d].numa_node
            return n is not None and bool(mask >> n & 1)

        for mask in bitmask.iterate_bit_masks(self.numa_nodes):
            if sum(1 for d in devs if in_mask(mask, d)) >= request and bitmask.count(mask) < min_affinity:
                min_affinity = bitmask.count(mask)
            matching = 0
            skip = False
            for d in reusable:
                if devs[d].numa_node is None:
                    continue
                if not in_mask(mask, d):
                    skip = True
                    break
                matching += 1
            if skip:
                continue
            matching += sum(1 for d in available if in_mask(mask, d))
            if matching < request:
                continue
            hints.append(TopologyHint(mask, False))
        return [TopologyHint(h.numa_affinity, bitmask.count(h.numa_affinity or 0) == min_affinity) for h in hints]

    # ---------------------------------------------------------------- allocation

    def allocate(self, pod: Pod, container: Container) -> None:
        """Assign devices to the container (init containers before app containers, as the
        topology manager calls it). Raises DeviceAllocationError."""
        reuse = self.devices_to_reuse.setdefault(pod.uid, {})
        for uid in [u for u in self.devices_to_reuse if u != pod.uid]:
            del self.devices_to_reuse[uid]
        self._allocate_container(pod, container, reuse)
        mine = self.pod_devices.get(pod.uid, {}).get(container.name, {})
        init = next((c for c in pod.init_containers if c.name == container.name), None)
        for r, ids in mine.items():
            if init is not None and not init.is_sidecar:
                reuse.setdefault(r, set()).update(ids)
            else:
                reuse.setdefault(r, set()).difference_update(ids)

    def _allocate_container(self, pod: Pod, container: Container, reuse: dict[str, set[str]]) -> None:
        for resource, required in self.container_request(container).items():
            existing = self._container_devices(pod.uid, container.name, resource)
            if existing is not None:
                if len(existing) != required:
                    raise DeviceAllocationError(f"pod {pod.name!r} container {container.name!r} changed request for "
                                                f"resource {resource!r} from {len(existing)} to {required}")
                continue
            ids = self._devices_to_allocate(pod, container.name, resource, required, reuse.get(resource, set()))
            self.pod_devices.setdefault(pod.uid, {}).setdefault(container.name, {})[resource] = frozenset(ids)

    def _devices_to_allocate(self, pod: Pod, container: str, resource: str, required: int,
                             reusable: set[str]) -> list[str]:
        needed = required
        allocated: list[str] = []
        in_use = self.allocated.setdefault(resource, set())

        def take_from(devices: Iterable[str]) -> bool:
            nonlocal needed
            for d in sorted(set(devices) - set(allocated), key=_natural):
                if needed == 0:
                    break
                in_use.add(d)
                allocated.append(d)
                needed -= 1
            return needed == 0

        if take_from(reusable):
            return allocated
        available = self.healthy.get(resource, set()) - in_use
        if len(available) < needed:
            raise DeviceAllocationError(f"requested number of devices unavailable for {resource}. "
                                        f"Requested: {needed}, Available: {len(available)}")
        aligned, unaligned, no_affinity = self._filter_by_affinity(pod.uid, container, resource, available)
        for group in (aligned, unaligned, no_affinity):
            if take_from(group):
                return allocated
        raise DeviceAllocationError(f"unexpectedly allocated less resources than required. Requested: {required}, "
                                    f"Got: {required - needed}")

    def _filter_by_affinity(self, pod_uid: str, container: str, resource: str,
                            available: set[str]) -> tuple[set[str], set[str], set[str]]:
        hint = self.affinity.get_affinity(pod_uid, container)
        if not self._has_topology(resource) or hint.numa_affinity is None:
            return set(), set(), set(available)
        devs = self.all_devices[resource]
        aligned, unaligned, none = set(), set(), set()
        for d in available:
            n = devs[d].numa_node
            if n is None:
                none.add(d)
            elif hint.numa_affinity >> n & 1:
                aligned.add(d)
            else:
                unaligned.add(d)
        return aligned, unaligned, none
