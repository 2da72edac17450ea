"""What the registry does per kind on create and update besides validation (upstream's
``pkg/registry/<group>/<resource>/strategy.go`` PrepareForCreate/PrepareForUpdate and
ValidateUpdate, with the API defaulting of ``pkg/apis/<group>/v1/defaults.go``), for the
Service, Secret, ConfigMap, LimitRange, RuntimeClass, RBAC binding and ValidatingWebhookConfiguration
kinds.

Pods keep their defaulting in ``admission.py``; CustomResourceDefinitions are handled by the
store, which owns the scheme they change.
"""

from __future__ import annotations

import base64
from typing import Any

from ksched.api.admissionregistration import default_validating_webhook_configuration
from ksched.api.errors import FieldError
from ksched.api.limitrange import default_limit_range_item
from ksched.api.meta import KubeObject
from ksched.apiserver.ipallocator import ServiceAllocator

__all__ = ["prepare_for_create", "prepare_for_update"]


def _default_service(raw: dict[str, Any]) -> None:
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return
    stype = spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for p in spec.get("ports") or ():
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
            if p.get("targetPort") in (None, "", 0):
                p["targetPort"] = p.get("port")
    if stype != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    if stype in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if stype == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
        status = raw.setdefault("status", {})
        if isinstance(status, dict):
            status.setdefault("loadBalancer", {})


def _secret_string_data(raw: dict[str, Any]) -> None:
    """``stringData`` is write-only: its entries replace ``data``'s, base64-encoded."""
    raw.setdefault("type", "Opaque")
    sd = raw.pop("stringData", None)
    if isinstance(sd, dict) and sd:
        data = raw.get("data")
        data = dict(data) if isinstance(data, dict) else {}
        for k, v in sd.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        raw["data"] = data


def _default_limit_range(raw: dict[str, Any]) -> None:
    spec = raw.get("spec")
    if isinstance(spec, dict):
        for item in spec.get("limits") or ():
            if isinstance(item, dict):
                default_limit_range_item(item)


def prepare_for_create(kind: str, raw: dict[str, Any], services: ServiceAllocator) -> list[FieldError]:
    """Default and fill in a new object of ``kind`` (in place); errors of what cannot be allocated."""
    if kind == "Service":
        _default_service(raw)
        return services.allocate(raw)
    if kind == "Secret":
        _secret_string_data(raw)
    elif kind == "LimitRange":
        _default_limit_range(raw)
    elif kind == "ValidatingWebhookConfiguration":
        default_validating_webhook_configuration(raw)
    return []


def prepare_for_update(kind: str, old: KubeObject, raw: dict[str, Any],
                       services: ServiceAllocator) -> list[FieldError]:
    """Default an update of ``kind`` (in place) and say which changes are not allowed."""
    errs: list[FieldError] = []
    if kind == "Service":
        _default_service(raw)
        return services.allocate(raw, old)
    if kind == "Secret":
        _secret_string_data(raw)
    elif kind == "LimitRange":
        _default_limit_range(raw)
    elif kind == "ValidatingWebhookConfiguration":
        default_validating_webhook_configuration(raw)
    if kind in ("ConfigMap", "Secret") and old.raw.get("immutable") is True:
        if raw.get("immutable") is not True:
            errs.append(FieldError("immutable", "Forbidden: field is immutable when `immutable` is set",
                                   "FieldValueForbidden"))
        for f in ("data", "binaryData") if kind == "ConfigMap" else ("data",):
            if (raw.get(f) or {}) != (old.raw.get(f) or {}):
                errs.append(FieldError(f, "Forbidden: field is immutable when `immutable` is set",
                                       "FieldValueForbidden"))
    elif kind == "RuntimeClass" and raw.get("handler") != old.raw.get("handler"):
        errs.append(FieldError("handler", f'Invalid value: "{raw.get("handler")}": field is immutable'))
    elif kind in ("RoleBinding", "ClusterRoleBinding") and raw.get("roleRef") != old.raw.get("roleRef"):
        errs.append(FieldError("roleRef", "Invalid value: " + _show(raw.get("roleRef")) + ": cannot change roleRef"))
    return errs


def _show(v: Any) -> str:
    if isinstance(v, dict):
        inner = ", ".join(f"{k}:{_show(x)}" for k, x in v.items())
        return f"rbac.RoleRef{{{inner}}}"
    return f'"{v}"' if isinstance(v, str) else str(v)
