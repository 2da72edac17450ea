"""Simulated device plugins (the plugin side of ``k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1``):
one plugin per extended resource a node declares in ``ksched.io/topology``, serving that
resource's devices with their NUMA node and health.

Health is injected through the node annotation ``ksched.io/unhealthy-devices``: a
comma-separated list of device IDs (IDs are unique on a node) that are currently unhealthy.
Editing the annotation is a device failing or recovering; the plugin's next ListAndWatch
response carries the new health, as a real plugin's stream does.

Divergences: no gRPC sockets; the plugin never disconnects (so the 5-minute
endpointStopGracePeriod never applies); no GetPreferredAllocation and no PreStartContainer.
"""

from __future__ import annotations

from dataclasses import dataclass

from ksched.kubelet.cm.topology import DeviceGroup

__all__ = [
    "API_VERSION",
    "HEALTHY",
    "UNHEALTHY",
    "UNHEALTHY_DEVICES_ANNOTATION",
    "Device",
    "SimulatedDevicePlugin",
    "parse_unhealthy",
]

API_VERSION = "v1beta1"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
UNHEALTHY_DEVICES_ANNOTATION = "ksched.io/unhealthy-devices"


@dataclass(frozen=True, slots=True)
class Device:
    """A device as ListAndWatch reports it: ID, health, and the NUMA node (None: no topology)."""

    id: str
    health: str
    numa_node: int | None


def parse_unhealthy(value: str | None) -> frozenset[str]:
    return frozenset(x.strip() for x in (value or "").split(",") if x.strip())


class SimulatedDevicePlugin:
    """The plugin of one resource on one node."""

    def __init__(self, resource: str, groups: list[DeviceGroup], unhealthy: frozenset[str] = frozenset()) -> None:
        self.resource = resource
        self.version = API_VERSION
        self._devices = [(d, g.numa_node) for g in groups if g.resource == resource for d in g.ids]
        self.unhealthy = unhealthy & {d for d, _ in self._devices}

    def set_unhealthy(self, unhealthy: frozenset[str]) -> bool:
        """Devices failed or recovered; True when the health of one of this plugin's devices
        changed (a new ListAndWatch response is due)."""
        mine = unhealthy & {d for d, _ in self._devices}
        changed = mine != self.unhealthy
        self.unhealthy = mine
        return changed

    def list_and_watch(self) -> list[Device]:
        """The current device list (each response replaces the previous one)."""
        return [Device(d, UNHEALTHY if d in self.unhealthy else HEALTHY, numa) for d, numa in self._devices]
