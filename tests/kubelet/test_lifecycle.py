"""The admit handler chain: handlers asked in order, the first refusal is the answer."""

from __future__ import annotations

from api_objects import mkpod
from ksched.kubelet.lifecycle import PodAdmitAttributes, PodAdmitHandler, PodAdmitHandlers, PodAdmitResult


class _Handler:
    def __init__(self, result: PodAdmitResult, seen: list[str], name: str) -> None:
        self.result, self.seen, self.name = result, seen, name

    def admit(self, attrs: PodAdmitAttributes) -> PodAdmitResult:
        self.seen.append(self.name)
        return self.result


def test_first_refusal_wins_and_later_handlers_are_not_asked() -> None:
    seen: list[str] = []
    chain = PodAdmitHandlers()
    chain.add(_Handler(PodAdmitResult(), seen, "fit"))
    chain.add(_Handler(PodAdmitResult(False, "OutOfcpu", "Node didn't have enough resource: cpu"), seen, "cpu"))
    chain.add(_Handler(PodAdmitResult(False, "TopologyAffinityError", "x"), seen, "topology"))
    result = chain.admit(PodAdmitAttributes(mkpod("p")))
    assert (result.admit, result.reason) == (False, "OutOfcpu")
    assert seen == ["fit", "cpu"]
    assert isinstance(chain.handlers[0], PodAdmitHandler)


def test_no_handlers_admit() -> None:
    assert PodAdmitHandlers().admit(PodAdmitAttributes(mkpod("p"))).admit
