"""NodeVolumeLimits (CSI limits): cases ported from upstream's nodevolumelimits/csi_test.go (the
VolumeAttachment cases are left out: the embedded API has no VolumeAttachment kind)."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from ksched.client.informer import Indexer
from ksched.scheduler.framework.events import ActionType, EventResource, QueueingHint
from ksched.scheduler.framework.status import Code
from ksched.scheduler.plugins.nodevolumelimits import (
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    MIGRATED_PLUGINS_ANNOTATION,
    NodeVolumeLimits,
)
from ksched.testing import PluginRunner, make_pod

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
EBS_IN_TREE = "kubernetes.io/aws-ebs"
HOSTPATH_IN_TREE = "kubernetes.io/hostpath"
SC_NAME = "csi-sc"
NODE = "node-for-max-pd-test-1"
EXCEEDED = (Code.UNSCHEDULABLE, (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,))


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


def pvc_obj(name: str, ns: str = "default", sc: str | None = None, volume_name: str = "",
            owner: tuple[str, str] | None = None) -> PersistentVolumeClaim:
    md: dict[str, Any] = {"name": name, "namespace": ns}
    if owner:
        md["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner[0], "uid": owner[1],
                                  "controller": True}]
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if sc is not None:
        spec["storageClassName"] = sc
    if volume_name:
        spec["volumeName"] = volume_name
    return PersistentVolumeClaim({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": md, "spec": spec})


def fake_pvs(prefix: str, *drivers: str) -> list[PersistentVolume]:
    """Four volumes per driver, named (and with handles) ``<prefix>-<driver>-<i>``."""
    out = []
    for d in drivers:
        for j in range(4):
            h = f"{prefix}-{d}-{j}"
            if d == EBS_IN_TREE:
                src: dict[str, Any] = {"awsElasticBlockStore": {"volumeID": h}}
            elif d == HOSTPATH_IN_TREE:
                src = {"hostPath": {"path": "/tmp"}}
            else:
                src = {"csi": {"driver": d, "volumeHandle": h}}
            out.append(PersistentVolume({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": h},
                                         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                                  **src}}))
    return out


def fake_pvcs(prefix: str, *drivers: str) -> list[PersistentVolumeClaim]:
    out = [pvc_obj(f"{prefix}-{d}-{j}", volume_name=f"{prefix}-{d}-{j}") for d in drivers for j in range(4)]
    out.append(pvc_obj(f"{prefix}-4", sc=SC_NAME))
    out.append(pvc_obj(f"{prefix}-5"))
    out.append(pvc_obj(f"{prefix}-6", sc=SC_NAME, volume_name="missing-in-action"))  # PV missing, class there
    return out


def csinode(limit_source: str, max_vols: int, drivers: list[str], migrated: bool) -> CSINode | None:
    if limit_source not in ("csinode", "csinode-with-no-limit", "no-csi-driver"):
        return None
    ds = []
    if limit_source != "no-csi-driver":
        for d in drivers:
            entry: dict[str, Any] = {"name": d, "nodeID": NODE}
            if limit_source == "csinode":
                entry["allocatable"] = {"count": max_vols}
            ds.append(entry)
    md: dict[str, Any] = {"name": NODE}
    if migrated:
        md["annotations"] = {MIGRATED_PLUGINS_ANNOTATION: EBS_IN_TREE}
    return CSINode({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": md,
                    "spec": {"drivers": ds}})


def node() -> Node:
    return Node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}, "status": {"allocatable": {}}})


def pvc_pod(*claims: str, name: str = "pod") -> Pod:
    return make_pod(name, volumes=[{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                                   for i, c in enumerate(claims)])


def on_node(p: Pod) -> Pod:
    raw = dict(p.raw)
    raw["spec"] = {**raw["spec"], "nodeName": NODE}
    return Pod(raw)


def ebs_inline(volume_id: str) -> dict[str, Any]:
    return {"name": "inline", "awsElasticBlockStore": {"volumeID": volume_id}}


RUNNING = pvc_pod("csi-ebs.csi.aws.com-3", name="running")
PENDING = pvc_pod("csi-4", name="pending")
UNBOUND_2 = pvc_pod("csi-4", name="unbound2")
MISSING_PV = pvc_pod("csi-6", name="missing-pv")
NO_SC = pvc_pod("csi-5", name="no-sc")
GCE_TWO = pvc_pod("csi-pd.csi.storage.gke.io-1", "csi-pd.csi.storage.gke.io-2", name="gce-two")
IN_TREE_ONE = pvc_pod("csi-kubernetes.io/aws-ebs-0", name="in-tree-one")
IN_TREE_TWO = pvc_pod("csi-kubernetes.io/aws-ebs-1", "csi-kubernetes.io/aws-ebs-2", name="in-tree-two")
EBS_ONE = pvc_pod("csi-ebs.csi.aws.com-0", name="ebs-one")
EBS_TWO = pvc_pod("csi-ebs.csi.aws.com-1", "csi-ebs.csi.aws.com-2", name="ebs-two")
NON_MIGRATABLE = pvc_pod("csi-kubernetes.io/hostpath-0", name="hostpath")
EPHEMERAL = make_pod("abc", "test", uid="12345", volumes=[{"name": "xyz", "ephemeral": {}}])
EPHEMERAL_CLAIM = pvc_obj("abc-xyz", ns="test", sc=SC_NAME, owner=("abc", "12345"))
CONFLICTING_CLAIM = pvc_obj("abc-xyz", ns="test", sc=SC_NAME)
EPHEMERAL_TWO = make_pod("abc", "test", uid="12345II", volumes=[{"name": "x", "ephemeral": {}},
                                                                 {"name": "y", "ephemeral": {}}])
EPHEMERAL_X = pvc_obj("abc-x", ns="test", sc=SC_NAME, owner=("abc", "12345II"))
EPHEMERAL_Y = pvc_obj("abc-y", ns="test", sc=SC_NAME, owner=("abc", "12345II"))
INLINE = make_pod("inline", volumes=[ebs_inline("aws-inline1")])
INLINE_SAME_ID = make_pod("inline-same", volumes=[ebs_inline("csi-ebs.csi.aws.com-1")])
ONLY_CM_SECRET = make_pod("cm", volumes=[{"name": "a", "configMap": {"name": "x"}},
                                         {"name": "b", "secret": {"secretName": "y"}}])
PVC_CM_SECRET = make_pod("pvc-cm", volumes=[{"name": "a", "configMap": {"name": "x"}},
                                            {"name": "b", "secret": {"secretName": "y"}},
                                            {"name": "c", "persistentVolumeClaim": {"claimName": "csi-ebs.csi.aws.com-0"}}])
EPHEMERAL_CM_SECRET = make_pod("abc", "test", volumes=[{"name": "a", "configMap": {"name": "x"}},
                                                       {"name": "b", "secret": {"secretName": "y"}},
                                                       {"name": "xyz", "ephemeral": {}}])
INLINE_CM_SECRET = make_pod("inline-cm", volumes=[{"name": "a", "configMap": {"name": "x"}},
                                                  {"name": "b", "secret": {"secretName": "y"}},
                                                  ebs_inline("aws-inline1")])
MIGRATION = [EBS_IN_TREE, EBS]

CASES: list[tuple[str, Pod, list[Pod], list[PersistentVolumeClaim], int, list[str], bool, str, Any, Any]] = [
    # (test, new pod, existing pods, extra claims, max vols, drivers, migration, limit source, want, want prefilter)
    ("fits when node volume limit >= new pods CSI volume", EBS_ONE, [RUNNING, EBS_TWO], [], 4, [EBS], False,
     "csinode", None, None),
    ("doesn't when node volume limit <= pods CSI volume", EBS_ONE, [RUNNING, EBS_TWO], [], 2, [EBS], False,
     "csinode", EXCEEDED, None),
    ("should when driver does not support volume limits", EBS_ONE, [RUNNING, EBS_TWO], [], 2, [EBS], False,
     "csinode-with-no-limit", None, None),
    ("count pending PVCs towards volume limit <= pods CSI volume", EBS_ONE, [PENDING, EBS_TWO], [], 2, [EBS], False,
     "csinode", EXCEEDED, None),
    ("count multiple pending pvcs towards volume limit >= pods CSI volume", EBS_ONE, [PENDING, UNBOUND_2, EBS_TWO], [],
     4, [EBS], False, "csinode", None, None),
    ("should count PVCs with invalid PV name but valid SC", EBS_ONE, [MISSING_PV, EBS_TWO], [], 2, [EBS], False,
     "csinode", EXCEEDED, None),
    ("don't count pvcs with missing SC towards volume limit", EBS_ONE, [RUNNING, NO_SC], [], 2, [EBS], False,
     "csinode", None, None),
    ("count pvcs with the same type towards volume limit", EBS_ONE, [GCE_TWO, EBS_TWO], [], 2, [EBS, GCE], False,
     "csinode", EXCEEDED, None),
    ("don't count pvcs with different type towards volume limit", GCE_TWO, [EBS_TWO, RUNNING], [], 2, [EBS, GCE],
     False, "csinode", None, None),
    ("should count in-tree volumes if migration is enabled", IN_TREE_ONE, [IN_TREE_TWO], [], 2, MIGRATION, True,
     "csinode", EXCEEDED, None),
    ("nil csi node", INLINE, [IN_TREE_TWO], [], 0, MIGRATION, True, "", None, None),
    ("should count unbound in-tree volumes if migration is enabled", PENDING, [IN_TREE_TWO], [], 2, MIGRATION, True,
     "csinode", EXCEEDED, None),
    ("should not limit pod if volume used does not report limits", IN_TREE_ONE, [IN_TREE_TWO], [], 2, MIGRATION, True,
     "csinode-with-no-limit", None, None),
    ("should not count non-migratable in-tree volumes", NON_MIGRATABLE, [EBS_TWO], [], 2,
     [HOSTPATH_IN_TREE, EBS], True, "csinode", None, None),
    ("should count in-tree inline volumes if migration is enabled", INLINE, [IN_TREE_TWO], [], 2, MIGRATION, True,
     "csinode", EXCEEDED, None),
    ("should count in-tree and csi volumes if migration is enabled (when scheduling in-tree volumes)", IN_TREE_ONE,
     [EBS_TWO], [], 2, MIGRATION, True, "csinode", EXCEEDED, None),
    ("should count in-tree, inline and csi volumes if migration is enabled (when scheduling in-tree volumes)", INLINE,
     [EBS_TWO, IN_TREE_ONE], [], 3, MIGRATION, True, "csinode", EXCEEDED, None),
    ("should not count in-tree, inline and csi volumes if migration is enabled (when scheduling in-tree volumes)",
     INLINE_SAME_ID, [EBS_TWO, IN_TREE_ONE], [], 3, MIGRATION, True, "csinode", None, None),
    ("should count in-tree and csi volumes if migration is enabled (when scheduling csi volumes)", EBS_ONE,
     [IN_TREE_TWO], [], 2, MIGRATION, True, "csinode", EXCEEDED, None),
    ("ephemeral volume missing", EPHEMERAL, [], [], 0, [EBS], False, "csinode-with-no-limit",
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',)),
     None),
    ("ephemeral volume not owned", EPHEMERAL, [], [CONFLICTING_CLAIM], 0, [EBS], False, "csinode-with-no-limit",
     (Code.ERROR, ("PVC test/abc-xyz was not created for pod test/abc (pod is not owner)",)), None),
    ("ephemeral volume unbound", EPHEMERAL, [], [EPHEMERAL_CLAIM], 0, [EBS], False, "csinode-with-no-limit", None,
     None),
    ("ephemeral doesn't when node volume limit <= pods CSI volume", EPHEMERAL, [RUNNING, EBS_TWO], [EPHEMERAL_CLAIM],
     2, [EBS], False, "csinode", EXCEEDED, None),
    ("ephemeral doesn't when node volume limit <= pods ephemeral CSI volume", EBS_ONE, [RUNNING, EPHEMERAL_TWO],
     [EPHEMERAL_X, EPHEMERAL_Y], 2, [EBS], False, "csinode", EXCEEDED, None),
    ("persistent doesn't when node volume limit <= pods ephemeral CSI volume + persistent volume", EBS_ONE,
     [RUNNING, EPHEMERAL, EBS_TWO], [EPHEMERAL_CLAIM], 3, [EBS], False, "csinode", EXCEEDED, None),
    ("persistent okay when node volume limit > pods ephemeral CSI volume + persistent volume", EBS_ONE,
     [RUNNING, EPHEMERAL, EBS_TWO], [EPHEMERAL_CLAIM], 5, [EBS], False, "csinode", None, None),
    ("skip Filter when the pod only uses secrets and configmaps", ONLY_CM_SECRET, [], [], 2, [EBS], False, "csinode",
     None, (Code.SKIP, ())),
    ("don't skip Filter when the pod has pvcs", PVC_CM_SECRET, [], [], 2, [EBS], False, "csinode", None, None),
    ("don't skip Filter when the pod has ephemeral volumes", EPHEMERAL_CM_SECRET, [], [], 0, [EBS], False,
     "csinode-with-no-limit",
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',)),
     None),
    ("don't skip Filter when the pod has inline migratable volumes", INLINE_CM_SECRET, [IN_TREE_TWO], [], 2,
     MIGRATION, True, "csinode", EXCEEDED, None),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_csi_limits(case: tuple[Any, ...]) -> None:
    _, new_pod, existing, extra, max_vols, drivers, migration, source, want, want_pre = case
    cn = csinode(source, max_vols, drivers, migration)
    sc = StorageClass({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": SC_NAME},
                       "provisioner": drivers[0]})
    objs: list[Any] = [*fake_pvs("csi", *drivers), *fake_pvcs("csi", *drivers), *extra, sc]
    if cn is not None:
        objs.append(cn)
    r = PluginRunner(["NodeVolumeLimits"], [node()], [on_node(p) for p in existing], informers=FakeInformers(*objs))
    state, _, pre = r.pre_filter(new_pod)
    assert pre is None
    skipped = "NodeVolumeLimits" in state.skip_filter_plugins
    if want_pre is not None:
        assert want_pre == (Code.SKIP, ()) and skipped
        return
    assert not skipped
    ni = r.snapshot.get(NODE)
    assert ni is not None
    st = r.fw.plugins["NodeVolumeLimits"].filter(state, new_pod, ni)
    assert (None if st is None else (st.code, st.reasons)) == want


def test_shared_volume_counts_once() -> None:
    """Two pods on the node using the same claim, and a new pod using it too: one attachment."""
    objs: list[Any] = [*fake_pvs("csi", EBS), *fake_pvcs("csi", EBS), csinode("csinode", 1, [EBS], False)]
    r = PluginRunner(["NodeVolumeLimits"], [node()],
                     [on_node(pvc_pod("csi-ebs.csi.aws.com-0", name="a")),
                      on_node(pvc_pod("csi-ebs.csi.aws.com-0", name="b"))], informers=FakeInformers(*objs))
    assert r.filter(pvc_pod("csi-ebs.csi.aws.com-0", name="c"))[NODE] is None
    st = r.filter(pvc_pod("csi-ebs.csi.aws.com-1", name="d"))[NODE]
    assert st is not None and (st.code, st.reasons) == EXCEEDED


def test_in_tree_not_counted_without_migration_annotation() -> None:
    objs: list[Any] = [*fake_pvs("csi", *MIGRATION), *fake_pvcs("csi", *MIGRATION),
                       csinode("csinode", 2, MIGRATION, False)]
    r = PluginRunner(["NodeVolumeLimits"], [node()], [on_node(IN_TREE_TWO)], informers=FakeInformers(*objs))
    assert r.filter(IN_TREE_ONE)[NODE] is None


# ---- queueing hints ------------------------------------------------------------------------

def test_events_to_register() -> None:
    evs = {(e.event.resource, e.event.action): e.hint is not None
           for e in NodeVolumeLimits({}, None).events_to_register()}
    assert evs == {
        (EventResource.CSI_NODE, ActionType.ADD): False,
        (EventResource.CSI_NODE, ActionType.UPDATE): True,
        (EventResource.ASSIGNED_POD, ActionType.DELETE): True,
        (EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD): True,
    }


POD_EBS = pvc_pod("csi-ebs.csi.aws.com-2")


@pytest.mark.parametrize("name,deleted,scheduled,want", [
    ("return a Queue when a deleted pod has a PVC", pvc_pod("placeholder", name="d"), True, QueueingHint.QUEUE),
    ("return a Queue when a deleted pod has a inline migratable volume",
     make_pod("d", volumes=[{"name": "v", "awsElasticBlockStore": {}}]), True, QueueingHint.QUEUE),
    ("return a QueueSkip when a deleted pod doesn't have any volume", make_pod("d"), True, QueueingHint.QUEUE_SKIP),
    ("return a QueueSkip when a deleted pod is not scheduled.", pvc_pod("csi-ebs.csi.aws.com-0", name="d"), False,
     QueueingHint.QUEUE_SKIP),
    ("return a Queue when a deleted pod has an ephemeral volume",
     make_pod("d", volumes=[{"name": "v", "ephemeral": {}}]), True, QueueingHint.QUEUE),
    ("return a QueueSkip when a deleted pod has only a configmap",
     make_pod("d", volumes=[{"name": "v", "configMap": {"name": "x"}}]), True, QueueingHint.QUEUE_SKIP),
])
def test_hint_assigned_pod_deleted(name: str, deleted: Pod, scheduled: bool, want: QueueingHint) -> None:
    d = on_node(deleted) if scheduled else deleted
    assert NodeVolumeLimits.is_schedulable_after_assigned_pod_deleted(POD_EBS, d, None) == want


@pytest.mark.parametrize("name,pod,added,want", [
    ("a pod isn't in the same namespace as an added PVC", make_pod("p", "ns1"), pvc_obj("pvc1", ns="ns2"),
     QueueingHint.QUEUE_SKIP),
    ("a pod is in the same namespace as an added PVC",
     make_pod("p", "ns1", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "pvc1"}}]),
     pvc_obj("pvc1", ns="ns1"), QueueingHint.QUEUE),
    ("a pod has an ephemeral volume related to an added PVC",
     make_pod("pod1", "ns1", volumes=[{"name": "ephemeral", "ephemeral": {}}]), pvc_obj("pod1-ephemeral", ns="ns1"),
     QueueingHint.QUEUE),
    ("a pod doesn't have the same PVC as an added PVC",
     make_pod("p", "ns1", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "pvc1"}}]),
     pvc_obj("pvc2", ns="ns1"), QueueingHint.QUEUE_SKIP),
    ("a pod doesn't have any PVC attached", make_pod("p", "ns1"), pvc_obj("pvc2", ns="ns1"), QueueingHint.QUEUE_SKIP),
])
def test_hint_pvc_added(name: str, pod: Pod, added: PersistentVolumeClaim, want: QueueingHint) -> None:
    assert NodeVolumeLimits.is_schedulable_after_pvc_added(pod, None, added) == want


def _cn(**limits: int | None) -> CSINode:
    ds = []
    for d, c in limits.items():
        e: dict[str, Any] = {"name": d, "nodeID": NODE}
        if c is not None:
            e["allocatable"] = {"count": c}
        ds.append(e)
    return CSINode({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": NODE},
                    "spec": {"drivers": ds}})


@pytest.mark.parametrize("name,old,new,want", [
    ("limit raised", _cn(a=1), _cn(a=2), QueueingHint.QUEUE),
    ("limit lowered", _cn(a=2), _cn(a=1), QueueingHint.QUEUE_SKIP),
    ("limit unchanged", _cn(a=2, b=1), _cn(a=2, b=1), QueueingHint.QUEUE_SKIP),
    ("limit removed", _cn(a=2), _cn(a=None), QueueingHint.QUEUE),
    ("driver removed", _cn(a=2, b=1), _cn(a=2), QueueingHint.QUEUE),
    ("driver added", _cn(a=2), _cn(a=2, b=1), QueueingHint.QUEUE_SKIP),
])
def test_hint_csinode_updated(name: str, old: CSINode, new: CSINode, want: QueueingHint) -> None:
    assert NodeVolumeLimits.is_schedulable_after_csinode_updated(POD_EBS, old, new) == want


def test_message() -> None:
    assert ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED == "node(s) exceed max volume count"
