"""Leader election through a coordination.k8s.io/v1 Lease, as client-go's
``tools/leaderelection`` (leaderelection.go, healthzadaptor.go, resourcelock/leaselock.go) and
its configuration as component-base's ``LeaderElectionConfiguration`` (config/types.go,
config/validation).

Interoperable with Go components on the same Lease (kube-scheduler's ``kube-system/
kube-scheduler``): the same record (holderIdentity, leaseDurationSeconds, acquireTime,
renewTime, leaseTransitions), and the same rule for taking it over. A candidate never compares
the holder's ``renewTime`` with its own clock: it waits until it has seen the record unchanged
for the holder's ``leaseDurationSeconds``, measured from the moment it observed it, so clock
skew between machines cannot make two leaders. The leader renews every ``retry_period``; if
renewal keeps failing for ``renew_deadline`` it stops leading. A clean stop releases the Lease
(empty holder, leaseDurationSeconds 1) so a standby takes over at once (``ReleaseOnCancel``).

Known divergences: no coordinated leader election (the CoordinatedLeaderElection feature: a
Lease with ``strategy`` is renewed like any other; client-go drops those fields too when it
writes without the feature); the ``leader_election_master_status`` metric is the caller's
(``is_leader``), not registered here.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ksched.api.duration import format_duration
from ksched.api.errors import ApiError, NotFound
from ksched.api.lease import Lease
from ksched.api.meta import format_micro_time

__all__ = ["JITTER_FACTOR", "HealthzAdaptor", "LeaderElectionConfiguration", "LeaderElector"]

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2


@dataclass
class LeaderElectionConfiguration:
    """component-base's LeaderElectionConfiguration, with upstream's defaults (durations in
    seconds)."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = "kube-scheduler"
    resource_namespace: str = "kube-system"

    def validate(self, path: str = "leaderElection") -> list[str]:
        """Upstream's ValidateLeaderElectionConfiguration, and the lock types client-go still
        builds (leases only); nothing is checked when leader election is off."""
        if not self.leader_elect:
            return []
        errs: list[str] = []

        def dur(v: float) -> str:
            return format_duration(v)

        for name, v in (("leaseDuration", self.lease_duration), ("renewDeadline", self.renew_deadline),
                        ("retryPeriod", self.retry_period)):
            if v <= 0:
                errs.append(f"{path}.{name}: Invalid value: {dur(v)}: must be greater than zero")
        if self.lease_duration <= self.renew_deadline:
            errs.append(f"{path}.leaseDuration: Invalid value: {dur(self.renew_deadline)}: LeaseDuration must be "
                        "greater than RenewDeadline")
        if not self.resource_lock:
            errs.append(f'{path}.resourceLock: Invalid value: "": resourceLock is required')
        elif self.resource_lock != "leases":
            errs.append(f'{path}.resourceLock: Unsupported value: "{self.resource_lock}": supported values: '
                        '"leases"')
        if not self.resource_namespace:
            errs.append(f'{path}.resourceNamespace: Invalid value: "": resourceNamespace is required')
        if not self.resource_name:
            errs.append(f'{path}.resourceName: Invalid value: "": resourceName is required')
        return errs


def _spec(holder: str, duration: int, acquire: float, renew: float, transitions: int) -> dict[str, Any]:
    return {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": format_micro_time(acquire),
            "renewTime": format_micro_time(renew), "leaseTransitions": transitions}


class LeaderElector:
    """Campaigns for the Lease ``namespace/name`` as ``identity``. ``run()`` blocks: it calls
    ``on_started`` on becoming leader and ``on_stopped`` when it returns (lost, or stopped;
    also when it never led, as client-go). ``on_event(lease, message)``, when given, records
    ``<identity> became leader`` / ``<identity> stopped leading`` on the Lease, as client-go's
    lock does."""

    def __init__(self, client: Any, name: str, namespace: str, identity: str, *, lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0, release_on_cancel: bool = True,
                 clock: Callable[[], float] = time.time,
                 on_new_leader: Callable[[str], None] | None = None,
                 on_event: Callable[[Lease | None, str], None] | None = None) -> None:
        if lease_duration <= renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if lease_duration <= 0 or renew_deadline <= 0 or retry_period <= 0:
            raise ValueError("leaseDuration, renewDeadline and retryPeriod must be greater than zero")
        if not identity:
            raise ValueError("Lock identity is empty")
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self.clock = clock
        self.on_new_leader = on_new_leader
        self.on_event = on_event
        self._lock = threading.Lock()
        self._observed: dict[str, Any] = {}  # the record last seen (or written)
        self._observed_raw = ""
        self._observed_time = 0.0
        self._lease: Lease | None = None  # the object last read or written, for updates
        self._reported_leader = ""
        self.transitions_seen = 0

    @property
    def description(self) -> str:
        return f"{self.namespace}/{self.name}"

    # ---------------------------------------------------------------- the observed record

    def _set_observed(self, spec: dict[str, Any]) -> None:
        with self._lock:
            self._observed = dict(spec)
            self._observed_time = self.clock()

    @property
    def is_leader(self) -> bool:
        with self._lock:
            return bool(self._observed) and self._observed.get("holderIdentity") == self.identity

    def get_leader(self) -> str:
        """The holder last observed ('' before anything was observed)."""
        with self._lock:
            return str(self._observed.get("holderIdentity") or "")

    def _lease_valid(self, now: float) -> bool:
        with self._lock:
            return self._observed_time + int(self._observed.get("leaseDurationSeconds") or 0) > now

    def check(self, max_tolerable_expired: float) -> str | None:
        """Why this leader should be considered unhealthy: it still believes it leads although
        it has not renewed for the lease duration plus ``max_tolerable_expired`` (a renewal loop
        that is stuck); None otherwise, and always None when not leading."""
        if not self.is_leader:
            return None
        with self._lock:
            since = self.clock() - self._observed_time
        if since > self.lease_duration + max_tolerable_expired:
            return f"failed election to renew leadership on lease {self.name}"
        return None

    # ---------------------------------------------------------------- one attempt

    def _write(self, spec: dict[str, Any]) -> None:
        """Update the Lease last seen with ``spec`` (the whole spec, as client-go writes it)."""
        assert self._lease is not None
        raw = {**self._lease.raw, "spec": spec}
        new = self.client.update(raw)
        self._lease = new if isinstance(new, Lease) else Lease(raw)

    def try_acquire_or_renew(self) -> bool:
        """One attempt to take or renew the Lease; True while this candidate holds it."""
        now = self.clock()
        duration = int(self.lease_duration)
        record = _spec(self.identity, duration, now, now, 0)
        # 1. The leader's fast path: update the Lease last written, assuming nobody else did.
        if self.is_leader and self._lease_valid(now) and self._lease is not None:
            with self._lock:
                old = dict(self._observed)
            record["acquireTime"] = old.get("acquireTime") or record["acquireTime"]
            record["leaseTransitions"] = int(old.get("leaseTransitions") or 0)
            try:
                self._write(record)
                self._set_observed(record)
                return True
            except ApiError as e:
                log.info("failed to update lock %s optimistically: %s, falling back to slow path",
                         self.description, e)
        # 2. Read the Lease (create it when there is none).
        try:
            lease = self.client.get("Lease", self.namespace, self.name)
        except NotFound:
            try:
                created = self.client.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                              "metadata": {"name": self.name, "namespace": self.namespace},
                                              "spec": record})
            except ApiError as e:
                log.info("error initially creating leader election record %s: %s", self.description, e)
                return False
            self._lease = created if isinstance(created, Lease) else None
            self._set_observed(record)
            return True
        except ApiError as e:
            log.info("error retrieving resource lock %s: %s", self.description, e)
            return False
        assert isinstance(lease, Lease)
        self._lease = lease
        # 3. A record not seen before starts its lease duration now, on our clock.
        spec = dict(lease.raw.get("spec") or {})
        raw = json.dumps(spec, sort_keys=True)
        if raw != self._observed_raw:
            self._set_observed(spec)
            self._observed_raw = raw
        holder = spec.get("holderIdentity") or ""
        if holder and self._lease_valid(now) and not self.is_leader:
            return False
        # 4. Take it (or renew it through the slow path).
        if self.is_leader:
            record["acquireTime"] = spec.get("acquireTime") or record["acquireTime"]
            record["leaseTransitions"] = int(spec.get("leaseTransitions") or 0)
        else:
            record["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        try:
            self._write(record)
        except ApiError as e:
            log.info("failed to update lock %s: %s", self.description, e)
            return False
        self._set_observed(record)
        return True

    def release(self) -> bool:
        """Give the Lease up if this candidate holds it: holder emptied, leaseDurationSeconds 1."""
        if not self.is_leader or self._lease is None:
            return True
        now = self.clock()
        with self._lock:
            transitions = int(self._observed.get("leaseTransitions") or 0)
        record = _spec("", 1, now, now, transitions)
        try:
            self._write(record)
        except ApiError as e:
            log.error("failed to release lock %s: %s", self.description, e)
            return False
        self._set_observed(record)
        return True

    def _report_transition(self) -> None:
        leader = self.get_leader()
        if leader == self._reported_leader:
            return
        self._reported_leader = leader
        self.transitions_seen += 1
        if self.on_new_leader is not None:
            self.on_new_leader(leader)

    def _record(self, what: str) -> None:
        if self.on_event is not None:
            try:
                self.on_event(self._lease, f"{self.identity} {what}")
            except Exception as e:  # events are best effort
                log.debug("recording the leader election event failed: %s", e)

    # ---------------------------------------------------------------- the loops

    def _acquire(self, stop: threading.Event) -> bool:
        log.info("attempting to acquire leader lease %s...", self.description)
        while not stop.is_set():
            ok = self.try_acquire_or_renew()
            self._report_transition()
            if ok:
                self._record("became leader")
                log.info("successfully acquired lease %s", self.description)
                return True
            # Jittered, as client-go's wait.JitterUntil: between 1 and 1+JITTER_FACTOR periods.
            stop.wait(self.retry_period * (1 + random.random() * JITTER_FACTOR))
        return False

    def _renew(self, stop: threading.Event) -> None:
        """Renew every retry period until stopped or renewal failed for the renew deadline."""
        try:
            while not stop.is_set():
                deadline = time.monotonic() + self.renew_deadline
                while True:
                    ok = self.try_acquire_or_renew()
                    if ok or stop.is_set():
                        break
                    if time.monotonic() + self.retry_period > deadline:
                        break
                    stop.wait(self.retry_period)
                self._report_transition()
                if stop.is_set():
                    return
                if not ok:
                    log.warning("failed to renew lease %s: timed out waiting for the condition", self.description)
                    return
                stop.wait(self.retry_period)
        finally:
            if self.release_on_cancel:
                self.release()
            self._record("stopped leading")

    def run(self, stop: threading.Event, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        """Campaign, lead while renewals succeed, and return when ``stop`` is set or leadership
        is lost; ``on_stopped`` runs in every case."""
        try:
            if not self._acquire(stop):
                return
            on_started()
            self._renew(stop)
        finally:
            on_stopped()


class HealthzAdaptor:
    """client-go's HealthzAdaptor: the ``leaderElection`` health check, healthy unless this
    process leads and has failed to renew for the lease duration plus ``timeout``. Set the
    elector once it exists (healthy before)."""

    name = "leaderElection"

    def __init__(self, timeout: float = 20.0) -> None:
        self.timeout = timeout
        self.elector: LeaderElector | None = None

    def check(self) -> str | None:
        le = self.elector
        return None if le is None else le.check(self.timeout)
