"""The simulated kubelets' heartbeats (``pkg/kubelet/nodelease``, ``kubelet_node_status.go``):
each node's kubelet holds the Lease ``kube-node-lease/<node>`` (``leaseDurationSeconds`` 40,
renewed every 10 s) and posts the Ready condition (``KubeletReady``, "kubelet is posting ready
status") when it registers. A failed node's kubelet (``fail``) stops renewing and writing
anything; ``restore`` brings it back: it renews at once and posts Ready again.

Divergences, so that a simulation ends when nothing is left to happen: renewals are written
lazily -- whenever the clock has moved on by the renew interval or more since a node's last
renewal (``renew``, called as the simulation's clock advances and at every kubelet step), not
on timers of their own; and while a failed node still shows Ready, the renewals of the live
nodes run on their 10 s timers (so the node lifecycle controller sees who stopped). The Ready
condition's ``lastHeartbeatTime`` is written when the condition changes (upstream also posts it
at least every 5 minutes).

Lazy renewals (``lazy=True``, what ``ksched.sim.simulation`` uses): a renewal that is due is
kept in memory -- the same renew times as above, at the same instants -- and the Leases are
written with them by ``flush``, which the simulation calls before anything reads a Lease (a
pass of the node lifecycle controller, a timeline action, the end of a run). Every reader sees
the Lease it would have seen with a write per renewal (same ``renewTime`` and holder; only the
resourceVersions differ), and a day on 1000 nodes makes a few thousand Lease writes instead of
hundreds of thousands. The eager path (``lazy=False``, a write per renewal) is the reference;
``tests/sim/test_node_fast_paths_agree.py`` holds the two to the same outcome.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from typing import Any

from ksched.api.errors import AlreadyExists, ApiError, NotFound
from ksched.api.meta import format_micro_time, format_time
from ksched.api.node import Node
from ksched.kubelet.eviction import CONDITIONS

__all__ = ["LEASE_DURATION_SECONDS", "NODE_LEASE_NAMESPACE", "RENEW_INTERVAL", "NodeHeartbeats"]

log = logging.getLogger(__name__)

NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
RENEW_INTERVAL = 0.25 * LEASE_DURATION_SECONDS


def ready_condition(node: Node) -> dict[str, Any] | None:
    return next((c for c in node.conditions if c.get("type") == "Ready"), None)


class NodeHeartbeats:
    def __init__(self, client: Any, clock: Any, renew_interval: float = RENEW_INTERVAL, lazy: bool = False) -> None:
        self.client = client
        self.clock = clock
        self.renew_interval = renew_interval
        self.lazy = lazy
        self.renewed: dict[str, float] = {}  # node -> last renewal
        self.down: set[str] = set()
        self._pending: deque[str] = deque()  # nodes to register at the next step, in order
        self._pending_names: set[str] = set()  # the same names: saw_node's check without a scan
        self._written: dict[str, float] = {}  # node -> the renewTime its Lease has in the store
        self._held = False  # lazy: renewals not yet written
        self._noticed: dict[str, Any] = {}  # failed node -> a version of it that is not Ready
        # At most the earliest last renewal of a live node: nothing is due before it is an
        # interval old (``renew`` runs at every kubelet step).
        self._oldest = math.inf

    # ---------------------------------------------------------------- registration

    def saw_node(self, name: str) -> None:
        if name not in self.renewed and name not in self._pending_names:
            self._pending.append(name)
            self._pending_names.add(name)

    def forget(self, name: str) -> None:
        self.renewed.pop(name, None)
        self._written.pop(name, None)
        self._noticed.pop(name, None)
        self.down.discard(name)

    def register_pending(self, get_node: Any) -> int:
        n = 0
        while self._pending:
            name = self._pending.popleft()
            self._pending_names.discard(name)
            node = get_node(name)
            if node is None or name in self.down:
                continue
            self._renew(name, self.clock.now(), create=True)
            self.post_ready(node)
            n += 1
        return n

    def post_ready(self, node: Node) -> None:
        """Ready True (KubeletReady) unless the node already says so, with the pressure
        conditions False where the node has none or the node lifecycle controller set them
        Unknown."""
        now = self.clock.now()
        ready = ready_condition(node)
        if ready is not None and ready.get("status") == "True":
            return
        ts = format_time(now)
        conds = []
        for c in node.conditions:
            if c.get("type") == "Ready":
                continue
            off = CONDITIONS.get(str(c.get("type")))
            if off is not None and c.get("status") == "Unknown":
                c = {"type": c["type"], "status": "False", "reason": off[1][0], "message": off[1][1],
                     "lastHeartbeatTime": ts, "lastTransitionTime": ts}
            conds.append(c)
        have = {c.get("type") for c in conds}
        for ctype, (_, (reason, message)) in CONDITIONS.items():
            if ctype not in have:
                conds.append({"type": ctype, "status": "False", "reason": reason, "message": message,
                              "lastHeartbeatTime": ts, "lastTransitionTime": ts})
        conds.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                      "message": "kubelet is posting ready status", "lastHeartbeatTime": ts,
                      "lastTransitionTime": ts})
        try:
            self.client.patch("Node", "", node.name, {"status": {"conditions": conds}},
                              "application/merge-patch+json", "status")
        except ApiError as e:
            log.debug("kubelet: posting Ready for %s: %s", node.name, e)

    # ---------------------------------------------------------------- leases

    def _renew(self, name: str, now: float, create: bool = False) -> None:
        spec = {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                "renewTime": format_micro_time(now)}
        try:
            try:
                self.client.patch("Lease", NODE_LEASE_NAMESPACE, name, {"spec": spec}, "application/merge-patch+json")
            except NotFound:
                if not create:
                    raise
                try:
                    self.client.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                        "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE},
                                        "spec": spec})
                except AlreadyExists:
                    self.client.patch("Lease", NODE_LEASE_NAMESPACE, name, {"spec": spec},
                                      "application/merge-patch+json")
        except ApiError as e:
            log.debug("kubelet: renewing the lease of %s: %s", name, e)
            return
        self.renewed[name] = now
        self._written[name] = now
        self._oldest = min(self._oldest, now)

    def renew(self) -> int:
        """Renew the lease of every live node whose last renewal is a renew interval old (held
        in memory until ``flush`` when lazy)."""
        now = self.clock.now()
        if now - self._oldest < self.renew_interval - 1e-9:
            return 0
        n = 0
        for name, last in list(self.renewed.items()):
            if name not in self.down and now - last >= self.renew_interval - 1e-9:
                if self.lazy:
                    self.renewed[name] = now
                    self._held = True
                else:
                    self._renew(name, now, create=True)
                n += 1
        self._oldest = min((t for name, t in self.renewed.items() if name not in self.down), default=math.inf)
        return n

    def held(self) -> bool:
        """Whether renewals are waiting to be written (lazy)."""
        return self._held

    def flush(self) -> int:
        """Write every Lease whose latest renewal is not in the store yet; returns how many."""
        if not self._held:
            return 0
        self._held = False
        n = 0
        for name, t in list(self.renewed.items()):
            if self._written.get(name) != t:
                self._renew(name, t, create=True)
                if self._written.get(name) != t:
                    self._held = True  # the write failed: the next flush tries again
                n += 1
        return n

    def unnoticed(self, get_node: Any) -> bool:
        """Whether a failed node still shows Ready (the node lifecycle controller has yet to
        notice it)."""
        for name in self.down:
            n = get_node(name)
            if n is None or self._noticed.get(name) is n:
                continue
            r = ready_condition(n)
            if r is not None and r.get("status") == "True":
                return True
            self._noticed[name] = n  # this version of the node is not Ready: no need to look again
        return False

    def next_wakeup(self, get_node: Any) -> float | None:
        """The next renewal tick, while a failed node still shows Ready."""
        if not self.down or not self.unnoticed(get_node):
            return None
        now = self.clock.now()
        times = [t + self.renew_interval for name, t in self.renewed.items() if name not in self.down]
        if not times:  # nobody renews: tick on the failed nodes' old grid
            last = max(self.renewed.get(name, now) for name in self.down)
            times = [last + (int((now - last) / self.renew_interval) + 1) * self.renew_interval]
        return min(times)

    # ---------------------------------------------------------------- failures

    def fail(self, name: str) -> None:
        self.down.add(name)
        self._noticed.pop(name, None)

    def restore(self, node: Node) -> None:
        self.down.discard(node.name)
        self._renew(node.name, self.clock.now(), create=True)
        self.post_ready(node)
