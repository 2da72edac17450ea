"""The virtual clock, and the store under concurrent writers (several scheduler instances)."""

from __future__ import annotations

import threading
import time

import pytest

from ksched.api.errors import Conflict
from ksched.apiserver.store import Store
from ksched.clock import DEFAULT_EPOCH, RealClock, VirtualClock


def test_virtual_clock() -> None:
    c = VirtualClock()
    assert c.virtual and c.now() == DEFAULT_EPOCH
    c.advance(1.5)
    assert c.now() == DEFAULT_EPOCH + 1.5
    with pytest.raises(ValueError):
        c.advance(-1)
    c.advance_to(DEFAULT_EPOCH)  # never backwards
    assert c.now() == DEFAULT_EPOCH + 1.5
    c.advance_to(DEFAULT_EPOCH + 10)
    assert c.now() == DEFAULT_EPOCH + 10
    assert VirtualClock(start=5).now() == 5.0


def test_real_clock() -> None:
    c = RealClock()
    assert not c.virtual
    assert abs(c.now() - time.time()) < 5


def test_concurrent_bindings_never_over_commit() -> None:
    st = Store(VirtualClock())
    st.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
               "status": {"allocatable": {"cpu": "10", "memory": "10Gi", "pods": "100"}}})
    for i in range(40):
        st.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default"},
                   "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}})
    ok: list[str] = []
    conflicts: list[str] = []
    lock = threading.Lock()

    def worker(names: list[str]) -> None:
        for n in names:
            try:
                st.bind("default", n, "n")
                with lock:
                    ok.append(n)
            except Conflict:
                with lock:
                    conflicts.append(n)

    threads = [threading.Thread(target=worker, args=([f"p{i}" for i in range(k, 40, 4)],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 10 and len(conflicts) == 30
    assert st.accounting.usage["n"].requested["cpu"] == 10_000
    assert sum(1 for p in st.items("Pod") if p.node_name) == 10  # type: ignore[attr-defined]


def test_concurrent_updates_with_resource_versions_lose_nothing() -> None:
    """Read-modify-write loops retrying on Conflict: every increment lands exactly once."""
    st = Store(VirtualClock())
    st.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "annotations": {"count": "0"}}})

    def bump(times: int) -> None:
        for _ in range(times):
            while True:
                n = st.get("Node", "", "n")
                raw = n.deepcopy_raw()
                raw["metadata"]["annotations"]["count"] = str(int(raw["metadata"]["annotations"]["count"]) + 1)
                try:
                    st.update(raw)
                    break
                except Conflict:
                    continue

    threads = [threading.Thread(target=bump, args=(25,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert st.get("Node", "", "n").annotations["count"] == "100"
