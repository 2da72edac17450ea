"""``ksched snapshot``: copy a live cluster's objects into a directory of manifests that
``ksched simulate`` loads (one ``kind: List`` file per resource). Read-only: it only lists,
page by page; see ``ksched.client.snapshot`` for what is taken."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ksched.cli.common import EXIT_INVALID_INPUT, kubeconfig_parent

__all__ = ["add_parser", "add_selection_args", "run", "selection"]


def add_selection_args(p: argparse.ArgumentParser) -> None:
    """``--namespace``, ``--selector`` and ``--include-secrets`` (shared with ``simulate
    --from-cluster``)."""
    p.add_argument("--namespace", "-n", action="append", default=[], metavar="NS", dest="snapshot_namespaces",
                   help="only this namespace's objects (repeat for several; cluster-scoped objects are always "
                        "taken)")
    p.add_argument("--selector", "-l", metavar="SELECTOR", dest="snapshot_selector",
                   help="label selector for the namespaced objects (cluster-scoped ones are taken whole)")
    p.add_argument("--include-secrets", action="store_true", dest="snapshot_secrets",
                   help="take Secrets too (left out by default: a snapshot is a file on disk)")


def add_parser(sub: Any) -> None:
    """Register ``ksched snapshot`` on the subparsers action ``sub``."""
    p = sub.add_parser(
        "snapshot", parents=[kubeconfig_parent()],
        help="copy a cluster's objects into a directory that ksched simulate loads (read-only)",
        description="List every object of the kinds ksched knows (and the cluster's custom resources) from a "
                    "live cluster, page by page, and write them as manifests. Nothing is written to the "
                    "cluster.")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write (must be new or empty)")
    add_selection_args(p)


def selection(args: argparse.Namespace) -> tuple[list[str], Any]:
    """(namespaces, label selector) from the selection flags; ValueError for a bad selector."""
    from ksched.api.labels import SelectorError, parse_label_selector

    sel = None
    if args.snapshot_selector:
        try:
            sel = parse_label_selector(args.snapshot_selector)
        except SelectorError as e:
            raise ValueError(f"--selector {args.snapshot_selector!r}: {e}") from e
    return list(args.snapshot_namespaces), sel


def run(args: argparse.Namespace) -> int:
    """Snapshot; 0, 1 when the cluster cannot be read, EXIT_INVALID_INPUT for bad arguments."""
    from pathlib import Path

    import yaml

    from ksched.api.errors import ApiError
    from ksched.cli.common import rest_client
    from ksched.client.snapshot import take_snapshot

    out = Path(args.output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        print(f"error: {out}: exists and is not an empty directory", file=sys.stderr)
        return EXIT_INVALID_INPUT
    try:
        namespaces, sel = selection(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    client = rest_client(args)
    if client is None:
        return 1
    try:
        snap = take_snapshot(client, namespaces, sel, include_secrets=args.snapshot_secrets)
    except ApiError as e:
        print(f"error: reading the cluster: {e.message}", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    for resource, objs in sorted(snap.objects.items()):
        doc = {"apiVersion": "v1", "kind": "List", "items": objs}
        tmp = out / f".{resource}.yaml.tmp"
        tmp.write_text(yaml.dump(doc, Dumper=dumper, sort_keys=False, default_flow_style=False), encoding="utf-8")
        tmp.replace(out / f"{resource}.yaml")
        print(f"{resource}: {len(objs)}", file=sys.stderr)
    for resource, why in sorted(snap.unavailable.items()):
        print(f"warning: {resource} not listed: {why}", file=sys.stderr)
    print(f"{snap.count()} objects written to {out}", file=sys.stderr)
    return 0
