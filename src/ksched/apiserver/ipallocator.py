"""Cluster IPs and node ports of Services, as the API server's service registry allocates them
(``pkg/registry/core/service/ipallocator`` and ``portallocator``): a given address or port must
be in range and free; a missing one is taken from the dynamic band (the upper part of the range,
above the static band kept for addresses users pick).

Divergence: addresses and ports are handed out in order (upstream picks at random), so a
simulation with a seed places the same Service at the same address every run. Single-stack
IPv4 only.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ksched.api.errors import FieldError, Path
from ksched.api.meta import KubeObject

__all__ = ["DEFAULT_NODE_PORT_RANGE", "DEFAULT_SERVICE_CIDR", "ServiceAllocator"]

DEFAULT_SERVICE_CIDR = "10.96.0.0/12"
DEFAULT_NODE_PORT_RANGE = (30000, 32767)


def _static_band(size: int, lo: int, hi: int, step: int) -> int:
    """Upstream's calculateRangeOffset: min(max(lo, size/step), hi)."""
    return min(max(lo, size // step), hi)


class ServiceAllocator:
    """Free and used cluster IPs and node ports, kept from the Services the store commits."""

    def __init__(self, cidr: str = DEFAULT_SERVICE_CIDR, node_ports: tuple[int, int] = DEFAULT_NODE_PORT_RANGE) -> None:
        self.network = ipaddress.ip_network(cidr)
        self.node_ports = node_ports
        self._ips: dict[str, str] = {}  # ip -> service key
        self._ports: dict[tuple[int, str], str] = {}  # (nodePort, protocol) -> service key
        size = self.network.num_addresses
        self._ip_start = _static_band(size, 16, 256, 16)
        span = node_ports[1] - node_ports[0] + 1
        self._port_start = node_ports[0] + _static_band(span, 16, 128, 32)
        self._next_ip = self._ip_start
        self._next_port = self._port_start

    # ------------------------------------------------------------ bookkeeping

    def observe(self, old: KubeObject | None, new: KubeObject | None) -> None:
        """A Service was committed (``new`` None: deleted)."""
        if old is not None:
            for ip in _cluster_ips(old.raw):
                if self._ips.get(ip) == old.key:
                    del self._ips[ip]
            for port in _node_ports(old.raw):
                if self._ports.get(port) == old.key:
                    del self._ports[port]
        if new is not None:
            for ip in _cluster_ips(new.raw):
                self._ips[ip] = new.key
            for port in _node_ports(new.raw):
                self._ports[port] = new.key

    def clear(self) -> None:
        self._ips.clear()
        self._ports.clear()

    # ------------------------------------------------------------ allocation

    def _pick_ip(self) -> str | None:
        size = self.network.num_addresses
        # Skip the network address (and the broadcast address of IPv4 ranges).
        usable = range(1, size - 1) if self.network.version == 4 else range(1, size)
        n = len(usable)
        for i in range(n):
            off = (self._next_ip - 1 + i) % n + 1
            ip = str(self.network.network_address + off)
            if ip not in self._ips:
                self._next_ip = off + 1
                return ip
        return None

    def _pick_port(self, protocol: str, taken: set[tuple[int, str]]) -> int | None:
        lo, hi = self.node_ports
        span = hi - lo + 1
        for i in range(span):
            port = lo + (self._next_port - lo + i) % span
            if (port, protocol) not in self._ports and (port, protocol) not in taken:
                self._next_port = port + 1
                return port
        return None

    def allocate(self, raw: dict[str, Any], old: KubeObject | None = None) -> list[FieldError]:
        """Fill in the Service's cluster IP and node ports, checking the ones given (in place)."""
        spec = raw.get("spec")
        if not isinstance(spec, dict):
            return []
        key = _key(raw)
        errs: list[FieldError] = []
        stype = spec.get("type") or "ClusterIP"
        sp = Path("spec")
        old_spec = (old.raw.get("spec") or {}) if old is not None else {}
        if stype == "ExternalName":
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        else:
            ip = spec.get("clusterIP") or ""
            old_ip = old_spec.get("clusterIP") or ""
            if old is not None and old_ip and ip in ("", old_ip):
                ip = old_ip
            elif old is not None and old_ip and ip != old_ip:
                errs.append(FieldError(str(sp.child("clusterIPs").index(0)), f'Invalid value: "{ip}": may not '
                                       "change once set"))
                return errs
            elif ip == "":
                picked = self._pick_ip()
                if picked is None:
                    errs.append(FieldError(str(sp.child("clusterIPs")), "Internal error: failed to allocate a "
                                           "serviceIP: range is full", "InternalError"))
                    return errs
                ip = picked
            elif ip != "None":
                why = self._check_ip(ip, key)
                if why:
                    errs.append(FieldError(str(sp.child("clusterIPs")), f'Invalid value: []string{{"{ip}"}}: '
                                           f"failed to allocate IP {ip}: {why}"))
                    return errs
            spec["clusterIP"] = ip
            spec["clusterIPs"] = [ip]
        ports = spec.get("ports") or []
        taken: set[tuple[int, str]] = set()
        for i, p in enumerate(ports):
            if not isinstance(p, dict):
                continue
            proto = p.get("protocol") or "TCP"
            if stype not in ("NodePort", "LoadBalancer") or (
                    stype == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is False
                    and not p.get("nodePort")):
                p.pop("nodePort", None)
                continue
            np_ = p.get("nodePort")
            if not np_:
                picked_port = self._pick_port(proto, taken)
                if picked_port is None:
                    errs.append(FieldError(str(sp.child("ports").index(i).child("nodePort")), "Internal error: "
                                           "failed to allocate a nodePort: range is full", "InternalError"))
                    continue
                p["nodePort"] = picked_port
            elif isinstance(np_, int):
                lo, hi = self.node_ports
                owner = self._ports.get((np_, proto))
                if not lo <= np_ <= hi:
                    errs.append(FieldError(str(sp.child("ports").index(i).child("nodePort")), f"Invalid value: "
                                           f"{np_}: provided port is not in the valid range. The range of valid "
                                           f"ports is {lo}-{hi}"))
                elif (owner is not None and owner != key) or (np_, proto) in taken:
                    errs.append(FieldError(str(sp.child("ports").index(i).child("nodePort")), f"Invalid value: "
                                           f"{np_}: provided port is already allocated"))
            taken.add((int(p.get("nodePort") or 0), proto))
        return errs

    def _check_ip(self, ip: str, key: str) -> str:
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return f"the provided IP ({ip}) is not a valid IP"
        if addr not in self.network or addr in (self.network.network_address, self.network.broadcast_address):
            return f"the provided IP ({ip}) is not in the valid range. The range of valid IPs is {self.network}"
        owner = self._ips.get(ip)
        if owner is not None and owner != key:
            return "provided IP is already allocated"
        return ""


def _key(raw: dict[str, Any]) -> str:
    md = raw.get("metadata") or {}
    return f"{md.get('namespace') or 'default'}/{md.get('name') or ''}"


def _cluster_ips(raw: dict[str, Any]) -> list[str]:
    spec = raw.get("spec") or {}
    ips = [ip for ip in spec.get("clusterIPs") or () if isinstance(ip, str)] or \
        ([spec["clusterIP"]] if isinstance(spec.get("clusterIP"), str) else [])
    return [ip for ip in ips if ip and ip != "None"]


def _node_ports(raw: dict[str, Any]) -> list[tuple[int, str]]:
    spec = raw.get("spec") or {}
    out = []
    for p in spec.get("ports") or ():
        if isinstance(p, dict) and isinstance(p.get("nodePort"), int) and p["nodePort"]:
            out.append((p["nodePort"], p.get("protocol") or "TCP"))
    return out
