"""A pod as the GPU-sharing policies see it (the artifact's ``PodResource``,
``pkg/type/resource.go``), and a node as they see it (``NodeResource``).

:class:`PodShape` is hashable: pods with equal shapes get equal scores on a node, which is what
the row caches (the framework's ``RowLocal`` and the replay engine's) rely on.

Divergences: the artifact's ``MilliCpu`` is the sum of containers' non-zero CPU requests
(100m for a container without one); ``PodShape.cpu`` is the same, ``fit_cpu`` the real request
used by fit checks (the default NodeResourcesFit's view). Memory is not part of the artifact's
policies; ``mem`` serves fit checks only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ksched.api.gpu import MILLI, GpuRequest, model_allowed

__all__ = ["MAX_SPEC_CPU", "MAX_SPEC_GPU", "NodeView", "PodShape", "shape_of"]

MAX_SPEC_CPU = 128_000  # milli-CPU, the artifact's normalization constant (utils/const.go)
MAX_SPEC_GPU = 8_000  # milli-GPU


@dataclass(frozen=True, slots=True)
class PodShape:
    """What the policies read of a pod: milli-CPU (non-zero), GPU milli per GPU, GPU count and
    allowed models; ``fit_cpu`` and ``mem`` are the requests the fit checks compare."""

    cpu: int
    milli: int = 0
    count: int = 0
    models: frozenset[str] | None = None
    mem: int = 0
    fit_cpu: int = -1  # -1: same as cpu

    @property
    def gpu_total(self) -> int:
        return self.milli * self.count

    @property
    def is_sharing(self) -> bool:
        return self.count == 1 and 0 < self.milli < MILLI

    @property
    def needs_gpu(self) -> bool:
        return self.count > 0 and self.milli > 0

    @property
    def cpu_request(self) -> int:
        return self.cpu if self.fit_cpu < 0 else self.fit_cpu

    @property
    def tag(self) -> str:
        """GpuClustering's tag: no-gpu, share-gpu or "<n>-gpu"."""
        if not self.needs_gpu:
            return "no-gpu"
        return "share-gpu" if self.is_sharing else f"{self.count}-gpu"

    @property
    def typical_key(self) -> tuple[int, int, int, str]:
        """The artifact's grouping key for typical pods: (MilliCpu, MilliGpu, GpuNumber, GpuType)."""
        return (self.cpu, self.milli, self.count, "|".join(sorted(self.models)) if self.models else "")

    def allows(self, node_model: str) -> bool:
        return model_allowed(self.models, node_model)


def shape_of(cpu: int, gpu: GpuRequest | None, mem: int = 0, fit_cpu: int = -1) -> PodShape:
    if gpu is None or gpu.count == 0:
        return PodShape(cpu, 0, 0, None, mem, fit_cpu)
    return PodShape(cpu, gpu.milli, gpu.count, gpu.models, mem, fit_cpu)


@dataclass(slots=True)
class NodeView:
    """One node for the per-node (reference) forms: milli-CPU and memory left, free milli per
    GPU index, the GPU model ('' for none), and the GPU-pod tags resident (tag -> pods)."""

    cpu_left: int
    free: list[int]
    model: str = ""
    mem_left: int = 0
    tags: dict[str, int] = field(default_factory=dict)

    @property
    def idle(self) -> int:
        return sum(self.free)

    @property
    def gpu_count(self) -> int:
        return len(self.free)
