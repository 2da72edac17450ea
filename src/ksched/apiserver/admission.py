"""Admission, as kube-apiserver's defaulting and admission plugins run it on a new object
(``staging/src/k8s.io/apiserver/pkg/admission``; plugin order from ``pkg/kubeapiserver/options/
plugins.go``):

1. API defaulting of the pod (the fields the scheduler reads);
2. mutating plugins, in order: NamespaceLifecycle (in the store), LimitRanger, ServiceAccount,
   Priority, DefaultTolerationSeconds, RuntimeClass;
3. object validation (in the store);
4. validating plugins, in order: LimitRanger, Priority (PriorityClasses), RuntimeClass, and
   ResourceQuota last (in the store, which charges the quota in the same step as the write).

:data:`ADMISSION_PLUGINS` names the plugins ksched runs; a store can run without some
(``disable_admission_plugins``, as kube-apiserver's ``--disable-admission-plugins``; the
scheduler_perf workloads run without ServiceAccount and Priority, as upstream's benchmark
server does). Functions here mutate a private copy of the manifest. Refusals raise
:class:`Forbidden` with upstream's ``<resource> "<name>" is forbidden: <why>``.

Divergences: the ServiceAccount plugin mounts no API token volume (simulated pods run no
containers) and accepts a pod whose ``default`` service account is not there yet (upstream
retries for a moment while the serviceaccount controller creates it; the embedded store cannot
wait inside a write); objects imported from another cluster (``existing``) keep what that
cluster's admission gave them and are not mutated again.
"""

from __future__ import annotations

import marshal
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ksched.api.errors import Forbidden
from ksched.api.limitrange import LimitRange
from ksched.api.meta import KubeObject
from ksched.api.pod import Pod
from ksched.api.priorityclass import PriorityClass
from ksched.api.runtimeclass import RuntimeClass
from ksched.api.serviceaccount import DEFAULT_SERVICE_ACCOUNT
from ksched.api.taints import fixed_toleration
from ksched.apiserver import limitranger, runtimeclass

__all__ = ["ADMISSION_KINDS", "ADMISSION_PLUGINS", "Lookup", "admission_key", "admit_pod", "admit_priority_class",
           "check_plugins", "default_pod", "default_pod_status", "forbidden", "validate_admission"]

# The kinds admit_pod reads (through its Lookup): a pod's admission is a function of its spec,
# its namespace, whether it is a mirror pod, the disabled plugins and these kinds' objects.
ADMISSION_KINDS = frozenset(("LimitRange", "ServiceAccount", "PriorityClass", "RuntimeClass"))

DEFAULT_SCHEDULER_NAME = "default-scheduler"
DEFAULT_TOLERATION_SECONDS = 300
_NOT_READY = "node.kubernetes.io/not-ready"
_UNREACHABLE = "node.kubernetes.io/unreachable"
_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

# The admission plugins ksched runs, in upstream's order.
ADMISSION_PLUGINS = ("NamespaceLifecycle", "LimitRanger", "ServiceAccount", "Priority", "DefaultTolerationSeconds",
                     "RuntimeClass", "ResourceQuota")


class Lookup(Protocol):
    """What admission reads of the store: objects of a kind in a namespace, and one by name."""

    def list(self, kind: str, namespace: str) -> list[KubeObject]: ...

    def get(self, kind: str, namespace: str, name: str) -> KubeObject | None: ...


def check_plugins(names: Iterable[str]) -> frozenset[str]:
    """The plugin names, each one known (ValueError otherwise)."""
    out = frozenset(n.strip() for n in names if n.strip())
    unknown = sorted(out - set(ADMISSION_PLUGINS))
    if unknown:
        raise ValueError(f"unknown admission plugin(s): {', '.join(unknown)} (known: {', '.join(ADMISSION_PLUGINS)})")
    return out


def forbidden(resource: str, name: str, why: str) -> Forbidden:
    """Upstream's admission.NewForbidden: ``<resource> "<name>" is forbidden: <why>``."""
    return Forbidden(f'{resource} "{name}" is forbidden: {why}', kind=resource.partition(".")[0], name=name)


def _display_name(raw: dict[str, Any]) -> str:
    md = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    return str(md.get("name") or md.get("generateName") or "Unknown")


def default_pod(raw: dict[str, Any]) -> None:
    """API defaulting for the fields the scheduler reads (in place, on a private copy)."""
    spec = raw.setdefault("spec", {})
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER_NAME)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or ():
            res = c.get("resources")
            if not res:
                continue
            lims = res.get("limits")
            if lims:
                reqs = res.setdefault("requests", {})
                for k, v in lims.items():
                    reqs.setdefault(k, v)
            for p in c.get("ports") or ():
                p.setdefault("protocol", "TCP")
    default_pod_status(raw)


def default_pod_status(raw: dict[str, Any]) -> None:
    """The status part of :func:`default_pod` (its last step: it reads the spec's scheduling
    gates, which no admission step changes)."""
    spec = raw["spec"]
    status = raw.setdefault("status", {})
    status.setdefault("phase", "Pending")
    # As the API server's pod strategy: a gated pod says why it is not scheduled.
    conds = status.get("conditions") or []
    if spec.get("schedulingGates") and not any(c.get("type") == "PodScheduled" for c in conds
                                               if isinstance(c, dict)):
        status["conditions"] = [*conds, {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                         "message": "Scheduling is blocked due to non-empty scheduling gates"}]


# The two default tolerations, one dict each shared by every pod's manifest (stored manifests
# are never changed in place; every pod carries both), registered as such: parsing a pod reads
# them no more.
_NOT_READY_TOLERATION = fixed_toleration({"key": _NOT_READY, "operator": "Exists", "effect": "NoExecute",
                                          "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
_UNREACHABLE_TOLERATION = fixed_toleration({"key": _UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                                            "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})


def _default_tolerations(spec: dict[str, Any]) -> None:
    """DefaultTolerationSeconds: tolerate not-ready and unreachable NoExecute taints for 300 s."""
    tols = spec.get("tolerations") or []
    have_nr = have_ur = False
    for t in tols:
        eff = t.get("effect") or ""
        if eff not in ("", "NoExecute"):
            continue
        key = t.get("key") or ""
        op = t.get("operator") or ""
        if key == "" and op == "Exists":
            have_nr = have_ur = True
        if key == _NOT_READY:
            have_nr = True
        if key == _UNREACHABLE:
            have_ur = True
    add = []
    if not have_nr:
        add.append(_NOT_READY_TOLERATION)
    if not have_ur:
        add.append(_UNREACHABLE_TOLERATION)
    if add:
        spec["tolerations"] = [*tols, *add]


def _service_account(raw: dict[str, Any], namespace: str, lookup: Lookup) -> str | None:
    """The ServiceAccount plugin: the pod runs as ``default`` unless it names an account, which
    must exist. Why the pod is refused, else None."""
    md = raw.get("metadata") or {}
    if _MIRROR_ANNOTATION in (md.get("annotations") or {}):
        return None
    spec = raw["spec"]
    name = spec.get("serviceAccountName") or spec.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT
    spec["serviceAccountName"] = name
    if name != DEFAULT_SERVICE_ACCOUNT and lookup.get("ServiceAccount", namespace, name) is None:
        return f'error looking up service account {namespace}/{name}: serviceaccount "{name}" not found'
    return None


def _priority(raw: dict[str, Any], lookup: Lookup, existing: bool) -> str | None:
    """The Priority plugin: the pod's priority from its PriorityClass (or the global default
    with the lowest value, else 0); a stated priority must agree. Why refused, else None."""
    spec = raw["spec"]
    name = spec.get("priorityClassName") or ""
    given = spec.get("priority")
    if existing and given is not None:
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        return None  # admitted by the cluster it was exported from
    pc: PriorityClass | None
    if name:
        got = lookup.get("PriorityClass", "", name)
        pc = got if isinstance(got, PriorityClass) else None
        if pc is None:
            if existing:
                return None
            return f"no PriorityClass with name {name} was found"
    else:
        defaults = [p for p in lookup.list("PriorityClass", "") if isinstance(p, PriorityClass) and p.global_default]
        pc = min(defaults, key=lambda p: p.value) if defaults else None
    computed = pc.value if pc is not None else 0
    if given is not None and given != computed:
        return (f"the integer value of priority ({given}) must not be provided in pod spec; priority admission "
                f"controller computed {computed} from the given PriorityClass name")
    policy = pc.preemption_policy if pc is not None else "PreemptLowerPriority"
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        return (f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; priority "
                f"admission controller computed {policy} from the given PriorityClass name")
    spec["priority"] = computed
    spec["preemptionPolicy"] = policy
    if pc is not None and not name and pc.name:
        spec["priorityClassName"] = pc.name
    return None


def _lenient_priority(raw: dict[str, Any]) -> None:
    """Without the Priority plugin (scheduler_perf's server): the pod keeps what it states."""
    raw["spec"].setdefault("preemptionPolicy", "PreemptLowerPriority")


def _runtime_class_getter(lookup: Lookup) -> Callable[[str], RuntimeClass | None]:
    def get(name: str) -> RuntimeClass | None:
        rc = lookup.get("RuntimeClass", "", name)
        return rc if isinstance(rc, RuntimeClass) and rc.deletion_timestamp is None else None
    return get


def _limit_ranges(lookup: Lookup, namespace: str) -> list[LimitRange]:
    found = lookup.list("LimitRange", namespace)
    if not found:
        return []  # (most namespaces: every pod asks twice)
    return sorted((lr for lr in found if isinstance(lr, LimitRange)), key=lambda lr: lr.name)


def admission_key(raw: dict[str, Any], disabled: frozenset[str], spec_key: bytes | None = None) -> tuple[Any, ...] | None:
    """What :func:`admit_pod` reads of a new pod (not an existing one) besides the store's
    ``ADMISSION_KINDS``: its namespace, whether it is a mirror pod, the disabled plugins and
    its spec as ``marshal`` writes it (every value's exact type, each dict's key order: equal
    bytes are values no step can tell apart; its name is read only for the messages of a
    refusal). Two pods with the same key, admitted while those kinds' objects are the same, get
    equal specs, refused or not alike. None when the spec cannot be keyed (not a dict, a value
    ``marshal`` refuses: a YAML timestamp, a subclass). ``spec_key``: the spec's
    ``marshal.dumps(spec, 2)``, when the caller has it (the loader's validation made it)."""
    md = raw.get("metadata")
    spec = raw.get("spec")
    if md.__class__ is not dict or spec.__class__ is not dict:
        return None
    if spec_key is None:
        try:
            spec_key = marshal.dumps(spec, 2)
        except ValueError:
            return None
    ann = md.get("annotations")
    return (str(md.get("namespace") or "default"), _MIRROR_ANNOTATION in (ann or {}), disabled, spec_key)


def admit_pod(raw: dict[str, Any], lookup: Lookup, disabled: frozenset[str] = frozenset(), *,
              existing: bool = False) -> bool:
    """API defaulting and the mutating plugins on a new pod (in place); raises Forbidden.

    Returns whether the pod stays valid if it was valid before: True when only the steps that
    set valid values on any valid pod ran (API defaults, requests copied from valid limits, the
    service account's name, the priority of a PriorityClass, the default tolerations); False
    when LimitRanger or RuntimeClass may have changed it (a LimitRange's default limit below
    the pod's request makes it invalid). A store that was handed an already validated pod
    validates it again only then."""
    default_pod(raw)
    md = raw.get("metadata") or {}
    namespace = str(md.get("namespace") or "default")
    name = _display_name(raw)
    if existing:
        _priority(raw, lookup, True)
        return True
    keeps_validity = True
    if "LimitRanger" not in disabled:
        ranges = _limit_ranges(lookup, namespace)
        if ranges:
            limitranger.mutate_pod(raw, ranges)
            keeps_validity = False
    if "ServiceAccount" not in disabled:
        why = _service_account(raw, namespace, lookup)
        if why:
            raise forbidden("pods", name, why)
    if "Priority" not in disabled:
        why = _priority(raw, lookup, False)
        if why:
            raise forbidden("pods", name, why)
    else:
        _lenient_priority(raw)
    if "DefaultTolerationSeconds" not in disabled:
        _default_tolerations(raw["spec"])
    if "RuntimeClass" not in disabled:
        if raw["spec"].get("runtimeClassName") is not None:
            keeps_validity = False  # its overhead, node selector and tolerations may be merged in
        why = runtimeclass.admit(raw, _runtime_class_getter(lookup))
        if why:
            raise forbidden("pods", name, why)
    return keeps_validity


def validate_admission(obj: KubeObject, lookup: Lookup, disabled: frozenset[str] = frozenset()) -> None:
    """The validating plugins (but quota) on a new, valid object; raises Forbidden."""
    if isinstance(obj, Pod):
        if "LimitRanger" not in disabled:
            ranges = _limit_ranges(lookup, obj.namespace)
            why = limitranger.validate_pod(obj, ranges) if ranges else None
            if why:
                raise forbidden("pods", _display_name(obj.raw), why)
        # (runtimeclass.validate passes a pod without an overhead at once)
        if "RuntimeClass" not in disabled and (obj.raw.get("spec") or {}).get("overhead"):
            why = runtimeclass.validate(obj.raw, _runtime_class_getter(lookup))
            if why:
                raise forbidden("pods", _display_name(obj.raw), why)
    elif obj.KIND_KEY == "PersistentVolumeClaim" and "LimitRanger" not in disabled:
        ranges = _limit_ranges(lookup, obj.namespace)
        why = limitranger.validate_claim(obj.raw, ranges) if ranges else None
        if why:
            raise forbidden("persistentvolumeclaims", _display_name(obj.raw), why)


def admit_priority_class(raw: dict[str, Any], lookup: Lookup, disabled: frozenset[str] = frozenset()) -> None:
    """The Priority plugin on a PriorityClass: at most one may be the global default."""
    if "Priority" in disabled or not raw.get("globalDefault"):
        return
    name = _display_name(raw)
    for pc in lookup.list("PriorityClass", ""):
        if isinstance(pc, PriorityClass) and pc.global_default and pc.name != name:
            raise forbidden("priorityclasses.scheduling.k8s.io", name,
                            f"PriorityClass {pc.name} is already marked as default. Only one default can exist")
