"""A ``ClusterClient`` over the Kubernetes REST API.

Configuration, authentication and TLS come from the official Kubernetes Python client
(kubeconfig with contexts, client certificates, bearer tokens, exec credential plugins,
in-cluster service accounts). Requests go over pooled keep-alive connections
(``ksched.client.transport``: connections opened through urllib3 with the configured TLS, the
HTTP exchange itself done lean; a plain ``http://`` server is connected to directly, without
importing urllib3 and ssl; through a proxy, urllib3 does all of it). JSON is decoded with
orjson (``ksched.api.jsoncodec``) and parsed once into ``ksched.api`` objects: the generated model classes are never used
on the hot path. Watches stream in a background thread per watch, each event decoded as its line
arrives.
"""

from __future__ import annotations

import logging
import queue as _queue
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

from ksched.api import errors as E
from ksched.api.apiextensions import CustomResourceDefinition
from ksched.api.jsoncodec import dumps, loads
from ksched.api.kinds import UnknownKindError
from ksched.api.labels import FieldSelector, LabelSelector
from ksched.api.meta import KubeObject
from ksched.api.pod import Pod
from ksched.api.scheme import Scheme
from ksched.api.watch import WatchEvent
from ksched.client.transport import Transport, TransportError, Urllib3Transport, plain_connect

__all__ = ["RestClient", "RestWatch", "load_client_configuration"]

log = logging.getLogger(__name__)

POOL_MAXSIZE = 64

_ERRORS_BY_CODE: dict[int, type[E.ApiError]] = {
    400: E.BadRequest, 401: E.Unauthorized, 403: E.Forbidden, 404: E.NotFound, 405: E.MethodNotAllowed,
    410: E.Gone, 415: E.UnsupportedMediaType, 422: E.Invalid, 429: E.TooManyRequests,
}


def _api_error(status: int, body: bytes | str) -> E.ApiError:
    try:
        st = loads(body)
    except (ValueError, TypeError):
        st = {"message": body.decode(errors="replace") if isinstance(body, bytes) else str(body)}
    if not isinstance(st, dict):
        st = {"message": str(st)}
    msg = st.get("message") or f"HTTP {status}"
    reason = st.get("reason") or ""
    details = st.get("details") or {}
    code = int(st.get("code") or status)
    if code == 409:
        cls: type[E.ApiError] = E.AlreadyExists if reason == "AlreadyExists" else \
            E.BindingConflict if E.BindingConflict.is_refusal(details.get("kind", ""), msg) else E.Conflict
    else:
        cls = _ERRORS_BY_CODE.get(code, E.InternalError)
    err = cls(msg, kind=details.get("kind", ""), name=details.get("name", ""), group=details.get("group", ""),
              causes=details.get("causes"), retry_after=details.get("retryAfterSeconds"))
    err.code = code
    return err


def load_client_configuration(kubeconfig: str | None = None, context: str | None = None,
                              in_cluster: bool | None = None) -> Any:
    """A kubernetes.client.Configuration from a kubeconfig, or from the pod's service account
    when no kubeconfig is given and the process runs in a pod (KUBERNETES_SERVICE_HOST/PORT and
    the token file, as client-go's InClusterConfig), else from $KUBECONFIG or ~/.kube/config.
    In-cluster, the token file is re-read every minute (bound tokens rotate). A kubeconfig with
    only a server, CA, token or client certificate is read without importing the official client
    (``ksched.client.kubeconfig``: the same result, a third of a second sooner); anything else by
    the official loader."""
    in_cluster = in_cluster or (in_cluster is None and kubeconfig is None and _in_cluster())
    if not in_cluster:
        from ksched.client.kubeconfig import load

        lean = load(kubeconfig, context)
        if lean is not None:
            return lean
    from kubernetes import config as kconfig
    from kubernetes.client import Configuration

    cfg = Configuration()
    if in_cluster:
        kconfig.load_incluster_config(client_configuration=cfg)
    else:
        kconfig.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    return cfg


def _in_cluster() -> bool:
    """Running in a pod: the service host is set and the token is mounted (the paths and names
    are the official client's, read when called)."""
    import os

    from kubernetes.config import incluster_config as ic

    return bool(os.environ.get(ic.SERVICE_HOST_ENV_NAME)) and os.path.isfile(ic.SERVICE_TOKEN_FILENAME)


def _path(cls: type[KubeObject], namespace: str | None, name: str = "", sub: str = "") -> str:
    group, _, version = cls.API_VERSION.rpartition("/")
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    if cls.NAMESPACED and namespace:
        base += f"/namespaces/{quote(namespace)}"
    base += f"/{cls.PLURAL}"
    if name:
        base += f"/{quote(name)}"
    if sub:
        base += f"/{sub}"
    return base


def pool_manager(cfg: Any) -> Any:
    """The urllib3 pool manager the official client builds for ``cfg``
    (``kubernetes.client.rest.RESTClientObject``): the same certificate checks, client
    certificate, SNI name, socket options and pool size. Without a proxy it is built here (the
    same arguments; a test compares them); through a proxy the official client builds it."""
    import ssl

    import urllib3

    if cfg.proxy:
        from kubernetes.client.rest import RESTClientObject

        return RESTClientObject(cfg).pool_manager
    args: dict[str, Any] = {
        "cert_reqs": ssl.CERT_REQUIRED if cfg.verify_ssl else ssl.CERT_NONE,
        "ca_certs": cfg.ssl_ca_cert,
        "cert_file": cfg.cert_file,
        "key_file": cfg.key_file,
        "ca_cert_data": getattr(cfg, "ca_cert_data", None),
    }
    if cfg.assert_hostname is not None:
        args["assert_hostname"] = cfg.assert_hostname
    if cfg.retries is not None:
        args["retries"] = cfg.retries
    if cfg.tls_server_name:
        args["server_hostname"] = cfg.tls_server_name
    if cfg.socket_options is not None:
        args["socket_options"] = cfg.socket_options
    elif getattr(cfg, "keep_alive", False):
        from kubernetes.utils.keepalive import tcp_keepalive_socket_options

        args["socket_options"] = tcp_keepalive_socket_options()
    if cfg.connection_pool_maxsize is not None:
        args["maxsize"] = cfg.connection_pool_maxsize
    return urllib3.PoolManager(**args)


def _transport(pool: Any, host: str, maxsize: int) -> Transport | Urllib3Transport:
    """Lean keep-alive connections to ``host``, opened by ``pool``'s connection class (TLS as
    configured); urllib3 all the way when a proxy is in between."""
    import urllib3

    if isinstance(pool, urllib3.ProxyManager) or type(pool).__name__ == "SOCKSProxyManager":
        return Urllib3Transport(pool, host)
    u = urllib3.util.parse_url(host)
    scheme = u.scheme or "http"
    port = u.port or (443 if scheme == "https" else 80)
    cpool = pool.connection_from_host(u.host, port, scheme)

    def connect(timeout: float | None) -> tuple[Any, Any]:
        conn = cpool._new_conn()
        if timeout is not None:
            conn.timeout = timeout
        conn.connect()
        return conn.sock, conn

    default = (scheme == "https" and port == 443) or (scheme == "http" and port == 80)
    return Transport(connect, u.host if default else f"{u.host}:{port}", maxsize)


def _plain_http(url: str) -> tuple[str, int, str, str] | None:
    """(host to connect to, port, Host header, path) of an ``http://`` server URL that needs
    nothing of urllib3 (no TLS), as urllib3's ``parse_url`` reads it; None for anything else
    (https, no scheme, a URL ``urlsplit`` cannot read), which goes through urllib3."""
    from urllib.parse import urlsplit

    if url[:7].lower() != "http://":
        return None
    try:
        u = urlsplit(url)
        host, port = u.hostname, u.port or 80
    except ValueError:
        return None
    if not host or u.username is not None or u.password is not None:
        return None
    shown = f"[{host}]" if ":" in host else host
    return host, port, shown if port == 80 else f"{shown}:{port}", u.path


def _socket_options(cfg: Any) -> Any:
    """The socket options urllib3 would set for ``cfg`` (see ``pool_manager``): the configured
    ones, TCP keep-alive ones when asked for, else None (urllib3's default)."""
    if cfg.socket_options is not None:
        return cfg.socket_options
    if getattr(cfg, "keep_alive", False):
        from kubernetes.utils.keepalive import tcp_keepalive_socket_options

        return tcp_keepalive_socket_options()
    return None


class RestWatch:
    """A watch stream read by a background thread; events are ksched.api objects, decoded line
    by line as the stream delivers them."""

    def __init__(self, client: RestClient, url: str, kind: type[KubeObject]) -> None:
        self.client = client
        self.kind = kind
        self._events: deque[Any] = deque()
        self._cond = threading.Condition()
        self.closed = False
        self.notify: Any = None
        self._resp: Any = None
        self._error: E.ApiError | None = None
        # Set once the server has answered the request (or it failed): watch() waits for it.
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(url,), name=f"watch-{kind.PLURAL}", daemon=True)
        self._thread.start()

    def _push(self, ev: Any) -> None:
        with self._cond:
            self._events.append(ev)
            self._cond.notify()
        n = self.notify
        if n is not None:
            n()

    def _event(self, line: bytes) -> bool:
        """Decode one line of the stream and queue its event; False after an ERROR event."""
        d = loads(line)
        t = d.get("type")
        o = d.get("object") or {}
        if t == "ERROR":
            self._error = _api_error(int(o.get("code") or 500), dumps(o))
            self._push(WatchEvent("ERROR", None, 0))
            return False
        md = o.get("metadata") or {}
        rv = int(md.get("resourceVersion") or 0)
        if t == "BOOKMARK":
            self._push(WatchEvent("BOOKMARK", None, rv))
        else:
            self._push(WatchEvent(t, self.kind.from_dict(o), rv))
        return True

    def _run(self, url: str) -> None:
        try:
            try:
                resp = self.client._stream(url)
            except E.ApiError as e:  # the server refused the watch (400, 401, ...)
                self._error = e
                raise
            self._resp = resp
            self._started.set()
            if self.closed:  # stopped while the request was on its way
                return
            rest = b""
            for chunk in resp.chunks():
                if self.closed:
                    break
                if rest:
                    chunk = rest + chunk
                if not chunk.endswith(b"\n"):
                    # Part of an event: keep the tail until the rest of its line arrives.
                    cut = chunk.rfind(b"\n") + 1
                    rest = chunk[cut:]
                    chunk = chunk[:cut]
                    if not chunk:
                        continue
                else:
                    rest = b""
                for line in chunk.split(b"\n"):
                    if line and not line.isspace() and not self._event(line):
                        return
        except Exception as e:
            if not self.closed:
                log.debug("watch of %s ended: %s", self.kind.PLURAL, e)
        finally:
            # This thread alone closes the stream (and its connection), exactly once.
            r = self._resp
            if r is not None:
                r.close()
            with self._cond:
                self.closed = True
                self._cond.notify_all()
            self._started.set()
            n = self.notify
            if n is not None:
                n()

    def next(self, timeout: float | None = None) -> Any:
        with self._cond:
            if not self._events and not self.closed:
                self._cond.wait(timeout)
            if self._events:
                return self._events.popleft()
            return None

    def drain(self) -> list[Any]:
        with self._cond:
            out = list(self._events)
            self._events.clear()
            return out

    def pending(self) -> int:
        return len(self._events)

    def stop(self) -> None:
        self.closed = True
        r = self._resp
        if r is not None:
            # Shut the socket down: the reader thread, blocked on an idle stream, wakes up at
            # once and closes the stream itself.
            r.shutdown()


class RestClient:
    """ClusterClient over HTTP(S). ``configuration``: a kubernetes.client.Configuration."""

    def __init__(self, configuration: Any | None = None, *, kubeconfig: str | None = None,
                 context: str | None = None, field_manager: str = "ksched", timeout: float = 30.0,
                 scheme: Scheme | None = None) -> None:
        cfg = configuration if configuration is not None else load_client_configuration(kubeconfig, context)
        # One connection per binding worker (16) plus the long-lived watches: the default pool
        # (5 per CPU) would keep opening and discarding connections under load.
        cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, POOL_MAXSIZE)
        self.configuration = cfg
        self.host = cfg.host.rstrip("/")
        plain = _plain_http(self.host) if not cfg.proxy else None
        # The urllib3 pool manager opening TLS connections (None for plain HTTP: no urllib3, no ssl).
        self.pool: Any = None
        if plain is not None:
            host, port, host_header, prefix = plain
            self.transport: Transport | Urllib3Transport = Transport(
                plain_connect(host, port, _socket_options(cfg)), host_header, cfg.connection_pool_maxsize)
        else:
            import urllib3

            self.pool = pool_manager(cfg)
            self.transport = _transport(self.pool, self.host, cfg.connection_pool_maxsize)
            prefix = "" if isinstance(self.transport, Urllib3Transport) else \
                (urllib3.util.parse_url(self.host).path or "")
        # A path the server is mounted under (https://host/k8s/clusters/c-1), for the lean transport.
        self._prefix = prefix.rstrip("/")
        self.field_manager = field_manager
        self.timeout = timeout
        # The kinds this client knows: the built-in ones, and the custom kinds registered by
        # :meth:`discover_custom_kinds`.
        self.scheme = scheme or Scheme()
        # Objects per page of a list (``limit``; the rest follow with ``continue``).
        self.page_size = 500
        self._auth_key: Any = None
        self._auth: dict[str, str] = {}

    # ---------------------------------------------------------------- transport

    def _auth_headers(self) -> dict[str, str]:
        """The configured credentials as headers (a refresh hook runs first, as the official
        client runs it before every request); recomputed only when the credentials changed."""
        cfg = self.configuration
        if cfg.refresh_api_key_hook is not None:
            cfg.refresh_api_key_hook(cfg)
        key = (tuple(cfg.api_key.items()), tuple(cfg.api_key_prefix.items()), cfg.username, cfg.password)
        if key != self._auth_key:
            h: dict[str, str] = {}
            for auth in cfg.auth_settings().values():
                if auth.get("in") == "header" and auth.get("value"):
                    h[auth["key"]] = auth["value"]
            self._auth, self._auth_key = h, key
        return self._auth

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        h = {"Accept": "application/json", "User-Agent": "ksched"}
        if content_type:
            h["Content-Type"] = content_type
        auth = self._auth_headers()
        if auth:
            h.update(auth)
        return h

    def _request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                 timeout: Any = None) -> bytes:
        """One request; the response body, or the ApiError the server's Status says."""
        data = None if body is None else dumps(body)
        try:
            status, _, payload = self.transport.request(
                method, self._prefix + path, self._headers(content_type if data is not None else None), data,
                timeout if timeout is not None else self.timeout)
        except TransportError as e:
            # Connection refused or reset, timeouts: an API error like any other, so callers that
            # handle failed requests (bindings, status patches, events) handle these too.
            raise E.ServiceUnavailable(f"{method} {self.host}{path}: {e}") from e
        if status >= 400:
            raise _api_error(status, payload)
        return payload

    def _stream(self, path: str) -> Any:
        """A GET whose body is read as it arrives (a watch): the open stream, or the ApiError."""
        try:
            status, _, payload, stream = self.transport.stream("GET", self._prefix + path, self._headers(), 10.0)
        except TransportError as e:
            raise E.ServiceUnavailable(f"GET {self.host}{path}: {e}") from e
        if stream is None:
            raise _api_error(status, payload)
        return stream

    def _json(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = self._request(method, path, body, content_type)
        return loads(data) if data else None

    def _cls(self, kind: str | type[KubeObject], api_version: str = "") -> type[KubeObject]:
        if isinstance(kind, type):
            return kind
        cls = None
        if api_version:
            try:
                cls = self.scheme.kind_class(api_version, kind)
            except UnknownKindError:
                cls = None
        if cls is None:
            cls = self.scheme.resolve(kind)
        if cls is None:
            raise E.NotFound(f"unknown kind {kind!r}")
        return cls

    def discover_custom_kinds(self) -> list[CustomResourceDefinition]:
        """Learn the custom kinds of the cluster's established CustomResourceDefinitions (so
        they can be listed and watched); returns those CRDs."""
        crds, _ = self.list(CustomResourceDefinition.KIND)
        out = []
        for crd in crds:
            assert isinstance(crd, CustomResourceDefinition)
            if crd.established and crd.storage_version:
                self.scheme.add_crd(crd)
                out.append(crd)
        return out

    @staticmethod
    def _query(label_selector: LabelSelector | None, field_selector: FieldSelector | None,
               extra: dict[str, str] | None = None) -> str:
        q: dict[str, str] = dict(extra or {})
        if label_selector is not None and not label_selector.is_empty():
            q["labelSelector"] = str(label_selector)
        if field_selector is not None and not field_selector.is_empty():
            q["fieldSelector"] = ",".join(f"{f}{'=' if eq else '!='}{v}" for f, eq, v in field_selector.terms)
        return ("?" + urlencode(q)) if q else ""

    # ---------------------------------------------------------------- ClusterClient

    def list(self, kind: str, namespace: str | None = None, label_selector: LabelSelector | None = None,
             field_selector: FieldSelector | None = None) -> tuple[list[KubeObject], str]:
        items: list[KubeObject] = []
        rv = ""
        for page, page_rv in self.list_pages(kind, namespace, label_selector, field_selector):
            items.extend(page)
            rv = page_rv
        return items, rv

    def _page(self, path: str, label_selector: LabelSelector | None, field_selector: FieldSelector | None,
              cont: str) -> Any:
        extra = {"limit": str(self.page_size)}
        if cont:
            extra["continue"] = cont
        return self._json("GET", path + self._query(label_selector, field_selector, extra))

    def list_pages(self, kind: str, namespace: str | None = None, label_selector: LabelSelector | None = None,
                   field_selector: FieldSelector | None = None) -> Iterator[tuple[list[KubeObject], str]]:
        """The list a page (``limit``: ``page_size``) at a time, as (objects, the list's resourceVersion).
        While the caller takes one page, the next one is already requested (a thread follows the
        continue tokens one page ahead): the API server prepares it while this one is decoded."""
        cls = self._cls(kind)
        path = _path(cls, namespace)
        d = self._page(path, label_selector, field_selector, "")
        md = d.get("metadata") or {}
        rv = str(md.get("resourceVersion") or "")
        cont = md.get("continue") or ""
        if not cont:
            yield self._objects(cls, d), rv
            return
        ahead: _queue.Queue[Any] = _queue.Queue(maxsize=2)
        stop = threading.Event()

        def put(x: Any) -> bool:
            while not stop.is_set():
                try:
                    ahead.put(x, timeout=0.1)
                    return True
                except _queue.Full:
                    continue
            return False

        def fetch(cont: str) -> None:
            try:
                while cont and not stop.is_set():
                    page = self._page(path, label_selector, field_selector, cont)
                    cont = (page.get("metadata") or {}).get("continue") or ""
                    if not put(page):
                        return
                put(None)
            except BaseException as e:  # handed to the caller, who raises it
                put(e)

        t = threading.Thread(target=fetch, args=(cont,), name=f"list-{cls.PLURAL}", daemon=True)
        t.start()
        try:
            yield self._objects(cls, d), rv
            while True:
                page = ahead.get()
                if page is None:
                    return
                if isinstance(page, BaseException):
                    raise page
                yield self._objects(cls, page), rv
        finally:
            stop.set()

    @staticmethod
    def _objects(cls: type[KubeObject], d: Any) -> list[KubeObject]:
        out: list[KubeObject] = []
        api_version, kind = cls.API_VERSION, cls.KIND
        # Listed pods are mostly bound ones, of which the scheduler's cache reads a few fields:
        # the rest is decoded on first access (Pod.lean).
        from_dict = Pod.lean if cls is Pod else cls.from_dict
        for it in d.get("items") or ():
            it.setdefault("apiVersion", api_version)
            it.setdefault("kind", kind)
            out.append(from_dict(it))
        return out

    def watch(self, kind: str, namespace: str | None = None, resource_version: str = "",
              label_selector: LabelSelector | None = None, field_selector: FieldSelector | None = None,
              bookmarks: bool = True) -> RestWatch:
        cls = self._cls(kind)
        extra = {"watch": "true", "allowWatchBookmarks": "true" if bookmarks else "false"}
        if resource_version:
            extra["resourceVersion"] = resource_version
        w = RestWatch(self, _path(cls, namespace) + self._query(label_selector, field_selector, extra), cls)
        # A refused watch raises its error. A version the server no longer has comes back as an
        # ERROR event right after the response headers: surface it as Gone.
        w._started.wait(self.timeout)
        first = w.next(timeout=0.05)
        if first is None and w._error is not None:
            w.stop()
            raise w._error
        if first is not None:
            if first.type == "ERROR":
                w.stop()
                raise w._error or E.Gone("too old resource version")
            with w._cond:
                w._events.appendleft(first)
        return w

    def get(self, kind: str, namespace: str, name: str) -> KubeObject:
        cls = self._cls(kind)
        return cls.from_dict(self._json("GET", _path(cls, namespace, name)))

    def create(self, obj: dict[str, Any] | KubeObject, owned: bool = False) -> KubeObject:
        raw = obj.raw if isinstance(obj, KubeObject) else obj
        cls = self._cls(str(raw.get("kind")), str(raw.get("apiVersion") or ""))
        ns = (raw.get("metadata") or {}).get("namespace") or ("default" if cls.NAMESPACED else "")
        return cls.from_dict(self._json("POST", _path(cls, ns) + f"?fieldManager={self.field_manager}", raw))

    def _update(self, obj: dict[str, Any] | KubeObject, sub: str) -> KubeObject:
        raw = obj.raw if isinstance(obj, KubeObject) else obj
        cls = self._cls(str(raw.get("kind")), str(raw.get("apiVersion") or ""))
        md = raw.get("metadata") or {}
        return cls.from_dict(self._json("PUT", _path(cls, md.get("namespace"), md.get("name", ""), sub), raw))

    def update(self, obj: dict[str, Any] | KubeObject, subresource: str = "") -> KubeObject:
        return self._update(obj, subresource)

    def update_status(self, obj: dict[str, Any] | KubeObject) -> KubeObject:
        return self._update(obj, "status")

    def patch(self, kind: str, namespace: str, name: str, patch: Any,
              content_type: str = "application/merge-patch+json", subresource: str = "") -> KubeObject:
        cls = self._cls(kind)
        return cls.from_dict(self._json("PATCH", _path(cls, namespace, name, subresource), patch, content_type))

    def delete(self, kind: str, namespace: str, name: str, grace_period_seconds: int | None = None,
               uid: str | None = None, propagation_policy: str | None = None,
               resource_version: str | None = None) -> KubeObject | None:
        cls = self._cls(kind)
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy is not None:
            body["propagationPolicy"] = propagation_policy
        pre = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if pre:
            body["preconditions"] = pre
        d = self._json("DELETE", _path(cls, namespace, name), body)
        if isinstance(d, dict) and d.get("kind") == cls.KIND:
            return cls.from_dict(d)
        return None

    def bind(self, pod: Pod, node_name: str, annotations: dict[str, str] | None = None) -> None:
        md: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace}
        if pod.uid:
            md["uid"] = pod.uid
        if annotations:
            md["annotations"] = annotations
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": md, "target": {"kind": "Node", "name": node_name}}
        self._json("POST", _path(Pod, pod.namespace, pod.name, "binding"), body)

    def evict(self, namespace: str, name: str, grace_period_seconds: int | None = None) -> None:
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        if grace_period_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
        self._json("POST", _path(Pod, namespace, name, "eviction"), body)
