"""Eviction thresholds and the kubelet's eviction settings, as upstream's
``pkg/kubelet/eviction/api/types.go`` and ``helpers.go`` (ParseThresholdConfig) read them from a
KubeletConfiguration (``kubelet.config.k8s.io/v1beta1``): ``evictionHard``, ``evictionSoft``,
``evictionSoftGracePeriod``, ``evictionMinimumReclaim``, ``evictionMaxPodGracePeriod``,
``evictionPressureTransitionPeriod``, ``mergeDefaultEvictionSettings`` and
``enforceNodeAllocatable``. Other fields of the configuration are accepted and ignored.

Hard defaults (Linux): ``memory.available<100Mi``, ``nodefs.available<10%``,
``nodefs.inodesFree<5%``, ``imagefs.available<15%``, ``imagefs.inodesFree<5%``, used only when
``evictionHard`` is unset (or merged with ``mergeDefaultEvictionSettings: true``). With ``pods``
in ``enforceNodeAllocatable`` (the default) each hard ``memory.available`` threshold is also
applied to ``allocatableMemory.available``.

Divergence: ``containerfs.*`` signals are not derived (the simulated node has one filesystem
for containers, ``nodefs``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ksched.api.quantity import QuantityError, format_bytes, format_value, value

__all__ = [
    "DEFAULT_HARD",
    "EvictionConfig",
    "EvictionConfigError",
    "Threshold",
    "parse_duration",
    "load_kubelet_configs",
    "parse_eviction_config",
]

MEMORY_AVAILABLE = "memory.available"
ALLOCATABLE_MEMORY_AVAILABLE = "allocatableMemory.available"
NODEFS_AVAILABLE = "nodefs.available"
NODEFS_INODES_FREE = "nodefs.inodesFree"
IMAGEFS_AVAILABLE = "imagefs.available"
IMAGEFS_INODES_FREE = "imagefs.inodesFree"
PID_AVAILABLE = "pid.available"

SIGNALS = (MEMORY_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE, NODEFS_AVAILABLE, NODEFS_INODES_FREE,
           IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE, PID_AVAILABLE)

# signal -> the resource its eviction reclaims (signalToResource)
SIGNAL_RESOURCE = {
    MEMORY_AVAILABLE: "memory", ALLOCATABLE_MEMORY_AVAILABLE: "memory",
    NODEFS_AVAILABLE: "ephemeral-storage", IMAGEFS_AVAILABLE: "ephemeral-storage",
    NODEFS_INODES_FREE: "inodes", IMAGEFS_INODES_FREE: "inodes", PID_AVAILABLE: "pids",
}
# signal -> node condition (signalToNodeCondition)
SIGNAL_CONDITION = {
    MEMORY_AVAILABLE: "MemoryPressure", ALLOCATABLE_MEMORY_AVAILABLE: "MemoryPressure",
    NODEFS_AVAILABLE: "DiskPressure", NODEFS_INODES_FREE: "DiskPressure",
    IMAGEFS_AVAILABLE: "DiskPressure", IMAGEFS_INODES_FREE: "DiskPressure", PID_AVAILABLE: "PIDPressure",
}

DEFAULT_HARD = {MEMORY_AVAILABLE: "100Mi", NODEFS_AVAILABLE: "10%", NODEFS_INODES_FREE: "5%",
                IMAGEFS_AVAILABLE: "15%", IMAGEFS_INODES_FREE: "5%"}
DEFAULT_PRESSURE_TRANSITION_PERIOD = 300.0
DEFAULT_MAX_POD_GRACE_PERIOD = 0


class EvictionConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ThresholdValue:
    """A quantity (bytes or a count) or a fraction of the signal's capacity."""

    quantity: int | None = None
    percentage: float = 0.0

    def amount(self, capacity: int) -> int:
        """GetThresholdQuantity: the quantity, or int64(capacity x percentage)."""
        return self.quantity if self.quantity is not None else int(capacity * self.percentage)

    def text(self, capacity: int, signal: str) -> str:
        """As upstream prints the quantity (BinarySI for bytes, DecimalSI for counts)."""
        amount = self.amount(capacity)
        return format_bytes(amount) if SIGNAL_RESOURCE[signal] in ("memory", "ephemeral-storage") \
            else format_value(amount)


@dataclass(frozen=True, slots=True)
class Threshold:
    signal: str
    value: ThresholdValue
    grace_period: float = 0.0
    min_reclaim: ThresholdValue | None = None
    hard: bool = True

    def key(self) -> tuple[str, bool]:
        return (self.signal, self.hard)


@dataclass(frozen=True)
class EvictionConfig:
    thresholds: tuple[Threshold, ...] = ()
    pressure_transition_period: float = DEFAULT_PRESSURE_TRANSITION_PERIOD
    max_pod_grace_period: int = DEFAULT_MAX_POD_GRACE_PERIOD
    node_selector: Mapping[str, str] = field(default_factory=dict)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_DUR_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: Any, where: str) -> float:
    """A Go duration (``1m30s``, ``5m0s``, ``90s``, ``0``) in seconds."""
    s = str(text).strip()
    if s in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DUR_UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise EvictionConfigError(f"{where}: invalid duration {s!r}")
    return total


def _parse_value(signal: str, text: Any, where: str, allow_zero: bool = False) -> ThresholdValue | None:
    """A threshold's value; None for "0%"/"100%", which turn the threshold off."""
    s = str(text).strip()
    if s.endswith("%"):
        try:
            pct = float(s[:-1])
        except ValueError:
            raise EvictionConfigError(f"{where}: invalid percentage {s!r}") from None
        if pct in (0.0, 100.0) and not allow_zero:
            return None
        if not 0.0 <= pct <= 100.0:
            raise EvictionConfigError(f"{where}: eviction percentage threshold {signal} must be >= 0% and <= 100%: "
                                      f"{s}")
        return ThresholdValue(percentage=pct / 100.0)
    try:
        q = value(s)
    except (QuantityError, ValueError):
        raise EvictionConfigError(f"{where}: invalid quantity {s!r}") from None
    if q < 0:
        raise EvictionConfigError(f"{where}: eviction threshold {signal} must be positive: {s}")
    return ThresholdValue(quantity=q)


def _map(cfg: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    v = cfg.get(name)
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise EvictionConfigError(f"{where}.{name}: must be a map of signal to value")
    for k in v:
        if k not in SIGNALS and k not in ("containerfs.available", "containerfs.inodesFree"):
            raise EvictionConfigError(f'{where}.{name}[{k}]: unsupported eviction signal {k}')
    return dict(v)


def parse_eviction_config(cfg: Mapping[str, Any] | None, where: str = "KubeletConfiguration") -> EvictionConfig:
    """The eviction settings of a KubeletConfiguration document (a dict); upstream's defaults
    for what it does not set."""
    cfg = cfg or {}
    if cfg.get("kind", "KubeletConfiguration") != "KubeletConfiguration":
        raise EvictionConfigError(f"{where}: kind must be KubeletConfiguration")
    api = cfg.get("apiVersion", "kubelet.config.k8s.io/v1beta1")
    if api != "kubelet.config.k8s.io/v1beta1":
        raise EvictionConfigError(f"{where}: apiVersion must be kubelet.config.k8s.io/v1beta1, not {api}")
    hard_cfg = _map(cfg, "evictionHard", where)
    if "evictionHard" not in cfg or cfg.get("mergeDefaultEvictionSettings"):
        hard_cfg = {**DEFAULT_HARD, **hard_cfg}
    soft_cfg = _map(cfg, "evictionSoft", where)
    grace_cfg = _map(cfg, "evictionSoftGracePeriod", where)
    reclaim_cfg = _map(cfg, "evictionMinimumReclaim", where)
    reclaim = {s: _parse_value(s, v, f"{where}.evictionMinimumReclaim[{s}]", allow_zero=True)
               for s, v in reclaim_cfg.items()}
    out: list[Threshold] = []
    for signal, text in hard_cfg.items():
        if signal.startswith("containerfs."):
            continue
        tv = _parse_value(signal, text, f"{where}.evictionHard[{signal}]")
        if tv is not None:
            out.append(Threshold(signal, tv, 0.0, reclaim.get(signal), hard=True))
    enforce = cfg.get("enforceNodeAllocatable", ["pods"])
    if "pods" in (enforce or ()):
        for t in list(out):
            if t.signal == MEMORY_AVAILABLE:
                out.append(replace(t, signal=ALLOCATABLE_MEMORY_AVAILABLE))
    for signal, text in soft_cfg.items():
        if signal.startswith("containerfs."):
            continue
        if signal not in grace_cfg:
            raise EvictionConfigError(f"{where}.evictionSoftGracePeriod: grace period must be specified for the soft "
                                      f"eviction threshold {signal}")
        grace = parse_duration(grace_cfg[signal], f"{where}.evictionSoftGracePeriod[{signal}]")
        tv = _parse_value(signal, text, f"{where}.evictionSoft[{signal}]")
        if tv is not None:
            out.append(Threshold(signal, tv, grace, reclaim.get(signal), hard=grace == 0))
    transition = cfg.get("evictionPressureTransitionPeriod")
    max_grace = cfg.get("evictionMaxPodGracePeriod", DEFAULT_MAX_POD_GRACE_PERIOD)
    if not isinstance(max_grace, int) or isinstance(max_grace, bool):
        raise EvictionConfigError(f"{where}.evictionMaxPodGracePeriod: must be an integer (seconds)")
    sel = cfg.get("nodeSelector") or {}
    if not isinstance(sel, Mapping):
        raise EvictionConfigError(f"{where}.nodeSelector: must be a map of label to value")
    return EvictionConfig(
        tuple(out),
        DEFAULT_PRESSURE_TRANSITION_PERIOD if transition is None else
        parse_duration(transition, f"{where}.evictionPressureTransitionPeriod"),
        max_grace, {str(k): str(v) for k, v in sel.items()})


DEFAULT_EVICTION_CONFIG = parse_eviction_config({})


def load_kubelet_configs(path: str) -> list[EvictionConfig]:
    """The KubeletConfiguration documents of a YAML file, one per node pool (``nodeSelector``,
    ksched's addition: a label map; none = every node). Errors name the file and document."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
    except OSError as e:
        raise EvictionConfigError(f"{path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise EvictionConfigError(f"{path}: invalid YAML: {e}") from None
    out = []
    for i, d in enumerate(docs):
        where = f"{path}: document {i + 1}"
        if not isinstance(d, Mapping):
            raise EvictionConfigError(f"{where}: a KubeletConfiguration must be a map")
        if "kind" not in d:
            raise EvictionConfigError(f"{where}: kind: missing (want KubeletConfiguration)")
        out.append(parse_eviction_config(d, where))
    return out


def config_for_node(configs: list[EvictionConfig], labels: Mapping[str, str]) -> EvictionConfig:
    """The first configuration whose ``nodeSelector`` matches the node's labels (an empty selector
    matches every node); upstream's defaults when none does."""
    for c in configs:
        if all(labels.get(k) == v for k, v in c.node_selector.items()):
            return c
    return DEFAULT_EVICTION_CONFIG
