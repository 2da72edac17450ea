"""The Deployment controller (ksched.controllers.deployment) against upstream's
pkg/controller/deployment: the fencepost and proportion arithmetic of deployment_util.go (upstream's
test tables), then whole rollouts in a simulated cluster (scheduler, simulated kubelet, virtual
clock): ReplicaSet names, labels and annotations, upstream's events and conditions, RollingUpdate
and Recreate, scaling (proportional mid-rollout, as the documentation's example), rollback,
history cleanup, the progress deadline, pausing, adoption -- and, with hypothesis, the rolling
update's promises checked after every write: never more than replicas + maxSurge pods, never
fewer than replicas - maxUnavailable available."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api_objects import events_of, mkdeploy, mknode, mkrs, pods_of
from ksched.api.apps import Deployment, ReplicaSet
from ksched.api.pod import Pod
from ksched.apiserver.store import Store
from ksched.controllers.controller_utils import is_pod_available, is_pod_ready
from ksched.controllers.deployment.util import (
    equal_ignore_hash,
    find_active_or_latest,
    get_proportion,
    max_surge,
    max_unavailable,
    new_rs_new_replicas,
    resolve_fenceposts,
    set_new_rs_annotations,
)
from ksched.sim.simulation import Simulation

# ---------------------------------------------------------------- arithmetic (deployment_util_test.go)


@pytest.mark.parametrize(("surge", "unavailable", "desired", "want"), [
    ("0%", "0%", 0, (0, 1)),
    ("39%", "39%", 10, (4, 3)),
    (None, "39%", 10, (0, 3)),
    ("39%", None, 10, (4, 0)),
    (None, None, 10, (0, 1)),
    ("25%", "25%", 3, (1, 0)),
    (1, 0, 5, (1, 0)),
    ("100%", "100%", 4, (4, 4)),
])
def test_resolve_fenceposts(surge: Any, unavailable: Any, desired: int, want: tuple[int, int]) -> None:
    assert resolve_fenceposts(surge, unavailable, desired) == want


def _d(replicas: int, surge: Any = "25%", unavailable: Any = "25%", strategy: str = "RollingUpdate",
       status: dict[str, Any] | None = None) -> Deployment:
    raw = mkdeploy("d", replicas=replicas, strategy={"type": strategy} if strategy == "Recreate" else {
        "type": strategy, "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
    raw["status"] = status or {}
    return Deployment(raw)


def _rs(name: str, replicas: int, max_replicas: int | None = None, created: int = 0, available: int = 0) -> ReplicaSet:
    raw = mkrs(name, replicas=replicas)
    raw["metadata"]["creationTimestamp"] = f"2025-01-01T00:00:{created:02d}Z"
    raw["metadata"]["uid"] = name
    if max_replicas is not None:
        raw["metadata"]["annotations"] = {"deployment.kubernetes.io/max-replicas": str(max_replicas)}
    raw["status"] = {"availableReplicas": available}
    return ReplicaSet(raw)


@pytest.mark.parametrize(("replicas", "unavailable", "want"), [(0, "25%", 0), (4, 10, 4), (10, "25%", 2), (1, "25%", 0)])
def test_max_unavailable_is_capped_by_replicas(replicas: int, unavailable: Any, want: int) -> None:
    assert max_unavailable(_d(replicas, surge=1, unavailable=unavailable)) == want


def test_recreate_has_no_surge_or_unavailability() -> None:
    d = _d(5, strategy="Recreate")
    assert (max_surge(d), max_unavailable(d)) == (0, 0)


@pytest.mark.parametrize(("strategy", "replicas", "new", "surge", "others", "want"), [
    ("RollingUpdate", 1, 1, 5, 5, 1),   # all pods allowed already there: cannot scale up
    ("RollingUpdate", 6, 2, 10, 4, 6),  # scale up to the deployment's replicas
    ("RollingUpdate", 10, 0, 3, 10, 3),  # up by the surge
    ("RollingUpdate", 10, 3, 3, 8, 5),  # up to replicas + surge in all
    ("Recreate", 3, 1, 0, 1, 3),
])
def test_new_rs_new_replicas(strategy: str, replicas: int, new: int, surge: int, others: int, want: int) -> None:
    d = _d(replicas, surge=surge, unavailable=0, strategy=strategy)
    assert new_rs_new_replicas(d, [_rs("old", others), _rs("new", new)], new) == want


@pytest.mark.parametrize(("rs_replicas", "max_ann", "d_replicas", "to_add", "added", "want"), [
    (8, 13, 15, 5, 0, 3),    # the documentation's example: 3 of 5 to the old ReplicaSet...
    (5, 13, 15, 5, 3, 2),    # ... and the remaining 2 to the new
    (5, 10, 5, -5, 0, -1),   # scaling down: round(5*8/10) - 5
    (0, 10, 5, 3, 0, 0),     # an empty ReplicaSet gets nothing
    (3, None, 6, 3, 0, 3),   # no annotation: the deployment's current replicas (3) stand in
])
def test_get_proportion(rs_replicas: int, max_ann: int | None, d_replicas: int, to_add: int, added: int,
                        want: int) -> None:
    d = _d(d_replicas, surge=3, unavailable=2, status={"replicas": 3})
    assert get_proportion(_rs("x", rs_replicas, max_ann), d, to_add, added) == want


def test_revision_history_annotation() -> None:
    d = _d(3)
    ann = {"deployment.kubernetes.io/revision": "1"}
    assert set_new_rs_annotations(d, ann, 3, exists=True)
    assert ann["deployment.kubernetes.io/revision"] == "3" and ann["deployment.kubernetes.io/revision-history"] == "1"
    assert set_new_rs_annotations(d, ann, 5, exists=True)
    assert ann["deployment.kubernetes.io/revision-history"] == "1,3"
    assert not set_new_rs_annotations(d, ann, 4, exists=True)  # never lowered
    fresh: dict[str, str] = {}
    assert set_new_rs_annotations(d, fresh, 1, exists=False)
    assert fresh == {"deployment.kubernetes.io/revision": "1", "deployment.kubernetes.io/desired-replicas": "3",
                     "deployment.kubernetes.io/max-replicas": "4"}


def test_equal_ignore_hash_and_active_or_latest() -> None:
    a = {"metadata": {"labels": {"app": "x", "pod-template-hash": "abc"}}, "spec": {"containers": [{"name": "c"}]}}
    b = {"metadata": {"labels": {"app": "x"}, "annotations": {}}, "spec": {"containers": [{"name": "c"}]}}
    assert equal_ignore_hash(a, b)
    assert not equal_ignore_hash(a, {**b, "spec": {"containers": [{"name": "d"}]}})
    old1, old2, new = _rs("o1", 0, created=1), _rs("o2", 0, created=2), _rs("n", 0, created=3)
    assert find_active_or_latest(new, [old1, old2]) is new  # none active: the newest
    assert find_active_or_latest(None, [old1, old2]) is old2
    active = _rs("o1", 3, created=1)
    assert find_active_or_latest(new, [active, old2]) is active
    assert find_active_or_latest(_rs("n", 1, created=3), [active]) is None  # two active: proportional


# ---------------------------------------------------------------- rollouts in a simulated cluster


def sim_with_nodes(n: int = 3, startup: float = 0.0) -> Simulation:
    sim = Simulation(seed=0)
    assert sim.kubelet is not None
    sim.kubelet.startup_delay = startup
    for i in range(n):
        sim.store.create(mknode(f"n{i + 1}"))
    return sim


def deployment(store: Store, name: str = "web") -> Deployment:
    d = store.get("Deployment", "default", name)
    assert isinstance(d, Deployment)
    return d


def replica_sets(store: Store, owner: str = "web") -> list[ReplicaSet]:
    return sorted((r for r in store.items("ReplicaSet") if isinstance(r, ReplicaSet)
                   and (ref := r.controller_ref()) is not None and ref.name == owner),
                  key=lambda r: (r.creation_timestamp or 0, r.name))


def update(store: Store, name: str, change: Any) -> None:
    d = deployment(store, name)
    raw = d.deepcopy_raw()
    change(raw)
    store.update(raw)


def set_image(image: str) -> Any:
    def change(raw: dict[str, Any]) -> None:
        raw["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return change


def conditions(d: Deployment) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in d.conditions}


def test_first_rollout() -> None:
    sim = sim_with_nodes()
    sim.store.create(mkdeploy("web", replicas=3))
    sim.run()
    (rs,) = replica_sets(sim.store)
    pth = rs.labels["pod-template-hash"]
    assert re.fullmatch(r"[bcdfghjklmnpqrstvwxz2456789]{1,10}", pth) and rs.name == f"web-{pth}"
    assert rs.selector.matches({"app": "web", "pod-template-hash": pth})
    assert not rs.selector.matches({"app": "web"})
    assert rs.template_labels == {"app": "web", "pod-template-hash": pth}
    assert rs.annotations == {"deployment.kubernetes.io/revision": "1", "deployment.kubernetes.io/desired-replicas": "3",
                              "deployment.kubernetes.io/max-replicas": "4"}
    d = deployment(sim.store)
    assert rs.controller_ref().uid == d.uid  # type: ignore[union-attr]
    assert [p.labels["pod-template-hash"] for p in pods_of(sim.store, rs.name)] == [pth] * 3
    assert d.annotations == {"deployment.kubernetes.io/revision": "1"}
    st_ = d.raw["status"]
    assert {k: st_[k] for k in ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
                                "availableReplicas")} == {"observedGeneration": 1, "replicas": 3,
                                                          "updatedReplicas": 3, "readyReplicas": 3,
                                                          "availableReplicas": 3}
    assert "unavailableReplicas" not in st_
    assert conditions(d) == {
        "Available": ("True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
        "Progressing": ("True", "NewReplicaSetAvailable", f'ReplicaSet "{rs.name}" has successfully progressed.')}
    assert events_of(sim.store, "web", "Deployment") == [
        ("Normal", "ScalingReplicaSet", f"Scaled up replica set {rs.name} to 3")]


def test_rolling_update_steps_as_upstream() -> None:
    sim = sim_with_nodes()
    sim.store.create(mkdeploy("web", replicas=3))
    sim.run()
    (old,) = replica_sets(sim.store)
    update(sim.store, "web", set_image("img:2"))
    sim.run()
    old, new = replica_sets(sim.store)
    # 3 replicas at 25%/25%: surge 1, unavailable 0 -- one new pod up, then one old one down.
    assert [m for _, r, m in events_of(sim.store, "web", "Deployment")][1:] == [
        f"Scaled up replica set {new.name} to 1",
        f"Scaled down replica set {old.name} to 2 from 3",
        f"Scaled up replica set {new.name} to 2 from 1",
        f"Scaled down replica set {old.name} to 1 from 2",
        f"Scaled up replica set {new.name} to 3 from 2",
        f"Scaled down replica set {old.name} to 0 from 1",
    ]
    assert (old.replicas, new.replicas) == (0, 3)
    assert new.annotations["deployment.kubernetes.io/revision"] == "2"
    assert old.annotations["deployment.kubernetes.io/revision"] == "1"
    d = deployment(sim.store)
    assert d.annotations["deployment.kubernetes.io/revision"] == "2" and d.generation == 2
    assert conditions(d)["Progressing"][1:] == ("NewReplicaSetAvailable",
                                                f'ReplicaSet "{new.name}" has successfully progressed.')
    assert len(pods_of(sim.store, new.name, live=True)) == 3 and pods_of(sim.store, old.name) == []


def test_recreate_never_runs_old_and_new_pods_together() -> None:
    sim = sim_with_nodes(startup=2.0)
    sim.store.create(mkdeploy("web", replicas=3, strategy={"type": "Recreate"}))
    sim.run()
    (old,) = replica_sets(sim.store)
    overlaps: list[str] = []

    def check() -> None:
        for rs in replica_sets(sim.store):
            if rs.uid != old.uid and pods_of(sim.store, rs.name) and pods_of(sim.store, old.name):
                overlaps.append(f"{rs.name} and {old.name} at {sim.clock.now()}")

    sim.store.after_write.append(check)
    update(sim.store, "web", set_image("img:2"))
    sim.run()
    assert overlaps == []
    _, new = replica_sets(sim.store)
    msgs = [m for _, _, m in events_of(sim.store, "web", "Deployment")][1:]
    assert msgs == [f"Scaled down replica set {old.name} to 0 from 3", f"Scaled up replica set {new.name} to 3"]
    assert len(pods_of(sim.store, new.name)) == 3


def test_scaling_through_the_scale_subresource() -> None:
    sim = sim_with_nodes()
    sim.store.create(mkdeploy("web", replicas=3))
    sim.run()
    sim.store.patch_scale("Deployment", "default", "web", {"spec": {"replicas": 5}})
    sim.run()
    (rs,) = replica_sets(sim.store)
    assert rs.replicas == 5 and rs.annotations["deployment.kubernetes.io/desired-replicas"] == "5"
    assert events_of(sim.store, "web", "Deployment")[-1][2] == f"Scaled up replica set {rs.name} to 5 from 3"
    d = deployment(sim.store)
    assert (d.status_replicas, d.available_replicas, d.observed_generation) == (5, 5, 2)
    sim.store.patch_scale("Deployment", "default", "web", {"spec": {"replicas": 0}})
    sim.run()
    assert pods_of(sim.store, rs.name, live=True) == [] and deployment(sim.store).status_replicas == 0


def test_proportional_scaling_mid_rollout_as_documented() -> None:
    """kubernetes.io's example: 10 replicas, maxSurge 3, maxUnavailable 2; a rollout to a template
    that never becomes available stalls at old 8 / new 5; scaling to 15 adds 3 to the old and 2 to
    the new ReplicaSet."""
    sim = sim_with_nodes(4)
    sim.store.create(mkdeploy("web", replicas=10, strategy={"rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}))
    sim.run()

    def unschedulable(raw: dict[str, Any]) -> None:
        raw["spec"]["template"]["spec"]["nodeSelector"] = {"disk": "none-has-this"}

    update(sim.store, "web", unschedulable)
    sim.run()
    old, new = replica_sets(sim.store)
    assert (old.replicas, new.replicas) == (8, 5)
    assert new.annotations["deployment.kubernetes.io/max-replicas"] == "13"
    sim.store.patch_scale("Deployment", "default", "web", {"spec": {"replicas": 15}})
    sim.run()
    old, new = replica_sets(sim.store)
    assert (old.replicas, new.replicas) == (11, 7)
    assert {r.annotations["deployment.kubernetes.io/desired-replicas"] for r in (old, new)} == {"15"}


def test_rollback_annotation_restores_an_earlier_template() -> None:
    sim = sim_with_nodes()
    sim.store.create(mkdeploy("web", replicas=2))
    sim.run()
    update(sim.store, "web", set_image("img:2"))
    sim.run()
    first, second = replica_sets(sim.store)

    def ask(raw: dict[str, Any]) -> None:
        raw["metadata"].setdefault("annotations", {})["deprecated.deployment.rollback.to"] = "0"

    update(sim.store, "web", ask)
    sim.run()
    d = deployment(sim.store)
    assert "deprecated.deployment.rollback.to" not in d.annotations
    assert d.template["spec"]["containers"][0]["image"] == "img"
    assert [m for _, _, m in events_of(sim.store, "web", "Deployment")][5:] == [
        'Rolled back deployment "web" to revision 1',
        f"Scaled up replica set {first.name} to 1 from 0",
        f"Scaled down replica set {second.name} to 1 from 2",
        f"Scaled up replica set {first.name} to 2 from 1",
        f"Scaled down replica set {second.name} to 0 from 1"]
    first, second = replica_sets(sim.store)
    assert first.annotations["deployment.kubernetes.io/revision"] == "3"
    assert first.annotations["deployment.kubernetes.io/revision-history"] == "1"
    assert (first.replicas, second.replicas) == (2, 0)
    # Asking for a revision that does not exist gives up with a warning.
    update(sim.store, "web", lambda raw: raw["metadata"]["annotations"].update(
        {"deprecated.deployment.rollback.to": "9"}))
    sim.run()
    assert events_of(sim.store, "web", "Deployment")[-1] == (
        "Warning", "DeploymentRollbackRevisionNotFound", "Unable to find the revision to rollback to.")
    assert "deprecated.deployment.rollback.to" not in deployment(sim.store).annotations


def test_old_replica_sets_beyond_the_history_limit_are_deleted() -> None:
    sim = sim_with_nodes()
    sim.store.create(mkdeploy("web", replicas=1, revisionHistoryLimit=1))
    sim.run()
    for image in ("img:2", "img:3", "img:4"):
        update(sim.store, "web", set_image(image))
        sim.run()
    rss = replica_sets(sim.store)
    assert [r.annotations["deployment.kubernetes.io/revision"] for r in rss] == ["3", "4"]
    assert [r.replicas for r in rss] == [0, 1]


def test_progress_deadline_exceeded() -> None:
    sim = sim_with_nodes(1)
    raw = mkdeploy("web", replicas=2, progressDeadlineSeconds=60)
    raw["spec"]["template"]["spec"]["nodeSelector"] = {"disk": "none-has-this"}
    sim.store.create(raw)
    result = sim.run(max_seconds=600)
    (rs,) = replica_sets(sim.store)
    d = deployment(sim.store)
    assert conditions(d)["Progressing"] == ("False", "ProgressDeadlineExceeded",
                                            f'ReplicaSet "{rs.name}" has timed out progressing.')
    assert conditions(d)["Available"] == ("False", "MinimumReplicasUnavailable",
                                          "Deployment does not have minimum availability.")
    assert 60 < result.virtual_seconds < 600


def test_paused_deployment_does_not_roll_out() -> None:
    sim = sim_with_nodes()
    sim.store.create(mkdeploy("web", replicas=2))
    sim.run()
    update(sim.store, "web", lambda raw: raw["spec"].update(paused=True))
    sim.run()
    assert conditions(deployment(sim.store))["Progressing"] == ("Unknown", "DeploymentPaused", "Deployment is paused")
    update(sim.store, "web", set_image("img:2"))
    sim.run()
    assert len(replica_sets(sim.store)) == 1  # no new ReplicaSet while paused
    update(sim.store, "web", lambda raw: raw["spec"].update(paused=False))
    sim.run()
    assert len(replica_sets(sim.store)) == 2 and replica_sets(sim.store)[1].replicas == 2
    assert conditions(deployment(sim.store))["Progressing"][1] == "NewReplicaSetAvailable"


def test_an_orphaned_replica_set_with_the_template_is_adopted() -> None:
    sim = sim_with_nodes()
    orphan = mkrs("web-handmade", replicas=2, labels={"app": "web"})
    orphan["metadata"]["labels"] = {"app": "web"}  # a Deployment claims ReplicaSets by their labels
    sim.store.create(orphan)
    sim.run()
    raw = mkdeploy("web", replicas=2)
    raw["spec"]["template"] = copy.deepcopy(sim.store.get("ReplicaSet", "default", "web-handmade").raw["spec"]["template"])
    sim.store.create(raw)
    sim.run()
    (rs,) = replica_sets(sim.store)
    assert rs.name == "web-handmade" and rs.annotations["deployment.kubernetes.io/revision"] == "1"
    assert len(pods_of(sim.store, "web-handmade")) == 2


# ---------------------------------------------------------------- the rolling update's promises


def _live_pods(store: Store, d: Deployment) -> list[Pod]:
    uids = {r.uid for r in store.items("ReplicaSet") if (ref := r.controller_ref()) is not None and ref.uid == d.uid}
    return [p for p in store.items("Pod") if isinstance(p, Pod) and (ref := p.controller_ref()) is not None
            and ref.uid in uids and p.deletion_timestamp is None and not p.is_terminal]


_int_or_pct = st.one_of(st.integers(0, 3), st.sampled_from(["0%", "10%", "25%", "50%", "100%"]))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(replicas=st.integers(1, 5), surge=_int_or_pct, unavailable=_int_or_pct, min_ready=st.integers(0, 3),
       startup=st.sampled_from([0.0, 1.0, 2.5]), rollover_after=st.one_of(st.none(), st.floats(0.0, 8.0)))
def test_rolling_update_respects_max_surge_and_max_unavailable(replicas: int, surge: Any, unavailable: Any,
                                                               min_ready: int, startup: float,
                                                               rollover_after: float | None) -> None:
    """After every write during a rollout (and a second rollout started in the middle of it):
    pods that are not being deleted <= replicas + maxSurge, available pods >= replicas -
    maxUnavailable; at the end every pod runs the last template.

    With minReadySeconds the floor holds for ready pods, not for available ones: the
    ReplicaSet deletes pods doubled up on a node before pods ready for less time
    (ActivePodsWithRanks' rank precedes readiness time), so when old ReplicaSets are cut
    by their not-yet-available replicas, an available pod can go instead -- as upstream."""
    if surge in (0, "0%") and unavailable in (0, "0%"):
        unavailable = 1  # validation refuses both 0
    sim = sim_with_nodes(3, startup=startup)
    sim.store.create(mkdeploy("web", replicas=replicas, minReadySeconds=min_ready,
                              strategy={"rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}))
    sim.run()
    d = deployment(sim.store)
    surge_n, unavailable_n = max_surge(d), max_unavailable(d)
    violations: list[str] = []

    def check() -> None:
        live = _live_pods(sim.store, d)
        now = sim.clock.now()
        floor = sum(1 for p in live if is_pod_available(p, min_ready, now)) if min_ready == 0 else \
            sum(1 for p in live if is_pod_ready(p))
        if len(live) > replicas + surge_n:
            violations.append(f"{len(live)} pods > {replicas} + {surge_n} at {now}")
        if floor < replicas - unavailable_n:
            violations.append(f"{floor} available < {replicas} - {unavailable_n} at {now}")

    check()
    sim.store.after_write.append(check)
    update(sim.store, "web", set_image("img:2"))
    last = "img:2"
    if rollover_after is not None:
        sim.run(max_seconds=rollover_after)
        update(sim.store, "web", set_image("img:3"))
        last = "img:3"
    sim.run()
    assert violations == []
    live = _live_pods(sim.store, d)
    assert len(live) == replicas
    assert {p.raw["spec"]["containers"][0]["image"] for p in live} == {last}
    final = deployment(sim.store)
    assert (final.updated_replicas, final.available_replicas, final.status_replicas) == (replicas,) * 3
