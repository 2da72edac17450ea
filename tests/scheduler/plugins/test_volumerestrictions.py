"""VolumeRestrictions: cases ported from upstream's volume_restrictions_test.go (v1.3x, with the
ReadWriteOncePod message and AssignedPod/Delete hint of 1.36)."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.pod import Pod
from ksched.api.storage import PersistentVolumeClaim
from ksched.client.informer import Indexer
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ActionType, EventResource, QueueingHint
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import PodInfo
from ksched.scheduler.plugins.volumerestrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    VolumeRestrictions,
)
from ksched.testing import PluginRunner, make_node, make_pod


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


def pvc(name: str, *modes: str, ns: str = "default") -> PersistentVolumeClaim:
    return PersistentVolumeClaim({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                  "metadata": {"name": name, "namespace": ns},
                                  "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": "1Gi"}}}})


def pod_with(name: str = "pod", *volumes: dict[str, Any], node: str = "", ns: str = "default") -> Pod:
    return make_pod(name, ns, node_name=node, volumes=[{"name": f"v{i}", **v} for i, v in enumerate(volumes)])


def claim(name: str) -> dict[str, Any]:
    return {"persistentVolumeClaim": {"claimName": name}}


DISK = ERR_REASON_DISK_CONFLICT
SKIP = "skip"


def run(pod: Pod, existing: list[Pod], informers: Any = None) -> tuple[Status | None, Status | None]:
    """(PreFilter status, Filter status on node-1 holding ``existing``)."""
    r = PluginRunner(["VolumeRestrictions"], [make_node("node-1")], existing, informers=informers or FakeInformers())
    state, _, st = r.pre_filter(pod)
    pl = r.fw.plugins["VolumeRestrictions"]
    if st is not None:
        return st, None
    if "VolumeRestrictions" in state.skip_filter_plugins:
        return Status.skip(), None
    ni = r.snapshot.get("node-1")
    assert ni is not None
    return None, pl.filter(state, pod, ni)


# ---- same-disk conflicts -------------------------------------------------------------------

GCE_FOO = {"gcePersistentDisk": {"pdName": "foo"}}
GCE_BAR = {"gcePersistentDisk": {"pdName": "bar"}}
EBS_FOO = {"awsElasticBlockStore": {"volumeID": "foo"}}
EBS_BAR = {"awsElasticBlockStore": {"volumeID": "bar"}}
RBD_AB = {"rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
RBD_CD = {"rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
ISCSI_1 = {"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01",
                     "fsType": "ext4", "lun": 0}}
ISCSI_2 = {"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2017-12.server:storage.target01",
                     "fsType": "ext4", "lun": 0}}


@pytest.mark.parametrize("kind,same,different", [
    ("gce", GCE_FOO, GCE_BAR),
    ("aws", EBS_FOO, EBS_BAR),
    ("rbd", RBD_AB, RBD_CD),
    ("iscsi", ISCSI_1, ISCSI_2),
])
@pytest.mark.parametrize("case,pod_vols,existing_vols,want_pre,want", [
    ("nothing", [], None, SKIP, None),
    ("one state", [], "same", SKIP, None),
    ("same state", ["same"], "same", None, DISK),
    ("different state", ["different"], "same", None, None),
])
def test_disk_conflicts(kind: str, same: dict[str, Any], different: dict[str, Any], case: str,
                        pod_vols: list[str], existing_vols: str | None, want_pre: str | None, want: str | None) -> None:
    vols = {"same": same, "different": different}
    pod = pod_with("pod", *(vols[v] for v in pod_vols))
    existing = [pod_with("existing", vols[existing_vols], node="node-1")] if existing_vols else []
    pre, st = run(pod, existing)
    if want_pre == SKIP:
        assert pre is not None and pre.code == Code.SKIP
        return
    assert pre is None
    if want is None:
        assert st is None
    else:
        assert st is not None and st.code == Code.UNSCHEDULABLE and st.reasons == (want,)


def test_volume_without_restrictions_is_skipped() -> None:
    pre, _ = run(pod_with("pod", {"emptyDir": {}}), [])
    assert pre is not None and pre.code == Code.SKIP


@pytest.mark.parametrize("mine,theirs,conflict", [
    ({"gcePersistentDisk": {"pdName": "foo", "readOnly": True}},
     {"gcePersistentDisk": {"pdName": "foo", "readOnly": True}}, False),
    ({"gcePersistentDisk": {"pdName": "foo", "readOnly": True}}, {"gcePersistentDisk": {"pdName": "foo"}}, True),
    ({"awsElasticBlockStore": {"volumeID": "foo", "readOnly": True}},
     {"awsElasticBlockStore": {"volumeID": "foo", "readOnly": True}}, True),  # EBS: never twice
    ({"iscsi": {"iqn": "x", "readOnly": True}}, {"iscsi": {"iqn": "x", "readOnly": True}}, False),
    ({"iscsi": {"iqn": "x"}}, {"iscsi": {"iqn": "x", "readOnly": True}}, True),
    ({"rbd": {"monitors": ["a"], "pool": "p", "image": "i", "readOnly": True}},
     {"rbd": {"monitors": ["a", "z"], "pool": "p", "image": "i", "readOnly": True}}, False),
    ({"rbd": {"monitors": ["a"], "pool": "p", "image": "i"}},
     {"rbd": {"monitors": ["z", "a"], "pool": "p", "image": "i"}}, True),
    ({"rbd": {"monitors": ["a"], "pool": "p", "image": "i"}},
     {"rbd": {"monitors": ["a"], "pool": "q", "image": "i"}}, False),
    ({"gcePersistentDisk": {"pdName": "foo"}}, {"awsElasticBlockStore": {"volumeID": "foo"}}, False),
])
def test_read_only_rules(mine: dict[str, Any], theirs: dict[str, Any], conflict: bool) -> None:
    _, st = run(pod_with("pod", mine), [pod_with("other", theirs, node="node-1")])
    assert (st is not None and st.reasons == (DISK,)) == conflict


# ---- ReadWriteOncePod ----------------------------------------------------------------------

POD_ONE_PVC = pod_with("pod-with-one-pvc", claim("claim-with-rwop-1"), node="node-1")
POD_TWO_PVCS = pod_with("pod-with-two-pvcs", claim("claim-with-rwop-1"), claim("claim-with-rwop-2"), node="node-1")
POD_ONE_CONFLICT = pod_with("pod-with-one-conflict", claim("claim-with-rwop-1"))
POD_TWO_CONFLICTS = pod_with("pod-with-two-conflicts", claim("claim-with-rwop-1"), claim("claim-with-rwop-2"))
POD_RWX = pod_with("pod-with-rwx", claim("claim-with-rwx"), node="node-1")
RWOP_1 = pvc("claim-with-rwop-1", "ReadWriteOncePod")
RWOP_2 = pvc("claim-with-rwop-2", "ReadWriteOncePod")
RWX = pvc("claim-with-rwx", "ReadWriteMany")
RWOP_MSG = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by "
            "another pod")


def test_messages_are_upstreams() -> None:
    assert ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT == RWOP_MSG
    assert ERR_REASON_DISK_CONFLICT == "node(s) had no available disk"


@pytest.mark.parametrize("name,pod,existing,pvcs,want_pre,want", [
    ("nothing", make_pod("p"), [], [], (Code.SKIP, ()), None),
    ("failed to get PVC", pod_with("p", claim("claim-with-rwop-1")), [], [],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('persistentvolumeclaim "claim-with-rwop-1" not found',)), None),
    ("no access mode conflict", pod_with("p", claim("claim-with-rwop-1")), [POD_RWX], [RWOP_1, RWX],
     (Code.SKIP, ()), None),
    ("access mode conflict, unschedulable", POD_ONE_CONFLICT, [POD_ONE_PVC, POD_RWX], [RWOP_1, RWX], None,
     (Code.UNSCHEDULABLE, (RWOP_MSG,))),
    ("two conflicts, unschedulable", POD_TWO_CONFLICTS, [POD_TWO_PVCS, POD_RWX], [RWOP_1, RWOP_2, RWX], None,
     (Code.UNSCHEDULABLE, (RWOP_MSG,))),
])
def test_access_mode_conflicts(name: str, pod: Pod, existing: list[Pod], pvcs: list[PersistentVolumeClaim],
                               want_pre: tuple[Code, tuple[str, ...]] | None,
                               want: tuple[Code, tuple[str, ...]] | None) -> None:
    pre, st = run(pod, existing, FakeInformers(*pvcs))
    if want_pre is not None:
        assert pre is not None and (pre.code, pre.reasons) == want_pre
        return
    assert pre is None
    if want is None:
        assert st is None
    else:
        assert st is not None and (st.code, st.reasons) == want


def test_rwop_conflict_is_cluster_wide() -> None:
    """The claim in use on another node rejects the pod on every node (preemption may help)."""
    holder = pod_with("holder", claim("claim-with-rwop-1"), node="node-2")
    r = PluginRunner(["VolumeRestrictions"], [make_node("node-1"), make_node("node-2")], [holder],
                     informers=FakeInformers(RWOP_1))
    got = r.filter(POD_ONE_CONFLICT)
    assert {n: (s.code, s.reasons) if s else None for n, s in got.items()} == {
        "node-1": (Code.UNSCHEDULABLE, (RWOP_MSG,)), "node-2": (Code.UNSCHEDULABLE, (RWOP_MSG,))}


def test_prefilter_extensions_track_rwop_users() -> None:
    """Removing the pod that holds the claim (a preemption victim) clears the conflict; adding
    it back (or a nominated pod using the claim) brings it back; clones are independent."""
    r = PluginRunner(["VolumeRestrictions"], [make_node("node-1")], [POD_ONE_PVC], informers=FakeInformers(RWOP_1))
    state, _, st = r.pre_filter(POD_ONE_CONFLICT)
    assert st is None
    pl = r.fw.plugins["VolumeRestrictions"]
    ni = r.snapshot.get("node-1")
    assert ni is not None
    assert pl.filter(state, POD_ONE_CONFLICT, ni) is not None
    clone = state.clone()
    assert pl.remove_pod(clone, POD_ONE_CONFLICT, PodInfo(POD_ONE_PVC), ni) is None
    assert pl.filter(clone, POD_ONE_CONFLICT, ni) is None
    assert pl.filter(state, POD_ONE_CONFLICT, ni) is not None  # the original is untouched
    assert pl.add_pod(clone, POD_ONE_CONFLICT, PodInfo(POD_ONE_PVC), ni) is None
    assert pl.filter(clone, POD_ONE_CONFLICT, ni) is not None


def test_filter_without_prefilter_state_is_an_error() -> None:
    pl = VolumeRestrictions({}, None)
    r = PluginRunner(["VolumeRestrictions"], [make_node("node-1")])
    ni = r.snapshot.get("node-1")
    assert ni is not None
    st = pl.filter(CycleState(), make_pod("p"), ni)
    assert st is not None and st.code == Code.ERROR


# ---- queueing hints ------------------------------------------------------------------------

def test_events_to_register() -> None:
    evs = {(e.event.resource, e.event.action): e.hint is not None
           for e in VolumeRestrictions({}, None).events_to_register()}
    assert evs == {
        (EventResource.ASSIGNED_POD, ActionType.DELETE): True,
        (EventResource.NODE, ActionType.ADD): False,
        (EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD): True,
    }


@pytest.mark.parametrize("name,pod,added,want", [
    ("pvc the pod uses", pod_with("p", claim("pvc1")), pvc("pvc1", "ReadWriteOncePod"), QueueingHint.QUEUE),
    ("other namespace", pod_with("p", claim("pvc1")), pvc("pvc1", "ReadWriteOncePod", ns="ns2"),
     QueueingHint.QUEUE_SKIP),
    ("unrelated pvc", pod_with("p", claim("pvc1")), pvc("pvc2", "ReadWriteOncePod"), QueueingHint.QUEUE_SKIP),
    ("pod without pvc", make_pod("p"), pvc("pvc1", "ReadWriteOncePod"), QueueingHint.QUEUE_SKIP),
])
def test_hint_pvc_added(name: str, pod: Pod, added: PersistentVolumeClaim, want: QueueingHint) -> None:
    assert VolumeRestrictions.is_schedulable_after_pvc_added(pod, None, added) == want


@pytest.mark.parametrize("name,pod,deleted,want", [
    ("conflicting disk freed", pod_with("p", GCE_FOO), pod_with("d", GCE_FOO, node="node-1"), QueueingHint.QUEUE),
    ("different disk", pod_with("p", GCE_FOO), pod_with("d", GCE_BAR, node="node-1"), QueueingHint.QUEUE_SKIP),
    ("shared claim freed", pod_with("p", claim("c")), pod_with("d", claim("c"), node="node-1"), QueueingHint.QUEUE),
    ("other claim", pod_with("p", claim("c")), pod_with("d", claim("e"), node="node-1"), QueueingHint.QUEUE_SKIP),
    ("other namespace", pod_with("p", claim("c")), pod_with("d", claim("c"), node="node-1", ns="other"),
     QueueingHint.QUEUE_SKIP),
    ("no volumes", pod_with("p", claim("c")), make_pod("d", node_name="node-1"), QueueingHint.QUEUE_SKIP),
])
def test_hint_assigned_pod_deleted(name: str, pod: Pod, deleted: Pod, want: QueueingHint) -> None:
    assert VolumeRestrictions.is_schedulable_after_assigned_pod_deleted(pod, deleted, None) == want


def test_hint_with_wrong_object_raises() -> None:
    with pytest.raises(TypeError):
        VolumeRestrictions.is_schedulable_after_pvc_added(make_pod("p"), None, "not-a-pvc")
