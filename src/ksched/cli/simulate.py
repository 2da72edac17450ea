"""``ksched simulate``: load Kubernetes manifests into an embedded cluster, schedule them on a
virtual clock until nothing more can change, and report where each pod went or why it is
Pending (a table, JSON, or a Markdown report).

Input may be a real cluster's state: ``kubectl get ... -o yaml`` dumps, ``ksched snapshot``
directories, or the cluster itself (``--from-cluster``, read-only); objects it already has keep
their status (bound pods stay on their nodes), and the objects every fresh cluster has are
merged. A kind ksched does not know is skipped with one warning (an error with ``--strict``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ksched.cli.common import EXIT_INVALID_INPUT
from ksched.cli.snapshot import add_selection_args, selection

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register ``ksched simulate`` on the subparsers action ``sub``."""
    p = sub.add_parser(
        "simulate", help="simulate scheduling of manifests on an embedded cluster (virtual time)",
        description="Load Kubernetes manifests (files or directories; YAML, JSON, kind: List, kubectl dumps) "
                    "into an embedded cluster, run the scheduler on a virtual clock until nothing more can "
                    "change, and report where every pod went or why it is pending.")
    p.add_argument("paths", nargs="*", metavar="PATH", help="manifest files or directories")
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
    p.add_argument("--timeline", metavar="FILE",
                   help="a scenario timeline (kind: Timeline): at given times apply/delete/patch objects, scale, "
                        "fail or restore nodes and zones, set usage, cordon/drain (see ksched.sim.timeline)")
    p.add_argument("--kubelet-config", metavar="FILE",
                   help="KubeletConfiguration (kubelet.config.k8s.io/v1beta1) documents: eviction thresholds, "
                        "one document per node pool (nodeSelector: labels)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.add_argument("--strict", action="store_true",
                   help="objects of kinds ksched does not know are errors (default: skipped with a warning)")
    p.add_argument("--disable-admission-plugins", metavar="PLUGINS", default="",
                   help="comma-separated admission plugins not to run (as kube-apiserver's flag), e.g. "
                        "ServiceAccount,Priority")
    p.add_argument("--from-cluster", metavar="KUBECONFIG",
                   help="start from a live cluster's objects (read-only: listed, never written), then add PATHs")
    p.add_argument("--context", help="with --from-cluster: the kubeconfig context")
    add_selection_args(p)


def run(args: argparse.Namespace) -> int:
    """Simulate, report; 0, or EXIT_INVALID_INPUT when a manifest or the configuration is invalid."""
    from ksched.sim.gcpacing import fewer_collections

    # One block from the read to the report: between blocks the collector would walk the whole
    # heap (ksched.sim.gcpacing).
    with fewer_collections():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ksched.api.loader import LoadResult, Manifest, build_objects, read_manifests
    from ksched.scheduler.config import ConfigError, load_configuration
    from ksched.sim.gcpacing import fewer_collections
    from ksched.sim.report import build_report, render_table, write_json, write_markdown_report
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
    eviction_configs = None
    if getattr(args, "kubelet_config", None):
        from ksched.kubelet.evictionapi import EvictionConfigError, load_kubelet_configs
        try:
            eviction_configs = load_kubelet_configs(args.kubelet_config)
        except EvictionConfigError as e:
            err.print(f"[red]error[/]: {e}", highlight=False, soft_wrap=True)
            return EXIT_INVALID_INPUT
    timeline = None
    if getattr(args, "timeline", None):
        from ksched.sim.timeline import TimelineError, load_timeline
        try:
            timeline = load_timeline(args.timeline)
        except TimelineError as e:
            err.print(f"[red]error[/]: {e}", highlight=False, soft_wrap=True)
            return EXIT_INVALID_INPUT
    if not args.paths and not args.from_cluster:
        err.print("[red]error[/]: nothing to simulate: give manifest PATHs or --from-cluster", highlight=False)
        return EXIT_INVALID_INPUT
    manifests: list[Manifest] = []
    if args.from_cluster:
        got = _from_cluster(args, err)
        if got is None:
            return 1
        manifests = got
    res = LoadResult()
    with fewer_collections():
        manifests.extend(read_manifests(args.paths, res))
        build_objects(manifests, res, unknown_kinds="skip")
    errors: list[tuple[str, int, str]] = [(e.source, e.index if e.index is not None else -1, str(e))
                                          for e in res.errors]
    for kind, skipped in sorted(res.skipped.items()):
        m = skipped[0]
        if args.strict:
            errors.extend((s.source, s.index, f"{s.where}: {s.ref}: kind: ksched does not know the kind {kind}")
                          for s in skipped)
        else:
            err.print(f"[yellow]warning[/]: skipping {len(skipped)} object(s) of kind {kind}, which ksched does "
                      f"not know (first: {m.where}); --strict makes this an error", highlight=False, soft_wrap=True)
    if res.skipped_events:
        err.print(f"[yellow]warning[/]: skipping {len(res.skipped_events)} Event(s) exported from another cluster",
                  highlight=False)
    try:
        sim = Simulation(config, seed=args.seed, explain=bool(args.explain), kubelet=not args.no_kubelet,
                         disable_admission_plugins=[p for p in args.disable_admission_plugins.split(",") if p],
                         eviction_configs=eviction_configs)
    except Exception as e:  # a plugin that cannot be built from the configuration, an unknown admission plugin
        err.print(f"[red]error[/]: {args.config or 'configuration'}: {e}", highlight=False)
        return EXIT_INVALID_INPUT
    # Admission (priority classes, duplicates, ...) is checked too, so every error shows at once.
    existing = [i for i, m in enumerate(res.manifests) if m.existing]
    # The manifests are handed to the store (no copy), which may change them: name them first.
    refs = [m.ref for m in res.manifests]
    for i, e in sim.load(res.objects, existing, owned=True, validated=True):
        m = res.manifests[i]
        errors.append((m.source, m.index, f"{m.where}: {refs[i]}: {e.message}"))
    # The store has the manifests now: the loader's typed objects are not kept through the run.
    del manifests, res, refs
    if sim.last_load.orphaned and not errors:
        err.print(f"[yellow]warning[/]: {len(sim.last_load.orphaned)} object(s) refer to owners not in the input "
                  f"(first: {sim.last_load.orphaned[0]}); those references were dropped", highlight=False,
                  soft_wrap=True)
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

    if timeline is not None:
        sim.use_timeline(timeline)
    try:
        result = sim.run(max_seconds=args.max_time, progress=progress)
    finally:
        if prog_ctx is not None:
            prog_ctx.stop()
    report = build_report(sim, result, explain=bool(args.explain) and args.format == "json")
    if sim.history is not None:
        report["timeline"] = sim.history.to_dict()
        for e in sim.timeline.errors:
            err.print(f"[yellow]warning[/]: {e}", highlight=False, soft_wrap=True)
    if args.format == "json":
        write_json(report, sys.stdout)
    else:
        if args.explain and args.explain != "*":
            report_ex = build_report(sim, result, explain=True)
            render_table(Console(), sim, report_ex, args.explain)
        else:
            render_table(Console(), sim, report)
        if "timeline" in report:
            _render_timeline(Console(), report["timeline"])
    if args.report:
        path = write_markdown_report(args.report, sim, report)
        if "timeline" in report:
            _append_timeline_report(path, report["timeline"])
        err.print(f"report written to {path}", highlight=False)
    return 0


def _render_timeline(console: Any, history: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title="Timeline")
    for col in ("TIME", "BY", "WHAT", "DETAIL"):
        t.add_column(col)
    for e in history["events"]:
        t.add_row(_clock(e["t"]), e["source"], e["what"], e["detail"])
    console.print(t)


def _clock(t: float) -> str:
    h, rem = divmod(int(t), 3600)
    m, sec = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{sec:02d}"


def _append_timeline_report(path: Any, history: dict[str, Any]) -> None:
    """The timeline's events and a plot of node memory over time, after the report."""
    from pathlib import Path

    from ksched.sim.timeline import plot_usage

    p = Path(path)
    png = p.with_name(p.stem + "-timeline.png")
    plot_usage(history, str(png))
    lines = ["", "## Timeline", "", f"![node memory over time]({png.name})", "",
             "| time | by | what | detail |", "| --- | --- | --- | --- |"]
    lines += [f"| {_clock(e['t'])} | {e['source']} | {e['what']} | {e['detail'].replace('|', '/')} |"
              for e in history["events"]]
    with p.open("a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _from_cluster(args: argparse.Namespace, err: Any) -> list[Any] | None:
    """The live cluster's objects as manifests (None when it cannot be read; said why)."""
    from ksched.api.errors import ApiError
    from ksched.api.loader import Manifest
    from ksched.client.rest import RestClient
    from ksched.client.snapshot import take_snapshot

    try:
        namespaces, sel = selection(args)
    except ValueError as e:
        err.print(f"[red]error[/]: {e}", highlight=False)
        return None
    try:
        client = RestClient(kubeconfig=args.from_cluster, context=args.context)
        snap = take_snapshot(client, namespaces, sel, include_secrets=args.snapshot_secrets)
    except ApiError as e:
        err.print(f"[red]error[/]: reading the cluster: {e.message}", highlight=False)
        return None
    except Exception as e:  # kubeconfig missing or unusable
        err.print(f"[red]error[/]: {args.from_cluster}: {e}", highlight=False)
        return None
    source = f"cluster:{args.from_cluster}"
    return [Manifest(raw, source, i) for i, raw in enumerate(snap.all())]
