"""Creating, updating and deleting a StatefulSet's pods and claims, with upstream's events
(``pkg/controller/statefulset/stateful_pod_control.go``): a pod's missing claims are created
before it, with the owner references the PVC retention policy asks for; a claim being deleted
blocks its pod.
"""

from __future__ import annotations

from typing import Any

from ksched.api.apps import StatefulSet
from ksched.api.errors import AlreadyExists, ApiError, Conflict, InternalError, NotFound
from ksched.api.pod import Pod
from ksched.api.storage import PersistentVolumeClaim
from ksched.client.informer import SharedInformer
from ksched.client.record import EventRecorder
from ksched.controllers.statefulset.utils import (
    claim_has_stale_pod_ref,
    claim_owner_up_to_date,
    claims_for,
    identity_matches,
    ordinal_of,
    storage_matches,
    update_identity,
    update_storage,
    with_claim_owner_refs,
)

__all__ = ["StatefulPodControl"]


class StatefulPodControl:
    def __init__(self, client: Any, recorder: EventRecorder, claims: SharedInformer) -> None:
        self.client = client
        self.recorder = recorder
        self.claims = claims

    # ---- events ---------------------------------------------------------------------------

    def _pod_event(self, verb: str, s: StatefulSet, pod_name: str, err: ApiError | None) -> None:
        if err is None:
            self.recorder.event(s, "Normal", f"Successful{verb.title()}", verb.title(),
                                f"{verb} Pod {pod_name} in StatefulSet {s.name} successful")
        else:
            self.recorder.event(s, "Warning", f"Failed{verb.title()}", verb.title(),
                                f"{verb} Pod {pod_name} in StatefulSet {s.name} failed error: {err.message}")

    def _claim_event(self, verb: str, s: StatefulSet, pod_name: str, claim: str, err: ApiError | None) -> None:
        if err is None:
            self.recorder.event(s, "Normal", f"Successful{verb.title()}", verb.title(),
                                f"{verb} Claim {claim} Pod {pod_name} in StatefulSet {s.name} success")
        else:
            self.recorder.event(s, "Warning", f"Failed{verb.title()}", verb.title(),
                                f"{verb} Claim {claim} for Pod {pod_name} in StatefulSet {s.name} failed error: "
                                f"{err.message}")

    def _claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        c = self.claims.get(f"{namespace}/{name}")
        return c if isinstance(c, PersistentVolumeClaim) else None

    # ---- claims ---------------------------------------------------------------------------

    def create_missing_claims(self, s: StatefulSet, pod: Pod) -> None:
        """Create the pod's claims that do not exist (``createPersistentVolumeClaims``)."""
        errors: list[ApiError] = []
        for raw in claims_for(s, ordinal_of(pod)):
            name = raw["metadata"]["name"]
            existing = self._claim(s.namespace, name)
            if existing is None:
                try:
                    self.client.create(with_claim_owner_refs(raw, None, s, pod))
                except AlreadyExists:
                    continue
                except ApiError as e:
                    self._claim_event("create", s, pod.name, name, e)
                    errors.append(InternalError(f"failed to create PVC {name}: {e.message}"))
                    continue
                self._claim_event("create", s, pod.name, name, None)
            elif existing.deletion_timestamp is not None:
                errors.append(Conflict(f"pvc {name} is being deleted"))
        if errors:
            raise errors[0]

    def claims_match_retention_policy(self, s: StatefulSet, pod: Pod) -> bool:
        for raw in claims_for(s, ordinal_of(pod)):
            c = self._claim(s.namespace, raw["metadata"]["name"])
            if c is not None and not claim_owner_up_to_date(c, s, pod):
                return False
        return True

    def update_claims_for_retention_policy(self, s: StatefulSet, pod: Pod) -> None:
        for raw in claims_for(s, ordinal_of(pod)):
            c = self._claim(s.namespace, raw["metadata"]["name"])
            if c is None or claim_owner_up_to_date(c, s, pod):
                continue
            try:
                self.client.update(with_claim_owner_refs(dict(c.raw), c, s, pod))
            except NotFound:
                continue

    def claim_is_stale(self, s: StatefulSet, pod: Pod) -> bool:
        """A claim left by an earlier pod of the same name (an owner reference to another UID)."""
        for raw in claims_for(s, ordinal_of(pod)):
            c = self._claim(s.namespace, raw["metadata"]["name"])
            if c is not None and claim_has_stale_pod_ref(c, pod):
                return True
        return False

    # ---- pods -----------------------------------------------------------------------------

    def create_pod(self, s: StatefulSet, raw: dict[str, Any], pod: Pod) -> None:
        """Claims first, then the pod (``CreateStatefulPod``)."""
        try:
            self.create_missing_claims(s, pod)
        except ApiError as e:
            self._pod_event("create", s, pod.name, e)
            raise
        try:
            self.client.create(raw)
        except AlreadyExists:
            raise
        except ApiError as e:
            self._pod_event("create", s, pod.name, e)
            raise
        self.update_claims_for_retention_policy(s, pod)
        self._pod_event("create", s, pod.name, None)

    def update_pod(self, s: StatefulSet, pod: Pod) -> None:
        """Bring a pod's identity and storage in line with the set (``UpdateStatefulPod``)."""
        raw = pod.deepcopy_raw()
        consistent = True
        ordinal = ordinal_of(pod)
        try:
            if not identity_matches(s, pod):
                update_identity(s, raw, ordinal)
                consistent = False
            if not storage_matches(s, pod):
                update_storage(s, raw, ordinal)
                consistent = False
                self.create_missing_claims(s, pod)
            if not self.claims_match_retention_policy(s, pod):
                self.update_claims_for_retention_policy(s, pod)
                consistent = False
            if consistent:
                return
            self.client.update(raw)
        except ApiError as e:
            self._pod_event("update", s, pod.name, e)
            raise
        self._pod_event("update", s, pod.name, None)

    def delete_pod(self, s: StatefulSet, pod: Pod) -> None:
        try:
            self.client.delete("Pod", pod.namespace, pod.name)
        except ApiError as e:
            self._pod_event("delete", s, pod.name, e)
            raise
        self._pod_event("delete", s, pod.name, None)
