"""One scheduler against a dispatcher and N instances on the examples (and scenario clusters),
in the virtual-clock simulations of tests/dispatch/test_same_outcome.py: per run, pods bound,
pending (unschedulable) and preempted. Prints a Markdown table.

    PYTHONPATH=src python scripts/multi_outcome.py [example:NAME|scenario:NAME ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "dispatch"))

from multisim import BOUND, PREEMPTED, Outcome, reordered, run_many, run_one  # noqa: E402
from test_same_outcome import example_sets, waves_of  # noqa: E402


def counts(o: Outcome) -> tuple[int, int, int]:
    bound = sum(1 for f in o.fates.values() if f == BOUND)
    preempted = sum(1 for f in o.fates.values() if f == PREEMPTED)
    pending = sum(1 for f in o.fates.values() if f not in (BOUND, PREEMPTED, "deleted", "deleting", "absent"))
    return bound, pending, preempted


def main(argv: list[str]) -> int:
    keys = argv or [f"example:{p.name}" for p in example_sets()]
    print("| set | runs | bound | pending | preempted |")
    print("| --- | --- | --- | --- | --- |")
    for key in keys:
        waves = waves_of(key)
        rows = [("one scheduler (seeds 0-2)", [run_one(reordered(waves, i), seed=i) for i in range(3)])]
        for n in (2, 3):
            rows.append((f"{n} instances (seeds 0-1)", [run_many(waves, n, seed=s, poll_prob=1.0) for s in (0, 1)]))
            rows.append((f"{n} instances, lagging watches", [run_many(waves, n, seed=2, poll_prob=0.3)]))
        for label, outs in rows:
            cs = [counts(o) for o in outs]
            cols = [", ".join(str(c[i]) for c in cs) for i in range(3)]
            print(f"| {key} | {label} | {cols[0]} | {cols[1]} | {cols[2]} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
