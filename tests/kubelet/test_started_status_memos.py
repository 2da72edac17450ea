"""The started pod's status made once per instant and template (``runtime.SHARE_CONDITION_LISTS``:
the conditions list of pods whose conditions are the same objects; ``runtime.STAMP_RUNNING_STATUSES``:
each container's status a copy of one per container and instant with the pod's containerID)
against the reference (each built whole): the same JSON (values, types, key order) for pods of
a few templates (``Pod.like``: one parsed container list), parsed on their own, with conditions
shared, equal but not shared, or different, at a few instants, in any order."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.pod import Pod
from ksched.kubelet import runtime as rt

_SCHEDULED = {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
              "lastTransitionTime": "2024-01-01T00:00:00Z"}
_READY_FALSE = {"type": "Ready", "status": "False", "lastProbeTime": None, "lastTransitionTime": "2024-01-01T00:00:01Z"}
_READY_TRUE = {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": "2024-01-01T00:00:02Z"}
_SHARED_CONDITIONS = ([], [_SCHEDULED], [_SCHEDULED, _READY_FALSE], [_READY_TRUE], [_SCHEDULED, _READY_TRUE])


def _raw(name: str, containers: int, conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": f"c{i}", "image": f"img{i}"} for i in range(containers)]},
            "status": {"phase": "Pending", "conditions": conditions}}


def _status(pod: Pod, now: float, ready: bool, reason: str, fast: bool) -> str:
    saved = rt.SHARE_CONDITION_LISTS, rt.STAMP_RUNNING_STATUSES
    rt.SHARE_CONDITION_LISTS = rt.STAMP_RUNNING_STATUSES = fast
    try:
        return json.dumps([rt.pod_conditions(pod, now, ready, reason, "m" if reason else ""),
                           rt.started_statuses(pod, now)])
    finally:
        rt.SHARE_CONDITION_LISTS, rt.STAMP_RUNNING_STATUSES = saved


# One pod: its template (its container count), how it is made (0: a replica sharing the
# template's parsed containers, 1: parsed on its own), its conditions (shared objects, or copies
# of them: equal, not the same), the instant, the readiness and reason asked.
_pods = st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.integers(0, len(_SHARED_CONDITIONS) - 1),
                           st.booleans(), st.sampled_from([0.0, 1.0, 1.5, 86400.0]), st.booleans(),
                           st.sampled_from(["", "PodCompleted"])),
                 min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(_pods)
def test_started_statuses_and_conditions_are_the_references(pods: list[tuple[Any, ...]]) -> None:
    rt._shared.clear()  # bounded memos: each example starts with them empty
    rt._lists.clear()
    rt._stamps.clear()
    bases = [Pod(_raw(f"t{n}", n + 1, [])) for n in range(3)]
    for i, (which, replica, conds_i, copied, now, ready, reason) in enumerate(pods):
        conds = _SHARED_CONDITIONS[conds_i]
        if copied:
            conds = json.loads(json.dumps(conds))
        raw = _raw(f"p{i}", which + 1, conds)
        pod = bases[which].like(raw) if replica else Pod(raw)
        assert _status(pod, now, ready, reason, True) == _status(pod, now, ready, reason, False)


def test_one_list_and_one_status_per_instant_and_template() -> None:
    rt._lists.clear()
    rt._stamps.clear()
    base = Pod(_raw("t", 2, [_SCHEDULED]))
    a, b = base.like(_raw("a", 2, [_SCHEDULED])), base.like(_raw("b", 2, [_SCHEDULED]))
    assert rt.pod_conditions(a, 5.0, True) is rt.pod_conditions(b, 5.0, True)
    assert rt.pod_conditions(a, 5.0, True) is not rt.pod_conditions(a, 6.0, True)
    other = base.like(_raw("c", 2, [dict(_SCHEDULED)]))  # equal, not the same object: its own list
    assert rt.pod_conditions(other, 5.0, True) is not rt.pod_conditions(a, 5.0, True)
    sa, sb = rt.started_statuses(a, 5.0), rt.started_statuses(b, 5.0)
    assert [s["containerID"] for s in sa] == ["ksched://uid-a/c0/0", "ksched://uid-a/c1/0"]
    assert [s["containerID"] for s in sb] == ["ksched://uid-b/c0/0", "ksched://uid-b/c1/0"]
    assert all(x is not y and x["state"] is y["state"] for x, y in zip(sa, sb, strict=True))
    assert list(sa[0]) == ["name", "image", "imageID", "ready", "restartCount", "started", "state", "lastState",
                           "containerID"]
