"""The lean HTTP/1.1 transport under RestClient, against a scripted server on a loopback port:
keep-alive reuse, every body framing (Content-Length, chunked with extensions and trailers, to
the end of the connection), gzip, interim responses, connections the server closed while idle
or while a request was on its way (sent again only when that is safe), streams read as they
arrive, and the watch decoder's handling of events split across or packed into chunks."""

from __future__ import annotations

import gzip
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ksched.api.pod import Pod
from ksched.client.rest import RestClient, pool_manager
from ksched.client.transport import Transport, TransportError

Handler = Callable[["Exchange"], None]


class Exchange:
    """One request as the scripted server read it, and the connection to answer on."""

    def __init__(self, conn: socket.socket, rfile: Any, method: str, path: str, headers: dict[str, str],
                 body: bytes, index: int) -> None:
        self.conn = conn
        self.rfile = rfile
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.index = index  # requests served on this connection before this one

    def send(self, data: bytes) -> None:
        self.conn.sendall(data)

    def reply(self, body: bytes = b"{}", status: int = 200, extra: str = "") -> None:
        self.send(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
                  .encode() + body)


class ScriptedServer:
    """Accepts connections on 127.0.0.1; ``handler`` answers each request (or closes)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.requests: list[tuple[str, str, bytes]] = []
        self.connections = 0
        self._stop = False
        self._threads: list[threading.Thread] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        rfile = conn.makefile("rb")
        index = 0
        try:
            while True:
                line = rfile.readline()
                if not line:
                    return
                method, path, _ = line.decode().split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    h = rfile.readline()
                    if h in (b"\r\n", b""):
                        break
                    k, _, v = h.decode().partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = rfile.read(int(headers.get("content-length", "0")))
                self.requests.append((method, path, body))
                ex = Exchange(conn, rfile, method, path, headers, body, index)
                index += 1
                self.handler(ex)
                if getattr(ex, "closed", False):
                    return
        except OSError:
            return
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def stop(self) -> None:
        self._stop = True
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def make(handler: Handler) -> ScriptedServer:
        s = ScriptedServer(handler)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()


def transport(port: int) -> Transport:
    def connect(timeout: float | None) -> tuple[socket.socket, Any]:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        return s, None

    return Transport(connect, f"127.0.0.1:{port}")


def close(ex: Exchange) -> None:
    ex.closed = True  # type: ignore[attr-defined]


def test_requests_reuse_one_keep_alive_connection(serve: Any) -> None:
    srv = serve(lambda ex: ex.reply(json.dumps({"echo": ex.body.decode(), "path": ex.path,
                                                "host": ex.headers["host"]}).encode()))
    t = transport(srv.port)
    for i in range(50):
        status, headers, body = t.request("POST", f"/p/{i}", {"Content-Type": "application/json"}, b'{"i":%d}' % i)
        assert status == 200 and headers["content-type"] == "application/json"
        assert json.loads(body) == {"echo": f'{{"i":{i}}}', "path": f"/p/{i}", "host": f"127.0.0.1:{srv.port}"}
    assert t.opened == 1 and srv.connections == 1


def test_concurrent_requests_each_get_a_connection_and_return_it(serve: Any) -> None:
    def slow(ex: Exchange) -> None:
        time.sleep(0.05)
        ex.reply()

    srv = serve(slow)
    t = transport(srv.port)
    threads = [threading.Thread(target=lambda: [t.request("GET", "/", {}) for _ in range(3)]) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(srv.requests) == 12
    assert t.opened == srv.connections <= 4 and len(t._idle) == t.opened


def test_chunked_bodies_with_extensions_and_trailers(serve: Any) -> None:
    def chunked(ex: Exchange) -> None:
        ex.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n")

    srv = serve(chunked)
    t = transport(srv.port)
    assert t.request("GET", "/", {})[2] == b"hello world"
    assert t.request("GET", "/", {})[2] == b"hello world"  # and the connection is still usable
    assert t.opened == 1


def test_a_body_to_the_end_of_the_connection_is_read_and_the_connection_dropped(serve: Any) -> None:
    def until_close(ex: Exchange) -> None:
        ex.send(b"HTTP/1.1 200 OK\r\n\r\nall of it")
        close(ex)

    srv = serve(until_close)
    t = transport(srv.port)
    assert t.request("GET", "/", {})[2] == b"all of it"
    assert t.request("GET", "/", {})[2] == b"all of it"
    assert t.opened == 2 and not t._idle


def test_connection_close_and_http_1_0_are_not_reused(serve: Any) -> None:
    def answer(ex: Exchange) -> None:
        if ex.path == "/close":
            ex.reply(b"1", extra="Connection: close\r\n")
        else:
            ex.send(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n2")
        close(ex)

    srv = serve(answer)
    t = transport(srv.port)
    assert t.request("GET", "/close", {})[2] == b"1"
    assert t.request("GET", "/old", {})[2] == b"2"
    assert t.opened == 2 and not t._idle


def test_gzip_bodies_and_interim_responses(serve: Any) -> None:
    def answer(ex: Exchange) -> None:
        z = gzip.compress(b'{"a":1}')
        ex.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        ex.send(f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {len(z)}\r\n\r\n".encode() + z)

    srv = serve(answer)
    status, _, body = transport(srv.port).request("GET", "/", {})
    assert status == 200 and body == b'{"a":1}'


def test_an_idle_connection_the_server_closed_is_not_reused(serve: Any) -> None:
    def once(ex: Exchange) -> None:
        ex.reply(b"ok")
        close(ex)  # the server ends every connection after one answer, without saying so

    srv = serve(once)
    t = transport(srv.port)
    assert t.request("POST", "/", {}, b"1")[2] == b"ok"
    time.sleep(0.1)  # the server's FIN has arrived: the idle connection reads as dropped
    assert t.request("POST", "/", {}, b"2")[2] == b"ok"
    assert t.opened == 2 and [r[2] for r in srv.requests] == [b"1", b"2"]


def test_a_reused_connection_closed_while_a_request_was_sent(serve: Any) -> None:
    """The server read the request and closed without answering: a POST may have been carried
    out, so it fails (as net/http); a GET is sent again once on a fresh connection."""
    def answer(ex: Exchange) -> None:
        if ex.index == 0:
            ex.reply(b"first")
        else:
            close(ex)

    srv = serve(answer)
    t = transport(srv.port)
    assert t.request("GET", "/", {})[2] == b"first"
    # The GET goes out on the reused connection, then again on a fresh one.
    assert t.request("GET", "/", {})[2] == b"first"
    assert [m for m, _, _ in srv.requests] == ["GET", "GET", "GET"] and t.opened == 2
    with pytest.raises(TransportError, match="closed the connection"):
        t.request("POST", "/", {}, b"x")
    assert [m for m, _, _ in srv.requests] == ["GET", "GET", "GET", "POST"] and t.opened == 2


def test_malformed_responses_and_refused_connections_are_transport_errors(serve: Any) -> None:
    srv = serve(lambda ex: ex.send(b"SPDY/9 nonsense\r\n\r\n"))
    with pytest.raises(TransportError, match="malformed status line"):
        transport(srv.port).request("GET", "/", {})
    srv2 = serve(lambda ex: ex.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"))
    t = transport(srv2.port)

    def cut(ex: Exchange) -> None:
        ex.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")
        close(ex)

    srv2.handler = cut
    with pytest.raises(TransportError, match="cut short"):
        t.request("GET", "/", {})
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # nothing listens there
    with pytest.raises(TransportError, match="connect"):
        transport(port).request("GET", "/", {})


def test_a_stream_is_read_as_it_arrives_and_shutdown_wakes_its_reader(serve: Any) -> None:
    go = threading.Event()

    def stream(ex: Exchange) -> None:
        if ex.path == "/refused":
            ex.reply(b'{"code":403}', status=403)
            return
        ex.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\none\r\n")
        go.wait(5)
        ex.send(b"3\r\ntwo\r\n")
        time.sleep(5)  # then nothing more: the reader waits until shut down

    srv = serve(stream)
    t = transport(srv.port)
    status, _, body, s = t.stream("GET", "/refused", {})
    assert status == 403 and body == b'{"code":403}' and s is None
    status, _, _, s = t.stream("GET", "/watch", {})
    assert status == 200 and s is not None
    it = s.chunks()
    assert next(it) == b"one"  # before the server has sent anything more
    go.set()
    assert next(it) == b"two"
    got: list[Any] = []
    reader = threading.Thread(target=lambda: got.append(list(_safe(it))))
    reader.start()
    time.sleep(0.1)
    s.shutdown()
    reader.join(2)
    assert not reader.is_alive()
    s.close()


def _safe(it: Iterator[bytes]) -> Iterator[bytes]:
    try:
        yield from it
    except (OSError, TransportError):
        return


def _pod_event(name: str, rv: int, etype: str = "ADDED") -> bytes:
    return json.dumps({"type": etype, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "default", "resourceVersion": str(rv)}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}}).encode() + b"\n"


def test_watch_events_split_across_chunks_or_packed_into_one(serve: Any) -> None:
    a, b, c = _pod_event("a", 5), _pod_event("b", 6, "MODIFIED"), _pod_event("c", 7, "DELETED")
    bookmark = b'{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}\n'
    pieces = [a[:10], a[10:30], a[30:] + b[:7], b[7:] + c + b"\n", bookmark]

    def watch(ex: Exchange) -> None:
        ex.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for p in pieces:
            ex.send(b"%x\r\n%s\r\n" % (len(p), p))
            time.sleep(0.02)
        ex.send(b"0\r\n\r\n")

    srv = serve(watch)
    from kubernetes.client import Configuration

    client = RestClient(Configuration(host=f"http://127.0.0.1:{srv.port}"))
    w = client.watch("Pod", resource_version="4")
    evs = []
    deadline = time.monotonic() + 5
    while len(evs) < 4 and time.monotonic() < deadline:
        ev = w.next(timeout=0.2)
        if ev is not None:
            evs.append(ev)
    w.stop()
    assert [(e.type, e.object.name if e.object else None, e.resource_version) for e in evs] == [
        ("ADDED", "a", 5), ("MODIFIED", "b", 6), ("DELETED", "c", 7), ("BOOKMARK", None, 9)]
    assert all(type(e.object) is Pod for e in evs[:3]) and evs[0].object.containers[0].requests == {"cpu": 100}
    assert srv.requests[0][1].startswith("/api/v1/pods?") and "resourceVersion=4" in srv.requests[0][1]


def test_a_server_path_prefix_is_kept(serve: Any) -> None:
    srv = serve(lambda ex: ex.reply(b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"3"},"items":[]}'))
    from kubernetes.client import Configuration

    client = RestClient(Configuration(host=f"http://127.0.0.1:{srv.port}/k8s/clusters/c-1/"))
    assert client.list("Pod") == ([], "3")
    assert srv.requests[0][1] == "/k8s/clusters/c-1/api/v1/pods?limit=500"


@pytest.mark.parametrize("settings", [
    {},
    {"verify_ssl": False},
    {"ssl_ca_cert": "/tmp/ca.crt", "cert_file": "/tmp/c.crt", "key_file": "/tmp/c.key"},
    {"tls_server_name": "kubernetes.default", "assert_hostname": False},
    {"socket_options": [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)], "retries": 5},
])
def test_the_pool_manager_is_the_official_clients(settings: dict[str, Any]) -> None:
    from kubernetes.client import Configuration
    from kubernetes.client.rest import RESTClientObject

    cfg = Configuration(host="https://127.0.0.1:6443")
    cfg.connection_pool_maxsize = 64
    for k, v in settings.items():
        setattr(cfg, k, v)
    ours, theirs = pool_manager(cfg), RESTClientObject(cfg).pool_manager
    assert type(ours) is type(theirs)
    assert {k: repr(v) for k, v in ours.connection_pool_kw.items()} == \
        {k: repr(v) for k, v in theirs.connection_pool_kw.items()}
    assert theirs.connection_pool_kw.get("cert_reqs") == (ssl.CERT_REQUIRED if cfg.verify_ssl else ssl.CERT_NONE)


def test_through_a_proxy_urllib3_does_the_exchange(serve: Any) -> None:
    """With a proxy configured, requests go through urllib3's ProxyManager (absolute request
    URIs to the proxy): the scripted server plays the proxy for a list and a watch."""
    a = _pod_event("a", 5)

    def proxy(ex: Exchange) -> None:
        if "watch=true" in ex.path:
            ex.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(a), a))
        else:
            ex.reply(b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"4"},"items":[]}')

    srv = serve(proxy)
    from kubernetes.client import Configuration

    cfg = Configuration(host="http://kube.invalid:8080")
    cfg.proxy = f"http://127.0.0.1:{srv.port}"
    client = RestClient(cfg)
    assert type(client.transport).__name__ == "Urllib3Transport"
    assert client.list("Pod") == ([], "4")
    w = client.watch("Pod", resource_version="4")
    ev = w.next(timeout=5)
    w.stop()
    assert ev is not None and ev.type == "ADDED" and ev.object.name == "a"
    assert [p for _, p, _ in srv.requests] == ["http://kube.invalid:8080/api/v1/pods?limit=500",
                                               "http://kube.invalid:8080/api/v1/pods?watch=true&allowWatchBookmarks=true"
                                               "&resourceVersion=4"]


def test_tls_is_verified_as_configured(tmp_path: Any) -> None:
    """Over TLS the transport's connections check the server as configured: the right CA
    passes, another CA or a wrong server name fails, insecure-skip-tls-verify passes; and the
    connection is reused across requests."""
    from ksched.api import errors as E
    from ksched.apiserver.http import ApiServer
    from ksched.apiserver.kubeconfig import write_kubeconfig
    from ksched.apiserver.store import Store
    from ksched.apiserver.tls import make_self_signed, server_ssl_context

    crt, key = make_self_signed(tmp_path / "pki", ["127.0.0.1"])
    other, _ = make_self_signed(tmp_path / "other", ["127.0.0.1"])
    store = Store()
    server = ApiServer(store, "127.0.0.1", 0, ssl_context=server_ssl_context(crt, key))
    server.start()
    try:
        good = RestClient(kubeconfig=str(write_kubeconfig(tmp_path / "good", server.url, ca_file=crt)))
        for _ in range(5):
            assert good.list("Pod") == ([], str(store.resource_version))
        assert good.transport.opened == 1  # type: ignore[union-attr]
        bad = RestClient(kubeconfig=str(write_kubeconfig(tmp_path / "bad", server.url, ca_file=other)))
        with pytest.raises(E.ServiceUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
            bad.list("Pod")
        doc = yaml_load(tmp_path / "good")
        doc["clusters"][0]["cluster"]["tls-server-name"] = "not-the-server.example"
        (tmp_path / "sni").write_text(yaml_dump(doc))
        with pytest.raises(E.ServiceUnavailable, match=r"not-the-server\.example|hostname"):
            RestClient(kubeconfig=str(tmp_path / "sni")).list("Pod")
        doc = yaml_load(tmp_path / "bad")
        doc["clusters"][0]["cluster"] = {"server": server.url, "insecure-skip-tls-verify": True}
        (tmp_path / "insecure").write_text(yaml_dump(doc))
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert RestClient(kubeconfig=str(tmp_path / "insecure")).list("Pod")[0] == []
    finally:
        server.stop()


def yaml_load(p: Any) -> Any:
    import yaml

    return yaml.safe_load(p.read_text())


def yaml_dump(d: Any) -> str:
    import yaml

    return yaml.safe_dump(d)


@pytest.mark.parametrize(("url", "want"), [
    ("http://127.0.0.1:8080", ("127.0.0.1", 8080, "127.0.0.1:8080", "")),
    ("http://Kube.Example", ("kube.example", 80, "kube.example", "")),
    ("HTTP://kube.example:80/k8s/clusters/c-1", ("kube.example", 80, "kube.example", "/k8s/clusters/c-1")),
    ("http://[::1]:6443", ("::1", 6443, "[::1]:6443", "")),
    ("https://127.0.0.1:6443", None),
    ("127.0.0.1:8080", None),
    ("http://user:pw@kube.example", None),
    ("http://kube.example:notaport", None),
])
def test_plain_http_servers_are_read_as_urllib3_reads_them(url: str, want: Any) -> None:
    from ksched.client.rest import _plain_http

    assert _plain_http(url) == want
    if want is not None:
        import urllib3

        u = urllib3.util.parse_url(url)
        assert (want[0], want[1], want[3]) == (u.host.strip("[]"), u.port or 80, u.path or "")


def test_a_plain_http_server_needs_no_urllib3_pool(serve: Any) -> None:
    """Plain HTTP is connected to directly (TCP_NODELAY set, as urllib3's default), over one
    keep-alive connection; https or a proxy keep urllib3's pool manager."""
    seen: list[int] = []

    def handler(ex: Exchange) -> None:
        seen.append(ex.conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        ex.reply(b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"3"},"items":[]}')

    srv = serve(handler)
    from kubernetes.client import Configuration

    client = RestClient(Configuration(host=f"http://127.0.0.1:{srv.port}"))
    assert client.pool is None and type(client.transport) is Transport
    for _ in range(3):
        assert client.list("Pod") == ([], "3")
    assert client.transport.opened == 1 and srv.connections == 1  # type: ignore[union-attr]
    assert RestClient(Configuration(host="https://127.0.0.1:6443")).pool is not None


def test_the_plain_transport_sets_the_configured_socket_options(serve: Any) -> None:
    from ksched.client.transport import plain_connect

    srv = serve(lambda ex: ex.reply())
    sock, _ = plain_connect("127.0.0.1", srv.port, [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)])(5.0)
    try:
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
    finally:
        sock.close()
