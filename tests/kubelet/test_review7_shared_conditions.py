"""Review 7: ``runtime.SHARE_STATUS_VALUES`` shares a condition by a key of its values, so two
conditions whose kept ``lastTransitionTime`` values are equal but not the same value (a loaded
status's YAML timestamps at one instant in two offsets: equal, equal hashes) must not be one
object: each pod keeps its own value, as the reference (a new dict per pod) does."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.pod import Pod
from ksched.kubelet import runtime as rt

_ZONES = st.sampled_from([datetime.UTC, datetime.timezone(datetime.timedelta(hours=1)),
                          datetime.timezone(datetime.timedelta(hours=-5, minutes=-30))])
_INSTANT = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


def _pod(name: str, ltt: Any) -> Pod:
    return Pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
                "status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": ltt}]}})


def _run(share: bool, times: list[Any]) -> list[str]:
    saved = rt.SHARE_STATUS_VALUES
    rt.SHARE_STATUS_VALUES = share
    rt._shared.clear()
    try:
        return [repr(rt.pod_conditions(_pod(f"p{i}", t), 100.0, False)) for i, t in enumerate(times)]
    finally:
        rt.SHARE_STATUS_VALUES = saved
        rt._shared.clear()


def test_equal_timestamps_in_two_offsets_stay_each_pods_own() -> None:
    a = _INSTANT
    b = _INSTANT.astimezone(datetime.timezone(datetime.timedelta(hours=1)))
    assert a == b and hash(a) == hash(b)
    assert _run(True, [a, b]) == _run(False, [a, b])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_ZONES.map(_INSTANT.astimezone), st.sampled_from([1.5, 2, True, "x"])),
                min_size=1, max_size=4))
def test_kept_transition_times_are_the_references(times: list[Any]) -> None:
    assert _run(True, times) == _run(False, times)
