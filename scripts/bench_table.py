"""Render `ksched bench` JSON lines as the markdown table in docs/benchmarks.md.

    ksched bench --all --repeat 3 > results.jsonl
    python scripts/bench_table.py results.jsonl --commit $(git rev-parse --short HEAD)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _num(v: Any, fmt: str = "{:,.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def row(d: dict[str, Any], commit: str) -> str:
    if "error" in d:
        return f"| {d.get('workload')} | error: {str(d['error'])[:80]} |"
    pods = f"{d['init_pods']:,} + {d['measured_pods']:,}"
    target = d.get("target")
    met = d.get("target_met")
    verdict = "-" if target is None else ("yes" if met else "**no**" if met is not None else "n/a")
    cmd = f"`ksched bench {d['workload']}`" if d.get("size") == "full" else f"`ksched bench {d['workload']} --size small`"
    rate = _num(d["pods_per_second"])
    runs = d.get("runs_pods_per_second")
    if runs and len(runs) > 1:
        rate += f" ({min(runs):,.0f}-{max(runs):,.0f})"
    return (f"| {d['workload']} | {d['nodes']:,} | {pods} | {rate} | "
            f"{_num(d['p50_attempt_ms'], '{:.3f}')} | {_num(d['p99_attempt_ms'], '{:.3f}')} | "
            f"{_num(d['peak_rss_mib'])} | {_num(d.get('upstream_threshold'))} | {_num(target)} | {verdict} | "
            f"{cmd} | `{commit}` |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--commit", default="?")
    args = ap.parse_args(argv)
    print("| workload | nodes | init + measured pods | pods/s (median, range) | p50 ms | p99 ms | peak RSS MiB | upstream "
          "threshold | target | met | command | commit |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |")
    for f in args.files:
        for line in f.read_text().splitlines():
            if line.strip().startswith("{"):
                print(row(json.loads(line), args.commit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
