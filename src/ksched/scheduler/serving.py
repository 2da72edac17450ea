"""The scheduler's own endpoints, served as kube-scheduler serves them
(``cmd/kube-scheduler/app/server.go``: newEndpointsHandler behind SecureServing).

HTTPS on ``--bind-address``:``--secure-port`` (0.0.0.0:10259 by default; port 0 serves nothing):

* ``/healthz``: the ``leaderElection`` watchdog when leader election is on, else ``ping``;
* ``/livez``: ``ping``;
* ``/readyz``: the ``leaderElection`` watchdog (with leader election), ``shutdown`` (fails once the
  process is stopping) and ``sched-handler-sync`` (the informers have listed and the event
  handlers have taken the initial objects). A standby replica is ready: it keeps its cache warm
  and takes over at once;
* ``/metrics``: the Prometheus text of the scheduler's registry (with the process collector
  and ``leader_election_master_status``);
* ``/configz``: ``{"componentconfig": <the KubeSchedulerConfiguration>}`` (see configz.py);

with each check also at ``<path>/<name>`` and the healthz semantics of ``ksched.healthz``.
The HTTP machinery is ``ksched.aioserver.BackgroundServer`` (aiohttp in a background thread,
the same as the API server and the webhook use: TLS, a port picked when 0, a clean stop),
imported only when something is served: the checks and metrics helpers here are used by
``ksched run --secure-port 0`` too, which should not pay for aiohttp at start-up.

Known divergences: no delegated authentication or authorization (upstream checks a bearer token
with TokenReview and SubjectAccessReview for everything but the health paths; here every path
is open to whoever reaches the port: keep it on the pod network or loopback), no
``/metrics/resources``, ``/metrics/slis``, ``/debug/pprof`` or ``/flagz``/``/statusz``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ksched.healthz import HealthCheck, install, install_not_found

if TYPE_CHECKING:
    import ssl

    from aiohttp import web

__all__ = ["DEFAULT_SECURE_PORT", "SecureServer", "endpoints_app", "handler_sync_check",
           "register_leader_election_metric", "register_process_metrics"]

DEFAULT_SECURE_PORT = 10259


def handler_sync_check(synced: Callable[[], bool]) -> HealthCheck:
    """``sched-handler-sync``: passes once the scheduler's handlers have synced."""
    return HealthCheck("sched-handler-sync", lambda: None if synced() else "handlers are not fully synchronized")


def register_leader_election_metric(registry: Any, name: str, is_leader: Callable[[], bool]) -> None:
    """client-go's ``leader_election_master_status{name}`` gauge: 1 while leading, else 0."""
    from prometheus_client import Gauge

    g = Gauge("leader_election_master_status",
              "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates "
              "master. 'name' is the string used to identify the lease. Please make sure to group by name.",
              ["name"], registry=registry)
    g.labels(name).set_function(lambda: 1.0 if is_leader() else 0.0)


def register_process_metrics(registry: Any) -> None:
    """``process_*`` (CPU seconds, resident memory, open fds, start time) in ``registry``, as
    every Kubernetes component's /metrics has them."""
    from prometheus_client import ProcessCollector

    ProcessCollector(registry=registry)


def endpoints_app(*, healthz: Sequence[HealthCheck], readyz: Sequence[HealthCheck], registry: Any = None,
                  configz: Callable[[], dict[str, Any]] | None = None) -> web.Application:
    """The endpoints of a control-plane component: health paths, ``/metrics`` from
    ``registry`` and ``/configz`` (``{"componentconfig": configz()}``) when given."""
    from aiohttp import web

    app = web.Application()
    install(app, "/healthz", healthz)
    install(app, "/livez")
    install(app, "/readyz", readyz)
    if registry is not None:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        async def metrics(request: web.Request) -> web.Response:
            return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

        app.router.add_route("*", "/metrics", metrics)
    if configz is not None:
        async def configz_handler(request: web.Request) -> web.Response:
            body = json.dumps({"componentconfig": configz()}, separators=(",", ":")).encode()
            return web.Response(body=body, headers={"Content-Type": "application/json",
                                                    "X-Content-Type-Options": "nosniff"})

        app.router.add_route("*", "/configz", configz_handler)
    install_not_found(app)
    return app


class SecureServer:
    """``app`` over HTTPS on ``host:port`` from a background thread; ``port`` is the bound
    one after ``start()`` (which raises OSError when it cannot listen)."""

    def __init__(self, app: web.Application, host: str, port: int, ssl_context: ssl.SSLContext,
                 name: str = "secure-serving") -> None:
        from ksched.aioserver import BackgroundServer

        self._server = BackgroundServer(app, host, port, ssl_context, name)
        self.host = host

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop()
