"""The device-level GPU model: what a node offers and what a pod asks for, in milli-GPU.

A node has ``count`` GPUs of one ``model``; each GPU has 1000 milli-GPU. A pod asks for
``count`` GPUs of ``milli`` each (a fraction of one GPU only when ``count`` is 1), optionally
restricted to GPU models. The scheduler records the GPUs it chose on the pod at binding (the
``gpu-index`` annotation); the simulated kubelet's device plugin hands out exactly those.

The annotations are those of the openb tooling (Alibaba's open-gpu-share, as the FGD paper's
artifact ``hkust-adsl/kubernetes-scheduler-simulator`` reads them in ``pkg/utils/utils.go``
``GetPodResource`` / ``GetNodeResourceViaNodeInfo``):

* pod: ``alibabacloud.com/gpu-milli`` (per GPU, 0..1000), ``alibabacloud.com/gpu-count``,
  ``alibabacloud.com/gpu-card-model`` (allowed models joined with ``|``);
* node: capacity ``alibabacloud.com/gpu-count`` and label ``alibabacloud.com/gpu-card-model``;
* binding: ``alibabacloud.com/gpu-index`` (GPU indices joined with ``-``).

The model is independent of how the request is expressed: :class:`GpuRequest` and
:class:`GpuAssignment` are also what a DynamicResources ResourceClaim on a shared GPU device
means. The simulated DRA driver publishes a node's ``gpu-count`` GPUs as multi-allocation
devices ``gpu-<i>`` of driver :data:`GPU_DRIVER` with capacity ``milli`` = 1000 and the model as
an attribute; :func:`gpu_claim_spec` writes a GpuRequest as a claim (``count`` requests of
``milli`` capacity, a selector on the allowed models) and :func:`claim_gpu_assignment` reads the
allocation back as a GpuAssignment. Either way of asking places pods the same way
(``tests/sim/test_gpu_dra_equivalence.py``).

Divergences from the artifact: a pod whose annotations are malformed (not integers, milli
outside 0..1000, a fraction with count > 1) is rejected with a :class:`GpuSpecError` naming the
annotation, where the artifact silently reads 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANNOTATION_GPU_COUNT",
    "CPU_RESOURCE",
    "ANNOTATION_GPU_INDEX",
    "ANNOTATION_GPU_MILLI",
    "ANNOTATION_GPU_MODEL",
    "LABEL_GPU_MODEL",
    "MILLI",
    "RESOURCE_GPU_COUNT",
    "GPU_DRIVER",
    "GpuAssignment",
    "GpuRequest",
    "GpuSpecError",
    "NodeGpus",
    "claim_gpu_assignment",
    "format_gpu_index",
    "gpu_claim_spec",
    "gpu_free_on_node",
    "model_allowed",
    "node_gpus",
    "parse_gpu_index",
    "pod_gpu_assignment",
    "pod_gpu_request",
]

MILLI = 1000  # one whole GPU
GPU_DRIVER = "gpu.ksched.io"  # the simulated DRA driver's GPUs (ksched.kubelet.dradriver)
CPU_RESOURCE = "cpu"

ANNOTATION_GPU_MILLI = "alibabacloud.com/gpu-milli"
ANNOTATION_GPU_COUNT = "alibabacloud.com/gpu-count"
ANNOTATION_GPU_MODEL = "alibabacloud.com/gpu-card-model"
ANNOTATION_GPU_INDEX = "alibabacloud.com/gpu-index"
RESOURCE_GPU_COUNT = "alibabacloud.com/gpu-count"
LABEL_GPU_MODEL = "alibabacloud.com/gpu-card-model"


class GpuSpecError(ValueError):
    """A malformed GPU annotation: the message names the object and the annotation."""


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """``count`` GPUs of ``milli`` milli-GPU each; ``models`` the allowed models (None: any)."""

    milli: int
    count: int
    models: frozenset[str] | None = None

    @property
    def total(self) -> int:
        """milli-GPU in all (the artifact's ``milli * count``)."""
        return self.milli * self.count

    @property
    def is_sharing(self) -> bool:
        """A fraction of one GPU (the paper's GPU-sharing pod)."""
        return self.count == 1 and 0 < self.milli < MILLI

    @property
    def models_text(self) -> str:
        """The model constraint as the annotation writes it ('' when unconstrained)."""
        return "|".join(sorted(self.models)) if self.models else ""

    @staticmethod
    def make(milli: int, count: int, models: Iterable[str] | str | None = None, where: str = "") -> GpuRequest:
        """Validate and build; ``where`` prefixes error messages."""
        prefix = f"{where}: " if where else ""
        if count < 0:
            raise GpuSpecError(f"{prefix}GPU count must be >= 0, got {count}")
        if not 0 <= milli <= MILLI:
            raise GpuSpecError(f"{prefix}GPU milli must be in 0..{MILLI}, got {milli}")
        if count > 1 and milli != MILLI:
            raise GpuSpecError(f"{prefix}a pod asking for {count} GPUs must take whole GPUs (milli {MILLI}), "
                               f"got milli {milli}")
        if count == 0 or milli == 0:
            milli = count = 0
        if isinstance(models, str):
            models = [m for m in models.split("|") if m]
        ms = frozenset(m.strip() for m in models or () if m.strip())
        return GpuRequest(milli, count, ms or None)


@dataclass(frozen=True, slots=True)
class NodeGpus:
    """A node's GPUs: how many, and their model ('' for a node without GPUs)."""

    count: int
    model: str


@dataclass(frozen=True, slots=True)
class GpuAssignment:
    """The GPUs a pod got on its node (indices), and how much of each."""

    indices: tuple[int, ...]
    milli: int


def model_allowed(models: frozenset[str] | None, node_model: str) -> bool:
    """The artifact's IsNodeAccessibleToPodByType: no constraint allows every node; otherwise
    the node must have a model, and one of the pod's."""
    if not models:
        return True
    return bool(node_model) and node_model in models


def _int_annotation(ann: dict[str, str], key: str, what: str) -> int:
    v = ann.get(key)
    if v is None or v == "":
        return 0
    try:
        return int(str(v).strip())
    except ValueError:
        raise GpuSpecError(f'{what}: annotation {key}="{v}" is not an integer') from None


def pod_gpu_request(pod: Any) -> GpuRequest | None:
    """The pod's GPU request from its annotations (None when it asks for no GPU). A pod with
    ``gpu-milli`` but no ``gpu-count`` asks for one GPU, as the artifact reads it. Cached on
    the pod object; raises :class:`GpuSpecError` for malformed annotations."""
    c = pod.cached()
    if "gpu_request" in c:
        r = c["gpu_request"]
        if isinstance(r, GpuSpecError):
            raise r
        return r  # type: ignore[no-any-return]
    ann = pod.annotations
    what = f"pod {pod.key}"
    try:
        if ANNOTATION_GPU_MILLI not in ann and ANNOTATION_GPU_COUNT not in ann:
            req = None
        else:
            milli = _int_annotation(ann, ANNOTATION_GPU_MILLI, what)
            count = _int_annotation(ann, ANNOTATION_GPU_COUNT, what) if ANNOTATION_GPU_COUNT in ann else 1
            if ANNOTATION_GPU_MILLI not in ann:
                milli = MILLI
            req = GpuRequest.make(milli, count, ann.get(ANNOTATION_GPU_MODEL), what)
            if req.count == 0:
                req = None
    except GpuSpecError as e:
        c["gpu_request"] = e
        raise
    c["gpu_request"] = req
    return req


def node_gpus(node: Any) -> NodeGpus:
    """A node's GPUs: capacity ``alibabacloud.com/gpu-count`` and the model label."""
    if node is None:
        return NodeGpus(0, "")
    n = int(node.capacity.get(RESOURCE_GPU_COUNT, 0) or node.allocatable.get(RESOURCE_GPU_COUNT, 0))
    return NodeGpus(max(n, 0), node.labels.get(LABEL_GPU_MODEL, "") if n > 0 else "")


def parse_gpu_index(text: str, where: str = "") -> tuple[int, ...]:
    """``"0-3"`` -> (0, 3): the artifact joins indices with ``-``."""
    out = []
    for part in str(text).split("-"):
        part = part.strip()
        if not part:
            continue
        try:
            i = int(part)
        except ValueError:
            raise GpuSpecError(f'{where or "gpu-index"}: "{text}" is not a list of GPU indices joined with "-"') \
                from None
        if i < 0:
            raise GpuSpecError(f'{where or "gpu-index"}: negative GPU index in "{text}"')
        out.append(i)
    return tuple(out)


def format_gpu_index(indices: Iterable[int]) -> str:
    return "-".join(str(int(i)) for i in indices)


def pod_gpu_assignment(pod: Any) -> GpuAssignment | None:
    """The GPUs recorded on a bound pod (None when it has none recorded or asks for none)."""
    text = pod.annotations.get(ANNOTATION_GPU_INDEX)
    if not text:
        return None
    req = pod_gpu_request(pod)
    if req is None:
        return None
    idx = parse_gpu_index(text, f"pod {pod.key}: annotation {ANNOTATION_GPU_INDEX}")
    return GpuAssignment(idx, req.milli)


def gpu_free_on_node(gpus: NodeGpus, used: Iterable[GpuAssignment]) -> list[int]:
    """Free milli-GPU per GPU index, given the assignments of the pods on the node. Indices
    past the node's GPU count are ignored; a GPU may go negative when over-committed (the
    caller decides what that means)."""
    free = [MILLI] * gpus.count
    for a in used:
        for i in a.indices:
            if 0 <= i < gpus.count:
                free[i] -= a.milli
    return free


def gpu_claim_spec(req: GpuRequest, device_class: str = GPU_DRIVER) -> dict[str, Any]:
    """A ResourceClaim ``spec`` asking for what ``req`` asks: one request of ``count`` shared
    GPUs, each giving ``milli`` of its ``milli`` capacity, restricted to the allowed models."""
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": req.count,
                               "capacity": {"requests": {"milli": str(req.milli)}}}
    if req.models:
        models = ", ".join(f'"{m}"' for m in sorted(req.models))
        exactly["selectors"] = [{"cel": {"expression": f'device.attributes["{GPU_DRIVER}"].model in [{models}]'}}]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def claim_gpu_assignment(results: Iterable[dict[str, Any]]) -> GpuAssignment | None:
    """The GPUs of a claim's allocation results (devices ``gpu-<i>`` of :data:`GPU_DRIVER`) and
    the milli-GPU taken from each (None when it holds none of them)."""
    idx: list[int] = []
    milli = MILLI
    for r in results:
        dev = str(r.get("device", ""))
        if r.get("driver") != GPU_DRIVER or not dev.startswith("gpu-") or not dev[4:].isdigit():
            continue
        idx.append(int(dev[4:]))
        used = (r.get("consumedCapacity") or {}).get("milli")
        if used is not None:
            from ksched.api.quantity import value

            milli = value(used)
    return GpuAssignment(tuple(idx), milli) if idx else None
