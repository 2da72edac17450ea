"""The ControllerManager (ksched.controllers.manager): which controllers a ``--controllers``
list selects, and ``settle`` -- deliver the watches' events and sync until nothing is left,
cheaply doing nothing when nothing changed, returning at once when re-entered, and retrying
a failed sync once the virtual clock reaches its backoff. A fake controller registered for
the test watches pods and records its syncs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from api_objects import mkpod
from ksched.api.errors import Conflict
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import EventHandler, InformerFactory
from ksched.clock import VirtualClock
from ksched.controllers.controller import Controller
from ksched.controllers.cronjob import CronJobController
from ksched.controllers.daemon import DaemonSetsController
from ksched.controllers.deployment import DeploymentController
from ksched.controllers.disruption import DisruptionController
from ksched.controllers.garbagecollector import GarbageCollector
from ksched.controllers.job import JobController
from ksched.controllers.manager import CONTROLLERS, ControllerManager, select_controllers
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


class Recording(Controller):
    """Queues the name of every pod added; its sync records the key, runs ``during_sync`` and
    raises Conflict (an ApiError) while ``failures[key]`` is positive."""

    name = "recording"

    def __init__(self, client: Any, informers: InformerFactory, clock: Any) -> None:
        super().__init__(client, informers, clock)
        self.synced: list[str] = []
        self.failures: dict[str, int] = {}
        self.during_sync: Callable[[str], None] | None = None
        informers.informer("Pod").add_handler(EventHandler(on_add=lambda p: self.queue.add(p.name)))

    def sync(self, key: Any) -> None:
        self.synced.append(key)
        if self.during_sync is not None:
            self.during_sync(key)
        if self.failures.get(key, 0) > 0:
            self.failures[key] -= 1
            raise Conflict(f"cannot sync {key}")


@pytest.fixture
def store(clock: VirtualClock) -> Store:
    """A plain store (not the embedded cluster's of tests/controllers/conftest.py): the only
    controllers are the test's."""
    return Store(clock)


@pytest.fixture
def manager(store: Store, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch) -> ControllerManager:
    """A manager running only the Recording controller (registered for the test)."""
    monkeypatch.setitem(CONTROLLERS, Recording.name, Recording)
    return ControllerManager(InProcessClient(store), clock, [Recording.name])


def recording(m: ControllerManager) -> Recording:
    c = m.controller(Recording.name)
    assert isinstance(c, Recording)
    return c


def count_polls(m: ControllerManager, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the manager's polls of its informers (one entry per call)."""
    calls: list[int] = []
    poll = m.informers.poll

    def counting() -> int:
        calls.append(1)
        return poll()

    monkeypatch.setattr(m.informers, "poll", counting)
    return calls


# ---------------------------------------------------------------- select_controllers


# Upstream's names of the controllers ksched has, in start order.
NAMES = ["persistentvolume-binder", "disruption", "garbage-collector", "namespace", "job", "cronjob",
         "ttl-after-finished", "pod-garbage-collector", "replicaset", "deployment", "statefulset", "daemonset",
         "serviceaccount", "resourcequota", "resourceclaim",
         "node-lifecycle-controller", "taint-eviction-controller"]
ALL_BUT_DISRUPTION = [n for n in NAMES if n != "disruption"]


@pytest.mark.parametrize(("spec", "want"), [
    (["*"], NAMES),
    (["disruption"], ["disruption"]),
    (["disruption", "persistentvolume-binder"], ["persistentvolume-binder", "disruption"]),  # start order
    (["deployment", "replicaset"], ["replicaset", "deployment"]),
    (["*", "-disruption"], ALL_BUT_DISRUPTION),
    (["-disruption", "*"], ALL_BUT_DISRUPTION),
    (["*", *(f"-{n}" for n in NAMES)], []),
    (["-disruption"], []),  # without "*" only the names given are on
    (["disruption", "-disruption"], []),
    ([" disruption ", "", "  "], ["disruption"]),
    ([], []),
])
def test_select_controllers(spec: list[str], want: list[str]) -> None:
    assert select_controllers(spec) == want


def test_the_registry_holds_upstreams_names_in_start_order() -> None:
    assert list(CONTROLLERS.items()) == [("persistentvolume-binder", PersistentVolumeController),
                                         ("disruption", DisruptionController),
                                         ("garbage-collector", GarbageCollector),
                                         ("namespace", NamespaceController),
                                         ("job", JobController),
                                         ("cronjob", CronJobController),
                                         ("ttl-after-finished", TTLAfterFinishedController),
                                         ("pod-garbage-collector", PodGCController),
                                         ("replicaset", ReplicaSetController),
                                         ("deployment", DeploymentController),
                                         ("statefulset", StatefulSetController),
                                         ("daemonset", DaemonSetsController),
                                         ("serviceaccount", ServiceAccountsController),
                                         ("resourcequota", ResourceQuotaController),
                                         ("resourceclaim", ResourceClaimController),
                                         ("node-lifecycle-controller", NodeLifecycleController),
                                         ("taint-eviction-controller", TaintEvictionController)]


@pytest.mark.parametrize("spec", [["nope"], ["-nope"], ["*", "-nope"], ["disruption", "Disruption"]])
def test_unknown_controller_names_are_refused(spec: list[str]) -> None:
    with pytest.raises(ValueError, match=r'unknown controller "(nope|Disruption)" \(known: '
                                         + ", ".join(NAMES) + r"\)"):
        select_controllers(spec)


def test_the_manager_builds_the_selected_controllers(store: Store, clock: VirtualClock) -> None:
    m = ControllerManager(InProcessClient(store), clock, ["disruption", "deployment", "replicaset"])
    assert [type(c) for c in m.controllers] == [DisruptionController, ReplicaSetController, DeploymentController]
    assert m.controller("disruption") is m.controllers[0]
    with pytest.raises(KeyError):
        m.controller("persistentvolume-binder")
    with pytest.raises(ValueError, match="unknown controller"):
        ControllerManager(InProcessClient(store), clock, ["nope"])


# ---------------------------------------------------------------- settle


def test_settle_syncs_what_the_watches_bring(manager: ControllerManager, store: Store) -> None:
    store.create(mkpod("a"))  # before the first settle: found by the informer's list
    c = recording(manager)
    assert manager.settle() == 1 and c.synced == ["a"]
    store.create(mkpod("b"))
    store.create(mkpod("c"))
    assert manager.settle() == 2 and c.synced == ["a", "b", "c"]


def test_settle_does_nothing_when_nothing_changed(manager: ControllerManager, store: Store,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    c = recording(manager)
    store.create(mkpod("a"))
    assert manager.settle() == 1
    polls = count_polls(manager, monkeypatch)
    for _ in range(3):
        assert manager.settle() == 0
    assert polls == [] and c.synced == ["a"]
    # A write the manager's watches carry makes the next settle look again.
    store.create(mkpod("b"))
    assert manager.settle() == 1
    assert polls and c.synced == ["a", "b"]
    n = len(polls)
    assert manager.settle() == 0 and len(polls) == n


def test_settle_without_controllers_is_a_no_op(store: Store, clock: VirtualClock) -> None:
    m = ControllerManager(InProcessClient(store), clock, [])
    assert m.controllers == []
    store.create(mkpod("a"))
    assert m.settle() == 0
    assert m.informers.informers == {} and m.next_wakeup() is None


def test_reentrant_settle_returns_at_once_and_the_outer_call_carries_on(
        manager: ControllerManager, store: Store) -> None:
    """As in a simulation: settle runs after every store write, so a controller's own write
    re-enters it. The inner calls return 0; the outer one syncs what that write caused."""
    c = recording(manager)
    inner: list[int] = []
    store.after_write.append(lambda: inner.append(manager.settle()))

    def create_child(key: str) -> None:
        if not key.endswith("-child"):
            store.create(mkpod(f"{key}-child"))

    c.during_sync = create_child
    store.create(mkpod("a"))  # settles (after_write): syncs a, whose write re-enters
    assert c.synced == ["a", "a-child"]
    assert inner == [0, 2]  # the child's creation inside the sync of a, then the outer call
    assert manager.settle() == 0


def test_a_failed_sync_is_retried_when_the_clock_reaches_its_backoff(
        manager: ControllerManager, store: Store, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    c = recording(manager)
    c.failures["a"] = 2
    store.create(mkpod("a"))
    t0 = clock.now()
    assert manager.settle() == 1 and c.synced == ["a"]
    assert manager.next_wakeup() == pytest.approx(t0 + 0.005)
    # Not due yet: nothing happens, and the watches are not even polled.
    polls = count_polls(manager, monkeypatch)
    clock.advance(0.004)
    assert manager.settle() == 0 and c.synced == ["a"] and polls == []
    clock.advance_to(manager.next_wakeup())  # type: ignore[arg-type]
    assert manager.settle() == 1 and c.synced == ["a", "a"]
    assert manager.next_wakeup() == pytest.approx(clock.now() + 0.01)  # failed again: 10 ms
    clock.advance_to(manager.next_wakeup())  # type: ignore[arg-type]
    assert manager.settle() == 1 and c.synced == ["a", "a", "a"]
    assert manager.next_wakeup() is None
    clock.advance(3600)
    assert manager.settle() == 0 and c.synced == ["a", "a", "a"]
