"""Pod, as the scheduler reads it.

``Pod.lean`` decodes a pod in two steps: at once what a bound pod in the scheduler's cache is
read for (metadata, node, containers and their requests and ports, init containers, overhead,
pod-level resources, volumes, affinity, phase, the OS field), and the rest (tolerations, topology spread
constraints, scheduling gates, priority, conditions, ...) on first access of any of it. Informers
listing thousands of bound pods (a scheduler's restart) skip a third of the decoding that way;
the attributes read are the same as ``Pod(raw)``'s (a test compares every one). Until then the
object is of a private subclass with ``__getattr__``; decoding the rest makes it a plain Pod,
whose attribute reads CPython specializes (a class with ``__getattr__`` is read about three
times slower, which is why Pod itself has none).

Fast path: ``Pod.is_terminal`` is the ``_terminal`` slot (set wherever ``phase`` is) read under
that name rather than a property, while ``TERMINAL_SLOT`` is on (:func:`set_terminal_slot`; the
property is the reference; tests/api/test_pod_terminal_slot.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ksched.api.affinity import Affinity
from ksched.api.labels import LabelSelector, Requirement
from ksched.api.meta import KubeObject, parse_time
from ksched.api.quantity import milli_value, value
from ksched.api.taints import Toleration

__all__ = [
    "Container",
    "ContainerPort",
    "Pod",
    "TopologySpreadConstraint",
    "Volume",
    "resource_map",
    "spec_os_name",
    "resource_units",
]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"


def resource_units(name: str, q: Any) -> int:
    """A quantity in the scheduler's integer units: CPU in milli-units, everything else in base
    units (bytes, counts), both rounded up."""
    return milli_value(q) if name == CPU else value(q)


# Quantities written as strings, in the scheduler's units, by (resource name, text): a cluster's
# pods and nodes repeat a few values ("100m", "500Mi", "4"), so each is converted once (the
# informers of a restart decode tens of thousands of requests and limits). Bounded: cleared
# when full. Only strings are kept (True == 1 as a key, but True is no quantity).
_UNITS: dict[tuple[str, str], int] = {}
_UNITS_MAX = 4096


def resource_map(d: Any) -> dict[str, int]:
    """``{name: resource_units(name, q)}`` of a resource list (requests, limits, capacity)."""
    if not d:
        return {}
    out: dict[str, int] = {}
    units = _UNITS
    for k, v in d.items():
        if type(v) is str:
            u = units.get((k, v))
            if u is None:
                u = resource_units(k, v)
                if len(units) >= _UNITS_MAX:
                    units.clear()
                units[(k, v)] = u
            out[k] = u
        else:
            out[k] = resource_units(k, v)
    return out



class ContainerPort:
    __slots__ = ("container_port", "host_ip", "host_port", "name", "protocol")

    def __init__(self, d: dict[str, Any]) -> None:
        self.name: str = d.get("name") or ""
        self.container_port: int = int(d.get("containerPort") or 0)
        self.host_port: int = int(d.get("hostPort") or 0)
        self.protocol: str = d.get("protocol") or "TCP"
        self.host_ip: str = d.get("hostIP") or ""


class Container:
    __slots__ = ("image", "limits", "name", "ports", "requests", "restart_policy")

    def __init__(self, d: dict[str, Any]) -> None:
        self.name: str = d.get("name") or ""
        self.image: str = d.get("image") or ""
        res = d.get("resources") or {}
        self.requests: dict[str, int] = resource_map(res.get("requests"))
        self.limits: dict[str, int] = resource_map(res.get("limits"))
        # API defaulting: a limit without a request defaults the request to the limit.
        for k, v in self.limits.items():
            if k not in self.requests:
                self.requests[k] = v
        self.ports: tuple[ContainerPort, ...] = tuple(ContainerPort(p) for p in d.get("ports") or ())
        self.restart_policy: str = d.get("restartPolicy") or ""

    @property
    def is_sidecar(self) -> bool:
        """A restartable init container (``restartPolicy: Always``)."""
        return self.restart_policy == "Always"


class Volume:
    """A pod volume; ``claim_name`` is set for PVC and generic ephemeral volumes."""

    __slots__ = ("claim_name", "ephemeral", "name", "raw")

    def __init__(self, d: dict[str, Any], pod_name: str) -> None:
        self.raw = d
        self.name: str = d.get("name") or ""
        pvc = d.get("persistentVolumeClaim")
        self.ephemeral = "ephemeral" in d and d["ephemeral"] is not None
        if pvc:
            self.claim_name: str = pvc.get("claimName") or ""
        elif self.ephemeral:
            # Generic ephemeral volumes: the PVC is named <pod name>-<volume name>.
            self.claim_name = f"{pod_name}-{self.name}"
        else:
            self.claim_name = ""


class TopologySpreadConstraint:
    __slots__ = (
        "label_selector",
        "match_label_keys",
        "max_skew",
        "min_domains",
        "node_affinity_policy",
        "node_taints_policy",
        "topology_key",
        "when_unsatisfiable",
    )

    def __init__(self, d: dict[str, Any], pod_labels: dict[str, str]) -> None:
        self.max_skew: int = int(d.get("maxSkew") or 0)
        self.topology_key: str = d.get("topologyKey") or ""
        self.when_unsatisfiable: str = d.get("whenUnsatisfiable") or "DoNotSchedule"
        sel = LabelSelector.from_dict(d.get("labelSelector"))
        self.match_label_keys: tuple[str, ...] = tuple(d.get("matchLabelKeys") or ())
        extra = tuple(Requirement(k, "In", (pod_labels[k],)) for k in self.match_label_keys if k in pod_labels)
        if extra and not sel.is_nothing():
            sel = LabelSelector(sel.requirements + extra)
        self.label_selector = sel
        md = d.get("minDomains")
        self.min_domains: int = int(md) if md is not None else 1
        self.node_affinity_policy: str = d.get("nodeAffinityPolicy") or "Honor"
        self.node_taints_policy: str = d.get("nodeTaintsPolicy") or "Ignore"


# ``Pod.os_name`` when the manifest's ``spec.os`` is set but not a map (an invalid manifest): a
# reader reads the manifest itself (and fails as it would have).
OS_NAME_UNPARSED: Any = object()


def spec_os_name(spec: Mapping[str, Any]) -> Any:
    """``((spec.get("os") or {}).get("name"))`` -- ``spec.os.name`` as the kubelet's admission
    reads it, None when absent -- or ``OS_NAME_UNPARSED`` where that expression would fail."""
    os_ = spec.get("os")
    if not os_:
        return None
    if type(os_) is dict:
        return os_.get("name")
    return OS_NAME_UNPARSED


# What Pod.lean leaves for first access (Pod._decode_rest sets exactly these).
_DECODED_LATER = frozenset({
    "conditions", "host_network", "node_selector", "nominated_node_name", "preemption_policy", "priority",
    "priority_class_name", "scheduling_gates", "start_time", "termination_grace_period_seconds", "tolerations",
    "topology_spread_constraints",
})


class Pod(KubeObject):
    KIND: ClassVar[str] = "Pod"
    PLURAL: ClassVar[str] = "pods"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("po",)
    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = (
        "_cache",
        "_terminal",
        "affinity",
        "conditions",
        "containers",
        "host_network",
        "init_containers",
        "node_name",
        "node_selector",
        "nominated_node_name",
        "os_name",
        "overhead",
        "phase",
        "pod_level_requests",
        "preemption_policy",
        "priority",
        "priority_class_name",
        "scheduler_name",
        "scheduling_gates",
        "start_time",
        "termination_grace_period_seconds",
        "tolerations",
        "topology_spread_constraints",
        "volumes",
    )

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        self._decode_first(spec, status)
        self._decode_rest(spec, status)
        self._cache: dict[str, Any] | None = None

    @staticmethod
    def lean(raw: dict[str, Any]) -> Pod:
        """The pod with what the scheduler's cache reads decoded now, the rest on first access
        (see the module's docstring): for the bound pods of an informer's list."""
        pod = _LeanPod.__new__(_LeanPod)
        KubeObject.__init__(pod, raw)
        pod._decode_first(raw.get("spec") or {}, raw.get("status") or {})
        pod._cache = None
        return pod

    def _decode_first(self, spec: dict[str, Any], status: dict[str, Any]) -> None:
        self.node_name: str = spec.get("nodeName") or ""
        self.scheduler_name: str = spec.get("schedulerName") or "default-scheduler"
        aff = spec.get("affinity")
        self.affinity: Affinity | None = Affinity(aff, self.namespace, self.labels) if aff else None
        self.volumes: tuple[Volume, ...] = tuple(Volume(v, self.name) for v in spec.get("volumes") or ())
        self.containers: tuple[Container, ...] = tuple(Container(c) for c in spec.get("containers") or ())
        self.init_containers: tuple[Container, ...] = tuple(
            Container(c) for c in spec.get("initContainers") or ())
        self.overhead: dict[str, int] = resource_map(spec.get("overhead"))
        pod_res = spec.get("resources") or {}
        plr = resource_map(pod_res.get("requests"))
        for k, v in resource_map(pod_res.get("limits")).items():
            plr.setdefault(k, v)
        self.pod_level_requests: dict[str, int] = plr
        self.os_name: Any = spec_os_name(spec)
        phase: str = status.get("phase") or PHASE_PENDING
        self.phase = phase
        self._terminal: bool = phase in (PHASE_SUCCEEDED, PHASE_FAILED)

    def _decode_rest(self, spec: dict[str, Any], status: dict[str, Any], loaded: Pod | None = None) -> None:
        self.node_selector: dict[str, str] = spec.get("nodeSelector") or {}
        tols = spec.get("tolerations") or ()
        if loaded is not None and len(tols) >= len(loaded.tolerations):
            # (admitted) admission only appends tolerations (DefaultTolerationSeconds's).
            self.tolerations: tuple[Toleration, ...] = loaded.tolerations + tuple(
                Toleration.from_dict(t) for t in tols[len(loaded.tolerations):])
        else:
            self.tolerations = tuple(Toleration.from_dict(t) for t in tols)
        if loaded is not None and loaded.labels == self.labels:
            # (admitted) the constraints and the labels they read are as the loader parsed them.
            self.topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = \
                loaded.topology_spread_constraints
        else:
            self.topology_spread_constraints = tuple(
                TopologySpreadConstraint(c, self.labels) for c in spec.get("topologySpreadConstraints") or ())
        prio = spec.get("priority")
        self.priority: int = int(prio) if prio is not None else 0
        self.priority_class_name: str = spec.get("priorityClassName") or ""
        self.preemption_policy: str = spec.get("preemptionPolicy") or "PreemptLowerPriority"
        self.scheduling_gates: tuple[str, ...] = tuple(
            g.get("name", "") for g in spec.get("schedulingGates") or ())
        tgps = spec.get("terminationGracePeriodSeconds")
        self.termination_grace_period_seconds: int = int(tgps) if tgps is not None else 30
        self.host_network: bool = bool(spec.get("hostNetwork", False))
        self.conditions: list[dict[str, Any]] = status.get("conditions") or []
        self.nominated_node_name: str = status.get("nominatedNodeName") or ""
        self.start_time: float | None = parse_time(status.get("startTime"))

    def with_status(self, raw: dict[str, Any]) -> Pod:
        """``Pod(raw)`` for a manifest whose metadata and spec are this pod's (the same values: a
        write of the status subresource), sharing this pod's parsed metadata and spec instead of
        parsing them again; only the status is read. Values cached on this pod (``cached()``) are
        not carried over: some read the status. This pod lets go of them too (the write
        supersedes it): most are the scheduling cycle's (PreFilter states, affinity and spread
        keys, a label signature), of no use once the pod is bound, and the old object stays
        reachable for a while (informers not yet delivered, a scheduler snapshot until its next
        update, a watch event's previous object); a reader that still asks computes them again,
        the same values. (3.3 KB a pod after a run at 4,000 pods: docs/benchmarks.md, large4.)"""
        self._cache = None
        new = self.shallow_copy()
        new.raw = raw
        status = raw.get("status") or {}
        phase = new.phase = status.get("phase") or PHASE_PENDING
        new._terminal = phase in (PHASE_SUCCEEDED, PHASE_FAILED)
        new.conditions = status.get("conditions") or []
        new.nominated_node_name = status.get("nominatedNodeName") or ""
        new.start_time = parse_time(status.get("startTime"))
        new._cache = None
        return new

    def admitted(self, raw: dict[str, Any]) -> Pod:
        """``Pod(raw)`` for this pod's own manifest (``raw is self.raw``) after the API server's
        defaulting and admission changed it in place, provided they left its containers, init
        containers and overhead alone (no LimitRanger default, no RuntimeClass: defaulting only
        copies limits to missing requests, which parsing does too, and sets fields a ``Container``
        does not read): the parsed containers and spread constraints are shared, the volumes
        while the name is the same, the affinity while the namespace and labels are (matchLabelKeys), the tolerations it had
        (admission only appends the defaults); the metadata and the rest of the spec and status
        are read again (namespace default, priority, appended tolerations, conditions). The store's create
        of a pod the loader parsed (``Store.create(pod, owned=True, validated=True)``)."""
        new = Pod.__new__(Pod)
        KubeObject.__init__(new, raw)
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        new.node_name = spec.get("nodeName") or ""
        new.scheduler_name = spec.get("schedulerName") or "default-scheduler"
        aff = spec.get("affinity")
        if not aff:
            new.affinity = None
        elif self.affinity is not None and new.namespace == self.namespace and new.labels == self.labels:
            new.affinity = self.affinity
        else:
            new.affinity = Affinity(aff, new.namespace, new.labels)
        new.volumes = self.volumes if new.name == self.name else tuple(
            Volume(v, new.name) for v in spec.get("volumes") or ())
        new.containers = self.containers
        new.init_containers = self.init_containers
        new.overhead = resource_map(spec.get("overhead"))
        pod_res = spec.get("resources") or {}
        plr = resource_map(pod_res.get("requests"))
        for k, v in resource_map(pod_res.get("limits")).items():
            plr.setdefault(k, v)
        new.pod_level_requests = plr
        new.os_name = spec_os_name(spec)
        phase = new.phase = status.get("phase") or PHASE_PENDING
        new._terminal = phase in (PHASE_SUCCEEDED, PHASE_FAILED)
        new._decode_rest(spec, status, self)
        new._cache = None
        return new

    def like(self, raw: dict[str, Any]) -> Pod:
        """``Pod(raw)`` for another manifest whose spec has the same values (of the same types:
        ``validation.pod_spec_key``) as this pod's and whose namespace and labels are this pod's
        (what parsing the spec reads besides the spec): the pods of one app in a generated
        directory. The parsed containers, init containers, affinity, spread constraints,
        tolerations, overhead and pod-level requests are this pod's objects (nothing changes
        them once parsed; tolerations already are one object per distinct value); the metadata,
        the node selector (the manifest's own map), the volumes (a generic ephemeral volume's
        claim is named after the pod) and the status are read from ``raw``. Parsing errors
        are those of ``Pod(raw)``: the spec parsed here, the rest is read in the same order.
        The loader's parse of a validated pod (``loader.SHARE_POD_PARSE``), and the store's of
        a loaded pod given the very spec another pod of its namespace and labels was stored with
        (``Store.share_admitted_specs``)."""
        new = Pod.__new__(Pod)
        KubeObject.__init__(new, raw)
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        new.node_name = self.node_name
        new.scheduler_name = self.scheduler_name
        new.affinity = self.affinity
        new.volumes = tuple(Volume(v, new.name) for v in spec.get("volumes") or ()) if self.volumes else ()
        new.containers = self.containers
        new.init_containers = self.init_containers
        new.overhead = self.overhead
        new.pod_level_requests = self.pod_level_requests
        new.os_name = spec_os_name(spec)
        phase = new.phase = status.get("phase") or PHASE_PENDING
        new._terminal = phase in (PHASE_SUCCEEDED, PHASE_FAILED)
        new.node_selector = spec.get("nodeSelector") or {}
        new.tolerations = self.tolerations
        new.topology_spread_constraints = self.topology_spread_constraints
        new.priority = self.priority
        new.priority_class_name = self.priority_class_name
        new.preemption_policy = self.preemption_policy
        new.scheduling_gates = self.scheduling_gates
        new.termination_grace_period_seconds = self.termination_grace_period_seconds
        new.host_network = self.host_network
        new.conditions = status.get("conditions") or []
        new.nominated_node_name = status.get("nominatedNodeName") or ""
        new.start_time = parse_time(status.get("startTime"))
        new._cache = None
        return new

    # ---- derived values, computed once per object --------------------------------------

    def cached(self) -> dict[str, Any]:
        """A per-object scratch dict for derived values (requests, QoS, …)."""
        c = self._cache
        if c is None:
            c = self._cache = {}
        return c

    @property
    def is_terminal(self) -> bool:
        """Whether the pod's phase is Succeeded or Failed. The reference: with ``TERMINAL_SLOT``
        (the default) the class reads the ``_terminal`` slot under this name instead (see
        :func:`set_terminal_slot`)."""
        return self.phase in (PHASE_SUCCEEDED, PHASE_FAILED)

    @property
    def is_terminating(self) -> bool:
        return self.deletion_timestamp is not None

    def condition(self, ctype: str) -> dict[str, Any] | None:
        for c in self.conditions:
            if c.get("type") == ctype:
                return c
        return None

    def matches_node_affinity(self, node_name: str, labels: Mapping[str, str]) -> bool:
        """Whether a node satisfies the pod's ``nodeSelector`` and its required node affinity
        (what the kubelet's admission and a topology spread's ``nodeAffinityPolicy: Honor`` check)."""
        for k, v in self.node_selector.items():
            if labels.get(k) != v:
                return False
        na = self.affinity.node_affinity if self.affinity is not None else None
        if na is not None and na.required is not None:
            return na.required.matches(node_name, labels)
        return True

    def host_ports(self) -> list[ContainerPort]:
        """Ports with a hostPort: restartable init containers (sidecars, which run for the pod's
        whole life) first, then regular containers, as upstream's GetHostPorts."""
        c = self._cache
        if c is not None and "host_ports" in c:
            return c["host_ports"]  # type: ignore[no-any-return]
        out = [p for ct in self.init_containers if ct.is_sidecar for p in ct.ports if p.host_port > 0]
        out.extend(p for ct in self.containers for p in ct.ports if p.host_port > 0)
        self.cached()["host_ports"] = out
        return out


class _LeanPod(Pod):
    """A Pod whose later fields (``_DECODED_LATER``) are not decoded yet. The first access of
    one decodes them and makes the object a plain Pod (its class is swapped: the slots are the
    same), so that from then on its attributes are read as fast as any Pod's: a class with
    ``__getattr__`` makes every attribute read of its instances about three times slower."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        # Only called for an attribute not set: one of those not decoded yet.
        if name in _DECODED_LATER:
            raw = self.raw
            self._decode_rest(raw.get("spec") or {}, raw.get("status") or {})
            self.__class__ = Pod
            return object.__getattribute__(self, name)
        raise AttributeError(f"'Pod' object has no attribute {name!r}")

    def shallow_copy(self) -> Pod:  # type: ignore[override]
        self.tolerations  # noqa: B018 - decoded in full first: the copy is a plain Pod
        return Pod.shallow_copy(self)

    def __repr__(self) -> str:
        return f"Pod({self.key!r}, rv={self.resource_version!r})"


# Pod.is_terminal is read about 200,000 times a simulation of 20,000 pods (the kubelet's update
# and admission paths, the pods' accounting, quota, the scheduler's cache and handlers): as a
# property, 80 ns a read; as a slot, under 10. Every place that sets ``phase`` (``_decode_first``,
# ``with_status``, ``admitted``, ``like``; ``shallow_copy`` copies both) sets ``_terminal`` to the
# property's answer, and with TERMINAL_SLOT the class's ``is_terminal`` is the slot's own
# descriptor, so that readers read the slot without a call. False: the property (the reference).
# tests/api/test_pod_terminal_slot.py checks the slot against the property on random pods and
# runs a simulation both ways.
TERMINAL_SLOT = True
_TERMINAL_PROPERTY = Pod.__dict__["is_terminal"]
_TERMINAL_MEMBER = Pod.__dict__["_terminal"]


def set_terminal_slot(on: bool) -> None:
    """Set ``TERMINAL_SLOT`` and make ``Pod.is_terminal`` read accordingly (the slot, or the
    reference property)."""
    global TERMINAL_SLOT
    TERMINAL_SLOT = on
    Pod.is_terminal = _TERMINAL_MEMBER if on else _TERMINAL_PROPERTY  # type: ignore[method-assign]


set_terminal_slot(TERMINAL_SLOT)
