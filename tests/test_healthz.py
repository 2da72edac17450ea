"""ksched.healthz against upstream's healthz handler behaviour (apiserver/pkg/server/healthz,
healthz_test.go): bodies, codes, verbose and exclude, the per-check paths, ping by default."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator

import pytest
from aiohttp import web

from ksched.aioserver import BackgroundServer
from ksched.healthz import PING, HealthCheck, evaluate, install, install_not_found, shutdown_check

OK = HealthCheck("ok-check", lambda: None)
BAD = HealthCheck("bad", lambda: "this will fail")

EVALUATE = [
    # (checks, exclude, verbose, status, body)
    ([PING], [], False, 200, "ok"),
    ([PING], [], True, 200, "[+]ping ok\nhealthz check passed\n"),
    ([PING, BAD], [], False, 500, "[+]ping ok\n[-]bad failed: reason withheld\nhealthz check failed\n"),
    ([PING, BAD], [], True, 500, "[+]ping ok\n[-]bad failed: reason withheld\nhealthz check failed\n"),
    ([PING, BAD], ["bad"], False, 200, "ok"),
    ([PING, BAD], ["bad"], True, 200, "[+]ping ok\n[+]bad excluded: ok\nhealthz check passed\n"),
    ([PING, BAD], ["bad", "nope", "alsonot"], True, 200,
     '[+]ping ok\n[+]bad excluded: ok\nwarn: some health checks cannot be excluded: no matches for '
     '"alsonot","nope"\nhealthz check passed\n'),
    ([PING, BAD], ["nope"], False, 500,
     '[+]ping ok\n[-]bad failed: reason withheld\nwarn: some health checks cannot be excluded: no matches for '
     '"nope"\nhealthz check failed\n'),
]


@pytest.mark.parametrize(("checks", "exclude", "verbose", "status", "body"), EVALUATE)
def test_evaluate_as_upstream(checks: list[HealthCheck], exclude: list[str], verbose: bool, status: int,
                              body: str) -> None:
    assert evaluate("healthz", checks, exclude, verbose) == (status, body)


def test_a_check_that_raises_fails_without_leaking_its_reason() -> None:
    def boom() -> str | None:
        raise RuntimeError("secret detail")

    status, body = evaluate("readyz", [HealthCheck("boom", boom)])
    assert status == 500 and "secret detail" not in body and body.endswith("readyz check failed\n")


def test_shutdown_check() -> None:
    stopping = threading.Event()
    c = shutdown_check(stopping)
    assert c.name == "shutdown" and c.check() is None
    stopping.set()
    assert c.check() == "process is shutting down"


@pytest.fixture
def served() -> Iterator[tuple[int, threading.Event]]:
    failing = threading.Event()
    app = web.Application()
    install(app, "/healthz")  # no checks: ping
    install(app, "/readyz", [PING, HealthCheck("flaky", lambda: "broken" if failing.is_set() else None)])
    install_not_found(app)
    srv = BackgroundServer(app, "127.0.0.1", 0, None, "healthz-test")
    srv.start()
    try:
        yield srv.port, failing
    finally:
        srv.stop()


def _get(port: int, path: str, method: str = "GET") -> tuple[int, str, http.client.HTTPMessage]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.read().decode(), r.headers
    finally:
        c.close()


def test_paths_over_http(served: tuple[int, threading.Event]) -> None:
    port, failing = served
    status, body, headers = _get(port, "/healthz")
    assert (status, body) == (200, "ok")
    assert headers["Content-Type"] == "text/plain; charset=utf-8" and headers["X-Content-Type-Options"] == "nosniff"
    assert _get(port, "/healthz/ping")[:2] == (200, "ok")
    assert _get(port, "/healthz?verbose")[:2] == (200, "[+]ping ok\nhealthz check passed\n")
    # Go looks only at the presence of the parameter: verbose=false is verbose too.
    assert _get(port, "/readyz?verbose=false")[:2] == (200, "[+]ping ok\n[+]flaky ok\nreadyz check passed\n")
    assert _get(port, "/readyz", "POST")[:2] == (200, "ok")
    failing.set()
    assert _get(port, "/readyz")[:2] == (500, "[+]ping ok\n[-]flaky failed: reason withheld\nreadyz check failed\n")
    assert _get(port, "/readyz?exclude=flaky")[:2] == (200, "ok")
    assert _get(port, "/readyz/flaky")[:2] == (500, "internal server error: broken\n")
    assert _get(port, "/readyz/ping")[:2] == (200, "ok")
    # Only installed paths: the check name of another path, a trailing slash, anything else.
    for path in ("/healthz/flaky", "/readyz/", "/livez", "/"):
        assert _get(port, path)[:2] == (404, "404 page not found\n"), path
