"""The CPU manager's static policy (``pkg/kubelet/cm/cpumanager/policy_static.go``, with the
hint generation of ``GetTopologyHints``): a container of a Guaranteed pod whose CPU request is
a whole number of CPUs gets that many CPUs to itself, taken out of the shared pool; every
other container runs on the shared pool.

* Reserved CPUs: ``reservedSystemCPUs`` when given, else ceil(kube-reserved + system-reserved
  CPU) CPUs taken by the packed allocation (the lowest cores, in practice). They stay in the
  shared pool but are never handed out exclusively. Zero reserved CPUs is upstream's error:
  "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater
  than zero".
* Allocation: with a NUMA affinity from the topology manager, as many CPUs as possible from
  the CPUs of those NUMA nodes first, the rest from anywhere (``cpu_assignment``). CPUs of a
  finished init container (not a sidecar) are reused by the pod's app containers.
* Hints: every combination of NUMA nodes with enough free CPUs; the ones with as few NUMA nodes
  as the request could fit in on an empty machine are preferred.
* A pod's CPUs return to the shared pool when it ends (RemoveContainer).

Divergences: no policy options (``full-pcpus-only``, ``distribute-cpus-across-numa``,
``align-by-socket``, ``strict-cpu-reservation``...), no pod-level resources, no in-place
resize; no checkpoint file (the state lives as long as the simulated kubelet).
"""

from __future__ import annotations

from collections.abc import Iterable

from ksched.api.pod import Container, Pod
from ksched.api.resources import QOS_GUARANTEED, qos_class
from ksched.kubelet.cm.cpumanager.cpu_assignment import CPUAllocationError, take_by_topology_numa_packed
from ksched.kubelet.cm.topology import CPUTopology, TopologyError
from ksched.kubelet.cm.topologymanager import bitmask
from ksched.kubelet.cm.topologymanager.policy import AffinityStore, ProviderHints, TopologyHint

__all__ = ["StaticPolicy", "guaranteed_cpus", "pod_guaranteed_cpus"]

CPU = "cpu"


def guaranteed_cpus(pod: Pod, container: Container) -> int:
    """Whole CPUs the container gets to itself: its CPU request if the pod is Guaranteed and the
    request is a whole number of CPUs, else 0."""
    if qos_class(pod) != QOS_GUARANTEED:
        return 0
    milli = container.requests.get(CPU, 0)
    return milli // 1000 if milli % 1000 == 0 else 0


def pod_guaranteed_cpus(pod: Pod) -> int:
    """The pod's exclusive CPUs at once: the larger of its init containers' peak and the sum of
    its long-running containers (app containers and sidecars)."""
    by_init = by_sidecars = 0
    for c in pod.init_containers:
        if CPU not in c.requests:
            continue
        n = guaranteed_cpus(pod, c)
        if c.is_sidecar:
            by_sidecars += n
        elif by_sidecars + n > by_init:
            by_init = by_sidecars + n
    by_app = sum(guaranteed_cpus(pod, c) for c in pod.containers if CPU in c.requests)
    return max(by_init, by_app + by_sidecars)


class StaticPolicy:
    name = "static"

    def __init__(self, topology: CPUTopology, num_reserved: int, affinity: AffinityStore,
                 reserved_cpus: Iterable[int] | None = None, node: str = "") -> None:
        self.topology = topology
        self.affinity = affinity
        if reserved_cpus is not None:
            reserved = frozenset(reserved_cpus)
            if not reserved <= topology.cpus:
                raise TopologyError(f"node {node}: reservedSystemCPUs: CPUs {sorted(reserved - topology.cpus)} "
                                    "are not in the node's topology")
        else:
            if num_reserved <= 0:
                raise TopologyError(f"node {node}: [cpumanager] the static policy requires systemreserved.cpu + "
                                    "kubereserved.cpu to be greater than zero")
            try:
                reserved = take_by_topology_numa_packed(topology, topology.cpus, num_reserved)
            except CPUAllocationError:
                raise TopologyError(f"node {node}: [cpumanager] unable to reserve the required amount of CPUs "
                                    f"(the node has {topology.num_cpus}, {num_reserved} reserved)") from None
        self.reserved: frozenset[int] = reserved
        self.default: set[int] = set(topology.cpus)  # the shared pool
        self.assignments: dict[str, dict[str, frozenset[int]]] = {}
        self.cpus_to_reuse: dict[str, frozenset[int]] = {}

    # ---------------------------------------------------------------- state

    def available(self) -> frozenset[int]:
        """CPUs that can be handed out exclusively: the shared pool without the reserved CPUs."""
        return frozenset(self.default) - self.reserved

    def assigned(self, pod_uid: str) -> dict[str, frozenset[int]]:
        return dict(self.assignments.get(pod_uid, {}))

    def remove_pod(self, pod_uid: str) -> None:
        """The pod ended: its CPUs go back to the shared pool."""
        conts = self.assignments.pop(pod_uid, None)
        self.cpus_to_reuse.pop(pod_uid, None)
        if conts:
            in_use = set().union(*(c for cs in self.assignments.values() for c in cs.values()))
            for cpus in conts.values():
                self.default |= cpus - in_use

    # ---------------------------------------------------------------- allocation

    def allocate(self, pod: Pod, container: Container) -> None:
        """Raises CPUAllocationError when the CPUs cannot be found."""
        n = guaranteed_cpus(pod, container)
        if n == 0:
            return
        existing = self.assignments.get(pod.uid, {}).get(container.name)
        if existing is not None:
            self._update_reuse(pod, container, existing)
            return
        hint = self.affinity.get_affinity(pod.uid, container.name)
        cpus = self._allocate_cpus(n, hint.numa_affinity, self.cpus_to_reuse.get(pod.uid, frozenset()))
        self.assignments.setdefault(pod.uid, {})[container.name] = cpus
        self._update_reuse(pod, container, cpus)

    def _allocate_cpus(self, n: int, numa_affinity: int | None, reusable: frozenset[int]) -> frozenset[int]:
        allocatable = self.available() | reusable
        result: frozenset[int] = frozenset()
        if numa_affinity is not None:
            aligned = frozenset(c for c in allocatable if numa_affinity >> self.topology.numa_node_of(c) & 1)
            result = take_by_topology_numa_packed(self.topology, aligned, min(n, len(aligned)))
        result |= take_by_topology_numa_packed(self.topology, allocatable - result, n - len(result))
        self.default -= result
        return result

    def _update_reuse(self, pod: Pod, container: Container, cpus: frozenset[int]) -> None:
        for uid in [u for u in self.cpus_to_reuse if u != pod.uid]:
            del self.cpus_to_reuse[uid]
        reuse = self.cpus_to_reuse.get(pod.uid, frozenset())
        for ic in pod.init_containers:
            if ic.name == container.name:
                if not ic.is_sidecar:
                    self.cpus_to_reuse[pod.uid] = reuse | cpus
                    return
                break
        self.cpus_to_reuse[pod.uid] = reuse - cpus

    # ---------------------------------------------------------------- topology hints

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints:
        requested = guaranteed_cpus(pod, container)
        if requested == 0:
            return None
        allocated = self.assignments.get(pod.uid, {}).get(container.name)
        if allocated is not None:
            if len(allocated) != requested:
                return {CPU: []}
            return {CPU: self.generate_hints(allocated, frozenset(), requested)}
        return {CPU: self.generate_hints(self.available(), self.cpus_to_reuse.get(pod.uid, frozenset()), requested)}

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints:
        requested = pod_guaranteed_cpus(pod)
        if requested == 0:
            return None
        mine = self.assignments.get(pod.uid, {})
        if mine:
            allocated = frozenset().union(*mine.values())
            if len(allocated) != requested:
                return {CPU: []}
            return {CPU: self.generate_hints(allocated, frozenset(), requested)}
        return {CPU: self.generate_hints(self.available(), self.cpus_to_reuse.get(pod.uid, frozenset()), requested)}

    def generate_hints(self, available: frozenset[int], reusable: frozenset[int], request: int) -> list[TopologyHint]:
        topo = self.topology
        numa_nodes = topo.numa_nodes
        min_affinity = len(numa_nodes)
        hints: list[TopologyHint] = []
        for mask in bitmask.iterate_bit_masks(numa_nodes):
            n_mask = bitmask.count(mask)
            if len(topo.cpus_in_numa_nodes(*bitmask.bits(mask))) >= request and n_mask < min_affinity:
                min_affinity = n_mask
            if any(not mask >> topo.numa_node_of(c) & 1 for c in reusable):
                continue
            matching = len(reusable) + sum(1 for c in available if mask >> topo.numa_node_of(c) & 1)
            if matching < request:
                continue
            hints.append(TopologyHint(mask, False))
        return [TopologyHint(h.numa_affinity, bitmask.count(h.numa_affinity or 0) == min_affinity) for h in hints]
