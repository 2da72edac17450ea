"""How the resource managers' failures become admission results
(``pkg/kubelet/cm/admission/errors.go``): an error that names its own reason (the topology
manager's ``TopologyAffinityError``) keeps it; any other allocation failure is
``UnexpectedAdmissionError``, "Allocate failed due to <error>, which is unexpected"."""

from __future__ import annotations

from ksched.kubelet.lifecycle import PodAdmitResult

__all__ = [
    "ERROR_TOPOLOGY_AFFINITY",
    "REASON_TOPOLOGY_AFFINITY",
    "REASON_UNEXPECTED",
    "AllocationError",
    "admit_result",
]

REASON_UNEXPECTED = "UnexpectedAdmissionError"
REASON_TOPOLOGY_AFFINITY = "TopologyAffinityError"
ERROR_TOPOLOGY_AFFINITY = "Resources cannot be allocated with Topology locality"


class AllocationError(Exception):
    """A resource manager could not allocate what a container asks for."""


def admit_result(err: AllocationError | None) -> PodAdmitResult:
    if err is None:
        return PodAdmitResult()
    return PodAdmitResult(False, REASON_UNEXPECTED, f"Allocate failed due to {err}, which is unexpected")
