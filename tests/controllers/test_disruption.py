"""The disruption controller (ksched.controllers.disruption) keeps every PodDisruptionBudget's
status current in an embedded cluster: expected and healthy pods (Ready ones), desired
healthy, disruptions allowed, the DisruptionAllowed condition; recently disrupted pods."""

from __future__ import annotations

from typing import Any

import pytest

from api_objects import WEB, mknode, mkpdb, mkpod, pdb, running
from ksched.api.meta import format_time
from ksched.api.pdb import PodDisruptionBudget
from ksched.api.pod import Pod
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.controllers.disruption import DISRUPTED_POD_TIMEOUT, compute_pdb_status


@pytest.fixture
def store(store: Store) -> Store:
    """The embedded cluster's store (tests/controllers/conftest.py) with node n1."""
    store.create(mknode("n1"))
    return store


def test_pdb_status_is_computed_from_ready_pods(store: Store) -> None:
    running(store, "a", {"app": "web"})
    running(store, "b", {"app": "web"})
    running(store, "c", {"app": "web"}, ready=False)
    running(store, "x", {"app": "other"})
    store.create(mkpdb("web", WEB, minAvailable=1))
    b = pdb(store)
    assert (b.expected_pods, b.current_healthy, b.desired_healthy, b.disruptions_allowed) == (3, 2, 1, 1)
    cond = b.raw["status"]["conditions"][0]
    assert cond["type"] == "DisruptionAllowed" and cond["status"] == "True"
    # A pod becoming ready updates the status.
    p = store.get("Pod", "default", "c")
    raw = p.deepcopy_raw()
    raw["status"]["conditions"] = [c if c["type"] != "Ready" else {**c, "status": "True"}
                                   for c in raw["status"]["conditions"]]
    store.update_status(raw)
    assert pdb(store).disruptions_allowed == 2
    # A new pod matching the selector, not ready yet, is expected but not healthy.
    store.create(mkpod("d", {"app": "web"}))
    b = pdb(store)
    assert (b.expected_pods, b.current_healthy, b.disruptions_allowed) == (4, 3, 2)


@pytest.mark.parametrize(("spec", "desired", "allowed"), [
    ({"minAvailable": 2}, 2, 2),
    ({"minAvailable": "50%"}, 2, 2),
    ({"minAvailable": "51%"}, 3, 1),  # rounded up
    ({"maxUnavailable": 1}, 3, 1),
    ({"maxUnavailable": "50%"}, 2, 2),
    ({"maxUnavailable": "0%"}, 4, 0),
    ({"minAvailable": 5}, 5, 0),
    ({}, 0, 4),
])
def test_pdb_min_available_and_max_unavailable(store: Store, spec: dict[str, Any], desired: int, allowed: int) -> None:
    for n in "abcd":
        running(store, n, {"app": "web"})
    store.create(mkpdb("web", WEB, **spec))
    b = pdb(store)
    assert (b.desired_healthy, b.disruptions_allowed) == (desired, allowed)


def test_nil_selector_matches_nothing_and_empty_selects_all(store: Store) -> None:
    running(store, "a", {"app": "web"})
    store.create(mkpdb("none", None, minAvailable=0))
    store.create({**mkpdb("all", {}, minAvailable=0)})
    assert pdb(store, "none").expected_pods == 0
    assert pdb(store, "all").expected_pods == 1


def test_compute_pdb_status_keeps_recent_disruptions(clock: VirtualClock) -> None:
    now = clock.now()
    b = PodDisruptionBudget({"metadata": {"name": "b", "namespace": "d"},
                             "spec": {"minAvailable": 1, "selector": WEB}})
    pods = [Pod({"metadata": {"name": n, "namespace": "d", "labels": {"app": "web"}},
                 "spec": {"containers": [{"name": "c"}], "nodeName": "n"},
                 "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
            for n in "ab"]
    st = compute_pdb_status(b, pods, now, {"a": now - 10})
    assert st["currentHealthy"] == 1 and st["disruptionsAllowed"] == 0
    assert st["disruptedPods"] == {"a": format_time(now - 10)}
    st = compute_pdb_status(b, pods, now + DISRUPTED_POD_TIMEOUT, {"a": now - 10})
    assert st["currentHealthy"] == 2 and st["disruptedPods"] == {}


def test_the_disruption_allowed_condition_is_a_full_metav1_condition(store: Store, clock: VirtualClock) -> None:
    """As SetStatusCondition writes it: a message (empty), the observed generation, and a
    transition time that changes only when the status does (the official client refuses a
    condition without them)."""
    running(store, "a", {"app": "web"})
    running(store, "b", {"app": "web"})
    store.create(mkpdb("web", WEB, minAvailable=2))
    (cond,) = pdb(store).raw["status"]["conditions"]
    assert cond == {"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods", "message": "",
                    "observedGeneration": 1, "lastTransitionTime": format_time(clock.now())}
    clock.advance(60)
    running(store, "c", {"app": "web"})  # one disruption allowed now
    (cond,) = pdb(store).raw["status"]["conditions"]
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == \
        ("True", "SufficientPods", format_time(clock.now()))
    started = cond["lastTransitionTime"]
    clock.advance(60)
    running(store, "d", {"app": "web"})  # still allowed: the time stays
    assert pdb(store).raw["status"]["conditions"][0]["lastTransitionTime"] == started
    clock.advance(60)
    store.evict("default", "a")
    store.evict("default", "b")  # the last disruption allowed
    (cond,) = pdb(store).raw["status"]["conditions"]
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == \
        ("False", "InsufficientPods", format_time(clock.now()))
