"""The apps/v1 workload kinds: Deployment, ReplicaSet, StatefulSet, DaemonSet and
ControllerRevision, with their API defaults and create/update strategies.

Upstream: ``staging/src/k8s.io/api/apps/v1/types.go`` (fields and well-known labels),
``pkg/apis/apps/v1/defaults.go`` (``SetDefaults_*``), ``pkg/apis/core/v1/defaults.go`` (the pod
template's defaults) and ``pkg/registry/apps/*/strategy.go`` (status cleared on create, the
DaemonSet's template generation). Validation is in :mod:`ksched.api.validation`.

Divergences: the pod template gets the defaults that show in ``kubectl get -o yaml`` and matter
for comparing templates (restart policy, DNS policy, scheduler name, grace period, security
context, container termination message, pull policy and resources, port protocol), not the
defaults of nested optional structs (probes, env sources, volume sources).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ksched.api.labels import NOTHING, LabelSelector, SelectorError
from ksched.api.meta import KubeObject

__all__ = [
    "CONTROLLER_REVISION_HASH_LABEL",
    "DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY",
    "POD_INDEX_LABEL",
    "STATEFULSET_POD_NAME_LABEL",
    "TEMPLATE_GENERATION_ANNOTATION",
    "TEMPLATE_GENERATION_LABEL",
    "ControllerRevision",
    "DaemonSet",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "default_pod_template",
    "is_percent",
    "scaled_value",
]

# Well-known labels and annotations (apps/v1 types.go).
DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY = "pod-template-hash"
CONTROLLER_REVISION_HASH_LABEL = "controller-revision-hash"  # StatefulSet and DaemonSet pods, revisions
STATEFULSET_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
TEMPLATE_GENERATION_LABEL = "pod-template-generation"  # DaemonSet pods
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"

ROLLING_UPDATE = "RollingUpdate"
RECREATE = "Recreate"
ON_DELETE = "OnDelete"
ORDERED_READY = "OrderedReady"
PARALLEL = "Parallel"
RETAIN = "Retain"

_PERCENT = re.compile(r"^([0-9]+)%$")


def is_percent(v: Any) -> bool:
    return isinstance(v, str) and _PERCENT.match(v) is not None


def scaled_value(v: int | str | None, total: int, round_up: bool, default: int | str = 0) -> int:
    """An int-or-percent resolved against ``total`` (upstream's
    ``intstr.GetScaledValueFromIntOrPercent``): a percentage rounds up or down; ``None`` takes
    ``default``. Raises ValueError for anything else (validation refuses such values)."""
    if v is None:
        v = default
    if isinstance(v, bool):
        raise ValueError(f"invalid value for IntOrString: {v!r}")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        m = _PERCENT.match(v)
        if m is not None:
            n = int(m.group(1)) * total
            return -(-n // 100) if round_up else n // 100
        if re.fullmatch(r"-?[0-9]+", v):
            raise ValueError(f'invalid value "{v}": a percentage must end in "%"')
    raise ValueError(f"invalid value for IntOrString: {v!r}")


def _int(v: Any, default: int) -> int:
    if v is None or isinstance(v, bool):
        return default
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _selector(spec: dict[str, Any]) -> LabelSelector:
    try:
        return LabelSelector.from_dict(spec.get("selector"))
    except (SelectorError, AttributeError, TypeError):
        return NOTHING


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


# ---------------------------------------------------------------- defaults


def _image_pull_policy(image: Any) -> str:
    """``Always`` for a ``:latest`` or untagged image (by tag, not digest), else ``IfNotPresent``."""
    if not isinstance(image, str):
        return "IfNotPresent"
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "Always"
    return "Always" if last.rsplit(":", 1)[1] == "latest" else "IfNotPresent"


def default_pod_template(template: Any) -> None:
    """The pod spec defaults a pod template gets (``SetDefaults_PodSpec``, ``SetDefaults_Container``,
    ``SetDefaults_ContainerPort``), in place; a ``metadata.creationTimestamp: null`` (what
    ``kubectl create deployment`` sends) is dropped. Odd shapes are left for validation."""
    if not isinstance(template, dict):
        return
    md = template.get("metadata")
    if isinstance(md, dict) and "creationTimestamp" in md and md["creationTimestamp"] is None:
        del md["creationTimestamp"]
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for field in ("initContainers", "containers"):
        cs = spec.get(field)
        if not isinstance(cs, list):
            continue
        for c in cs:
            if not isinstance(c, dict):
                continue
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("imagePullPolicy", _image_pull_policy(c.get("image")))
            c.setdefault("resources", {})
            ports = c.get("ports")
            if isinstance(ports, list):
                for p in ports:
                    if isinstance(p, dict):
                        p.setdefault("protocol", "TCP")


def _spec(raw: dict[str, Any]) -> dict[str, Any] | None:
    spec = raw.get("spec")
    if spec is None:
        spec = raw["spec"] = {}
    return spec if isinstance(spec, dict) else None


def _set_default(d: dict[str, Any], key: str, value: Any) -> None:
    if d.get(key) is None:
        d[key] = value


# ---------------------------------------------------------------- kinds


class _Workload(KubeObject):
    """What every apps/v1 workload has: a selector, a pod template, a status with conditions."""

    STATUS_SUBRESOURCE: ClassVar[bool] = True

    __slots__ = ("conditions", "min_ready_seconds", "observed_generation", "selector", "spec", "status",
                 "template")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.spec: dict[str, Any] = _dict(raw.get("spec"))
        self.status: dict[str, Any] = _dict(raw.get("status"))
        self.selector: LabelSelector = _selector(self.spec)
        self.template: dict[str, Any] = _dict(self.spec.get("template"))
        self.min_ready_seconds: int = _int(self.spec.get("minReadySeconds"), 0)
        self.observed_generation: int = _int(self.status.get("observedGeneration"), 0)
        conds = self.status.get("conditions")
        self.conditions: list[dict[str, Any]] = conds if isinstance(conds, list) else []

    @property
    def template_labels(self) -> dict[str, str]:
        return _dict(self.template.get("metadata")).get("labels") or {}

    def condition(self, ctype: str) -> dict[str, Any] | None:
        for c in self.conditions:
            if isinstance(c, dict) and c.get("type") == ctype:
                return c
        return None

    @classmethod
    def prepare_for_create(cls, raw: dict[str, Any]) -> None:
        spec = _spec(raw)
        if spec is not None:
            cls._set_defaults(spec)
        raw["status"] = {}  # the create strategy clears any status sent

    @classmethod
    def prepare_for_update(cls, raw: dict[str, Any], old_raw: dict[str, Any]) -> None:
        spec = _spec(raw)
        if spec is not None:
            cls._set_defaults(spec)

    @classmethod
    def _set_defaults(cls, spec: dict[str, Any]) -> None:
        default_pod_template(spec.get("template"))


class Deployment(_Workload):
    KIND: ClassVar[str] = "Deployment"
    API_VERSION: ClassVar[str] = "apps/v1"
    SCALE_SUBRESOURCE: ClassVar[bool] = True
    PLURAL: ClassVar[str] = "deployments"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("deploy",)

    __slots__ = ("available_replicas", "collision_count", "max_surge", "max_unavailable", "paused",
                 "progress_deadline_seconds", "ready_replicas", "replicas", "revision_history_limit",
                 "status_replicas", "strategy_type", "terminating_replicas", "unavailable_replicas",
                 "updated_replicas")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec, status = self.spec, self.status
        self.replicas: int = _int(spec.get("replicas"), 1)
        strategy = _dict(spec.get("strategy"))
        self.strategy_type: str = strategy.get("type") or ROLLING_UPDATE
        ru = _dict(strategy.get("rollingUpdate"))
        self.max_surge: int | str = ru.get("maxSurge", "25%") if self.strategy_type == ROLLING_UPDATE else 0
        self.max_unavailable: int | str = (ru.get("maxUnavailable", "25%") if self.strategy_type == ROLLING_UPDATE
                                           else 0)
        self.revision_history_limit: int = _int(spec.get("revisionHistoryLimit"), 10)
        pds = spec.get("progressDeadlineSeconds", 600)
        self.progress_deadline_seconds: int | None = None if pds is None else _int(pds, 600)
        self.paused: bool = bool(spec.get("paused", False))
        self.status_replicas: int = _int(status.get("replicas"), 0)
        self.updated_replicas: int = _int(status.get("updatedReplicas"), 0)
        self.ready_replicas: int = _int(status.get("readyReplicas"), 0)
        self.available_replicas: int = _int(status.get("availableReplicas"), 0)
        self.unavailable_replicas: int = _int(status.get("unavailableReplicas"), 0)
        tr = status.get("terminatingReplicas")
        self.terminating_replicas: int | None = None if tr is None else _int(tr, 0)
        cc = status.get("collisionCount")
        self.collision_count: int | None = None if cc is None else _int(cc, 0)

    @classmethod
    def _set_defaults(cls, spec: dict[str, Any]) -> None:
        _set_default(spec, "replicas", 1)
        strategy = spec.get("strategy")
        if strategy is None:
            strategy = spec["strategy"] = {}
        if isinstance(strategy, dict):
            _set_default(strategy, "type", ROLLING_UPDATE)
            if strategy["type"] == ROLLING_UPDATE:
                ru = strategy.get("rollingUpdate")
                if ru is None:
                    ru = strategy["rollingUpdate"] = {}
                if isinstance(ru, dict):
                    _set_default(ru, "maxUnavailable", "25%")
                    _set_default(ru, "maxSurge", "25%")
        _set_default(spec, "revisionHistoryLimit", 10)
        _set_default(spec, "progressDeadlineSeconds", 600)
        super()._set_defaults(spec)


class ReplicaSet(_Workload):
    KIND: ClassVar[str] = "ReplicaSet"
    API_VERSION: ClassVar[str] = "apps/v1"
    SCALE_SUBRESOURCE: ClassVar[bool] = True
    PLURAL: ClassVar[str] = "replicasets"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("rs",)

    __slots__ = ("available_replicas", "fully_labeled_replicas", "ready_replicas", "replicas", "status_replicas",
                 "terminating_replicas")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec, status = self.spec, self.status
        self.replicas: int = _int(spec.get("replicas"), 1)
        self.status_replicas: int = _int(status.get("replicas"), 0)
        self.fully_labeled_replicas: int = _int(status.get("fullyLabeledReplicas"), 0)
        self.ready_replicas: int = _int(status.get("readyReplicas"), 0)
        self.available_replicas: int = _int(status.get("availableReplicas"), 0)
        tr = status.get("terminatingReplicas")
        self.terminating_replicas: int | None = None if tr is None else _int(tr, 0)

    @classmethod
    def _set_defaults(cls, spec: dict[str, Any]) -> None:
        _set_default(spec, "replicas", 1)
        super()._set_defaults(spec)


class StatefulSet(_Workload):
    KIND: ClassVar[str] = "StatefulSet"
    API_VERSION: ClassVar[str] = "apps/v1"
    SCALE_SUBRESOURCE: ClassVar[bool] = True
    PLURAL: ClassVar[str] = "statefulsets"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("sts",)

    __slots__ = ("available_replicas", "collision_count", "current_replicas", "current_revision",
                 "max_unavailable", "ordinals_start", "partition", "pod_management_policy", "ready_replicas",
                 "replicas", "revision_history_limit", "service_name", "status_replicas", "update_revision",
                 "update_strategy_type", "updated_replicas", "volume_claim_templates", "when_deleted",
                 "when_scaled")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec, status = self.spec, self.status
        self.replicas: int = _int(spec.get("replicas"), 1)
        self.service_name: str = spec.get("serviceName") or ""
        self.pod_management_policy: str = spec.get("podManagementPolicy") or ORDERED_READY
        us = _dict(spec.get("updateStrategy"))
        self.update_strategy_type: str = us.get("type") or ROLLING_UPDATE
        ru = us.get("rollingUpdate")
        self.partition: int | None = (_int(_dict(ru).get("partition"), 0) if ru is not None
                                      else (0 if self.update_strategy_type == ROLLING_UPDATE else None))
        self.max_unavailable: int | str | None = _dict(ru).get("maxUnavailable")
        self.revision_history_limit: int = _int(spec.get("revisionHistoryLimit"), 10)
        vcts = spec.get("volumeClaimTemplates")
        self.volume_claim_templates: list[dict[str, Any]] = [
            t for t in vcts if isinstance(t, dict)] if isinstance(vcts, list) else []
        policy = _dict(spec.get("persistentVolumeClaimRetentionPolicy"))
        self.when_deleted: str = policy.get("whenDeleted") or RETAIN
        self.when_scaled: str = policy.get("whenScaled") or RETAIN
        self.ordinals_start: int = _int(_dict(spec.get("ordinals")).get("start"), 0)
        self.status_replicas: int = _int(status.get("replicas"), 0)
        self.ready_replicas: int = _int(status.get("readyReplicas"), 0)
        self.current_replicas: int = _int(status.get("currentReplicas"), 0)
        self.updated_replicas: int = _int(status.get("updatedReplicas"), 0)
        self.available_replicas: int = _int(status.get("availableReplicas"), 0)
        self.current_revision: str = status.get("currentRevision") or ""
        self.update_revision: str = status.get("updateRevision") or ""
        cc = status.get("collisionCount")
        self.collision_count: int | None = None if cc is None else _int(cc, 0)

    @classmethod
    def _set_defaults(cls, spec: dict[str, Any]) -> None:
        _set_default(spec, "replicas", 1)
        _set_default(spec, "podManagementPolicy", ORDERED_READY)
        us = spec.get("updateStrategy")
        if us is None:
            us = spec["updateStrategy"] = {}
        if isinstance(us, dict):
            _set_default(us, "type", ROLLING_UPDATE)
            if us["type"] == ROLLING_UPDATE:
                ru = us.get("rollingUpdate")
                if ru is None:
                    ru = us["rollingUpdate"] = {}
                if isinstance(ru, dict):
                    _set_default(ru, "partition", 0)
        _set_default(spec, "revisionHistoryLimit", 10)
        policy = spec.get("persistentVolumeClaimRetentionPolicy")
        if policy is None:
            policy = spec["persistentVolumeClaimRetentionPolicy"] = {}
        if isinstance(policy, dict):
            _set_default(policy, "whenDeleted", RETAIN)
            _set_default(policy, "whenScaled", RETAIN)
        vcts = spec.get("volumeClaimTemplates")
        if isinstance(vcts, list):
            for t in vcts:
                if isinstance(t, dict):
                    t.setdefault("apiVersion", "v1")
                    t.setdefault("kind", "PersistentVolumeClaim")
                    ts = t.get("spec")
                    if isinstance(ts, dict):
                        ts.setdefault("volumeMode", "Filesystem")
                    st = t.setdefault("status", {})
                    if isinstance(st, dict):
                        st.setdefault("phase", "Pending")
        super()._set_defaults(spec)


class DaemonSet(_Workload):
    KIND: ClassVar[str] = "DaemonSet"
    API_VERSION: ClassVar[str] = "apps/v1"
    PLURAL: ClassVar[str] = "daemonsets"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ds",)

    __slots__ = ("collision_count", "current_number_scheduled", "desired_number_scheduled", "max_surge",
                 "max_unavailable", "number_available", "number_misscheduled", "number_ready",
                 "number_unavailable", "revision_history_limit", "template_generation", "update_strategy_type",
                 "updated_number_scheduled")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        spec, status = self.spec, self.status
        us = _dict(spec.get("updateStrategy"))
        self.update_strategy_type: str = us.get("type") or ROLLING_UPDATE
        ru = _dict(us.get("rollingUpdate"))
        rolling = self.update_strategy_type == ROLLING_UPDATE
        self.max_unavailable: int | str = ru.get("maxUnavailable", 1) if rolling else 0
        self.max_surge: int | str = ru.get("maxSurge", 0) if rolling else 0
        self.revision_history_limit: int = _int(spec.get("revisionHistoryLimit"), 10)
        tg = self.annotations.get(TEMPLATE_GENERATION_ANNOTATION)
        self.template_generation: int | None = None
        if tg is not None and re.fullmatch(r"-?[0-9]+", str(tg)):
            self.template_generation = int(tg)
        self.desired_number_scheduled: int = _int(status.get("desiredNumberScheduled"), 0)
        self.current_number_scheduled: int = _int(status.get("currentNumberScheduled"), 0)
        self.number_misscheduled: int = _int(status.get("numberMisscheduled"), 0)
        self.number_ready: int = _int(status.get("numberReady"), 0)
        self.updated_number_scheduled: int = _int(status.get("updatedNumberScheduled"), 0)
        self.number_available: int = _int(status.get("numberAvailable"), 0)
        self.number_unavailable: int = _int(status.get("numberUnavailable"), 0)
        cc = status.get("collisionCount")
        self.collision_count: int | None = None if cc is None else _int(cc, 0)

    @classmethod
    def _set_defaults(cls, spec: dict[str, Any]) -> None:
        us = spec.get("updateStrategy")
        if us is None:
            us = spec["updateStrategy"] = {}
        if isinstance(us, dict):
            _set_default(us, "type", ROLLING_UPDATE)
            if us["type"] == ROLLING_UPDATE:
                ru = us.get("rollingUpdate")
                if ru is None:
                    ru = us["rollingUpdate"] = {}
                if isinstance(ru, dict):
                    _set_default(ru, "maxUnavailable", 1)
                    _set_default(ru, "maxSurge", 0)
        _set_default(spec, "revisionHistoryLimit", 10)
        super()._set_defaults(spec)

    @staticmethod
    def _generation(raw: dict[str, Any]) -> int:
        ann = _dict(_dict(raw.get("metadata")).get("annotations"))
        v = ann.get(TEMPLATE_GENERATION_ANNOTATION)
        return int(v) if isinstance(v, str) and re.fullmatch(r"[0-9]+", v) else 0

    @staticmethod
    def _set_generation(raw: dict[str, Any], generation: int) -> None:
        md = raw.get("metadata")
        if not isinstance(md, dict):
            return
        ann = md.get("annotations")
        if not isinstance(ann, dict):
            ann = md["annotations"] = {}
        ann[TEMPLATE_GENERATION_ANNOTATION] = str(generation)

    @classmethod
    def prepare_for_create(cls, raw: dict[str, Any]) -> None:
        super().prepare_for_create(raw)
        cls._set_generation(raw, max(1, cls._generation(raw)))

    @classmethod
    def prepare_for_update(cls, raw: dict[str, Any], old_raw: dict[str, Any]) -> None:
        super().prepare_for_update(raw, old_raw)
        old_gen = cls._generation(old_raw)
        if _dict(raw.get("spec")).get("template") != _dict(old_raw.get("spec")).get("template"):
            cls._set_generation(raw, old_gen + 1)
        else:
            cls._set_generation(raw, cls._generation(raw) or old_gen or 1)


class ControllerRevision(KubeObject):
    """An immutable snapshot of a StatefulSet's or DaemonSet's pod template (``data`` is the
    strategic merge patch that restores it) with a revision number."""

    KIND: ClassVar[str] = "ControllerRevision"
    API_VERSION: ClassVar[str] = "apps/v1"
    PLURAL: ClassVar[str] = "controllerrevisions"

    __slots__ = ("data", "revision")

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.data: Any = raw.get("data")
        self.revision: int = _int(raw.get("revision"), 0)

