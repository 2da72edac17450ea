"""``ksched dispatch``: the dispatcher that gives each pending pod to one live scheduler
instance (``ksched run --dispatch``), as the DispatchPolicy allows, and dispatches again the
pods of an instance whose Lease expires."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ksched.cli.common import (
    EXIT_INVALID_INPUT,
    kubeconfig_parent,
    leader_identity,
    rest_client,
    supervised_parent,
)

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register ``ksched dispatch`` on the subparsers action ``sub``."""
    p = sub.add_parser(
        "dispatch", help="spread pending pods over the live scheduler instances (ksched run --dispatch)",
        description="Watch pods and scheduler-instance Leases; give each pending pod of the managed "
                    "schedulerNames to one live instance (annotation ksched.io/instance): the least loaded one "
                    "allowed by the policy, the same one for pods of one group (label ksched.io/group). Pods "
                    "of an instance whose Lease expires are dispatched again.",
        parents=[kubeconfig_parent(), supervised_parent()])
    p.add_argument("--scheduler-name", action="append", default=[], metavar="NAME",
                   help="a schedulerName whose pods are dispatched (repeatable; default: default-scheduler)")
    p.add_argument("--policy", metavar="FILE", help="DispatchPolicy (YAML): which instances may take which pods")
    p.add_argument("--lease-namespace", default="kube-system", help="namespace of the instance Leases")
    p.add_argument("--leader-elect", action="store_true",
                   help="only dispatch while holding the Lease --lease-name (several dispatchers, one active)")
    p.add_argument("--lease-name", default="ksched-dispatcher", help="leader-election Lease name")
    p.add_argument("--id", help="identity for leader election (default: hostname_pid)")


def run(args: argparse.Namespace) -> int:
    """Dispatch until SIGINT/SIGTERM (or the parent process is gone); 0, 1 without a usable client,
    EXIT_INVALID_INPUT for a bad policy."""
    import threading

    from ksched.dispatch.dispatcher import Dispatcher
    from ksched.dispatch.policy import DispatchPolicy, PolicyError
    from ksched.dispatch.processes import wait_until_signalled

    try:
        policy = DispatchPolicy.load(args.policy) if args.policy else DispatchPolicy()
    except PolicyError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    client = rest_client(args)
    if client is None:
        return 1
    names = args.scheduler_name or ["default-scheduler"]
    stop = threading.Event()
    state: dict[str, Any] = {}

    def start() -> None:
        d = Dispatcher(client, scheduler_names=names, policy=policy, namespace=args.lease_namespace)
        ev = threading.Event()
        t = threading.Thread(target=lambda: d.run(ev), name="dispatcher", daemon=True)
        state.update(dispatcher=d, stop=ev, thread=t)
        t.start()

    def halt() -> None:
        ev, t = state.pop("stop", None), state.pop("thread", None)
        if ev is not None:
            ev.set()
        if t is not None:
            t.join(30)

    elector_thread = None
    if args.leader_elect:
        from ksched.client.leaderelection import LeaderElector

        elector = LeaderElector(client, args.lease_name, args.lease_namespace, leader_identity(args.id))
        elector_thread = threading.Thread(target=lambda: elector.run(stop, start, halt), name="leader-election",
                                          daemon=True)
        elector_thread.start()
    else:
        start()
    print(f"ksched dispatcher for {', '.join(names)} on {client.host} (instance Leases in {args.lease_namespace})",
          flush=True)
    try:
        wait_until_signalled(args.parent_pid, threading.Event())
    finally:
        stop.set()
        if elector_thread is not None:
            elector_thread.join(30)
        halt()
    return 0
