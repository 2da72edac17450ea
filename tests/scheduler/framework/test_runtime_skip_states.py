"""PreFilter plugins whose call comes down to writing a new value and Skipping
(``runtime.SKIP_STATES``, with ``TEMPLATE_SKIPS``): DynamicResources and VolumeBinding for a
plain pod.

The contract first: whenever a plugin's ``pre_filter_skip_state(pod)`` gives (key, factory),
its ``pre_filter`` returns Skip having written exactly one value under that key, of the
factory's type (the very value where the factory gives a shared one), for pods of every shape
(test_runtime_template_skips' shapes: requests of core and extended resources, one a
DeviceClass's, volumes of every kind, ...), and the factory gives a new value on each call
where the plugin's call would (VolumeBinding's state is written to by Reserve). Then the
runtime: ``run_pre_filter``/``run_pre_score`` give the same results, statuses, skip sets and
state with SKIP_STATES on and off and with TEMPLATE_SKIPS off, the plugins are not called with
it on, and whole simulations place every pod alike and record the same events."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.scheduler.framework.test_runtime_template_skips import (
    _cycle,
    _framework,
    _pod,
    _shapes,
    simulations_agree_with,
)

from ksched.scheduler.framework import runtime
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.status import Code


@settings(max_examples=40, deadline=None)
@given(st.lists(_shapes, min_size=1, max_size=5), st.booleans(), st.booleans())
def test_skip_states_write_one_value_and_skip(shapes: list[Any], added: bool, shape: bool) -> None:
    _, fw = _framework(added, shape)
    nodes = fw.snapshot.all_nodes()
    for i, s in enumerate(shapes):
        pod = _pod(f"p{i}", *s)
        for p in fw.pre_filter_plugins:
            f = getattr(p, "pre_filter_skip_state", None)
            w = f(pod) if f is not None else None
            if w is None:
                continue
            key, factory = w
            state = CycleState()
            r, got = p.pre_filter(state, pod, nodes)
            assert r is None and got is not None and got.code == Code.SKIP, p.name
            assert list(state._data) == [key], p.name
            made = factory()
            assert type(state._data[key]) is type(made), p.name
            # A shared value where the plugin shares one, a new one where it makes one.
            again = CycleState()
            p.pre_filter(again, pod, nodes)
            shared = again._data[key] is state._data[key]
            assert (factory() is made) == shared, p.name
            if shared:
                assert made is state._data[key], p.name


def test_plain_pods_call_neither_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    _, fw = _framework(False, False)
    called: list[str] = []
    for p in fw.pre_filter_plugins:
        orig = p.pre_filter

        def counting(state: Any, pod: Any, nodes: Any, _orig: Any = orig, _name: str = p.name) -> Any:
            called.append(_name)
            return _orig(state, pod, nodes)

        p.pre_filter = counting  # type: ignore[method-assign]
    pod = _pod("plain", False, [0], False, 0, 0)  # an emptyDir volume: VolumeBinding would Skip
    on = _cycle(fw, pod)
    assert not {"DynamicResources", "VolumeBinding"} & set(called)
    called.clear()
    monkeypatch.setattr(runtime, "SKIP_STATES", False)
    assert _cycle(fw, pod) == on
    assert {"DynamicResources", "VolumeBinding"} <= set(called)
    # The DeviceClass's resource (DRA maps it), a claim-backed volume: each called again.
    monkeypatch.setattr(runtime, "SKIP_STATES", True)
    called.clear()
    _cycle(fw, _pod("gpu", False, [], False, 0, 0, 3))
    assert "DynamicResources" in called and "VolumeBinding" not in called
    called.clear()
    _cycle(fw, _pod("pvc", False, [2], False, 0, 0))
    assert "VolumeBinding" in called


@settings(max_examples=40, deadline=None)
@given(st.lists(_shapes, min_size=1, max_size=6), st.booleans(), st.booleans())
def test_runtime_agrees_with_skip_states_off(shapes: list[Any], added: bool, shape: bool) -> None:
    _, fw = _framework(added, shape)
    for i, s in enumerate(shapes):
        for name in (f"p{i}", f"q{i}"):  # the second pod of the template reads the kept plan
            pod = _pod(name, *s)
            with pytest.MonkeyPatch.context() as m:
                m.setattr(runtime, "TEMPLATE_SKIPS", False)
                want = _cycle(fw, pod)
            with pytest.MonkeyPatch.context() as m:
                m.setattr(runtime, "SKIP_STATES", False)
                assert _cycle(fw, pod) == want
            assert _cycle(fw, pod) == want


@pytest.mark.parametrize("seed", range(6))
def test_simulations_agree_with_skip_states_on_and_off(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    simulations_agree_with("SKIP_STATES", seed, monkeypatch)
