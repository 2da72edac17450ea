"""Topology manager admission by scope (``pkg/kubelet/cm/topologymanager/scope.go``,
``scope_container.go``, ``scope_pod.go``, ``scope_none.go``).

* ``container`` (default): for each init container, then each app container, ask every hint
  provider, merge with the policy, refuse the pod if the policy does not admit, else record the
  container's affinity and let the providers allocate.
* ``pod``: one merge for the whole pod (the providers' pod-level hints), the same affinity for
  every container, then allocation container by container.
* policy ``none``: no hints, the providers allocate container by container.

A policy refusal is ``TopologyAffinityError``, "Resources cannot be allocated with Topology
locality"; a provider failing to allocate is ``UnexpectedAdmissionError``
(``ksched.kubelet.cm.admission``).
"""

from __future__ import annotations

from typing import Protocol

from ksched.api.pod import Container, Pod
from ksched.kubelet.cm.admission import (
    ERROR_TOPOLOGY_AFFINITY,
    REASON_TOPOLOGY_AFFINITY,
    AllocationError,
    admit_result,
)
from ksched.kubelet.cm.topologymanager.policy import POLICY_NONE, Policy, ProviderHints, TopologyHint
from ksched.kubelet.lifecycle import PodAdmitResult

__all__ = ["SCOPES", "SCOPE_CONTAINER", "SCOPE_POD", "HintProvider", "Scope"]

SCOPE_CONTAINER = "container"
SCOPE_POD = "pod"
SCOPES = (SCOPE_CONTAINER, SCOPE_POD)


class HintProvider(Protocol):
    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints: ...

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints: ...

    def allocate(self, pod: Pod, container: Container) -> None: ...


class Scope:
    """Admission for one node: the policy, the scope, the providers in order (devices, CPU)
    and the affinity recorded for each container."""

    def __init__(self, policy: Policy, scope: str, providers: list[HintProvider]) -> None:
        if scope not in SCOPES:
            raise ValueError(f"unknown scope: {scope!r}")
        self.policy = policy
        self.scope = scope
        self.providers = providers
        self.affinity: dict[tuple[str, str], TopologyHint] = {}

    def get_affinity(self, pod_uid: str, container: str) -> TopologyHint:
        return self.affinity.get((pod_uid, container), TopologyHint())

    def remove_pod(self, pod_uid: str) -> None:
        for k in [k for k in self.affinity if k[0] == pod_uid]:
            del self.affinity[k]

    def _allocate(self, pod: Pod, container: Container) -> PodAdmitResult | None:
        for p in self.providers:
            try:
                p.allocate(pod, container)
            except AllocationError as e:
                return admit_result(e)
        return None

    def admit(self, pod: Pod) -> PodAdmitResult:
        containers = (*pod.init_containers, *pod.containers)
        refused = PodAdmitResult(False, REASON_TOPOLOGY_AFFINITY, ERROR_TOPOLOGY_AFFINITY)
        if self.policy.name == POLICY_NONE:
            for c in containers:
                if (r := self._allocate(pod, c)) is not None:
                    return r
            return PodAdmitResult()
        if self.scope == SCOPE_POD:
            best, ok = self.policy.merge([p.get_pod_topology_hints(pod) for p in self.providers])
            if not ok:
                return refused
            for c in containers:
                self.affinity[pod.uid, c.name] = best
                if (r := self._allocate(pod, c)) is not None:
                    return r
            return PodAdmitResult()
        for c in containers:
            best, ok = self.policy.merge([p.get_topology_hints(pod, c) for p in self.providers])
            if not ok:
                return refused
            self.affinity[pod.uid, c.name] = best
            if (r := self._allocate(pod, c)) is not None:
                return r
        return PodAdmitResult()
