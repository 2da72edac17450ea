"""Helpers for the ``ksched serve`` / ``ksched run`` tests: free ports, a tiny HTTP client for the
REST front, watch-stream readers, manifests, and starting/stopping ksched subprocesses."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Http:
    """JSON over HTTP(S) to one server; every call answers (status, headers, parsed body)."""

    def __init__(self, host: str, port: int, *, token: str | None = None,
                 ssl_context: ssl.SSLContext | None = None, timeout: float = 10.0) -> None:
        self.host = host
        self.port = port
        self.token = token
        self.ssl_context = ssl_context
        self.timeout = timeout

    def conn(self, timeout: float | None = None) -> http.client.HTTPConnection:
        t = self.timeout if timeout is None else timeout
        if self.ssl_context is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=t, context=self.ssl_context)
        return http.client.HTTPConnection(self.host, self.port, timeout=t)

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(extra or {})
        return h

    def request(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
                headers: dict[str, str] | None = None, raw: bytes | None = None) -> tuple[int, Any, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        h = self.headers(headers)
        if data is not None:
            h["Content-Type"] = content_type
        c = self.conn()
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            payload = r.read()
            try:
                parsed = json.loads(payload) if payload else None
            except ValueError:
                parsed = payload.decode(errors="replace")
            return r.status, r.headers, parsed
        finally:
            c.close()

    def get(self, path: str, **kw: Any) -> tuple[int, Any, Any]:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any, Any]:
        return self.request("POST", path, body, **kw)

    def put(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any, Any]:
        return self.request("PUT", path, body, **kw)

    def patch(self, path: str, body: Any, content_type: str, **kw: Any) -> tuple[int, Any, Any]:
        return self.request("PATCH", path, body, content_type=content_type, **kw)

    def delete(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any, Any]:
        return self.request("DELETE", path, body, **kw)

    @contextlib.contextmanager
    def stream(self, path: str, *, timeout: float = 10.0,
               headers: dict[str, str] | None = None) -> Iterator[WatchReader]:
        c = self.conn(timeout)
        try:
            c.request("GET", path, headers=self.headers(headers))
            r = c.getresponse()
            yield WatchReader(r)
        finally:
            c.close()


class WatchReader:
    """Reads a watch stream line by line (one JSON event per line)."""

    def __init__(self, resp: http.client.HTTPResponse) -> None:
        self.resp = resp
        self.status = resp.status

    def next(self) -> dict[str, Any] | None:
        """The next event; None once the server has ended the stream."""
        while True:
            line = self.resp.readline()
            if not line:
                return None
            if line.strip():
                return json.loads(line)  # type: ignore[no-any-return]

    def until(self, pred: Callable[[dict[str, Any]], bool], limit: int = 1000) -> list[dict[str, Any]]:
        """Events up to and including the first that satisfies ``pred``."""
        out: list[dict[str, Any]] = []
        for _ in range(limit):
            ev = self.next()
            if ev is None:
                raise AssertionError(f"the stream ended before the expected event; got {out}")
            out.append(ev)
            if pred(ev):
                return out
        raise AssertionError("no matching event")

    def rest(self) -> list[dict[str, Any]]:
        out = []
        while (ev := self.next()) is not None:
            out.append(ev)
        return out


def pod(name: str, ns: str = "default", labels: dict[str, str] | None = None, cpu: str = "100m",
        **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx",
                                         "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
    s.update(spec)
    md: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": s}


def node(name: str, labels: dict[str, str] | None = None, cpu: str = "4", memory: str = "8Gi",
         pods: str = "110") -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    md: dict[str, Any] = {"name": name}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "Node", "metadata": md,
            "status": {"capacity": dict(alloc), "allocatable": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                       "nodeInfo": {"kubeletVersion": "v1.36.0", "osImage": "Ubuntu 24.04",
                                    "kernelVersion": "6.8.0", "containerRuntimeVersion": "containerd://2.0"}}}


# ------------------------------------------------------------------------- subprocesses


def ksched_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "ksched.cli.main", *args]


def subprocess_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = str(home)  # kubectl's discovery cache and config stay in the test's directory
    env.pop("KUBECONFIG", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Proc:
    """A child process that is always ended (SIGKILL as a last resort) by ``stop()``."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str], cwd: Path) -> None:
        self.cmd = cmd
        self.log_path = log
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.p = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=cwd)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.p.poll() is None

    def wait_log(self, text: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            if not self.alive():
                raise AssertionError(f"{self.cmd} exited with {self.p.returncode}:\n{self.log()}")
            time.sleep(0.05)
        raise AssertionError(f"{self.cmd}: no {text!r} within {timeout}s:\n{self.log()}")

    def interrupt(self, timeout: float = 15.0) -> int:
        """Ctrl-C; the exit code."""
        self.p.send_signal(signal.SIGINT)
        return self.p.wait(timeout)

    def kill(self) -> None:
        if self.alive():
            self.p.kill()
        self.p.wait(10)

    def stop(self) -> None:
        try:
            if self.alive():
                self.p.terminate()
                try:
                    self.p.wait(5)
                except subprocess.TimeoutExpired:
                    self.p.kill()
                    self.p.wait(5)
        finally:
            self._log.close()


def wait_http_ready(port: int, timeout: float = 20.0, proc: Proc | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                c.close()
                return
            c.close()
        except OSError:
            pass
        if proc is not None and not proc.alive():
            raise AssertionError(f"server exited with {proc.p.returncode}:\n{proc.log()}")
        time.sleep(0.05)
    raise AssertionError(f"nothing answered on 127.0.0.1:{port} within {timeout}s")


def wait_for(pred: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or pred}")
        time.sleep(interval)
