"""The kinds ksched knows: API group/version, plural resource name, scope, typed class."""

from __future__ import annotations

from typing import Any

from ksched.api.admissionregistration import ValidatingWebhookConfiguration
from ksched.api.apiextensions import CustomResourceDefinition
from ksched.api.apps import ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet
from ksched.api.batch import CronJob, Job
from ksched.api.config import ConfigMap, Secret
from ksched.api.endpointslice import EndpointSlice
from ksched.api.event import Event
from ksched.api.lease import Lease
from ksched.api.limitrange import LimitRange
from ksched.api.meta import KubeObject
from ksched.api.namespace import Namespace
from ksched.api.node import Node
from ksched.api.pdb import PodDisruptionBudget
from ksched.api.pod import Pod
from ksched.api.priorityclass import PriorityClass
from ksched.api.rbac import ClusterRole, ClusterRoleBinding, Role, RoleBinding
from ksched.api.resource import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from ksched.api.resourcequota import ResourceQuota
from ksched.api.runtimeclass import RuntimeClass
from ksched.api.service import Service
from ksched.api.serviceaccount import ServiceAccount
from ksched.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass

__all__ = ["KINDS", "KIND_BY_PLURAL", "UnknownKindError", "kind_class", "parse_object"]

KINDS: dict[str, type[KubeObject]] = {
    c.KIND: c
    for c in (Namespace, Node, Pod, Event, PriorityClass, PodDisruptionBudget, PersistentVolume,
              PersistentVolumeClaim, StorageClass, CSINode, Lease, Job, CronJob,
              DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate)
}
# Services and their endpoints, configuration, identities, namespace limits and quotas, runtime
# classes, RBAC, custom resource definitions, webhook configurations (stored; no webhook is called).
KINDS.update({c.KIND: c for c in (
    Service, EndpointSlice, ConfigMap, Secret, ServiceAccount, LimitRange, ResourceQuota, RuntimeClass, Role,
    ClusterRole, RoleBinding, ClusterRoleBinding, CustomResourceDefinition, ValidatingWebhookConfiguration)})
KINDS.update({c.KIND: c for c in (Deployment, ReplicaSet, StatefulSet, DaemonSet, ControllerRevision)})
KIND_BY_PLURAL: dict[str, type[KubeObject]] = {c.PLURAL: c for c in KINDS.values()}

# Older API versions a manifest may still use for the same kinds.
_ALIASES: dict[str, set[str]] = {
    "PriorityClass": {"scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha1"},
    "PodDisruptionBudget": {"policy/v1beta1"},
    "CSINode": {"storage.k8s.io/v1beta1"},
    "StorageClass": {"storage.k8s.io/v1beta1"},
    "Lease": {"coordination.k8s.io/v1beta1"},
    "Event": {"events.k8s.io/v1"},
    "CronJob": {"batch/v1beta1"},
}
_ALIASES.update({
    "EndpointSlice": {"discovery.k8s.io/v1beta1"},
    "RuntimeClass": {"node.k8s.io/v1beta1"},
    **{k: {"rbac.authorization.k8s.io/v1beta1"} for k in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")},
})


class UnknownKindError(ValueError):
    def __init__(self, api_version: str, kind: str) -> None:
        self.api_version = api_version
        self.kind = kind
        super().__init__(f'no kind "{kind}" is registered for version "{api_version}"' if kind
                         else "Object 'Kind' is missing")


def kind_class(api_version: str, kind: str) -> type[KubeObject]:
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise UnknownKindError(str(api_version), str(kind))
    cls = KINDS.get(kind)
    if cls is None or (api_version and api_version != cls.API_VERSION
                       and api_version not in _ALIASES.get(kind, ())):
        raise UnknownKindError(api_version, kind)
    return cls


def parse_object(raw: dict[str, Any]) -> KubeObject:
    """A typed object for a manifest whose kind is known (raises UnknownKindError otherwise)."""
    return kind_class(raw.get("apiVersion", ""), raw.get("kind", "")).from_dict(raw)
