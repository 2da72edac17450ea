"""DeleteOptions as kube-apiserver reads them, and the finalizers a delete leaves for the
garbage collector.

Upstream: ``staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go`` (DeleteOptions),
``.../meta/v1/validation`` (ValidateDeleteOptions), ``staging/src/k8s.io/apiserver/pkg/registry/
generic/registry/store.go`` (``deletionFinalizersForGarbageCollection``, ``shouldOrphanDependents``,
``shouldDeleteDependents``) and the strategies' ``DefaultGarbageCollectionPolicy``
(``pkg/registry/*/strategy.go``): batch/v1 Jobs orphan their pods by default, every other kind
ksched serves deletes its dependents in the background (kubectl always sends Background).

* **Orphan**: the ``orphan`` finalizer; the garbage collector strips the dependents' owner
  references, then removes it.
* **Foreground**: the ``foregroundDeletion`` finalizer; the garbage collector deletes the
  dependents (the ``blockOwnerDeletion`` ones must be gone), then removes it.
* **Background**: neither; the owner goes at once, the collector deletes dependents after.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ksched.api.errors import BadRequest, FieldError, Invalid

__all__ = ["BACKGROUND", "DEFAULT_GC_POLICY", "FOREGROUND", "FOREGROUND_FINALIZER", "ORPHAN",
           "ORPHAN_FINALIZER", "DeleteOptions", "gc_finalizers", "optional_int"]

ORPHAN = "Orphan"
BACKGROUND = "Background"
FOREGROUND = "Foreground"
ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"

# Kinds whose default propagation is not Background.
DEFAULT_GC_POLICY: dict[str, str] = {"Job": ORPHAN}


def _opt_bool(v: Any, name: str) -> bool | None:
    if v is None or v == "":
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise BadRequest(f"{name}: expected a boolean, got {v!r}")


def optional_int(v: Any, name: str) -> int | None:
    """An integer parameter (query or body) or None; anything else is a 400, as upstream."""
    if v is None or v == "":
        return None
    if isinstance(v, bool) or not isinstance(v, int | str):
        raise BadRequest(f"{name}: expected an integer, got {v!r}")
    try:
        return int(v)
    except ValueError as e:
        raise BadRequest(f"{name}: expected an integer, got {v!r}") from e


def _opt_str(v: Any, name: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise BadRequest(f"{name}: expected a string, got {v!r}")
    return v


@dataclass(slots=True)
class DeleteOptions:
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    orphan_dependents: bool | None = None
    uid: str | None = None  # preconditions
    resource_version: str | None = None

    @classmethod
    def parse(cls, body: Mapping[str, Any] | None, query: Mapping[str, str] | None = None) -> DeleteOptions:
        """From a DeleteOptions body and/or the query parameters (the body wins where both say)."""
        body = body or {}
        query = query or {}
        if not isinstance(body, Mapping):
            raise BadRequest("DeleteOptions must be a JSON object")
        pre = body.get("preconditions")
        if pre is not None and not isinstance(pre, Mapping):
            raise BadRequest("preconditions must be a JSON object")
        pre = pre or {}

        def pick(key: str) -> Any:
            return body[key] if body.get(key) is not None else query.get(key)

        return cls(
            grace_period_seconds=optional_int(pick("gracePeriodSeconds"), "gracePeriodSeconds"),
            propagation_policy=_opt_str(pick("propagationPolicy"), "propagationPolicy"),
            orphan_dependents=_opt_bool(pick("orphanDependents"), "orphanDependents"),
            uid=_opt_str(pre.get("uid"), "preconditions.uid") or None,
            resource_version=_opt_str(pre.get("resourceVersion"), "preconditions.resourceVersion") or None,
        )

    def validate(self) -> None:
        """ValidateDeleteOptions: raises Invalid (422) as upstream."""
        errs: list[FieldError] = []
        if self.orphan_dependents is not None and self.propagation_policy is not None:
            errs.append(FieldError("propagationPolicy", f'Invalid value: "{self.propagation_policy}": '
                                                        "orphanDependents and deletionPropagation cannot be both set"))
        if self.propagation_policy is not None and self.propagation_policy not in (FOREGROUND, BACKGROUND, ORPHAN):
            errs.append(FieldError("propagationPolicy",
                                   f'Unsupported value: "{self.propagation_policy}": supported values: '
                                   '"Foreground", "Background", "Orphan", "nil"', "FieldValueNotSupported"))
        if errs:
            raise Invalid.of("DeleteOptions.meta.k8s.io", "", errs)

    def effective_grace(self) -> int | None:
        """Negative grace periods count as one second, as upstream."""
        g = self.grace_period_seconds
        return 1 if g is not None and g < 0 else g


def _should_orphan(finalizers: list[str], opts: DeleteOptions, default: str) -> bool:
    if opts.orphan_dependents is not None:
        return opts.orphan_dependents
    if opts.propagation_policy is not None:
        return opts.propagation_policy == ORPHAN
    for f in finalizers:
        if f == ORPHAN_FINALIZER:
            return True
        if f == FOREGROUND_FINALIZER:
            return False
    return default == ORPHAN


def _should_delete_dependents(finalizers: list[str], opts: DeleteOptions) -> bool:
    if opts.orphan_dependents is not None:
        return False
    if opts.propagation_policy is not None:
        return opts.propagation_policy == FOREGROUND
    for f in finalizers:
        if f == FOREGROUND_FINALIZER:
            return True
        if f == ORPHAN_FINALIZER:
            return False
    return False


def gc_finalizers(finalizers: list[str], opts: DeleteOptions, kind: str) -> list[str] | None:
    """The object's finalizers after a delete with ``opts`` (``orphan`` and ``foregroundDeletion``
    set or cleared), or None when they do not change."""
    default = DEFAULT_GC_POLICY.get(kind, BACKGROUND)
    out = [f for f in finalizers if f not in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER)]
    if _should_orphan(finalizers, opts, default):
        out.append(ORPHAN_FINALIZER)
    if _should_delete_dependents(finalizers, opts):
        out.append(FOREGROUND_FINALIZER)
    return None if set(out) == set(finalizers) else out
