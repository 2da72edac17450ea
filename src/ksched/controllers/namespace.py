"""The namespace controller: empties a namespace being deleted, then finalizes it, as upstream's
``pkg/controller/namespace/namespace_controller.go`` with ``deletion/namespaced_resources_deleter.go``
and ``deletion/status_condition_utils.go``.

A deleted namespace is Terminating (the API server set its deletionTimestamp and phase). Five
seconds later (``namespaceDeletionGracePeriod``) the controller deletes every namespaced object
in it (Background propagation), lists what is left and records the five deletion conditions
with upstream's reasons and messages. While content remains it looks again after
``estimate / 2 + 1`` seconds, the estimate being the longest grace period of the namespace's
running pods (until that much time has passed since the deletion), or 15 s for objects held by
finalizers. Once nothing is left it removes the ``kubernetes`` finalizer through
``namespaces/finalize`` and the API server deletes the namespace.

Divergences: the resources are the kinds ksched serves (no discovery of aggregated APIs, so the
discovery and group-version-parsing conditions are always their "ok" variants).
"""

from __future__ import annotations

import logging
from typing import Any

from ksched.api.errors import ApiError, Conflict, NotFound
from ksched.api.kinds import KINDS
from ksched.api.meta import KubeObject, format_time
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.clock import Clock
from ksched.controllers.controller import Controller

__all__ = ["FINALIZER_KUBERNETES", "NAMESPACE_DELETION_GRACE_PERIOD", "NamespaceController"]

log = logging.getLogger(__name__)

FINALIZER_KUBERNETES = "kubernetes"
NAMESPACE_DELETION_GRACE_PERIOD = 5.0
FINALIZER_ESTIMATE_SECONDS = 15

CONDITION_TYPES = ("NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
                   "NamespaceDeletionContentFailure", "NamespaceContentRemaining", "NamespaceFinalizersRemaining")
OK_REASONS = {
    "NamespaceDeletionDiscoveryFailure": "ResourcesDiscovered",
    "NamespaceDeletionGroupVersionParsingFailure": "ParsedGroupVersions",
    "NamespaceDeletionContentFailure": "ContentDeleted",
    "NamespaceContentRemaining": "ContentRemoved",
    "NamespaceFinalizersRemaining": "ContentHasNoFinalizers",
}
OK_MESSAGES = {
    "NamespaceDeletionDiscoveryFailure": "All resources successfully discovered",
    "NamespaceDeletionGroupVersionParsingFailure": "All legacy kube types successfully parsed",
    "NamespaceDeletionContentFailure": "All content successfully deleted, may be waiting on finalization",
    "NamespaceContentRemaining": "All content successfully removed",
    "NamespaceFinalizersRemaining": "All content-preserving finalizers finished",
}


def _gvr(cls: type[KubeObject]) -> tuple[str, str, str]:
    group, _, version = cls.API_VERSION.rpartition("/")
    return group, version, cls.PLURAL


def update_conditions(status: dict[str, Any], new: list[dict[str, Any]], now: float) -> bool:
    """updateConditions: every type gets its new condition or its "ok" variant; an existing one
    changes only when status, reason or message do (its time only when the status does).
    Returns whether anything changed."""
    conds: list[dict[str, Any]] = [dict(c) for c in status.get("conditions") or ()]
    changed = False
    ts = format_time(now)
    for ctype in CONDITION_TYPES:
        want = next((c for c in new if c["type"] == ctype), None) or {
            "type": ctype, "status": "False", "lastTransitionTime": ts, "reason": OK_REASONS[ctype],
            "message": OK_MESSAGES[ctype]}
        old = next((c for c in conds if c.get("type") == ctype), None)
        if old is None:
            conds.append(want)
            changed = True
        elif (old.get("status"), old.get("message"), old.get("reason")) != \
                (want["status"], want["message"], want["reason"]):
            if old.get("status") != want["status"]:
                old["lastTransitionTime"] = ts
            old.update(status=want["status"], reason=want["reason"], message=want["message"])
            changed = True
    if changed:
        status["conditions"] = conds
    return changed


class NamespaceController(Controller):
    """Keys are namespace names."""

    name = "namespace"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.namespaces = informers.informer("Namespace")
        self.namespaces.add_handler(EventHandler(self._enqueue, lambda old, new: self._enqueue(new)))

    def _enqueue(self, obj: Any) -> None:
        ns = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if ns.deletion_timestamp is not None:
            # Give HA API servers time to see the deletion before content is removed.
            self.queue.add_after(ns.name, NAMESPACE_DELETION_GRACE_PERIOD)

    def sync(self, key: Any) -> None:
        try:
            ns = self.client.get("Namespace", "", key)
        except NotFound:
            return
        if ns.deletion_timestamp is None:
            return
        ns = self._retry_on_conflict(ns, self._ensure_terminating)
        if ns is None or ns.deletion_timestamp is None:
            return
        if not (ns.raw.get("spec") or {}).get("finalizers"):
            return  # finalized already
        estimate = self._delete_all_content(ns)
        if estimate > 0:
            wait = estimate // 2 + 1
            log.debug("namespace %s: content remaining, waiting %d seconds", key, wait)
            self.queue.add_after(key, wait)
            return
        self._retry_on_conflict(ns, self._finalize)

    # ---------------------------------------------------------------- namespace writes

    def _retry_on_conflict(self, ns: KubeObject, fn: Any) -> KubeObject | None:
        while True:
            try:
                return fn(ns)  # type: ignore[no-any-return]
            except NotFound:
                return None
            except Conflict:
                fresh = self.client.get("Namespace", "", ns.name)
                if fresh.uid != ns.uid:
                    raise
                ns = fresh

    def _ensure_terminating(self, ns: KubeObject) -> KubeObject:
        if (ns.raw.get("status") or {}).get("phase") == "Terminating":
            return ns
        raw = dict(ns.raw)
        raw["status"] = {**(ns.raw.get("status") or {}), "phase": "Terminating"}
        return self.client.update_status(raw)  # type: ignore[no-any-return]

    def _finalize(self, ns: KubeObject) -> KubeObject:
        raw = dict(ns.raw)
        spec = dict(ns.raw.get("spec") or {})
        spec["finalizers"] = sorted({f for f in spec.get("finalizers") or () if f != FINALIZER_KUBERNETES})
        raw["spec"] = spec
        return self.client.update(raw, "finalize")  # type: ignore[no-any-return]

    # ---------------------------------------------------------------- content

    def _namespaced_kinds(self) -> list[type[KubeObject]]:
        """Every kind the API serves, custom kinds of established CRDs included (upstream asks
        discovery): the client's scheme where it has one (refreshed from the CRDs over REST)."""
        scheme = getattr(self.client, "scheme", None)
        if scheme is None:
            return list(KINDS.values())
        refresh = getattr(self.client, "discover_custom_kinds", None)
        if refresh is not None:
            refresh()
        return list(scheme.classes())

    def _delete_all_content(self, ns: KubeObject) -> int:
        """deleteAllContent: the estimate in seconds (0: everything is gone). Raises an ApiError
        (retried with backoff) when something could not be deleted."""
        estimate = 0
        errors: list[str] = []
        remaining: dict[tuple[str, str, str], int] = {}
        finalizers: dict[str, int] = {}
        deleted_at = ns.deletion_timestamp or self.clock.now()
        for cls in self._namespaced_kinds():
            if not cls.NAMESPACED:
                continue
            try:
                est, left, fins = self._delete_kind(cls, ns.name, deleted_at)
            except _ContentError as e:
                errors.append(str(e))
                est, left, fins = e.estimate, e.remaining, {}
            except ApiError as e:
                errors.append(e.message)
                continue
            estimate = max(estimate, est)
            if left:
                remaining[_gvr(cls)] = left
                for f, n in fins.items():
                    finalizers[f] = finalizers.get(f, 0) + n
        new: list[dict[str, Any]] = []
        ts = format_time(self.clock.now())
        if remaining:
            parts = sorted(f"{r}.{g} has {n} resource instances" for (g, _, r), n in remaining.items())
            new.append({"type": "NamespaceContentRemaining", "status": "True", "lastTransitionTime": ts,
                        "reason": "SomeResourcesRemain",
                        "message": f"Some resources are remaining: {', '.join(parts)}"})
        if finalizers:
            parts = sorted(f"{f} in {n} resource instances" for f, n in finalizers.items())
            new.append({"type": "NamespaceFinalizersRemaining", "status": "True", "lastTransitionTime": ts,
                        "reason": "SomeFinalizersRemain",
                        "message": f"Some content in the namespace has finalizers remaining: {', '.join(parts)}"})
        if errors:
            msgs = sorted(errors)
            new.append({"type": "NamespaceDeletionContentFailure", "status": "True", "lastTransitionTime": ts,
                        "reason": "ContentDeletionFailed",
                        "message": f"Failed to delete all resource types, {len(msgs)} remaining: {', '.join(msgs)}"})
        status = dict(ns.raw.get("status") or {})
        if update_conditions(status, new, self.clock.now()):
            raw = dict(ns.raw)
            raw["status"] = status
            try:
                self.client.update_status(raw)
            except ApiError as e:
                log.debug("namespace %s: status conditions not updated: %s", ns.name, e)
        if errors:
            raise _NamespaceError(errors)
        return estimate

    def _delete_kind(self, cls: type[KubeObject], namespace: str, deleted_at: float) -> tuple[int, int, dict[str, int]]:
        """deleteAllContentForGroupVersionResource: (estimate, remaining, finalizers on them)."""
        estimate = 0
        if cls is Pod:
            items, _ = self.client.list("Pod", namespace)
            for p in items:
                if isinstance(p, Pod) and not p.is_terminal:
                    estimate = max(estimate, p.termination_grace_period_seconds)
            if self.clock.now() - deleted_at >= estimate:
                estimate = 0
        items, _ = self.client.list(cls.KIND, namespace)
        for o in items:
            if o.deletion_timestamp is not None:
                continue  # being deleted already (upstream's delete-collection would be a no-op)
            try:
                self.client.delete(cls.KIND, namespace, o.name, propagation_policy="Background")
            except NotFound:
                pass
        left, _ = self.client.list(cls.KIND, namespace)
        if not left:
            return 0, 0, {}
        fins: dict[str, int] = {}
        for o in left:
            for f in o.finalizers:
                fins[f] = fins.get(f, 0) + 1
        if estimate:
            return estimate, len(left), fins
        if fins:
            return FINALIZER_ESTIMATE_SECONDS, len(left), fins
        group, version, plural = _gvr(cls)
        raise _ContentError(f"unexpected items still remain in namespace: {namespace} for gvr: "
                            f"{{{group} {version} {plural}}}", estimate, len(left))


class _ContentError(Exception):
    def __init__(self, message: str, estimate: int, remaining: int) -> None:
        super().__init__(message)
        self.estimate = estimate
        self.remaining = remaining


class _NamespaceError(ApiError):
    """Content could not be deleted: the sync is retried with backoff."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
