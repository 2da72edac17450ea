"""Stopping processes that talk HTTP must be prompt (``ksched serve --schedulers`` stops its
instances and the dispatcher on SIGTERM): an idle watch must not hold a client's informer nor
the API server's shutdown until the next event or bookmark."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ksched.apiserver.http import ApiServer
from ksched.apiserver.kubeconfig import write_kubeconfig
from ksched.apiserver.store import Store
from ksched.client.rest import POOL_MAXSIZE, RestClient


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ApiServer, RestClient]]:
    store = Store()
    server = ApiServer(store, "127.0.0.1", 0, bookmark_interval=60.0)
    server.start()
    client = RestClient(kubeconfig=str(write_kubeconfig(tmp_path / "kc", server.url)))
    try:
        yield server, client
    finally:
        server.stop()


def test_stopping_an_idle_rest_watch_is_prompt(served: tuple[ApiServer, RestClient]) -> None:
    _, client = served
    w = client.watch("Pod", resource_version="")
    time.sleep(0.2)  # the reader thread is now blocked on the idle stream
    t0 = time.monotonic()
    w.stop()
    assert time.monotonic() - t0 < 2.0
    w._thread.join(2.0)
    assert not w._thread.is_alive()
    assert w.closed


def test_api_server_stops_promptly_with_idle_watch_streams(served: tuple[ApiServer, RestClient]) -> None:
    server, client = served
    w = client.watch("Node", resource_version="")
    time.sleep(0.2)
    assert server._open_watches
    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 3.0
    assert server._thread is not None and not server._thread.is_alive()
    w._thread.join(2.0)
    assert w.closed


def test_rest_client_pool_fits_the_binding_workers(served: tuple[ApiServer, RestClient]) -> None:
    _, client = served
    assert client.configuration.connection_pool_maxsize >= POOL_MAXSIZE >= 16 + 8
