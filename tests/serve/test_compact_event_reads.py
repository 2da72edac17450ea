"""Every API read path serves the store's compact Events (``CompactEvent``, what the event
recorder's creates are stored as) with the same bytes as plain stored Events (the generic create
path, ``Store.direct_events = False``): the REST front's get, list, Table, field-selected list and
watch, and kubectl's get (json, yaml, columns) and describe, on servers given the same writes
(including a repeat, which patches a compact Event into a plain one): the recorder's Events
handed over as values (``Store.create_recorded_event``), as manifests (``direct_recorded_events =
False``) and through the generic path."""

from __future__ import annotations

import http.client
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_helpers import pod

from ksched.api.event import CompactEvent
from ksched.apiserver.http import ApiServer
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.kubeconfig import write_kubeconfig
from ksched.apiserver.store import Store
from ksched.client.record import EventRecorder
from ksched.clock import VirtualClock

KUBECTL = shutil.which("kubectl")


def _cluster(mode: str) -> Store:
    clock = VirtualClock(1000.0)
    store = Store(clock)
    store.direct_events = mode != "plain"
    store.direct_recorded_events = mode == "values"
    rec = EventRecorder(InProcessClient(store), clock, component="default-scheduler")
    for i in range(3):
        p = store.create(pod(f"p{i}"))
        rec.event(p, "Normal", "Scheduled", "Binding", f"Successfully assigned default/p{i} to n{i}")
        clock.advance(1.5)
    p = store.get("Pod", "default", "p0")
    rec.event(p, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes are available")
    rec.event(p, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes are available")  # a repeat: a patch
    return store


def _get(port: int, path: str, accept: str = "application/json") -> tuple[int, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", path, headers={"Accept": accept})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[Store, ApiServer, Path]]]:
    out: list[tuple[Store, ApiServer, Path]] = []
    try:
        for mode in ("values", "manifest", "plain"):
            store = _cluster(mode)
            server = ApiServer(store, "127.0.0.1", 0)
            server.start()
            d = tmp_path_factory.mktemp("events")
            out.append((store, server, write_kubeconfig(d / "kubeconfig", server.url)))
        yield out
    finally:
        for _, server, _ in out:
            server.stop()


def test_the_recorders_events_are_stored_compact_only_on_the_direct_path(
        servers: list[tuple[Store, ApiServer, Path]]) -> None:
    (compact, _, _), (manifest, _, _), (plain, _, _) = servers
    for store in (compact, manifest):
        kinds = [type(e).__name__ for e in store.items("Event")]
        assert sorted(kinds) == ["CompactEvent", "CompactEvent", "CompactEvent", "Event"]  # the repeat's patch: plain
    assert not any(isinstance(e, CompactEvent) for e in plain.items("Event"))


@pytest.mark.parametrize(("path", "accept"), [
    ("/api/v1/namespaces/default/events", "application/json"),
    ("/api/v1/events", "application/json"),
    ("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dp1", "application/json"),
    ("/api/v1/namespaces/default/events?fieldSelector=source%3Ddefault-scheduler", "application/json"),
    ("/api/v1/namespaces/default/events?limit=2", "application/json"),
    ("/api/v1/namespaces/default/events", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
    ("/api/v1/namespaces/default/events?watch=true&resourceVersion=0&timeoutSeconds=1", "application/json"),
])
def test_rest_reads_serve_the_same_bytes(servers: list[tuple[Store, ApiServer, Path]], path: str,
                                        accept: str) -> None:
    got = [_get(server.port, path, accept) for _, server, _ in servers]
    assert got[0][0] == 200 and got[0][1]
    assert got[0] == got[1] == got[2]
    names = [e.name for e in servers[0][0].items("Event")]
    for name in names:
        one = [_get(server.port, f"/api/v1/namespaces/default/events/{name}") for _, server, _ in servers]
        assert one[0][0] == 200 and one[0] == one[1] == one[2]


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.parametrize("args", [
    ("get", "events", "-o", "json"),
    ("get", "events", "-o", "yaml"),
    ("get", "events"),
    ("get", "events", "--field-selector", "involvedObject.name=p0", "-o", "wide"),
    ("describe", "pod", "p0"),
])
def test_kubectl_reads_print_the_same(servers: list[tuple[Store, ApiServer, Path]], args: tuple[str, ...],
                                      tmp_path: Path) -> None:
    assert KUBECTL is not None
    outs = []
    for _, _, kubeconfig in servers:
        env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        cp = subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=300)
        assert cp.returncode == 0, cp.stderr
        outs.append(cp.stdout)
    assert outs[0] and outs[0] == outs[1] == outs[2]
