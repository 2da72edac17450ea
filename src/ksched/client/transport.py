"""A lean HTTP/1.1 transport for the API server: pooled keep-alive connections, each request
written in one ``sendall``, responses read from a buffered reader.

client-go keeps connections to the API server open and reuses them for every request
(``net/http.Transport``); this does the same for ``RestClient``, without the per-request
machinery of urllib3 and http.client (URL parsing, pool-key normalization, header parsing
through the ``email`` package), which cost more CPU than the scheduling cycle itself when every
pod takes a binding and an event. Connections are opened by a factory (``RestClient`` passes
one that opens them through urllib3's connection classes, so TLS, client certificates, SNI and
hostname checks are exactly the configured ones); only the HTTP exchange is done here.

What is read: status line, headers, and a body framed by ``Content-Length``, chunked transfer
encoding, or the end of the connection; ``gzip``/``deflate`` content encoding is undone.

Known divergences from client-go's transport: HTTP/1.1 only (client-go negotiates HTTP/2 when
the server offers it: many streams over one connection, where this opens one connection per
concurrent request and per watch); no retry of a failed connect (the caller gets
``TransportError`` and handles it as any failed request, as the reflector's backoff does); a
request that fails on a reused connection before anything of its response arrived is sent again
once on a fresh connection only when that is safe (nothing could have been received by the
server, or the method is idempotent), as net/http does.
"""

from __future__ import annotations

import select
import socket
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["Connection", "StreamResponse", "Transport", "TransportError", "Urllib3Transport", "plain_connect"]

_MAX_LINE = 65536
_MAX_HEADERS = 200
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})


def _readable(sock: socket.socket) -> bool:
    """Whether ``sock`` has something to read (or hung up) right now: urllib3's
    ``wait_for_read(sock, 0)`` (poll where the platform has it, else select)."""
    if hasattr(select, "poll"):
        p = select.poll()
        p.register(sock, select.POLLIN)
        return bool(p.poll(0))
    ready, _, _ = select.select([sock], [], [], 0)
    return bool(ready)


def plain_connect(host: str, port: int, socket_options: Any = None,
                  ) -> Callable[[float | None], tuple[socket.socket, Any]]:
    """A ``Transport`` connection factory for plain HTTP: a TCP connection to ``host:port``
    with ``socket_options`` set (``(level, option, value)`` triples; None means urllib3's
    default, TCP_NODELAY), as urllib3's HTTPConnection opens it, without importing urllib3
    and ssl (a twentieth of a second at start-up) for a server that needs no TLS."""
    opts = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)] if socket_options is None else list(socket_options)

    def connect(timeout: float | None) -> tuple[socket.socket, Any]:
        sock = socket.create_connection((host, port), timeout)
        try:
            for opt in opts:
                sock.setsockopt(*opt)
        except OSError:
            sock.close()
            raise
        return sock, None

    return connect


class TransportError(Exception):
    """The exchange failed below HTTP: connect, reset, timeout, a malformed response."""


class _Retryable(TransportError):
    """Failed on a reused connection before the server could have sent anything back."""

    def __init__(self, msg: str, written: bool) -> None:
        super().__init__(msg)
        self.written = written


class Connection:
    """One open connection: a socket and a buffered reader on it."""

    __slots__ = ("closed", "holder", "reused", "rfile", "sock")

    def __init__(self, sock: socket.socket, holder: Any = None) -> None:
        self.sock = sock
        self.rfile = sock.makefile("rb", buffering=65536)
        self.holder = holder  # whatever owns the socket (kept alive with it)
        self.reused = False
        self.closed = False

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.rfile.close()
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def dropped(self) -> bool:
        """Whether the server closed (or wrote to) this idle connection: nothing may be
        readable on a connection waiting for its next request (urllib3's check)."""
        try:
            return _readable(self.sock)
        except (OSError, ValueError):
            return True

    # ---- reading -------------------------------------------------------------------

    def _line(self) -> bytes:
        line = self.rfile.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise TransportError("response line too long")
        return line

    def read_head(self) -> tuple[int, dict[str, str], bool]:
        """Status, headers (lower-case names; repeated ones joined with ', '), and whether the
        connection stays open after the body."""
        while True:
            line = self._line()
            if not line:
                raise TransportError("the server closed the connection without a response")
            parts = line.split(None, 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
                raise TransportError(f"malformed status line {line[:80]!r}")
            try:
                status = int(parts[1])
            except ValueError as e:
                raise TransportError(f"malformed status line {line[:80]!r}") from e
            headers: dict[str, str] = {}
            for _ in range(_MAX_HEADERS):
                h = self._line()
                if h in (b"\r\n", b"\n", b""):
                    break
                name, sep, value = h.partition(b":")
                if not sep:
                    raise TransportError(f"malformed header line {h[:80]!r}")
                k = name.strip().lower().decode("latin-1")
                v = value.strip().decode("latin-1")
                headers[k] = f"{headers[k]}, {v}" if k in headers else v
            else:
                raise TransportError("too many response headers")
            if 100 <= status < 200 and status != 101:
                continue  # an interim response (100 Continue): the real one follows
            conn_hdr = headers.get("connection", "").lower()
            keep = ("close" not in conn_hdr) if parts[0] != b"HTTP/1.0" else ("keep-alive" in conn_hdr)
            return status, headers, keep

    def read_body(self, method: str, status: int, headers: dict[str, str]) -> tuple[bytes, bool]:
        """The whole body; and False when it ran to the end of the connection (not reusable)."""
        if method == "HEAD" or status in (204, 304):
            return b"", True
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = b"".join(self.chunks())
            complete = True
        elif "content-length" in headers:
            try:
                n = int(headers["content-length"])
            except ValueError as e:
                raise TransportError("malformed Content-Length") from e
            body = self.rfile.read(n)
            if len(body) != n:
                raise TransportError(f"response body cut short ({len(body)} of {n} bytes)")
            complete = True
        else:
            body = self.rfile.read()
            complete = False
        enc = headers.get("content-encoding", "").lower()
        if enc in ("gzip", "deflate"):
            body = zlib.decompress(body, 16 + zlib.MAX_WBITS if enc == "gzip" else zlib.MAX_WBITS)
        return body, complete

    def chunks(self) -> Iterator[bytes]:
        """The chunks of a chunked body as they arrive (trailers skipped)."""
        rfile = self.rfile
        while True:
            line = self._line()
            if not line:
                raise TransportError("chunked body cut short")
            size_s = line.split(b";", 1)[0].strip()
            try:
                size = int(size_s, 16)
            except ValueError as e:
                raise TransportError(f"malformed chunk size {line[:40]!r}") from e
            if size == 0:
                while self._line() not in (b"\r\n", b"\n", b""):
                    pass
                return
            data = rfile.read(size)
            if len(data) != size:
                raise TransportError("chunk cut short")
            rfile.read(2)
            yield data

    def raw_chunks(self, headers: dict[str, str]) -> Iterator[bytes]:
        """A streamed body's bytes as they arrive, whatever its framing."""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            yield from self.chunks()
            return
        left = int(headers["content-length"]) if "content-length" in headers else -1
        read1 = self.rfile.read1
        while left != 0:
            data = read1(65536 if left < 0 else min(left, 65536))
            if not data:
                if left > 0:
                    raise TransportError("response body cut short")
                return
            if left > 0:
                left -= len(data)
            yield data


class StreamResponse:
    """A response whose body is read as it arrives (a watch). Owns its connection."""

    def __init__(self, conn: Connection, status: int, headers: dict[str, str]) -> None:
        self.conn = conn
        self.status = status
        self.headers = headers

    def chunks(self) -> Iterator[bytes]:
        return self.conn.raw_chunks(self.headers)

    def shutdown(self) -> None:
        """Wake up a reader blocked on this stream (from another thread)."""
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        self.conn.close()


class Transport:
    """Requests over pooled keep-alive connections to one server.

    ``connect(timeout)`` opens a connection and returns ``(socket, holder)``; ``host_header``
    is the ``Host`` header's value; ``maxsize`` bounds the idle connections kept."""

    def __init__(self, connect: Callable[[float | None], tuple[socket.socket, Any]], host_header: str,
                 maxsize: int = 64) -> None:
        self._connect = connect
        self.host_header = host_header
        self.maxsize = maxsize
        self._idle: deque[Connection] = deque()
        self._lock = threading.Lock()
        self.opened = 0  # connections opened so far (tests, diagnostics)

    def _new(self, timeout: float | None) -> Connection:
        try:
            sock, holder = self._connect(timeout)
        except (OSError, ValueError) as e:
            raise TransportError(f"connect: {e}") from e
        except Exception as e:  # urllib3's NewConnectionError, SSL errors, ...
            raise TransportError(f"connect: {e}") from e
        self.opened += 1
        return Connection(sock, holder)

    def _get(self, timeout: float | None) -> Connection:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._new(timeout)
            if conn.dropped():
                conn.close()
                continue
            conn.reused = True
            return conn

    def _put(self, conn: Connection) -> None:
        with self._lock:
            if len(self._idle) < self.maxsize:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle = list(self._idle)
            self._idle.clear()
        for c in idle:
            c.close()

    def _head(self, method: str, path: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
        lines = [f"{method} {path} HTTP/1.1\r\nHost: {self.host_header}\r\n"]
        lines.extend(f"{k}: {v}\r\n" for k, v in headers.items())
        if body is None:
            lines.append("\r\n")
            return "".join(lines).encode("latin-1")
        lines.append(f"Content-Length: {len(body)}\r\n\r\n")
        return "".join(lines).encode("latin-1") + body

    def _send(self, conn: Connection, data: bytes, timeout: float | None) -> None:
        try:
            conn.sock.settimeout(timeout)
            conn.sock.sendall(data)
        except OSError as e:
            conn.close()
            if conn.reused:
                raise _Retryable(f"send: {e}", written=False) from e
            raise TransportError(f"send: {e}") from e

    def _exchange(self, method: str, data: bytes, timeout: float | None,
                  stream: bool) -> tuple[int, dict[str, str], bytes, Connection | None]:
        conn = self._get(timeout)
        self._send(conn, data, timeout)
        try:
            try:
                status, headers, keep = conn.read_head()
            except TransportError as e:
                if conn.reused and str(e).startswith("the server closed"):
                    raise _Retryable(str(e), written=True) from e
                raise
            if stream and status < 400:
                return status, headers, b"", conn
            body, complete = conn.read_body(method, status, headers)
        except _Retryable:
            conn.close()
            raise
        except (OSError, TransportError, zlib.error) as e:
            conn.close()
            raise e if isinstance(e, TransportError) else TransportError(str(e)) from e
        if keep and complete:
            self._put(conn)
        else:
            conn.close()
        return status, headers, body, None

    def request(self, method: str, path: str, headers: Mapping[str, str], body: bytes | None = None,
                timeout: float | None = 30.0) -> tuple[int, dict[str, str], bytes]:
        """One request (``Host`` and ``Content-Length`` are added). Returns status, headers
        (lower-case names) and body."""
        data = self._head(method, path, headers, body)
        try:
            status, hdrs, resp, _ = self._exchange(method, data, timeout, False)
        except _Retryable as e:
            if e.written and method not in _IDEMPOTENT:
                raise TransportError(str(e)) from e
            status, hdrs, resp, _ = self._exchange(method, data, timeout, False)
        return status, hdrs, resp

    def stream(self, method: str, path: str, headers: Mapping[str, str], connect_timeout: float | None = 10.0,
               ) -> tuple[int, dict[str, str], bytes, StreamResponse | None]:
        """A request whose body is read as it arrives: on success (status < 400) a
        StreamResponse that owns the connection; else the whole error body."""
        data = self._head(method, path, headers, None)
        try:
            status, hdrs, body, conn = self._exchange(method, data, connect_timeout, True)
        except _Retryable:
            status, hdrs, body, conn = self._exchange(method, data, connect_timeout, True)
        if conn is None:
            return status, hdrs, body, None
        conn.sock.settimeout(None)  # a watch waits for events as long as it takes
        return status, hdrs, b"", StreamResponse(conn, status, hdrs)


class _Urllib3Stream:
    """A streamed urllib3 response, with StreamResponse's interface."""

    def __init__(self, resp: Any) -> None:
        self.resp = resp

    def chunks(self) -> Iterator[bytes]:
        return self.resp.stream(64 * 1024, decode_content=True)  # type: ignore[no-any-return]

    def shutdown(self) -> None:
        # Shut the socket down: the reader thread, blocked on an idle stream, wakes up at once
        # (closing the response from here would wait for the reader's buffer lock, i.e. for the
        # next event) and closes the response itself.
        sock = getattr(getattr(self.resp, "connection", None), "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        # Only the reader closes the response and gives its (closed) connection back to the
        # pool, exactly once: a connection released twice would be handed to two requests.
        try:
            self.resp.close()
            self.resp.release_conn()
        except Exception:  # the connection may already be gone
            pass


class Urllib3Transport:
    """The same interface over a urllib3 pool manager: used when the client goes through a
    proxy (urllib3's ProxyManager speaks to it: absolute request URIs, CONNECT tunnels)."""

    def __init__(self, pool: Any, base_url: str) -> None:
        self.pool = pool
        self.base_url = base_url

    def request(self, method: str, path: str, headers: Mapping[str, str], body: bytes | None = None,
                timeout: float | None = 30.0) -> tuple[int, dict[str, str], bytes]:
        try:
            resp = self.pool.request(method, self.base_url + path, body=body, headers=dict(headers),
                                     preload_content=True, timeout=timeout)
        except Exception as e:  # urllib3.exceptions.HTTPError, OSError
            raise TransportError(str(e)) from e
        return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.data

    def stream(self, method: str, path: str, headers: Mapping[str, str], connect_timeout: float | None = 10.0,
               ) -> tuple[int, dict[str, str], bytes, _Urllib3Stream | None]:
        import urllib3

        try:
            resp = self.pool.request(method, self.base_url + path, headers=dict(headers), preload_content=False,
                                     timeout=urllib3.Timeout(connect=connect_timeout, read=None))
        except Exception as e:
            raise TransportError(str(e)) from e
        hdrs = {k.lower(): v for k, v in resp.headers.items()}
        if resp.status >= 400:
            try:
                body = resp.read()
            finally:
                _Urllib3Stream(resp).close()
            return resp.status, hdrs, body, None
        return resp.status, hdrs, b"", _Urllib3Stream(resp)

    def close(self) -> None:
        self.pool.clear()
