"""LimitRange (core/v1): per-namespace defaults and bounds for the resources of containers, pods
and claims (``staging/src/k8s.io/api/core/v1/types.go``), with the API server's defaulting of a
Container item (``pkg/apis/core/v1/defaults.go`` SetDefaults_LimitRangeItem)."""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["LIMIT_TYPE_CONTAINER", "LIMIT_TYPE_PVC", "LIMIT_TYPE_POD", "LimitRange", "LimitRangeItem",
           "default_limit_range_item"]

LIMIT_TYPE_CONTAINER = "Container"
LIMIT_TYPE_POD = "Pod"
LIMIT_TYPE_PVC = "PersistentVolumeClaim"


class LimitRangeItem:
    """One item of ``spec.limits``: resource name -> quantity (as written) per bound."""

    __slots__ = ("default", "default_request", "max", "max_limit_request_ratio", "min", "type")

    def __init__(self, d: dict[str, Any]) -> None:
        self.type: str = d.get("type") or ""
        self.max: dict[str, Any] = d.get("max") or {}
        self.min: dict[str, Any] = d.get("min") or {}
        self.default: dict[str, Any] = d.get("default") or {}
        self.default_request: dict[str, Any] = d.get("defaultRequest") or {}
        self.max_limit_request_ratio: dict[str, Any] = d.get("maxLimitRequestRatio") or {}


class LimitRange(KubeObject):
    KIND: ClassVar[str] = "LimitRange"
    PLURAL: ClassVar[str] = "limitranges"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("limits",)

    __slots__ = ("limits",)

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        self.limits: tuple[LimitRangeItem, ...] = tuple(LimitRangeItem(d) for d in spec.get("limits") or ()
                                                        if isinstance(d, dict))


def default_limit_range_item(item: dict[str, Any]) -> None:
    """API defaulting of a Container item, in place: a missing default limit is the max, a missing
    default request the default limit, else the min."""
    if item.get("type") != LIMIT_TYPE_CONTAINER:
        return
    default = dict(item.get("default") or {})
    default_request = dict(item.get("defaultRequest") or {})
    for k, v in (item.get("max") or {}).items():
        default.setdefault(k, v)
    for k, v in default.items():
        default_request.setdefault(k, v)
    for k, v in (item.get("min") or {}).items():
        default_request.setdefault(k, v)
    if default:
        item["default"] = default
    if default_request:
        item["defaultRequest"] = default_request
