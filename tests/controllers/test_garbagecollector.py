"""The garbage collector against upstream's documented semantics
(https://kubernetes.io/docs/concepts/architecture/garbage-collection/ and
pkg/controller/garbagecollector): Background, Foreground and Orphan propagation, dependents of
absent owners, several owners, blockOwnerDeletion, and the per-kind defaults of the API server
(a Job orphans its pods unless told otherwise). A hypothesis test deletes the root of random
ownership trees with each policy and checks the order of deletions.

The owners here are CronJobs, Jobs and pods with the garbage collector as the only controller,
so nothing but the collector acts on them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import mknode, mkpod
from embedded import advance, settle
from ksched.api.errors import Conflict, Invalid
from ksched.api.meta import KubeObject
from ksched.api.watch import DELETED
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.sim.cluster import EmbeddedCluster


@pytest.fixture
def cluster() -> EmbeddedCluster:
    return EmbeddedCluster(VirtualClock(), controllers=["garbage-collector"])


def ref(owner: KubeObject, block: bool = True, controller: bool = True) -> dict[str, Any]:
    return {"apiVersion": owner.API_VERSION, "kind": owner.KIND, "name": owner.name, "uid": owner.uid,
            "controller": controller, "blockOwnerDeletion": block}


def owned(raw: dict[str, Any], *refs: dict[str, Any]) -> dict[str, Any]:
    raw["metadata"]["ownerReferences"] = list(refs)
    return raw


def mkjob(name: str, ns: str = "default") -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                                                            "containers": [{"name": "c", "image": "img"}]}}}}


def mkcronjob(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedule": "@hourly", "suspend": True,
                     "jobTemplate": {"spec": {"template": {"spec": {
                         "restartPolicy": "Never", "containers": [{"name": "c", "image": "img"}]}}}}}}


def names(store: Store, kind: str) -> list[str]:
    return sorted(o.name for o in store.items(kind))


def deletions(store: Store) -> Any:
    """A watch on pods, jobs and cronjobs: call it for the names deleted since, in order."""
    watches = [store.watch(k) for k in ("Pod", "Job", "CronJob")]
    for w in watches:
        w.drain()

    def read() -> list[str]:
        evs = [e for w in watches for e in w.drain() if e.type == DELETED]
        evs.sort(key=lambda e: e.resource_version)
        return [e.object.name for e in evs if e.object is not None]

    return read


# ---------------------------------------------------------------- the API server's side


@pytest.fixture
def bare() -> Store:
    """An API store without controllers: what a delete itself leaves."""
    return Store(VirtualClock())


def test_each_policy_leaves_its_finalizer(bare: Store) -> None:
    for name, policy, finalizers in (("o", "Orphan", ["orphan"]), ("f", "Foreground", ["foregroundDeletion"])):
        bare.create(mkcronjob(name))
        cj = bare.delete("CronJob", "default", name, propagation_policy=policy)
        assert cj.finalizers == finalizers and cj.deletion_timestamp is not None
    bare.create(mkcronjob("b"))
    bare.delete("CronJob", "default", "b", propagation_policy="Background")
    assert bare.try_get("CronJob", "default", "b") is None


def test_a_job_orphans_by_default_other_kinds_delete_in_the_background(bare: Store) -> None:
    bare.create(mkjob("j"))
    assert bare.delete("Job", "default", "j").finalizers == ["orphan"]
    bare.create(mkcronjob("c"))
    bare.delete("CronJob", "default", "c")
    assert bare.try_get("CronJob", "default", "c") is None
    # kubectl sends Background explicitly.
    bare.create(mkjob("k"))
    bare.delete("Job", "default", "k", propagation_policy="Background")
    assert bare.try_get("Job", "default", "k") is None


def test_the_legacy_orphan_dependents_flag(bare: Store) -> None:
    bare.create(mkcronjob("a"))
    assert bare.delete("CronJob", "default", "a", orphan_dependents=True).finalizers == ["orphan"]
    bare.create(mkjob("j"))
    bare.delete("Job", "default", "j", orphan_dependents=False)
    assert bare.try_get("Job", "default", "j") is None


def test_a_second_delete_may_switch_the_policy(bare: Store) -> None:
    bare.create(mkcronjob("a"))
    bare.delete("CronJob", "default", "a", propagation_policy="Foreground")
    cj = bare.delete("CronJob", "default", "a", propagation_policy="Orphan")
    assert cj.finalizers == ["orphan"]
    # Without options, a second delete keeps what the first asked for.
    assert bare.delete("CronJob", "default", "a").finalizers == ["orphan"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"propagation_policy": "Sideways"},
     'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": supported values: '
     '"Foreground", "Background", "Orphan", "nil"'),
    ({"propagation_policy": "Orphan", "orphan_dependents": True},
     'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Orphan": orphanDependents and '
     'deletionPropagation cannot be both set'),
])
def test_bad_delete_options_are_refused(bare: Store, kwargs: dict[str, Any], message: str) -> None:
    bare.create(mkcronjob("a"))
    with pytest.raises(Invalid) as ei:
        bare.delete("CronJob", "default", "a", **kwargs)
    assert ei.value.message == message
    assert bare.get("CronJob", "default", "a").deletion_timestamp is None


def test_preconditions(bare: Store) -> None:
    cj = bare.create(mkcronjob("a"))
    with pytest.raises(Conflict, match="Precondition failed: UID in precondition: x, UID in object meta: "):
        bare.delete("CronJob", "default", "a", uid="x")
    with pytest.raises(Conflict, match="Precondition failed: ResourceVersion in precondition: 1, "):
        bare.delete("CronJob", "default", "a", resource_version="1")
    bare.delete("CronJob", "default", "a", uid=cj.uid, resource_version=cj.resource_version)
    assert bare.try_get("CronJob", "default", "a") is None


# ---------------------------------------------------------------- background


def test_background_deletes_dependents_once_their_owner_is_gone(cluster: EmbeddedCluster) -> None:
    s = cluster.store
    job = s.create(mkjob("j"))
    other = s.create(mkjob("other"))
    for n in ("p1", "p2"):
        s.create(owned(mkpod(n), ref(job)))
    s.create(owned(mkpod("shared"), ref(job), ref(other, controller=False)))
    s.create(mkpod("alone"))
    s.delete("Job", "default", "j", propagation_policy="Background")
    settle(cluster)
    assert names(s, "Pod") == ["alone", "shared"]
    # The pod with a live owner left only loses the reference to the deleted one.
    assert [r.name for r in s.get("Pod", "default", "shared").owner_references] == ["other"]


def test_a_dependent_of_an_absent_owner_is_deleted(cluster: EmbeddedCluster) -> None:
    s = cluster.store
    job = s.create(mkjob("j"))
    s.create(owned(mkpod("ghost"), {**ref(job), "name": "never-was", "uid": "00000000-dead"}))
    # Same name, another uid: the owner it names is gone.
    s.create(owned(mkpod("stale"), {**ref(job), "uid": "11111111-dead"}))
    s.create(owned(mkpod("fine"), ref(job)))
    settle(cluster)
    assert names(s, "Pod") == ["fine"]


def test_a_cluster_scoped_owner(cluster: EmbeddedCluster) -> None:
    s = cluster.store
    node = s.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    s.create(owned(mkpod("mirror"), ref(node)))
    settle(cluster)
    assert names(s, "Pod") == ["mirror"]
    s.delete("Node", "", "n1")
    settle(cluster)
    assert names(s, "Pod") == []


# ---------------------------------------------------------------- foreground


def test_foreground_deletes_the_tree_bottom_up(cluster: EmbeddedCluster) -> None:
    s = cluster.store
    cj = s.create(mkcronjob("cj"))
    j1 = s.create(owned(mkjob("cj-1"), ref(cj)))
    j2 = s.create(owned(mkjob("cj-2"), ref(cj)))
    for j in (j1, j2):
        for i in range(2):
            s.create(owned(mkpod(f"{j.name}-p{i}"), ref(j)))
    seen = deletions(s)
    owner = s.delete("CronJob", "default", "cj", propagation_policy="Foreground")
    assert owner.finalizers == ["foregroundDeletion"]
    settle(cluster)
    order = seen()
    assert sorted(order) == ["cj", "cj-1", "cj-1-p0", "cj-1-p1", "cj-2", "cj-2-p0", "cj-2-p1"]
    assert order[-1] == "cj"
    for j in ("cj-1", "cj-2"):
        assert max(order.index(f"{j}-p{i}") for i in range(2)) < order.index(j)


def test_foreground_waits_for_a_blocking_dependent_to_terminate(cluster: EmbeddedCluster) -> None:
    s = cluster.store
    s.create(mknode("n1"))
    job = s.create(mkjob("j"))
    s.create(owned(mkpod("p"), ref(job)))
    s.bind("default", "p", "n1")  # bound: deleted gracefully (30 s)
    s.delete("Job", "default", "j", propagation_policy="Foreground")
    settle(cluster)
    pod = s.get("Pod", "default", "p")
    assert pod.deletion_timestamp is not None
    assert s.get("Job", "default", "j").finalizers == ["foregroundDeletion"]
    advance(cluster, 30)
    assert s.try_get("Pod", "default", "p") is None
    assert s.try_get("Job", "default", "j") is None


def test_foreground_does_not_wait_for_non_blocking_dependents_but_deletes_them(cluster: EmbeddedCluster) -> None:
    s = cluster.store
    s.create(mknode("n1"))
    job = s.create(mkjob("j"))
    s.create(owned(mkpod("p"), ref(job, block=False)))
    s.bind("default", "p", "n1")
    s.delete("Job", "default", "j", propagation_policy="Foreground")
    settle(cluster)
    assert s.try_get("Job", "default", "j") is None
    assert s.get("Pod", "default", "p").deletion_timestamp is not None


def test_foreground_leaves_a_dependent_with_another_owner(cluster: EmbeddedCluster) -> None:
    s = cluster.store
    job = s.create(mkjob("j"))
    other = s.create(mkjob("other"))
    s.create(owned(mkpod("shared"), ref(job), ref(other, controller=False)))
    s.delete("Job", "default", "j", propagation_policy="Foreground")
    settle(cluster)
    assert s.try_get("Job", "default", "j") is None
    assert [r.name for r in s.get("Pod", "default", "shared").owner_references] == ["other"]


# ---------------------------------------------------------------- orphan


def test_orphan_strips_the_references_then_the_finalizer(cluster: EmbeddedCluster) -> None:
    s = cluster.store
    job = s.create(mkjob("j"))
    other = s.create(mkjob("other"))
    s.create(owned(mkpod("p"), ref(job)))
    s.create(owned(mkpod("shared"), ref(other, controller=False), ref(job)))
    s.delete("Job", "default", "j")  # a Job's default: Orphan
    settle(cluster)
    assert s.try_get("Job", "default", "j") is None
    assert names(s, "Pod") == ["p", "shared"]
    assert s.get("Pod", "default", "p").owner_references == ()
    assert [r.name for r in s.get("Pod", "default", "shared").owner_references] == ["other"]


# ---------------------------------------------------------------- random trees


@st.composite
def forests(draw: Any) -> list[int | None]:
    """Parents of up to 12 objects (None for a root); object 0 is a root."""
    n = draw(st.integers(1, 12))
    return [None] + [draw(st.one_of(st.none(), st.integers(0, i - 1))) for i in range(1, n)]


@settings(max_examples=40, deadline=None)
@given(parents=forests(), policy=st.sampled_from(["Background", "Foreground", "Orphan"]))
def test_deleting_the_root_of_a_random_tree(parents: list[int | None], policy: str) -> None:
    cluster = EmbeddedCluster(VirtualClock(), controllers=["garbage-collector"])
    s = cluster.store
    objs: list[KubeObject] = []
    for i, p in enumerate(parents):
        raw = mkcronjob(f"o{i}")
        if p is not None:
            raw = owned(raw, ref(objs[p]))
        objs.append(s.create(raw))
    settle(cluster)
    seen = deletions(s)
    s.delete("CronJob", "default", "o0", propagation_policy=policy)
    settle(cluster)
    order = seen()

    def descendants(i: int) -> set[int]:
        out: set[int] = set()
        for j, p in enumerate(parents):
            if p == i:
                out |= {j} | descendants(j)
        return out

    under = descendants(0)
    left = set(names(s, "CronJob"))
    if policy == "Orphan":
        assert order == ["o0"]
        for j, p in enumerate(parents):
            if p == 0:
                assert s.get("CronJob", "default", f"o{j}").owner_references == ()
        assert left == {f"o{j}" for j in range(1, len(parents))}
    else:
        assert left == {f"o{j}" for j in range(len(parents)) if j != 0 and j not in under}
        assert set(order) == {"o0"} | {f"o{j}" for j in under}
        if policy == "Foreground":
            # Every object goes after all of its descendants.
            for j in {0} | under:
                assert all(order.index(f"o{k}") < order.index(f"o{j}") for k in descendants(j))


def test_a_stale_cache_never_deletes_a_dependent_that_was_released() -> None:
    """The collector decides on the object as the API server has it now: its cache may still show
    an owner reference that was removed (an orphaning it just did) after the owner went away; the
    dependent is released, not deleted (kubectl delete --cascade=orphan raced this)."""
    from ksched.apiserver.inprocess import InProcessClient
    from ksched.client.informer import InformerFactory
    from ksched.controllers.garbagecollector import DELETE, GarbageCollector

    store = Store(VirtualClock())
    client = InProcessClient(store)
    informers = InformerFactory(client)
    gc = GarbageCollector(client, informers, store.clock)
    job = store.create(mkjob("j"))
    store.create(owned(mkpod("p"), ref(job)))
    informers.poll()  # the collector's cache: p owned by j
    store.patch("Pod", "default", "p", {"metadata": {"ownerReferences": None}})
    store.delete("Job", "default", "j", propagation_policy="Background")
    gc.informers_by_kind["Job"].poll()  # the cache heard the owner go, not yet the release
    gc.sync((DELETE, "Pod", "default/p"))
    assert names(store, "Pod") == ["p"]
