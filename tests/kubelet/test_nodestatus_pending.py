"""The kubelets' registration queue (``NodeHeartbeats.saw_node`` / ``register_pending``): nodes
register once each, in the order first seen, also when seen again while queued or while the
queue is being worked off; thousands of nodes are queued without a scan per node (the check is a
set's, the queue a deque)."""

from __future__ import annotations

import time
from typing import Any

from ksched.api.errors import NotFound
from ksched.clock import VirtualClock
from ksched.kubelet.nodestatus import NodeHeartbeats


class _Client:
    """Leases: the names created, in order (a patch of a Lease not there is NotFound)."""

    def __init__(self) -> None:
        self.created: list[str] = []

    def create(self, obj: dict[str, Any]) -> None:
        self.created.append(obj["metadata"]["name"])

    def patch(self, kind: str, ns: str, name: str, *_: Any) -> None:
        if kind == "Lease" and name not in self.created:
            raise NotFound(name)


class _Node:
    def __init__(self, name: str) -> None:
        self.name = name
        self.conditions = [{"type": "Ready", "status": "True"}]


def test_nodes_register_once_each_in_the_order_first_seen() -> None:
    client = _Client()
    hb = NodeHeartbeats(client, VirtualClock(0.0), lazy=False)
    for name in ("b", "a", "b", "c", "a", "gone", "d"):
        hb.saw_node(name)
    hb.down.add("d")
    seen_again: list[str] = []

    def get_node(name: str) -> _Node | None:
        if name == "a" and not seen_again:
            # Seen while the queue is worked off: "c" (still queued) is not queued twice; "a"
            # (taken off the queue, not yet registered) and "e" (new) are queued at the end.
            hb.saw_node("a")
            hb.saw_node("c")
            hb.saw_node("e")
            seen_again.append(name)
        return None if name == "gone" else _Node(name)

    assert hb.register_pending(get_node) == 5
    assert client.created == ["b", "a", "c", "e"]  # "a"'s second registration renews its Lease
    assert hb.renewed.keys() == {"a", "b", "c", "e"}
    # Registered nodes are not queued again; a node skipped (gone, down) may be queued again.
    for name in ("a", "b", "gone", "d"):
        hb.saw_node(name)
    hb.down.clear()
    assert hb.register_pending(lambda name: _Node(name)) == 2
    assert client.created[-2:] == ["gone", "d"]
    assert hb.register_pending(lambda name: _Node(name)) == 0


def test_many_nodes_queue_in_linear_time() -> None:
    def queue(n: int) -> float:
        hb = NodeHeartbeats(_Client(), VirtualClock(0.0), lazy=True)
        t = time.process_time()
        for i in range(n):
            hb.saw_node(f"node-{i:05d}")
            hb.saw_node(f"node-{i:05d}")
        return time.process_time() - t

    small, large = min(queue(2_000) for _ in range(3)), min(queue(20_000) for _ in range(3))
    # A list scan per node made 20,000 nodes cost 100 times 2,000 nodes' (about 0.6 s here).
    assert large < 30 * max(small, 1e-4)
