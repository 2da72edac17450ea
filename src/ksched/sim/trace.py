"""GPU cluster traces: nodes and pods from the openb CSVs of Alibaba's cluster-trace-gpu-v2023
(the FGD paper's artifact reads them in ``data/pod_csv_to_yaml.py``), and from a generic format
other traces convert to.

Nodes (CSV or JSONL), one per row:

============  ==========================================  ========
column        meaning                                      openb
============  ==========================================  ========
name          node name                                    ``sn``
cpu_milli     milli-CPU                                    same
memory_mib    memory in MiB                                same
gpu           number of GPUs (0 for a CPU node)            same
model         GPU model ('' or ``nan`` for none)           same
max_pods      pods the node allows (default 1001)          absent
============  ==========================================  ========

Pods (CSV or JSONL), one per row:

=============  =======================================================  =================
column         meaning                                                  openb
=============  =======================================================  =================
name           pod name (unique)                                        same
arrival        creation time in seconds (optional)                      ``creation_time``
departure      deletion time in seconds (optional, empty: never leaves) ``deletion_time``
cpu_milli      milli-CPU requested                                      same
memory_mib     memory requested in MiB                                  same
num_gpu        GPUs requested                                           same
gpu_milli      milli-GPU per GPU (a fraction only when num_gpu is 1)    same
gpu_models     allowed GPU models joined with ``|`` (empty: any)        ``gpu_spec``
=============  =======================================================  =================

Other columns (openb's ``qos``, ``pod_phase``, ``scheduled_time``) are ignored. A malformed row
raises :class:`TraceError` naming the file, the row (1-based, the header being row 1 of a CSV)
and the column.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ksched.api.gpu import MILLI, GpuRequest, GpuSpecError

__all__ = ["TraceError", "TraceNode", "TracePod", "load_nodes", "load_pods"]

DEFAULT_MAX_PODS = 1001  # the artifact's node YAMLs allow 1001 pods

_NODE_ALIASES = {"sn": "name", "num_gpu": "gpu", "gpu_model": "model", "gpu_count": "gpu"}
_POD_ALIASES = {"creation_time": "arrival", "deletion_time": "departure", "gpu_spec": "gpu_models",
                "gpu_model": "gpu_models", "gpu_count": "num_gpu"}


class TraceError(ValueError):
    def __init__(self, path: str, row: int, column: str, message: str) -> None:
        self.path = path
        self.row = row
        self.column = column
        where = f"{path}: row {row}" + (f", column {column}" if column else "")
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str
    max_pods: int = DEFAULT_MAX_PODS


@dataclass(frozen=True, slots=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    gpu: GpuRequest | None
    arrival: float | None = None
    departure: float | None = None

    @property
    def gpu_total(self) -> int:
        return self.gpu.total if self.gpu is not None else 0

    def renamed(self, name: str) -> TracePod:
        return TracePod(name, self.cpu_milli, self.memory_mib, self.gpu, self.arrival, self.departure)


def _rows(path: Path, aliases: dict[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, fields with canonical names) of a CSV or JSONL file."""
    name = str(path)
    try:
        f = path.open(newline="", encoding="utf-8")
    except OSError as e:
        raise TraceError(name, 0, "", f"cannot open: {e.strerror or e}") from None
    with f:
        jsonl = path.suffix.lower() in (".jsonl", ".ndjson", ".json")
        if jsonl:
            for i, line in enumerate(f, start=1):
                line = line.strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise TraceError(name, i, "", f"invalid JSON: {e.msg}") from None
                if not isinstance(obj, dict):
                    raise TraceError(name, i, "", "each line must be a JSON object")
                yield i, {aliases.get(k, k): v for k, v in obj.items()}
            return
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise TraceError(name, 1, "", "empty file (a header row is required)") from None
        except csv.Error as e:
            raise TraceError(name, 1, "", f"malformed CSV: {e}") from None
        cols = [aliases.get(h.strip(), h.strip()) for h in header]
        i = 1
        try:
            for rec in reader:
                i += 1
                if not rec or all(not x.strip() for x in rec):
                    continue
                if len(rec) > len(cols):
                    raise TraceError(name, i, "", f"{len(rec)} fields, but the header has {len(cols)}")
                yield i, dict(zip(cols, rec))
        except csv.Error as e:
            raise TraceError(name, i + 1, "", f"malformed CSV: {e}") from None


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, str) and v.strip().lower() in ("", "nan", "none", "null")) or \
        (isinstance(v, float) and math.isnan(v))


def _int(path: str, row: int, rec: dict[str, Any], col: str, default: int | None = None, lo: int = 0) -> int:
    v = rec.get(col)
    if _missing(v):
        if default is None:
            raise TraceError(path, row, col, "missing value")
        return default
    try:
        f = float(v) if isinstance(v, str) else v
        if isinstance(f, bool) or not float(f).is_integer():
            raise ValueError
        x = int(f)
    except (TypeError, ValueError):
        raise TraceError(path, row, col, f'"{v}" is not an integer') from None
    if x < lo:
        raise TraceError(path, row, col, f"{x} is below {lo}")
    return x


def _float(path: str, row: int, rec: dict[str, Any], col: str) -> float | None:
    v = rec.get(col)
    if _missing(v):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise TraceError(path, row, col, f'"{v}" is not a number') from None
    if math.isnan(x) or math.isinf(x):
        raise TraceError(path, row, col, f'"{v}" is not a finite number')
    return x


def _str(rec: dict[str, Any], col: str) -> str:
    v = rec.get(col)
    return "" if _missing(v) else str(v).strip()


def load_nodes(path: str | Path) -> list[TraceNode]:
    """Nodes of an openb node list or a generic node file, in file order."""
    p = Path(path)
    name = str(p)
    out: list[TraceNode] = []
    seen: set[str] = set()
    for row, rec in _rows(p, _NODE_ALIASES):
        n = _str(rec, "name")
        if not n:
            raise TraceError(name, row, "name", "missing value")
        if n in seen:
            raise TraceError(name, row, "name", f'duplicate node name "{n}"')
        seen.add(n)
        gpus = _int(name, row, rec, "gpu", 0)
        model = _str(rec, "model") if gpus else ""
        out.append(TraceNode(n, _int(name, row, rec, "cpu_milli"), _int(name, row, rec, "memory_mib", 0), gpus,
                             model, _int(name, row, rec, "max_pods", DEFAULT_MAX_PODS, lo=1)))
    if not out:
        raise TraceError(name, 1, "", "no nodes")
    return out


def load_pods(path: str | Path) -> list[TracePod]:
    """Pods of an openb pod list or a generic pod file, in file order."""
    p = Path(path)
    name = str(p)
    out: list[TracePod] = []
    seen: set[str] = set()
    for row, rec in _rows(p, _POD_ALIASES):
        n = _str(rec, "name")
        if not n:
            raise TraceError(name, row, "name", "missing value")
        if n in seen:
            raise TraceError(name, row, "name", f'duplicate pod name "{n}"')
        seen.add(n)
        count = _int(name, row, rec, "num_gpu", 0)
        milli = _int(name, row, rec, "gpu_milli", MILLI if count else 0)
        try:
            gpu = GpuRequest.make(milli, count, _str(rec, "gpu_models") or None)
        except GpuSpecError as e:
            col = "gpu_milli" if "milli" in str(e) else "num_gpu"
            raise TraceError(name, row, col, str(e)) from None
        arrival = _float(name, row, rec, "arrival")
        departure = _float(name, row, rec, "departure")
        if arrival is not None and departure is not None and departure < arrival:
            raise TraceError(name, row, "departure", f"departure {departure:g} is before arrival {arrival:g}")
        out.append(TracePod(n, _int(name, row, rec, "cpu_milli", 0), _int(name, row, rec, "memory_mib", 0),
                            gpu if gpu.count else None, arrival, departure))
    if not out:
        raise TraceError(name, 1, "", "no pods")
    return out
