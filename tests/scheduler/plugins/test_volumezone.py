"""VolumeZone: tables ported from upstream's volume_zone_test.go (single zone, multi zone, with
binding, queueing hints)."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from ksched.client.informer import Indexer
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ActionType, EventResource, QueueingHint
from ksched.scheduler.framework.status import Code
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.volumezone import ERR_REASON_CONFLICT, VolumeZone, label_zones_to_set
from ksched.testing import make_pod

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


class FakeInformer:
    def __init__(self) -> None:
        self.indexer = Indexer()

    def get(self, key: str) -> Any:
        return self.indexer.get(key)

    def list(self) -> list[Any]:
        return self.indexer.list()


class FakeInformers:
    def __init__(self, *objs: Any) -> None:
        self.by_kind: dict[str, FakeInformer] = {}
        for o in objs:
            self.informer(o.KIND).indexer.upsert(o)

    def informer(self, kind: str, **_: Any) -> FakeInformer:
        return self.by_kind.setdefault(kind, FakeInformer())


class Handle:
    def __init__(self, informers: FakeInformers) -> None:
        self.informers = informers


def pv(name: str, **labels: str) -> PersistentVolume:
    return PersistentVolume({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": labels},
                             "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}})


def pvc(name: str, volume_name: str = "", sc: str | None = None, ns: str = "default") -> PersistentVolumeClaim:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if volume_name:
        spec["volumeName"] = volume_name
    if sc is not None:
        spec["storageClassName"] = sc
    return PersistentVolumeClaim({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                  "metadata": {"name": name, "namespace": ns}, "spec": spec})


def sc(name: str, mode: str | None = None) -> StorageClass:
    raw: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                           "provisioner": "kubernetes.io/no-provisioner"}
    if mode:
        raw["volumeBindingMode"] = mode
    return StorageClass(raw)


def node(labels: dict[str, str]) -> NodeInfo:
    return NodeInfo(Node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "host1", "labels": labels}}))


def pod_with_volume(pvc_name: str, ns: str = "default") -> Pod:
    return make_pod("pod_1", ns, volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": pvc_name}}])


def pod_without_volume() -> Pod:
    return make_pod("pod_1")


def run(plugin: VolumeZone, pod: Pod, ni: NodeInfo) -> tuple[Any, Any]:
    state = CycleState()
    _, pre = plugin.pre_filter(state, pod, None)  # type: ignore[arg-type]
    return pre, plugin.filter(state, pod, ni)


def as_tuple(s: Any) -> Any:
    return None if s is None else (s.code, s.reasons)


CONFLICT = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_CONFLICT,))
SKIP = (Code.SKIP, ())

SINGLE_ZONE_OBJS = [
    pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", **{BETA_REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_3", **{BETA_REGION: "us-west1"}),
    pv("Vol_Stable_1", **{ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", **{REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_Stable_3", **{ZONE: "us-west1-a", REGION: "us-west1-a"}),
    pvc("PVC_1", "Vol_1"), pvc("PVC_2", "Vol_2"), pvc("PVC_3", "Vol_3"), pvc("PVC_4", "Vol_not_exist"),
    pvc("PVC_Stable_1", "Vol_Stable_1"), pvc("PVC_Stable_2", "Vol_Stable_2"), pvc("PVC_Stable_3", "Vol_Stable_3"),
]


@pytest.mark.parametrize("name,pvc_name,labels,want_pre,want", [
    ("pod without volume", None, {BETA_ZONE: "us-west1-a"}, SKIP, None),
    ("node without labels", "PVC_1", {}, None, None),
    ("beta zone label matched", "PVC_1", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, None, None),
    ("beta region label matched", "PVC_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}, None, None),
    ("beta region label doesn't match", "PVC_2", {BETA_REGION: "no_us-west1", "uselessLabel": "none"}, None, CONFLICT),
    ("beta zone label doesn't match", "PVC_1", {BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"}, None, CONFLICT),
    ("zone label matched", "PVC_Stable_1", {ZONE: "us-west1-a", "uselessLabel": "none"}, None, None),
    ("region label matched", "PVC_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}, None, None),
    ("region label doesn't match", "PVC_Stable_2", {REGION: "no_us-west1", "uselessLabel": "none"}, None, CONFLICT),
    ("zone label doesn't match", "PVC_Stable_1", {ZONE: "no_us-west1-a", "uselessLabel": "none"}, None, CONFLICT),
    ("pv with zone and region, node with only zone", "PVC_Stable_3", {ZONE: "us-west1-a"}, None, CONFLICT),
    ("pv with zone,node with beta zone", "PVC_Stable_1", {BETA_ZONE: "us-west1-a"}, None, CONFLICT),
    ("pv with beta label,node with ga label, matched", "PVC_1", {ZONE: "us-west1-a"}, None, None),
    ("pv with beta label,node with ga label, don't match", "PVC_1", {ZONE: "us-west1-b"}, None, CONFLICT),
])
def test_single_zone(name: str, pvc_name: str | None, labels: dict[str, str], want_pre: Any, want: Any) -> None:
    p = VolumeZone({}, Handle(FakeInformers(*SINGLE_ZONE_OBJS)))
    pod = pod_with_volume(pvc_name) if pvc_name else pod_without_volume()
    pre, st = run(p, pod, node(labels))
    assert as_tuple(pre) == want_pre
    assert as_tuple(st) == want


MULTI_ZONE_OBJS = [
    pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", **{BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
    pv("Vol_3", **{BETA_ZONE: "us-west1-c__us-west1-a"}),
    pv("Vol_Stable_1", **{ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", **{ZONE: "us-west1-c__us-west1-a"}),
    pvc("PVC_1", "Vol_1"), pvc("PVC_2", "Vol_2"), pvc("PVC_3", "Vol_3"), pvc("PVC_4", "Vol_not_exist"),
    pvc("PVC_Stable_1", "Vol_Stable_1"), pvc("PVC_Stable_2", "Vol_Stable_2"),
]


@pytest.mark.parametrize("name,pvc_name,labels,want", [
    ("node without labels", "PVC_3", {}, None),
    ("beta zone label matched", "PVC_3", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, None),
    ("beta zone label doesn't match", "PVC_1", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"}, CONFLICT),
    ("zone label matched", "PVC_Stable_2", {ZONE: "us-west1-a", "uselessLabel": "none"}, None),
    ("zone label doesn't match", "PVC_Stable_1", {ZONE: "us-west1-b", "uselessLabel": "none"}, CONFLICT),
])
def test_multi_zone(name: str, pvc_name: str, labels: dict[str, str], want: Any) -> None:
    p = VolumeZone({}, Handle(FakeInformers(*MULTI_ZONE_OBJS)))
    pre, st = run(p, pod_with_volume(pvc_name), node(labels))
    assert pre is None
    assert as_tuple(st) == want


def test_missing_volume() -> None:
    p = VolumeZone({}, Handle(FakeInformers(*SINGLE_ZONE_OBJS)))
    pre, st = run(p, pod_with_volume("PVC_4"), node({ZONE: "us-west1-a"}))
    want = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('persistentvolume "Vol_not_exist" not found',))
    assert as_tuple(pre) == want and as_tuple(st) == want


def test_missing_claim() -> None:
    p = VolumeZone({}, Handle(FakeInformers(*SINGLE_ZONE_OBJS)))
    pre, _ = run(p, pod_with_volume("nope"), node({}))
    assert as_tuple(pre) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('persistentvolumeclaim "nope" not found',))


BINDING_OBJS = [
    sc("Class_Immediate", "Immediate"), sc("Class_Wait", "WaitForFirstConsumer"),
    pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
    pvc("PVC_1", "Vol_1"), pvc("PVC_NoSC", sc="Class_0"), pvc("PVC_EmptySC"), pvc("PVC_WaitSC", sc="Class_Wait"),
    pvc("PVC_ImmediateSC", sc="Class_Immediate"),
]


@pytest.mark.parametrize("name,pvc_name,want_pre,want", [
    ("label zone failure domain matched", "PVC_1", None, None),
    ("unbound volume empty storage class", "PVC_EmptySC",
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("PersistentVolumeClaim had no pv name and storageClass name",)),
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("PersistentVolumeClaim had no pv name and storageClass name",))),
    ("unbound volume no storage class", "PVC_NoSC",
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('storageclass.storage.k8s.io "Class_0" not found',)),
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('storageclass.storage.k8s.io "Class_0" not found',))),
    # Upstream's table has a class with no binding mode here; the API defaults it to Immediate.
    ("unbound volume immediate binding mode", "PVC_ImmediateSC",
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("PersistentVolume had no name",)),
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("PersistentVolume had no name",))),
    ("unbound volume wait binding mode", "PVC_WaitSC", SKIP, None),
])
def test_with_binding(name: str, pvc_name: str, want_pre: Any, want: Any) -> None:
    p = VolumeZone({}, Handle(FakeInformers(*BINDING_OBJS)))
    pre, st = run(p, pod_with_volume(pvc_name), node({BETA_ZONE: "us-west1-a", "uselessLabel": "none"}))
    assert as_tuple(pre) == want_pre
    assert as_tuple(st) == want


def test_label_zones_to_set() -> None:
    assert label_zones_to_set("a__b__ c ") == {"a", "b", "c"}
    with pytest.raises(ValueError):
        label_zones_to_set("a____b")


def test_unparsable_pv_label_is_ignored() -> None:
    objs = [pv("V", **{ZONE: "a____b", REGION: "r"}), pvc("C", "V")]
    p = VolumeZone({}, Handle(FakeInformers(*objs)))
    _, st = run(p, pod_with_volume("C"), node({ZONE: "elsewhere", REGION: "r"}))
    assert st is None


# ---- queueing hints ------------------------------------------------------------------------

def test_events_to_register() -> None:
    evs = {(e.event.resource, e.event.action): e.hint is not None for e in VolumeZone({}, None).events_to_register()}
    assert evs == {
        (EventResource.STORAGE_CLASS, ActionType.ADD): True,
        (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL): False,
        (EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE): True,
        (EventResource.PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE): True,
    }


@pytest.mark.parametrize("name,pod,old,new,want", [
    ("pvc-was-added-but-pod-refers-no-pvc", pod_without_volume(), None, pvc("PVC_1", "Vol_1"), QueueingHint.QUEUE_SKIP),
    ("pvc-was-added-and-pod-was-bound-to-different-pvc", pod_with_volume("PVC_2"), None, pvc("PVC_1", "Vol_1"),
     QueueingHint.QUEUE_SKIP),
    ("pvc-was-added-and-pod-was-bound-to-pvc-but-different-ns", pod_with_volume("PVC_1"), None,
     pvc("PVC_1", "Vol_1", ns="ns1"), QueueingHint.QUEUE_SKIP),
    ("pvc-was-added-and-pod-was-bound-to-the-pvc", pod_with_volume("PVC_1"), None, pvc("PVC_1", "Vol_1"),
     QueueingHint.QUEUE),
    ("pvc-was-updated-and-pod-was-bound-to-the-pvc", pod_with_volume("PVC_1"), pvc("PVC_1"), pvc("PVC_1", "Vol_1"),
     QueueingHint.QUEUE),
    ("pvc-was-updated-but-pod-refers-no-pvc", pod_without_volume(), pvc("PVC_1"), pvc("PVC_1", "Vol_1"),
     QueueingHint.QUEUE_SKIP),
])
def test_hint_pvc(name: str, pod: Pod, old: Any, new: Any, want: QueueingHint) -> None:
    assert VolumeZone.is_schedulable_after_pvc_change(pod, old, new) == want


@pytest.mark.parametrize("name,new,want", [
    ("sc-doesn't-have-volume-binding-mode", sc("SC_1"), QueueingHint.QUEUE_SKIP),
    ("new-sc-is-wait-for-first-consumer-mode", sc("SC_1", "WaitForFirstConsumer"), QueueingHint.QUEUE),
])
def test_hint_storage_class_added(name: str, new: StorageClass, want: QueueingHint) -> None:
    assert VolumeZone.is_schedulable_after_storage_class_added(pod_with_volume("PVC_1"), None, new) == want


@pytest.mark.parametrize("name,old,new,want", [
    ("new-pv-was-added", None, pv("Vol_1", **{BETA_ZONE: "us-west1-b"}), QueueingHint.QUEUE),
    ("pv-was-updated-and-changed-topology", pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
     pv("Vol_1", **{BETA_ZONE: "us-west1-b"}), QueueingHint.QUEUE),
    ("pv-was-updated-and-added-topology-label", pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
     pv("Vol_1", **{BETA_ZONE: "us-west1-a", ZONE: "zone"}), QueueingHint.QUEUE),
    ("pv-was-updated-but-no-topology-is-changed", pv("Vol_1", **{BETA_ZONE: "us-west1-a", ZONE: "zone"}),
     pv("Vol_1", **{BETA_ZONE: "us-west1-a", ZONE: "zone"}), QueueingHint.QUEUE_SKIP),
    ("pv-was-updated-other-labels", pv("Vol_1", **{ZONE: "zone"}), pv("Vol_1", **{ZONE: "zone", "x": "y"}),
     QueueingHint.QUEUE_SKIP),
])
def test_hint_pv(name: str, old: Any, new: Any, want: QueueingHint) -> None:
    assert VolumeZone.is_schedulable_after_pv_change(pod_with_volume("PVC_1"), old, new) == want


@pytest.mark.parametrize("fn,old,new", [
    (VolumeZone.is_schedulable_after_pvc_change, None, "not-a-pvc"),
    (VolumeZone.is_schedulable_after_storage_class_added, None, "not-a-storageclass"),
    (VolumeZone.is_schedulable_after_pv_change, None, "not-a-pv"),
    (VolumeZone.is_schedulable_after_pv_change, "not-a-pv", pv("Vol_1")),
])
def test_hint_wrong_objects(fn: Any, old: Any, new: Any) -> None:
    with pytest.raises(TypeError):
        fn(pod_with_volume("PVC_1"), old, new)
