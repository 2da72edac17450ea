"""What a controller waits to see in its informer's cache after its own writes, as upstream's
``ControllerExpectations`` (``pkg/controller/controller_utils.go``: pod creations and deletions
per Job, forgotten after five minutes) and the Job controller's ``uidTrackingExpectations``
(``tracking_utils.go``: the pods whose tracking finalizer it removed)."""

from __future__ import annotations

from dataclasses import dataclass

from ksched.clock import Clock

__all__ = ["EXPECTATIONS_TIMEOUT", "ControllerExpectations", "UIDTrackingExpectations"]

EXPECTATIONS_TIMEOUT = 300.0


@dataclass
class _Expectation:
    add: int
    delete: int
    timestamp: float


class ControllerExpectations:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._exp: dict[str, _Expectation] = {}

    def satisfied(self, key: str) -> bool:
        e = self._exp.get(key)
        if e is None:
            return True  # a new controller, or one that synced everything
        if e.add <= 0 and e.delete <= 0:
            return True
        return self.clock.now() - e.timestamp > EXPECTATIONS_TIMEOUT

    def expect_creations(self, key: str, n: int) -> None:
        self._exp[key] = _Expectation(n, 0, self.clock.now())

    def expect_deletions(self, key: str, n: int) -> None:
        self._exp[key] = _Expectation(0, n, self.clock.now())

    def creation_observed(self, key: str) -> None:
        e = self._exp.get(key)
        if e is not None:
            e.add -= 1

    def deletion_observed(self, key: str) -> None:
        e = self._exp.get(key)
        if e is not None:
            e.delete -= 1

    def delete(self, key: str) -> None:
        self._exp.pop(key, None)


class UIDTrackingExpectations:
    def __init__(self) -> None:
        self._uids: dict[str, set[str]] = {}

    def expected(self, key: str) -> set[str]:
        return self._uids.get(key, set())

    def expect_removed(self, key: str, uids: list[str]) -> None:
        self._uids.setdefault(key, set()).update(uids)

    def removal_observed(self, key: str, uid: str) -> None:
        s = self._uids.get(key)
        if s is not None:
            s.discard(uid)
            if not s:
                del self._uids[key]

    def delete(self, key: str) -> None:
        self._uids.pop(key, None)
