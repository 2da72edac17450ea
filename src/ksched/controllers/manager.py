"""The embedded cluster's kube-controller-manager: builds the selected controllers on one
client with their own shared informers (a separate set from the scheduler's, as upstream's
processes each have theirs), and drives them one of two ways:

* :meth:`ControllerManager.settle` -- single-threaded, for ``ksched simulate``: deliver what the
  watches hold and sync until no controller has work left. The simulation calls it after
  every write to the store, so controllers react before the writer continues: controller
  latency is zero on the virtual clock, and runs stay deterministic for a seed.
* :meth:`ControllerManager.start` -- a background thread, for ``ksched serve``: reflectors in
  their own threads, handlers and syncs in the manager's thread, on the wall clock.

``controllers`` takes kube-controller-manager's ``--controllers`` syntax: ``*`` for every
controller on by default, ``name`` to add one, ``-name`` to leave one out.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ksched.client.informer import InformerFactory
from ksched.clock import Clock
from ksched.controllers.controller import Controller
from ksched.controllers.cronjob import CronJobController
from ksched.controllers.daemon import DaemonSetsController
from ksched.controllers.deployment import DeploymentController
from ksched.controllers.disruption import DisruptionController
from ksched.controllers.garbagecollector import GarbageCollector
from ksched.controllers.job import JobController
from ksched.controllers.namespace import NamespaceController
from ksched.controllers.nodelifecycle import NodeLifecycleController
from ksched.controllers.podgc import PodGCController
from ksched.controllers.replicaset import ReplicaSetController
from ksched.controllers.resourceclaim import ResourceClaimController
from ksched.controllers.resourcequota import ResourceQuotaController
from ksched.controllers.serviceaccount import ServiceAccountsController
from ksched.controllers.statefulset import StatefulSetController
from ksched.controllers.tainteviction import TaintEvictionController
from ksched.controllers.ttlafterfinished import TTLAfterFinishedController
from ksched.controllers.volume.persistentvolume import PersistentVolumeController

__all__ = ["CONTROLLERS", "ControllerManager", "select_controllers"]

log = logging.getLogger(__name__)

# Upstream's names, in the order they are started. In a single-threaded settle the earlier
# controllers' keys go first: a ReplicaSet's status is current before its Deployment syncs.
CONTROLLERS: dict[str, type[Controller]] = {c.name: c for c in (
    PersistentVolumeController, DisruptionController, GarbageCollector, NamespaceController, JobController,
    CronJobController, TTLAfterFinishedController, PodGCController)}
CONTROLLERS.update({c.name: c for c in (ReplicaSetController, DeploymentController, StatefulSetController,
                                         DaemonSetsController)})
CONTROLLERS.update({c.name: c for c in (ServiceAccountsController, ResourceQuotaController, ResourceClaimController)})
CONTROLLERS.update({c.name: c for c in (NodeLifecycleController, TaintEvictionController)})


def select_controllers(spec: Iterable[str]) -> list[str]:
    """Names enabled by a ``--controllers`` list (``*``, ``name``, ``-name``), in start order."""
    items = [s.strip() for s in spec if s.strip()]
    for s in items:
        name = s.lstrip("-")
        if name != "*" and name not in CONTROLLERS:
            raise ValueError(f'unknown controller "{name}" (known: {", ".join(CONTROLLERS)})')
    star = "*" in items
    return [n for n in CONTROLLERS if f"-{n}" not in items and (star or n in items)]


class ControllerManager:
    """The selected controllers on one client, with their shared informers."""

    # A settle that does not end is a controller fighting itself (or another): give up loudly.
    MAX_SETTLE_ROUNDS = 1_000_000

    def __init__(self, client: Any, clock: Clock, controllers: Iterable[str] = ("*",)) -> None:
        self.client = client
        self.clock = clock
        self.informers = InformerFactory(client)
        # Set by the watches as events arrive: a settle with nothing new and nothing due is a
        # flag check, so running it after every write costs nothing measurable.
        self._dirty = True
        self.informers.notify = self._changed
        self.controllers: list[Controller] = [CONTROLLERS[n](client, self.informers, clock)
                                              for n in select_controllers(controllers)]
        self._settling = False
        self._held = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def controller(self, name: str) -> Controller:
        for c in self.controllers:
            if c.name == name:
                return c
        raise KeyError(name)

    def _changed(self) -> None:
        self._dirty = True
        if self._thread is not None or not self._wake.is_set():
            # Single-threaded, nobody waits on the event: setting it once is enough (a set()
            # takes the event's lock, and this runs on every watch event).
            self._wake.set()

    # ---------------------------------------------------------------- single-threaded

    @contextlib.contextmanager
    def held(self, settle: Callable[[], bool] | None = None) -> Iterator[None]:
        """Settle nothing inside the block, then settle once (when ``settle`` says so, if given):
        the controllers start on everything written meanwhile, as kube-controller-manager's start
        after their informers synced (a simulation loading a dump of a cluster: a Deployment must
        not make a new ReplicaSet before the dumped one is loaded)."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
        if not self._held and (settle is None or settle()):
            self.settle()

    def settle(self) -> int:
        """Deliver the watches' events and sync until nothing is left to do now. Re-entrant
        calls (a controller's own write) return at once: the outer call carries on. Returns
        the keys synced."""
        if self._settling or self._held or not self.controllers:
            return 0
        if not self._dirty:
            due = self.next_wakeup()
            if due is None or due > self.clock.now():
                return 0
        self._settling = True
        synced = 0
        try:
            for _ in range(self.MAX_SETTLE_ROUNDS):
                self._dirty = False
                self.informers.poll()
                n = 0
                for c in self.controllers:
                    # One key at a time across controllers, delivering events in between: each
                    # sync sees every write made before it, as the store-side controllers did.
                    n += c.process(1)
                    if n:
                        break
                if not n:
                    return synced
                synced += n
            log.error("controllers did not settle after %d syncs", self.MAX_SETTLE_ROUNDS)
            return synced
        finally:
            self._settling = False

    def next_wakeup(self) -> float | None:
        """When the next delayed sync is due (a simulation advances its clock to it)."""
        times = [t for c in self.controllers if (t := c.next_wakeup()) is not None]
        return min(times) if times else None

    # ---------------------------------------------------------------- threaded

    def start(self) -> None:
        """Run in a background thread until :meth:`stop`."""
        if not self.controllers or self._thread is not None:
            return
        self.informers.start()

        def run() -> None:
            while not self._stop.is_set():
                self._wake.clear()
                try:
                    self.informers.process()
                    # Every controller gets its turn each round: a busy one starves no other.
                    busy = sum(c.process(64) for c in self.controllers) > 0
                except Exception:  # a handler's bug must not stop the controllers
                    log.exception("controller manager: processing events crashed")
                    busy = False
                if busy:
                    continue
                nxt = self.next_wakeup()
                timeout = 1.0 if nxt is None else max(0.0, min(1.0, nxt - self.clock.now()))
                self._wake.wait(timeout)

        self._thread = threading.Thread(target=run, name="controller-manager", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        self.informers.stop()
