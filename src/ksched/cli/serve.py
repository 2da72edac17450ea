"""``ksched serve``: the embedded store served over the Kubernetes REST API (kubectl works
against it), with the scheduler (or the dispatcher and N scheduler processes) and simulated
kubelets alongside, and a kubeconfig written for clients."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ksched.cli.common import EXIT_INVALID_INPUT, load_config, parse_listen, report_crash

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register ``ksched serve`` on the subparsers action ``sub``."""
    p = sub.add_parser(
        "serve", help="run an embedded Kubernetes-compatible API server (kubectl works against it)",
        description="Serve the embedded store over the Kubernetes REST API, with the scheduler and simulated "
                    "kubelets in the same process (by default), and write a kubeconfig for it.")
    p.add_argument("--listen", default="127.0.0.1:6443", metavar="HOST:PORT",
                   help="address to listen on (default 127.0.0.1:6443); off loopback TLS and a token are required")
    p.add_argument("--data", metavar="DIR", help="persist the cluster in DIR (SQLite, WAL)")
    p.add_argument("--config", metavar="FILE", help="KubeSchedulerConfiguration for the scheduler")
    p.add_argument("--load", nargs="+", metavar="PATH", default=[], help="manifests to create at start-up")
    p.add_argument("--no-scheduler", action="store_true", help="do not run the scheduler in this process")
    p.add_argument("--no-kubelet", action="store_true", help="do not simulate kubelets (pods stay Pending)")
    p.add_argument("--kubeconfig-out", metavar="FILE",
                   help="where to write the kubeconfig (default: DIR/kubeconfig with --data, else ./ksched.kubeconfig)")
    p.add_argument("--token", help="bearer token clients must send (generated off loopback when not given)")
    p.add_argument("--tls-cert", metavar="FILE", help="serving certificate (generated off loopback when not given)")
    p.add_argument("--tls-key", metavar="FILE", help="serving key")
    p.add_argument("--fsync", action="store_true", help="fsync every write (survives power loss, slower)")
    p.add_argument("--no-conflict-resolver", action="store_true",
                   help="let bindings over-commit nodes (to compare with the resolver on)")
    p.add_argument("--bookmark-interval", type=float, default=60.0, help=argparse.SUPPRESS)
    p.add_argument("--disable-admission-plugins", metavar="PLUGINS", default="",
                   help="comma-separated admission plugins not to run (as kube-apiserver's flag)")
    p.add_argument("--schedulers", type=int, default=0, metavar="N",
                   help="run the dispatcher and N scheduler instances as separate processes (instead of one "
                        "scheduler in this process)")
    p.add_argument("--policy", metavar="FILE", help="with --schedulers: the dispatcher's DispatchPolicy")
    p.add_argument("--partition-label", metavar="LABEL",
                   help="with --schedulers: each instance owns the nodes with one value of this node label")
    p.add_argument("--partitions", metavar="V1,V2,...",
                   help="with --partition-label: the label value of each instance's partition, one per instance")
    p.add_argument("--instance-lease-duration", type=float, default=15.0, metavar="SECONDS",
                   help="with --schedulers: how long an instance that stopped renewing its Lease keeps its pods")
    p.add_argument("--scenario", metavar="FILE",
                   help="a scenario timeline (kind: Timeline, as simulate --timeline takes) run on the wall clock, "
                        "its times counted from serve's start (see ksched.sim.scenario)")
    p.add_argument("--kubelet-config", metavar="FILE",
                   help="KubeletConfiguration documents (kubelet.config.k8s.io/v1beta1) for the simulated kubelets' "
                        "eviction settings, one per node pool (nodeSelector)")


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM; 0, 1 when the server cannot start or the scheduling loop crashed,
    EXIT_INVALID_INPUT for bad input."""
    import secrets
    from pathlib import Path

    from ksched.api.loader import load_manifests
    from ksched.apiserver.http import ApiServer, is_loopback
    from ksched.apiserver.inprocess import InProcessClient
    from ksched.apiserver.kubeconfig import write_kubeconfig
    from ksched.clock import RealClock
    from ksched.dispatch.processes import wait_until_signalled
    from ksched.sim.cluster import EmbeddedCluster
    from ksched.sim.loading import load_objects

    listen = parse_listen(args.listen)
    if listen is None:
        return EXIT_INVALID_INPUT
    host, port = listen
    if bool(args.tls_cert) != bool(args.tls_key):
        print("error: --tls-cert and --tls-key go together: give both (or neither, for a generated certificate)",
              file=sys.stderr)
        return EXIT_INVALID_INPUT
    config = load_config(args.config)
    partitions = _serve_partitions(args)
    if partitions is None:
        return EXIT_INVALID_INPUT
    # The scenario and the kubelets' settings are checked before anything is built or applied.
    eviction_configs = None
    if args.kubelet_config:
        from ksched.kubelet.evictionapi import EvictionConfigError, load_kubelet_configs

        try:
            eviction_configs = load_kubelet_configs(args.kubelet_config)
        except EvictionConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_INVALID_INPUT
    scenario_actions = None
    if args.scenario:
        from ksched.sim.timeline import TimelineError, load_timeline

        try:
            scenario_actions = load_timeline(args.scenario)
        except TimelineError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_INVALID_INPUT
    clock = RealClock()
    try:
        cluster = EmbeddedCluster(clock, synchronous=False, conflict_resolver=not args.no_conflict_resolver,
                                  disable_admission_plugins=[p for p in args.disable_admission_plugins.split(",")
                                                             if p])
    except ValueError as e:  # an unknown admission plugin
        print(f"error: --disable-admission-plugins: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    store = cluster.store
    if args.schedulers and not args.no_scheduler and not args.no_conflict_resolver:
        # Several schedulers: bindings are also checked against the constraints between pods
        # (anti-affinity, spread, ReadWriteOncePod) that instances with lagging watches could break.
        store.enable_pod_conflicts()
    persistence = None
    if args.data:
        from ksched.apiserver.persistence import SqlitePersistence

        persistence = SqlitePersistence(Path(args.data) / "ksched.db", fsync=args.fsync)
        persistence.attach(store)
    if args.load:
        # As simulate loads them (order, dumps of a cluster), minus what a restart finds stored.
        res = load_manifests(args.load, scheme=store.scheme, unknown_kinds="skip")
        errors = [str(e) for e in res.errors]
        for kind, skipped in sorted(res.skipped.items()):
            print(f"warning: skipping {len(skipped)} object(s) of kind {kind}, which ksched does not know "
                  f"(first: {skipped[0].where})", file=sys.stderr)
        if not errors:
            report = load_objects(store, res.objects, [i for i, m in enumerate(res.manifests) if m.existing],
                                  skip_present=True)
            errors = [f"{res.manifests[i].where}: {res.manifests[i].ref}: {e.message}" for i, e in report.errors]
        if errors:
            for e in errors:
                print(f"error: {e}", file=sys.stderr)
            return EXIT_INVALID_INPUT
    cluster.start()  # the controllers: PV binding, PDB status
    token = args.token
    ssl_ctx = None
    ca_file = None
    if not is_loopback(host) or args.tls_cert:
        from ksched.apiserver.tls import make_self_signed, server_ssl_context

        token = token or secrets.token_urlsafe(32)
        if args.tls_cert and args.tls_key:
            cert, key = Path(args.tls_cert), Path(args.tls_key)
        else:
            cert, key = make_self_signed(Path(args.data or ".") / "pki", [host, "127.0.0.1", "localhost"])
        ssl_ctx = server_ssl_context(cert, key)
        ca_file = cert
    server = ApiServer(store, host, port, token=token, ssl_context=ssl_ctx,
                       bookmark_interval=args.bookmark_interval)
    try:
        server.start()
    except OSError as e:
        print(f"error: cannot listen on {args.listen}: {e}", file=sys.stderr)
        cluster.stop()
        return 1
    kc_path = Path(args.kubeconfig_out) if args.kubeconfig_out else (
        Path(args.data) / "kubeconfig" if args.data else Path("ksched.kubeconfig"))
    client_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    scheme = "https" if ssl_ctx is not None else "http"
    write_kubeconfig(kc_path, f"{scheme}://{client_host}:{server.port}", token=token, ca_file=ca_file)
    print(f"ksched API server listening on {server.url}; kubeconfig: {kc_path}", flush=True)
    runner = None
    agent = None
    group = None
    scenario = None
    if scenario_actions is not None:
        from ksched.sim.scenario import LiveScenario

        scenario = LiveScenario(scenario_actions, clock, InProcessClient(store), store)
    if args.schedulers and not args.no_scheduler:
        group = _start_scheduler_processes(args, kc_path, partitions)
    elif not args.no_scheduler:
        from ksched.scheduler.runner import SchedulerRunner
        from ksched.scheduler.scheduler import Scheduler

        client = InProcessClient(store)
        runner = SchedulerRunner(lambda: Scheduler(client, config, clock=clock, threaded=True))
        runner.start()
    if not args.no_kubelet:
        from ksched.kubelet.agent import NodeAgent

        nlc = next((c for c in cluster.controllers.controllers if c.name == "node-lifecycle-controller"), None)
        agent = NodeAgent(InProcessClient(store), clock, store, eviction_configs=eviction_configs,
                          on_unnoticed=getattr(nlc, "request_resync", None))
        if scenario is not None:
            scenario.attach(agent)
        agent.start()
    elif scenario is not None:
        scenario.start()
    ok = True
    try:
        ok = wait_until_signalled(failed=runner.crashed if runner is not None else None)
    finally:
        if group is not None:
            group.stop()
        if runner is not None:
            runner.stop()
        if agent is not None:
            agent.stop()
        if scenario is not None:
            scenario.stop()
        cluster.stop()
        server.stop()
        if persistence is not None:
            persistence.close()
    if not ok:
        return report_crash()
    return 0


def _serve_partitions(args: argparse.Namespace) -> list[str] | None:
    """The partition value of each instance of ``serve --schedulers`` ([] without partitions);
    None (after printing why) when the options do not fit together."""
    if args.schedulers < 0:
        print("error: --schedulers must be at least 1", file=sys.stderr)
        return None
    if not args.partition_label:
        if args.partitions:
            print("error: --partitions needs --partition-label", file=sys.stderr)
            return None
        return []
    if not args.schedulers:
        print("error: --partition-label needs --schedulers", file=sys.stderr)
        return None
    values = [v.strip() for v in (args.partitions or "").split(",") if v.strip()]
    if len(values) != args.schedulers:
        print(f"error: --partitions must name one partition per instance ({args.schedulers}), got {len(values)}",
              file=sys.stderr)
        return None
    return values


def _start_scheduler_processes(args: argparse.Namespace, kubeconfig: Any, partitions: list[str]) -> Any:
    from ksched.dispatch.processes import ProcessGroup, instance_names

    group = ProcessGroup(str(kubeconfig), verbose=args.verbose, config=args.config,
                         lease_duration=args.instance_lease_duration)
    for i, name in enumerate(instance_names(args.schedulers)):
        group.start_instance(name, partition_label=args.partition_label or "",
                             partition=partitions[i] if partitions else "")
    group.start_dispatcher(policy=args.policy)
    procs = ", ".join(f"{n} (pid {p.pid})" for n, p in group.processes.items())
    print(f"started {procs}", flush=True)
    return group
