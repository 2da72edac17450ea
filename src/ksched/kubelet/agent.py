"""A background node agent for a live embedded cluster (``ksched serve``): runs the simulated
kubelet and finishes graceful deletions on the wall clock."""

from __future__ import annotations

import threading
from typing import Any

from ksched.client.informer import InformerFactory
from ksched.kubelet.dradriver import DRADriver
from ksched.kubelet.fake import FakeKubelet

__all__ = ["NodeAgent"]


class NodeAgent:
    def __init__(self, client: Any, clock: Any, store: Any = None, interval: float = 0.1) -> None:
        self.informers = InformerFactory(client)
        self.kubelet = FakeKubelet(client, self.informers, clock)
        self.dra_driver = DRADriver(client, self.informers, clock)
        self.store = store
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step(self) -> None:
        self.informers.poll()
        self.kubelet.step()
        self.dra_driver.step()
        if self.store is not None:
            self.store.finalize_expired()

    def start(self) -> None:
        def run() -> None:
            while not self._stop.is_set():
                self.step()
                self._stop.wait(self.interval)

        self._thread = threading.Thread(target=run, name="node-agent", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
