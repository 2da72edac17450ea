"""The disruption controller: keeps every PodDisruptionBudget's status current as its pods
come, go and turn ready (upstream's ``pkg/controller/disruption/disruption.go``): expected
pods, healthy pods (ready, not terminating, not recently disrupted), desired healthy,
disruptions allowed and the ``DisruptionAllowed`` condition (a full metav1.Condition: message,
observedGeneration, lastTransitionTime kept until the status changes).

The ``pods/eviction`` subresource (in the API server) reads that status and charges an
eviction to it; this controller recomputes it from the pods afterwards.

Divergences: the expected count is the number of matching pods (upstream asks the pods'
controllers for their scale when ``minAvailable`` is a percentage or ``maxUnavailable`` is
set); a pod stays in ``disruptedPods`` until a later change of its namespace recomputes the
budget after the timeout (upstream re-checks at the timeout).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ksched.api.meta import format_time, parse_time
from ksched.api.pdb import PodDisruptionBudget, set_disruption_allowed_condition
from ksched.api.pod import Pod
from ksched.client.informer import EventHandler, InformerFactory
from ksched.clock import Clock
from ksched.controllers.controller import Controller

__all__ = ["DISRUPTED_POD_TIMEOUT", "DisruptionController", "compute_pdb_status", "is_pod_ready"]

# Upstream keeps a disrupted pod out of the healthy count for this long after an eviction
# (DeletionTimeout in the disruption controller).
DISRUPTED_POD_TIMEOUT = 120.0


def is_pod_ready(pod: Pod) -> bool:
    c = pod.condition("Ready")
    return c is not None and c.get("status") == "True"


def _scaled(v: int | str, total: int) -> int:
    if isinstance(v, str) and v.endswith("%"):
        return math.ceil(int(v[:-1]) * total / 100)
    return int(v)


def compute_pdb_status(pdb: PodDisruptionBudget, pods: Iterable[Pod], now: float,
                       disrupted: dict[str, float]) -> dict[str, Any]:
    """The ``status`` a PDB should have given the pods of its namespace.

    ``disrupted`` maps pod names to the time they were evicted (``status.disruptedPods``).
    """
    matched = [p for p in pods if pdb.matches(p) and not p.is_terminal]
    expected = len(matched)
    still_disrupted: dict[str, float] = {}
    healthy = 0
    for p in matched:
        t = disrupted.get(p.name)
        if t is not None and p.deletion_timestamp is None and now < t + DISRUPTED_POD_TIMEOUT:
            still_disrupted[p.name] = t
            continue
        if p.deletion_timestamp is None and is_pod_ready(p):
            healthy += 1
    if pdb.max_unavailable is not None:
        desired = max(0, expected - _scaled(pdb.max_unavailable, expected))
    elif pdb.min_available is not None:
        desired = _scaled(pdb.min_available, expected)
    else:
        desired = 0
    allowed = max(0, healthy - desired)
    status = {
        "observedGeneration": pdb.generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptedPods": {k: format_time(v) for k, v in still_disrupted.items()},
        "conditions": (pdb.raw.get("status") or {}).get("conditions") or [],
    }
    set_disruption_allowed_condition(status, format_time(now))
    return status


class DisruptionController(Controller):
    """Keys are namespaces: a change to a pod or budget recomputes the budgets of its namespace."""

    name = "disruption"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.pdbs = informers.informer("PodDisruptionBudget")
        self.pods = informers.informer("Pod")
        self.pdbs.add_handler(EventHandler(self._on_pdb, lambda old, new: self._on_pdb(new), self._on_pdb))
        self.pods.add_handler(EventHandler(self._on_pod, self._on_pod_update, self._on_pod))

    def _on_pdb(self, obj: Any) -> None:
        self.queue.add(_namespace(obj))

    def _on_pod(self, obj: Any) -> None:
        if not len(self.pdbs.indexer):
            return  # no budget anywhere (the common case): no namespace to look up
        ns = _namespace(obj)
        if self.pdbs.indexer.by_index("namespace", ns):
            self.queue.add(ns)

    def _on_pod_update(self, old: Any, new: Any) -> None:
        """``_on_pod(new)`` (called by the informer without a wrapper of its own)."""
        if not self.pdbs.indexer.items:  # (``len(indexer)`` without the call)
            return
        self._on_pod(new)

    def sync(self, key: Any) -> None:
        pdbs = self.pdbs.indexer.by_index("namespace", key)
        if not pdbs:
            return
        pods = self.pods.indexer.by_index("namespace", key)
        now = self.clock.now()
        for pdb in sorted(pdbs, key=lambda p: p.name):
            assert isinstance(pdb, PodDisruptionBudget)
            disrupted = {k: t for k, v in pdb.disrupted_pods.items() if (t := parse_time(v)) is not None}
            status = compute_pdb_status(pdb, pods, now, disrupted)  # type: ignore[arg-type]
            if status != pdb.raw.get("status"):
                raw = dict(pdb.raw)
                raw["status"] = status
                self.client.update_status(raw)


def _namespace(obj: Any) -> str:
    target = getattr(obj, "obj", obj)  # DeletedFinalStateUnknown carries the last state
    return str(target.namespace)
