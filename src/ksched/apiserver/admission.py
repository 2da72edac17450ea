"""Admission on create, as kube-apiserver's defaulting and admission plugins do it for the kinds
the scheduler reads: Pod defaults, Priority (from priorityClassName or the globalDefault class),
DefaultTolerationSeconds. Functions here mutate a private copy of the manifest."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ksched.api.errors import Forbidden
from ksched.api.priorityclass import PriorityClass

__all__ = ["admit_pod", "default_pod"]

DEFAULT_SCHEDULER_NAME = "default-scheduler"
DEFAULT_TOLERATION_SECONDS = 300
_NOT_READY = "node.kubernetes.io/not-ready"
_UNREACHABLE = "node.kubernetes.io/unreachable"


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
    status = raw.setdefault("status", {})
    status.setdefault("phase", "Pending")
    # As the API server's pod strategy: a gated pod says why it is not scheduled.
    conds = status.get("conditions") or []
    if spec.get("schedulingGates") and not any(c.get("type") == "PodScheduled" for c in conds
                                               if isinstance(c, dict)):
        status["conditions"] = [*conds, {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                         "message": "Scheduling is blocked due to non-empty scheduling gates"}]


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
        add.append({"key": _NOT_READY, "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
    if not have_ur:
        add.append({"key": _UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
    if add:
        spec["tolerations"] = [*tols, *add]


def admit_pod(raw: dict[str, Any], priority_classes: Callable[[], Iterable[PriorityClass]],
              get_priority_class: Callable[[str], PriorityClass | None], *, strict_priority: bool = False,
              default_tolerations: bool = True) -> None:
    """Priority admission and defaulting of a new pod (in place)."""
    default_pod(raw)
    spec = raw["spec"]
    if default_tolerations:
        _default_tolerations(spec)
    name = spec.get("priorityClassName") or ""
    pc: PriorityClass | None
    if name:
        pc = get_priority_class(name)
        if pc is None:
            raise Forbidden(f'pods "{(raw.get("metadata") or {}).get("name", "")}" is forbidden: '
                            f"no PriorityClass with name {name} was found",
                            kind="pods", name=(raw.get("metadata") or {}).get("name", ""))
    else:
        defaults = [p for p in priority_classes() if p.global_default]
        pc = min(defaults, key=lambda p: p.value) if defaults else None
    computed = pc.value if pc is not None else 0
    given = spec.get("priority")
    if given is not None and given != computed:
        if strict_priority or name:
            raise Forbidden(
                f"the integer value of priority ({given}) must not be provided in pod spec; priority "
                f"admission controller computed {computed} from the given PriorityClass name")
        # Lenient (the default): a pod that states its priority without a class keeps it, as
        # manifests generated for simulation (and scheduler_perf's templates) expect.
    else:
        spec["priority"] = computed
        if pc is not None and name == "" and pc.name:
            spec["priorityClassName"] = pc.name
    if "preemptionPolicy" not in spec:
        spec["preemptionPolicy"] = pc.preemption_policy if pc is not None else "PreemptLowerPriority"
