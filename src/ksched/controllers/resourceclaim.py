"""The resourceclaim controller (``pkg/controller/resourceclaim/controller.go``): ResourceClaims
generated from ResourceClaimTemplates for the pods that reference them, the pods'
``status.resourceClaimStatuses``, and the claims' ``reservedFor`` and allocation cleanup.

* A pod referencing a template gets one claim per such entry, named ``<pod>-<claim>-`` plus
  five random characters (both parts cut proportionally when the base would be longer than 57
  characters), annotated ``resource.kubernetes.io/pod-claim-name``, labelled and annotated as the
  template's metadata says, owned by the pod (``controller: true``), with the template's spec.
  An orphan with that annotation owned by the pod is reused. The claim names go to the pod's
  ``status.resourceClaimStatuses``.
* A pod that has a node already and whose claim is allocated is added to ``reservedFor``.
* ``reservedFor`` entries of deleted or finished pods are dropped; a claim reserved for nobody
  loses its allocation, then the ``resource.kubernetes.io/delete-protection`` finalizer.
* A generated claim whose pod is finished or replaced (another UID) is deleted; one whose pod
  is gone is left to the garbage collector (it owns the claim), as upstream. The scheduler's
  claim for a pod's DRA-backed extended resources (annotated
  ``resource.kubernetes.io/extended-resource-claim: "true"``, named in the pod's
  ``status.extendedResourceClaimStatus``) is looked after the same way.

Known divergences: the pod's status is written with a merge patch, not server-side apply; no
metrics, no events.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from ksched.api.errors import ApiError, NotFound
from ksched.api.pod import Pod
from ksched.api.resource import (
    ANNOTATION_EXTENDED_RESOURCE_CLAIM,
    ANNOTATION_POD_CLAIM_NAME,
    FINALIZER_DELETE_PROTECTION,
    ResourceClaim,
    ResourceClaimTemplate,
    pod_claim_refs,
)
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.clock import Clock
from ksched.controllers.controller import Controller
from ksched.controllers.podupdates import unowned_pod_update

__all__ = ["ResourceClaimController", "generate_name"]

log = logging.getLogger(__name__)

MAX_BASE = 57


def generate_name(pod_name: str, claim_name: str) -> str:
    """The claim's generateName: ``<pod>-<claim>-``, both parts cut proportionally when the base
    is longer than 57 characters (the apiserver appends 5 random characters)."""
    base = f"{pod_name}-{claim_name}"
    if len(base) > MAX_BASE:
        total = len(pod_name) + len(claim_name)
        pod_name = pod_name[: len(pod_name) * MAX_BASE // total]
        claim_name = claim_name[: len(claim_name) * MAX_BASE // total]
        base = f"{pod_name}-{claim_name}".rstrip("-")
    return base + "-"


def _unwrap(o: Any) -> Any:
    return o.obj if isinstance(o, DeletedFinalStateUnknown) else o


def _pod_done(pod: Pod) -> bool:
    """isPodDone: terminal, or being deleted before it ever got a node."""
    return pod.is_terminal or (pod.deletion_timestamp is not None and not pod.node_name)


def _owning_pod(claim: ResourceClaim) -> tuple[str, str]:
    if ANNOTATION_POD_CLAIM_NAME not in claim.annotations and \
            claim.annotations.get(ANNOTATION_EXTENDED_RESOURCE_CLAIM) != "true":
        return "", ""
    for r in claim.owner_references:
        if r.controller and r.kind == "Pod" and r.api_version in ("v1", ""):
            return r.name, r.uid
    return "", ""


class ResourceClaimController(Controller):
    name = "resourceclaim"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.pods = informers.informer("Pod")
        self.claims = informers.informer("ResourceClaim")
        self.templates = informers.informer("ResourceClaimTemplate")
        self.pods.add_handler(EventHandler(self._pod_changed, lambda _o, n: self._pod_changed(n), self._pod_deleted,
                                            skip_update=unowned_pod_update))
        self.claims.add_handler(EventHandler(self._claim_changed, lambda _o, n: self._claim_changed(n),
                                             self._claim_changed))
        self.templates.add_handler(EventHandler(self._template_changed, lambda _o, n: self._template_changed(n),
                                                None))

    # ---------------------------------------------------------------- events

    def _pod_changed(self, pod: Any) -> None:
        if not isinstance(pod, Pod):
            return
        if pod_claim_refs(pod):
            self.queue.add(("pod", pod.key))
        for name in self._claim_names(pod):
            self.queue.add(("claim", f"{pod.namespace}/{name}"))

    def _pod_deleted(self, obj: Any) -> None:
        pod = _unwrap(obj)
        if isinstance(pod, Pod):
            for name in self._claim_names(pod):
                self.queue.add(("claim", f"{pod.namespace}/{name}"))

    def _claim_changed(self, obj: Any) -> None:
        c = _unwrap(obj)
        if isinstance(c, ResourceClaim):
            self.queue.add(("claim", c.key))
            pod_name, _ = _owning_pod(c)
            if pod_name:
                self.queue.add(("pod", f"{c.namespace}/{pod_name}"))

    def _template_changed(self, obj: Any) -> None:
        t = _unwrap(obj)
        if not isinstance(t, ResourceClaimTemplate):
            return
        for p in self.pods.list():
            if isinstance(p, Pod) and p.namespace == t.namespace and any(
                    r.resource_claim_template_name == t.name for r in pod_claim_refs(p)):
                self.queue.add(("pod", p.key))

    @staticmethod
    def _claim_names(pod: Pod) -> list[str]:
        status = pod.raw.get("status")
        if not status:
            if not pod.raw.get("spec", {}).get("resourceClaims"):
                return []
        elif "resourceClaimStatuses" not in status and "extendedResourceClaimStatus" not in status \
                and not pod_claim_refs(pod):
            return []  # (a pod with a status and no claims: the common case)
        names = [r.resource_claim_name for r in pod_claim_refs(pod) if r.resource_claim_name]
        for st in (status or {}).get("resourceClaimStatuses") or ():
            if (st or {}).get("resourceClaimName"):
                names.append(st["resourceClaimName"])
        ext = ((status or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if ext:
            names.append(ext)
        return names

    # ---------------------------------------------------------------- sync

    def sync(self, key: Any) -> None:
        what, k = key
        if what == "pod":
            self._sync_pod(k)
        else:
            self._sync_claim(k)

    def _claim(self, namespace: str, name: str) -> ResourceClaim | None:
        c = self.claims.get(f"{namespace}/{name}")
        return c if isinstance(c, ResourceClaim) else None

    def _sync_pod(self, key: str) -> None:
        pod = self.pods.get(key)
        if not isinstance(pod, Pod) or pod.deletion_timestamp is not None or _pod_done(pod):
            return
        statuses = {(s or {}).get("name"): (s or {}).get("resourceClaimName")
                    for s in (pod.raw.get("status") or {}).get("resourceClaimStatuses") or ()}
        new_statuses = dict(statuses)
        for ref in pod_claim_refs(pod):
            if ref.resource_claim_template_name:
                name = statuses.get(ref.name)
                if name and self._claim(pod.namespace, name) is not None:
                    continue
                new_statuses[ref.name] = self._claim_for(pod, ref.name, ref.resource_claim_template_name)
        if new_statuses != statuses:
            entries = [{"name": r.name, "resourceClaimName": new_statuses[r.name]}
                       for r in pod_claim_refs(pod) if r.resource_claim_template_name and new_statuses.get(r.name)]
            self.client.patch("Pod", pod.namespace, pod.name, {"status": {"resourceClaimStatuses": entries}},
                              "application/merge-patch+json", "status")
        if pod.node_name:
            self._reserve_for_scheduled_pod(pod, new_statuses)

    def _claim_for(self, pod: Pod, pod_claim: str, template_name: str) -> str:
        """An existing orphan claim of the pod for this entry, or a new one from the template."""
        for c in self.claims.list():
            if isinstance(c, ResourceClaim) and c.namespace == pod.namespace and \
                    c.annotations.get(ANNOTATION_POD_CLAIM_NAME) == pod_claim and _owning_pod(c)[1] == pod.uid:
                return c.name
        t = self.templates.get(f"{pod.namespace}/{template_name}")
        if not isinstance(t, ResourceClaimTemplate):
            raise NotFound(f'resourceclaimtemplate.resource.k8s.io "{template_name}" not found')
        md = t.claim_metadata
        annotations = dict(md.get("annotations") or {})
        annotations[ANNOTATION_POD_CLAIM_NAME] = pod_claim
        raw = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"generateName": generate_name(pod.name, pod_claim), "namespace": pod.namespace,
                         "annotations": annotations,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid,
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": copy.deepcopy(t.claim_spec),
        }
        if md.get("labels"):
            raw["metadata"]["labels"] = dict(md["labels"])
        created = self.client.create(raw)
        return str(created.name)

    def _reserve_for_scheduled_pod(self, pod: Pod, statuses: dict[str, Any]) -> None:
        names = [r.resource_claim_name or statuses.get(r.name) for r in pod_claim_refs(pod)]
        for name in names:
            if not name:
                continue
            c = self._claim(pod.namespace, name)
            if c is None or c.allocation is None or c.reserved_for_pod(pod.uid):
                continue
            raw = c.deepcopy_raw()
            raw.setdefault("status", {}).setdefault("reservedFor", []).append(
                {"resource": "pods", "name": pod.name, "uid": pod.uid})
            self.client.update_status(raw)

    def _sync_claim(self, key: str) -> None:
        c = self.claims.get(key)
        if not isinstance(c, ResourceClaim):
            return
        valid = []
        for r in c.reserved_for:
            if r.get("resource") != "pods" or r.get("apiGroup"):
                valid.append(r)
                continue
            p = self.pods.get(f"{c.namespace}/{r.get('name', '')}")
            if isinstance(p, Pod) and p.uid == r.get("uid") and not p.is_terminal:
                valid.append(r)
        released = False
        if len(valid) < len(c.reserved_for):
            # The transition from "used" to "not used any more" deallocates (a claim a driver
            # allocated without reserving is left alone).
            raw = c.deepcopy_raw()
            st = raw.setdefault("status", {})
            st["reservedFor"] = valid
            if not valid:
                released = True
                st.pop("reservedFor", None)
                st.pop("allocation", None)
                st.pop("devices", None)
            c = self.client.update_status(raw)
            if not isinstance(c, ResourceClaim):
                return
        if FINALIZER_DELETE_PROTECTION in c.finalizers and not c.reserved_for and \
                (released or c.deletion_timestamp is not None):
            if c.allocation is not None:
                raw = c.deepcopy_raw()
                raw["status"].pop("allocation", None)
                raw["status"].pop("devices", None)
                c = self.client.update_status(raw)
            raw = c.deepcopy_raw()
            raw["metadata"]["finalizers"] = [f for f in c.finalizers if f != FINALIZER_DELETE_PROTECTION]
            c = self.client.update(raw)
            if not isinstance(c, ResourceClaim):
                return
        if c.reserved_for or c.deletion_timestamp is not None:
            return
        pod_name, pod_uid = _owning_pod(c)
        if not pod_name:
            return
        p = self.pods.get(f"{c.namespace}/{pod_name}")
        if not isinstance(p, Pod):
            return  # perhaps not seen yet; if it is gone, the garbage collector deletes the claim
        if p.uid != pod_uid or _pod_done(p) or p.is_terminal:
            try:
                self.client.delete("ResourceClaim", c.namespace, c.name)
            except NotFound:
                pass
            except ApiError as e:
                log.debug("deleting claim %s: %s", c.key, e)
                raise
