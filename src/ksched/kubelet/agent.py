"""A background node agent for a live embedded cluster (``ksched serve``): runs the simulated
kubelet and finishes graceful deletions on the wall clock.

``hooks`` run in the agent's thread before each step (``ksched serve --scenario`` applies its
timeline there, so the kubelet's state is only ever touched from this thread);
``on_unnoticed`` is called after a step while a failed node still shows Ready (``serve`` wires
it to the node lifecycle controller's ``resync``, the hint a simulation gives it)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ksched.client.informer import InformerFactory
from ksched.kubelet.dradriver import DRADriver
from ksched.kubelet.evictionapi import EvictionConfig
from ksched.kubelet.fake import FakeKubelet

__all__ = ["NodeAgent"]


class NodeAgent:
    def __init__(self, client: Any, clock: Any, store: Any = None, interval: float = 0.1,
                 eviction_configs: list[EvictionConfig] | None = None,
                 on_unnoticed: Callable[[], None] | None = None) -> None:
        self.informers = InformerFactory(client)
        self.kubelet = FakeKubelet(client, self.informers, clock, eviction_configs=eviction_configs)
        self.dra_driver = DRADriver(client, self.informers, clock)
        self.store = store
        self.interval = interval
        self.hooks: list[Callable[[], Any]] = []
        self.on_unnoticed = on_unnoticed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step(self) -> None:
        self.informers.poll()
        for hook in self.hooks:
            hook()
        self.kubelet.step()
        self.dra_driver.step()
        if self.store is not None:
            self.store.finalize_expired()
        if self.on_unnoticed is not None and self.kubelet.heartbeats.unnoticed(self.kubelet.node):
            self.on_unnoticed()

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
