"""``ksched run``: the scheduler against any Kubernetes API server (a secondary scheduler for
its profiles' schedulerNames), optionally leader-elected, or with ``--dispatch`` one of
several instances scheduling only the pods the dispatcher gives it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ksched.cli.common import (
    EXIT_INVALID_INPUT,
    kubeconfig_parent,
    leader_identity,
    load_config,
    report_crash,
    rest_client,
    supervised_parent,
)

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register ``ksched run`` on the subparsers action ``sub``."""
    p = sub.add_parser(
        "run", help="run the scheduler against a Kubernetes API server (as a secondary scheduler)",
        description="Schedule the pods of this scheduler's profiles (their schedulerNames) on any Kubernetes API "
                    "server, binding through pods/binding and writing events and pod conditions as upstream "
                    "does. Ctrl-C stops it cleanly.",
        parents=[kubeconfig_parent(), supervised_parent()])
    p.add_argument("--config", metavar="FILE", help="KubeSchedulerConfiguration (profiles, plugins, args)")
    p.add_argument("--leader-elect", action="store_true", help="only schedule while holding a Lease")
    p.add_argument("--lease-name", default="ksched", help="leader-election Lease name")
    p.add_argument("--lease-namespace", default="kube-system", help="leader-election Lease namespace")
    p.add_argument("--id", help="identity for leader election (default: hostname_pid)")
    p.add_argument("--metrics-port", type=int, default=0, help="serve Prometheus metrics on 127.0.0.1:PORT")
    p.add_argument("--instance", metavar="NAME", help="with --dispatch: this instance's name")
    p.add_argument("--dispatch", action="store_true",
                   help="run as one of several instances: register with the Lease ksched-instance-NAME (in "
                        "--lease-namespace) and schedule only the pods the dispatcher gives this instance "
                        "(annotation ksched.io/instance=NAME)")
    p.add_argument("--instance-label", action="append", default=[], metavar="KEY=VALUE",
                   help="with --dispatch: a label of this instance, for the dispatcher's policy (repeatable)")
    p.add_argument("--partition-label", metavar="LABEL",
                   help="with --dispatch: own only the nodes whose LABEL equals --partition")
    p.add_argument("--partition", metavar="VALUE", help="with --partition-label: this instance's partition")
    p.add_argument("--instance-lease-duration", type=float, default=15.0, metavar="SECONDS",
                   help="with --dispatch: the instance Lease's duration (renewed every third of it)")


def run(args: argparse.Namespace) -> int:
    """Schedule until SIGINT/SIGTERM (or the parent process is gone); 0, 1 without a usable client
    or when the scheduling loop crashed, EXIT_INVALID_INPUT for bad input."""
    from ksched.dispatch.processes import wait_until_signalled
    from ksched.scheduler.runner import SchedulerRunner
    from ksched.scheduler.scheduler import Scheduler

    if args.dispatch or args.instance:
        return _run_instance(args)
    config = load_config(args.config)
    client = rest_client(args)
    if client is None:
        return 1
    metrics = _serve_metrics(args.metrics_port)
    elector = None
    if args.leader_elect:
        from ksched.client.leaderelection import LeaderElector

        elector = LeaderElector(client, args.lease_name, args.lease_namespace, leader_identity(args.id))
    runner = SchedulerRunner(lambda: Scheduler(client, config, threaded=True, metrics=metrics), elector)
    runner.start()
    names = [p.scheduler_name for p in config.profiles] if config else ["default-scheduler"]
    print(f"ksched scheduling pods of {', '.join(names)} on {client.host}", flush=True)
    try:
        ok = wait_until_signalled(args.parent_pid, failed=runner.crashed)
    finally:
        runner.stop()
    if not ok:
        return report_crash()
    return 0


def _serve_metrics(port: int | None) -> Any:
    """Scheduler metrics served on 127.0.0.1:port (None: no metrics endpoint)."""
    if not port:
        return None
    from prometheus_client import start_http_server

    from ksched.scheduler.metrics import SchedulerMetrics

    metrics = SchedulerMetrics()
    start_http_server(port, addr="127.0.0.1", registry=metrics.registry)
    return metrics


def _parse_labels(items: list[str]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for it in items:
        k, eq, v = it.partition("=")
        if not eq or not k:
            print(f"error: --instance-label {it!r}: expected KEY=VALUE", file=sys.stderr)
            return None
        out[k] = v
    return out


def _run_instance(args: argparse.Namespace) -> int:
    import threading

    from ksched.dispatch.instance import SchedulerInstance, validate_instance_name
    from ksched.dispatch.processes import wait_until_signalled

    if not args.dispatch or not args.instance:
        print("error: --instance NAME and --dispatch go together", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.leader_elect:
        print("error: --leader-elect does not apply to a dispatched instance (its Lease is its own)",
              file=sys.stderr)
        return EXIT_INVALID_INPUT
    why = validate_instance_name(args.instance)
    if why is not None:
        print(f"error: {why}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if bool(args.partition_label) != bool(args.partition):
        print("error: --partition-label and --partition go together", file=sys.stderr)
        return EXIT_INVALID_INPUT
    labels = _parse_labels(args.instance_label)
    if labels is None:
        return EXIT_INVALID_INPUT
    config = load_config(args.config)
    client = rest_client(args)
    if client is None:
        return 1
    metrics = _serve_metrics(args.metrics_port)
    try:
        inst = SchedulerInstance(client, args.instance, config, labels=labels,
                                 partition_label=args.partition_label or "", partition=args.partition or "",
                                 namespace=args.lease_namespace, lease_duration=args.instance_lease_duration,
                                 threaded=True, metrics=metrics, identity=args.id)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    inst.start()
    part = f", partition {args.partition_label}={args.partition}" if args.partition_label else ""
    print(f"ksched instance {args.instance}{part} scheduling the pods dispatched to it on {client.host}",
          flush=True)
    try:
        ok = wait_until_signalled(args.parent_pid, threading.Event(), inst.crashed)
    finally:
        inst.stop()
    if not ok:
        return report_crash()
    return 0
