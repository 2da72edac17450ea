"""The ``ksched`` command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ksched import __version__

__all__ = ["main"]

EXIT_INVALID_INPUT = 2


def _add_simulate(sub: Any) -> None:
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


def _add_bench(sub: Any) -> None:
    p = sub.add_parser(
        "bench", help="run upstream scheduler_perf workloads in-process and print JSON",
        description="Run scheduler_perf workloads (same node/pod templates and counts) in-process against the "
                    "embedded store, with informers and the full binding path. Prints one JSON object per "
                    "workload.")
    p.add_argument("workloads", nargs="*", metavar="WORKLOAD", help="workload names (default: SchedulingBasic)")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--all", action="store_true", help="run every workload (each in its own process)")
    p.add_argument("--size", choices=("full", "small"), default="full",
                   help="full: upstream's counts (5000 nodes); small: 500 nodes, finishes in seconds")
    p.add_argument("--nodes", type=int, help="override the number of nodes")
    p.add_argument("--pods", type=int, help="override the number of measured pods")
    p.add_argument("--init-pods", type=int, help="override the number of init pods")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ksched",
        description="A Kubernetes scheduler and scheduling simulator, faithful to upstream kube-scheduler.")
    parser.add_argument("--version", action="version", version=f"ksched {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v, -vv)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_simulate(sub)
    _add_bench(sub)
    return parser


def _setup_logging(verbosity: int) -> None:
    import logging

    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def cmd_simulate(args: argparse.Namespace) -> int:
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


def cmd_bench(args: argparse.Namespace) -> int:
    from ksched.sim.bench import WORKLOADS, run_in_subprocess, run_workload

    if args.list:
        for name, mk in WORKLOADS.items():
            w = mk()
            thr = f", upstream threshold {w.upstream_threshold} pods/s" if w.upstream_threshold else ""
            print(f"{name}: {w.description}{thr}")
        return 0
    names = list(WORKLOADS) if args.all else (args.workloads or ["SchedulingBasic"])
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        print(f"error: unknown workload(s): {', '.join(unknown)} (see ksched bench --list)", file=sys.stderr)
        return EXIT_INVALID_INPUT
    extra: list[str] = []
    if args.nodes is not None:
        extra += ["--nodes", str(args.nodes)]
    if args.pods is not None:
        extra += ["--pods", str(args.pods)]
    if args.init_pods is not None:
        extra += ["--init-pods", str(args.init_pods)]
    for name in names:
        if args.in_process or len(names) == 1:
            out = run_workload(WORKLOADS[name](), args.size, args.seed, args.nodes, args.pods, args.init_pods)
        else:
            out = run_in_subprocess(name, args.size, args.seed, extra)
        print(json.dumps(out), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    if args.command is None:
        parser.print_help()
        return 0
    handlers = {"simulate": cmd_simulate, "bench": cmd_bench}
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into a command that stopped reading (e.g. head): not an error of ours.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
