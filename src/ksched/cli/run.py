"""``ksched run``: the scheduler against any Kubernetes API server, as kube-scheduler runs:
secure serving of /healthz, /livez, /readyz, /metrics and /configz (``--bind-address``,
``--secure-port``), and leader election (on by default). When a profile is
``default-scheduler`` it elects on kube-scheduler's own Lease (``kube-system/kube-scheduler``),
so it can replace kube-scheduler but never schedule beside it; a secondary scheduler elects on
its own (``kube-system/ksched``). With ``--dispatch`` it is one of several instances scheduling
only the pods the dispatcher gives it."""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from ksched.cli.common import (
    EXIT_INVALID_INPUT,
    apply_leader_election_flags,
    kubeconfig_parent,
    leader_election_parent,
    leader_identity,
    load_config,
    report_crash,
    rest_client,
    secure_serving_parent,
    serving_ssl_context,
    supervised_parent,
)

__all__ = ["add_parser", "run"]

DEFAULT_SECURE_PORT = 10259  # ksched.scheduler.serving.DEFAULT_SECURE_PORT (kept import-free for --help)


def add_parser(sub: Any) -> None:
    """Register ``ksched run`` on the subparsers action ``sub``."""
    p = sub.add_parser(
        "run", help="run the scheduler against a Kubernetes API server (as kube-scheduler, or beside it)",
        description="Schedule the pods of this scheduler's profiles (their schedulerNames) on any Kubernetes API "
                    "server, binding through pods/binding and writing events and pod conditions as upstream "
                    "does. Leader election is on by default: with a default-scheduler profile on kube-scheduler's "
                    "Lease kube-system/kube-scheduler (ksched replaces kube-scheduler, never runs beside it), "
                    "otherwise on kube-system/ksched. Serves /healthz, /livez, /readyz, /metrics and /configz over "
                    "HTTPS on --bind-address:--secure-port. Inside a pod it uses the pod's service account unless "
                    "given a kubeconfig. SIGTERM or Ctrl-C stops it cleanly (the Lease is released).",
        parents=[kubeconfig_parent(), leader_election_parent(default_elect="true, or --config's leaderElection.leaderElect", default_name=(
            "kube-scheduler with a default-scheduler profile, else ksched")),
            secure_serving_parent(DEFAULT_SECURE_PORT), supervised_parent()])
    p.add_argument("--config", metavar="FILE", help="KubeSchedulerConfiguration (profiles, plugins, args, "
                                                    "leaderElection, clientConnection)")
    g = p.add_argument_group("several instances (ksched dispatch)")
    g.add_argument("--instance", metavar="NAME", help="with --dispatch: this instance's name")
    g.add_argument("--dispatch", action="store_true",
                   help="run as one of several instances: register with the Lease ksched-instance-NAME (in "
                        "--lease-namespace) and schedule only the pods the dispatcher gives this instance "
                        "(annotation ksched.io/instance=NAME)")
    g.add_argument("--lease-namespace", default="kube-system", help="with --dispatch: the instance Lease's namespace")
    g.add_argument("--instance-label", action="append", default=[], metavar="KEY=VALUE",
                   help="with --dispatch: a label of this instance, for the dispatcher's policy (repeatable)")
    g.add_argument("--partition-label", metavar="LABEL",
                   help="with --dispatch: own only the nodes whose LABEL equals --partition")
    g.add_argument("--partition", metavar="VALUE", help="with --partition-label: this instance's partition")
    g.add_argument("--instance-lease-duration", type=float, default=15.0, metavar="SECONDS",
                   help="with --dispatch: the instance Lease's duration (renewed every third of it)")


def _serving_context(args: argparse.Namespace) -> tuple[Any, int]:
    """The serving TLS context (None with --secure-port 0), or (None, exit code) on bad input;
    checked before anything talks to the API server."""
    if not args.secure_port:
        return None, 0
    try:
        return serving_ssl_context(args, "kube-scheduler"), 0
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return None, EXIT_INVALID_INPUT


def _serve(args: argparse.Namespace, ctx: Any, healthz: list[Any], readyz: list[Any], registry: Any,
           configz: Any) -> tuple[Any, int]:
    """The secure server started (None without a context), or (None, 1) when it cannot listen."""
    from ksched.scheduler.serving import SecureServer, endpoints_app

    if ctx is None:
        return None, 0
    server = SecureServer(endpoints_app(healthz=healthz, readyz=readyz, registry=registry, configz=configz),
                          args.bind_address, args.secure_port, ctx, "secure-serving")
    try:
        server.start()
    except OSError as e:
        print(f"error: failed to start secure server on {args.bind_address}:{args.secure_port}: {e}",
              file=sys.stderr)
        return None, 1
    print(f"serving /healthz, /livez, /readyz, /metrics and /configz on {server.url}", flush=True)
    return server, 0


def _leader_events(client: Any, component: str) -> Any:
    """client-go's lock events (``<id> became leader``), as core/v1 Events on the Lease."""
    from ksched.clock import RealClock
    from ksched.scheduler.recorder import EventRecorder

    recorder = EventRecorder(client, RealClock(), component=component)

    def record(lease: Any, message: str) -> None:
        if lease is not None:
            recorder.event(lease, "Normal", "LeaderElection", "", message)

    return record


def _warn_beside_kube_scheduler(names: list[str], le: Any) -> None:
    if "default-scheduler" not in names:
        return
    if not le.leader_elect:
        print("warning: scheduling default-scheduler pods without leader election: make sure no kube-scheduler "
              "runs (it would race ksched for the same pods)", file=sys.stderr)
    elif (le.resource_namespace, le.resource_name) != ("kube-system", "kube-scheduler"):
        print(f"warning: scheduling default-scheduler pods while electing on {le.resource_namespace}/"
              f"{le.resource_name}, not kube-scheduler's kube-system/kube-scheduler: a kube-scheduler would race "
              "ksched for the same pods", file=sys.stderr)


def _pause_gc() -> None:
    """Cyclic garbage collection off while a restart lists the cluster into its cache (turned
    back on by :func:`_resume_gc`).

    Everything a restart builds before its first decision lives on (pods, nodes, the cache), so
    the collector's passes over it find nothing: about a tenth of the start-up's CPU with 10 000
    pods. The objects that exist before the informers start (modules, classes, the
    configuration) are frozen first, so no later full collection walks them either. Memory
    freed by reference counting is freed as usual; only cycles wait."""
    import gc

    gc.freeze()
    gc.disable()


def _resume_gc(synced: threading.Event | None, timeout: float = 60.0) -> None:
    """Collection back on once ``synced`` is set (the handlers have the initial objects) or
    after ``timeout``; at once without ``synced`` (a scheduler built later, on becoming leader)."""
    import gc

    if synced is None:
        gc.enable()
        return

    def resume() -> None:
        synced.wait(timeout)
        gc.enable()

    threading.Thread(target=resume, name="gc-resume", daemon=True).start()


def run(args: argparse.Namespace) -> int:
    """Schedule until SIGINT/SIGTERM (or the parent process is gone); 0, 1 without a usable client,
    when the scheduling loop crashed or the lease was lost, EXIT_INVALID_INPUT for bad input."""
    from ksched.client.leaderelection import HealthzAdaptor, LeaderElector
    from ksched.dispatch.processes import wait_until_signalled
    from ksched.healthz import HealthCheck, shutdown_check
    from ksched.scheduler.config import default_configuration
    from ksched.scheduler.configz import component_config
    from ksched.scheduler.metrics import SchedulerMetrics
    from ksched.scheduler.runner import SchedulerRunner
    from ksched.scheduler.scheduler import Scheduler
    from ksched.scheduler.serving import (
        handler_sync_check,
        register_leader_election_metric,
        register_process_metrics,
    )

    if args.dispatch or args.instance:
        return _run_instance(args)
    config = load_config(args.config) or default_configuration()
    le = config.leader_election
    apply_leader_election_flags(args, le)
    errors = le.validate()
    if errors:
        for e in errors:
            print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    names = [p.scheduler_name for p in config.profiles]
    _warn_beside_kube_scheduler(names, le)
    ctx, code = _serving_context(args)
    if code:
        return code
    client = rest_client(args, config.client_connection.kubeconfig)
    if client is None:
        return 1
    metrics = SchedulerMetrics()
    register_process_metrics(metrics.registry)
    elector = None
    watchdog = HealthzAdaptor(20.0)
    if le.leader_elect:
        identity = leader_identity(args.id)
        try:
            elector = LeaderElector(client, le.resource_name, le.resource_namespace, identity,
                                    lease_duration=le.lease_duration, renew_deadline=le.renew_deadline,
                                    retry_period=le.retry_period, on_event=_leader_events(client, names[0]))
        except ValueError as e:
            print(f"error: couldn't create leader elector: {e}", file=sys.stderr)
            return EXIT_INVALID_INPUT
        watchdog.elector = elector
        register_leader_election_metric(metrics.registry, le.resource_name, lambda: elector.is_leader)
    runner = SchedulerRunner(lambda: Scheduler(client, config, threaded=True, metrics=metrics), elector,
                             delay_cache_until_active=config.delay_cache_until_active)
    stopping = threading.Event()
    election = [HealthCheck(watchdog.name, watchdog.check)] if elector is not None else []
    readyz = [*election, shutdown_check(stopping), handler_sync_check(runner.handlers_synced)]
    kubeconfig = args.kubeconfig or config.client_connection.kubeconfig
    server, code = _serve(args, ctx, election, readyz, metrics.registry,
                          lambda: component_config(config, kubeconfig))
    if code:
        return code
    _pause_gc()
    runner.start()
    _resume_gc(runner.scheduler.handlers_synced if runner.scheduler is not None else None)
    print(f"ksched scheduling pods of {', '.join(names)} on {client.host}", flush=True)
    if elector is not None:
        print(f"leader election on the Lease {le.resource_namespace}/{le.resource_name} as {elector.identity}",
              flush=True)
    try:
        ok = wait_until_signalled(args.parent_pid, failed=runner.failed)
    finally:
        stopping.set()
        runner.stop()
        if server is not None:
            server.stop()
    if runner.lost.is_set():
        print("error: leader election lost", file=sys.stderr)
        return 1
    if not ok:
        return report_crash()
    return 0


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
    from ksched.dispatch.instance import SchedulerInstance, validate_instance_name
    from ksched.dispatch.processes import wait_until_signalled
    from ksched.healthz import shutdown_check
    from ksched.scheduler.config import default_configuration
    from ksched.scheduler.configz import component_config
    from ksched.scheduler.metrics import SchedulerMetrics
    from ksched.scheduler.serving import handler_sync_check, register_process_metrics

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
    config = load_config(args.config) or default_configuration()
    if args.parent_pid is None and any(p.scheduler_name == "default-scheduler" for p in config.profiles):
        # (Children of serve/bench --schedulers run on an API server without kube-scheduler.)
        print("warning: an instance schedules default-scheduler pods without leader election: make sure no "
              "kube-scheduler runs (it would race the instances for the same pods)", file=sys.stderr)
    ctx, code = _serving_context(args)
    if code:
        return code
    client = rest_client(args, config.client_connection.kubeconfig)
    if client is None:
        return 1
    metrics = SchedulerMetrics()
    register_process_metrics(metrics.registry)
    try:
        inst = SchedulerInstance(client, args.instance, config, labels=labels,
                                 partition_label=args.partition_label or "", partition=args.partition or "",
                                 namespace=args.lease_namespace, lease_duration=args.instance_lease_duration,
                                 threaded=True, metrics=metrics, identity=args.id)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    stopping = threading.Event()
    readyz = [shutdown_check(stopping), handler_sync_check(inst.scheduler.handlers_synced.is_set)]
    kubeconfig = args.kubeconfig or config.client_connection.kubeconfig
    server, code = _serve(args, ctx, [], readyz, metrics.registry, lambda: component_config(config, kubeconfig))
    if code:
        return code
    inst.start()
    part = f", partition {args.partition_label}={args.partition}" if args.partition_label else ""
    print(f"ksched instance {args.instance}{part} scheduling the pods dispatched to it on {client.host}",
          flush=True)
    try:
        ok = wait_until_signalled(args.parent_pid, threading.Event(), inst.crashed)
    finally:
        stopping.set()
        inst.stop()
        if server is not None:
            server.stop()
    if not ok:
        return report_crash()
    return 0
