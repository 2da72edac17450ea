"""RestClient: the ClusterClient over the Kubernetes REST API, against the embedded server on a
loopback port. List/watch parse raw JSON straight into ksched.api objects; errors come back as
the same ApiError classes the store raises; informers over it resume watches from the last
resourceVersion and relist on 410 Gone; leader election works through it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import node, pod, wait_for

from ksched.api import errors as E
from ksched.api.labels import parse_field_selector, parse_label_selector
from ksched.api.lease import Lease
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.resources import pod_requests
from ksched.apiserver.http import ApiServer
from ksched.apiserver.kubeconfig import write_kubeconfig
from ksched.apiserver.store import Store
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.client.interface import ClusterClient
from ksched.client.leaderelection import LeaderElector
from ksched.client.rest import RestClient, RestWatch, _api_error


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
def server(store: Store) -> Iterator[ApiServer]:
    s = ApiServer(store, "127.0.0.1", 0, token="tkn", bookmark_interval=0.3)
    s.start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def client(server: ApiServer, tmp_path: Path) -> RestClient:
    return RestClient(kubeconfig=str(write_kubeconfig(tmp_path / "kubeconfig", server.url, token="tkn")))


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.adds: list[str] = []
        self.updates: list[str] = []
        self.deletes: list[Any] = []

    def handler(self) -> EventHandler:
        return EventHandler(on_add=lambda o: self._rec(self.adds, o.key),
                            on_update=lambda old, new: self._rec(self.updates, new.key),
                            on_delete=lambda o: self._rec(self.deletes, o))

    def _rec(self, lst: list[Any], v: Any) -> None:
        with self.lock:
            lst.append(v)


def test_is_a_cluster_client(client: RestClient) -> None:
    assert isinstance(client, ClusterClient)


def test_token_from_the_kubeconfig_is_sent(server: ApiServer, tmp_path: Path) -> None:
    anon = RestClient(kubeconfig=str(write_kubeconfig(tmp_path / "anon", server.url)))
    with pytest.raises(E.Unauthorized) as ei:
        anon.list("Pod")
    assert ei.value.code == 401


def test_list_parses_into_api_objects(client: RestClient, store: Store) -> None:
    store.create(node("n1", labels={"zone": "a"}))
    store.create(pod("a", labels={"app": "web"}))
    store.create(pod("b", labels={"app": "db"}))
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    store.create(pod("c", ns="other", labels={"app": "web"}))
    store.bind("default", "a", "n1")
    items, rv = client.list("Pod")
    assert rv == str(store.resource_version)
    # Listed pods are Pods decoded lean (Pod.lean: the fields the cache reads first, the rest
    # on first access), which become plain Pods once decoded in full.
    assert all(isinstance(p, Pod) for p in items)
    assert [p.priority for p in items] == [0, 0, 0] and all(type(p) is Pod for p in items)
    by_key = {p.key: p for p in items}
    assert set(by_key) == {"default/a", "default/b", "other/c"}
    a = by_key["default/a"]
    assert a.node_name == "n1" and a.labels == {"app": "web"} and a.uid == store.get("Pod", "default", "a").uid
    assert a.raw == store.get("Pod", "default", "a").raw
    assert pod_requests(a) == pod_requests(store.get("Pod", "default", "a")) == {"cpu": 100, "memory": 64 << 20}
    web, _ = client.list("Pod", label_selector=parse_label_selector("app=web"))
    assert sorted(p.key for p in web) == ["default/a", "other/c"]
    unbound, _ = client.list("Pod", field_selector=parse_field_selector("spec.nodeName="))
    assert sorted(p.key for p in unbound) == ["default/b", "other/c"]
    in_ns, _ = client.list("Pod", namespace="other")
    assert [p.key for p in in_ns] == ["other/c"]
    nodes, _ = client.list("Node")
    assert [type(n) for n in nodes] == [Node] and nodes[0].allocatable == store.get("Node", "", "n1").allocatable


def test_list_follows_continue_tokens(client: RestClient, store: Store) -> None:
    n = 1203
    for i in range(n):
        store.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                      "metadata": {"name": f"l{i:04d}", "namespace": "default"}, "spec": {}})
    rv = store.resource_version
    calls: list[str] = []
    real = client._json

    def spy(method: str, path: str, *a: Any, **kw: Any) -> Any:
        calls.append(path)
        return real(method, path, *a, **kw)

    client._json = spy  # type: ignore[method-assign]
    items, list_rv = client.list("Lease", "default")
    assert len(calls) == 3 and "continue=" in calls[1] and "continue=" in calls[2]
    assert len(items) == n and len({o.key for o in items}) == n
    assert all(isinstance(o, Lease) for o in items)
    assert list_rv == str(rv)


def test_crud_and_errors(client: RestClient, store: Store) -> None:
    created = client.create(pod("a"))
    assert isinstance(created, Pod) and created.uid and created.scheduler_name == "default-scheduler"
    assert store.get("Pod", "default", "a").resource_version == created.resource_version
    with pytest.raises(E.AlreadyExists) as ei:
        client.create(pod("a"))
    assert ei.value.code == 409 and ei.value.name == "a"
    got = client.get("Pod", "default", "a")
    assert got.raw == created.raw
    with pytest.raises(E.NotFound) as nf:
        client.get("Pod", "default", "nope")
    assert nf.value.code == 404 and str(nf.value) == 'pods "nope" not found'

    raw = got.deepcopy_raw()
    raw["metadata"]["labels"] = {"x": "1"}
    updated = client.update(raw)
    assert updated.labels == {"x": "1"}
    with pytest.raises(E.Conflict) as cf:
        client.update(raw)  # stale resourceVersion
    assert cf.value.code == 409

    bad = pod("b")
    bad["metadata"]["name"] = "B!"
    with pytest.raises(E.Invalid) as inv:
        client.create(bad)
    assert inv.value.code == 422 and inv.value.causes[0]["field"] == "metadata.name"
    assert store.count("Pod") == 1

    patched = client.patch("Pod", "default", "a", {"metadata": {"annotations": {"k": "v"}}})
    assert patched.annotations == {"k": "v"}
    st = client.patch("Pod", "default", "a", {"status": {"phase": "Running"}}, subresource="status")
    assert st.phase == "Running"
    cur = client.get("Pod", "default", "a").deepcopy_raw()
    cur["status"]["phase"] = "Succeeded"
    assert client.update_status(cur).phase == "Succeeded"

    store.create(node("n1", cpu="1"))
    b = client.create(pod("b2", cpu="600m"))
    assert isinstance(b, Pod)
    client.bind(b, "n1")
    assert store.get("Pod", "default", "b2").node_name == "n1"
    with pytest.raises(E.Conflict):
        client.bind(b, "n1")  # already bound
    c = client.create(pod("c", cpu="600m"))
    assert isinstance(c, Pod)
    with pytest.raises(E.Conflict):
        client.bind(c, "n1")  # would over-commit the node
    stale = Pod.from_dict({**c.deepcopy_raw(), "metadata": {**c.raw["metadata"], "uid": "other-uid"}})
    with pytest.raises(E.Conflict):
        client.bind(stale, "n1")

    client.evict("default", "c")
    assert store.try_get("Pod", "default", "c") is None
    gone = client.delete("Pod", "default", "b2", grace_period_seconds=0)
    assert isinstance(gone, Pod) and store.try_get("Pod", "default", "b2") is None
    with pytest.raises(E.NotFound):
        client.delete("Pod", "default", "b2")


def test_api_error_mapping() -> None:
    e = _api_error(410, b'{"kind":"Status","code":410,"reason":"Expired","message":"too old"}')
    assert isinstance(e, E.Gone) and e.code == 410 and str(e) == "too old"
    assert isinstance(_api_error(409, b'{"code":409,"reason":"AlreadyExists","message":"x"}'), E.AlreadyExists)
    assert type(_api_error(409, b'{"code":409,"reason":"Conflict","message":"x"}')) is E.Conflict
    # A conflict resolver's refusal, from the embedded server (details) or through kube-apiserver
    # from the webhook (message only), is typed as such.
    assert isinstance(_api_error(409, b'{"code":409,"reason":"Conflict","message":"x",'
                                      b'"details":{"kind":"pods/binding","name":"p"}}'), E.BindingConflict)
    assert isinstance(_api_error(409, b'{"code":409,"reason":"Conflict","message":"admission webhook \\"w\\" '
                                      b'denied the request: Operation cannot be fulfilled on pods/binding \\"p\\": '
                                      b'node n1 would be over-committed"}'), E.BindingConflict)
    assert isinstance(_api_error(429, b'{"code":429,"message":"x","details":{"retryAfterSeconds":3}}'),
                      E.TooManyRequests)
    e = _api_error(502, b"<html>bad gateway</html>")
    assert isinstance(e, E.InternalError) and e.code == 502 and "bad gateway" in str(e)


# ----------------------------------------------------------------------------- watch


def _collect(w: RestWatch, n: int, timeout: float = 5.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        ev = w.next(timeout=0.2)
        if ev is not None and ev.type != "BOOKMARK":
            out.append(ev)
    return out


def test_watch_parses_events_into_api_objects(client: RestClient, store: Store) -> None:
    store.create(pod("a"))
    rv = str(store.resource_version)
    w = client.watch("Pod", resource_version=rv, bookmarks=False)
    try:
        store.create(pod("b", labels={"app": "x"}))
        store.patch("Pod", "default", "b", {"metadata": {"labels": {"app": "y"}}})
        store.delete("Pod", "default", "b")
        evs = _collect(w, 3)
    finally:
        w.stop()
    assert [(e.type, e.object.name) for e in evs] == [("ADDED", "b"), ("MODIFIED", "b"), ("DELETED", "b")]
    assert all(type(e.object) is Pod for e in evs)
    assert evs[1].object.labels == {"app": "y"}
    assert [e.resource_version for e in evs] == [int(e.object.resource_version) for e in evs]
    assert evs[-1].resource_version == store.resource_version


def test_watch_with_selectors_and_namespace(client: RestClient, store: Store) -> None:
    rv = str(store.resource_version)
    w = client.watch("Pod", "default", rv, parse_label_selector("app=web"), bookmarks=False)
    try:
        store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
        store.create(pod("x", ns="other", labels={"app": "web"}))
        store.create(pod("y", labels={"app": "db"}))
        store.create(pod("z", labels={"app": "web"}))
        evs = _collect(w, 1)
        time.sleep(0.2)
        evs += w.drain()
    finally:
        w.stop()
    assert [(e.type, e.object.key) for e in evs] == [("ADDED", "default/z")]


def test_watch_bookmarks_carry_the_resource_version(client: RestClient, store: Store) -> None:
    store.create(pod("a"))
    w = client.watch("Pod", resource_version=str(store.resource_version), bookmarks=True)
    try:
        ev = wait_for(lambda: w.next(timeout=0.5), timeout=5, what="a bookmark")
    finally:
        w.stop()
    assert ev.type == "BOOKMARK" and ev.object is None and ev.resource_version == store.resource_version


def test_watch_of_an_expired_version_raises_gone(client: RestClient, store: Store) -> None:
    store.create(pod("a"))
    old = str(store.resource_version)
    store.create(pod("b"))
    store.compact()
    with pytest.raises(E.Gone) as ei:
        client.watch("Pod", resource_version=old)
    assert ei.value.code == 410
    w = client.watch("Pod", resource_version=str(store.resource_version))
    w.stop()


def test_gone_is_raised_even_when_the_server_answers_slowly(client: RestClient, server: ApiServer,
                                                            store: Store) -> None:
    store.create(pod("a"))
    old = str(store.resource_version)
    store.create(pod("b"))
    store.compact()
    real = server._watch

    async def slow(*args: Any) -> Any:
        await asyncio.sleep(0.3)  # a busy server: the answer comes well after the request
        return await real(*args)

    server._watch = slow  # type: ignore[method-assign]
    with pytest.raises(E.Gone):
        client.watch("Pod", resource_version=old)
    w = client.watch("Pod", resource_version=str(store.resource_version))
    try:
        store.create(pod("c"))
        evs = _collect(w, 1)
        assert [(e.type, e.object.name) for e in evs] == [("ADDED", "c")]
    finally:
        w.stop()


def test_a_refused_watch_raises_its_error(client: RestClient, server: ApiServer, tmp_path: Path) -> None:
    with pytest.raises(E.BadRequest):
        client.watch("Pod", field_selector=parse_field_selector("spec.containers=x"))
    anon = RestClient(kubeconfig=str(write_kubeconfig(tmp_path / "anon", server.url)))
    with pytest.raises(E.Unauthorized):
        anon.watch("Pod")


def test_watch_restarts_never_hand_one_connection_to_two_requests(client: RestClient, server: ApiServer,
                                                                  store: Store) -> None:
    """A watch's connection never goes back to the pool (its stream is closed), and nothing is
    in the pool twice: a connection released twice would be given to two requests at the same
    time."""
    store.create(pod("a"))
    old = str(store.resource_version)
    store.create(pod("b"))
    store.compact()
    served = [0]
    real = server._watch

    async def counting(*args: Any) -> Any:
        served[0] += 1
        return await real(*args)

    server._watch = counting  # type: ignore[method-assign]
    calls = 0
    for i in range(40):
        calls += 1
        with pytest.raises(E.Gone):
            client.watch("Pod", resource_version=old)
        calls += 1
        w = client.watch("Pod", resource_version=str(store.resource_version))
        if i % 2:
            store.create(pod(f"p{i}"))
            assert _collect(w, 1)
        w.stop()
        w._thread.join(5)
        assert not w._thread.is_alive()
    pooled = list(client.transport._idle)
    assert len(pooled) == len({id(c) for c in pooled}), "a connection is in the pool twice"
    assert all(not c.closed for c in pooled)
    assert served[0] == calls


def test_watch_stream_end_closes_the_watch(client: RestClient, store: Store) -> None:
    w = client.watch("Pod", resource_version=str(store.resource_version))
    store.close_watches()
    wait_for(lambda: w.closed, timeout=5, what="the client to see the stream end")
    assert w.next(timeout=0.1) is None


# ----------------------------------------------------------------------------- informers


def test_informer_syncs_and_resumes_from_last_version_without_relisting(client: RestClient,
                                                                         store: Store) -> None:
    store.create(pod("a"))
    factory = InformerFactory(client)
    inf = factory.informer("Pod")
    rec = Recorder()
    inf.add_handler(rec.handler())
    woke = threading.Event()
    factory.notify = woke.set
    inf.reflector.notify = woke.set
    factory.start()
    try:
        def processed(pred: Any, what: str) -> None:
            def step() -> bool:
                factory.process()
                return bool(pred())
            wait_for(step, timeout=10, what=what)

        processed(lambda: inf.has_synced() and rec.adds == ["default/a"], "the initial list")
        store.create(pod("b"))
        processed(lambda: "default/b" in rec.adds, "b through the watch")
        watches_before = inf.reflector.rewatches
        for _ in range(2):  # the server ends the stream (restart, timeout): resume, twice
            old_watch = inf.reflector.watch
            store.close_watches()
            wait_for(lambda w=old_watch: inf.reflector.watch is not w and not inf.reflector.watch.closed,
                     timeout=10, what="a new watch")
            store.patch("Pod", "default", "a", {"metadata": {"labels": {"v": str(time.monotonic())}}})
            store.create(pod(f"c{_}"))
            processed(lambda n=_: f"default/c{n}" in rec.adds, "events after the resume")
        assert inf.reflector.relists == 0
        assert inf.reflector.rewatches >= watches_before + 2
        assert sorted(rec.adds) == ["default/a", "default/b", "default/c0", "default/c1"]  # no replays
        assert rec.updates.count("default/a") == 2 and rec.deletes == []
        assert inf.reflector.last_rv == str(store.resource_version)
        assert {p.key: p.resource_version for p in inf.list()} == \
            {p.key: p.resource_version for p in store.items("Pod")}
        assert woke.is_set()
    finally:
        factory.stop()


def test_informer_relists_on_gone_and_reports_missed_deletions(client: RestClient, store: Store) -> None:
    store.create(pod("a"))
    store.create(pod("b"))
    factory = InformerFactory(client)
    inf = factory.informer("Pod")
    rec = Recorder()
    inf.add_handler(rec.handler())
    try:
        factory.poll()
        assert inf.reflector.listed and sorted(rec.adds) == ["default/a", "default/b"]
        # The watch ends; meanwhile b is deleted, c created, and the history compacted.
        w = inf.reflector.watch
        assert w is not None
        store.close_watches()
        wait_for(lambda: w.closed, timeout=5, what="the stream end")
        store.delete("Pod", "default", "b")
        store.create(pod("c"))
        store.compact()

        def converged() -> bool:
            factory.poll()
            return sorted(p.key for p in inf.list()) == ["default/a", "default/c"]

        wait_for(converged, timeout=10, what="the relist")
        assert inf.reflector.relists == 1
        assert sorted(rec.adds) == ["default/a", "default/b", "default/c"]
        assert len(rec.deletes) == 1 and isinstance(rec.deletes[0], DeletedFinalStateUnknown)
        assert rec.deletes[0].key == "default/b" and rec.deletes[0].obj.name == "b"
        # And it keeps watching from the relist's version.
        store.create(pod("d"))
        wait_for(lambda: factory.poll() >= 0 and inf.get("default/d") is not None, timeout=5, what="d")
        assert inf.reflector.relists == 1
    finally:
        factory.stop()


def test_background_informer_converges_after_compaction_and_restart(client: RestClient, store: Store) -> None:
    """Whichever way the reflector comes back (resume or relist), its cache ends equal to the store."""
    for i in range(5):
        store.create(pod(f"p{i}"))
    factory = InformerFactory(client)
    inf = factory.informer("Pod")
    factory.start()
    try:
        def same() -> bool:
            factory.process()
            return {p.key: p.resource_version for p in inf.list()} == \
                {p.key: p.resource_version for p in store.items("Pod")}

        wait_for(same, timeout=10, what="the first sync")
        for round_ in range(3):
            store.close_watches()
            store.delete("Pod", "default", f"p{round_}")
            store.create(pod(f"q{round_}"))
            store.compact()
            wait_for(same, timeout=10, what=f"convergence in round {round_}")
    finally:
        factory.stop()


# ----------------------------------------------------------------------------- leader election


def test_leader_election_through_the_rest_api(client: RestClient, store: Store) -> None:
    now = [1000.0]
    a = LeaderElector(client, "ksched", "kube-system", "a", lease_duration=15, clock=lambda: now[0])
    b = LeaderElector(client, "ksched", "kube-system", "b", lease_duration=15, clock=lambda: now[0])
    assert a.try_acquire_or_renew() is True
    lease = store.get("Lease", "kube-system", "ksched")
    assert isinstance(lease, Lease) and lease.holder_identity == "a"
    assert b.try_acquire_or_renew() is False  # b observes a's record now
    now[0] += 5
    assert a.try_acquire_or_renew() is True  # renew (a new record for b)
    now[0] += 5
    assert b.try_acquire_or_renew() is False  # seen changed: b waits a full duration from now
    now[0] += 16  # a stopped renewing: unchanged for longer than its duration, as b sees it
    assert b.try_acquire_or_renew() is True
    lease = store.get("Lease", "kube-system", "ksched")
    assert isinstance(lease, Lease) and lease.holder_identity == "b" and lease.lease_transitions == 1
    assert a.try_acquire_or_renew() is False
    assert not a.is_leader and b.is_leader


# ----------------------------------------------------------------------------- an unreachable server


def test_an_unreachable_server_is_a_service_unavailable_api_error(tmp_path: Path) -> None:
    """Connection refused is an ApiError (503 ServiceUnavailable), so callers that handle failed
    requests (bindings, status patches, events) handle a restarting API server too."""
    from serve_helpers import free_port

    from ksched.scheduler.recorder import EventRecorder

    url = f"http://127.0.0.1:{free_port()}"
    dead = RestClient(kubeconfig=str(write_kubeconfig(tmp_path / "kc", url)))
    for call in (lambda: dead.list("Pod"), lambda: dead.create(pod("x")),
                 lambda: dead.get("Pod", "default", "x"), lambda: dead.watch("Pod")):
        with pytest.raises(E.ServiceUnavailable) as ei:
            call()
        assert ei.value.code == 503 and url in str(ei.value)
    # Events are best effort: recording one against a dead server neither raises nor sticks.
    rec = EventRecorder(dead, type("C", (), {"now": staticmethod(time.time)})())
    p = Pod.from_dict(pod("x"))
    rec.event(p, "Normal", "Scheduled", "Binding", "Successfully assigned default/x to n1")
    assert rec.recorded == 1 and rec._seen == {}


def test_informer_rewatches_after_the_server_restarts(client: RestClient, store: Store, server: ApiServer) -> None:
    """The API server goes away and comes back on the same address with its history: the
    reflector keeps its cache, backs off while the server is unreachable, then watches again
    from the last version it saw (no relist) and receives what happened meanwhile."""
    store.create(pod("a"))
    factory = InformerFactory(client)
    inf = factory.informer("Pod")
    factory.start()
    again = None
    try:
        def has(key: str) -> bool:
            factory.process()
            return inf.get(key) is not None

        wait_for(lambda: has("default/a"), timeout=10, what="the first sync")
        port = server.port
        server.stop()
        # The stream ended and the reflector has tried to watch again (against the stopped server).
        wait_for(lambda: inf.reflector.rewatches >= 1, timeout=60, what="a rewatch after the stream ended")
        store.create(pod("b"))
        again = ApiServer(store, "127.0.0.1", port, token="tkn", bookmark_interval=0.3)
        again.start()
        wait_for(lambda: has("default/b"), timeout=20, what="b after the restart")
        assert inf.reflector.relists == 0 and inf.reflector.rewatches >= 1
        assert inf.get("default/a") is not None
    finally:
        factory.stop()
        if again is not None:
            again.stop()


def test_list_pages_requests_the_next_page_ahead(client: RestClient, store: Store) -> None:
    """list_pages yields page by page; the next page is requested before the caller is done with
    the current one; stopping early ends the read-ahead; a failed page raises from the loop."""
    for i in range(1250):
        store.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                      "metadata": {"name": f"l{i:04d}", "namespace": "default"}, "spec": {}})
    rv = str(store.resource_version)
    calls: list[str] = []
    real = client._page

    def spy(path: str, ls: Any, fs: Any, cont: str) -> Any:
        calls.append(cont)
        return real(path, ls, fs, cont)

    client._page = spy  # type: ignore[method-assign]
    pages = client.list_pages("Lease", "default")
    first, first_rv = next(pages)
    assert len(first) == 500 and first_rv == rv and len(calls) >= 1
    wait_for(lambda: len(calls) >= 2, timeout=5, what="the second page requested ahead")
    rest = list(pages)
    assert [len(p) for p, _ in rest] == [500, 250] and all(r == rv for _, r in rest)
    names = [o.name for p in [first, *(p for p, _ in rest)] for o in p]
    assert names == [f"l{i:04d}" for i in range(1250)]
    assert len(calls) == 3 and calls[0] == "" and all(calls[1:])
    # Stopping after the first page: the read-ahead thread ends.
    calls.clear()
    pages = client.list_pages("Lease", "default")
    next(pages)
    pages.close()
    wait_for(lambda: not any(t.name == "list-leases" for t in threading.enumerate()), timeout=5,
             what="the read-ahead to stop")
    assert len(calls) <= 3
    # A page that fails (its continue token expired): the loop raises the error.

    def failing(path: str, ls: Any, fs: Any, cont: str) -> Any:
        if cont:
            raise E.Gone("the provided continue parameter is too old")
        return real(path, ls, fs, cont)

    client._page = failing  # type: ignore[method-assign]
    with pytest.raises(E.Gone):
        client.list("Lease", "default")
