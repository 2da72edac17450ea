"""``ksched dispatch``: the dispatcher that gives each pending pod to one live scheduler
instance (``ksched run --dispatch``), as the DispatchPolicy allows, and dispatches again the
pods of an instance whose Lease expires. With ``--leader-elect`` several replicas run and one
dispatches (Lease ``kube-system/ksched-dispatcher``); like kube-scheduler it exits (1) when it
loses the Lease. Serves /healthz, /livez, /readyz and /metrics over HTTPS
(``--bind-address``:``--secure-port``, 10260 by default)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ksched.cli.common import (
    EXIT_INVALID_INPUT,
    apply_leader_election_flags,
    kubeconfig_parent,
    leader_election_parent,
    leader_identity,
    rest_client,
    secure_serving_parent,
    serving_ssl_context,
    supervised_parent,
)

__all__ = ["add_parser", "run"]

DEFAULT_SECURE_PORT = 10260
DEFAULT_LEASE_NAME = "ksched-dispatcher"


def add_parser(sub: Any) -> None:
    """Register ``ksched dispatch`` on the subparsers action ``sub``."""
    p = sub.add_parser(
        "dispatch", help="spread pending pods over the live scheduler instances (ksched run --dispatch)",
        description="Watch pods and scheduler-instance Leases; give each pending pod of the managed "
                    "schedulerNames to one live instance (annotation ksched.io/instance): the least loaded one "
                    "allowed by the policy, the same one for pods of one group (label ksched.io/group). Pods "
                    "of an instance whose Lease expires are dispatched again.",
        parents=[kubeconfig_parent(), leader_election_parent(default_elect="false", default_name=DEFAULT_LEASE_NAME),
                 secure_serving_parent(DEFAULT_SECURE_PORT), supervised_parent()])
    p.add_argument("--scheduler-name", action="append", default=[], metavar="NAME",
                   help="a schedulerName whose pods are dispatched (repeatable; default: default-scheduler)")
    p.add_argument("--policy", metavar="FILE", help="DispatchPolicy (YAML): which instances may take which pods")
    p.add_argument("--lease-namespace", default="kube-system",
                   help="namespace of the instance Leases (and of the leader-election Lease unless "
                        "--leader-elect-resource-namespace is given)")


def run(args: argparse.Namespace) -> int:
    """Dispatch until SIGINT/SIGTERM (or the parent process is gone); 0, 1 without a usable client
    or when the Lease was lost, EXIT_INVALID_INPUT for bad input."""
    import threading

    from ksched.client.leaderelection import HealthzAdaptor, LeaderElectionConfiguration, LeaderElector
    from ksched.dispatch.dispatcher import Dispatcher
    from ksched.dispatch.policy import DispatchPolicy, PolicyError
    from ksched.dispatch.processes import wait_until_signalled
    from ksched.healthz import HealthCheck, shutdown_check
    from ksched.scheduler.serving import (
        SecureServer,
        endpoints_app,
        register_leader_election_metric,
        register_process_metrics,
    )

    try:
        policy = DispatchPolicy.load(args.policy) if args.policy else DispatchPolicy()
    except PolicyError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    le = LeaderElectionConfiguration(leader_elect=False, resource_name=DEFAULT_LEASE_NAME,
                                     resource_namespace=args.lease_namespace)
    apply_leader_election_flags(args, le)
    errors = le.validate()
    if errors:
        for e in errors:
            print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    client = rest_client(args)
    if client is None:
        return 1
    names = args.scheduler_name or ["default-scheduler"]
    stop = threading.Event()
    lost = threading.Event()
    state: dict[str, Any] = {}

    def start() -> None:
        d = Dispatcher(client, scheduler_names=names, policy=policy, namespace=args.lease_namespace)
        ev = threading.Event()
        t = threading.Thread(target=lambda: d.run(ev), name="dispatcher", daemon=True)
        state.update(dispatcher=d, stop=ev, thread=t, leading=True)
        t.start()

    def halt() -> None:
        ev, t = state.pop("stop", None), state.pop("thread", None)
        if ev is not None:
            ev.set()
        if t is not None:
            t.join(30)

    def stopped_leading() -> None:
        led = state.pop("leading", False)
        halt()
        if led and not stop.is_set():
            print("error: leader election lost", file=sys.stderr)
            lost.set()

    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    register_process_metrics(registry)
    watchdog = HealthzAdaptor(20.0)
    elector = None
    if le.leader_elect:
        try:
            elector = LeaderElector(client, le.resource_name, le.resource_namespace, leader_identity(args.id),
                                    lease_duration=le.lease_duration, renew_deadline=le.renew_deadline,
                                    retry_period=le.retry_period)
        except ValueError as e:
            print(f"error: couldn't create leader elector: {e}", file=sys.stderr)
            return EXIT_INVALID_INPUT
        watchdog.elector = elector
        register_leader_election_metric(registry, le.resource_name, lambda: elector.is_leader)
    stopping = threading.Event()
    election = [HealthCheck(watchdog.name, watchdog.check)] if elector is not None else []
    server = None
    if args.secure_port:
        try:
            ctx = serving_ssl_context(args, "ksched-dispatcher")
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_INVALID_INPUT
        server = SecureServer(endpoints_app(healthz=election, readyz=[*election, shutdown_check(stopping)],
                                            registry=registry), args.bind_address, args.secure_port, ctx,
                              "secure-serving")
        try:
            server.start()
        except OSError as e:
            print(f"error: failed to start secure server on {args.bind_address}:{args.secure_port}: {e}",
                  file=sys.stderr)
            return 1
        print(f"serving /healthz, /livez, /readyz and /metrics on {server.url}", flush=True)
    elector_thread = None
    if elector is not None:
        el = elector
        elector_thread = threading.Thread(target=lambda: el.run(stop, start, stopped_leading),
                                          name="leader-election", daemon=True)
        elector_thread.start()
    else:
        start()
    print(f"ksched dispatcher for {', '.join(names)} on {client.host} (instance Leases in {args.lease_namespace})",
          flush=True)
    try:
        wait_until_signalled(args.parent_pid, threading.Event(), lost)
    finally:
        stopping.set()
        halt()  # stop dispatching first, then release the Lease
        stop.set()
        if elector_thread is not None:
            elector_thread.join(30)
        if server is not None:
            server.stop()
    return 1 if lost.is_set() else 0
