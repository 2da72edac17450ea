"""Pod shapes from a trace file, for FGD's ``typicalPodsFrom``. The trace formats are read by
``ksched.sim.trace``, above the scheduler; this reads the same columns (openb names or the
generic ones) with the csv module, for the few fields typical pods need."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from ksched.api.gpu import GpuRequest, GpuSpecError
from ksched.scheduler.plugins.gpushare.shape import PodShape, shape_of

__all__ = ["trace_shapes"]

_ALIASES = {"gpu_spec": "gpu_models", "gpu_model": "gpu_models", "gpu_count": "num_gpu"}


def _num(v: object, path: str, row: int, col: str) -> int:
    if v is None or str(v).strip().lower() in ("", "nan"):
        return 0
    try:
        return int(float(str(v)))
    except ValueError:
        raise ValueError(f'{path}: row {row}, column {col}: "{v}" is not an integer') from None


def trace_shapes(path: str) -> list[PodShape]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror or e}") from None
    if p.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        rows = []
        for i, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append((i, json.loads(line)))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}: row {i}: invalid JSON: {e.msg}") from None
    else:
        rows = list(enumerate(csv.DictReader(text.splitlines()), start=2))
    out = []
    for i, rec in rows:
        rec = {_ALIASES.get(k, k): v for k, v in rec.items()}
        count = _num(rec.get("num_gpu"), path, i, "num_gpu")
        milli = _num(rec.get("gpu_milli"), path, i, "gpu_milli") if rec.get("gpu_milli") not in (None, "") else \
            (1000 if count else 0)
        models = rec.get("gpu_models")
        try:
            g = GpuRequest.make(milli, count, str(models) if models and str(models).lower() != "nan" else None,
                                f"{path}: row {i}")
        except GpuSpecError as e:
            raise ValueError(str(e)) from None
        out.append(shape_of(_num(rec.get("cpu_milli"), path, i, "cpu_milli") or 100, g))
    return out
