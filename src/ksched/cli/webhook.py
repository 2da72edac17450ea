"""``ksched webhook``: the binding conflict resolver as a ValidatingAdmissionWebhook for real
clusters; it denies a pods/binding that would over-commit its node."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ksched.cli.common import EXIT_INVALID_INPUT, kubeconfig_parent, parse_listen, rest_client

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register ``ksched webhook`` on the subparsers action ``sub``."""
    p = sub.add_parser(
        "webhook", help="serve the binding conflict resolver as a ValidatingAdmissionWebhook (real clusters)",
        description="Serve a ValidatingAdmissionWebhook (HTTPS, AdmissionReview v1) for pods/binding CREATE that "
                    "denies (409 Conflict) any binding that would over-commit its node, judged from its own "
                    "informer view plus the bindings it admitted and has not yet observed. See "
                    "docs/multi-scheduler.md for the ValidatingWebhookConfiguration.",
        parents=[kubeconfig_parent()])
    p.add_argument("--listen", default="127.0.0.1:8443", metavar="HOST:PORT",
                   help="address to serve HTTPS on (default 127.0.0.1:8443)")
    p.add_argument("--tls-cert", metavar="FILE", help="serving certificate (PEM)")
    p.add_argument("--tls-key", metavar="FILE", help="serving key (PEM)")
    p.add_argument("--cert-dir", default="webhook-pki", metavar="DIR",
                   help="without --tls-cert: write a self-signed certificate here (its tls.crt is the caBundle)")
    p.add_argument("--cert-host", action="append", default=[], metavar="NAME",
                   help="a DNS name or IP for the self-signed certificate (repeatable), e.g. "
                        "ksched-webhook.kube-system.svc")
    p.add_argument("--admitted-ttl", type=float, default=30.0, metavar="SECONDS",
                   help="forget an admitted binding never observed after this long")


def run(args: argparse.Namespace) -> int:
    """Serve the webhook until SIGINT/SIGTERM; 0, 1 without a usable client or when it cannot
    listen, EXIT_INVALID_INPUT for bad input."""
    import threading
    from pathlib import Path

    from ksched.apiserver.tls import make_self_signed, server_ssl_context
    from ksched.dispatch.processes import wait_until_signalled
    from ksched.dispatch.webhook import BindingWebhook

    listen = parse_listen(args.listen)
    if listen is None:
        return EXIT_INVALID_INPUT
    host, port = listen
    if bool(args.tls_cert) != bool(args.tls_key):
        print("error: --tls-cert and --tls-key go together", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.tls_cert:
        cert, key = Path(args.tls_cert), Path(args.tls_key)
    else:
        cert, key = make_self_signed(args.cert_dir, [*args.cert_host, host, "127.0.0.1", "localhost"])
    try:
        ssl_ctx = server_ssl_context(cert, key)
    except (OSError, ValueError) as e:
        print(f"error: cannot load the serving certificate: {e}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    client = rest_client(args)
    if client is None:
        return 1
    hook = BindingWebhook(client, host=host, port=port, ssl_context=ssl_ctx, admitted_ttl=args.admitted_ttl)
    try:
        hook.start()
    except OSError as e:
        print(f"error: cannot listen on {args.listen}: {e}", file=sys.stderr)
        return 1
    print(f"ksched binding webhook on {hook.url}/validate (certificate {cert}) watching {client.host}", flush=True)
    try:
        wait_until_signalled(None, threading.Event())
    finally:
        hook.stop()
    return 0
