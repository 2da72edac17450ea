"""CPU seconds of one benchmark's measured phase on any ksched tree, old ones included.

``ksched bench`` reports ``measured_cpu_seconds`` itself; trees from before that field (the
pre-refactor baseline a496134) do not. This runs a workload in-process and reads
``time.process_time()`` where the benchmark freezes the garbage collector just before the
measured phase and unfreezes it right after (both trees do), which are the benchmark's own
timing points. Run it with the tree under test first on the path, alternating trees::

    PYTHONPATH=/path/to/tree/src python scripts/bench_cpu.py SchedulingBasic small

One JSON line: wall pods/s, the measured phase's CPU seconds, pods bound per CPU second, the
p50 attempt latency, pods bound, routine pods created meanwhile (PreemptionAsync's preemptors).
"""

from __future__ import annotations

import gc
import json
import sys
import time
from typing import Any


def main(argv: list[str]) -> int:
    import ksched.sim.bench as bench

    if not argv or argv[0] not in bench.WORKLOADS:
        print(f"usage: bench_cpu.py WORKLOAD [full|small]; workloads: {' '.join(sorted(bench.WORKLOADS))}",
              file=sys.stderr)
        return 2
    size = argv[1] if len(argv) > 1 else "full"
    marks: dict[str, float] = {}
    freeze, unfreeze = gc.freeze, gc.unfreeze

    def timed_freeze() -> None:
        freeze()
        marks["start"] = time.process_time()

    def timed_unfreeze() -> None:
        marks["end"] = time.process_time()
        unfreeze()

    bench.gc.freeze = timed_freeze  # type: ignore[attr-defined]
    bench.gc.unfreeze = timed_unfreeze  # type: ignore[attr-defined]
    try:
        out: dict[str, Any] = bench.run_workload(bench.WORKLOADS[argv[0]](), size)
    finally:
        bench.gc.freeze, bench.gc.unfreeze = freeze, unfreeze  # type: ignore[attr-defined]
    cpu = marks["end"] - marks["start"]
    bound = out["measured_scheduled"]
    print(json.dumps({"workload": out["workload"], "size": size, "pods_per_second": out["pods_per_second"],
                      "measured_cpu_seconds": round(cpu, 4),
                      "pods_per_cpu_second": round(bound / cpu, 1) if cpu > 0 else None,
                      "p50_attempt_ms": out["p50_attempt_ms"], "measured_scheduled": bound,
                      "routine_pods": out.get("routine_pods", 0)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
