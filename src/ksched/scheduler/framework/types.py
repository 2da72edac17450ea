"""PodInfo, QueuedPodInfo, NodeInfo and the small types they carry (upstream's framework/types.go)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ksched.api.affinity import PodAffinityTerm, WeightedPodAffinityTerm
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.resources import pod_non_zero_requests, pod_requests

__all__ = [
    "HostPortInfo",
    "ImageStateSummary",
    "NodeInfo",
    "NodeList",
    "PodInfo",
    "QueuedPodInfo",
]

_DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"


class PodInfo:
    """A pod with what the scheduler derives from it once: requests and affinity terms."""

    __slots__ = (
        "non_zero",
        "pod",
        "preferred_affinity_terms",
        "preferred_anti_affinity_terms",
        "requests",
        "required_affinity_terms",
        "required_anti_affinity_terms",
        "table_vector",
    )

    def __init__(self, pod: Pod) -> None:
        self.pod = pod
        self.table_vector: Any = None  # (columns, width, ((column, value), ...)) for the node table
        self.requests: dict[str, int] = pod_requests(pod)
        self.non_zero: tuple[int, int] = pod_non_zero_requests(pod)
        aff = pod.affinity
        if aff is not None:
            self.required_affinity_terms: tuple[PodAffinityTerm, ...] = aff.pod_affinity_required
            self.required_anti_affinity_terms: tuple[PodAffinityTerm, ...] = aff.pod_anti_affinity_required
            self.preferred_affinity_terms: tuple[WeightedPodAffinityTerm, ...] = aff.pod_affinity_preferred
            self.preferred_anti_affinity_terms: tuple[WeightedPodAffinityTerm, ...] = aff.pod_anti_affinity_preferred
        else:
            self.required_affinity_terms = ()
            self.required_anti_affinity_terms = ()
            self.preferred_affinity_terms = ()
            self.preferred_anti_affinity_terms = ()

    def with_pod(self, pod: Pod) -> PodInfo:
        """A PodInfo for a newer object of the same pod whose spec did not change (e.g. the
        bound pod confirming an assumed one): derived values are reused, not recomputed."""
        pi = PodInfo.__new__(PodInfo)
        pi.pod = pod
        pi.requests = self.requests
        pi.non_zero = self.non_zero
        pi.required_affinity_terms = self.required_affinity_terms
        pi.required_anti_affinity_terms = self.required_anti_affinity_terms
        pi.preferred_affinity_terms = self.preferred_affinity_terms
        pi.preferred_anti_affinity_terms = self.preferred_anti_affinity_terms
        pi.table_vector = self.table_vector
        return pi

    def update(self, pod: Pod) -> None:
        self.__init__(pod)  # type: ignore[misc]

    @property
    def has_affinity(self) -> bool:
        return bool(self.required_affinity_terms or self.required_anti_affinity_terms
                    or self.preferred_affinity_terms or self.preferred_anti_affinity_terms)

    @property
    def has_required_anti_affinity(self) -> bool:
        return bool(self.required_anti_affinity_terms)

    def __repr__(self) -> str:
        return f"PodInfo({self.pod.key})"


class QueuedPodInfo:
    """A pod in the scheduling queue, with its attempt bookkeeping."""

    __slots__ = ("attempts", "backoff_expiration", "consecutive_errors_count", "gated", "gating_plugin",
                 "initial_attempt_timestamp", "pending_plugins", "pod_info", "seq", "timestamp",
                 "unschedulable_count", "unschedulable_plugins", "where")

    def __init__(self, pod_info: PodInfo, timestamp: float) -> None:
        self.pod_info = pod_info
        self.timestamp = timestamp
        self.initial_attempt_timestamp: float | None = None
        self.attempts = 0
        self.unschedulable_count = 0
        self.consecutive_errors_count = 0
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()
        self.gating_plugin = ""
        self.gated = False
        self.backoff_expiration: float | None = None
        self.seq = 0
        self.where = ""  # "active", "backoff", "unschedulable", "inflight", ""

    @property
    def pod(self) -> Pod:
        return self.pod_info.pod

    def __repr__(self) -> str:
        return f"QueuedPodInfo({self.pod.key}, attempts={self.attempts}, in={self.where or '-'})"


class ImageStateSummary:
    """An image's size and on how many nodes it is (shared across NodeInfos)."""

    __slots__ = ("nodes", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.nodes: set[str] = set()

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)


class HostPortInfo:
    """Host ports in use: IP -> {(protocol, port): pods using it}; ``0.0.0.0`` conflicts with
    every IP.

    Counted, where upstream keeps a set: a node can transiently hold two pods with one host port
    -- one assumed by this scheduler, one bound by another scheduler instance that won the race
    (the API server then refuses the assumed one's binding). Forgetting the assumed pod must not
    free the port the bound one still holds; with a set it did, the node looked free again, and
    the instance assumed and lost the same binding over and over."""

    __slots__ = ("ports",)

    def __init__(self) -> None:
        self.ports: dict[str, dict[tuple[str, int], int]] = {}

    @staticmethod
    def _sanitize(ip: str, protocol: str) -> tuple[str, str]:
        return (ip or _DEFAULT_BIND_ALL_HOST_IP), (protocol or "TCP")

    def add(self, ip: str, protocol: str, port: int) -> None:
        if port <= 0:
            return
        ip, protocol = self._sanitize(ip, protocol)
        used = self.ports.setdefault(ip, {})
        used[(protocol, port)] = used.get((protocol, port), 0) + 1

    def remove(self, ip: str, protocol: str, port: int) -> None:
        if port <= 0:
            return
        ip, protocol = self._sanitize(ip, protocol)
        used = self.ports.get(ip)
        if used is None:
            return
        n = used.get((protocol, port), 0) - 1
        if n > 0:
            used[(protocol, port)] = n
            return
        used.pop((protocol, port), None)
        if not used:
            del self.ports[ip]

    def check_conflict(self, ip: str, protocol: str, port: int) -> bool:
        if port <= 0:
            return False
        ip, protocol = self._sanitize(ip, protocol)
        pp = (protocol, port)
        if ip == _DEFAULT_BIND_ALL_HOST_IP:
            for used in self.ports.values():
                if pp in used:
                    return True
            return False
        for key in (ip, _DEFAULT_BIND_ALL_HOST_IP):
            used = self.ports.get(key)
            if used is not None and pp in used:
                return True
        return False

    def __len__(self) -> int:
        return sum(len(used) for used in self.ports.values())

    def copy(self) -> HostPortInfo:
        h = HostPortInfo()
        h.ports = {k: dict(v) for k, v in self.ports.items()}
        return h


class NodeInfo:
    """A node and the pods on it (bound and assumed), with their summed requests.

    ``requested`` holds real requests per resource (``pods`` is ``len(pods)``); ``non_zero_requested``
    is ``[milli-CPU, memory]`` with upstream's per-container defaults, used by scoring.
    """

    __slots__ = ("allocatable", "generation", "image_states", "name", "node", "non_zero_requested", "pods",
                 "pods_with_affinity", "pods_with_required_anti_affinity", "pvc_ref_counts", "requested",
                 "row", "used_ports")

    def __init__(self, node: Node | None = None) -> None:
        self.node: Node | None = None
        self.name = ""
        self.pods: list[PodInfo] = []
        self.pods_with_affinity: list[PodInfo] = []
        self.pods_with_required_anti_affinity: list[PodInfo] = []
        self.used_ports = HostPortInfo()
        self.image_states: dict[str, ImageStateSummary] = {}
        self.pvc_ref_counts: dict[str, int] = {}
        self.requested: dict[str, int] = {}
        self.non_zero_requested: list[int] = [0, 0]
        self.allocatable: dict[str, int] = {}
        self.generation = 0
        self.row = -1
        if node is not None:
            self.set_node(node)

    def set_node(self, node: Node) -> None:
        self.node = node
        self.name = node.name
        self.allocatable = node.allocatable

    def add_pod(self, pi: PodInfo) -> None:
        self.pods.append(pi)
        if pi.has_affinity:
            self.pods_with_affinity.append(pi)
        if pi.has_required_anti_affinity:
            self.pods_with_required_anti_affinity.append(pi)
        self._update_usage(pi, 1)

    def replace_pod(self, old: PodInfo, new: PodInfo) -> None:
        """Swap a pod's info for a newer object of the same pod with the same requests, ports
        and volumes (an assumed pod confirmed by the informer)."""
        # Searched from the end: the pod confirmed is usually the one added last.
        for lst in (self.pods, self.pods_with_affinity, self.pods_with_required_anti_affinity):
            for i in range(len(lst) - 1, -1, -1):
                if lst[i] is old:
                    lst[i] = new
                    break

    def remove_pod(self, pod: Pod) -> PodInfo | None:
        uid = pod.uid
        key = pod.key
        for i, pi in enumerate(self.pods):
            p = pi.pod
            if (uid and p.uid == uid) or (not uid and p.key == key):
                last = self.pods.pop(i)
                _remove_from(self.pods_with_affinity, last)
                _remove_from(self.pods_with_required_anti_affinity, last)
                self._update_usage(last, -1)
                return last
        return None

    def _update_usage(self, pi: PodInfo, sign: int) -> None:
        req = self.requested
        for k, v in pi.requests.items():
            req[k] = req.get(k, 0) + sign * v
        nz = self.non_zero_requested
        nz[0] += sign * pi.non_zero[0]
        nz[1] += sign * pi.non_zero[1]
        pod = pi.pod
        for p in pod.host_ports():
            if sign > 0:
                self.used_ports.add(p.host_ip, p.protocol, p.host_port)
            else:
                self.used_ports.remove(p.host_ip, p.protocol, p.host_port)
        for v in pod.volumes:
            if v.claim_name and not v.ephemeral:  # upstream counts persistentVolumeClaim volumes only
                k = f"{pod.namespace}/{v.claim_name}"
                n = self.pvc_ref_counts.get(k, 0) + sign
                if n > 0:
                    self.pvc_ref_counts[k] = n
                else:
                    self.pvc_ref_counts.pop(k, None)

    def clone(self) -> NodeInfo:
        c = NodeInfo.__new__(NodeInfo)
        c.node = self.node
        c.name = self.name
        c.pods = self.pods.copy()
        c.pods_with_affinity = self.pods_with_affinity.copy() if self.pods_with_affinity else []
        c.pods_with_required_anti_affinity = (self.pods_with_required_anti_affinity.copy()
                                              if self.pods_with_required_anti_affinity else [])
        c.used_ports = self.used_ports.copy() if self.used_ports.ports else HostPortInfo()
        c.image_states = self.image_states
        c.pvc_ref_counts = self.pvc_ref_counts.copy() if self.pvc_ref_counts else {}
        c.requested = dict(self.requested)
        c.non_zero_requested = list(self.non_zero_requested)
        c.allocatable = self.allocatable
        c.generation = self.generation
        c.row = self.row
        return c

    @property
    def num_pods(self) -> int:
        return len(self.pods)

    @property
    def allowed_pod_number(self) -> int:
        return self.allocatable.get("pods", 0)

    def pod_keys(self) -> list[str]:
        return [pi.pod.key for pi in self.pods]

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)}, gen={self.generation})"


def _remove_from(lst: list[PodInfo], pi: PodInfo) -> None:
    for i, x in enumerate(lst):
        if x is pi:
            lst.pop(i)
            return


class NodeList(Sequence[NodeInfo]):
    """Nodes as rows of a snapshot: ``rows`` (NumPy int array) index ``infos`` and the node table."""

    __slots__ = ("_names", "infos", "rows")

    def __init__(self, infos: list[NodeInfo], rows: np.ndarray) -> None:
        self.infos = infos
        self.rows = rows
        self._names: list[str] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> NodeInfo:  # type: ignore[override]
        return self.infos[self.rows[i]]

    def __iter__(self) -> Iterator[NodeInfo]:
        infos = self.infos
        for r in self.rows.tolist():
            yield infos[r]

    @property
    def names(self) -> list[str]:
        if self._names is None:
            infos = self.infos
            self._names = [infos[r].name for r in self.rows.tolist()]
        return self._names
