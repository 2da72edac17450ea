"""What the workload controllers share (ksched.controllers.controller_utils, upstream's
controller_utils.go and controller_ref_manager.go): the pod-template hash and its format, the
order in which surplus pods are deleted (ActivePodsWithRanks), slow-start batches,
expectations, pods from a template, and claiming objects (adopt, release, ignore)."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_objects import mkpod, mkrs
from ksched.api.errors import Conflict, NotFound
from ksched.api.labels import LabelSelector
from ksched.api.meta import format_time
from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.controllers.controller_utils import (
    EXPECTATIONS_TIMEOUT,
    ControllerRefManager,
    Expectations,
    active_pods_ranked,
    compute_hash,
    fnv32,
    fnv32a,
    pod_from_template,
    safe_encode_string,
    slow_start_batch,
)

NOW = 1_735_689_600.0


@pytest.fixture
def store(clock: VirtualClock) -> Store:
    """A plain store: no controller acts on the objects these tests make."""
    return Store(clock)

# ---------------------------------------------------------------- hashing


def test_safe_encode_maps_digits_as_upstream() -> None:
    assert safe_encode_string("0123456789") == "456789bcdf"


@pytest.mark.parametrize(("data", "a", "plain"), [
    (b"", 0x811C9DC5, 0x811C9DC5), (b"a", 0xE40C292C, 0x050C5D7E), (b"foobar", 0xBF9CF968, 0x31F0B262),
])
def test_fnv_vectors(data: bytes, a: int, plain: int) -> None:
    assert fnv32a(data) == a and fnv32(data) == plain


TPL = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def test_compute_hash_format_and_inputs() -> None:
    h = compute_hash(TPL, None)
    assert re.fullmatch(r"[456789bcdf]{1,10}", h)  # a decimal uint32, safe-encoded
    assert compute_hash(TPL, None) == h
    assert compute_hash(TPL, 1) != h and compute_hash(TPL, 1) != compute_hash(TPL, 2)
    other = {**TPL, "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}
    assert compute_hash(other, None) != h
    # What Go's semantic equality cannot see does not change the hash.
    same = {"metadata": {"labels": {"app": "web"}, "annotations": {}, "creationTimestamp": None},
            "spec": {"containers": [{"name": "c", "image": "nginx", "ports": []}], "hostNetwork": False}}
    assert compute_hash(same, None) == h


def test_pod_from_template(store: Store) -> None:
    rs = store.create(mkrs("web"))
    tpl = {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}, "finalizers": ["x/y"]},
           "spec": {"containers": [{"name": "c", "image": "img"}]}}
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs.uid, "controller": True,
           "blockOwnerDeletion": True}
    raw = pod_from_template(tpl, rs, ref)
    assert raw["metadata"] == {"generateName": "web-", "namespace": "default", "labels": {"app": "web"},
                               "annotations": {"a": "b"}, "finalizers": ["x/y"], "ownerReferences": [ref]}
    assert raw["spec"] == tpl["spec"] and raw["spec"] is not tpl["spec"]


# ---------------------------------------------------------------- deletion order


def _pod(name: str, node: str = "n1", phase: str = "Running", ready: bool = True, ready_since: float | None = 0.0,
         created: float = 0.0, restarts: int = 0, cost: int | None = None, uid: str = "") -> Pod:
    conds = []
    if ready:
        conds.append({"type": "Ready", "status": "True", "lastTransitionTime": format_time(NOW - (ready_since or 0))})
    md: dict[str, Any] = {"name": name, "namespace": "d", "uid": uid or name, "creationTimestamp": format_time(NOW - created)}
    if cost is not None:
        md["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": str(cost)}
    return Pod({"metadata": md, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
                "status": {"phase": phase, "conditions": conds,
                           "containerStatuses": [{"name": "c", "restartCount": restarts}]}})


# Pairs (deleted first, deleted later) for each rule of ActivePodsWithRanks.Less, in precedence order.
ORDER_CASES = [
    ("unassigned before assigned", _pod("a", node=""), _pod("b")),
    ("pending before running", _pod("a", phase="Pending"), _pod("b")),
    ("unknown before running", _pod("a", phase="Unknown"), _pod("b")),
    ("pending before unknown", _pod("a", phase="Pending"), _pod("b", phase="Unknown")),
    ("not ready before ready", _pod("a", ready=False), _pod("b")),
    ("lower deletion cost first", _pod("a", cost=-5), _pod("b", cost=10)),
    ("ready more recently (log2 buckets) first", _pod("a", ready_since=10), _pod("b", ready_since=100)),
    ("same log2 bucket: lower uid first", _pod("a", ready_since=70, uid="u1"), _pod("b", ready_since=100, uid="u2")),
    ("more restarts first", _pod("a", restarts=3), _pod("b", restarts=1)),
    ("newer first", _pod("a", created=10), _pod("b", created=1000)),
    ("unassigned outranks phase", _pod("a", node="", phase="Running"), _pod("b", phase="Pending")),
    ("phase outranks readiness", _pod("a", phase="Pending", ready=True), _pod("b", ready=False)),
    ("readiness outranks cost", _pod("a", ready=False, cost=100), _pod("b", cost=-100)),
    ("cost outranks restarts", _pod("a", cost=-1), _pod("b", restarts=9)),
]


@pytest.mark.parametrize(("first", "later"), [(a, b) for _, a, b in ORDER_CASES], ids=[n for n, _, _ in ORDER_CASES])
def test_deletion_order_rules(first: Pod, later: Pod) -> None:
    for pods in ([first, later], [later, first]):
        assert [p.name for p in active_pods_ranked(pods, [], NOW)] == ["a", "b"]


def test_pods_doubled_up_on_a_node_go_first() -> None:
    a, b, c = _pod("a", node="n1"), _pod("b", node="n2"), _pod("c", node="n2")
    related = [a, b, c, _pod("x", node="n2")]  # another ReplicaSet's pod of the same Deployment on n2
    assert [p.name for p in active_pods_ranked([a, b, c], related, NOW)][2] == "a"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["", "n1", "n2"]), st.sampled_from(["Pending", "Running", "Unknown"]),
                          st.booleans(), st.integers(0, 4000), st.integers(0, 3), st.integers(0, 4000)),
                min_size=2, max_size=6, unique_by=lambda t: t[5]))
def test_deletion_order_is_a_consistent_order(specs: list[tuple[Any, ...]]) -> None:
    """Pods created at different times: whatever the input order, the ranking is the same (the
    log2-bucket ties broken by uid), and no pod is ranked before one that a higher-precedence
    rule puts first. (Pods equal in everything are left in input order, as Go's sort may.)"""
    pods = [_pod(f"p{i}", node=n, phase=ph, ready=r, ready_since=rs, restarts=rr, created=c, uid=f"u{i}")
            for i, (n, ph, r, rs, rr, c) in enumerate(specs)]
    orders = {tuple(p.name for p in active_pods_ranked(list(perm), [], NOW))
              for perm in itertools.islice(itertools.permutations(pods), 6)}
    assert len(orders) == 1
    ranked = active_pods_ranked(pods, [], NOW)
    for x, y in itertools.pairwise(ranked):
        assert (bool(x.node_name), {"Pending": 0, "Unknown": 1, "Running": 2}[x.phase]) <= \
               (bool(y.node_name), {"Pending": 0, "Unknown": 1, "Running": 2}[y.phase])


# ---------------------------------------------------------------- batches and expectations


@pytest.mark.parametrize(("count", "fail_at", "calls", "successes"), [
    (10, None, 10, 10),
    (10, 0, 1, 0),        # the first batch (1) fails: nothing more is tried
    (10, 1, 3, 2),        # batches 1, 2: the second fails after both calls
    (10, 4, 7, 6),        # batches 1, 2, 4: the third fails
    (0, None, 0, 0),
])
def test_slow_start_batches(count: int, fail_at: int | None, calls: int, successes: int) -> None:
    seen: list[int] = []

    def fn(i: int) -> None:
        seen.append(i)
        if i == fail_at:
            raise Conflict("no")

    ok, err = slow_start_batch(count, 1, fn)
    assert (len(seen), ok, err is not None) == (calls, successes, fail_at is not None)


def test_expectations(clock: VirtualClock) -> None:
    e = Expectations(clock)
    assert e.satisfied("k")
    e.expect("k", adds=2)
    assert not e.satisfied("k")
    e.creation_observed("k")
    assert not e.satisfied("k")
    e.creation_observed("k")
    assert e.satisfied("k")
    e.expect("k", deletes=["ns/a", "ns/b"])
    e.deletion_observed("k", "ns/zzz")  # not one expected
    e.deletion_observed("k", "ns/a")
    assert not e.satisfied("k")
    e.deletion_observed("k", "ns/b")
    assert e.satisfied("k")
    e.expect("k", adds=1)
    clock.advance(EXPECTATIONS_TIMEOUT + 1)
    assert e.satisfied("k")  # expired: trust the cache again
    e.expect("k", adds=3)
    e.lower("k", adds=3)
    assert e.satisfied("k")
    e.delete("k")
    assert e.satisfied("k")


# ---------------------------------------------------------------- claiming


def test_claim_adopts_releases_and_ignores(store: Store) -> None:
    client = InProcessClient(store)
    rs = store.create(mkrs("web"))
    other = store.create(mkrs("other", labels={"app": "other"}))
    orphan = store.create(mkpod("orphan", {"app": "web"}))
    stranger = store.create(mkpod("stranger", {"app": "db"}))
    mine = store.create({**mkpod("mine", {"app": "web"}), "metadata": {
        "name": "mine", "namespace": "default", "labels": {"app": "web"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs.uid,
                             "controller": True}]}})
    gone_astray = store.create({**mkpod("astray", {"app": "moved"}), "metadata": {
        "name": "astray", "namespace": "default", "labels": {"app": "moved"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs.uid,
                             "controller": True}]}})
    theirs = store.create({**mkpod("theirs", {"app": "web"}), "metadata": {
        "name": "theirs", "namespace": "default", "labels": {"app": "web"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "other", "uid": other.uid,
                             "controller": True}]}})
    m = ControllerRefManager(client, rs, LabelSelector.from_dict({"matchLabels": {"app": "web"}}),
                             lambda: store.get("ReplicaSet", "default", "web"))
    claimed, errors = m.claim([orphan, stranger, mine, gone_astray, theirs])
    assert errors == [] and sorted(o.name for o in claimed) == ["mine", "orphan"]
    adopted = store.get("Pod", "default", "orphan")
    assert [(r["kind"], r["name"], r["uid"], r["controller"], r["blockOwnerDeletion"])
            for r in adopted.raw["metadata"]["ownerReferences"]] == [("ReplicaSet", "web", rs.uid, True, True)]
    assert store.get("Pod", "default", "astray").owner_references == ()  # released
    assert store.get("Pod", "default", "theirs").controller_ref().uid == other.uid  # type: ignore[union-attr]
    assert store.get("Pod", "default", "stranger").owner_references == ()


def test_no_adoption_by_a_controller_that_is_gone(store: Store) -> None:
    client = InProcessClient(store)
    rs = store.create(mkrs("web"))
    orphan = store.create(mkpod("orphan", {"app": "web"}))

    def fresh() -> Any:
        raise NotFound("replicasets.apps \"web\" not found")

    m = ControllerRefManager(client, rs, LabelSelector.from_dict({"matchLabels": {"app": "web"}}), fresh)
    claimed, errors = m.claim([orphan])
    assert claimed == [] and errors == []  # NotFound: nothing to adopt for
    replaced = store.create(mkrs("new"))
    m = ControllerRefManager(client, rs, LabelSelector.from_dict({"matchLabels": {"app": "web"}}), lambda: replaced)
    claimed, _ = m.claim([orphan])
    assert claimed == [] and store.get("Pod", "default", "orphan").owner_references == ()
