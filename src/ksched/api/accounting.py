"""Per-node accounting of bound pods (requests, pod count, host ports): the conflict resolver's
ledger. The embedded store consults it atomically in ``pods/binding``, and the admission
webhook (``ksched webhook``) on real clusters, so that no binding can over-commit a node,
whichever scheduler instance sends it.

Extended resources a pod gets from DRA devices (its ``status.extendedResourceClaimStatus``
names them, DRAExtendedResource) are not the node's allocatable to check on a node that has
none of them: the devices were allocated in the pod's ResourceClaim."""

from __future__ import annotations

from dataclasses import dataclass, field

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.resources import pod_requests

__all__ = ["NodeAccounting", "NodeUsage", "host_port_conflict"]

_WILDCARD_IPS = ("", "0.0.0.0", "::")


@dataclass(slots=True)
class NodeUsage:
    requested: dict[str, int] = field(default_factory=dict)
    pods: int = 0
    ports: dict[tuple[str, int], set[str]] = field(default_factory=dict)  # (protocol, port) -> host IPs
    pod_keys: set[str] = field(default_factory=set)


def _dra_backed(pod: Pod) -> frozenset[str]:
    """The resources of the pod's ``status.extendedResourceClaimStatus.requestMappings``."""
    st = (pod.raw.get("status") or {}).get("extendedResourceClaimStatus")
    if not st:
        return frozenset()
    return frozenset((m or {}).get("resourceName", "") for m in st.get("requestMappings") or ())


def _ports(pod: Pod) -> list[tuple[str, str, int]] | tuple[()]:
    hp = pod.host_ports()
    if not hp:
        return ()  # (most pods: no list made)
    return [(p.host_ip or "0.0.0.0", p.protocol, p.host_port) for p in hp]


def host_port_conflict(used: dict[tuple[str, int], set[str]], ip: str, proto: str, port: int) -> bool:
    ips = used.get((proto, port))
    if not ips:
        return False
    if ip in _WILDCARD_IPS:
        return True
    return ip in ips or any(u in _WILDCARD_IPS for u in ips)


def counts_on_node(pod: Pod) -> bool:
    """A pod occupies its node's resources until it is terminal or gone."""
    return bool(pod.node_name) and not pod.is_terminal


def _same_charge(old: Pod, new: Pod) -> bool:
    """Whether two versions of a pod charge the same node with the same requests and ports:
    the same node and terminal state, and the very parsed containers, overhead and pod-level
    requests (a status write shares them: ``Pod.with_status``)."""
    return (old.node_name == new.node_name and old.is_terminal == new.is_terminal and old.key == new.key
            and old.containers is new.containers and old.init_containers is new.init_containers
            and old.overhead is new.overhead and old.pod_level_requests is new.pod_level_requests)


_NO_USAGE = NodeUsage()  # (read only: a node with no pod yet)

# What a pod charges its node: its requests and host ports (NodeAccounting.check_charge).
_Charge = tuple[dict[str, int], list[tuple[str, str, int]] | tuple[()]]


class NodeAccounting:
    """Sum of the requests of the pods bound to each node (terminal pods excluded)."""

    def __init__(self) -> None:
        self.usage: dict[str, NodeUsage] = {}

    def add(self, pod: Pod) -> None:
        if not counts_on_node(pod):
            return
        u = self.usage.get(pod.node_name)
        if u is None:
            u = self.usage[pod.node_name] = NodeUsage()
        key = pod.key
        if key in u.pod_keys:
            return
        u.pod_keys.add(key)
        u.pods += 1
        for k, v in pod_requests(pod).items():
            u.requested[k] = u.requested.get(k, 0) + v
        for ip, proto, port in _ports(pod):
            u.ports.setdefault((proto, port), set()).add(ip)

    def remove(self, pod: Pod) -> None:
        if not pod.node_name:
            return
        u = self.usage.get(pod.node_name)
        if u is None or pod.key not in u.pod_keys:
            return
        u.pod_keys.discard(pod.key)
        u.pods -= 1
        for k, v in pod_requests(pod).items():
            u.requested[k] = u.requested.get(k, 0) - v
        for ip, proto, port in _ports(pod):
            ips = u.ports.get((proto, port))
            if ips is not None:
                ips.discard(ip)
                if not ips:
                    del u.ports[(proto, port)]

    def update(self, old: Pod | None, new: Pod | None) -> None:
        if old is not None and new is not None and _same_charge(old, new):
            return  # a status write: what the pod charges its node is unchanged
        if old is not None:
            self.remove(old)
        if new is not None:
            self.add(new)

    def check_charge(self, pod: Pod, node: Node | None, node_name: str) -> tuple[str | None, _Charge | None]:
        """:meth:`check`, and when the pod fits what it charges the node (its requests and host
        ports, read in the same order) for :meth:`add_charged` of its bound version: a binding
        reads them once, not in the check and again in ``add`` (the bound version shares the
        parsed containers and the cache they come from: ``KubeObject.shallow_copy``)."""
        if node is None:
            return f'node "{node_name}" not found', None
        u = self.usage.get(node_name) or _NO_USAGE
        alloc = node.allocatable
        max_pods = alloc.get("pods", 0)
        if u.pods + 1 > max_pods:
            return f"node {node_name} would exceed its pod limit ({u.pods} of {max_pods} pods in use)", None
        from_dra: frozenset[str] | None = None  # read when a resource the node lacks is asked for
        requested = u.requested
        reqs = pod_requests(pod)
        for k, v in reqs.items():
            if v <= 0:
                continue
            have = alloc.get(k, 0)
            if have <= 0:
                if from_dra is None:
                    from_dra = _dra_backed(pod)
                if k in from_dra:
                    continue
            used = requested.get(k, 0)
            if used + v > have:
                return (f"node {node_name} would be over-committed on {k}: requested {v}, "
                        f"allocatable {have}, already requested {used}"), None
        ports = _ports(pod)
        for ip, proto, port in ports:
            if host_port_conflict(u.ports, ip, proto, port):
                return f"node {node_name} already has host port {ip}:{port}/{proto} in use", None
        return None, (reqs, ports)

    def add_charged(self, pod: Pod, charge: _Charge) -> None:
        """:meth:`add` of ``pod`` given what it charges (:meth:`check_charge` of a version with the
        same containers, overhead, pod-level requests and host ports)."""
        node_name = pod.node_name
        if not node_name or pod.is_terminal:
            return
        u = self.usage.get(node_name)
        if u is None:
            u = self.usage[node_name] = NodeUsage()
        key = pod.key
        keys = u.pod_keys
        if key in keys:
            return
        keys.add(key)
        u.pods += 1
        reqs, ports = charge
        requested = u.requested
        for k, v in reqs.items():
            requested[k] = requested.get(k, 0) + v
        for ip, proto, port in ports:
            u.ports.setdefault((proto, port), set()).add(ip)

    def check(self, pod: Pod, node: Node | None, node_name: str) -> str | None:
        """Why binding ``pod`` to the node would over-commit it, or None when it fits."""
        if node is None:
            return f'node "{node_name}" not found'
        u = self.usage.get(node_name) or _NO_USAGE
        alloc = node.allocatable
        max_pods = alloc.get("pods", 0)
        if u.pods + 1 > max_pods:
            return f"node {node_name} would exceed its pod limit ({u.pods} of {max_pods} pods in use)"
        from_dra: frozenset[str] | None = None  # read when a resource the node lacks is asked for
        for k, v in pod_requests(pod).items():
            if v <= 0:
                continue
            have = alloc.get(k, 0)
            if have <= 0:
                if from_dra is None:
                    from_dra = _dra_backed(pod)
                if k in from_dra:
                    continue
            used = u.requested.get(k, 0)
            if used + v > have:
                return (f"node {node_name} would be over-committed on {k}: requested {v}, "
                        f"allocatable {have}, already requested {used}")
        for ip, proto, port in _ports(pod):
            if host_port_conflict(u.ports, ip, proto, port):
                return f"node {node_name} already has host port {ip}:{port}/{proto} in use"
        return None
