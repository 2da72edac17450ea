"""A pod created with scheduling gates gets PodScheduled=False/SchedulingGated, as the API
server's pod strategy sets it; a pod without gates or with its own PodScheduled does not."""

from __future__ import annotations

from ksched.apiserver.store import Store


def _pod(name: str, gates: list[str], conditions: list[dict] | None = None) -> dict:
    p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
         "spec": {"containers": [{"name": "c", "image": "i"}]}}
    if gates:
        p["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    if conditions is not None:
        p["status"] = {"conditions": conditions}
    return p


def test_gated_pod_gets_the_condition(store: Store) -> None:
    p = store.create(_pod("gated", ["example.com/a"]))
    assert p.condition("PodScheduled") == {
        "type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
        "message": "Scheduling is blocked due to non-empty scheduling gates"}


def test_ungated_pod_and_existing_condition_untouched(store: Store) -> None:
    assert store.create(_pod("plain", [])).condition("PodScheduled") is None
    own = {"type": "PodScheduled", "status": "False", "reason": "Custom"}
    assert store.create(_pod("own", ["g"], [own])).condition("PodScheduled") == own
