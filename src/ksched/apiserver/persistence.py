"""Persistence of the embedded store in SQLite (WAL): every committed write is in the database
before the store answers the client, so a crash (even SIGKILL) loses nothing acknowledged, and
the resourceVersion never goes backwards across restarts."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

from ksched.api.apiextensions import CustomResourceDefinition
from ksched.api.meta import KubeObject
from ksched.api.scheme import Scheme
from ksched.api.watch import DELETED
from ksched.apiserver.store import Store

__all__ = ["SqlitePersistence"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    rv INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (kind, key)
);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
"""


class SqlitePersistence:
    """``attach(store)`` loads what the database holds into the store, then records every
    commit. ``fsync=True`` makes each commit durable against power loss too (slower); the
    default survives process crashes."""

    def __init__(self, path: str | Path, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
        self.db.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def saved_resource_version(self) -> int:
        row = self.db.execute("SELECT v FROM meta WHERE k='rv'").fetchone()
        return int(row[0]) if row else 0

    def load(self) -> tuple[list[KubeObject], int]:
        """The saved objects (custom ones as the kinds their saved CRDs define) and version."""
        rows = [(kind, json.loads(data)) for kind, data in
                self.db.execute("SELECT kind, data FROM objects ORDER BY rv")]
        scheme = Scheme()
        for kind, raw in rows:
            if kind == CustomResourceDefinition.KIND:
                crd = CustomResourceDefinition.from_dict(raw)
                if crd.established:
                    scheme.add_crd(crd)
        objs: list[KubeObject] = []
        for kind, raw in rows:
            cls = scheme.resolve(kind)
            if cls is None:
                continue
            objs.append(cls.from_dict(raw))
        return objs, self.saved_resource_version()

    def attach(self, store: Store) -> None:
        objs, rv = self.load()
        if objs or rv:
            store.restore(objs, rv)
        else:
            # A fresh database: remember the objects the store starts with (default namespaces, ...).
            for cls in store.scheme.classes():
                for o in store.items(cls):
                    self._write("ADDED", cls.KIND_KEY, o, store.resource_version)
        store.on_commit.append(self._write)

    def _write(self, etype: str, kind: str, obj: KubeObject, rv: int) -> None:
        with self._lock:
            cur = self.db.cursor()
            cur.execute("BEGIN")
            if etype == DELETED:
                cur.execute("DELETE FROM objects WHERE kind=? AND key=?", (kind, obj.key))
            else:
                cur.execute("INSERT OR REPLACE INTO objects(kind, key, rv, data) VALUES (?,?,?,?)",
                            (kind, obj.key, rv, json.dumps(obj.raw, separators=(",", ":"))))
            cur.execute("INSERT OR REPLACE INTO meta(k, v) VALUES ('rv', ?)", (str(rv),))
            cur.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self.db.close()
