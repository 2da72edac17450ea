"""The embedded store: CRUD, namespaces, selectors, pagination, optimistic concurrency, admission,
validation, status and patches through the store."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedded import advance
from ksched.api.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
)
from ksched.api.labels import parse_field_selector, parse_label_selector
from ksched.api.namespace import Namespace
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.priorityclass import PriorityClass
from ksched.apiserver.store import DEFAULT_NAMESPACES, Store
from ksched.clock import DEFAULT_EPOCH, VirtualClock
from ksched.sim.cluster import EmbeddedCluster


def mkpod(name: str, ns: str = "default", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": [{"name": "c", "image": "img"}]}
    s.update(spec)
    md: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": s}


def mknode(name: str, labels: dict[str, str] | None = None, **alloc: str) -> dict[str, Any]:
    a = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    a.update(alloc)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": a}}


# ---------------------------------------------------------------- basics


def test_fresh_store_has_default_namespaces_and_system_priority_classes(store: Store) -> None:
    names = {o.name for o in store.items("Namespace")}
    assert names == set(DEFAULT_NAMESPACES)
    pcs = {o.name: o for o in store.items(PriorityClass)}
    assert pcs["system-node-critical"].value == 2_000_001_000  # type: ignore[attr-defined]
    assert pcs["system-cluster-critical"].value == 2_000_000_000  # type: ignore[attr-defined]
    ns = store.get("Namespace", "", "default")
    assert isinstance(ns, Namespace) and ns.phase == "Active"


def test_create_get_list_delete(store: Store) -> None:
    rv0 = store.resource_version
    p = store.create(mkpod("a"))
    assert isinstance(p, Pod)
    assert int(p.resource_version) == rv0 + 1 == store.resource_version
    assert p.uid and p.creation_timestamp == DEFAULT_EPOCH
    assert store.get("Pod", "default", "a") is p
    assert store.try_get(Pod, "default", "zz") is None
    items, rv, cont = store.list("Pod")
    assert items == [p] and rv == store.resource_version and cont == ""
    assert store.count("Pod") == 1
    gone = store.delete("Pod", "default", "a")
    assert gone.name == "a" and int(gone.resource_version) == rv0 + 2
    with pytest.raises(NotFound) as ei:
        store.get("Pod", "default", "a")
    assert ei.value.code == 404 and ei.value.message == 'pods "a" not found'
    with pytest.raises(NotFound):
        store.delete("Pod", "default", "a")


def test_create_does_not_keep_a_reference_to_the_callers_dict(store: Store) -> None:
    raw = mkpod("a")
    p = store.create(raw)
    raw["metadata"]["labels"] = {"x": "y"}
    assert store.get("Pod", "default", "a").labels == {} == p.labels
    assert "resourceVersion" not in raw["metadata"]


def test_server_set_fields_are_ignored_on_create(store: Store) -> None:
    raw = mkpod("a")
    raw["metadata"].update({"resourceVersion": "999", "uid": "mine", "deletionTimestamp": "2020-01-01T00:00:00Z"})
    p = store.create(raw)
    assert p.uid != "mine" and p.resource_version != "999" and p.deletion_timestamp is None


def test_deterministic_uids_on_a_virtual_clock() -> None:
    a, b = Store(VirtualClock()), Store(VirtualClock())
    assert a.create(mkpod("x")).uid == b.create(mkpod("x")).uid


def test_already_exists(store: Store) -> None:
    store.create(mkpod("a"))
    with pytest.raises(AlreadyExists) as ei:
        store.create(mkpod("a"))
    assert ei.value.code == 409 and ei.value.reason == "AlreadyExists"
    store.create(mkpod("a", ns="kube-system"))  # another namespace: fine


def test_generate_name(store: Store) -> None:
    raw = mkpod("x")
    del raw["metadata"]["name"]
    raw["metadata"]["generateName"] = "web-"
    a, b = store.create(raw), store.create(raw)
    assert a.name.startswith("web-") and b.name.startswith("web-") and a.name != b.name


def test_unknown_kind_and_bad_bodies(store: Store) -> None:
    with pytest.raises(BadRequest):
        store.create({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "d"}})
    with pytest.raises(BadRequest):
        store.create({"metadata": {"name": "d"}})
    with pytest.raises(NotFound):
        store.list("Widget")
    with pytest.raises(BadRequest):
        store.create(mkpod("a", ns="kube-system"), namespace="default")


def test_cluster_scoped_objects_lose_a_namespace(store: Store) -> None:
    raw = mknode("n1")
    raw["metadata"]["namespace"] = "default"
    n = store.create(raw)
    assert n.namespace == "" and n.key == "n1"
    assert store.get("Node", "ignored", "n1") is n


# ---------------------------------------------------------------- namespaces


def test_namespace_must_exist_unless_auto_created() -> None:
    st = Store(VirtualClock())
    with pytest.raises(NotFound) as ei:
        st.create(mkpod("a", ns="team-a"))
    assert ei.value.message == 'namespaces "team-a" not found'
    assert st.count("Pod") == 0
    st2 = Store(VirtualClock(), auto_create_namespaces=True)
    st2.create(mkpod("a", ns="team-a"))
    assert st2.get("Namespace", "", "team-a").name == "team-a"


def test_default_namespace_is_filled_in(store: Store) -> None:
    raw = mkpod("a")
    del raw["metadata"]["namespace"]
    assert store.create(raw).namespace == "default"


def test_deleting_a_namespace_deletes_its_objects(embedded_cluster: EmbeddedCluster) -> None:
    """The namespace turns Terminating; the namespace controller deletes its content five
    seconds later, then the namespace (tests/controllers/test_namespace.py has the details)."""
    store = embedded_cluster.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    store.create(mkpod("a", ns="team-a"))
    store.create(mkpod("b", ns="team-a"))
    store.create(mkpod("c"))
    store.delete("Namespace", "", "team-a")
    assert store.get("Namespace", "", "team-a").raw["status"]["phase"] == "Terminating"
    advance(embedded_cluster, 5)
    assert [p.key for p in store.items("Pod")] == ["default/c"]
    assert store.try_get("Namespace", "", "team-a") is None


# ---------------------------------------------------------------- list: selectors and pagination


@pytest.fixture
def populated(store: Store) -> Store:
    store.create(mknode("n1"))
    store.create(mknode("n2", labels={"zone": "b"}))
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    store.create(mkpod("a", labels={"app": "web"}))
    store.create(mkpod("b", labels={"app": "db"}, schedulerName="my-scheduler"))
    store.create(mkpod("c", ns="team-a", labels={"app": "web"}))
    store.create(mkpod("d", ns="team-a"))
    store.bind("default", "a", "n1")
    store.update_status({**store.get("Pod", "team-a", "d").raw, "status": {"phase": "Running"}})
    return store


def names(objs: list[Any]) -> list[str]:
    return sorted(o.name for o in objs)


@pytest.mark.parametrize(("ns", "label", "field", "expected"), [
    (None, "", "", ["a", "b", "c", "d"]),
    ("default", "", "", ["a", "b"]),
    ("team-a", "", "", ["c", "d"]),
    (None, "app=web", "", ["a", "c"]),
    (None, "app!=web", "", ["b", "d"]),
    (None, "app in (web,db)", "", ["a", "b", "c"]),
    (None, "!app", "", ["d"]),
    (None, "", "spec.nodeName=", ["b", "c", "d"]),
    (None, "", "spec.nodeName=n1", ["a"]),
    (None, "", "spec.nodeName!=", ["a"]),
    (None, "", "status.phase=Running", ["d"]),
    (None, "", "status.phase=Pending", ["a", "b", "c"]),
    (None, "", "metadata.name=c", ["c"]),
    (None, "", "metadata.namespace=team-a", ["c", "d"]),
    (None, "", "spec.schedulerName=my-scheduler", ["b"]),
    (None, "", "spec.schedulerName=default-scheduler", ["a", "c", "d"]),
    ("default", "app=web", "spec.nodeName=", []),
    (None, "app=web", "spec.nodeName=,metadata.namespace=team-a", ["c"]),
])
def test_list_selectors(populated: Store, ns: str | None, label: str, field: str, expected: list[str]) -> None:
    items, _, _ = populated.list("Pod", ns, parse_label_selector(label), parse_field_selector(field))
    assert names(items) == expected


def test_node_field_and_label_selectors(populated: Store) -> None:
    items, _, _ = populated.list("Node", field_selector=parse_field_selector("metadata.name=n2"))
    assert names(items) == ["n2"]
    items, _, _ = populated.list("Node", label_selector=parse_label_selector("zone"))
    assert names(items) == ["n2"]


def test_unknown_field_selector_is_a_bad_request(populated: Store) -> None:
    with pytest.raises(BadRequest) as ei:
        populated.list("Pod", field_selector=parse_field_selector("spec.priority=1"))
    assert ei.value.code == 400 and "spec.priority" in ei.value.message
    with pytest.raises(BadRequest):
        populated.watch("Node", field_selector=parse_field_selector("spec.nodeName=x"))


def test_list_limit_and_continue(store: Store) -> None:
    for i in range(7):
        store.create(mkpod(f"p{i}"))
    seen: list[str] = []
    token = ""
    pages = 0
    first_rv = None
    while True:
        items, rv, token = store.list("Pod", limit=3, continue_token=token)
        first_rv = first_rv or rv
        assert rv == first_rv  # every page reports the first page's resourceVersion
        assert len(items) <= 3
        seen.extend(o.name for o in items)
        pages += 1
        if not token:
            break
        store.create(mkpod(f"z{pages}"))  # created after the list started: later keys still show up
    assert seen[:7] == [f"p{i}" for i in range(7)]
    assert pages >= 3
    assert seen == sorted(seen)


def test_list_limit_exact_multiple_and_filters(store: Store) -> None:
    for i in range(4):
        store.create(mkpod(f"p{i}", labels={"even": str(i % 2 == 0).lower()}))
    items, _, tok = store.list("Pod", label_selector=parse_label_selector("even=true"), limit=2)
    assert names(items) == ["p0", "p2"]
    if tok:
        rest, _, tok2 = store.list("Pod", label_selector=parse_label_selector("even=true"), limit=2,
                                   continue_token=tok)
        assert rest == [] and tok2 == ""


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["create", "delete", "restore"]), st.integers(0, 40)), max_size=30),
       st.integers(1, 6))
def test_each_page_continues_the_current_sorted_keys(ops: list[tuple[str, int]], limit: int) -> None:
    """Pages are found in the store's keys as they are when each page is asked for (the sorted
    keys are reused only while the store is unchanged): whatever is written between pages, a
    page holds the first ``limit`` current keys after the previous page's last one."""
    store = Store(auto_create_namespaces=True)
    for i in range(0, 40, 3):
        store.create(mkpod(f"p{i:02d}"))
    token, last = "", ""
    for op, i in [*ops, ("page", 0)] * 2:
        name = f"p{i:02d}"
        if op == "create" and store.items("Pod") and name not in names(store.items("Pod")):
            store.create(mkpod(name))
        elif op == "delete" and name in names(store.items("Pod")):
            store.delete("Pod", "default", name, grace_period_seconds=0)
        elif op == "restore":
            store.restore(store.items("Pod"), store.resource_version)
        items, _, token = store.list("Pod", limit=limit, continue_token=token)
        current = sorted(o.key for o in store.items("Pod"))
        want = [k for k in current if k > last][:limit]
        assert [o.key for o in items] == want
        last = items[-1].key if items else last
        if not token:
            last = ""


@pytest.mark.parametrize("token", ["garbage", base64.urlsafe_b64encode(b"{}").decode(),
                                   base64.urlsafe_b64encode(json.dumps({"rv": "x", "start": "a"}).encode()).decode()])
def test_bad_continue_token(store: Store, token: str) -> None:
    with pytest.raises(BadRequest):
        store.list("Pod", limit=1, continue_token=token)


# ---------------------------------------------------------------- update and optimistic concurrency


def test_update_bumps_resource_version_and_stale_versions_conflict(store: Store) -> None:
    p = store.create(mkpod("a"))
    raw = p.deepcopy_raw()
    raw["metadata"]["labels"] = {"x": "1"}
    p2 = store.update(raw)
    assert p2.labels == {"x": "1"} and int(p2.resource_version) > int(p.resource_version)
    stale = p.deepcopy_raw()
    stale["metadata"]["labels"] = {"x": "2"}
    with pytest.raises(Conflict) as ei:
        store.update(stale)
    assert ei.value.code == 409
    assert "the object has been modified" in ei.value.message
    assert store.get("Pod", "default", "a").labels == {"x": "1"}
    # No resourceVersion: an unconditional update.
    uncond = p2.deepcopy_raw()
    del uncond["metadata"]["resourceVersion"]
    uncond["metadata"]["labels"] = {"x": "3"}
    assert store.update(uncond).labels == {"x": "3"}


def test_noop_update_keeps_the_resource_version(store: Store) -> None:
    p = store.create(mkpod("a"))
    rv = store.resource_version
    same = store.update(p.deepcopy_raw())
    assert same is p and store.resource_version == rv


def test_update_of_missing_object_and_uid_precondition(store: Store) -> None:
    with pytest.raises(NotFound):
        store.update(mkpod("nope"))
    p = store.create(mkpod("a"))
    raw = p.deepcopy_raw()
    raw["metadata"]["uid"] = "someone-else"
    raw["metadata"]["labels"] = {"a": "b"}
    with pytest.raises(Conflict):
        store.update(raw)


def test_system_fields_are_not_the_clients(store: Store) -> None:
    p = store.create(mkpod("a"))
    raw = p.deepcopy_raw()
    raw["metadata"]["uid"] = p.uid
    raw["metadata"]["creationTimestamp"] = "1999-01-01T00:00:00Z"
    raw["metadata"]["labels"] = {"k": "v"}
    p2 = store.update(raw)
    assert p2.creation_timestamp == p.creation_timestamp and p2.uid == p.uid


def test_main_resource_update_ignores_status_and_status_update_ignores_spec(store: Store) -> None:
    p = store.create(mkpod("a"))
    raw = p.deepcopy_raw()
    raw["status"] = {"phase": "Running"}
    raw["metadata"]["labels"] = {"l": "1"}
    p2 = store.update(raw)
    assert p2.phase == "Pending" and p2.labels == {"l": "1"}
    raw = p2.deepcopy_raw()
    raw["status"] = {**raw["status"], "phase": "Running"}
    raw["metadata"]["labels"] = {"l": "2"}
    p3 = store.update_status(raw)
    assert p3.phase == "Running" and p3.labels == {"l": "1"}


def test_pod_spec_is_mostly_immutable(store: Store) -> None:
    p = store.create(mkpod("a", tolerations=[]))
    raw = p.deepcopy_raw()
    raw["spec"]["nodeSelector"] = {"a": "b"}
    with pytest.raises(Invalid) as ei:
        store.update(raw)
    assert ei.value.code == 422
    raw = p.deepcopy_raw()
    raw["spec"]["containers"][0]["image"] = "img:v2"
    raw["spec"]["activeDeadlineSeconds"] = 30
    p2 = store.update(raw)
    assert p2.containers[0].image == "img:v2"


def test_scheduling_gates_may_only_be_removed(store: Store) -> None:
    p = store.create(mkpod("a", schedulingGates=[{"name": "g1"}, {"name": "g2"}]))
    raw = p.deepcopy_raw()
    raw["spec"]["schedulingGates"] = [{"name": "g1"}, {"name": "g3"}]
    with pytest.raises(Invalid):
        store.update(raw)
    raw["spec"]["schedulingGates"] = [{"name": "g2"}]
    assert store.update(raw).scheduling_gates == ("g2",)


# ---------------------------------------------------------------- validation: nothing stored


def test_invalid_object_is_rejected_with_422_and_not_stored(store: Store) -> None:
    rv = store.resource_version
    raw = mkpod("a")
    raw["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1.2.3"}}
    with pytest.raises(Invalid) as ei:
        store.create(raw)
    e = ei.value
    assert e.code == 422 and e.reason == "Invalid"
    assert 'spec.containers[0].resources.requests.cpu: invalid quantity "1.2.3"' in e.message
    assert e.causes == [{"reason": "FieldValueInvalid", "message": 'invalid quantity "1.2.3"',
                         "field": "spec.containers[0].resources.requests.cpu"}]
    st = e.status()
    assert st["kind"] == "Status" and st["code"] == 422 and st["details"]["causes"] == e.causes
    assert store.count("Pod") == 0 and store.resource_version == rv


def test_invalid_update_is_rejected_and_the_old_object_kept(store: Store) -> None:
    n = store.create(mknode("n1"))
    raw = n.deepcopy_raw()
    raw["spec"] = {"taints": [{"key": "k", "effect": "Sometimes"}]}
    with pytest.raises(Invalid):
        store.update(raw)
    assert store.get("Node", "", "n1") is n


def test_bad_metadata_is_invalid(store: Store) -> None:
    with pytest.raises(Invalid):
        store.create({"apiVersion": "v1", "kind": "Pod", "metadata": [1], "spec": {}})


# ---------------------------------------------------------------- admission


def test_pod_defaults(store: Store) -> None:
    p = store.create(mkpod("a"))
    spec = p.raw["spec"]
    assert p.scheduler_name == "default-scheduler" == spec["schedulerName"]
    assert spec["priority"] == 0 and p.priority == 0
    assert spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert p.phase == "Pending" and p.raw["status"]["qosClass"] == "BestEffort"
    tols = {(t["key"], t["effect"], t.get("tolerationSeconds")) for t in spec["tolerations"]}
    assert tols == {("node.kubernetes.io/not-ready", "NoExecute", 300),
                    ("node.kubernetes.io/unreachable", "NoExecute", 300)}
    assert p.generation == 1


def test_default_tolerations_not_duplicated_and_switchable() -> None:
    st = Store(VirtualClock())
    p = st.create(mkpod("a", tolerations=[{"operator": "Exists"}]))
    assert p.raw["spec"]["tolerations"] == [{"operator": "Exists"}]
    st2 = Store(VirtualClock(), disable_admission_plugins=["DefaultTolerationSeconds"])
    assert "tolerations" not in st2.create(mkpod("a")).raw["spec"]
    with pytest.raises(ValueError, match="unknown admission plugin"):
        Store(VirtualClock(), disable_admission_plugins=["NoSuchPlugin"])


def test_resource_defaults_and_qos(store: Store) -> None:
    p = store.create(mkpod("g", containers=[{"name": "c", "image": "i",
                                             "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]))
    assert p.raw["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert p.raw["status"]["qosClass"] == "Guaranteed"


def priority_class(name: str, value: int, default: bool = False, policy: str | None = None) -> dict[str, Any]:
    pc: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                          "value": value, "globalDefault": default}
    if policy:
        pc["preemptionPolicy"] = policy
    return pc


def test_priority_from_class_name(store: Store) -> None:
    store.create(priority_class("high", 1000, policy="Never"))
    p = store.create(mkpod("a", priorityClassName="high"))
    assert p.priority == 1000 and p.preemption_policy == "Never"
    p = store.create(mkpod("b", priorityClassName="system-node-critical"))
    assert p.priority == 2_000_001_000
    p = store.create(mkpod("c", priorityClassName="system-cluster-critical"))
    assert p.priority == 2_000_000_000
    p = store.create(mkpod("d", priorityClassName="high", preemptionPolicy="Never"))
    assert p.preemption_policy == "Never"
    # A pod may not state a policy other than its class's.
    with pytest.raises(Forbidden) as ei:
        store.create(mkpod("e", priorityClassName="high", preemptionPolicy="PreemptLowerPriority"))
    assert ei.value.message == (
        'pods "e" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided '
        "in pod spec; priority admission controller computed Never from the given PriorityClass name")


def test_unknown_priority_class_is_rejected_and_not_stored(store: Store) -> None:
    rv = store.resource_version
    with pytest.raises(Forbidden) as ei:
        store.create(mkpod("a", priorityClassName="nope"))
    assert ei.value.code == 403 and "no PriorityClass with name nope was found" in ei.value.message
    assert store.count("Pod") == 0 and store.resource_version == rv


def test_global_default_priority_class(store: Store) -> None:
    store.create(priority_class("default-prio", 50, default=True))
    p = store.create(mkpod("a"))
    assert p.priority == 50 and p.priority_class_name == "default-prio"
    # A class named explicitly wins over the default.
    store.create(priority_class("low", 1))
    assert store.create(mkpod("b", priorityClassName="low")).priority == 1


def test_priority_value_mismatch(store: Store) -> None:
    store.create(priority_class("high", 1000))
    with pytest.raises(Forbidden):
        store.create(mkpod("a", priorityClassName="high", priority=5))
    assert store.create(mkpod("b", priorityClassName="high", priority=1000)).priority == 1000
    # As upstream: a pod stating a priority without a class is refused (it would outrank
    # everything it names), unless it states what the default gives it.
    with pytest.raises(Forbidden) as ei:
        store.create(mkpod("c", priority=7))
    assert ei.value.message == (
        'pods "c" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority '
        "admission controller computed 0 from the given PriorityClass name")
    assert store.create(mkpod("d", priority=0)).priority == 0
    # Without the Priority plugin (upstream's scheduler benchmarks), the pod keeps what it states.
    lenient = Store(VirtualClock(), disable_admission_plugins=["Priority"])
    assert lenient.create(mkpod("c", priority=7)).priority == 7


# ---------------------------------------------------------------- status and patches through the store


def test_pod_status_subresource(store: Store) -> None:
    p = store.create(mkpod("a"))
    raw = p.deepcopy_raw()
    raw["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    raw["status"]["phase"] = "Running"
    p2 = store.update_status(raw)
    assert p2.phase == "Running" and p2.condition("Ready") == {"type": "Ready", "status": "True"}
    p3 = store.patch("Pod", "default", "a", {"status": {"phase": "Succeeded"}}, subresource="status")
    assert p3.phase == "Succeeded" and p3.is_terminal


def test_kubectl_style_patches(store: Store) -> None:
    store.create(mknode("n1"))
    # kubectl label / annotate: merge patches
    n = store.patch("Node", "", "n1", {"metadata": {"labels": {"zone": "a"}, "annotations": {"note": "x"}}})
    assert n.labels == {"zone": "a"} and n.annotations == {"note": "x"}
    n = store.patch("Node", "", "n1", {"metadata": {"labels": {"zone": None}}})
    assert n.labels == {}
    # kubectl cordon: a strategic merge patch of spec.unschedulable
    n = store.patch("Node", "", "n1", {"spec": {"unschedulable": True}},
                    "application/strategic-merge-patch+json")
    assert isinstance(n, Node) and n.unschedulable
    # kubectl taint: a JSON patch adding to spec.taints
    n = store.patch("Node", "", "n1", [{"op": "add", "path": "/spec/taints", "value": [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}], "application/json-patch+json")
    assert [str(t) for t in n.taints] == ["dedicated=gpu:NoSchedule"]  # type: ignore[attr-defined]
    n = store.patch("Node", "", "n1", [{"op": "remove", "path": "/spec/taints/0"}], "application/json-patch+json")
    assert n.taints == ()  # type: ignore[attr-defined]
    n = store.patch("Node", "", "n1", {"spec": {"unschedulable": None}})
    assert not n.unschedulable  # type: ignore[attr-defined]


def test_patch_errors(store: Store) -> None:
    store.create(mknode("n1"))
    with pytest.raises(NotFound):
        store.patch("Node", "", "nope", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(Invalid):
        store.patch("Node", "", "n1", [{"op": "remove", "path": "/spec/nothing"}], "application/json-patch+json")
    with pytest.raises(Invalid):
        store.patch("Node", "", "n1", {"metadata": {"labels": {"a": "b"}}}, "application/x-unknown")
    with pytest.raises(Invalid):  # the patched object fails validation
        store.patch("Node", "", "n1", {"spec": {"taints": [{"key": "k", "effect": "Whenever"}]}})
    with pytest.raises(Invalid):
        store.patch("Node", "", "n1", {"metadata": None})


def test_patch_with_explicit_stale_resource_version_conflicts(store: Store) -> None:
    n = store.create(mknode("n1"))
    store.patch("Node", "", "n1", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(Conflict):
        store.patch("Node", "", "n1", {"metadata": {"labels": {"a": "2"}, "resourceVersion": n.resource_version}})
    assert store.get("Node", "", "n1").labels == {"a": "1"}


def test_patch_cannot_rename_or_move(store: Store) -> None:
    store.create(mkpod("a"))
    p = store.patch("Pod", "default", "a", {"metadata": {"name": "b", "namespace": "kube-system",
                                                         "labels": {"x": "y"}}})
    assert p.key == "default/a" and p.labels == {"x": "y"}
    assert store.try_get("Pod", "kube-system", "b") is None


def test_pod_merge_patches_copy_on_write(store: Store) -> None:
    """A merge patch of a pod shares what it does not change with the stored pod (no deep copy)
    and never changes the stored pod; a status write skips re-validating the unchanged spec,
    while a patch of the spec is still validated."""
    import copy

    old = store.create(mkpod("a"))
    before = copy.deepcopy(old.raw)
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    new = store.patch("Pod", "default", "a", {"status": status}, subresource="status")
    assert old.raw == before
    assert new.raw["spec"] is old.raw["spec"]
    assert new.raw["metadata"] is not old.raw["metadata"]
    assert new.raw["status"]["conditions"] == status["conditions"]
    assert new.raw["status"]["conditions"] is not status["conditions"]  # the caller's patch is copied
    status["conditions"].append({"type": "X"})
    assert len(store.get("Pod", "default", "a").raw["status"]["conditions"]) == 1
    with pytest.raises(Invalid):
        store.patch("Pod", "default", "a", {"metadata": {"labels": {"bad key!": "x"}}})
    assert store.get("Pod", "default", "a").raw == new.raw
    lbl = store.patch("Pod", "default", "a", {"metadata": {"labels": {"app": "web"}}})
    assert lbl.labels == {"app": "web"} and new.labels == {}
    assert lbl.raw["spec"] is new.raw["spec"]


def test_an_owned_pod_status_patch_is_taken_over(store: Store) -> None:
    """``owned=True`` (the simulated kubelet's status writes): the patch's values become the new
    version's as they are; the stored pod is the same as with a copied patch."""
    store.create(mkpod("a"))
    store.create(mkpod("b"))
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    copied = store.patch("Pod", "default", "a", {"status": status}, subresource="status")
    conditions = [{"type": "Ready", "status": "True"}]
    owned = store.patch("Pod", "default", "b", {"status": {"phase": "Running", "conditions": conditions}},
                        subresource="status", owned=True)
    assert owned.raw["status"]["conditions"] is conditions
    assert owned.raw["status"] == copied.raw["status"]
    assert owned.phase == copied.phase == "Running"
