"""Where a benchmark's CPU goes: a sampling profile of one workload's measured phase.

``ksched bench --breakdown`` times a few phases in wall time, which a busy machine distorts;
cProfile costs so much per call that it inflates small functions several times over. This
samples the Python stack on a CPU-time timer (``ITIMER_PROF``, every ``--interval`` seconds of
the process's CPU; Linux delivers at most about one signal per scheduler tick, so runs of a few
seconds give a few thousand samples) from the moment the benchmark freezes the garbage
collector before its measured phase until it unfreezes it after, and prints microseconds of
CPU per measured pod: by function (self and cumulative) and, for the functions named with
``--tree``, by callee. Time spent in C (NumPy, a garbage collection) counts for the Python
function running then. Run it with the tree under test first on the path::

    PYTHONPATH=src python scripts/profile_bench.py SchedulingBasic --runs 3 --tree schedule_one
"""

from __future__ import annotations

import argparse
import collections
import gc
import signal
import sys
import time
from types import CodeType, FrameType
from typing import Any


def _name(co: CodeType) -> str:
    path = co.co_filename
    for marker in ("/src/ksched/", "site-packages/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{co.co_firstlineno}({co.co_name})"


def main(argv: list[str]) -> int:
    import ksched.sim.bench as bench

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload", choices=sorted(bench.WORKLOADS))
    ap.add_argument("--size", default="full", choices=("full", "small"))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--interval", type=float, default=0.001, help="CPU seconds between samples")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--tree", action="append", default=[], help="show the callees of functions matching this")
    args = ap.parse_args(argv)

    gc.set_threshold(20_000, 20, 20)  # as `ksched` itself runs
    own: collections.Counter[str] = collections.Counter()
    cum: collections.Counter[str] = collections.Counter()
    edges: collections.Counter[tuple[str, str]] = collections.Counter()
    samples = 0

    def on_sample(signum: int, frame: FrameType | None) -> None:
        nonlocal samples
        samples += 1
        seen: set[Any] = set()
        child: str | None = None
        f = frame
        while f is not None:
            k = _name(f.f_code)
            if child is None:
                own[k] += 1
            if k not in seen:
                cum[k] += 1
                seen.add(k)
                if child is not None and (k, child) not in seen:
                    edges[(k, child)] += 1
                    seen.add((k, child))
            child = k
            f = f.f_back

    cpu = [0.0, 0.0]
    pods = 0
    freeze, unfreeze = gc.freeze, gc.unfreeze

    def start() -> None:
        freeze()
        cpu[1] = time.process_time()
        signal.setitimer(signal.ITIMER_PROF, args.interval, args.interval)

    def stop() -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        cpu[0] += time.process_time() - cpu[1]
        unfreeze()

    signal.signal(signal.SIGPROF, on_sample)
    bench.gc.freeze, bench.gc.unfreeze = start, stop  # type: ignore[attr-defined]
    try:
        for _ in range(args.runs):
            out = bench.run_workload(bench.WORKLOADS[args.workload](), args.size)
            pods += out["measured_scheduled"]
    finally:
        bench.gc.freeze, bench.gc.unfreeze = freeze, unfreeze  # type: ignore[attr-defined]
    if not samples or not pods:
        print("no samples", file=sys.stderr)
        return 1
    us = cpu[0] / pods * 1e6 / samples
    print(f"{args.workload} {args.size} x{args.runs}: {cpu[0] / pods * 1e6:.1f} us of CPU per measured pod, "
          f"{samples} samples")
    print("--- self (us per pod)")
    for k, v in own.most_common(args.top):
        print(f"{v * us:8.1f}  {k}")
    print("--- cumulative (us per pod)")
    for k, v in cum.most_common(args.top):
        print(f"{v * us:8.1f}  {k}")
    for pat in args.tree:
        for k in sorted((k for k in cum if pat in k), key=lambda k: -cum[k]):
            print(f"--- {k}: {cum[k] * us:.1f} (self {own[k] * us:.1f})")
            for (parent, callee), v in sorted(edges.items(), key=lambda kv: -kv[1]):
                if parent == k:
                    print(f"{v * us:8.1f}  {callee}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
