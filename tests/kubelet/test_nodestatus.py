"""The kubelets' Lease renewals (ksched.kubelet.nodestatus): eager, a write per renewal; lazy,
the same renew times held in memory and written by ``flush`` (each node's latest), a failed
node's last renewal included, nothing written twice."""

from __future__ import annotations

from typing import Any

from ksched.api.errors import NotFound
from ksched.clock import VirtualClock
from ksched.kubelet.nodestatus import NodeHeartbeats


class Leases:
    """A client that keeps Leases' renewTimes and counts the writes."""

    def __init__(self) -> None:
        self.renew: dict[str, str] = {}
        self.writes = 0

    def patch(self, kind: str, ns: str, name: str, body: dict[str, Any], *_: Any) -> None:
        if name not in self.renew:
            raise NotFound(f"lease {name}")
        self.writes += 1
        self.renew[name] = body["spec"]["renewTime"]

    def create(self, obj: dict[str, Any]) -> None:
        self.writes += 1
        self.renew[obj["metadata"]["name"]] = obj["spec"]["renewTime"]


def heartbeats(lazy: bool) -> tuple[NodeHeartbeats, Leases, VirtualClock]:
    client, clock = Leases(), VirtualClock(0.0)
    hb = NodeHeartbeats(client, clock, lazy=lazy)
    for name in ("n1", "n2"):
        hb.saw_node(name)
    hb.register_pending(lambda name: None if name == "gone" else _Node(name))
    return hb, client, clock


class _Node:
    def __init__(self, name: str) -> None:
        self.name = name
        self.conditions = [{"type": "Ready", "status": "True"}]


def script(hb: NodeHeartbeats, clock: VirtualClock, flush: bool) -> list[int]:
    """Advance the clock at odd steps, failing n2 at 27 s; the renewals made at each step."""
    out = []
    for t in (4.0, 10.0, 13.0, 21.0, 27.0, 33.0, 44.0):
        clock.advance_to(t)
        if t == 27.0:
            hb.fail("n2")
        out.append(hb.renew())
        if flush and t == 21.0:
            hb.flush()
    return out


def test_lazy_renewals_are_the_eager_ones_written_later() -> None:
    eager, ec, eclock = heartbeats(False)
    lazy, lc, lclock = heartbeats(True)
    assert ec.writes == lc.writes == 2  # registration writes at once
    assert script(eager, eclock, False) == script(lazy, lclock, True) == [0, 2, 0, 2, 0, 1, 1]
    assert lazy.held() and lc.renew != ec.renew
    assert lazy.renewed == eager.renewed == {"n1": 44.0, "n2": 21.0}
    n = lazy.flush()
    assert n == 1 and not lazy.held()  # n2's renewal at 21 s went out with the flush at 21 s
    assert lc.renew == ec.renew
    assert lazy.flush() == 0
    assert (ec.writes, lc.writes) == (8, 5)


def test_nothing_due_is_a_quick_check() -> None:
    hb, client, clock = heartbeats(True)
    clock.advance_to(9.0)
    assert hb.renew() == 0 and not hb.held()
    clock.advance_to(10.0)
    assert hb.renew() == 2 and hb.held() and client.writes == 2
