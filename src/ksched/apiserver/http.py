"""The embedded store behind a Kubernetes-compatible REST API (aiohttp), for kubectl and remote
schedulers: CRUD, list with selectors and pagination, watch streams with bookmarks and
timeouts, the three patch types, pods/binding|status|eviction, the scale subresource,
discovery, server-side Tables, Status errors as kube-apiserver returns them. Binds to loopback
unless told otherwise; off loopback it requires TLS and a bearer token."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import ssl
import threading
import time
from typing import Any

from aiohttp import web

import ksched
from ksched.aioserver import BackgroundServer
from ksched.api.apiextensions import CustomObject
from ksched.api.errors import (
    ApiError,
    BadRequest,
    FieldError,
    Gone,
    Invalid,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    RequestEntityTooLarge,
    Unauthorized,
    UnsupportedMediaType,
)
from ksched.api.jsoncodec import dumps
from ksched.api.labels import SelectorError, parse_field_selector, parse_label_selector
from ksched.api.meta import KubeObject
from ksched.api.watch import BOOKMARK, WatchEvent
from ksched.apiserver import auth, discovery, protobuf
from ksched.apiserver.deletion import DeleteOptions, optional_int
from ksched.apiserver.fieldvalidation import (
    FieldValidator,
    directive,
    duplicate_fields,
    loads_with_duplicates,
    plain,
    warning_header,
)
from ksched.apiserver.openapi import OpenAPIDocuments, ServedResource
from ksched.apiserver.openapi_proto import PROTOBUF_CONTENT_TYPE, PROTOBUF_MIME
from ksched.apiserver.store import Store
from ksched.apiserver.tables import to_table

__all__ = ["ApiServer", "is_loopback"]

log = logging.getLogger(__name__)

_TABLE_ACCEPT = "as=Table"
# kube-apiserver's limit on a request body (--max-request-bytes... of the write path: 3 MiB), and
# etcd's on one stored value (1.5 MiB).
MAX_REQUEST_BYTES = 3 * 1024 * 1024
MAX_OBJECT_BYTES = 1536 * 1024
# The group/version a request addresses (custom kinds are served at several).
_API_VERSION = web.RequestKey("ksched_api_version", str)
_PATCH_TYPES = ("application/merge-patch+json", "application/json-patch+json",
                "application/strategic-merge-patch+json")


class ResourceVersionTooLarge(ApiError):
    """504 Timeout for a resourceVersion the server has not reached (upstream's
    storage.NewTooLargeResourceVersionError, after the watch cache gave up waiting)."""

    code = 504
    reason = "Timeout"

    def __init__(self, rv: int, current: int) -> None:
        super().__init__(f"Too large resource version: {rv}, current: {current}", retry_after=1,
                         causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}])


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _status_ok(details: dict[str, Any] | None = None, code: int = 200) -> dict[str, Any]:
    st: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
    if details:
        st["details"] = details
    return st


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=dumps(data), status=status,
                        content_type="application/json")


def _error(e: ApiError) -> web.Response:
    headers = {}
    if e.retry_after is not None:
        headers["Retry-After"] = str(e.retry_after)
    return web.Response(body=json.dumps(e.status()).encode(), status=e.code, content_type="application/json",
                        headers=headers)


def _bool(v: str | None) -> bool:
    return v is not None and v.lower() in ("1", "true", "yes")


def _object(v: Any, what: str) -> dict[str, Any]:
    """An optional JSON object in a request body ({} when absent); anything else is a 400."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise BadRequest(f"{what} must be a JSON object")
    return v


class ApiServer:
    """The HTTP front of a Store. ``start()`` serves from a background thread (tests, ``serve``)."""

    def __init__(self, store: Store, host: str = "127.0.0.1", port: int = 6443, *, token: str | None = None,
                 ssl_context: ssl.SSLContext | None = None, bookmark_interval: float = 60.0,
                 allow_insecure_remote: bool = False) -> None:
        if not is_loopback(host) and not allow_insecure_remote and (ssl_context is None or not token):
            raise ValueError(f"listening on {host} (not loopback) requires TLS and a bearer token")
        self.store = store
        self.host = host
        self.port = port
        self.token = token
        self.ssl_context = ssl_context
        self.bookmark_interval = bookmark_interval
        self._server: BackgroundServer | None = None
        self._open_watches: set[Any] = set()  # watch streams being served
        self.field_validator = FieldValidator()
        self.openapi = OpenAPIDocuments(lambda: discovery.served_kinds(self.store.scheme),
                                        status_subresource=lambda k: discovery.has_status_subresource(k,
                                                                                                      self.store.scheme),
            extra=[ServedResource(f"{g}/{v}", k, p) for (g, v, p), k in auth.RESOURCES.items()])
        self.app = self._make_app()

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    # ---------------------------------------------------------------- lifecycle

    def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth_middleware], client_max_size=MAX_REQUEST_BYTES)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    @property
    def _thread(self) -> threading.Thread | None:
        """The serving thread (None before ``start()``)."""
        return self._server.thread if self._server is not None else None

    def start(self) -> None:
        """Serve from a background thread; returns once the socket listens."""
        self._server = BackgroundServer(self.app, self.host, self.port, self.ssl_context, "apiserver")
        self._server.start()
        self.port = self._server.port

    def stop(self) -> None:
        # End the watch streams first: a handler waiting for the next event (up to a bookmark
        # interval) would otherwise hold the shutdown until the server's join times out.
        for w in list(self._open_watches):
            w.stop()
        if self._server is not None:
            self._server.stop()

    def warm_up(self, kinds: list[type[KubeObject]] | None = None) -> None:
        """Build now what the first write of each of ``kinds`` (default: every served kind) would
        otherwise build while every other request waits: the field-validation schema (the first
        one reads the official client's model sources, about half a second). kube-apiserver has
        its OpenAPI models ready before it serves; a benchmark timing a client against this
        server calls this first, so that it times the client and not the server's first write."""
        for cls in kinds if kinds is not None else discovery.served_kinds(self.store.scheme):
            if not issubclass(cls, CustomObject):  # (a custom kind's schema is its CRD's, per version)
                self.field_validator.problems(cls, {})

    def wait(self) -> None:
        """Block until stopped."""
        if self._server is not None:
            self._server.wait()

    # ---------------------------------------------------------------- middleware

    @web.middleware
    async def _auth_middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.token is not None and request.path not in ("/healthz", "/readyz", "/livez"):
            # As kube-apiserver's bearer token authenticator: the scheme in any case ("bearer" is
            # what the official Python client sends from a service-account token file).
            scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
            if scheme.lower() != "bearer" or token != self.token:
                return _error(Unauthorized("Unauthorized"))
        try:
            return await handler(request)  # type: ignore[no-any-return]
        except ApiError as e:
            return _error(e)
        except web.HTTPException:
            raise
        except Exception as e:
            log.exception("internal error serving %s %s", request.method, request.path)
            from ksched.api.errors import InternalError

            return _error(InternalError(f"Internal error occurred: {e}"))

    # ---------------------------------------------------------------- routing

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if path == "/version":
            return _json({"major": "1", "minor": "36", "gitVersion": f"v1.36.0-ksched.{ksched.__version__}",
                          "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "",
                          "compiler": "ksched", "platform": "python"})
        if path == "/api":
            return _json(discovery.api_versions(f"{self.host}:{self.port}"))
        if path == "/apis":
            return _json(discovery.api_group_list(self.store.scheme))
        if path == "/openapi/v2" or path == "/openapi/v3" or path.startswith("/openapi/v3/"):
            return self._openapi(request, path)
        segs = [s for s in path.split("/") if s]
        if segs[0] == "api" and len(segs) >= 2:
            group, version, rest = "", segs[1], segs[2:]
        elif segs[0] == "apis" and len(segs) >= 2:
            if len(segs) == 2:
                g = discovery.api_group(segs[1], self.store.scheme)
                if g is None:
                    raise NotFound("the server could not find the requested resource")
                return _json(g)
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise NotFound("the server could not find the requested resource")
        if not rest:
            lst = discovery.api_resource_list(group, version, self.store.scheme)
            if lst is None:
                raise NotFound("the server could not find the requested resource")
            return _json(lst)
        watch_path = False
        if rest[0] == "watch":
            watch_path = True
            rest = rest[1:]
        namespace = ""
        if rest and rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace = rest[1]
            rest = rest[2:]
        if not rest:
            raise NotFound("the server could not find the requested resource")
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3:
            raise NotFound("the server could not find the requested resource")
        review = auth.review_resource(group, version, plural)
        if review is not None and not namespace and not name and not watch_path:
            if request.method != "POST":
                raise MethodNotAllowed("the server does not allow this method on the requested resource")
            if request.headers.get("Content-Type", "").startswith(auth.PROTOBUF):
                body = auth.decode_protobuf_review(review, await request.read())
            else:
                body = await self._body(request)
            return _json(auth.create_review(group, version, review, body), 201)
        if (group, plural) == ("", "bindings"):
            return await self._binding(request, namespace, "")
        cls = discovery.resolve_resource(group, version, plural, self.store.scheme)
        if cls is None:
            raise NotFound(f"the server could not find the requested resource (resource {plural!r})")
        # The version asked for (a custom kind may be served at several; objects are stored in one).
        request[_API_VERSION] = f"{group}/{version}" if group else version
        if cls.NAMESPACED is False and namespace:
            raise NotFound("the server could not find the requested resource")
        m = request.method
        if sub:
            return await self._subresource(request, cls, namespace, name, sub)
        if watch_path or (m == "GET" and not name and _bool(request.query.get("watch"))):
            return await self._watch(request, cls, namespace, name)
        if m == "GET":
            return self._get(request, cls, namespace, name) if name else self._list(request, cls, namespace)
        if m == "POST" and not name:
            return await self._create(request, cls, namespace)
        if m == "PUT" and name:
            return await self._update(request, cls, namespace, name, "")
        if m == "PATCH" and name:
            return await self._patch(request, cls, namespace, name, "")
        if m == "DELETE" and name:
            return await self._delete(request, cls, namespace, name)
        if m == "DELETE":
            return await self._delete_collection(request, cls, namespace)
        raise MethodNotAllowed("the server does not allow this method on the requested resource")

    # ---------------------------------------------------------------- openapi

    def _openapi(self, request: web.Request, path: str) -> web.Response:
        """``/openapi/v2`` (JSON), ``/openapi/v3`` (the index) and ``/openapi/v3/<api|apis/group>/<version>``,
        as kube-openapi's handlers: an ETag (304 on If-None-Match), and for a v3 document asked
        for by another ``hash`` a 301 to the current one."""
        if path == "/openapi/v3":
            return _json(self.openapi.v3_index())
        ctype = "application/json"
        if path == "/openapi/v2":
            accept = request.headers.get("Accept", "")
            body, pb, etag = self.openapi.v2()
            if PROTOBUF_MIME in accept:
                body, ctype = pb, PROTOBUF_CONTENT_TYPE
            elif accept and "json" not in accept and "*/*" not in accept:
                raise NotAcceptable(f"the server can answer /openapi/v2 as application/json or {PROTOBUF_MIME}, "
                                    f"not {accept!r}")
        else:
            parts = path[len("/openapi/v3/"):].split("/")
            doc = None
            if parts[0] == "api" and len(parts) == 2:
                doc = self.openapi.v3("", parts[1])
            elif parts[0] == "apis" and len(parts) == 3:
                doc = self.openapi.v3(parts[1], parts[2])
            if doc is None:
                raise NotFound("the server could not find the requested resource")
            body, etag = doc
            asked = request.query.get("hash")
            if asked and asked != etag:
                raise web.HTTPMovedPermanently(f"{path}?hash={etag}")
        headers = {"ETag": f'"{etag}"', "Vary": "Accept"}
        if request.query.get("hash"):
            headers["Cache-Control"] = "public, immutable"
        if request.headers.get("If-None-Match") == f'"{etag}"':
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, headers={**headers, "Content-Type": ctype})

    # ---------------------------------------------------------------- helpers

    @staticmethod
    async def _body(request: web.Request) -> Any:
        """The parsed body; JSON objects are :class:`~ksched.apiserver.fieldvalidation.Pairs`
        (their duplicate keys are known). Over 3 MiB is a 413, as kube-apiserver."""
        too_large = RequestEntityTooLarge(f"Request entity too large: limit is {MAX_REQUEST_BYTES}")
        if (request.content_length or 0) > MAX_REQUEST_BYTES:
            raise too_large
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge as e:
            raise too_large from e
        if not raw:
            return None
        ctype = request.headers.get("Content-Type", "application/json").split(";")[0].strip()
        if ctype == protobuf.CONTENT_TYPE:
            return protobuf.decode_object(raw)  # client-go's typed clients (kubectl create job, run, ...)
        try:
            if ctype in ("application/yaml", "application/apply-patch+yaml"):
                import yaml

                return yaml.safe_load(raw)
            return loads_with_duplicates(raw)
        except (ValueError, Exception) as e:
            raise BadRequest(f"the request body is not valid JSON: {e}") from e

    @staticmethod
    def _check_size(obj: Any) -> None:
        if len(json.dumps(obj, separators=(",", ":"))) > MAX_OBJECT_BYTES:
            raise RequestEntityTooLarge("etcdserver: request is too large")

    @staticmethod
    def _wants_table(request: web.Request) -> bool:
        return _TABLE_ACCEPT in request.headers.get("Accept", "")

    @staticmethod
    def _selectors(request: web.Request) -> tuple[Any, Any]:
        try:
            ls = parse_label_selector(request.query.get("labelSelector", ""))
            fs = parse_field_selector(request.query.get("fieldSelector", ""))
        except SelectorError as e:
            raise BadRequest(f"unable to parse requirement: {e}") from e
        return (ls if not ls.is_empty() else None), (fs if not fs.is_empty() else None)

    def _check_body(self, body: Any, cls: type[KubeObject], namespace: str, name: str | None,
                    request: web.Request | None = None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        kind = body.get("kind")
        if kind is None:
            body["kind"] = cls.KIND
        elif kind != cls.KIND:
            raise BadRequest(f'the kind "{kind}" of the object does not match the resource '
                             f'"{cls.PLURAL}" (kind "{cls.KIND}")')
        av = body.get("apiVersion")
        expected = self._api_version(cls, request)
        if av is not None and av != expected:
            raise BadRequest(f'the API version "{av}" of the object does not match "{expected}"')
        body.setdefault("apiVersion", expected)
        md = body.get("metadata")
        if md is None:
            md = body["metadata"] = {}
        if not isinstance(md, dict):
            raise Invalid.of(cls.KIND, name or "", [FieldError("metadata", "must be an object")])
        if name is not None:
            if md.get("name") and md["name"] != name:
                raise BadRequest("the name of the object does not match the name on the URL")
            md["name"] = name
        if cls.NAMESPACED and namespace:
            if md.get("namespace") and md["namespace"] != namespace:
                raise BadRequest("the namespace of the provided object does not match the namespace sent on the "
                                 "request")
            md["namespace"] = namespace
        return body

    def _schema_kind(self, cls: type[KubeObject], request: web.Request) -> Any:
        """What field validation judges a body by: the kind, or for a custom kind its schema at
        the version asked for."""
        if isinstance(cls, type) and issubclass(cls, CustomObject):
            return cls.schema_view(self._api_version(cls, request).rpartition("/")[2])
        return cls

    def _has_status(self, cls: type[KubeObject], request: web.Request) -> bool:
        """Whether ``<resource>/status`` is served at the version asked for (a custom kind has it
        at the versions whose CRD entry declares it)."""
        if isinstance(cls, type) and issubclass(cls, CustomObject):
            return self._api_version(cls, request).rpartition("/")[2] in cls.STATUS_VERSIONS
        return True

    @staticmethod
    def _api_version(cls: type[KubeObject], request: web.Request | None = None) -> str:
        """The group/version a request addresses (a custom kind's may differ from its storage's)."""
        av = request.get(_API_VERSION) if request is not None else None
        return str(av) if av else cls.API_VERSION

    @staticmethod
    def _out(request: web.Request, raw: dict[str, Any]) -> dict[str, Any]:
        """The object at the version asked for (custom kinds convert with strategy None: only
        ``apiVersion`` differs)."""
        av = request.get(_API_VERSION)
        if av and raw.get("apiVersion") != av and "/" in str(av) and "/" in str(raw.get("apiVersion", "")) and \
                str(raw.get("apiVersion")).rpartition("/")[0] == str(av).rpartition("/")[0]:
            return {**raw, "apiVersion": av}
        return raw

    def _render(self, request: web.Request, obj: KubeObject, status: int = 200,
                warnings: list[str] | None = None) -> web.Response:
        if self._wants_table(request):
            resp = _json(to_table(obj.KIND, [obj], self.store.now(), obj.resource_version,
                                  include_object=request.query.get("includeObject", "Metadata")), status)
        else:
            resp = _json(self._out(request, obj.raw), status)
        for w in warnings or ():
            resp.headers.add("Warning", warning_header(w))
        return resp

    # ---------------------------------------------------------------- verbs

    def _get(self, request: web.Request, cls: type[KubeObject], namespace: str, name: str) -> web.Response:
        return self._render(request, self.store.get(cls, namespace, name))

    def _list(self, request: web.Request, cls: type[KubeObject], namespace: str) -> web.Response:
        ls, fs = self._selectors(request)
        try:
            limit = int(request.query.get("limit", "0") or 0)
        except ValueError as e:
            raise BadRequest("limit must be an integer") from e
        limit = max(limit, 0)  # a negative limit asks for everything, as upstream's storage reads it
        self._check_list_resource_version(request)
        items, rv, cont = self.store.list(cls, namespace or None, ls, fs, limit,
                                          request.query.get("continue", ""))
        if self._wants_table(request):
            return _json(to_table(cls.KIND, items, self.store.now(), str(rv), cont,
                                  request.query.get("includeObject", "Metadata")))
        md: dict[str, Any] = {"resourceVersion": str(rv)}
        if cont:
            md["continue"] = cont
        return _json({"kind": f"{cls.KIND}List", "apiVersion": self._api_version(cls, request), "metadata": md,
                      "items": [self._out(request, o.raw) for o in items]})

    def _validated(self, request: web.Request, cls: type[KubeObject], body: dict[str, Any]) -> tuple[Any, list[str]]:
        """fieldValidation on a create/update body: the plain body to store and the warnings."""
        warnings = self.field_validator.check_body(self._schema_kind(cls, request), body, directive(request.query.get("fieldValidation")))
        body = plain(body)
        self._check_size(body)
        return body, warnings

    def _check_list_resource_version(self, request: web.Request, *, watch: bool = False) -> None:
        """``resourceVersion`` and ``resourceVersionMatch`` as upstream's ListOptions validation and
        watch cache: not a number is 400; ``resourceVersionMatch`` needs a resourceVersion, is
        NotOlderThan or Exact (not Exact with 0) and is not for watches; a version the server
        has not reached is 504 Timeout (ResourceVersionTooLarge); Exact of an older one is 410."""
        q = request.query
        rv_s = q.get("resourceVersion", "")
        match = q.get("resourceVersionMatch", "")
        rv: int | None = None
        if rv_s:
            try:
                rv = int(rv_s)
            except ValueError:
                rv = -1
            if rv < 0:
                raise BadRequest(f'resourceVersion: Invalid value: "{rv_s}": must be a non-negative integer')
        if q.get("sendInitialEvents"):
            if not watch:
                raise BadRequest("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")
            if match != "NotOlderThan":
                raise BadRequest('resourceVersionMatch: Forbidden: sendInitialEvents requires setting '
                                 'resourceVersionMatch to NotOlderThan')
        elif match:
            if watch:
                raise BadRequest("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch")
            if not rv_s:
                raise BadRequest("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
                                 "resourceVersion is provided")
            if match not in ("NotOlderThan", "Exact"):
                raise BadRequest(f'resourceVersionMatch: Unsupported value: "{match}": supported values: '
                                 f'"Exact", "NotOlderThan", ""')
            if match == "Exact" and rv == 0:
                raise BadRequest('resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
                                 'resourceVersion "0"')
        current = self.store.resource_version
        if rv is not None and rv > current:
            raise ResourceVersionTooLarge(rv, current)
        if match == "Exact" and rv is not None and rv < current:
            raise Gone(f"too old resource version: {rv} ({current})")

    async def _create(self, request: web.Request, cls: type[KubeObject], namespace: str) -> web.Response:
        body = self._check_body(await self._body(request), cls, namespace, None, request)
        if request.query.get("dryRun") == "All":
            raise BadRequest("dryRun is not supported by ksched")
        body, warnings = self._validated(request, cls, body)
        obj = self.store.create(body, owned=True)
        return self._render(request, obj, 201, warnings)

    async def _update(self, request: web.Request, cls: type[KubeObject], namespace: str, name: str,
                      sub: str) -> web.Response:
        body = self._check_body(await self._body(request), cls, namespace, name, request)
        body, warnings = self._validated(request, cls, body)
        obj = self.store.update(body, sub)
        return self._render(request, obj, warnings=warnings)

    async def _patch(self, request: web.Request, cls: type[KubeObject], namespace: str, name: str,
                     sub: str) -> web.Response:
        ctype = request.headers.get("Content-Type", "").split(";")[0].strip()
        if ctype == "application/apply-patch+yaml":
            raise UnsupportedMediaType("server-side apply is not supported by ksched; use client-side apply "
                                       "(kubectl apply without --server-side)")
        if ctype not in _PATCH_TYPES:
            raise UnsupportedMediaType(f'the body of the request was in an unknown format - accepted media types '
                                       f'include: {", ".join(_PATCH_TYPES)}')
        mode = directive(request.query.get("fieldValidation"))
        body = await self._body(request)
        duplicates = duplicate_fields(body) if ctype != _PATCH_TYPES[1] else []
        body = plain(body)
        warnings: list[str] = []

        def check(old: dict[str, Any], new: dict[str, Any]) -> None:
            warnings.extend(self.field_validator.check_patched(self._schema_kind(cls, request), old, new, mode, duplicates))
            self._check_size(new)

        obj = self.store.patch(cls, namespace, name, body, ctype, sub, check=check)
        return self._render(request, obj, warnings=warnings)

    async def _delete_options(self, request: web.Request) -> DeleteOptions:
        """DeleteOptions from the body and the query (gracePeriodSeconds, propagationPolicy,
        orphanDependents), as kubectl and client libraries send them."""
        body = _object(await self._body(request), "DeleteOptions")
        if request.query.get("dryRun") == "All" or "All" in (body.get("dryRun") or ()):
            raise BadRequest("dryRun is not supported by ksched")
        opts = DeleteOptions.parse(body, request.query)
        opts.validate()
        return opts

    async def _delete(self, request: web.Request, cls: type[KubeObject], namespace: str, name: str) -> web.Response:
        opts = await self._delete_options(request)
        obj = self.store.delete(cls, namespace, name, options=opts)
        return _json(self._out(request, obj.raw))

    async def _delete_collection(self, request: web.Request, cls: type[KubeObject], namespace: str) -> web.Response:
        ls, fs = self._selectors(request)
        opts = await self._delete_options(request)
        opts.uid = opts.resource_version = None  # preconditions name one object, not a collection
        items, _, _ = self.store.list(cls, namespace or None, ls, fs)
        for o in items:
            try:
                self.store.delete(cls, o.namespace, o.name, options=opts)
            except NotFound:
                pass
        return _json(_status_ok())

    async def _binding(self, request: web.Request, namespace: str, name: str) -> web.Response:
        body = await self._body(request)
        if not isinstance(body, dict):
            raise BadRequest("a Binding must be a JSON object")
        md = _object(body.get("metadata"), "metadata")
        pod_name = name or md.get("name") or ""
        if name and md.get("name") and md["name"] != name:
            raise BadRequest("the name of the Binding does not match the pod name on the URL")
        target = _object(body.get("target"), "target")
        node = target.get("name") or ""
        uid = (md.get("uid") or None)
        self.store.bind(namespace or md.get("namespace") or "default", pod_name, node, uid=uid,
                        annotations=md.get("annotations") or None)
        return _json(_status_ok(code=201), 201)

    async def _subresource(self, request: web.Request, cls: type[KubeObject], namespace: str, name: str,
                           sub: str) -> web.StreamResponse:
        m = request.method
        if cls.KIND == "Pod" and sub == "binding" and m == "POST":
            return await self._binding(request, namespace, name)
        if cls.KIND == "Pod" and sub == "eviction" and m == "POST":
            body = _object(await self._body(request), "an Eviction")
            opts = _object(body.get("deleteOptions"), "deleteOptions")
            self.store.evict(namespace, name, optional_int(opts.get("gracePeriodSeconds"), "gracePeriodSeconds"))
            return _json(_status_ok(code=201), 201)
        if cls.KIND == "Namespace" and sub == "finalize" and m == "PUT":
            return await self._update(request, cls, namespace, name, "finalize")
        if sub == "scale" and cls.SCALE_SUBRESOURCE:
            if m == "GET":
                return _json(self.store.get_scale(cls, namespace, name))
            if m == "PUT":
                return _json(self.store.update_scale(cls, namespace, name, plain(await self._body(request))))
            if m == "PATCH":
                ctype = request.headers.get("Content-Type", "").split(";")[0].strip()
                if ctype not in _PATCH_TYPES:
                    raise UnsupportedMediaType(f'the body of the request was in an unknown format - accepted media '
                                               f'types include: {", ".join(_PATCH_TYPES)}')
                return _json(self.store.patch_scale(cls, namespace, name, plain(await self._body(request)), ctype))
        if sub == "status" and self._has_status(cls, request):
            if m == "GET":
                return self._get(request, cls, namespace, name)
            if m == "PUT":
                return await self._update(request, cls, namespace, name, "status")
            if m == "PATCH":
                return await self._patch(request, cls, namespace, name, "status")
        raise NotFound(f"the server could not find the requested resource ({cls.PLURAL}/{sub})")

    # ---------------------------------------------------------------- watch

    def _event_json(self, request: web.Request, ev: WatchEvent, table: bool, kind: str, api_version: str) -> bytes:
        if ev.type == BOOKMARK:
            obj: dict[str, Any] = {"kind": kind, "apiVersion": api_version,
                                   "metadata": {"resourceVersion": str(ev.resource_version)}}
        else:
            assert ev.object is not None
            obj = self._out(request, ev.object.raw)
            if table:
                obj = to_table(kind, [ev.object], self.store.now(), ev.object.resource_version,
                               include_object=request.query.get("includeObject", "Metadata"))
        return dumps({"type": ev.type, "object": obj}) + b"\n"

    async def _watch(self, request: web.Request, cls: type[KubeObject], namespace: str,
                     name: str) -> web.StreamResponse:
        q = request.query
        ls, fs = self._selectors(request)
        if name:
            fs = parse_field_selector(f"metadata.name={name}")
        rv = q.get("resourceVersion", "")
        bookmarks = _bool(q.get("allowWatchBookmarks"))
        send_initial = _bool(q.get("sendInitialEvents"))
        timeout_s = optional_int(q.get("timeoutSeconds"), "timeoutSeconds")
        deadline = time.monotonic() + timeout_s if timeout_s else None
        table = self._wants_table(request)
        # A malformed or future resourceVersion is answered before the stream starts (a plain
        # Status); an expired one is the stream's only event, as kube-apiserver's watch cache.
        self._check_list_resource_version(request, watch=True)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json",
                                                       "Transfer-Encoding": "chunked"})
        try:
            await resp.prepare(request)
        except ConnectionResetError:
            return resp  # the client went away before the stream started: nothing to serve
        try:
            w = self.store.watch(cls, namespace or None, rv, ls, fs, bookmarks=bookmarks)
        except ApiError as e:
            try:
                await resp.write(json.dumps({"type": "ERROR", "object": e.status()}).encode() + b"\n")
                await resp.write_eof()
            except ConnectionResetError:
                pass
            return resp
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def notify() -> None:
            # Called by the store (any thread) as events arrive. Once the server's loop is gone
            # (stopped while this stream was starting), nobody reads the stream: close it
            # rather than fail the store write that produced the event.
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:
                w.notify = None
                w.stop()

        w.notify = notify
        self._open_watches.add(w)
        kind = cls.KIND
        api_version = self._api_version(cls, request)
        initial_pending = send_initial and rv in ("", "0")
        next_bookmark = time.monotonic() + self.bookmark_interval
        try:
            while True:
                evs = w.drain()
                if evs:
                    chunk = b"".join(self._event_json(request, ev, table, kind, api_version) for ev in evs)
                    await resp.write(chunk)
                if initial_pending:
                    initial_pending = False
                    mark = {"type": BOOKMARK, "object": {
                        "kind": kind, "apiVersion": api_version,
                        "metadata": {"resourceVersion": str(self.store.resource_version),
                                     "annotations": {"k8s.io/initial-events-end": "true"}}}}
                    await resp.write(json.dumps(mark).encode() + b"\n")
                if w.closed:
                    break
                now = time.monotonic()
                if bookmarks and now >= next_bookmark:
                    await resp.write(self._event_json(request, WatchEvent(BOOKMARK, None, self.store.resource_version),
                                                      False, kind, api_version))
                    next_bookmark = now + self.bookmark_interval
                wait = next_bookmark - now if bookmarks else 30.0
                if deadline is not None:
                    if now >= deadline:
                        break
                    wait = min(wait, deadline - now)
                wake.clear()
                if w.pending():
                    continue
                try:
                    await asyncio.wait_for(wake.wait(), timeout=max(0.01, wait))
                except TimeoutError:
                    pass
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._open_watches.discard(w)
            w.notify = None
            w.stop()
        try:
            await resp.write_eof()
        except ConnectionResetError:
            pass
        return resp

