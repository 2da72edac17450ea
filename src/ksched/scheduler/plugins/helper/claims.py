"""The queueing hint four volume plugins give for a PersistentVolumeClaim event: the pod may now
fit when the claim is one of its own (upstream repeats it in nodevolumelimits, volumebinding,
volumezone and volumerestrictions, each under its own function name in the error)."""

from __future__ import annotations

from typing import Any

from ksched.api.pod import Pod
from ksched.api.volumes import PersistentVolumeClaim, volume_claim_name
from ksched.scheduler.framework.events import QueueingHint

__all__ = ["claim_event_hint"]


def claim_event_hint(pod: Pod, new: Any, upstream_func: str, ephemeral: bool) -> QueueingHint:
    """QUEUE when ``new`` (a PersistentVolumeClaim) is a claim of ``pod`` in its namespace, else
    QUEUE_SKIP; ``ephemeral``: generic ephemeral volumes' claims count too (as
    ``ephemeral.VolumeClaimName``). Anything but a claim is a TypeError naming ``upstream_func``."""
    if not isinstance(new, PersistentVolumeClaim):
        raise TypeError(f"unexpected objects in {upstream_func}: {new!r}")
    if new.namespace != pod.namespace:
        return QueueingHint.QUEUE_SKIP
    for v in pod.volumes:
        claim = volume_claim_name(pod, v)
        if claim is not None and claim[0] == new.name and (ephemeral or not claim[1]):
            return QueueingHint.QUEUE
    return QueueingHint.QUEUE_SKIP
