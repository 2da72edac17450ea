"""Which Pod updates the owner-driven controllers' handlers can leave alone.

Upstream's controllers each look at every Pod update and return early for most of them
(``pkg/controller/replicaset/replica_set.go`` ``updatePod``, the DaemonSet, StatefulSet and Job
controllers' ``updatePod``, the garbage collector's graph builder, the ResourceClaim
controller's ``enqueuePod``). Here those handlers register :func:`unowned_pod_update` as their
``skip_update`` (``ksched.client.informer.EventHandler``), so an informer evaluates it once per
update and calls none of them for a pod that none of them could act on -- the status writes of
a bare pod (no owner, no finalizer, no claims), which is most of what a simulation's pods see.

Divergence: upstream has no shared predicate; each handler's own early returns decide. The
handlers keep theirs, and a test (``tests/controllers/test_pod_update_skip.py``) checks on random
pod pairs that every update this predicate skips leaves each of those controllers' state and
queue as they were.
"""

from __future__ import annotations

from typing import Any

from ksched.api.pod import Pod

__all__ = ["unowned_pod_update"]


def unowned_pod_update(old: Any, new: Any) -> bool:
    """Whether ``old`` -> ``new`` is an update of one pod (same uid) that owns nothing and is
    owned by nothing, before and after: no owner references, no finalizers, not being deleted,
    the same labels, and no resource claims (in spec or status)."""
    if not isinstance(new, Pod) or not isinstance(old, Pod):
        return False
    if new.owner_references or old.owner_references or new.finalizers or old.finalizers:
        return False
    if new.deletion_timestamp is not None or old.deletion_timestamp is not None or old.uid != new.uid:
        return False
    if old.labels != new.labels:
        return False
    raw = new.raw
    spec = raw.get("spec")
    if not isinstance(spec, dict) or spec.get("resourceClaims"):
        return False
    status = raw.get("status")
    if status is None:
        return True
    if not isinstance(status, dict):
        return False
    return not status.get("resourceClaimStatuses") and not status.get("extendedResourceClaimStatus")
