"""Reading the common kubeconfig without importing the official client.

``import kubernetes`` imports the whole package (its ``__init__`` loads the config loader, which
loads the API client and every generated model class through pydantic): about a third of a
second, a third of ``ksched run``'s start-up. Most kubeconfigs need none of that: a server, its
CA, a bearer token or a client certificate. This reads exactly those, with the official
loader's rules (``kubernetes/config/kube_config.py``: the context's cluster and user, file paths
relative to the kubeconfig's directory, ``*-data`` fields written to temporary files,
``tokenFile`` read once, ``insecure-skip-tls-verify``, ``tls-server-name``), into a
:class:`ClientConfig` with the attributes of ``kubernetes.client.Configuration`` that
``RestClient`` reads. A test loads the same kubeconfigs both ways and compares the results.

Anything else is left to the official loader (:func:`load` returns None): several files in
``KUBECONFIG``, exec credential plugins, auth providers (OIDC, GCP, Azure), basic auth, proxies,
impersonation, any key this module does not know, and every malformed kubeconfig (the official
loader then raises its own error).
"""

from __future__ import annotations

import atexit
import base64
import os
import tempfile
from typing import Any

__all__ = ["ClientConfig", "load"]

_CLUSTER_KEYS = frozenset({"server", "certificate-authority", "certificate-authority-data",
                           "insecure-skip-tls-verify", "tls-server-name"})
_USER_KEYS = frozenset({"token", "tokenFile", "client-certificate", "client-certificate-data", "client-key",
                        "client-key-data"})
_CONTEXT_KEYS = frozenset({"cluster", "user", "namespace"})

_temp_files: dict[bytes, str] = {}


class ClientConfig:
    """What ``RestClient`` reads of a ``kubernetes.client.Configuration``, with its defaults."""

    def __init__(self) -> None:
        self.host = "http://localhost"
        self.api_key: dict[str, str] = {}
        self.api_key_prefix: dict[str, str] = {}
        self.refresh_api_key_hook: Any = None
        self.username: str | None = None
        self.password: str | None = None
        self.verify_ssl = True
        self.ssl_ca_cert: str | None = None
        self.ca_cert_data: str | bytes | None = None
        self.cert_file: str | None = None
        self.key_file: str | None = None
        self.assert_hostname: bool | None = None
        self.tls_server_name: str | None = None
        self.retries: Any = None
        self.socket_options: Any = None
        self.connection_pool_maxsize: int | None = None
        self.proxy: str | None = None

    def auth_settings(self) -> dict[str, dict[str, Any]]:
        """As Configuration.auth_settings: the bearer token (with its prefix, if any) as the
        ``authorization`` header."""
        key = self.api_key.get("BearerToken", self.api_key.get("authorization"))
        if not key:
            return {}
        prefix = self.api_key_prefix.get("BearerToken", self.api_key_prefix.get("authorization"))
        return {"BearerToken": {"type": "api_key", "in": "header", "key": "authorization",
                                "value": f"{prefix} {key}" if prefix else key}}


def _cleanup() -> None:
    for name in _temp_files.values():
        try:
            os.remove(name)
        except OSError:
            pass
    _temp_files.clear()


def _temp_file(content: bytes) -> str:
    """A file holding ``content`` (one per distinct content, removed at exit), as the official
    loader writes ``*-data`` fields."""
    name = _temp_files.get(content)
    if name is not None and os.path.isfile(name):
        return name
    if not _temp_files:
        atexit.register(_cleanup)
    fd, name = tempfile.mkstemp()
    with os.fdopen(fd, "wb") as f:
        f.write(content)
    _temp_files[content] = name
    return name


class _Unsupported(Exception):
    """Not for this module: the official loader takes over."""


def _named(items: Any, name: Any, key: str) -> dict[str, Any] | None:
    """``[key]`` of the first entry of a kubeconfig list with ``name`` (the official merger keeps
    the first); None if there is none."""
    if not isinstance(items, list):
        raise _Unsupported
    for it in items:
        if not isinstance(it, dict) or "name" not in it:
            raise _Unsupported
        if it["name"] == name:
            v = it.get(key)
            if not isinstance(v, dict):
                raise _Unsupported
            return v
    return None


def _as_file(obj: dict[str, Any] | None, key: str, base: str) -> str | None:
    """FileOrData(obj, key).as_file(): the ``<key>-data`` field decoded into a temporary file,
    else the ``<key>`` path (relative to the kubeconfig's directory), which must exist."""
    if not obj:
        return None
    data_key = f"{key}-data"
    if data_key in obj:
        data = obj[data_key]
        if not data:
            return None
        if not isinstance(data, str | bytes):
            raise _Unsupported
        try:
            return _temp_file(base64.standard_b64decode(data))
        except ValueError as e:
            raise _Unsupported from e
    if key in obj:
        path = os.path.normpath(os.path.join(base, obj[key]))
        if not os.path.isfile(path):
            raise _Unsupported  # the official loader says "File does not exist"
        return path
    return None


def _kubeconfig_path(kubeconfig: str | None) -> str | None:
    spec = kubeconfig if kubeconfig is not None else os.environ.get("KUBECONFIG", "~/.kube/config")
    paths = [p for p in spec.split(os.pathsep) if p]
    if len(paths) != 1:
        return None  # several files are merged by the official loader
    path = os.path.expanduser(paths[0])
    return path if os.path.isfile(path) else None


def load(kubeconfig: str | None = None, context: str | None = None) -> ClientConfig | None:
    """The client configuration of ``kubeconfig`` (default: ``$KUBECONFIG``, else
    ``~/.kube/config``) and ``context`` (default: its current context), or None when the
    official loader must read it (see the module's docstring)."""
    path = _kubeconfig_path(kubeconfig)
    if path is None:
        return None
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        return _load(doc, path, context)
    except (_Unsupported, OSError, yaml.YAMLError, TypeError, AttributeError):
        return None


def _load(doc: Any, path: str, context: str | None) -> ClientConfig:
    if not isinstance(doc, dict):
        raise _Unsupported
    name = context if context is not None else doc.get("current-context")
    if not name:
        raise _Unsupported
    ctx = _named(doc.get("contexts"), name, "context")
    if ctx is None or not set(ctx) <= _CONTEXT_KEYS or not ctx.get("cluster"):
        raise _Unsupported
    cluster = _named(doc.get("clusters"), ctx["cluster"], "cluster")
    if cluster is None or not set(cluster) <= _CLUSTER_KEYS:
        raise _Unsupported
    user: dict[str, Any] | None = None
    if ctx.get("user") and doc.get("users"):
        user = _named(doc["users"], ctx["user"], "user")  # a missing user is no user, as upstream
        if user is not None and not set(user) <= _USER_KEYS:
            raise _Unsupported
    base = os.path.abspath(os.path.dirname(path))
    cfg = ClientConfig()
    if user:
        token = None
        if "token" in user:  # token wins over tokenFile, even empty
            token = user["token"]
        elif "tokenFile" in user:
            with open(os.path.normpath(os.path.join(base, user["tokenFile"])), encoding="utf-8") as f:
                token = f.read()
        if token:
            if not isinstance(token, str):
                raise _Unsupported
            cfg.api_key["BearerToken"] = f"Bearer {token}"
    if "server" in cluster:
        server = cluster["server"]
        if not isinstance(server, str):
            raise _Unsupported
        cfg.host = server.rstrip("/")
        if cfg.host.startswith("https"):
            cfg.ssl_ca_cert = _as_file(cluster, "certificate-authority", base)
            cfg.cert_file = _as_file(user, "client-certificate", base)
            cfg.key_file = _as_file(user, "client-key", base)
    if "insecure-skip-tls-verify" in cluster:
        cfg.verify_ssl = not cluster["insecure-skip-tls-verify"]
    if "tls-server-name" in cluster:
        cfg.tls_server_name = cluster["tls-server-name"]
    return cfg
