"""What several ``ksched`` commands share: exit codes, argparse parent parsers for repeated
flags (kubeconfig, leader election and secure serving under upstream's flag names), and
helpers (HOST:PORT parsing, loading a KubeSchedulerConfiguration, a REST client from a
kubeconfig or the in-cluster service account, the leader-election identity, the serving
certificate).

Kept cheap to import: ``ksched --help`` builds every command's parser, so heavy imports stay
inside the helpers that need them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = [
    "EXIT_INVALID_INPUT",
    "apply_leader_election_flags",
    "kubeconfig_parent",
    "leader_election_parent",
    "leader_identity",
    "load_config",
    "parse_bool",
    "parse_listen",
    "report_crash",
    "rest_client",
    "secure_serving_parent",
    "serving_ssl_context",
    "supervised_parent",
]

EXIT_INVALID_INPUT = 2


def kubeconfig_parent() -> argparse.ArgumentParser:
    """``--kubeconfig`` and ``--context``: the commands that talk to a Kubernetes API server
    (run, dispatch, webhook); read by :func:`rest_client`."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, or "
                                                       "in-cluster)")
    p.add_argument("--context", help="kubeconfig context")
    return p


def parse_bool(text: str) -> bool:
    """Go's strconv.ParseBool, for ``--flag=false`` as Kubernetes components take it."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {text!r}")


def _duration(text: str) -> float:
    from ksched.api.duration import DurationError, parse_duration

    try:
        return parse_duration(text)
    except DurationError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def leader_election_parent(*, default_elect: str, default_name: str) -> argparse.ArgumentParser:
    """Upstream's leader-election flags (component-base's BindLeaderElectionFlags). Unset flags
    stay None, so a configuration file's values hold unless a flag overrides them (as
    kube-scheduler's ApplyLeaderElectionTo)."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("leader election")
    g.add_argument("--leader-elect", nargs="?", const=True, default=None, type=parse_bool, metavar="BOOL",
                   help="start a leader election client and gain leadership before executing the main loop "
                        f"(default {default_elect}; --leader-elect=false turns it off)")
    g.add_argument("--leader-elect-lease-duration", type=_duration, metavar="DURATION",
                   help="how long non-leader candidates wait after observing a leadership renewal before taking "
                        "over an unrenewed Lease (default 15s)")
    g.add_argument("--leader-elect-renew-deadline", type=_duration, metavar="DURATION",
                   help="how long the leader retries renewing before it gives up leading (default 10s)")
    g.add_argument("--leader-elect-retry-period", type=_duration, metavar="DURATION",
                   help="how long clients wait between attempts to acquire and renew (default 2s)")
    g.add_argument("--leader-elect-resource-lock", metavar="TYPE", help="the lock object type: leases (default)")
    g.add_argument("--leader-elect-resource-name", metavar="NAME", help=f"the Lease's name (default {default_name})")
    g.add_argument("--leader-elect-resource-namespace", metavar="NAMESPACE",
                   help="the Lease's namespace (default kube-system)")
    g.add_argument("--id", help="identity in leader election (default: hostname_<random UUID>, as upstream)")
    return p


def apply_leader_election_flags(args: argparse.Namespace, cfg: Any) -> None:
    """The leader-election flags given override ``cfg`` (a LeaderElectionConfiguration)."""
    for flag, attr in (("leader_elect", "leader_elect"), ("leader_elect_lease_duration", "lease_duration"),
                       ("leader_elect_renew_deadline", "renew_deadline"),
                       ("leader_elect_retry_period", "retry_period"),
                       ("leader_elect_resource_lock", "resource_lock"),
                       ("leader_elect_resource_name", "resource_name"),
                       ("leader_elect_resource_namespace", "resource_namespace")):
        v = getattr(args, flag, None)
        if v is not None:
            setattr(cfg, attr, v)


def secure_serving_parent(default_port: int) -> argparse.ArgumentParser:
    """Upstream's secure-serving flags: HTTPS for /healthz, /livez, /readyz, /metrics (and
    /configz), with a self-signed certificate unless one is given."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("secure serving")
    g.add_argument("--bind-address", default="0.0.0.0", metavar="IP",
                   help="the IP address to serve --secure-port on (default 0.0.0.0: all interfaces)")
    g.add_argument("--secure-port", type=int, default=default_port, metavar="PORT",
                   help=f"the port to serve HTTPS on (default {default_port}); 0 disables serving")
    g.add_argument("--cert-dir", default="", metavar="DIR",
                   help="where the self-signed certificate is kept (NAME.crt, NAME.key; generated when absent). "
                        "Ignored with --tls-cert-file; without either, a certificate is made in memory")
    g.add_argument("--tls-cert-file", default="", metavar="FILE", help="the serving certificate (PEM, with its chain)")
    g.add_argument("--tls-private-key-file", default="", metavar="FILE",
                   help="the serving certificate's private key (PEM)")
    return p


def serving_ssl_context(args: argparse.Namespace, pair_name: str) -> Any:
    """The serving TLS context from --tls-cert-file/--tls-private-key-file, else a self-signed
    certificate for localhost and 127.0.0.1 (kept in --cert-dir as PAIR_NAME.crt/.key when
    given, as upstream's MaybeDefaultWithSelfSignedCerts). Raises ValueError on bad input."""
    import tempfile
    from pathlib import Path

    from ksched.apiserver.tls import make_self_signed, server_ssl_context

    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        raise ValueError("--tls-cert-file and --tls-private-key-file go together")
    if args.tls_cert_file:
        cert, key = Path(args.tls_cert_file), Path(args.tls_private_key_file)
        try:
            return server_ssl_context(cert, key)
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot load the serving certificate {cert}: {e}") from e
    hosts = ["localhost", "127.0.0.1"]
    if args.bind_address not in ("", "0.0.0.0", "::") and args.bind_address not in hosts:
        hosts.append(args.bind_address)
    if args.cert_dir:
        d = Path(args.cert_dir)
        cert, key = d / f"{pair_name}.crt", d / f"{pair_name}.key"
        if not (cert.exists() and key.exists()):
            make_self_signed(d, hosts, common_name=f"localhost@{pair_name}", cert_name=cert.name, key_name=key.name)
        return server_ssl_context(cert, key)
    with tempfile.TemporaryDirectory(prefix="ksched-cert-") as tmp:
        cert, key = make_self_signed(tmp, hosts, common_name=f"localhost@{pair_name}")
        return server_ssl_context(cert, key)


def supervised_parent() -> argparse.ArgumentParser:
    """``--parent-pid`` (hidden): run and dispatch, started as child processes by ``ksched serve
    --schedulers`` or ``ksched bench --schedulers``, stop once that parent process is gone."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)
    return p


def parse_listen(listen: str) -> tuple[str, int] | None:
    """HOST:PORT (IPv6 hosts in brackets), or None (the error printed)."""
    host, _, port_s = listen.rpartition(":")
    try:
        port = int(port_s)
    except ValueError:
        print(f"error: --listen {listen!r}: expected HOST:PORT", file=sys.stderr)
        return None
    return host.strip("[]") or "127.0.0.1", port


def load_config(path: str | None) -> Any:
    """The KubeSchedulerConfiguration at ``path`` (None without one); on an invalid file,
    print each error and exit with :data:`EXIT_INVALID_INPUT`."""
    from ksched.scheduler.config import ConfigError, load_configuration

    if not path:
        return None
    try:
        return load_configuration(path)
    except ConfigError as e:
        for msg in e.errors:
            print(f"error: {e.source}: {msg}", file=sys.stderr)
        raise SystemExit(EXIT_INVALID_INPUT) from e


def rest_client(args: argparse.Namespace, kubeconfig: str | None = None) -> Any:
    """A RestClient from --kubeconfig/--context (else ``kubeconfig``, the configuration's
    clientConnection.kubeconfig; else the in-cluster service account when running in a pod;
    else $KUBECONFIG or ~/.kube/config), or None (the error printed)."""
    from ksched.client.rest import RestClient

    try:
        return RestClient(kubeconfig=args.kubeconfig or kubeconfig or None, context=args.context)
    except Exception as e:  # kubeconfig missing or unusable
        print(f"error: cannot configure a client: {e}", file=sys.stderr)
        return None


def leader_identity(given: str | None) -> str:
    """The leader-election identity: ``--id`` when given, else hostname_<UUID> as kube-scheduler
    makes it (a container restarted in the same pod has the same hostname and pid, never the
    same UUID)."""
    import socket
    import uuid

    return given or f"{socket.gethostname()}_{uuid.uuid4()}"


def report_crash() -> int:
    """Say that a scheduling loop crashed (its traceback is already logged); the exit code."""
    print("error: the scheduling loop crashed (see the traceback above)", file=sys.stderr)
    return 1
