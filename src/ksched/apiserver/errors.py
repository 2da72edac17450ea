"""API errors as kube-apiserver reports them: a ``Status`` object with reason, code and details."""

from __future__ import annotations

from typing import Any

from ksched.api.errors import FieldError

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "MethodNotAllowed",
    "NotFound",
    "ServiceUnavailable",
    "TooManyRequests",
    "Unauthorized",
]


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


class Invalid(ApiError):
    code = 422
    reason = "Invalid"

    @classmethod
    def of(cls, kind: str, name: str, errors: list[FieldError], group: str = "") -> Invalid:
        # As upstream's NewInvalid: several errors are shown as an aggregate, "[a, b]".
        unique = list(dict.fromkeys(str(e) for e in errors))
        details = ", ".join(unique)
        msg = f'{kind} "{name}" is invalid: ' + (f"[{details}]" if len(unique) > 1 else details)
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
