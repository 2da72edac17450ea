"""Leader election through a coordination.k8s.io/v1 Lease, as client-go's leaderelection:
acquire when the lease is free or expired, renew every ``retry_period``, give up leadership if
renewal fails for ``renew_deadline``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ksched.api.errors import AlreadyExists, ApiError, Conflict, NotFound
from ksched.api.lease import Lease
from ksched.api.meta import format_micro_time

__all__ = ["LeaderElector"]

log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(self, client: Any, name: str, namespace: str, identity: str, *, lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.is_leader = False
        self._last_renew = 0.0

    def _lease_spec(self, transitions: int, acquire: str | None) -> dict[str, Any]:
        now = format_micro_time(self.clock())
        return {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": acquire or now, "renewTime": now, "leaseTransitions": transitions}

    def try_acquire_or_renew(self) -> bool:
        now = self.clock()
        try:
            lease = self.client.get("Lease", self.namespace, self.name)
        except NotFound:
            try:
                self.client.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                    "metadata": {"name": self.name, "namespace": self.namespace},
                                    "spec": self._lease_spec(0, None)})
                self._last_renew = now
                return True
            except (AlreadyExists, Conflict):
                return False
        assert isinstance(lease, Lease)
        holder = lease.holder_identity
        renew = lease.renew_time or 0.0
        expired = now > renew + (lease.lease_duration_seconds or self.lease_duration)
        if holder and holder != self.identity and not expired:
            return False
        spec = lease.raw.get("spec") or {}
        transitions = lease.lease_transitions + (0 if holder == self.identity else 1)
        acquire = spec.get("acquireTime") if holder == self.identity else None
        raw = {**lease.raw, "spec": self._lease_spec(transitions, acquire)}
        try:
            self.client.update(raw)
        except (Conflict, NotFound):
            return False
        self._last_renew = now
        return True

    def run(self, stop: threading.Event, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        """Loop until ``stop``: call ``on_started`` on becoming leader, ``on_stopped`` on losing it."""
        while not stop.is_set():
            try:
                ok = self.try_acquire_or_renew()
            except ApiError as e:
                log.warning("leader election: %s", e)
                ok = False
            now = self.clock()
            if ok and not self.is_leader:
                self.is_leader = True
                log.info("%s became the leader (lease %s/%s)", self.identity, self.namespace, self.name)
                on_started()
            elif not ok and self.is_leader and now - self._last_renew > self.renew_deadline:
                self.is_leader = False
                log.warning("%s lost the lease %s/%s", self.identity, self.namespace, self.name)
                on_stopped()
            stop.wait(self.retry_period)
        if self.is_leader:
            self.is_leader = False
            on_stopped()
