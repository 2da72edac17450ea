"""The dispatcher: spreads pending pods over the live scheduler instances.

Driven by two informers (pods; instance Leases), over any ``ClusterClient``. For each pending
pod of the managed schedulerNames that is not dispatched to a live instance, it picks one and
records it on the pod (annotation ``ksched.io/instance``, a merge patch with the pod's
resourceVersion as precondition, so a pod bound or changed meanwhile is never re-dispatched on
stale information):

* the instances the policy allows for the pod (instance labels against pod labels and
  namespace; partition from the pod's nodeSelector);
* the instance already holding another pod of the pod's group (label ``ksched.io/group``, same
  namespace), so a group stays together;
* otherwise the least-loaded one: fewest dispatched pods not yet bound (ties in turn).

Pods are dispatched highest priority first, and a pod is patched only once no patch for a pod
of higher priority is in flight: every instance sees a pod of higher priority dispatched before
any pod of lower priority, which is what its :class:`~ksched.dispatch.instance.PriorityBarrier`
needs to keep one scheduler's priority order across instances.

An instance is alive while its Lease is held and renewed: a lease first seen is trusted until
``renewTime + leaseDurationSeconds``; after that, each observed renewal extends it by
``leaseDurationSeconds`` from the moment it is observed (as client-go's leader election does,
so clock skew between machines does not matter). When an instance dies (lease expired,
released or deleted), its pending pods are dispatched again; bound pods keep their
annotation. Pods that no live instance may take wait, not dispatched (the annotation naming a
dead instance is removed, so no instance waits for them), until one appears.

``step()`` is single-threaded and deterministic (tests, simulation); ``run(stop)`` runs the
informers in the background.
"""

from __future__ import annotations

import logging
import queue as _queue
import threading
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ksched.api.errors import ApiError, Conflict, NotFound
from ksched.api.labels import LabelSelector
from ksched.api.lease import Lease
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.clock import Clock, RealClock
from ksched.dispatch.instance import (
    DEFAULT_LEASE_NAMESPACE,
    GROUP_LABEL,
    INSTANCE_ANNOTATION,
    ROLE_LABEL,
    ROLE_VALUE,
    InstanceInfo,
    instance_from_lease,
)
from ksched.dispatch.policy import DispatchPolicy
from ksched.stepping import run_until_idle

__all__ = ["Dispatcher"]

log = logging.getLogger(__name__)


def _unwrap(obj: Any) -> Any:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _rv(obj: Any) -> int | None:
    try:
        return int(obj.resource_version)
    except (TypeError, ValueError):
        return None


class _Todo:
    """The pods to (re)dispatch: highest priority first, then in arrival order."""

    __slots__ = ("_bands", "_priority")

    def __init__(self) -> None:
        self._bands: dict[int, dict[str, None]] = {}
        self._priority: dict[str, int] = {}

    def add(self, key: str, priority: int) -> None:
        if key in self._priority:
            return  # keeps its place
        self._priority[key] = priority
        self._bands.setdefault(priority, {})[key] = None

    def discard(self, key: str) -> bool:
        prio = self._priority.pop(key, None)
        if prio is None:
            return False
        band = self._bands[prio]
        del band[key]
        if not band:
            del self._bands[prio]
        return True

    def ordered(self, limit: int | None = None) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for prio in sorted(self._bands, reverse=True):
            for key in self._bands[prio]:
                if limit is not None and len(out) >= limit:
                    return out
                out.append((key, prio))
        return out

    def __contains__(self, key: object) -> bool:
        return key in self._priority

    def __len__(self) -> int:
        return len(self._priority)


class Dispatcher:
    def __init__(self, client: Any, *, scheduler_names: Iterable[str] = ("default-scheduler",),
                 policy: DispatchPolicy | None = None, namespace: str = DEFAULT_LEASE_NAMESPACE,
                 clock: Clock | None = None, informers: InformerFactory | None = None, workers: int = 8) -> None:
        self.client = client
        self.scheduler_names = frozenset(scheduler_names)
        self.policy = policy or DispatchPolicy()
        self.namespace = namespace
        self.clock: Clock = clock or RealClock()
        self.informers = informers or InformerFactory(client)
        self.instances: dict[str, InstanceInfo] = {}
        self._expiry: dict[str, float] = {}
        self._live: frozenset[str] = frozenset()
        # Pending (unbound, not terminal, not being deleted) pods of the managed schedulerNames.
        self.pending: dict[str, Pod] = {}
        self._by_instance: dict[str, set[str]] = {}  # annotation value -> pending pod keys
        self._groups: dict[tuple[str, str], dict[str, str]] = {}  # (ns, group) -> pod key -> instance
        self._todo = _Todo()  # pending pods to (re)dispatch
        self.waiting: dict[str, None] = {}  # pods no live instance may take
        self._turn = 0
        self._failed = False
        # Patches sent and not yet answered: pod key -> instance (counted in its load meanwhile).
        self._inflight: dict[str, str] = {}
        self._inflight_load: dict[str, int] = {}
        self._inflight_priority: Counter[int] = Counter()
        self.workers = max(1, workers)
        self._executor: ThreadPoolExecutor | None = None
        self._completed: _queue.SimpleQueue[tuple[str, str, str, str, Any]] = _queue.SimpleQueue()
        self.dispatched = 0
        self.redispatched = 0
        self.released = 0  # pods of dead instances no live one may take, annotation removed
        self.patch_conflicts = 0
        self.api_failures = 0
        self._wake = threading.Event()
        pods = self.informers.informer("Pod")
        pods.add_handler(EventHandler(self._on_pod, lambda old, new: self._on_pod(new), self._on_pod_delete))
        leases = self.informers.informer(
            "Lease", namespace=namespace, label_selector=LabelSelector.from_dict({"matchLabels": {ROLE_LABEL: ROLE_VALUE}}))
        leases.add_handler(EventHandler(self._on_lease, lambda old, new: self._on_lease(new), self._on_lease_delete))

    # ---------------------------------------------------------------- views

    def load(self, instance: str) -> int:
        """Pods dispatched to ``instance`` and not yet bound (with the patches in flight)."""
        return len(self._by_instance.get(instance, ())) + self._inflight_load.get(instance, 0)

    def live_instances(self, now: float | None = None) -> list[InstanceInfo]:
        if now is None:
            return [self.instances[n] for n in sorted(self._live) if n in self.instances]
        return [self.instances[n] for n in sorted(self.instances) if self._expiry.get(n, 0.0) > now]

    def next_expiry(self) -> float | None:
        t = self.clock.now()
        future = [e for n, e in self._expiry.items() if e > t and n in self._live]
        return min(future) if future else None

    # ---------------------------------------------------------------- pods

    def _managed(self, pod: Pod) -> bool:
        return pod.scheduler_name in self.scheduler_names

    def _on_pod(self, pod: Pod) -> None:
        key = pod.key
        old = self.pending.get(key)
        if old is not None:
            a, b = _rv(old), _rv(pod)
            if a is not None and b is not None and b < a:
                return  # older than what we wrote ourselves
            self._unindex(key, old)
        self._index_group(pod)
        if (self._managed(pod) and not pod.node_name and not pod.is_terminal
                and pod.deletion_timestamp is None):
            self.pending[key] = pod
            inst = pod.annotations.get(INSTANCE_ANNOTATION, "")
            if inst:
                self._by_instance.setdefault(inst, set()).add(key)
            self.waiting.pop(key, None)
            if inst and inst in self._live:
                self._todo.discard(key)
            else:
                self._todo.add(key, pod.priority)
        else:
            self.pending.pop(key, None)
            self._todo.discard(key)
            self.waiting.pop(key, None)
        self._wake.set()

    def _on_pod_delete(self, obj: Any) -> None:
        pod = _unwrap(obj)
        key = pod.key
        old = self.pending.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        self._todo.discard(key)
        self.waiting.pop(key, None)
        g = pod.labels.get(GROUP_LABEL)
        if g:
            members = self._groups.get((pod.namespace, g))
            if members is not None:
                members.pop(key, None)
                if not members:
                    del self._groups[(pod.namespace, g)]

    def _unindex(self, key: str, pod: Pod) -> None:
        inst = pod.annotations.get(INSTANCE_ANNOTATION, "")
        if inst:
            s = self._by_instance.get(inst)
            if s is not None:
                s.discard(key)
                if not s:
                    del self._by_instance[inst]

    def _index_group(self, pod: Pod) -> None:
        g = pod.labels.get(GROUP_LABEL)
        if not g or not self._managed(pod):
            return
        members = self._groups.setdefault((pod.namespace, g), {})
        members[pod.key] = pod.annotations.get(INSTANCE_ANNOTATION, "")

    # ---------------------------------------------------------------- instances

    def _on_lease(self, lease: Lease) -> None:
        info = instance_from_lease(lease)
        if info is None:
            return
        prev = self.instances.get(info.name)
        self.instances[info.name] = info
        now = self.clock.now()
        if info.released:
            self._expiry[info.name] = 0.0
        elif prev is None or prev.released:
            # First sight (or re-acquired): trust the renewTime the lease carries.
            renew = info.renew_time if info.renew_time is not None else now
            self._expiry[info.name] = min(renew, now) + info.lease_duration
        elif prev.resource_version != info.resource_version:
            self._expiry[info.name] = now + info.lease_duration
        self._wake.set()

    def _on_lease_delete(self, obj: Any) -> None:
        info = instance_from_lease(_unwrap(obj))
        if info is None:
            return
        self.instances.pop(info.name, None)
        self._expiry.pop(info.name, None)
        self._wake.set()

    def _refresh_live(self) -> None:
        now = self.clock.now()
        live = frozenset(n for n, e in self._expiry.items() if e > now)
        if live == self._live:
            return
        died = self._live - live
        born = live - self._live
        self._live = live
        for name in sorted(died):
            keys = sorted(self._by_instance.get(name, ()))
            if keys:
                log.info("instance %s is gone: re-dispatching its %d pending pod(s)", name, len(keys))
            for k in keys:
                self._want(k)
        if born:
            log.info("instance(s) %s alive", ", ".join(sorted(born)))
            for k in list(self.waiting):
                self._want(k)
            self.waiting.clear()

    def _want(self, key: str) -> None:
        pod = self.pending.get(key)
        if pod is not None:
            self._todo.add(key, pod.priority)

    # ---------------------------------------------------------------- choosing

    def choose(self, pod: Pod, live: list[InstanceInfo]) -> InstanceInfo | None:
        """The instance for ``pod`` among ``live`` ones, or None if none may take it."""
        eligible = self.policy.eligible(pod, live)
        if not eligible:
            return None
        g = pod.labels.get(GROUP_LABEL)
        if g:
            members = self._groups.get((pod.namespace, g), {})
            counts: dict[str, int] = {}
            for k, inst in members.items():
                if k != pod.key and inst:
                    counts[inst] = counts.get(inst, 0) + 1
            names = {i.name for i in eligible}
            held = sorted((-c, n) for n, c in counts.items() if n in names)
            if held:
                best = held[0][1]
                return next(i for i in eligible if i.name == best)
        low = min(self.load(i.name) for i in eligible)
        ties = [i for i in eligible if self.load(i.name) == low]
        pick = ties[self._turn % len(ties)]
        self._turn += 1
        return pick

    def _dispatch_one(self, key: str, live: list[InstanceInfo]) -> None:
        if key in self._inflight:
            return  # decided again once its patch is answered
        pod = self.pending.get(key)
        if pod is None:
            return
        cur = pod.annotations.get(INSTANCE_ANNOTATION, "")
        if cur and cur in self._live:
            return
        target = self.choose(pod, live)
        if target is None:
            self.waiting[key] = None
            if not cur:
                return
            name = ""  # left by a dead instance: remove the annotation, no instance waits for it
        else:
            name = target.name
            self._inflight_load[name] = self._inflight_load.get(name, 0) + 1
            g = pod.labels.get(GROUP_LABEL)
            if g:
                self._groups.setdefault((pod.namespace, g), {})[key] = name
        self._inflight[key] = name
        self._inflight_priority[pod.priority] += 1
        rv = pod.resource_version
        if self._executor is None:
            self._complete(key, name, cur, rv, pod.priority, self._patch(pod, name))
            return
        fut = self._executor.submit(self._patch, pod, name)
        prio = pod.priority

        def done(f: Any, key: str = key, name: str = name, cur: str = cur, rv: str = rv) -> None:
            self._completed.put((key, name, cur, rv, prio, f.result()))
            self._wake.set()

        fut.add_done_callback(done)

    def _patch(self, pod: Pod, instance: str) -> Any:
        """The patched pod (``instance`` empty: the annotation removed), or the ApiError the
        server answered."""
        patch = {"metadata": {"resourceVersion": pod.resource_version,
                              "annotations": {INSTANCE_ANNOTATION: instance or None}}}
        try:
            return self.client.patch("Pod", pod.namespace, pod.name, patch, "application/merge-patch+json")
        except ApiError as e:
            return e

    def _complete(self, key: str, name: str, cur: str, rv: str, priority: int, result: Any) -> None:
        """A patch answered. ``rv``: the version of the pod it was sent against."""
        self._inflight.pop(key, None)
        left = self._inflight_load.get(name, 0) - 1
        if left > 0:
            self._inflight_load[name] = left
        else:
            self._inflight_load.pop(name, None)
        self._inflight_priority[priority] -= 1
        if self._inflight_priority[priority] <= 0:
            del self._inflight_priority[priority]
        if isinstance(result, Pod):
            if not name:
                self.released += 1
                log.info("%s: no live instance may take it; released from %s", key, cur)
            elif cur:
                self.redispatched += 1
                log.debug("re-dispatched %s from %s to %s", key, cur, name)
            else:
                self.dispatched += 1
            if key in self.pending:
                # Unless the informer has already shown it bound or deleted (newer than this).
                self._on_pod(result)
        elif isinstance(result, (Conflict, NotFound)):
            # Changed or gone meanwhile: decided again once the informer shows the newer state
            # (now, if it already does; else when its event arrives).
            self.patch_conflicts += 1
        else:
            log.warning("dispatching %s to %s failed: %s", key, name, result)
            self.api_failures += 1
            self._failed = True
        pod = self.pending.get(key)
        if pod is None or pod.annotations.get(INSTANCE_ANNOTATION, "") in self._live:
            return
        if not isinstance(result, (Conflict, NotFound)) or pod.resource_version != rv:
            self._todo.add(key, pod.priority)

    def _drain_completed(self) -> int:
        n = 0
        while True:
            try:
                key, name, cur, rv, prio, result = self._completed.get_nowait()
            except _queue.Empty:
                return n
            self._complete(key, name, cur, rv, prio, result)
            n += 1

    def dispatch(self, limit: int | None = None) -> int:
        """Dispatch the pods waiting for an instance (up to ``limit``), highest priority first;
        stops at the first failure of the API server, and before a pod of lower priority than a
        patch still in flight. Returns how many pods were looked at."""
        self._refresh_live()
        self._failed = False
        if not self._todo:
            return 0
        live = self.live_instances()
        n = 0
        for key, prio in self._todo.ordered(limit):
            if self._failed:
                break
            if self._inflight_priority and prio < max(self._inflight_priority):
                break  # once the higher-priority pods are dispatched
            if self._todo.discard(key):
                n += 1
                self._dispatch_one(key, live)
        return n

    # ---------------------------------------------------------------- loops

    def step(self) -> bool:
        """Single-threaded: take informer events, notice dead instances, dispatch (patches sent
        one after the other). True if anything happened."""
        got = self.informers.poll()
        return self.dispatch() > 0 or got > 0

    def idle(self) -> bool:
        return not self.informers.pending() and not self._todo and not self._inflight

    def run_until_idle(self, max_steps: int | None = None) -> int:
        return run_until_idle(self.step, self.idle, max_steps)

    def run(self, stop: threading.Event, ready: threading.Event | None = None) -> None:
        """Threaded: until ``stop`` is set. Patches go out ``workers`` at a time."""
        self.informers.notify = self._wake.set
        for inf in self.informers.informers.values():
            inf.reflector.notify = self._wake.set
        self.informers.start()
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="dispatch")
        deadline = time.monotonic() + 60
        while not all(inf.reflector.listed for inf in self.informers.informers.values()):
            if stop.is_set() or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        # Leases first: a pod dispatched to an instance not yet seen would be re-dispatched.
        self.informers.informers["Lease"].process()
        if ready is not None:
            ready.set()
        backoff = 0.0
        try:
            while not stop.is_set():
                self._wake.clear()
                self.informers.process()
                self._drain_completed()
                room = 2 * self.workers - len(self._inflight)
                n = self.dispatch(limit=room) if room > 0 else 0
                if self._failed:
                    backoff = min(max(backoff * 2, 0.1), 5.0)
                    stop.wait(backoff)
                    continue
                backoff = 0.0
                if n and self._todo and len(self._inflight) < 2 * self.workers:
                    continue
                nxt = self.next_expiry()
                timeout = 1.0 if nxt is None else max(0.01, min(1.0, nxt - self.clock.now() + 0.01))
                self._wake.wait(timeout)
        finally:
            self.informers.stop()
            self._executor.shutdown(wait=True)
            self._executor = None
            self._drain_completed()
