"""Dynamic Resource Allocation kinds of ``resource.k8s.io/v1``: DeviceClass, ResourceSlice,
ResourceClaim and ResourceClaimTemplate, as the scheduler, the resourceclaim controller and the
simulated DRA driver read them, plus the pod side (``spec.resourceClaims`` and the claim name
resolution of ``k8s.io/dynamic-resource-allocation/resourceclaim``).

Upstream: ``staging/src/k8s.io/api/resource/v1/types.go`` (fields and well-known names),
``staging/src/k8s.io/dynamic-resource-allocation/resourceclaim/resourceclaim.go`` (``Name``,
``IsForPod``, ``IsReservedForPod``), ``.../resourceclaim/devicetoleration.go`` (toleration
matching).

Quantities (capacities, counters, capacity requests) are exact integers in nano-units, as
:mod:`ksched.api.quantity` keeps them. Attribute and capacity names are fully qualified
(``domain/id``): a bare id is put under the driver's domain when the slice is read, as the CEL
environment and the allocator's constraints see them.

Known divergences: the alpha list-typed attributes (``ints``, ``bools``, ``strings``,
``versions``, gate DRAListTypeAttributes off by default) and ``nodeAllocatableResourceMappings``
(DRANodeAllocatableResources, alpha) are kept in the manifest but not read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ksched.api.labels import NodeSelector
from ksched.api.meta import KubeObject
from ksched.api.quantity import QuantityError, parse_quantity

__all__ = [
    "ALLOCATION_MODE_ALL",
    "ALLOCATION_MODE_EXACT_COUNT",
    "ANNOTATION_EXTENDED_RESOURCE_CLAIM",
    "ANNOTATION_POD_CLAIM_NAME",
    "EXTENDED_RESOURCE_PREFIX",
    "FINALIZER_DELETE_PROTECTION",
    "GROUP",
    "Capacity",
    "ClaimNameError",
    "Device",
    "DeviceClass",
    "DeviceRequest",
    "DeviceSubRequest",
    "DeviceTaint",
    "DeviceToleration",
    "PodClaimRef",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "claim_is_for_pod",
    "claim_reserved_for_pod",
    "is_dra_extended_resource_name",
    "pod_claim_name",
    "pod_claim_refs",
    "pod_has_claims",
    "qualified",
]

GROUP = "resource.k8s.io"
API_VERSION = "resource.k8s.io/v1"

FINALIZER_DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
ANNOTATION_POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
ANNOTATION_EXTENDED_RESOURCE_CLAIM = "resource.kubernetes.io/extended-resource-claim"
EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"

ALLOCATION_MODE_EXACT_COUNT = "ExactCount"
ALLOCATION_MODE_ALL = "All"

# Taint effects (DeviceTaintEffect).
EFFECT_NONE = "None"
EFFECT_NO_SCHEDULE = "NoSchedule"
EFFECT_NO_EXECUTE = "NoExecute"


def qualified(name: str, driver: str) -> str:
    """A QualifiedName in full: a bare id goes under the driver's domain."""
    return name if "/" in name else f"{driver}/{name}"


def is_dra_extended_resource_name(name: str) -> bool:
    """A resource name a DeviceClass may stand for (``schedutil.IsDRAExtendedResourceName``): an
    extended resource (``example.com/gpu``) or an implicit class name
    (``deviceclass.resource.kubernetes.io/<class>``)."""
    if name.startswith(EXTENDED_RESOURCE_PREFIX):
        return True
    if "/" not in name or name.startswith("requests."):
        return False
    return not name.split("/", 1)[0].endswith("kubernetes.io")


def _nanos(v: Any) -> int:
    try:
        return parse_quantity(v).nanos
    except QuantityError:
        return 0


# ---------------------------------------------------------------- DeviceClass


class DeviceClass(KubeObject):
    KIND: ClassVar[str] = "DeviceClass"
    API_VERSION: ClassVar[str] = API_VERSION
    PLURAL: ClassVar[str] = "deviceclasses"
    NAMESPACED: ClassVar[bool] = False

    __slots__ = ("config", "extended_resource_name", "selectors")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        # CEL expressions ("" for a selector of another kind, which the allocator refuses).
        self.selectors: tuple[str, ...] = tuple(
            ((s or {}).get("cel") or {}).get("expression") or "" for s in spec.get("selectors") or ())
        self.config: tuple[dict[str, Any], ...] = tuple(spec.get("config") or ())
        self.extended_resource_name: str = spec.get("extendedResourceName") or ""


# ---------------------------------------------------------------- ResourceSlice


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str
    time_added: str = ""

    @staticmethod
    def from_dict(d: dict[str, Any]) -> DeviceTaint:
        return DeviceTaint(d.get("key") or "", d.get("value") or "", d.get("effect") or "",
                           d.get("timeAdded") or "")


@dataclass(frozen=True, slots=True)
class Capacity:
    """A device capacity in nano-units, with its requestPolicy (``default``, ``valid_values``
    ascending, or ``valid_range`` (min, max or None, step or None)), all in nano-units."""

    value: int
    default: int | None = None
    valid_values: tuple[int, ...] = ()
    valid_range: tuple[int, int | None, int | None] | None = None

    @property
    def has_policy(self) -> bool:
        return self.default is not None or bool(self.valid_values) or self.valid_range is not None

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Capacity:
        pol = d.get("requestPolicy")
        if not pol:
            return Capacity(_nanos(d.get("value", 0)))
        default = _nanos(pol["default"]) if pol.get("default") is not None else None
        vv = tuple(_nanos(x) for x in pol.get("validValues") or ())
        vr = pol.get("validRange")
        rng = None
        if vr:
            rng = (_nanos(vr.get("min", 0)), _nanos(vr["max"]) if vr.get("max") is not None else None,
                   _nanos(vr["step"]) if vr.get("step") is not None else None)
        return Capacity(_nanos(d.get("value", 0)), default, vv, rng)


class Device:
    """One device of a slice. ``attributes`` maps a fully qualified name to its value (int,
    bool, str, or ``("version", text)`` for a semantic version); ``capacity`` likewise to a
    :class:`Capacity`."""

    __slots__ = ("all_nodes", "allow_multiple_allocations", "attributes", "binding_conditions",
                 "binding_failure_conditions", "binds_to_node", "capacity", "consumes_counters", "name",
                 "node_name", "node_selector", "raw", "sel_cache", "taints")

    def __init__(self, d: dict[str, Any], driver: str) -> None:
        self.raw = d
        self.name: str = d.get("name") or ""
        attrs: dict[str, Any] = {}
        for k, v in (d.get("attributes") or {}).items():
            v = v or {}
            if "int" in v and v["int"] is not None:
                val: Any = int(v["int"])
            elif "bool" in v and v["bool"] is not None:
                val = bool(v["bool"])
            elif "string" in v and v["string"] is not None:
                val = str(v["string"])
            elif "version" in v and v["version"] is not None:
                val = ("version", str(v["version"]))
            else:
                continue
            attrs[qualified(k, driver)] = val
        self.attributes: dict[str, Any] = attrs
        self.capacity: dict[str, Capacity] = {
            qualified(k, driver): Capacity.from_dict(v or {}) for k, v in (d.get("capacity") or {}).items()}
        self.consumes_counters: tuple[tuple[str, dict[str, int]], ...] = tuple(
            ((c or {}).get("counterSet") or "",
             {n: _nanos((cv or {}).get("value", 0)) for n, cv in ((c or {}).get("counters") or {}).items()})
            for c in d.get("consumesCounters") or ())
        self.node_name: str = d.get("nodeName") or ""
        ns = d.get("nodeSelector")
        self.node_selector: NodeSelector | None = NodeSelector.from_dict(ns) if ns else None
        self.all_nodes: bool = bool(d.get("allNodes"))
        self.taints: tuple[DeviceTaint, ...] = tuple(DeviceTaint.from_dict(t or {}) for t in d.get("taints") or ())
        self.binds_to_node: bool = bool(d.get("bindsToNode"))
        self.binding_conditions: tuple[str, ...] = tuple(d.get("bindingConditions") or ())
        self.binding_failure_conditions: tuple[str, ...] = tuple(d.get("bindingFailureConditions") or ())
        self.allow_multiple_allocations: bool = bool(d.get("allowMultipleAllocations"))
        # The scheduler's per-device cache of selector verdicts (see the allocator).
        self.sel_cache: dict[str, Any] | None = None


class ResourceSlice(KubeObject):
    KIND: ClassVar[str] = "ResourceSlice"
    API_VERSION: ClassVar[str] = API_VERSION
    PLURAL: ClassVar[str] = "resourceslices"
    NAMESPACED: ClassVar[bool] = False

    __slots__ = ("all_nodes", "devices", "driver", "node_name", "node_selector", "per_device_node_selection",
                 "pool_generation", "pool_name", "resource_slice_count", "shared_counters")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        self.driver: str = spec.get("driver") or ""
        pool = spec.get("pool") or {}
        self.pool_name: str = pool.get("name") or ""
        self.pool_generation: int = int(pool.get("generation") or 0)
        self.resource_slice_count: int = int(pool.get("resourceSliceCount") or 0)
        self.node_name: str = spec.get("nodeName") or ""
        ns = spec.get("nodeSelector")
        self.node_selector: NodeSelector | None = NodeSelector.from_dict(ns) if ns else None
        self.all_nodes: bool = bool(spec.get("allNodes"))
        self.per_device_node_selection: bool = bool(spec.get("perDeviceNodeSelection"))
        self.devices: tuple[Device, ...] = tuple(Device(d or {}, self.driver) for d in spec.get("devices") or ())
        self.shared_counters: dict[str, dict[str, int]] = {
            (cs or {}).get("name") or "": {n: _nanos((c or {}).get("value", 0))
                                           for n, c in ((cs or {}).get("counters") or {}).items()}
            for cs in spec.get("sharedCounters") or ()}


# ---------------------------------------------------------------- ResourceClaim


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> DeviceToleration:
        ts = d.get("tolerationSeconds")
        return DeviceToleration(d.get("key") or "", d.get("operator") or "Equal", d.get("value") or "",
                                d.get("effect") or "", int(ts) if ts is not None else None, d)

    def tolerates(self, taint: DeviceTaint) -> bool:
        """``RC/devicetoleration.go ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("Equal", ""):
            return self.value == taint.value
        return False


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    """An ``exactly`` request or one ``firstAvailable`` subrequest (which has no adminAccess)."""

    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = ALLOCATION_MODE_EXACT_COUNT
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity_requests: dict[str, int] | None = None  # raw names (qualified per device)
    selector_kinds_ok: bool = True  # every selector is a CEL one

    @staticmethod
    def from_dict(name: str, d: dict[str, Any]) -> DeviceSubRequest:
        sels = tuple(((s or {}).get("cel") or {}).get("expression") or "" for s in d.get("selectors") or ())
        cap = (d.get("capacity") or {}).get("requests")
        return DeviceSubRequest(
            name, d.get("deviceClassName") or "", sels, d.get("allocationMode") or ALLOCATION_MODE_EXACT_COUNT,
            int(d["count"]) if d.get("count") is not None else 1, bool(d.get("adminAccess")),
            tuple(DeviceToleration.from_dict(t or {}) for t in d.get("tolerations") or ()),
            {k: _nanos(v) for k, v in cap.items()} if cap else None)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A claim's request: exactly one of ``exactly`` and ``first_available``."""

    name: str
    exactly: DeviceSubRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()

    @staticmethod
    def from_dict(d: dict[str, Any]) -> DeviceRequest:
        name = d.get("name") or ""
        ex = d.get("exactly")
        fa = d.get("firstAvailable") or ()
        return DeviceRequest(name, DeviceSubRequest.from_dict(name, ex) if ex else None,
                             tuple(DeviceSubRequest.from_dict((s or {}).get("name") or "", s or {}) for s in fa))


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...]
    match_attribute: str = ""
    distinct_attribute: str = ""


class ResourceClaim(KubeObject):
    KIND: ClassVar[str] = "ResourceClaim"
    API_VERSION: ClassVar[str] = API_VERSION
    PLURAL: ClassVar[str] = "resourceclaims"
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = ("allocation", "config", "constraints", "device_statuses", "requests", "reserved_for")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        devices = (raw.get("spec") or {}).get("devices") or {}
        self.requests: tuple[DeviceRequest, ...] = tuple(
            DeviceRequest.from_dict(r or {}) for r in devices.get("requests") or ())
        self.constraints: tuple[DeviceConstraint, ...] = tuple(
            DeviceConstraint(tuple((c or {}).get("requests") or ()), (c or {}).get("matchAttribute") or "",
                             (c or {}).get("distinctAttribute") or "")
            for c in devices.get("constraints") or ())
        self.config: tuple[dict[str, Any], ...] = tuple(devices.get("config") or ())
        status = raw.get("status") or {}
        alloc = status.get("allocation")
        # The allocation as written (AllocationResult), None when unallocated.
        self.allocation: dict[str, Any] | None = alloc if alloc else None
        self.reserved_for: tuple[dict[str, Any], ...] = tuple(status.get("reservedFor") or ())
        self.device_statuses: tuple[dict[str, Any], ...] = tuple(status.get("devices") or ())

    @property
    def results(self) -> list[dict[str, Any]]:
        """``status.allocation.devices.results`` ([] when unallocated)."""
        if not self.allocation:
            return []
        return list((self.allocation.get("devices") or {}).get("results") or ())

    def reserved_for_pod(self, uid: str) -> bool:
        return any(r.get("uid") == uid for r in self.reserved_for)


class ResourceClaimTemplate(KubeObject):
    KIND: ClassVar[str] = "ResourceClaimTemplate"
    API_VERSION: ClassVar[str] = API_VERSION
    PLURAL: ClassVar[str] = "resourceclaimtemplates"

    __slots__ = ("claim_metadata", "claim_spec")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        self.claim_metadata: dict[str, Any] = spec.get("metadata") or {}
        self.claim_spec: dict[str, Any] = spec.get("spec") or {}


# ---------------------------------------------------------------- the pod side


@dataclass(frozen=True, slots=True)
class PodClaimRef:
    """One entry of ``pod.spec.resourceClaims``."""

    name: str
    resource_claim_name: str = ""
    resource_claim_template_name: str = ""


class ClaimNameError(Exception):
    """A pod's claim cannot be resolved (yet): the message is upstream's."""


_NO_REFS: tuple[PodClaimRef, ...] = ()


def pod_claim_refs(pod: Any) -> tuple[PodClaimRef, ...]:
    """``pod.spec.resourceClaims``, cached on the pod (empty for almost every pod: one dict
    lookup)."""
    spec = pod.raw.get("spec")
    rcs = spec.get("resourceClaims") if spec else None
    if not rcs:
        return _NO_REFS
    c = pod.cached()
    refs = c.get("dra_claim_refs")
    if refs is None:
        refs = c["dra_claim_refs"] = tuple(
            PodClaimRef((r or {}).get("name") or "", (r or {}).get("resourceClaimName") or "",
                        (r or {}).get("resourceClaimTemplateName") or "") for r in rcs)
    return refs  # type: ignore[no-any-return]


def pod_has_claims(pod: Any) -> bool:
    spec = pod.raw.get("spec")
    return bool(spec and spec.get("resourceClaims"))


def pod_claim_name(pod: Any, ref: PodClaimRef) -> tuple[str | None, bool]:
    """``RC/resourceclaim.go Name``: the claim's name (None: no claim was needed) and whether
    its owner must be checked. Raises :class:`ClaimNameError`."""
    if ref.resource_claim_name:
        return ref.resource_claim_name, False
    if ref.resource_claim_template_name:
        for st in (pod.raw.get("status") or {}).get("resourceClaimStatuses") or ():
            if (st or {}).get("name") == ref.name:
                n = st.get("resourceClaimName")
                return (n or None), True
        raise ClaimNameError(f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet')
    raise ClaimNameError(f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{ref.name}": '
                         "none of the supported fields are set")


def claim_is_for_pod(pod: Any, claim: ResourceClaim) -> None:
    """``RC/resourceclaim.go IsForPod``: raises unless the claim is controller-owned by the pod."""
    for r in claim.owner_references:
        if r.controller and r.uid == pod.uid:
            return
    raise ClaimNameError(f"ResourceClaim {claim.namespace}/{claim.name} was not created for Pod "
                         f"{pod.namespace}/{pod.name} (Pod is not owner)")


def claim_reserved_for_pod(pod: Any, claim: ResourceClaim) -> bool:
    return claim.reserved_for_pod(pod.uid)


def _register_validation() -> None:
    from ksched.api.resource_validation import register

    register()


_register_validation()
