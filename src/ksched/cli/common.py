"""What several ``ksched`` commands share: exit codes, argparse parent parsers for repeated
flags, and helpers (HOST:PORT parsing, loading a KubeSchedulerConfiguration, a REST client
from a kubeconfig, the leader-election identity).

Kept cheap to import: ``ksched --help`` builds every command's parser, so heavy imports stay
inside the helpers that need them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = [
    "EXIT_INVALID_INPUT",
    "kubeconfig_parent",
    "leader_identity",
    "load_config",
    "parse_listen",
    "report_crash",
    "rest_client",
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


def rest_client(args: argparse.Namespace) -> Any:
    """A RestClient from --kubeconfig/--context, or None (the error printed)."""
    from ksched.client.rest import RestClient

    try:
        return RestClient(kubeconfig=args.kubeconfig, context=args.context)
    except Exception as e:  # kubeconfig missing or unusable
        print(f"error: cannot configure a client: {e}", file=sys.stderr)
        return None


def leader_identity(given: str | None) -> str:
    """The leader-election identity: ``--id`` when given, else hostname_pid."""
    import os
    import socket

    return given or f"{socket.gethostname()}_{os.getpid()}"


def report_crash() -> int:
    """Say that a scheduling loop crashed (its traceback is already logged); the exit code."""
    print("error: the scheduling loop crashed (see the traceback above)", file=sys.stderr)
    return 1
