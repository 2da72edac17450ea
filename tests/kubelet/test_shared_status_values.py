"""Status values shared between pods (``ksched.kubelet.runtime.SHARE_STATUS_VALUES``, the
store's ``share_status_values``) against the reference, a new object per pod: the same values
(as JSON, types included) wherever the kubelet and the binding write them, and the same runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import mknode, mkpod
from ksched.api.meta import format_time
from ksched.api.pod import Pod
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.kubelet import runtime as rt
from ksched.sim.nodebench import node_side_day
from ksched.sim.realistic import generate
from ksched.sim.simulation import Simulation

_TIMES = st.one_of(st.sampled_from(["2024-01-01T00:00:00Z", "2024-01-01T00:00:05Z", ""]), st.none(),
                   st.integers(0, 3), st.booleans(), st.lists(st.integers(0, 2), max_size=2))
_CONDITION = st.fixed_dictionaries(
    {"type": st.sampled_from(["PodScheduled", "Initialized", "ContainersReady", "Ready", "DisruptionTarget"]),
     "status": st.sampled_from(["True", "False", "Unknown"])},
    optional={"lastTransitionTime": _TIMES, "reason": st.sampled_from(["", "R"])})


def _pod(conditions: list[dict[str, Any]]) -> Pod:
    raw = mkpod("p")
    raw["metadata"]["uid"] = "u1"
    raw["status"] = {"conditions": conditions}
    return Pod.from_dict(raw)


def _conditions(pod: Pod, now: float, ready: bool, reason: str, message: str, share: bool) -> list[dict[str, Any]]:
    old = rt.SHARE_STATUS_VALUES
    rt.SHARE_STATUS_VALUES = share
    try:
        return rt.pod_conditions(pod, now, ready, reason, message)
    finally:
        rt.SHARE_STATUS_VALUES = old


@given(conds=st.lists(_CONDITION, max_size=4), now=st.sampled_from([0.0, 5.0, 5.5, 86400.0]),
       ready=st.booleans(), reason=st.sampled_from(["", "ContainersNotReady", "PodCompleted"]),
       message=st.sampled_from(["", "containers with unready status: [c]"]))
@settings(max_examples=300, deadline=None)
def test_conditions_as_the_reference(conds: list[dict[str, Any]], now: float, ready: bool, reason: str,
                                     message: str) -> None:
    rt._shared.clear()  # bounded: cleared when full, which must not fall between the two pods
    pod = _pod(conds)
    ref = _conditions(pod, now, ready, reason, message, share=False)
    shared = _conditions(pod, now, ready, reason, message, share=True)
    again = _conditions(_pod(json.loads(json.dumps(conds))), now, ready, reason, message, share=True)
    assert json.dumps(shared) == json.dumps(ref)  # the same values, types and key order
    assert json.dumps(again) == json.dumps(ref)
    for a, b in zip(shared[-3:], again[-3:], strict=True):
        if not isinstance(a.get("lastTransitionTime"), list):
            assert a is b  # shared by the two pods
    assert all(a is not b for a, b in zip(ref[-3:], _conditions(pod, now, ready, reason, message, False)[-3:],
                                          strict=True))


def test_running_state_shared_per_instant() -> None:
    rt._shared.clear()  # bounded: a clear when full must not fall between the calls compared
    assert rt.running(5.0) is rt.running(5.2) and rt.running(5.0) == {"running": {"startedAt": "1970-01-01T00:00:05Z"}}
    assert rt.running(6.0) is not rt.running(5.0)
    rt.SHARE_STATUS_VALUES = False
    try:
        assert rt.running(5.0) is not rt.running(5.0) and rt.running(5.0) == rt.running(5.2)
    finally:
        rt.SHARE_STATUS_VALUES = True


def test_cache_is_bounded() -> None:
    for i in range(3 * rt._SHARED_MAX):
        rt.running(float(i))
    assert len(rt._shared) <= rt._SHARED_MAX


@pytest.mark.parametrize("share", [True, False])
def test_binding_condition(share: bool) -> None:
    clock = VirtualClock()
    store = Store(clock)
    store.share_status_values = share
    t0 = format_time(clock.now())
    store.create(mknode("n1"))
    for n in ("a", "b", "c"):
        store.create(mkpod(n))
    store.bind("default", "a", "n1")
    store.bind("default", "b", "n1")
    clock.advance(2.0)
    store.bind("default", "c", "n1")
    a, b, c = (store.get("Pod", "default", n).raw["status"]["conditions"][-1] for n in ("a", "b", "c"))
    assert a == b == {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                      "lastTransitionTime": t0}
    assert c == {**a, "lastTransitionTime": format_time(clock.now())} and c != a
    assert (a is b) is share and a is not c


def _state(sim: Simulation) -> str:
    pods = sorted((o.raw for o in sim.store.items("Pod")), key=lambda r: r["metadata"]["name"])
    return json.dumps(pods)


def _unshared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rt, "SHARE_STATUS_VALUES", False)
    init = Store.__init__

    def reference(self: Store, *a: Any, **k: Any) -> None:
        init(self, *a, **k)
        self.share_status_values = False

    monkeypatch.setattr(Store, "__init__", reference)


def test_node_side_day_ends_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starts, exits, OOM kills, restarts in back-off, evictions: the same pods as written."""
    fast, r1 = node_side_day(6, 40, seed=5)
    with monkeypatch.context() as m:
        _unshared(m)
        ref, r2 = node_side_day(6, 40, seed=5)
    assert _state(fast) == _state(ref)
    assert {k: v for k, v in r1.items() if "seconds" not in k} == {k: v for k, v in r2.items() if "seconds" not in k}


def test_realistic_run_ends_the_same(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from ksched.api.loader import LoadResult, build_objects, read_manifests

    generate(tmp_path, 8, 60, 5)

    def run() -> tuple[str, Simulation]:
        rt._shared.clear()  # bounded: earlier tests in this process must not fill it mid-run
        res = LoadResult()
        build_objects(read_manifests([str(tmp_path)], res), res, unknown_kinds="skip")
        sim = Simulation(None, seed=0)
        sim.load(res.objects, owned=True, validated=True)
        assert sim.run().scheduled == 60
        return _state(sim), sim

    fast, sim = run()
    with monkeypatch.context() as m:
        _unshared(m)
        ref, _ = run()
    assert fast == ref
    conds = [o.raw["status"]["conditions"] for o in sim.store.items("Pod")]
    assert conds[0][-1] is conds[1][-1]  # shared (the same instant)


def test_run_records_have_no_instance_dict() -> None:
    """The kubelet keeps one per pod it ran: slots (about 100 bytes), not an instance dict."""
    from ksched.kubelet.fake import _Run

    run = _Run()
    assert not hasattr(run, "__dict__")
    run.epoch += 1
    with pytest.raises(AttributeError):
        run.unknown = 1  # type: ignore[attr-defined]
