"""The simulated kubelet (ksched.kubelet.fake, .runtime) on a virtual clock: start-up, container
statuses and conditions, ``ksched.io/run-seconds`` and ``ksched.io/exit-code`` with each
restartPolicy (a pod that may not restart succeeds or fails; one that may restarts with the
kubelet's CrashLoopBackOff: 10 s doubling to 300 s, forgotten after 600 s), and deleted pods
stopping promptly (``ksched.io/termination-seconds``, capped by the grace period, exit 143 or
137), then deleted for good."""

from __future__ import annotations

from typing import Any

import pytest

from api_objects import mknode, mkpod
from ksched.api.pod import Pod
from ksched.api.watch import DELETED
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.clock import VirtualClock
from ksched.kubelet.fake import FakeKubelet
from ksched.kubelet.runtime import CrashLoopBackOff, go_duration, stop_delay


class Node:
    """A store, one node and the agent, stepped like Simulation.run steps them."""

    def __init__(self, startup_delay: float = 0.0) -> None:
        self.clock = VirtualClock(0.0)
        self.store = Store(self.clock)
        self.store.create(mknode("n1"))
        self.informers = InformerFactory(InProcessClient(self.store))
        self.kubelet = FakeKubelet(InProcessClient(self.store), self.informers, self.clock, startup_delay)

    def settle(self) -> None:
        while True:
            self.informers.poll()
            if not self.kubelet.step():
                self.informers.poll()
                return

    def advance_to(self, t: float) -> None:
        self.settle()
        while (w := self.kubelet.next_wakeup()) is not None and w <= t:
            self.clock.advance_to(w)
            self.settle()
        self.clock.advance_to(t)
        self.settle()

    def run(self, name: str, annotations: dict[str, str] | None = None, **spec: Any) -> None:
        raw = mkpod(name, **spec)
        raw["metadata"]["annotations"] = annotations or {}
        self.store.create(raw)
        self.store.bind("default", name, "n1")
        self.settle()

    def pod(self, name: str) -> Pod:
        p = self.store.get("Pod", "default", name)
        assert isinstance(p, Pod)
        return p

    def status(self, name: str) -> dict[str, Any]:
        return self.pod(name).raw["status"]  # type: ignore[no-any-return]

    def container(self, name: str) -> dict[str, Any]:
        return self.status(name)["containerStatuses"][0]  # type: ignore[no-any-return]


def cond(status: dict[str, Any], ctype: str) -> tuple[str, str]:
    c = next(c for c in status["conditions"] if c["type"] == ctype)
    return c["status"], c.get("reason", "")


def test_a_bound_pod_starts_after_the_startup_delay() -> None:
    n = Node(startup_delay=2)
    n.run("p")
    assert n.pod("p").phase == "Pending"
    n.advance_to(2)
    st = n.status("p")
    assert st["phase"] == "Running" and st["startTime"] == "1970-01-01T00:00:02Z"
    assert [cond(st, t) for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")] == [("True", "")] * 4
    c = n.container("p")
    assert (c["name"], c["image"], c["ready"], c["started"], c["restartCount"]) == ("c", "img", True, True, 0)
    assert c["state"] == {"running": {"startedAt": "1970-01-01T00:00:02Z"}}
    # No run time: it runs for ever.
    n.advance_to(10_000)
    assert n.pod("p").phase == "Running" and n.kubelet.next_wakeup() is None


@pytest.mark.parametrize(("policy", "code", "phase", "reason"), [
    ("Never", "0", "Succeeded", "Completed"),
    ("Never", "3", "Failed", "Error"),
    ("OnFailure", "0", "Succeeded", "Completed"),
])
def test_containers_that_may_not_restart_finish_the_pod(policy: str, code: str, phase: str, reason: str) -> None:
    n = Node()
    n.run("p", {"ksched.io/run-seconds": "30", "ksched.io/exit-code": code}, restartPolicy=policy)
    n.advance_to(29.9)
    assert n.pod("p").phase == "Running"
    n.advance_to(30)
    st = n.status("p")
    assert st["phase"] == phase
    assert cond(st, "Ready") == ("False", "PodCompleted") and cond(st, "ContainersReady") == ("False", "PodCompleted")
    term = n.container("p")["state"]["terminated"]
    assert (term["exitCode"], term["reason"], term["startedAt"], term["finishedAt"]) == \
        (int(code), reason, "1970-01-01T00:00:00Z", "1970-01-01T00:00:30Z")
    assert n.container("p")["ready"] is False and n.container("p")["started"] is False


def restart_times(run: float, exits: int, policy: str = "Always", code: str = "0") -> list[tuple[float, int]]:
    """(time, restartCount) at each restart of a pod whose containers run ``run`` seconds."""
    n = Node()
    n.run("p", {"ksched.io/run-seconds": str(run), "ksched.io/exit-code": code}, restartPolicy=policy)
    out = []
    for _ in range(exits):
        count = n.container("p")["restartCount"]
        while n.container("p")["restartCount"] == count:
            w = n.kubelet.next_wakeup()
            assert w is not None
            n.advance_to(w)
        out.append((n.clock.now(), n.container("p")["restartCount"]))
    return out


def crash_loop_model(run: float, exits: int) -> list[tuple[float, int]]:
    """The first restart at once; then each after the back-off (10 s doubling to 300 s) from the
    exit, the back-off forgotten when more than 600 s passed since it was last set."""
    out = []
    t = 0.0
    backoff: float | None = None
    last_update = 0.0
    for k in range(1, exits + 1):
        finished = t + run
        if backoff is None or finished - last_update > 600:
            backoff, restart = 10.0, finished
        else:
            restart = finished + backoff
            backoff = min(backoff * 2, 300.0)
        last_update = restart
        out.append((restart, k))
        t = restart
    return out


@pytest.mark.parametrize(("run", "exits"), [(1, 9), (30, 6), (700, 3)])
def test_crash_loop_back_off(run: float, exits: int) -> None:
    assert restart_times(run, exits) == crash_loop_model(run, exits)


def test_the_restart_times_of_a_one_second_container() -> None:
    # 1 s runs: restarts at 1, then 10, 20, 40, 80, 160, 300, 300 s after each exit.
    assert [t for t, _ in restart_times(1, 8)] == [1, 12, 33, 74, 155, 316, 617, 918]


def test_on_failure_restarts_a_failing_container_in_place() -> None:
    assert restart_times(5, 2, policy="OnFailure", code="1") == [(5, 1), (20, 2)]


def test_a_backing_off_container_is_waiting_and_not_ready() -> None:
    n = Node()
    n.run("p", {"ksched.io/run-seconds": "1", "ksched.io/exit-code": "2"})
    n.advance_to(2)  # exited at 1 (restarted at once), again at 2: back-off 10 s
    c = n.container("p")
    assert c["restartCount"] == 1 and c["ready"] is False
    assert c["state"] == {"waiting": {"reason": "CrashLoopBackOff",
                                      "message": f"back-off 10s restarting failed container=c "
                                                 f"pod=p_default({n.pod('p').uid})"}}
    assert c["lastState"]["terminated"]["exitCode"] == 2 and c["lastState"]["terminated"]["reason"] == "Error"
    assert cond(n.status("p"), "Ready") == ("False", "ContainersNotReady")
    assert n.pod("p").phase == "Running"
    n.advance_to(12)
    assert n.container("p")["state"] == {"running": {"startedAt": "1970-01-01T00:00:12Z"}}
    assert cond(n.status("p"), "Ready") == ("True", "")


# ---------------------------------------------------------------- deletion


def deleted_at(n: Node, name: str) -> tuple[float, dict[str, Any]]:
    """When the pod went away, and its last status."""
    w = n.store.watch("Pod")
    w.drain()
    last: dict[str, Any] = {}
    while True:
        n.settle()
        n.store.finalize_expired()
        for ev in w.drain():
            if ev.object is not None and ev.object.name == name:
                last = ev.object.raw["status"]
                if ev.type == DELETED:
                    return n.clock.now(), last
        nxt = [t for t in (n.kubelet.next_wakeup(), n.store.next_deletion_deadline()) if t is not None]
        assert nxt, "nothing left to happen"
        n.clock.advance_to(min(nxt))


@pytest.mark.parametrize(("annotations", "grace", "gone", "code"), [
    ({}, None, 1, 143),  # about a second, not the 30 s grace period
    ({"ksched.io/termination-seconds": "5"}, None, 5, 143),
    ({"ksched.io/termination-seconds": "0"}, None, 0, 143),
    ({"ksched.io/termination-seconds": "60"}, None, 30, 137),  # killed when the grace period ends
    ({"ksched.io/termination-seconds": "60"}, 10, 10, 137),
])
def test_a_deleted_pod_stops_promptly(annotations: dict[str, str], grace: int | None, gone: float,
                                      code: int) -> None:
    n = Node()
    n.run("p", annotations)
    n.advance_to(100)
    n.store.delete("Pod", "default", "p", grace_period_seconds=grace)
    t, status = deleted_at(n, "p")
    assert t == 100 + gone
    assert status["phase"] == "Failed"
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == code


def test_a_deleted_pod_held_by_a_finalizer_is_terminal_with_no_grace_left() -> None:
    n = Node()
    raw = mkpod("p")
    raw["metadata"]["finalizers"] = ["example.com/hold"]
    n.store.create(raw)
    n.store.bind("default", "p", "n1")
    n.advance_to(10)
    n.store.delete("Pod", "default", "p")
    n.advance_to(11)
    p = n.pod("p")
    assert p.phase == "Failed" and p.deletion_grace_period_seconds == 0 and p.deletion_timestamp == 11
    n.store.update({**p.raw, "metadata": {**p.raw["metadata"], "finalizers": []}})
    assert n.store.try_get("Pod", "default", "p") is None


def test_a_pod_deleted_before_it_started_never_runs() -> None:
    n = Node(startup_delay=5)
    n.run("p")
    n.store.delete("Pod", "default", "p")
    t, status = deleted_at(n, "p")
    assert t == 1 and status["phase"] == "Failed" and "containerStatuses" not in status


def test_a_finished_pod_is_not_restarted_or_stopped() -> None:
    n = Node()
    n.run("p", {"ksched.io/run-seconds": "5"}, restartPolicy="Never")
    n.advance_to(5)
    assert n.pod("p").phase == "Succeeded"
    n.advance_to(1000)
    assert n.pod("p").phase == "Succeeded" and n.kubelet.next_wakeup() is None


@pytest.mark.parametrize("value", ["soon", "-3", "nan"])
def test_a_bad_run_time_is_ignored(value: str) -> None:
    n = Node()
    n.run("p", {"ksched.io/run-seconds": value}, restartPolicy="Never")
    n.advance_to(1000)
    assert n.pod("p").phase == "Running"


def test_an_agent_started_on_running_pods_picks_up_their_run_time() -> None:
    n = Node()
    n.run("p", {"ksched.io/run-seconds": "50"}, restartPolicy="Never")
    n.advance_to(20)
    # A new agent (a restart of ksched serve on persisted data): the pod exits 50 s after its start.
    fresh = InformerFactory(InProcessClient(n.store))
    n.kubelet = FakeKubelet(InProcessClient(n.store), fresh, n.clock)
    n.informers = fresh
    n.settle()
    assert n.kubelet.next_wakeup() == 50
    n.advance_to(50)
    assert n.pod("p").phase == "Succeeded"


# ---------------------------------------------------------------- helpers


@pytest.mark.parametrize(("seconds", "text"), [(10, "10s"), (59, "59s"), (60, "1m0s"), (80, "1m20s"),
                                               (300, "5m0s"), (3600, "1h0m0s"), (3725, "1h2m5s")])
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_back_off_expiry() -> None:
    b = CrashLoopBackOff()
    b.next("k", 0, 0)
    assert b.get("k") == 10 and b.in_backoff_since("k", 5, 5)
    assert not b.in_backoff_since("k", 5, 15)
    b.next("k", 5, 15)
    assert b.get("k") == 20
    # More than 600 s between the last update and an exit: forgotten.
    assert not b.in_backoff_since("k", 616, 616)
    b.next("k", 616, 616)
    assert b.get("k") == 10


def test_stop_delay_reads_the_grace_period() -> None:
    raw = mkpod("p", terminationGracePeriodSeconds=3)
    raw["metadata"]["annotations"] = {"ksched.io/termination-seconds": "10"}
    assert stop_delay(Pod(raw)) == (3.0, True)
    raw["metadata"]["annotations"] = {}
    assert stop_delay(Pod(raw)) == (1.0, False)
