"""A ``ClusterClient`` over the Kubernetes REST API.

Configuration, authentication and TLS come from the official Kubernetes Python client
(kubeconfig with contexts, client certificates, bearer tokens, exec credential plugins,
in-cluster service accounts). Requests go straight through its urllib3 pool and responses are
parsed once from raw JSON into ``ksched.api`` objects: the generated model classes are never
used on the hot path. Watches stream in a background thread per watch.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections import deque
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

from ksched.api import errors as E
from ksched.api.apiextensions import CustomResourceDefinition
from ksched.api.kinds import UnknownKindError
from ksched.api.labels import FieldSelector, LabelSelector
from ksched.api.meta import KubeObject
from ksched.api.pod import Pod
from ksched.api.scheme import Scheme
from ksched.api.watch import WatchEvent

__all__ = ["RestClient", "RestWatch", "load_client_configuration"]

log = logging.getLogger(__name__)

POOL_MAXSIZE = 64

_ERRORS_BY_CODE: dict[int, type[E.ApiError]] = {
    400: E.BadRequest, 401: E.Unauthorized, 403: E.Forbidden, 404: E.NotFound, 405: E.MethodNotAllowed,
    410: E.Gone, 415: E.UnsupportedMediaType, 422: E.Invalid, 429: E.TooManyRequests,
}


def _api_error(status: int, body: bytes | str) -> E.ApiError:
    try:
        st = json.loads(body)
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
    """A kubernetes.client.Configuration from a kubeconfig (default locations too) or the
    in-cluster service account."""
    from kubernetes import config as kconfig
    from kubernetes.client import Configuration

    cfg = Configuration()
    if in_cluster or (in_cluster is None and kubeconfig is None and _in_cluster()):
        kconfig.load_incluster_config(client_configuration=cfg)
    else:
        kconfig.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    return cfg


def _in_cluster() -> bool:
    import os

    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token")


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


class RestWatch:
    """A watch stream read by a background thread; events are ksched.api objects."""

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

    def _run(self, url: str) -> None:

        try:
            try:
                resp = self.client._request("GET", url, stream=True,
                                            timeout=urllib3.Timeout(connect=10, read=None))
            except E.ApiError as e:  # the server refused the watch (400, 401, ...)
                self._error = e
                raise
            self._resp = resp
            self._started.set()
            if self.closed:  # stopped while the request was on its way
                return
            buf = b""
            for chunk in resp.stream(64 * 1024, decode_content=True):
                if self.closed:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if not line.strip():
                        continue
                    d = json.loads(line)
                    t = d.get("type")
                    o = d.get("object") or {}
                    if t == "ERROR":
                        self._error = _api_error(int(o.get("code") or 500), json.dumps(o))
                        self._push(WatchEvent("ERROR", None, 0))
                        return
                    md = o.get("metadata") or {}
                    rv = int(md.get("resourceVersion") or 0)
                    if t == "BOOKMARK":
                        self._push(WatchEvent("BOOKMARK", None, rv))
                    else:
                        self._push(WatchEvent(t, self.kind.from_dict(o), rv))
        except Exception as e:
            if not self.closed:
                log.debug("watch of %s ended: %s", self.kind.PLURAL, e)
        finally:
            # This thread alone closes the response and gives its (closed) connection back to the
            # pool, exactly once: a connection released twice would be handed to two requests.
            r = self._resp
            if r is not None:
                try:
                    r.close()
                    r.release_conn()
                except Exception:  # the connection may already be gone
                    pass
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
            # once (closing the response from here would wait for the reader's buffer lock, i.e.
            # for the next event) and closes and releases the response itself.
            sock = getattr(getattr(r, "connection", None), "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class RestClient:
    """ClusterClient over HTTP(S). ``configuration``: a kubernetes.client.Configuration."""

    def __init__(self, configuration: Any | None = None, *, kubeconfig: str | None = None,
                 context: str | None = None, field_manager: str = "ksched", timeout: float = 30.0,
                 scheme: Scheme | None = None) -> None:
        from kubernetes.client import ApiClient

        cfg = configuration if configuration is not None else load_client_configuration(kubeconfig, context)
        # One connection per binding worker (16) plus the long-lived watches: the default pool
        # (5 per CPU) would keep opening and discarding connections under load.
        cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, POOL_MAXSIZE)
        self.configuration = cfg
        self.api_client = ApiClient(cfg)
        self.pool = self.api_client.rest_client.pool_manager
        self.host = cfg.host.rstrip("/")
        self.field_manager = field_manager
        self.timeout = timeout
        # The kinds this client knows: the built-in ones, and the custom kinds registered by
        # :meth:`discover_custom_kinds`.
        self.scheme = scheme or Scheme()
        # Objects per page of a list (``limit``; the rest follow with ``continue``).
        self.page_size = 500

    # ---------------------------------------------------------------- transport

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        h = {"Accept": "application/json", "User-Agent": "ksched"}
        if content_type:
            h["Content-Type"] = content_type
        cfg = self.configuration
        if cfg.refresh_api_key_hook is not None:
            cfg.refresh_api_key_hook(cfg)
        for auth in cfg.auth_settings().values():
            if auth.get("in") == "header" and auth.get("value"):
                h[auth["key"]] = auth["value"]
        return h

    def _request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                 stream: bool = False, timeout: Any = None) -> Any:
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        try:
            resp = self.pool.request(method, self.host + path, body=data,
                                     headers=self._headers(content_type if data is not None else None),
                                     preload_content=not stream,
                                     timeout=timeout if timeout is not None else self.timeout)
        except (urllib3.exceptions.HTTPError, OSError) as e:
            # Connection refused or reset, timeouts: an API error like any other, so callers that
            # handle failed requests (bindings, status patches, events) handle these too.
            raise E.ServiceUnavailable(f"{method} {self.host}{path}: {e}") from e
        if resp.status >= 400:
            payload = resp.data if not stream else resp.read()
            raise _api_error(resp.status, payload)
        return resp

    def _json(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        resp = self._request(method, path, body, content_type)
        return json.loads(resp.data) if resp.data else None

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
        cls = self._cls(kind)
        items: list[KubeObject] = []
        cont = ""
        rv = ""
        while True:
            extra = {"limit": str(self.page_size)}
            if cont:
                extra["continue"] = cont
            d = self._json("GET", _path(cls, namespace) + self._query(label_selector, field_selector, extra))
            for it in d.get("items") or ():
                it.setdefault("apiVersion", cls.API_VERSION)
                it.setdefault("kind", cls.KIND)
                items.append(cls.from_dict(it))
            md = d.get("metadata") or {}
            rv = rv or str(md.get("resourceVersion") or "")
            cont = md.get("continue") or ""
            if not cont:
                return items, rv

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
