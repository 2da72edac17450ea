"""VolumeBinding: upstream's volume_binding_test.go and binder_test.go tables (FindPodVolumes with
and without provisioning, plugin PreFilter/Filter/Score), assume/revert, PreBind against the
embedded store and its PV controller, queueing hints, and whole scheduling runs."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import Indexer, InformerFactory
from ksched.clock import RealClock, VirtualClock
from ksched.controllers.manager import ControllerManager
from ksched.scheduler.config import parse_configuration
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.events import ActionType, EventResource, QueueingHint
from ksched.scheduler.framework.status import Code, WaitUntil
from ksched.scheduler.plugins.volumebinding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_PV_NOT_EXIST,
    ERR_REASON_UNBOUND_IMMEDIATE,
    VolumeBinding,
    broken_linear,
)
from ksched.scheduler.plugins.volumebinding.binder import VolumeBindingError
from ksched.scheduler.scheduler import Scheduler
from ksched.sim.cluster import EmbeddedCluster
from ksched.testing import PluginRunner, make_node, make_pod

NODE_KEY = "nodeKey"
PROVISIONER = "test-provisioner"
WAIT = "waitClass"
IMMEDIATE = "immediateClass"
WAIT_PROV = "waitClassWithProvisioner"
TOPO_MISMATCH = "topoMismatchClass"


# ---- fakes and builders -------------------------------------------------------------------

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
            self.add(o)

    def informer(self, kind: str, **_: Any) -> FakeInformer:
        return self.by_kind.setdefault(kind, FakeInformer())

    def add(self, o: Any) -> None:
        self.informer(o.KIND).indexer.upsert(o)


class Handle:
    def __init__(self, informers: Any, client: Any = None, clock: Any = None) -> None:
        self.informers = informers
        self.client = client
        self.clock = clock


def sc(name: str, mode: str = "WaitForFirstConsumer", provisioner: str = "kubernetes.io/no-provisioner",
       allowed: list[str] | None = None) -> StorageClass:
    raw: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                           "provisioner": provisioner, "volumeBindingMode": mode}
    if allowed is not None:
        raw["allowedTopologies"] = [{"matchLabelExpressions": [{"key": NODE_KEY, "values": allowed}]}]
    return StorageClass(raw)


CLASSES = [sc(WAIT_PROV, provisioner=PROVISIONER, allowed=["node1", "reference-value"]),
           sc(IMMEDIATE, mode="Immediate"), sc(WAIT), sc(TOPO_MISMATCH, provisioner=PROVISIONER,
                                                         allowed=["reference-value"])]


def pvc(name: str, size: str = "1G", cls: str | None = WAIT, *, state: str = "unbound", pv_name: str = "",
        node: str = "", rv: str = "1", ns: str = "testns", uid: str = "pvc-uid",
        modes: tuple[str, ...] = ()) -> PersistentVolumeClaim:
    """upstream's makeTestPVC: unbound / prebound / bound / selected-node."""
    md: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid, "resourceVersion": rv, "annotations": {}}
    spec: dict[str, Any] = {"resources": {"requests": {"storage": size}}, "volumeMode": "Filesystem",
                            "accessModes": list(modes)}
    if cls is not None:
        spec["storageClassName"] = cls
    if state == "selected-node":
        md["annotations"]["volume.kubernetes.io/selected-node"] = node
    if state == "bound":
        md["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    if state in ("bound", "prebound"):
        spec["volumeName"] = pv_name
    return PersistentVolumeClaim({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": md, "spec": spec})


def pv(name: str, node: str = "", capacity: str = "1G", rv: str = "1", bound_to: PersistentVolumeClaim | None = None,
       cls: str = WAIT, *, affinity: dict[str, list[str]] | None = None, phase: str = "Available",
       modes: tuple[str, ...] = ()) -> PersistentVolume:
    """upstream's makeTestPV (node affinity on nodeKey)."""
    md: dict[str, Any] = {"name": name, "resourceVersion": rv}
    spec: dict[str, Any] = {"capacity": {"storage": capacity}, "storageClassName": cls, "volumeMode": "Filesystem",
                            "accessModes": list(modes)}
    terms = affinity if affinity is not None else ({NODE_KEY: [node]} if node else None)
    if terms:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": k, "operator": "In", "values": v} for k, v in terms.items()]}]}}
    if bound_to is not None:
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "name": bound_to.name,
                            "namespace": bound_to.namespace, "uid": bound_to.uid,
                            "resourceVersion": bound_to.resource_version}
        md["annotations"] = {"pv.kubernetes.io/bound-by-controller": "yes"}
    return PersistentVolume({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": md, "spec": spec,
                             "status": {"phase": phase}})


def claims_pod(*claims: PersistentVolumeClaim, name: str = "test-pod", ns: str = "testns",
             volumes: list[dict[str, Any]] | None = None) -> Pod:
    vols = [{"name": c.name, "persistentVolumeClaim": {"claimName": c.name}} for c in claims]
    return make_pod(name, ns, uid=f"{name}-uid", volumes=vols + (volumes or []))


def node(name: str, **labels: str) -> Node:
    return make_node(name, labels=labels)


UNBOUND_PVC = pvc("unbound-pvc", "1G")
UNBOUND_PVC2 = pvc("unbound-pvc2", "5G")
PREBOUND_PVC = pvc("prebound-pvc", "1G", state="prebound", pv_name="pv-node1a")
BOUND_PVC = pvc("bound-pvc", "1G", state="bound", pv_name="pv-bound")
IMMEDIATE_UNBOUND = pvc("immediate-unbound-pvc", "1G", IMMEDIATE)
IMMEDIATE_BOUND = pvc("immediate-bound-pvc", "1G", IMMEDIATE, state="bound", pv_name="pv-bound-immediate")
PROVISIONED_PVC = pvc("provisioned-pvc", "1Gi", WAIT_PROV)
NO_PROVISIONER_PVC = pvc("no-provisioner-pvc", "1Gi", WAIT)
TOPO_MISMATCH_PVC = pvc("topo-mismatch-pvc", "1Gi", TOPO_MISMATCH)
SELECTED_NODE_PVC = pvc("provisioned-pvc", "1Gi", WAIT_PROV, state="selected-node", node="node1")
GENERIC_POD = make_pod("test-pod", "testns", uid="test-pod-uid", volumes=[{"name": "test-volume", "ephemeral": {}}])
CORRECT_GENERIC_PVC = PersistentVolumeClaim({
    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
    "metadata": {"name": "test-pod-test-volume", "namespace": "testns", "uid": "pvc-uid", "resourceVersion": "1",
                 "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
                 "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "test-pod", "uid": "test-pod-uid",
                                      "controller": True}]},
    "spec": {"resources": {"requests": {"storage": "1G"}}, "storageClassName": IMMEDIATE, "volumeName": "pv-bound"}})
CONFLICTING_GENERIC_PVC = PersistentVolumeClaim({**CORRECT_GENERIC_PVC.raw, "metadata": {
    k: v for k, v in CORRECT_GENERIC_PVC.raw["metadata"].items() if k != "ownerReferences"}})

PV_NODE1A = pv("pv-node1a", "node1", "5G")
PV_NODE1B = pv("pv-node1b", "node1", "10G")
PV_NODE2 = pv("pv-node2", "node2", "1G")
PV_BOUND = pv("pv-bound", "node1", "1G", bound_to=BOUND_PVC)
PV_NODE1A_BOUND = pv("pv-node1a", "node1", "5G", bound_to=UNBOUND_PVC)
PV_BOUND_IMMEDIATE = pv("pv-bound-immediate", "node1", "1G", bound_to=IMMEDIATE_BOUND, cls=IMMEDIATE)
PV_BOUND_IMMEDIATE_NODE2 = pv("pv-bound-immediate", "node2", "1G", bound_to=IMMEDIATE_BOUND, cls=IMMEDIATE)
PV_BOUND_GENERIC = pv("pv-bound", "node1", "1G", bound_to=CORRECT_GENERIC_PVC)
NODE1 = node("node1", nodeKey="node1")


def binder_for(*objs: Any) -> Any:
    return VolumeBinding({"bindTimeoutSeconds": 10}, Handle(FakeInformers(*CLASSES, *objs))).binder


def find(b: Any, pod: Pod, n: Node = NODE1) -> tuple[Any, list[str]]:
    claims = b.get_pod_volume_claims(pod)
    if claims.unbound_claims_immediate:
        raise VolumeBindingError(ERR_REASON_UNBOUND_IMMEDIATE)
    return b.find_pod_volumes(pod, claims, n)


# ---- FindPodVolumes ------------------------------------------------------------------------

NO_PROV_CASES: dict[str, dict[str, Any]] = {
    "no-volumes": {"pod": make_pod("test-pod", "testns")},
    "no-pvcs": {"pod": make_pod("test-pod", "testns", volumes=[{"name": "e", "emptyDir": {}}])},
    "pvc-not-found": {"cache_pvcs": [], "pod_pvcs": [BOUND_PVC], "fail": True},
    "bound-pvc": {"pod_pvcs": [BOUND_PVC], "pvs": [PV_BOUND]},
    "bound-pvc,pv-not-exists": {"pod_pvcs": [BOUND_PVC], "reasons": [ERR_REASON_PV_NOT_EXIST]},
    "prebound-pvc": {"pod_pvcs": [PREBOUND_PVC], "pvs": [PV_NODE1A_BOUND], "fail": True},
    "unbound-pvc,pv-same-node": {"pod_pvcs": [UNBOUND_PVC], "pvs": [PV_NODE2, PV_NODE1A, PV_NODE1B],
                                 "bindings": [("unbound-pvc", "pv-node1a")]},
    "unbound-pvc,pv-different-node": {"pod_pvcs": [UNBOUND_PVC], "pvs": [PV_NODE2],
                                      "reasons": [ERR_REASON_BIND_CONFLICT]},
    "two-unbound-pvcs": {"pod_pvcs": [UNBOUND_PVC, UNBOUND_PVC2], "pvs": [PV_NODE1A, PV_NODE1B],
                         "bindings": [("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")]},
    "two-unbound-pvcs,order-by-size": {"pod_pvcs": [UNBOUND_PVC2, UNBOUND_PVC], "pvs": [PV_NODE1A, PV_NODE1B],
                                       "bindings": [("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")]},
    "two-unbound-pvcs,partial-match": {"pod_pvcs": [UNBOUND_PVC, UNBOUND_PVC2], "pvs": [PV_NODE1A],
                                       "bindings": [("unbound-pvc", "pv-node1a")],
                                       "reasons": [ERR_REASON_BIND_CONFLICT]},
    "one-bound,one-unbound": {"pod_pvcs": [UNBOUND_PVC, BOUND_PVC], "pvs": [PV_BOUND, PV_NODE1A],
                              "bindings": [("unbound-pvc", "pv-node1a")]},
    "one-bound,one-unbound,no-match": {"pod_pvcs": [UNBOUND_PVC, BOUND_PVC], "pvs": [PV_BOUND, PV_NODE2],
                                       "reasons": [ERR_REASON_BIND_CONFLICT]},
    "one-prebound,one-unbound": {"pod_pvcs": [UNBOUND_PVC, PREBOUND_PVC], "pvs": [PV_NODE1A, PV_NODE1B],
                                 "fail": True},
    "immediate-bound-pvc": {"pod_pvcs": [IMMEDIATE_BOUND], "pvs": [PV_BOUND_IMMEDIATE]},
    "immediate-bound-pvc-wrong-node": {"pod_pvcs": [IMMEDIATE_BOUND], "pvs": [PV_BOUND_IMMEDIATE_NODE2],
                                       "reasons": [ERR_REASON_NODE_CONFLICT]},
    "immediate-unbound-pvc": {"pod_pvcs": [IMMEDIATE_UNBOUND], "fail": True},
    "immediate-unbound-pvc,delayed-mode-bound": {"pod_pvcs": [IMMEDIATE_UNBOUND, BOUND_PVC], "pvs": [PV_BOUND],
                                                 "fail": True},
    "immediate-unbound-pvc,delayed-mode-unbound": {"pod_pvcs": [IMMEDIATE_UNBOUND, UNBOUND_PVC], "fail": True},
    "generic-ephemeral,no-pvc": {"pod": GENERIC_POD, "fail": True},
    "generic-ephemeral,with-pvc": {"pod": GENERIC_POD, "cache_pvcs": [CORRECT_GENERIC_PVC],
                                   "pvs": [PV_BOUND_GENERIC]},
    "generic-ephemeral,wrong-pvc": {"pod": GENERIC_POD, "cache_pvcs": [CONFLICTING_GENERIC_PVC],
                                    "pvs": [PV_BOUND_GENERIC], "fail": True},
}

PROV_CASES: dict[str, dict[str, Any]] = {
    "one-provisioned": {"pod_pvcs": [PROVISIONED_PVC], "provisions": ["provisioned-pvc"]},
    "two-unbound-pvcs,one-matched,one-provisioned": {"pod_pvcs": [UNBOUND_PVC, PROVISIONED_PVC], "pvs": [PV_NODE1A],
                                                     "bindings": [("unbound-pvc", "pv-node1a")],
                                                     "provisions": ["provisioned-pvc"]},
    "one-bound,one-provisioned": {"pod_pvcs": [BOUND_PVC, PROVISIONED_PVC], "pvs": [PV_BOUND],
                                  "provisions": ["provisioned-pvc"]},
    "one-binding,one-selected-node": {"pod_pvcs": [BOUND_PVC, SELECTED_NODE_PVC], "pvs": [PV_BOUND],
                                      "provisions": ["provisioned-pvc"]},
    "immediate-unbound-pvc": {"pod_pvcs": [IMMEDIATE_UNBOUND], "fail": True},
    "one-immediate-bound,one-provisioned": {"pod_pvcs": [IMMEDIATE_BOUND, PROVISIONED_PVC],
                                            "pvs": [PV_BOUND_IMMEDIATE], "provisions": ["provisioned-pvc"]},
    "invalid-provisioner": {"pod_pvcs": [NO_PROVISIONER_PVC], "reasons": [ERR_REASON_BIND_CONFLICT]},
    "volume-topology-unsatisfied": {"pod_pvcs": [TOPO_MISMATCH_PVC], "reasons": [ERR_REASON_BIND_CONFLICT]},
    "selected-node-elsewhere": {"pod_pvcs": [pvc("p", "1Gi", WAIT_PROV, state="selected-node", node="node2")],
                                "reasons": [ERR_REASON_BIND_CONFLICT]},
}


@pytest.mark.parametrize("name", list(NO_PROV_CASES) + [f"prov:{n}" for n in PROV_CASES])
def test_find_pod_volumes(name: str) -> None:
    case = PROV_CASES[name[5:]] if name.startswith("prov:") else NO_PROV_CASES[name]
    pod_pvcs = case.get("pod_pvcs", [])
    cache_pvcs = case.get("cache_pvcs", pod_pvcs)
    b = binder_for(*cache_pvcs, *case.get("pvs", []))
    pod = case.get("pod") or claims_pod(*pod_pvcs)
    if case.get("fail"):
        with pytest.raises(VolumeBindingError):
            find(b, pod)
        return
    pvols, reasons = find(b, pod)
    assert sorted(reasons) == sorted(case.get("reasons", []))
    assert [(x.pvc.name, x.pv.name) for x in pvols.static_bindings] == case.get("bindings", [])
    assert [c.name for c in pvols.dynamic_provisions] == case.get("provisions", [])


def test_find_pod_volumes_bound_and_unbound_unsatisfied_reasons_in_upstream_order() -> None:
    b = binder_for(pvc("pvc-a", state="bound", pv_name="pv-a"), pvc("pvc-b"),
                   pv("pv-a", affinity={"foo": ["bar"]}))
    pod = claims_pod(pvc("pvc-a", state="bound", pv_name="pv-a"), pvc("pvc-b"))
    _, reasons = find(b, pod, node("node-a", foo="barbar"))
    assert reasons == [ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT]


@pytest.mark.parametrize("name,pvc_modes,pv_modes,matches", [
    ("access modes included", ("ReadWriteOnce",), ("ReadWriteOnce", "ReadOnlyMany"), True),
    ("access mode missing", ("ReadWriteMany",), ("ReadWriteOnce",), False),
])
def test_static_matching_checks_access_modes(name: str, pvc_modes: tuple[str, ...], pv_modes: tuple[str, ...],
                                             matches: bool) -> None:
    claim = pvc("c", modes=pvc_modes)
    b = binder_for(claim, pv("v", "node1", "5G", modes=pv_modes))
    _, reasons = find(b, claims_pod(claim))
    assert (reasons == []) == matches


@pytest.mark.parametrize("name,change,matches", [
    ("volume mode mismatch", {"volumeMode": "Block"}, False),
    ("class mismatch", {"storageClassName": "other"}, False),
    ("too small", {"capacity": {"storage": "500M"}}, False),
    ("matches", {}, True),
])
def test_static_matching_rules(name: str, change: dict[str, Any], matches: bool) -> None:
    claim = pvc("c")
    base = pv("v", "node1", "5G")
    raw = {**base.raw, "spec": {**base.raw["spec"], **change}}
    b = binder_for(claim, PersistentVolume(raw))
    _, reasons = find(b, claims_pod(claim))
    assert (reasons == []) == matches


def test_static_matching_selector_and_phase() -> None:
    claim = PersistentVolumeClaim({**pvc("c").raw, "spec": {**pvc("c").raw["spec"],
                                                             "selector": {"matchLabels": {"tier": "gold"}}}})
    gold = PersistentVolume({**pv("gold", "node1", "9G").raw,
                             "metadata": {"name": "gold", "resourceVersion": "1", "labels": {"tier": "gold"}}})
    plain = pv("plain", "node1", "2G")
    released = pv("released", "node1", "1G", phase="Released")
    b = binder_for(claim, gold, plain, released)
    pvols, reasons = find(b, claims_pod(claim))
    assert reasons == [] and [x.pv.name for x in pvols.static_bindings] == ["gold"]


def test_smallest_fitting_volume_wins() -> None:
    claim = pvc("c", "2G")
    b = binder_for(claim, pv("big", "node1", "100G"), pv("small", "node1", "3G"), pv("tiny", "node1", "1G"))
    pvols, _ = find(b, claims_pod(claim))
    assert [x.pv.name for x in pvols.static_bindings] == ["small"]


# ---- the plugin ---------------------------------------------------------------------------

WAIT_SC, WAIT_HDD = "wait-sc", "wait-hdd-sc"
PLUGIN_CLASSES = [sc("immediate-sc", mode="Immediate"), sc(WAIT_SC), sc(WAIT_HDD)]
HOST = "kubernetes.io/hostname"


def ppvc(name: str, cls: str, *, bound_pv: str = "", size: str = "1Gi", phase: str = "") -> PersistentVolumeClaim:
    raw = pvc(name, size, cls, state="bound" if bound_pv else "unbound", pv_name=bound_pv, ns="default").raw
    if phase:
        raw["status"] = {"phase": phase}
    return PersistentVolumeClaim(raw)


def ppv(name: str, cls: str, capacity: str = "1Gi", phase: str = "Available", **affinity: list[str]) -> PersistentVolume:
    aff = {k.replace("__", "/").replace("_", "."): v for k, v in affinity.items()}
    return pv(name, capacity=capacity, cls=cls, phase=phase, affinity=aff or None)


def ppod(*claims: str) -> Pod:
    return make_pod("pod-a", volumes=[{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims])


def run_plugin(pod: Pod, nodes: list[Node], objs: list[Any], args: dict[str, Any] | None = None) -> dict[str, Any]:
    informers = FakeInformers(*PLUGIN_CLASSES, *objs)
    r = PluginRunner([("VolumeBinding", 1)], nodes, informers=informers,
                     args={"VolumeBinding": args} if args else None)
    state, _, pre = r.pre_filter(pod)
    out: dict[str, Any] = {"pre": None if pre is None else (pre.code, pre.reasons)}
    if "VolumeBinding" in state.skip_filter_plugins:
        out["pre"] = (Code.SKIP, ())
    if pre is not None:
        return out
    pl = r.fw.plugins["VolumeBinding"]
    out["filter"] = []
    infos = [r.snapshot.get(n.name) for n in nodes]  # in the order given (not the snapshot's)
    for ni in infos:
        st = pl.filter(state, pod, ni)
        out["filter"].append(None if st is None else (st.code, st.reasons))
    ps = pl.pre_score(state, pod, r.snapshot.all_nodes())
    out["prescore"] = None if ps is None else ps.code
    if ps is None:
        out["scores"] = [pl.score(state, pod, ni)[0] for ni in infos]
    return out


def test_pod_without_pvcs_is_skipped() -> None:
    got = run_plugin(make_pod("pod-a"), [node("node-a")], [])
    assert got["pre"] == (Code.SKIP, ())


def test_all_bound() -> None:
    got = run_plugin(ppod("pvc-a"), [node("node-a")], [ppvc("pvc-a", WAIT_SC, bound_pv="pv-a"), ppv("pv-a", WAIT_SC)])
    assert got == {"pre": None, "filter": [None], "prescore": Code.SKIP}


def test_all_bound_with_local_volumes() -> None:
    got = run_plugin(ppod("pvc-a", "pvc-b"), [node("node-a"), node("node-b")],
                     [ppvc("pvc-a", WAIT_SC, bound_pv="pv-a"), ppvc("pvc-b", WAIT_SC, bound_pv="pv-b"),
                      ppv("pv-a", WAIT_SC, phase="Bound", kubernetes_io__hostname=["node-a"]),
                      ppv("pv-b", WAIT_SC, phase="Bound", kubernetes_io__hostname=["node-a"])])
    assert got["filter"] == [None, (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_NODE_CONFLICT,))]


@pytest.mark.parametrize("name,pod,objs,want_pre", [
    ("PVC does not exist", ppod("pvc-a"), [],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('persistentvolumeclaim "pvc-a" not found',))),
    ("Part of PVCs do not exist", ppod("pvc-a", "pvc-b"), [ppvc("pvc-a", WAIT_SC, bound_pv="pv-a")],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('persistentvolumeclaim "pvc-b" not found',))),
    ("immediate claims not bound", ppod("pvc-a"), [ppvc("pvc-a", "immediate-sc")],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("pod has unbound immediate PersistentVolumeClaims",))),
    ("claim without class is immediate", ppod("pvc-a"), [ppvc("pvc-a", "")],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("pod has unbound immediate PersistentVolumeClaims",))),
    ("claim of a missing class is immediate", ppod("pvc-a"), [ppvc("pvc-a", "nope")],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("pod has unbound immediate PersistentVolumeClaims",))),
    ("pv not found claim lost", ppod("pvc-a"), [ppvc("pvc-a", WAIT_SC, bound_pv="pv-a", phase="Lost")],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
      ('persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"',))),
    ("generic ephemeral claim not created yet", make_pod("pod-a", volumes=[{"name": "v", "ephemeral": {}}]), [],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
      ('waiting for ephemeral volume controller to create the persistentvolumeclaim "pod-a-v"',))),
])
def test_prefilter_rejections(name: str, pod: Pod, objs: list[Any], want_pre: Any) -> None:
    assert run_plugin(pod, [node("node-a")], objs)["pre"] == want_pre


def test_claim_being_deleted() -> None:
    claim = ppvc("pvc-a", WAIT_SC)
    raw = {**claim.raw, "metadata": {**claim.raw["metadata"], "deletionTimestamp": "2025-01-01T00:00:00Z"}}
    got = run_plugin(ppod("pvc-a"), [node("node-a")], [PersistentVolumeClaim(raw)])
    assert got["pre"] == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('persistentvolumeclaim "pvc-a" is being deleted',))


def test_unbound_claims_no_matches() -> None:
    got = run_plugin(ppod("pvc-a"), [node("node-a")], [ppvc("pvc-a", WAIT_SC)])
    assert got == {"pre": None, "filter": [(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_BIND_CONFLICT,))],
                   "prescore": Code.SKIP}


def test_bound_and_unbound_unsatisfied() -> None:
    got = run_plugin(ppod("pvc-a", "pvc-b"), [node("node-a", foo="barbar")],
                     [ppvc("pvc-a", WAIT_SC, bound_pv="pv-a"), ppvc("pvc-b", WAIT_SC),
                      ppv("pv-a", WAIT_SC, foo=["bar"])])
    assert got["filter"] == [(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT))]


def test_pv_not_found() -> None:
    got = run_plugin(ppod("pvc-a"), [node("node-a")], [ppvc("pvc-a", WAIT_SC, bound_pv="pv-a")])
    assert got["filter"] == [(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                              ("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",))]


LOCAL_PVS = [ppv("pv-a-0", WAIT_SC, "200Gi", kubernetes_io__hostname=["node-a"]),
             ppv("pv-a-1", WAIT_SC, "200Gi", kubernetes_io__hostname=["node-a"]),
             ppv("pv-b-0", WAIT_SC, "100Gi", kubernetes_io__hostname=["node-b"]),
             ppv("pv-b-1", WAIT_SC, "100Gi", kubernetes_io__hostname=["node-b"])]
HDD_PVS = [ppv("pv-a-2", WAIT_HDD, "200Gi", kubernetes_io__hostname=["node-a"]),
           ppv("pv-a-3", WAIT_HDD, "200Gi", kubernetes_io__hostname=["node-a"]),
           ppv("pv-b-2", WAIT_HDD, "100Gi", kubernetes_io__hostname=["node-b"]),
           ppv("pv-b-3", WAIT_HDD, "100Gi", kubernetes_io__hostname=["node-b"])]
DEFAULT_SHAPE = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
NO_PV = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_BIND_CONFLICT,))


def test_scoring_is_off_without_a_shape() -> None:
    got = run_plugin(ppod("pvc-a"), [node("node-a"), node("node-b")], [ppvc("pvc-a", WAIT_SC, size="50Gi"),
                                                                        *LOCAL_PVS])
    assert got["filter"] == [None, None] and got["prescore"] == Code.SKIP


def test_local_volumes_with_close_capacity_are_preferred() -> None:
    got = run_plugin(ppod("pvc-a"), [node("node-a"), node("node-b"), node("node-c")],
                     [ppvc("pvc-a", WAIT_SC, size="50Gi"), *LOCAL_PVS], DEFAULT_SHAPE)
    assert got["filter"] == [None, None, NO_PV]
    assert got["scores"] == [25, 50, 0]


def test_local_volumes_with_close_capacity_are_preferred_multiple_pvcs() -> None:
    got = run_plugin(ppod("pvc-0", "pvc-1"), [node("node-a"), node("node-b"), node("node-c")],
                     [ppvc("pvc-0", WAIT_SC, size="50Gi"), ppvc("pvc-1", WAIT_HDD, size="100Gi"), *LOCAL_PVS,
                      *HDD_PVS], DEFAULT_SHAPE)
    assert got["filter"] == [None, None, NO_PV]
    assert got["scores"] == [38, 75, 0]


ZONAL_NODES = [node(f"zone-{z}-node-{n}", **{"topology.kubernetes.io/region": f"region-{z}",
                                             "topology.kubernetes.io/zone": f"zone-{z}"})
               for z in "abc" for n in "ab"]
ZONAL_PVS = [ppv(f"pv-{z}-{i}", WAIT_SC, cap, topology_kubernetes_io__region=[f"region-{z}"],
                 topology_kubernetes_io__zone=[f"zone-{z}"])
             for z, cap in (("a", "200Gi"), ("b", "100Gi")) for i in range(2)]


@pytest.mark.parametrize("args,want", [
    (DEFAULT_SHAPE, [25, 25, 50, 50]),
    ({"bindTimeoutSeconds": 300, "shape": [{"utilization": 0, "score": 0}, {"utilization": 50, "score": 3},
                                           {"utilization": 100, "score": 5}]}, [15, 15, 30, 30]),
])
def test_zonal_volumes_with_close_capacity_are_preferred(args: dict[str, Any], want: list[int]) -> None:
    got = run_plugin(ppod("pvc-a"), ZONAL_NODES, [ppvc("pvc-a", WAIT_SC, size="50Gi"), *ZONAL_PVS], args)
    assert got["filter"] == [None, None, None, None, NO_PV, NO_PV]
    assert got["scores"][:4] == want


def test_broken_linear_truncates_like_go() -> None:
    shape = [(0, 100), (100, 0)]
    assert [broken_linear(shape, p) for p in (0, 1, 33, 99, 100, 150)] == [100, 99, 67, 1, 0, 0]
    assert broken_linear([(10, 20), (20, 40)], 5) == 20


# ---- Reserve / Unreserve / assume caches -------------------------------------------------------

def test_reserve_assumes_and_unreserve_reverts() -> None:
    informers = FakeInformers(*CLASSES, UNBOUND_PVC, PROVISIONED_PVC, PV_NODE1A)
    r = PluginRunner(["VolumeBinding"], [NODE1], informers=informers)
    pod = claims_pod(UNBOUND_PVC, PROVISIONED_PVC)
    state, _, st = r.pre_filter(pod)
    assert st is None
    ni = r.snapshot.get("node1")
    assert ni is not None
    pl: VolumeBinding = r.fw.plugins["VolumeBinding"]  # type: ignore[assignment]
    assert pl.filter(state, pod, ni) is None
    assert r.fw.run_reserve(state, pod, "node1") is None
    cached_pv = pl.binder.pv_cache.get("pv-node1a")
    assert cached_pv.claim_ref["name"] == "unbound-pvc" and cached_pv.claim_ref["uid"] == "pvc-uid"
    assert cached_pv.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    cached_pvc = pl.binder.pvc_cache.get("testns/provisioned-pvc")
    assert cached_pvc.annotations["volume.kubernetes.io/selected-node"] == "node1"
    # A second pod wanting a volume now finds none free (the first one's is assumed).
    other = pvc("other", "1G", uid="other-uid")
    informers.add(other)
    pod2 = claims_pod(other, name="pod2")
    state2, _, _ = r.pre_filter(pod2)
    st2 = pl.filter(state2, pod2, ni)
    assert st2 is not None and st2.reasons == (ERR_REASON_BIND_CONFLICT,)
    assert pl.pre_bind_pre_flight(state, pod, "node1") is None
    r.fw.run_unreserve(state, pod, "node1")
    assert pl.binder.pv_cache.get("pv-node1a") is PV_NODE1A
    assert "volume.kubernetes.io/selected-node" not in pl.binder.pvc_cache.get("testns/provisioned-pvc").annotations


def test_reserve_all_bound_skips_prebind() -> None:
    informers = FakeInformers(*CLASSES, BOUND_PVC, PV_BOUND)
    r = PluginRunner(["VolumeBinding"], [NODE1], informers=informers)
    pod = claims_pod(BOUND_PVC)
    state, _, _ = r.pre_filter(pod)
    ni = r.snapshot.get("node1")
    assert ni is not None
    pl = r.fw.plugins["VolumeBinding"]
    assert pl.filter(state, pod, ni) is None
    assert pl.reserve(state, pod, "node1") is None
    assert pl.pre_bind_pre_flight(state, pod, "node1").code == Code.SKIP
    assert pl.pre_bind(state, pod, "node1") is None


def test_reserve_for_a_pod_without_pvcs() -> None:
    r = PluginRunner(["VolumeBinding"], [NODE1], informers=FakeInformers())
    pod = make_pod("p")
    state, _, _ = r.pre_filter(pod)
    pl = r.fw.plugins["VolumeBinding"]
    assert pl.reserve(state, pod, "node1") is None
    assert pl.pre_bind_pre_flight(state, pod, "node1").code == Code.SKIP


def test_prebind_without_filter_result_for_node() -> None:
    informers = FakeInformers(*CLASSES, UNBOUND_PVC, PV_NODE1A)
    r = PluginRunner(["VolumeBinding"], [NODE1], informers=informers)
    pod = claims_pod(UNBOUND_PVC)
    state, _, _ = r.pre_filter(pod)
    pl = r.fw.plugins["VolumeBinding"]
    st = pl.pre_bind_pre_flight(state, pod, "node9")
    assert st is not None and st.code == Code.ERROR and st.reasons == ('no pod volumes found for node "node9"',)


def test_missing_state_is_an_error() -> None:
    pl = VolumeBinding({}, Handle(FakeInformers()))
    st = pl.reserve(CycleState(), make_pod("p"), "n")
    assert st is not None and st.code == Code.ERROR


def test_assume_cache_drops_assumption_when_informer_is_newer() -> None:
    informers = FakeInformers(PV_NODE1A)
    b = VolumeBinding({}, Handle(informers)).binder
    newer = PersistentVolume({**PV_NODE1A.raw, "metadata": {**PV_NODE1A.raw["metadata"], "resourceVersion": "5"}})
    assumed = PersistentVolume({**PV_NODE1A.raw, "metadata": {**PV_NODE1A.raw["metadata"], "labels": {"x": "y"}}})
    b.pv_cache.assume(assumed)
    assert b.pv_cache.get("pv-node1a") is assumed
    assert [p.name for p in b.pv_cache.list_pvs(WAIT)] == ["pv-node1a"]
    assert b.pv_cache.list_pvs(WAIT)[0] is assumed
    informers.add(newer)
    assert b.pv_cache.get("pv-node1a") is newer
    with pytest.raises(ValueError, match="out of sync"):
        b.pv_cache.assume(assumed)
    with pytest.raises(LookupError):
        b.pvc_cache.assume(UNBOUND_PVC)


def test_bind_timeout_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="bindTimeoutSeconds"):
        VolumeBinding({"bindTimeoutSeconds": -1}, Handle(FakeInformers()))


# ---- PreBind against the embedded store ---------------------------------------------------------

class Cluster:
    """An embedded store with its controllers (the PV controller unless ``pv_controller`` is
    False), a client and informers, and a runner."""

    def __init__(self, nodes: list[Node], objs: list[dict[str, Any]], clock: Any = None, timeout: int = 600,
                 pv_controller: bool = True) -> None:
        self.clock = clock or VirtualClock()
        self.cluster = EmbeddedCluster(self.clock, controllers=["*"] if pv_controller else
                                       ["*", "-persistentvolume-binder"])
        self.store = self.cluster.store
        self.client = self.cluster.client
        self.informers = InformerFactory(self.client)
        for n in nodes:
            self.store.create(n.raw)
        for o in objs:
            self.store.create(o)
        self.runner = PluginRunner(["VolumeBinding"], nodes, client=self.client, informers=self.informers,
                                   clock=self.clock, args={"VolumeBinding": {"bindTimeoutSeconds": timeout}})
        self.informers.poll()
        self.plugin: VolumeBinding = self.runner.fw.plugins["VolumeBinding"]  # type: ignore[assignment]

    def pod(self, name: str, *claims: str) -> Pod:
        p = make_pod(name, volumes=[{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims])
        return self.store.create(p.raw)  # type: ignore[return-value]

    def cycle(self, pod: Pod, node_name: str) -> tuple[CycleState, Any]:
        state, _, st = self.runner.pre_filter(pod)
        assert st is None, st
        ni = self.runner.snapshot.get(node_name)
        assert ni is not None
        fst = self.plugin.filter(state, pod, ni)
        assert fst is None, fst
        assert self.runner.fw.run_reserve(state, pod, node_name) is None
        return state, self.runner.fw.run_pre_bind_pre_flights(state, pod, node_name)

    def pvc(self, name: str) -> PersistentVolumeClaim:
        return self.store.get("PersistentVolumeClaim", "default", name)  # type: ignore[return-value]


def sc_raw(name: str, mode: str = "WaitForFirstConsumer", provisioner: str = "kubernetes.io/no-provisioner",
           **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "volumeBindingMode": mode, **extra}


def pvc_raw(name: str, cls: str | None, size: str = "1Gi", **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}, **spec}
    if cls is not None:
        s["storageClassName"] = cls
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": s}


def pv_raw(name: str, cls: str, size: str = "5Gi", hostname: str = "", **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                         **spec}
    if hostname:
        s["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOST, "operator": "In", "values": [hostname]}]}]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": s}


def test_prebind_static_binding_completes_through_the_pv_controller() -> None:
    c = Cluster([make_node("n1"), make_node("n2")],
                [sc_raw("local"), pv_raw("pv1", "local", hostname="n1"), pvc_raw("data", "local")])
    pod = c.pod("p", "data")
    state, pf = c.cycle(pod, "n1")
    assert pf is None
    assert c.runner.fw.run_pre_bind(state, pod, "n1") is None
    claim = c.pvc("data")
    assert claim.volume_name == "pv1" and claim.phase == "Bound"
    assert claim.annotations["pv.kubernetes.io/bind-completed"] == "yes"
    vol = c.store.get("PersistentVolume", "", "pv1")
    assert vol.claim_ref["uid"] == claim.uid and vol.phase == "Bound"  # type: ignore[attr-defined]


def test_prebind_dynamic_provisioning_for_the_selected_node() -> None:
    c = Cluster([make_node("n1")], [sc_raw("fast", provisioner="csi.example.com", reclaimPolicy="Retain"),
                                    pvc_raw("data", "fast", "3Gi")])
    pod = c.pod("p", "data")
    state, pf = c.cycle(pod, "n1")
    assert pf is None
    assert c.runner.fw.run_pre_bind(state, pod, "n1") is None
    claim = c.pvc("data")
    assert claim.annotations["volume.kubernetes.io/selected-node"] == "n1"
    assert claim.volume_name == f"pvc-{claim.uid}" and claim.phase == "Bound"
    vol = c.store.get("PersistentVolume", "", claim.volume_name)
    assert isinstance(vol, PersistentVolume)
    assert vol.capacity == 3 * 1024**3 and vol.csi_driver == "csi.example.com"
    assert vol.reclaim_policy == "Retain" and vol.storage_class_name == "fast"
    assert vol.node_affinity is not None and vol.node_affinity.matches("", {HOST: "n1"})
    assert not vol.node_affinity.matches("", {HOST: "n2"})


def test_prebind_fails_when_provisioning_fails() -> None:
    """The provisioner drops the selected-node annotation when the node is gone."""
    c = Cluster([make_node("n1")], [sc_raw("fast", provisioner="csi.example.com"), pvc_raw("data", "fast")])
    pod = c.pod("p", "data")
    state, _ = c.cycle(pod, "n1")
    c.store.delete("Node", "", "n1")
    st = c.runner.fw.run_pre_bind(state, pod, "n1")
    assert st is not None and st.code == Code.ERROR and st.plugin == "VolumeBinding"
    assert st.reasons == ('running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for PVC "data"',)
    assert "volume.kubernetes.io/selected-node" not in c.pvc("data").annotations


def test_prebind_fails_when_the_pod_is_gone() -> None:
    c = Cluster([make_node("n1")], [sc_raw("local"), pv_raw("pv1", "local"), pvc_raw("data", "local")],
                pv_controller=False)
    pod = c.pod("p", "data")
    state, _ = c.cycle(pod, "n1")
    c.store.delete("Pod", "default", "p")
    st = c.plugin.pre_bind(state, pod, "n1")
    assert st is not None and st.reasons == ('binding volumes: pod does not exist any more: pods "p" not found',)


def test_prebind_waits_on_a_virtual_clock_until_the_bind_timeout() -> None:
    """Upstream's PreBind polls until the PV controller (or a provisioner) has bound every claim,
    for up to bindTimeoutSeconds. On a virtual clock nothing else runs while a PreBind blocks,
    so it asks to be called again later (WaitUntil) rather than failing at once; once the clock
    has passed the timeout it fails as upstream does."""
    c = Cluster([make_node("n1")], [sc_raw("local"), pv_raw("pv1", "local"), pvc_raw("data", "local")],
                pv_controller=False, timeout=30)
    pod = c.pod("p", "data")
    state, _ = c.cycle(pod, "n1")
    start = c.clock.now()
    st = c.runner.fw.run_pre_bind(state, pod, "n1")
    # The API update was made (the volume is reserved for the claim) and PreBind waits.
    assert c.store.get("PersistentVolume", "", "pv1").claim_ref["name"] == "data"  # type: ignore[attr-defined]
    asked = []
    while isinstance(st, WaitUntil):
        assert st.plugin == "VolumeBinding" and st.code == Code.WAIT
        assert c.clock.now() < st.retry_at <= start + 30
        asked.append(st.retry_at - start)
        c.clock.advance_to(st.retry_at)
        st = c.runner.fw.run_pre_bind(state, pod, "n1", st.resume)
    assert st is not None and st.code == Code.ERROR
    assert st.reasons == ('running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded',)
    assert c.clock.now() == start + 30 and asked[-1] == 30
    # Polled as often as on a real clock: quickly at first, then every second.
    assert asked[:3] == pytest.approx([0.05, 0.15, 0.35]) and len(asked) < 40


def test_prebind_on_a_virtual_clock_completes_once_the_controller_binds() -> None:
    c = Cluster([make_node("n1")], [sc_raw("local"), pv_raw("pv1", "local"), pvc_raw("data", "local")],
                pv_controller=False)
    pod = c.pod("p", "data")
    state, _ = c.cycle(pod, "n1")
    st = c.runner.fw.run_pre_bind(state, pod, "n1")
    assert isinstance(st, WaitUntil)
    late = ControllerManager(c.client, c.clock, ["persistentvolume-binder"])
    late.settle()
    c.clock.advance_to(st.retry_at)
    assert c.runner.fw.run_pre_bind(state, pod, "n1", st.resume) is None
    assert c.pvc("data").volume_name == "pv1"


def test_prebind_polls_until_the_controller_binds_on_a_real_clock() -> None:
    c = Cluster([make_node("n1")], [sc_raw("local"), pv_raw("pv1", "local"), pvc_raw("data", "local")],
                clock=RealClock(), timeout=5, pv_controller=False)
    pod = c.pod("p", "data")
    state, _ = c.cycle(pod, "n1")
    # The PV controller of another process, starting late.
    late = ControllerManager(c.client, c.clock, ["persistentvolume-binder"])

    def late_controller() -> None:
        time.sleep(0.3)
        late.start()

    t = threading.Thread(target=late_controller)
    t.start()
    t0 = time.monotonic()
    polls = 0
    try:
        # What a threaded binding cycle does with WaitUntil: sleep until then and ask again.
        st = c.runner.fw.run_pre_bind(state, pod, "n1")
        while isinstance(st, WaitUntil):
            polls += 1
            time.sleep(max(0.0, st.retry_at - c.clock.now()))
            st = c.runner.fw.run_pre_bind(state, pod, "n1", st.resume)
    finally:
        t.join()
        late.stop()
    assert st is None
    assert time.monotonic() - t0 >= 0.25 and polls >= 2
    assert c.pvc("data").volume_name == "pv1"


def test_prebind_times_out_on_a_real_clock() -> None:
    c = Cluster([make_node("n1")], [sc_raw("local"), pv_raw("pv1", "local"), pvc_raw("data", "local")],
                clock=RealClock(), timeout=0, pv_controller=False)
    pod = c.pod("p", "data")
    state, _ = c.cycle(pod, "n1")
    st = c.plugin.pre_bind(state, pod, "n1")
    assert st is not None and st.reasons == ("binding volumes: context deadline exceeded",)


def test_prebind_api_conflict_reverts_assumptions() -> None:
    c = Cluster([make_node("n1")], [sc_raw("local"), pv_raw("pv1", "local"), pvc_raw("data", "local")])
    pod = c.pod("p", "data")
    state, _ = c.cycle(pod, "n1")
    # Someone else changes the volume after the scheduler read it: the update conflicts.
    c.store.patch("PersistentVolume", "", "pv1", {"metadata": {"labels": {"touched": "yes"}}})
    st = c.runner.fw.run_pre_bind(state, pod, "n1")
    assert st is not None and st.code == Code.ERROR and "the object has been modified" in st.message()
    assert not c.plugin.binder.pv_cache.is_assumed("pv1")


# ---- whole scheduling runs ---------------------------------------------------------------------

PLUGINS = ["PrioritySort", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "DefaultBinder"]


def scheduler_for(store: Store, clock: VirtualClock) -> Scheduler:
    cfg = parse_configuration({"profiles": [{"schedulerName": "default-scheduler", "plugins": {"multiPoint": {
        "enabled": [{"name": n} for n in PLUGINS], "disabled": [{"name": "*"}]}}}]})
    s = Scheduler(InProcessClient(store), cfg, clock=clock, record_events=False)
    s.sync()
    return s


def scheduled(store: Store, name: str) -> str:
    return store.get("Pod", "default", name).node_name  # type: ignore[attr-defined,no-any-return]


def condition_message(store: Store, name: str) -> str:
    p = store.get("Pod", "default", name)
    c = p.condition("PodScheduled")  # type: ignore[attr-defined]
    return str((c or {}).get("message", ""))


def test_schedule_static_local_volumes() -> None:
    clock = VirtualClock()
    store = EmbeddedCluster(clock).store
    for n in ("n1", "n2", "n3"):
        store.create(make_node(n).raw)
    store.create(sc_raw("local"))
    store.create(pv_raw("pv-n2-small", "local", "2Gi", hostname="n2"))
    store.create(pv_raw("pv-n2-big", "local", "50Gi", hostname="n2"))
    store.create(pv_raw("pv-n3", "local", "10Gi", hostname="n3"))
    store.create(pvc_raw("a", "local", "1Gi"))
    store.create(pvc_raw("b", "local", "5Gi"))
    store.create(make_pod("pa", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "a"}}]).raw)
    store.create(make_pod("pb", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "b"}}]).raw)
    s = scheduler_for(store, clock)
    s.run_until_idle()
    claims = {c.name: c.volume_name for c in store.items("PersistentVolumeClaim")}  # type: ignore[attr-defined]
    nodes = {"pa": scheduled(store, "pa"), "pb": scheduled(store, "pb")}
    assert nodes["pa"] in ("n2", "n3") and nodes["pb"] in ("n2", "n3")
    used = set(claims.values())
    assert len(used) == 2 and "" not in used
    # Each pod is on the node of its volume; a 5Gi claim cannot use the 2Gi volume.
    pv_node = {"pv-n2-small": "n2", "pv-n2-big": "n2", "pv-n3": "n3"}
    assert pv_node[claims["a"]] == nodes["pa"] and pv_node[claims["b"]] == nodes["pb"]
    assert claims["b"] != "pv-n2-small"


def test_schedule_dynamic_provisioning_then_second_pod_follows_the_volume() -> None:
    clock = VirtualClock()
    store = EmbeddedCluster(clock).store
    for n in ("n1", "n2"):
        store.create(make_node(n).raw)
    store.create(sc_raw("fast", provisioner="csi.example.com"))
    store.create(pvc_raw("shared", "fast", accessModes=["ReadWriteMany"]))
    store.create(make_pod("p1", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "shared"}}]).raw)
    s = scheduler_for(store, clock)
    s.run_until_idle()
    first = scheduled(store, "p1")
    assert first
    claim = store.get("PersistentVolumeClaim", "default", "shared")
    assert claim.annotations["volume.kubernetes.io/selected-node"] == first
    store.create(make_pod("p2", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "shared"}}]).raw)
    s.run_until_idle()
    assert scheduled(store, "p2") == first  # the provisioned volume is pinned to that node


def test_schedule_waits_for_immediate_claims_and_missing_claims() -> None:
    clock = VirtualClock()
    store = EmbeddedCluster(clock).store
    store.create(make_node("n1").raw)
    store.create(pvc_raw("imm", ""))
    store.create(make_pod("q", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "imm"}}]).raw)
    store.create(make_pod("r", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "later"}}]).raw)
    s = scheduler_for(store, clock)
    s.run_until_idle()
    assert condition_message(store, "q") == "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    assert condition_message(store, "r") == '0/1 nodes are available: persistentvolumeclaim "later" not found.'
    # A volume appears: the PV controller binds the claim, the claim's update requeues the pod.
    store.create(pv_raw("pv", ""))
    store.create(pvc_raw("later", ""))
    store.create(pv_raw("pv2", ""))
    s.run_until_idle()
    clock.advance(15)
    s.run_until_idle()
    assert scheduled(store, "q") == "n1"
    assert scheduled(store, "r") == "n1"


def test_schedule_waits_in_prebind_for_the_provisioner_on_the_virtual_clock() -> None:
    """Whole scheduler, single-threaded on a virtual clock, no PV controller running: the pod's
    binding cycle waits in PreBind (the pod stays assumed, nominated to its node) until
    bindTimeoutSeconds have passed on the clock, then fails with upstream's message and takes
    back the nomination it wrote."""
    clock = VirtualClock()
    store = EmbeddedCluster(clock, controllers=["*", "-persistentvolume-binder"]).store
    store.create(make_node("n1").raw)
    store.create(sc_raw("fast", provisioner="csi.example.com"))
    store.create(pvc_raw("data", "fast"))
    store.create(make_pod("p", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]).raw)
    cfg = parse_configuration({"profiles": [{"schedulerName": "default-scheduler", "plugins": {"multiPoint": {
        "enabled": [{"name": n} for n in PLUGINS], "disabled": [{"name": "*"}]}},
        "pluginConfig": [{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 30}}]}]})
    s = Scheduler(InProcessClient(store), cfg, clock=clock, record_events=False)
    s.sync()
    start = clock.now()
    s.run_until_idle()
    pod = store.get("Pod", "default", "p")
    assert s.cache.is_assumed(pod) and pod.nominated_node_name == "n1"  # type: ignore[attr-defined]
    assert store.get("PersistentVolumeClaim", "default", "data").annotations[  # type: ignore[attr-defined]
        "volume.kubernetes.io/selected-node"] == "n1"
    while clock.now() < start + 30:
        t = s.next_wakeup()
        assert t is not None and t <= start + 30
        clock.advance_to(t)
        s.run_until_idle()
        if clock.now() < start + 30:
            assert s.cache.is_assumed(pod) and s.failed_attempts == 0
    pod = store.get("Pod", "default", "p")
    assert not s.cache.is_assumed(pod) and pod.node_name == ""  # type: ignore[attr-defined]
    c = pod.condition("PodScheduled")  # type: ignore[attr-defined]
    assert (c["reason"], c["message"]) == (
        "SchedulerError", 'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded')
    assert pod.nominated_node_name == "" and s.queue.nominator.nominated_node(pod) == ""  # type: ignore[attr-defined]


def test_one_scheduler_binds_a_provisioned_claims_pod_at_its_first_attempt_in_simulate() -> None:
    """ksched simulate (one scheduler, controllers held while it runs, virtual clock): the pod
    whose WaitForFirstConsumer claim must be provisioned is bound at its first attempt, as
    ksched serve binds it on a real clock: its binding cycle writes the nomination, PreBind
    waits while the provisioner (the PV controller) makes the volume for the selected node, and
    binding clears the nomination. Before, PreBind failed at once (nothing runs while a PreBind
    blocks on a virtual clock) and the pod kept the nomination through its backoff."""
    from ksched.sim.simulation import Simulation

    sim = Simulation(seed=0)
    sim.load([make_node("n1").raw, make_node("n2").raw, sc_raw("fast", provisioner="csi.example.com"),
              pvc_raw("data", "fast"),
              make_pod("p", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]).raw])
    sim.run(60)
    pod = sim.store.get("Pod", "default", "p")
    assert pod.node_name in ("n1", "n2")  # type: ignore[attr-defined]
    assert sim.scheduler.failed_attempts == 0
    assert [e for e in sim.store.list("Event")[0] if e.raw.get("reason") == "FailedScheduling"] == []
    claim = sim.store.get("PersistentVolumeClaim", "default", "data")
    assert claim.phase == "Bound"  # type: ignore[attr-defined]
    assert claim.annotations["volume.kubernetes.io/selected-node"] == pod.node_name  # type: ignore[attr-defined]
    w = sim.store.watch("Pod", resource_version="1")
    seen = [(e.object.nominated_node_name, e.object.node_name) for e in w.drain()
            if e.object is not None and e.object.name == "p"]
    assert seen[:3] == [("", ""), (pod.node_name, ""), ("", pod.node_name)]  # type: ignore[attr-defined]


# ---- queueing hints ------------------------------------------------------------------------

def test_events_to_register() -> None:
    evs = {(e.event.resource, e.event.action): e.hint is not None
           for e in VolumeBinding({}, Handle(FakeInformers())).events_to_register()}
    assert evs == {
        (EventResource.STORAGE_CLASS, ActionType.ADD | ActionType.UPDATE): True,
        (EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE): True,
        (EventResource.PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE): False,
        (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL): False,
        (EventResource.CSI_NODE, ActionType.ADD | ActionType.UPDATE): True,
        (EventResource.CSI_DRIVER, ActionType.UPDATE): True,
        (EventResource.CSI_STORAGE_CAPACITY, ActionType.ADD | ActionType.UPDATE): True,
    }


POD_PVC = make_pod("pod-a", "ns", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "pvc-a"}}])
POD_EPH = make_pod("pod-a", "ns", volumes=[{"name": "eph", "ephemeral": {}}])


def _pvc(name: str, ns: str = "ns") -> PersistentVolumeClaim:
    return pvc(name, ns=ns)


@pytest.mark.parametrize("name,pod,old,new,want", [
    ("pod has the pvc", POD_PVC, None, _pvc("pvc-a"), QueueingHint.QUEUE),
    ("pvc updated", POD_PVC, _pvc("pvc-a"), _pvc("pvc-a"), QueueingHint.QUEUE),
    ("other namespace", POD_PVC, None, _pvc("pvc-a", "other"), QueueingHint.QUEUE_SKIP),
    ("other pvc", POD_PVC, None, _pvc("pvc-b"), QueueingHint.QUEUE_SKIP),
    ("ephemeral claim", POD_EPH, None, _pvc("pod-a-eph"), QueueingHint.QUEUE),
])
def test_hint_pvc(name: str, pod: Pod, old: Any, new: Any, want: QueueingHint) -> None:
    assert VolumeBinding.is_schedulable_after_pvc_change(pod, old, new) == want


@pytest.mark.parametrize("name,old,new,want", [
    ("new class", None, sc("a"), QueueingHint.QUEUE),
    ("allowed topologies changed", sc("a", allowed=["x"]), sc("a", allowed=["y"]), QueueingHint.QUEUE),
    ("allowed topologies added", sc("a"), sc("a", allowed=["y"]), QueueingHint.QUEUE),
    ("other change", sc("a", allowed=["x"]), sc("a", provisioner="p", allowed=["x"]), QueueingHint.QUEUE_SKIP),
])
def test_hint_storage_class(name: str, old: Any, new: Any, want: QueueingHint) -> None:
    assert VolumeBinding.is_schedulable_after_storage_class_change(POD_PVC, old, new) == want


def _csinode(migrated: str | None) -> CSINode:
    md: dict[str, Any] = {"name": "n"}
    if migrated is not None:
        md["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": migrated}
    return CSINode({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": md, "spec": {"drivers": []}})


@pytest.mark.parametrize("name,old,new,want", [
    ("new CSINode", None, _csinode(None), QueueingHint.QUEUE),
    ("migrated plugins changed", _csinode("kubernetes.io/gce-pd"),
     _csinode("kubernetes.io/gce-pd,kubernetes.io/aws-ebs"), QueueingHint.QUEUE),
    ("migrated plugins annotation added", _csinode(None), _csinode("kubernetes.io/gce-pd"), QueueingHint.QUEUE),
    ("nothing relevant", _csinode("kubernetes.io/gce-pd"), _csinode("kubernetes.io/gce-pd"),
     QueueingHint.QUEUE_SKIP),
])
def test_hint_csinode(name: str, old: Any, new: Any, want: QueueingHint) -> None:
    assert VolumeBinding.is_schedulable_after_csinode_change(POD_PVC, old, new) == want


class Raw:
    """Objects of kinds the embedded API does not model (CSIDriver, CSIStorageCapacity)."""

    def __init__(self, name: str, raw: dict[str, Any]) -> None:
        self.name = name
        self.raw = raw


@pytest.mark.parametrize("name,old,new,want", [
    ("new capacity", None, Raw("c", {"capacity": "1Gi"}), QueueingHint.QUEUE),
    ("capacity grew", Raw("c", {"capacity": "1Gi"}), Raw("c", {"capacity": "2Gi"}), QueueingHint.QUEUE),
    ("capacity shrank", Raw("c", {"capacity": "2Gi"}), Raw("c", {"capacity": "1Gi"}), QueueingHint.QUEUE_SKIP),
    ("max volume size preferred", Raw("c", {"capacity": "9Gi", "maximumVolumeSize": "1Gi"}),
     Raw("c", {"capacity": "9Gi", "maximumVolumeSize": "2Gi"}), QueueingHint.QUEUE),
    ("limit appeared", Raw("c", {}), Raw("c", {"capacity": "1Gi"}), QueueingHint.QUEUE),
])
def test_hint_csi_storage_capacity(name: str, old: Any, new: Any, want: QueueingHint) -> None:
    assert VolumeBinding.is_schedulable_after_csi_storage_capacity_change(POD_PVC, old, new) == want


def test_hint_csidriver() -> None:
    pod = make_pod("p", volumes=[{"name": "v", "csi": {"driver": "d"}}])
    on, off = Raw("d", {"spec": {"storageCapacity": True}}), Raw("d", {"spec": {"storageCapacity": False}})
    assert VolumeBinding.is_schedulable_after_csidriver_change(pod, on, off) == QueueingHint.QUEUE
    assert VolumeBinding.is_schedulable_after_csidriver_change(pod, off, on) == QueueingHint.QUEUE_SKIP
    assert VolumeBinding.is_schedulable_after_csidriver_change(POD_PVC, on, off) == QueueingHint.QUEUE_SKIP


def test_filter_nodes_decides_every_node_at_once_only_when_the_answer_is_the_same_everywhere() -> None:
    """Claims all bound to volumes without node affinity (or no claims): every node passes, in
    one call, and Reserve/PreBind find the (empty) volumes for the chosen node without a
    per-node Filter. Claims still to bind: the vectorized form declines (None) and Filter runs
    per node."""
    import numpy as np

    anywhere = pv("pv-bound", "", "1G", bound_to=BOUND_PVC)  # no node affinity
    informers = FakeInformers(*CLASSES, BOUND_PVC, anywhere, UNBOUND_PVC, PV_NODE1A)
    r = PluginRunner(["VolumeBinding"], [NODE1], informers=informers)
    pl = r.fw.plugins["VolumeBinding"]
    snap = r.snapshot
    for pod in (claims_pod(BOUND_PVC), make_pod("no-claims")):
        state, _, _ = r.pre_filter(pod)
        mask = pl.filter_nodes(state, pod, snap, snap.order)
        assert isinstance(mask, np.ndarray) and mask.tolist() == [True]
        assert pl.reserve(state, pod, "node1") is None
        assert pl.pre_bind_pre_flight(state, pod, "node1").code == Code.SKIP
    for pod in (claims_pod(UNBOUND_PVC), claims_pod(BOUND_PVC, name="affine")):
        r2 = PluginRunner(["VolumeBinding"], [NODE1], informers=FakeInformers(*CLASSES, BOUND_PVC, PV_BOUND,
                                                                              UNBOUND_PVC, PV_NODE1A))
        pl2 = r2.fw.plugins["VolumeBinding"]
        state, _, _ = r2.pre_filter(pod)
        assert pl2.filter_nodes(state, pod, r2.snapshot, r2.snapshot.order) is None
        # The scheduler then asks per node, and the volume's node fits.
        assert pl2.filter(state, pod, r2.snapshot.get("node1")) is None
