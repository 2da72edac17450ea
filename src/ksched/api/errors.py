"""Errors as the API server reports them: field errors with their paths (upstream's
``apimachinery/pkg/util/validation/field``) and the ``Status`` error family with reason, code and
details (``apimachinery/pkg/api/errors``). Every layer shares them: the store raises them, the
REST client rebuilds them from a ``Status`` body, the scheduler and controllers catch them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "BindingConflict",
    "Conflict",
    "FieldError",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "MethodNotAllowed",
    "NotAcceptable",
    "NotFound",
    "Path",
    "RequestEntityTooLarge",
    "ServiceUnavailable",
    "TooManyRequests",
    "Unauthorized",
    "UnsupportedMediaType",
    "ValidationError",
    "aggregate_error_message",
]


def aggregate_error_message(messages: Iterable[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: "" for none, one message as is, several
    de-duplicated (in their first order) and in brackets: ``[a, b]``."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]" if unique else ""


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with one field: ``spec.containers[0].resources.requests.cpu: invalid quantity "1.2.3"``."""

    path: str
    message: str
    reason: str = "FieldValueInvalid"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(slots=True)
class ValidationError(Exception):
    """An object that failed validation; carries every field error found."""

    kind: str
    name: str
    errors: list[FieldError] = field(default_factory=list)
    namespace: str = ""

    def __post_init__(self) -> None:
        Exception.__init__(self, str(self))

    def __str__(self) -> str:
        ref = f"{self.namespace}/{self.name}" if self.namespace else self.name
        details = "; ".join(str(e) for e in self.errors)
        return f"{self.kind} {ref!r} is invalid: {details}"


class Path:
    """Builds field paths: ``Path("spec").child("containers").index(0)`` -> ``spec.containers[0]``.

    Validation asks for a path at every field it checks, and almost never reports one: paths
    are immutable and shared, so each is formatted once. A root (``Path(s)``) is the same
    object for the same string, and each path keeps the children asked of it (at most
    ``_MAX_KIDS``, so map keys from objects never grow memory without bound)."""

    __slots__ = ("_kids", "_s")
    _MAX_ROOTS = 512
    _MAX_KIDS = 64
    _roots: ClassVar[dict[str, Path]] = {}

    def __new__(cls, s: str = "") -> Path:
        p = cls._roots.get(s)
        if p is None:
            p = cls._make(s)
            if len(cls._roots) < cls._MAX_ROOTS:
                cls._roots[s] = p
        return p

    @classmethod
    def _make(cls, s: str) -> Path:
        p = object.__new__(cls)
        p._s = s
        p._kids = None
        return p

    def _kid(self, k: Any, s: str) -> Path:
        kids = self._kids
        if kids is None:
            kids = self._kids = {}
        p = self._make(s)
        if len(kids) < self._MAX_KIDS:
            kids[k] = p
        return p

    def child(self, name: str) -> Path:
        kids = self._kids
        p = kids.get(name) if kids is not None else None
        return p if p is not None else self._kid(name, f"{self._s}.{name}" if self._s else name)

    def index(self, i: int) -> Path:
        kids = self._kids
        p = kids.get(i) if kids is not None else None
        return p if p is not None else self._kid(i, f"{self._s}[{i}]")

    def key(self, k: str) -> Path:
        kids = self._kids
        kk = ("[", k)
        p = kids.get(kk) if kids is not None else None
        return p if p is not None else self._kid(kk, f"{self._s}[{k}]")

    def __str__(self) -> str:
        return self._s

    def __repr__(self) -> str:
        return f"Path({self._s!r})"

class ApiError(Exception):
    """An error with an HTTP code and a Kubernetes ``Status`` reason."""

    code = 500
    reason = "InternalError"

    def __init__(self, message: str, *, kind: str = "", name: str = "", group: str = "",
                 causes: list[dict[str, Any]] | None = None, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.name = name
        self.group = group
        self.causes = causes or []
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = self.causes
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        st: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            st["details"] = details
        return st


def _resource(kind_plural: str, group: str) -> str:
    return f"{kind_plural}.{group}" if group else kind_plural


class NotFound(ApiError):
    code = 404
    reason = "NotFound"

    @classmethod
    def of(cls, plural: str, name: str, group: str = "") -> NotFound:
        return cls(f'{_resource(plural, group)} "{name}" not found', kind=plural, name=name, group=group)


class AlreadyExists(ApiError):
    code = 409
    reason = "AlreadyExists"

    @classmethod
    def of(cls, plural: str, name: str, group: str = "") -> AlreadyExists:
        return cls(f'{_resource(plural, group)} "{name}" already exists', kind=plural, name=name, group=group)


class Conflict(ApiError):
    code = 409
    reason = "Conflict"

    @classmethod
    def of(cls, plural: str, name: str, why: str, group: str = "") -> Conflict:
        return cls(f'Operation cannot be fulfilled on {_resource(plural, group)} "{name}": {why}',
                   kind=plural, name=name, group=group)


class BindingConflict(Conflict):
    """A ``pods/binding`` refused by a conflict resolver (the embedded store's or the admission
    webhook's) because the node would be over-committed: another scheduler took the room. The
    scheduler retries such a pod at once, without backoff. On the wire it is a 409 Conflict on
    ``pods/binding``; the REST client rebuilds this type from that."""

    RESOURCE = "pods/binding"

    @classmethod
    def over_commit(cls, pod_name: str, why: str) -> BindingConflict:
        return cls(f'Operation cannot be fulfilled on {cls.RESOURCE} "{pod_name}": {why}',
                   kind=cls.RESOURCE, name=pod_name)

    @staticmethod
    def is_refusal(details_kind: str, message: str) -> bool:
        """Whether a 409 Conflict read off the wire is a resolver's refusal: its details name
        ``pods/binding``, or (through kube-apiserver, which passes a webhook's denial on with a
        prefix of its own and without details) its message does."""
        return details_kind == BindingConflict.RESOURCE or f'{BindingConflict.RESOURCE} "' in message


class Invalid(ApiError):
    code = 422
    reason = "Invalid"

    @classmethod
    def of(cls, kind: str, name: str, errors: list[FieldError], group: str = "") -> Invalid:
        # As upstream's NewInvalid: several errors are shown as an aggregate, "[a, b]".
        qualified = f"{kind}.{group}" if group else kind  # schema.GroupKind.String()
        msg = f'{qualified} "{name}" is invalid: ' + aggregate_error_message(str(e) for e in errors)
        causes = [{"reason": e.reason, "message": e.message, "field": e.path} for e in errors]
        return cls(msg, kind=kind, name=name, group=group, causes=causes)


class BadRequest(ApiError):
    code = 400
    reason = "BadRequest"


class Unauthorized(ApiError):
    code = 401
    reason = "Unauthorized"


class Forbidden(ApiError):
    code = 403
    reason = "Forbidden"


class MethodNotAllowed(ApiError):
    code = 405
    reason = "MethodNotAllowed"


class NotAcceptable(ApiError):
    code = 406
    reason = "NotAcceptable"


class RequestEntityTooLarge(ApiError):
    code = 413
    reason = "RequestEntityTooLarge"


class Gone(ApiError):
    code = 410
    reason = "Expired"


class TooManyRequests(ApiError):
    code = 429
    reason = "TooManyRequests"


class UnsupportedMediaType(ApiError):
    code = 415
    reason = "UnsupportedMediaType"


class InternalError(ApiError):
    code = 500
    reason = "InternalError"


class ServiceUnavailable(ApiError):
    """The API server could not be reached (connection refused or reset, timeout): what the
    client sees while the server restarts. Callers treat it as any other failed request."""

    code = 503
    reason = "ServiceUnavailable"
