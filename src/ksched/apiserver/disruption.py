"""PodDisruptionBudget status, as the disruption controller computes it: expected pods, healthy
pods (ready, not terminating, not already disrupted), desired healthy and disruptions allowed."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ksched.api.meta import format_time
from ksched.api.pdb import PodDisruptionBudget
from ksched.api.pod import Pod

__all__ = ["compute_pdb_status", "is_pod_ready", "pdb_matches"]

# Upstream keeps a disrupted pod out of the healthy count for this long after an eviction
# (DeletionTimeout in the disruption controller).
DISRUPTED_POD_TIMEOUT = 120.0


def is_pod_ready(pod: Pod) -> bool:
    c = pod.condition("Ready")
    return c is not None and c.get("status") == "True"


def pdb_matches(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    return pdb.namespace == pod.namespace and pdb.selector.matches(pod.labels)


def _scaled(v: int | str, total: int) -> int:
    if isinstance(v, str) and v.endswith("%"):
        return math.ceil(int(v[:-1]) * total / 100)
    return int(v)


def compute_pdb_status(pdb: PodDisruptionBudget, pods: Iterable[Pod], now: float,
                       disrupted: dict[str, float]) -> dict[str, Any]:
    """The ``status`` a PDB should have given the pods of its namespace.

    ``disrupted`` maps pod names to the time they were evicted (``status.disruptedPods``).
    """
    matched = [p for p in pods if pdb_matches(pdb, p) and not p.is_terminal]
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
    return {
        "observedGeneration": pdb.generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptedPods": {k: format_time(v) for k, v in still_disrupted.items()},
        "conditions": [{
            "type": "DisruptionAllowed",
            "status": "True" if allowed > 0 else "False",
            "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
        }],
    }
