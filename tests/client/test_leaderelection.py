"""Leader election as client-go's: the Lease record written, take-over only after the record
has been seen unchanged for the holder's lease duration (never by comparing clocks), renewals
keeping acquireTime and transitions, release on a clean stop, the renew deadline, the
leaderElection health check, and the configuration's validation."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ksched.api.errors import ApiError, ServiceUnavailable
from ksched.api.lease import Lease
from ksched.api.meta import format_micro_time, parse_time
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.leaderelection import HealthzAdaptor, LeaderElectionConfiguration, LeaderElector

NS = "kube-system"


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _lease(store: Store, name: str = "kube-scheduler") -> Lease:
    lease = store.get("Lease", NS, name)
    assert isinstance(lease, Lease)
    return lease


def _elector(client: Any, identity: str, clock: Clock, **kw: Any) -> LeaderElector:
    return LeaderElector(client, "kube-scheduler", NS, identity, clock=clock, **kw)


def _go_holder(store: Store, holder: str, renew: float, duration: int = 15, transitions: int = 0) -> None:
    """Another component's record (as kube-scheduler writes it)."""
    spec = {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": format_micro_time(renew),
            "renewTime": format_micro_time(renew), "leaseTransitions": transitions}
    try:
        lease = _lease(store)
    except ApiError:
        store.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                      "metadata": {"name": "kube-scheduler", "namespace": NS}, "spec": spec})
        return
    store.update({**lease.raw, "spec": spec})


def test_a_free_lease_is_created_with_the_full_record() -> None:
    store = Store()
    clock = Clock()
    a = _elector(InProcessClient(store), "a", clock)
    assert a.try_acquire_or_renew() is True and a.is_leader and a.get_leader() == "a"
    spec = _lease(store).raw["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0 and spec["acquireTime"] == spec["renewTime"]
    assert parse_time(spec["renewTime"]) == pytest.approx(clock.t, abs=1e-6)
    # Renewals move renewTime only.
    clock.t += 2
    assert a.try_acquire_or_renew() is True
    renewed = _lease(store).raw["spec"]
    assert renewed["acquireTime"] == spec["acquireTime"] and renewed["leaseTransitions"] == 0
    assert parse_time(renewed["renewTime"]) == pytest.approx(clock.t, abs=1e-6)


def test_a_held_lease_is_taken_only_after_being_seen_unchanged_for_the_holders_duration() -> None:
    store = Store()
    clock = Clock()
    _go_holder(store, "kube-scheduler-1", clock.t, duration=60, transitions=4)
    b = _elector(InProcessClient(store), "b", clock)
    assert b.try_acquire_or_renew() is False and b.get_leader() == "kube-scheduler-1"
    clock.t += 59  # the holder's 60 s count, not b's 15 s
    assert b.try_acquire_or_renew() is False
    clock.t += 1.5
    assert b.try_acquire_or_renew() is True
    spec = _lease(store).raw["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 5 and spec["leaseDurationSeconds"] == 15
    assert parse_time(spec["acquireTime"]) == pytest.approx(clock.t, abs=1e-6)


def test_clock_skew_never_makes_two_leaders() -> None:
    """The holder's clock is an hour behind ours: its renewTime always looks expired. It keeps
    renewing, so the record keeps changing and the candidate never takes it over."""
    store = Store()
    clock = Clock()
    skewed = clock.t - 3600
    _go_holder(store, "kube-scheduler-1", skewed)
    b = _elector(InProcessClient(store), "b", clock)
    for _ in range(30):
        assert b.try_acquire_or_renew() is False
        clock.t += 2
        skewed += 2
        _go_holder(store, "kube-scheduler-1", skewed)
    assert _lease(store).holder_identity == "kube-scheduler-1"


def test_a_released_lease_is_taken_at_once() -> None:
    store = Store()
    clock = Clock()
    client = InProcessClient(store)
    a, b = _elector(client, "a", clock), _elector(client, "b", clock)
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    assert a.release() is True and not a.is_leader
    spec = _lease(store).raw["spec"]
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1 and spec["leaseTransitions"] == 0
    assert b.try_acquire_or_renew() is True
    assert _lease(store).raw["spec"]["leaseTransitions"] == 1
    assert b.release() is True and a.release() is True  # releasing what one does not hold: a no-op


def test_two_candidates_racing_for_an_expired_lease_make_one_leader() -> None:
    store = Store()
    clock = Clock()
    _go_holder(store, "gone", clock.t)
    client = InProcessClient(store)
    a, b = _elector(client, "a", clock), _elector(client, "b", clock)
    assert a.try_acquire_or_renew() is False and b.try_acquire_or_renew() is False
    clock.t += 16
    # Both read the same expired record; the second write carries a stale resourceVersion.
    orig_get = client.get
    seen = orig_get("Lease", NS, "kube-scheduler")
    client.get = lambda *a_: seen  # type: ignore[method-assign]
    try:
        results = [a.try_acquire_or_renew(), b.try_acquire_or_renew()]
    finally:
        client.get = orig_get  # type: ignore[method-assign]
    assert results == [True, False]
    assert _lease(store).holder_identity == "a" and a.is_leader and not b.is_leader


def test_api_errors_are_a_failed_attempt() -> None:
    class Down:
        def get(self, *a: Any) -> Any:
            raise ServiceUnavailable("connection refused")

    e = _elector(Down(), "a", Clock())
    assert e.try_acquire_or_renew() is False and not e.is_leader


def test_the_leader_falls_back_to_the_slow_path_when_its_lease_changed() -> None:
    store = Store()
    clock = Clock()
    client = InProcessClient(store)
    a = _elector(client, "a", clock)
    assert a.try_acquire_or_renew() is True
    # Someone touched the object (a label): the optimistic update conflicts, the slow path renews.
    lease = _lease(store)
    store.update({**lease.raw, "metadata": {**lease.raw["metadata"], "labels": {"x": "y"}}})
    clock.t += 2
    assert a.try_acquire_or_renew() is True
    assert _lease(store).raw["metadata"]["labels"] == {"x": "y"}
    # Another holder wrote the record: a is no longer the leader.
    clock.t += 1
    _go_holder(store, "usurper", clock.t)
    assert a.try_acquire_or_renew() is False and not a.is_leader and a.get_leader() == "usurper"


def test_the_watchdog() -> None:
    store = Store()
    clock = Clock()
    a = _elector(InProcessClient(store), "a", clock)
    dog = HealthzAdaptor(20.0)
    assert dog.name == "leaderElection" and dog.check() is None  # no elector yet
    dog.elector = a
    assert dog.check() is None  # not leading: healthy (a hot standby)
    assert a.try_acquire_or_renew() is True
    clock.t += 15 + 20
    assert dog.check() is None
    clock.t += 0.5
    assert dog.check() == "failed election to renew leadership on lease kube-scheduler"
    assert a.try_acquire_or_renew() is True
    assert dog.check() is None


@pytest.mark.parametrize(("kw", "message"), [
    ({"lease_duration": 10, "renew_deadline": 10}, "leaseDuration must be greater than renewDeadline"),
    ({"renew_deadline": 2.4, "retry_period": 2}, "renewDeadline must be greater than retryPeriod*JitterFactor"),
    ({"lease_duration": 15, "renew_deadline": 10, "retry_period": -1}, "must be greater than zero"),
])
def test_elector_parameters_are_validated(kw: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        LeaderElector(None, "x", NS, "a", **kw)
    with pytest.raises(ValueError, match="Lock identity is empty"):
        LeaderElector(None, "x", NS, "")


@pytest.mark.parametrize(("cfg", "errors"), [
    (LeaderElectionConfiguration(), []),
    (LeaderElectionConfiguration(leader_elect=False, lease_duration=0, resource_name=""), []),
    (LeaderElectionConfiguration(lease_duration=0, renew_deadline=0, retry_period=0), [
        "leaderElection.leaseDuration: Invalid value: 0s: must be greater than zero",
        "leaderElection.renewDeadline: Invalid value: 0s: must be greater than zero",
        "leaderElection.retryPeriod: Invalid value: 0s: must be greater than zero",
        "leaderElection.leaseDuration: Invalid value: 0s: LeaseDuration must be greater than RenewDeadline"]),
    (LeaderElectionConfiguration(lease_duration=10, renew_deadline=12.5), [
        "leaderElection.leaseDuration: Invalid value: 12.5s: LeaseDuration must be greater than RenewDeadline"]),
    (LeaderElectionConfiguration(resource_lock="", resource_name="", resource_namespace=""), [
        'leaderElection.resourceLock: Invalid value: "": resourceLock is required',
        'leaderElection.resourceNamespace: Invalid value: "": resourceNamespace is required',
        'leaderElection.resourceName: Invalid value: "": resourceName is required']),
    (LeaderElectionConfiguration(resource_lock="endpointsleases"), [
        'leaderElection.resourceLock: Unsupported value: "endpointsleases": supported values: "leases"']),
])
def test_configuration_validation(cfg: LeaderElectionConfiguration, errors: list[str]) -> None:
    assert cfg.validate() == errors


# ----------------------------------------------------------------------------- the loops (real time)


class Flaky(InProcessClient):
    """A client whose writes can be made to fail (the API server unreachable for this one)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.down = threading.Event()

    def update(self, obj: Any) -> Any:
        if self.down.is_set():
            raise ServiceUnavailable("connection refused")
        return super().update(obj)

    def get(self, kind: str, namespace: str, name: str) -> Any:
        if self.down.is_set():
            raise ServiceUnavailable("connection refused")
        return super().get(kind, namespace, name)


def _run(e: LeaderElector, stop: threading.Event) -> tuple[threading.Thread, dict[str, threading.Event]]:
    ev = {"started": threading.Event(), "stopped": threading.Event()}
    t = threading.Thread(target=lambda: e.run(stop, ev["started"].set, ev["stopped"].set), daemon=True)
    t.start()
    return t, ev


def test_a_clean_stop_hands_over_at_once_and_records_events() -> None:
    store = Store()
    client = InProcessClient(store)
    events: list[str] = []
    fast = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.2}
    def record(lease: Lease | None, message: str) -> None:
        assert lease is not None and lease.name == "kube-scheduler"
        events.append(message)

    a = LeaderElector(client, "kube-scheduler", NS, "a", on_event=record, **fast)
    b = LeaderElector(client, "kube-scheduler", NS, "b", on_event=record, **fast)
    stop_a, stop_b = threading.Event(), threading.Event()
    ta, eva = _run(a, stop_a)
    assert eva["started"].wait(5)
    tb, evb = _run(b, stop_b)
    time.sleep(0.5)
    assert not evb["started"].is_set() and b.get_leader() == "a"
    t0 = time.monotonic()
    stop_a.set()
    ta.join(5)
    assert eva["stopped"].is_set()
    assert evb["started"].wait(5)
    assert time.monotonic() - t0 < 2.5  # well before a's 3 s lease would have expired
    stop_b.set()
    tb.join(5)
    assert evb["stopped"].is_set() and _lease(store).holder_identity == ""
    assert events == ["a became leader", "a stopped leading", "b became leader", "b stopped leading"]


def test_renewals_failing_for_the_renew_deadline_lose_leadership() -> None:
    store = Store()
    client = Flaky(store)
    a = LeaderElector(client, "kube-scheduler", NS, "a", lease_duration=3.0, renew_deadline=1.0, retry_period=0.2)
    stop = threading.Event()
    t, ev = _run(a, stop)
    assert ev["started"].wait(5)
    client.down.set()
    t0 = time.monotonic()
    assert ev["stopped"].wait(5)
    assert 0.8 <= time.monotonic() - t0 < 3.0  # about the renew deadline, before the lease expires
    assert not stop.is_set()
    t.join(5)
    assert not t.is_alive()


def test_on_stopped_runs_even_when_it_never_led() -> None:
    store = Store()
    clock = Clock(time.time())
    _go_holder(store, "other", clock.t)
    a = LeaderElector(InProcessClient(store), "kube-scheduler", NS, "a", lease_duration=3.0, renew_deadline=2.0,
                      retry_period=0.2)
    stop = threading.Event()
    t, ev = _run(a, stop)
    time.sleep(0.3)
    stop.set()
    t.join(5)
    assert ev["stopped"].is_set() and not ev["started"].is_set()
    assert _lease(store).holder_identity == "other"

