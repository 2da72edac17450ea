"""``ksched simulate``: load Kubernetes manifests into an embedded cluster, schedule them on a
virtual clock until nothing more can change, and report where each pod went or why it is
Pending (a table, JSON, or a Markdown report)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ksched.cli.common import EXIT_INVALID_INPUT

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register ``ksched simulate`` on the subparsers action ``sub``."""
    p = sub.add_parser(
        "simulate", help="simulate scheduling of manifests on an embedded cluster (virtual time)",
        description="Load Kubernetes manifests (files or directories; YAML, JSON, kind: List, kubectl dumps) "
                    "into an embedded cluster, run the scheduler on a virtual clock until nothing more can "
                    "change, and report where every pod went or why it is pending.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="manifest files or directories")
    p.add_argument("--config", metavar="FILE", help="KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)")
    p.add_argument("--seed", type=int, default=0, help="seed for tie-breaking among equally scored nodes")
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format (default: table)")
    p.add_argument("--report", metavar="FILE", help="also write a Markdown report (with a utilization plot)")
    p.add_argument("--explain", nargs="?", const="*", metavar="POD",
                   help="record each pod's last decision (filter verdict per node, score per plugin); "
                        "with --format table, name the pod (namespace/name) to print")
    p.add_argument("--max-time", type=float, default=7 * 24 * 3600.0, metavar="SECONDS",
                   help="stop after this much simulated time (default: one week)")
    p.add_argument("--no-kubelet", action="store_true", help="do not simulate kubelets (pods stay Pending)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    """Simulate, report; 0, or EXIT_INVALID_INPUT when a manifest or the configuration is invalid."""
    from rich.console import Console

    from ksched.api.loader import load_manifests
    from ksched.scheduler.config import ConfigError, load_configuration
    from ksched.sim.report import build_report, render_table, write_markdown_report
    from ksched.sim.simulation import Simulation

    err = Console(stderr=True)
    config = None
    if args.config:
        try:
            config = load_configuration(args.config)
        except ConfigError as e:
            for msg in e.errors:
                err.print(f"[red]error[/]: {e.source}: {msg}", highlight=False)
            return EXIT_INVALID_INPUT
    res = load_manifests(args.paths)
    errors: list[tuple[str, int, str]] = [(e.source, e.index if e.index is not None else -1, str(e))
                                          for e in res.errors]
    try:
        sim = Simulation(config, seed=args.seed, explain=bool(args.explain), kubelet=not args.no_kubelet)
    except Exception as e:  # a plugin that cannot be built from the configuration
        err.print(f"[red]error[/]: {args.config or 'configuration'}: {e}", highlight=False)
        return EXIT_INVALID_INPUT
    # Admission (priority classes, duplicates, ...) is checked too, so every error shows at once.
    for i, e in sim.load(res.objects):
        m = res.manifests[i]
        errors.append((m.source, m.index, f"{m.where}: {m.ref}: {e.message}"))
    if errors:
        errors.sort(key=lambda t: (t[0], t[1]))
        for _, _, e in errors:
            err.print(f"[red]error[/]: {e}", highlight=False, soft_wrap=True)
        err.print(f"{len(errors)} error(s); nothing was simulated.", highlight=False)
        return EXIT_INVALID_INPUT
    assert sim is not None
    n_pods = sim.store.count("Pod")
    progress = None
    prog_ctx = None
    if not args.quiet and n_pods >= 1000 and err.is_terminal:
        from rich.progress import Progress

        prog_ctx = Progress(console=err, transient=True)
        task = prog_ctx.add_task("scheduling", total=n_pods)
        prog_ctx.start()

        def progress(s: Simulation) -> None:
            bound = sum(1 for p in s.store.items("Pod") if getattr(p, "node_name", ""))
            prog_ctx.update(task, completed=bound)  # type: ignore[union-attr]

    try:
        result = sim.run(max_seconds=args.max_time, progress=progress)
    finally:
        if prog_ctx is not None:
            prog_ctx.stop()
    report = build_report(sim, result, explain=bool(args.explain) and args.format == "json")
    if args.format == "json":
        print(json.dumps(report, indent=2, sort_keys=False))
    else:
        if args.explain and args.explain != "*":
            report_ex = build_report(sim, result, explain=True)
            render_table(Console(), sim, report_ex, args.explain)
        else:
            render_table(Console(), sim, report)
    if args.report:
        path = write_markdown_report(args.report, sim, report)
        err.print(f"report written to {path}", highlight=False)
    return 0
