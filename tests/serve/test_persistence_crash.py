"""Persistence of ``ksched serve --data DIR`` (SQLite, WAL): a server killed with SIGKILL in the
middle of a stream of writes comes back with every write it acknowledged, and its
resourceVersion never goes backwards (not even behind what a watcher saw). In-process tests
pin the ordering that makes this hold: a change is durable before any watcher sees it, and a
change that cannot be persisted is not applied."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import Http, Proc, free_port, ksched_cmd, pod, subprocess_env, wait_http_ready

from ksched.apiserver.persistence import SqlitePersistence
from ksched.apiserver.store import Store

PODS = "/api/v1/namespaces/default/pods"


@contextlib.contextmanager
def serve(data: Path, tmp: Path, name: str) -> Iterator[tuple[Proc, Http]]:
    port = free_port()
    proc = Proc(ksched_cmd("serve", "--data", str(data), "--listen", f"127.0.0.1:{port}", "--no-scheduler",
                           "--no-kubelet"), tmp / f"{name}.log", subprocess_env(tmp), tmp)
    try:
        wait_http_ready(port, proc=proc)
        yield proc, Http("127.0.0.1", port)
    finally:
        proc.stop()


class Writer(threading.Thread):
    """Creates pods, relabels its earlier pods and deletes some, over one keep-alive connection;
    records what the server acknowledged."""

    def __init__(self, port: int, wid: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.wid = wid
        self.created: dict[str, int] = {}  # name -> rv acknowledged
        self.labels: dict[str, tuple[int, int]] = {}  # name -> (last acknowledged counter, its rv)
        self.deleted: set[str] = set()
        self.in_flight: tuple[str, str] | None = None  # (verb, name) when the connection broke
        self.max_rv = 0
        self.acks = 0
        self.stop = threading.Event()

    def _call(self, c: http.client.HTTPConnection, method: str, path: str, body: Any,
              ctype: str = "application/json") -> dict[str, Any]:
        c.request(method, path, body=json.dumps(body).encode(), headers={"Content-Type": ctype})
        r = c.getresponse()
        data = json.loads(r.read())
        assert r.status in (200, 201), (r.status, data)
        return data  # type: ignore[no-any-return]

    def run(self) -> None:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        i = 0
        try:
            while not self.stop.is_set():
                name = f"w{self.wid}-{i}"
                self.in_flight = ("create", name)
                obj = self._call(c, "POST", PODS, pod(name, labels={"n": "0"}))
                rv = int(obj["metadata"]["resourceVersion"])
                self.created[name] = rv
                self.acks += 1
                self.max_rv = max(self.max_rv, rv)
                if i % 2 == 1:
                    target = f"w{self.wid}-{i - 1}"
                    n = self.labels.get(target, (0, 0))[0] + 1
                    self.in_flight = ("label", target)
                    obj = self._call(c, "PATCH", f"{PODS}/{target}", {"metadata": {"labels": {"n": str(n)}}},
                                     "application/merge-patch+json")
                    rv = int(obj["metadata"]["resourceVersion"])
                    self.labels[target] = (n, rv)
                    self.acks += 1
                    self.max_rv = max(self.max_rv, rv)
                if i % 5 == 4:
                    target = f"w{self.wid}-{i - 2}"
                    self.in_flight = ("delete", target)
                    obj = self._call(c, "DELETE", f"{PODS}/{target}", {})
                    self.deleted.add(target)
                    self.acks += 1
                    self.max_rv = max(self.max_rv, int(obj["metadata"]["resourceVersion"]))
                self.in_flight = None
                i += 1
        except (OSError, http.client.HTTPException):
            pass  # the server died: the request in flight was not acknowledged
        finally:
            c.close()


class Watcher(threading.Thread):
    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.max_rv = 0
        self.events = 0

    def run(self) -> None:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request("GET", f"{PODS}?watch=1&resourceVersion=0")
            r = c.getresponse()
            while True:
                line = r.readline()
                if not line:
                    return
                if line.strip():
                    ev = json.loads(line)
                    self.max_rv = max(self.max_rv, int(ev["object"]["metadata"]["resourceVersion"]))
                    self.events += 1
        except (OSError, http.client.HTTPException, ValueError):
            pass
        finally:
            c.close()


def test_sigkill_during_writes_loses_no_acknowledged_write(tmp_path: Path) -> None:
    data = tmp_path / "data"
    writers: list[Writer] = []
    with serve(data, tmp_path, "first") as (proc, api):
        assert (data / "ksched.db").exists() and (data / "kubeconfig").exists()
        watcher = Watcher(api.port)
        watcher.start()
        writers = [Writer(api.port, w) for w in range(3)]
        for w in writers:
            w.start()
        deadline = time.monotonic() + 15
        while sum(w.acks for w in writers) < 600 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.p.pid, signal.SIGKILL)  # in the middle of the writes
        proc.p.wait(10)
        assert proc.p.returncode == -signal.SIGKILL
        for w in writers:
            w.join(10)
            assert not w.is_alive()
        watcher.join(10)
    acked = sum(w.acks for w in writers)
    assert acked >= 100, "too few writes before the kill to test anything"
    max_acked = max(w.max_rv for w in writers)

    with serve(data, tmp_path, "second") as (_, api):
        st, _, lst = api.get(PODS)
        assert st == 200
        list_rv = int(lst["metadata"]["resourceVersion"])
        stored = {i["metadata"]["name"]: i for i in lst["items"]}
        for w in writers:
            for name, rv in w.created.items():
                if name in w.deleted:
                    assert name not in stored, f"{name}: acknowledged deletion came back"
                    continue
                if w.in_flight == ("delete", name):
                    continue  # deleted or not: the deletion was never acknowledged
                assert name in stored, f"acknowledged create of {name} (rv {rv}) lost"
                got = stored[name]
                assert int(got["metadata"]["resourceVersion"]) >= rv
                n_acked, rv_acked = w.labels.get(name, (0, rv))
                n_now = int(got["metadata"]["labels"]["n"])
                in_flight_label = w.in_flight == ("label", name)
                assert n_now == n_acked or (in_flight_label and n_now == n_acked + 1), (name, n_now, n_acked)
                assert int(got["metadata"]["resourceVersion"]) >= rv_acked
        # Nothing the server never accepted appears (only the one request in flight per writer may).
        known = {n for w in writers for n in w.created} | {w.in_flight[1] for w in writers if w.in_flight}
        assert set(stored) <= known
        # The resourceVersion never goes backwards: not behind any acknowledged write, nor
        # behind anything a watcher saw.
        assert list_rv >= max_acked and list_rv >= watcher.max_rv
        assert watcher.events > 0
        st, _, obj = api.post(PODS, pod("after-restart"))
        assert st == 201 and int(obj["metadata"]["resourceVersion"]) > max(list_rv, watcher.max_rv)
        # Watch history did not survive the restart: older versions are Gone, the current one works.
        with api.stream(f"{PODS}?watch=1&resourceVersion={max_acked - 1}") as ws:
            ev = ws.next()
            assert ev is not None and ev["type"] == "ERROR" and ev["object"]["code"] == 410
        with api.stream(f"{PODS}?watch=1&resourceVersion={list_rv}&timeoutSeconds=1") as ws:
            evs = ws.rest()
            assert [e["object"]["metadata"]["name"] for e in evs] == ["after-restart"]
        # Default namespaces are still there (restored, not recreated).
        st, _, nsl = api.get("/api/v1/namespaces")
        assert {"default", "kube-system"} <= {i["metadata"]["name"] for i in nsl["items"]}


def test_clean_restart_keeps_everything(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve(data, tmp_path, "first") as (proc, api):
        assert api.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                                          "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}})[0] == 201
        assert api.post(PODS, pod("a"))[0] == 201
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a"}, "target": {"name": "n1"}}
        assert api.post(f"{PODS}/a/binding", body)[0] == 201
        assert api.post(PODS, pod("gone"))[0] == 201
        assert api.delete(f"{PODS}/gone")[0] == 200
        rv = int(api.get(PODS)[2]["metadata"]["resourceVersion"])
        assert proc.interrupt() == 0  # Ctrl-C: a clean stop
    with serve(data, tmp_path, "second") as (_, api):
        lst = api.get(PODS)[2]
        assert int(lst["metadata"]["resourceVersion"]) == rv  # the deletion's version too
        assert [(i["metadata"]["name"], i["spec"].get("nodeName")) for i in lst["items"]] == [("a", "n1")]
        # The binding conflict resolver's accounting was rebuilt: a pod that does not fit is refused.
        assert api.post(PODS, pod("big", cpu="2"))[0] == 201
        st, _, _ = api.post(f"{PODS}/big/binding", {"apiVersion": "v1", "kind": "Binding",
                                                   "metadata": {"name": "big"}, "target": {"name": "n1"}})
        assert st == 409


# ----------------------------------------------------------------------------- in-process


def test_writes_are_durable_before_any_watcher_sees_them(tmp_path: Path) -> None:
    store = Store()
    p = SqlitePersistence(tmp_path / "db.sqlite")
    p.attach(store)
    w = store.watch("Pod", resource_version=str(store.resource_version))
    seen_at_write: list[int] = []
    write = store.on_commit[-1]

    def checking(etype: str, kind: str, obj: Any, rv: int) -> None:
        seen_at_write.append(w.pending())
        write(etype, kind, obj, rv)

    store.on_commit[-1] = checking
    store.create(pod("a"))
    w.drain()
    store.patch("Pod", "default", "a", {"metadata": {"labels": {"x": "1"}}})
    w.drain()
    store.delete("Pod", "default", "a")
    assert seen_at_write == [0, 0, 0]
    assert len(w.drain()) == 1
    p.close()


def test_a_write_that_cannot_be_persisted_is_not_applied(tmp_path: Path) -> None:
    store = Store()
    p = SqlitePersistence(tmp_path / "db.sqlite")
    p.attach(store)
    store.create(pod("a"))
    w = store.watch("Pod", resource_version=str(store.resource_version))
    p.db.close()  # the database is gone (disk failure)
    with pytest.raises(sqlite3.Error):
        store.create(pod("b"))
    with pytest.raises(sqlite3.Error):
        store.patch("Pod", "default", "a", {"metadata": {"labels": {"x": "1"}}})
    assert store.try_get("Pod", "default", "b") is None
    assert store.get("Pod", "default", "a").labels == {}
    assert w.drain() == []


def test_reopened_database_restores_objects_and_version(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    s1 = Store()
    p1 = SqlitePersistence(db)
    p1.attach(s1)
    s1.create(pod("a"))
    s1.create(pod("b"))
    s1.delete("Pod", "default", "b")
    rv = s1.resource_version
    p1.close()
    s2 = Store()
    p2 = SqlitePersistence(db)
    p2.attach(s2)
    assert s2.resource_version == rv
    assert [o.name for o in s2.items("Pod")] == ["a"]
    assert s2.get("Pod", "default", "a").raw == s1.get("Pod", "default", "a").raw
    assert s2.create(pod("c")).resource_version == str(rv + 1)
    p2.close()
