"""Health checks served as Kubernetes components serve them: upstream's
``k8s.io/apiserver/pkg/server/healthz`` (healthz.go) on an aiohttp application.

A path (``/healthz``, ``/livez``, ``/readyz``) runs its checks in order and answers

* ``200 ok`` when all pass (with ``?verbose``: one ``[+]<name> ok`` line per check, then
  ``<path> check passed``);
* ``500`` when any fails, always verbose, the failing check's reason withheld from the body
  (``[-]<name> failed: reason withheld``, then ``<path> check failed``) and logged instead.

``?exclude=<name>`` (repeatable) skips a check (``[+]<name> excluded: ok``); names that match
no check are reported in a ``warn:`` line. Each check is also served alone at
``<path>/<name>``: ``ok``, or ``500 internal server error: <reason>``. A path installed with no
checks gets ``ping``, as upstream. Bodies are ``text/plain; charset=utf-8`` with
``X-Content-Type-Options: nosniff``, error bodies end with a newline (Go's ``http.Error``).

Known divergences: no ``log`` check (nothing in ksched blocks on log flushing) and no
request metrics per health path. A base utility: it imports nothing of ksched. aiohttp is
imported only when paths are installed: the checks themselves (``HealthCheck``,
``shutdown_check``, ``evaluate``) are built before anything is served, and ``ksched run
--secure-port 0`` serves nothing (importing aiohttp costs ~0.17 CPU seconds at start-up).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["PING", "HealthCheck", "evaluate", "install", "install_not_found", "shutdown_check"]

log = logging.getLogger(__name__)

_TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class HealthCheck:
    """A named check: ``check()`` returns None when healthy, else why not (a message for the
    log and for the check's own path)."""

    name: str
    check: Callable[[], str | None]


PING = HealthCheck("ping", lambda: None)


def shutdown_check(stopping: threading.Event) -> HealthCheck:
    """Fails once ``stopping`` is set: upstream's NewShutdownHealthz (in /readyz, so a replica
    that is shutting down stops receiving traffic before it stops)."""
    return HealthCheck("shutdown", lambda: "process is shutting down" if stopping.is_set() else None)


def _run(c: HealthCheck) -> str | None:
    try:
        return c.check()
    except Exception as e:  # a check that raises fails, as one returning an error
        return f"{type(e).__name__}: {e}"


def _quoted(names: Sequence[str]) -> str:
    return ",".join(json.dumps(n) for n in names)


def evaluate(path_name: str, checks: Sequence[HealthCheck], exclude: Sequence[str] = (),
             verbose: bool = False) -> tuple[int, str]:
    """(HTTP status, body) of ``/<path_name>`` for these checks and query."""
    excluded = set(exclude)
    lines: list[str] = []
    failed: list[tuple[str, str]] = []
    for c in checks:
        if c.name in excluded:
            excluded.discard(c.name)
            lines.append(f"[+]{c.name} excluded: ok\n")
            continue
        why = _run(c)
        if why is not None:
            lines.append(f"[-]{c.name} failed: reason withheld\n")
            failed.append((c.name, why))
        else:
            lines.append(f"[+]{c.name} ok\n")
    if excluded:
        names = _quoted(sorted(excluded))
        lines.append(f"warn: some health checks cannot be excluded: no matches for {names}\n")
        log.warning("cannot exclude some health checks, no health checks are installed matching %s", names)
    if failed:
        log.info("%s check failed: %s\n%s", ",".join(n for n, _ in failed), path_name,
                 "".join(f"[-]{n} failed: {why}\n" for n, why in failed))
        return 500, "".join(lines) + f"{path_name} check failed\n"
    if not verbose:
        return 200, "ok"
    return 200, "".join(lines) + f"{path_name} check passed\n"


def _text(status: int, body: str) -> web.Response:
    from aiohttp import web

    return web.Response(status=status, text=body, content_type="text/plain", charset="utf-8",
                        headers={"X-Content-Type-Options": "nosniff"})


def install(app: web.Application, path: str, checks: Sequence[HealthCheck] = ()) -> None:
    """Serve ``path`` and ``path/<check>`` for each check (ping when there are none), for any
    method, as upstream's InstallPathHandler."""
    checks = list(checks) or [PING]
    name = path.strip("/").split("/")[0]

    async def root(request: web.Request) -> web.Response:
        q = request.query
        status, body = evaluate(name, checks, q.getall("exclude", []), "verbose" in q)
        return _text(status, body)

    app.router.add_route("*", path, root)
    for c in checks:
        app.router.add_route("*", f"{path}/{c.name}", _single(c))


def _single(c: HealthCheck) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        why = _run(c)
        if why is not None:
            return _text(500, f"internal server error: {why}\n")
        return _text(200, "ok")

    return handler


def install_not_found(app: web.Application) -> None:
    """Every other path answers as Go's mux does: ``404 page not found``. Install last."""

    async def not_found(request: web.Request) -> web.Response:
        return _text(404, "404 page not found\n")

    app.router.add_route("*", "/{tail:.*}", not_found)
