"""The embedded cluster's control plane on one clock: the API store, an in-process client to
it, and kube-controller-manager's controllers.

``synchronous=True`` (``ksched simulate``, the in-process benchmark, tests): the controllers run
after every write to the store, before the writer continues, in the writer's thread -- zero
controller latency on the virtual clock, deterministic for a seed. ``synchronous=False``
(``ksched serve``): :meth:`start` runs them in a background thread on the wall clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import Clock
from ksched.controllers.manager import ControllerManager

__all__ = ["EmbeddedCluster"]


class EmbeddedCluster:
    def __init__(self, clock: Clock, *, controllers: Iterable[str] = ("*",), synchronous: bool = True,
                 **store_options: Any) -> None:
        self.clock = clock
        self.store = Store(clock, **store_options)
        self.client = InProcessClient(self.store)
        self.controllers = ControllerManager(self.client, clock, controllers)
        self.synchronous = synchronous
        if synchronous:
            self.store.after_write.append(self.controllers.settle)
            self.controllers.settle()  # list, so the first write is seen as a change

    def start(self) -> None:
        if not self.synchronous:
            self.controllers.start()

    def stop(self) -> None:
        if not self.synchronous:
            self.controllers.stop()

    def next_wakeup(self) -> float | None:
        """The next time something is due without any write (a controller's delayed sync)."""
        return self.controllers.next_wakeup()
