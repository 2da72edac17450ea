"""The PV controller (ksched.controllers.volume.persistentvolume) in an embedded cluster: binding
(as upstream's PV controller), simulated provisioning, default class, release/lost."""

from __future__ import annotations

from typing import Any

import pytest

from api_objects import HOST, pv, pvc, sc
from ksched.api.storage import PersistentVolume, PersistentVolumeClaim
from ksched.apiserver.store import Store
from ksched.testing import make_node


def claim(store: Store, name: str) -> PersistentVolumeClaim:
    return store.get("PersistentVolumeClaim", "default", name)  # type: ignore[return-value]


def volume(store: Store, name: str) -> PersistentVolume:
    return store.get("PersistentVolume", "", name)  # type: ignore[return-value]


def assert_bound(store: Store, claim_name: str, volume_name: str) -> None:
    c, v = claim(store, claim_name), volume(store, volume_name)
    assert c.volume_name == volume_name and c.phase == "Bound"
    assert c.annotations.get("pv.kubernetes.io/bind-completed") == "yes"
    assert v.claim_ref is not None and v.claim_ref["name"] == claim_name and v.claim_ref["uid"] == c.uid
    assert v.phase == "Bound"
    status = c.raw["status"]
    assert status["accessModes"] == list(v.access_modes) and status["capacity"] == v.raw["spec"]["capacity"]


# ---- static binding ----------------------------------------------------------------------

def test_new_volume_is_available_and_new_claim_without_match_pending(store: Store) -> None:
    store.create(pv("v"))
    store.create(pvc("c", size="10Gi"))
    assert volume(store, "v").phase == "Available" and volume(store, "v").raw["status"] == {"phase": "Available"}
    assert claim(store, "c").phase == "Pending" and claim(store, "c").raw["status"] == {"phase": "Pending"}


@pytest.mark.parametrize("volume_first", [True, False])
def test_immediate_claim_is_bound_to_a_matching_volume(store: Store, volume_first: bool) -> None:
    if volume_first:
        store.create(pv("v"))
        store.create(pvc("c"))
    else:
        store.create(pvc("c"))
        store.create(pv("v"))
    assert_bound(store, "c", "v")
    c, v = claim(store, "c"), volume(store, "v")
    assert c.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert v.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"


def test_smallest_matching_volume_wins(store: Store) -> None:
    for name, size in (("huge", "100Gi"), ("small", "2Gi"), ("tiny", "500Mi"), ("mid", "10Gi")):
        store.create(pv(name, size=size))
    store.create(pvc("c", size="1Gi"))
    assert_bound(store, "c", "small")


def test_volumes_with_fewest_access_modes_are_tried_first(store: Store) -> None:
    store.create(pv("rwo-rox", size="1Gi", modes=("ReadWriteOnce", "ReadOnlyMany")))
    store.create(pv("rwo", size="50Gi"))
    store.create(pvc("c", size="1Gi"))
    assert_bound(store, "c", "rwo")


@pytest.mark.parametrize("name,claim_change,volume_change", [
    ("class mismatch", {"storageClassName": "gold"}, {}),
    ("too small", {"resources": {"requests": {"storage": "6Gi"}}}, {}),
    ("access mode missing", {"accessModes": ["ReadWriteMany"]}, {}),
    ("volume mode mismatch", {"volumeMode": "Block"}, {}),
    ("selector mismatch", {"selector": {"matchLabels": {"tier": "gold"}}}, {}),
    ("volume attributes class mismatch", {"volumeAttributesClassName": "fast"}, {}),
])
def test_no_match_stays_pending(store: Store, name: str, claim_change: dict[str, Any],
                                volume_change: dict[str, Any]) -> None:
    store.create(pv("v", **volume_change))
    raw = pvc("c")
    raw["spec"].update(claim_change)
    store.create(raw)
    assert claim(store, "c").volume_name == "" and claim(store, "c").phase == "Pending"
    assert volume(store, "v").claim_ref is None


def test_selector_match(store: Store) -> None:
    store.create(pv("plain", size="1Gi"))
    store.create(pv("gold", size="9Gi", labels={"tier": "gold"}))
    store.create(pvc("c", selector={"matchLabels": {"tier": "gold"}}))
    assert_bound(store, "c", "gold")


def test_wait_for_first_consumer_claim_is_left_to_the_scheduler(store: Store) -> None:
    store.create(sc("local", mode="WaitForFirstConsumer"))
    store.create(pv("v", cls="local"))
    store.create(pvc("c", cls="local"))
    assert claim(store, "c").volume_name == "" and volume(store, "v").claim_ref is None
    # What VolumeBinding's PreBind writes: the volume reserved for the claim.
    c = claim(store, "c")
    raw = volume(store, "v").deepcopy_raw()
    raw["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default",
                               "name": "c", "uid": c.uid}
    raw["metadata"]["annotations"] = {"pv.kubernetes.io/bound-by-controller": "yes"}
    store.update(raw)
    assert_bound(store, "c", "v")


def test_user_prebound_volume(store: Store) -> None:
    """A volume whose claimRef names a claim (no UID) is kept for it and bound once it exists."""
    store.create(pv("v", claimRef={"namespace": "default", "name": "c"}))
    store.create(pvc("other"))
    assert claim(store, "other").volume_name == ""
    assert volume(store, "v").phase == "Available"
    store.create(pvc("c"))
    assert_bound(store, "c", "v")
    assert "pv.kubernetes.io/bound-by-controller" not in volume(store, "v").annotations


def test_user_prebound_claim(store: Store) -> None:
    store.create(pvc("c", volumeName="v"))
    assert claim(store, "c").phase == "Pending"
    store.create(pv("v"))
    assert_bound(store, "c", "v")
    assert "pv.kubernetes.io/bound-by-controller" not in claim(store, "c").annotations


def test_claim_prebound_to_a_volume_bound_elsewhere_waits(store: Store) -> None:
    store.create(pv("v"))
    store.create(pvc("first"))
    assert_bound(store, "first", "v")
    store.create(pvc("second", volumeName="v"))
    assert claim(store, "second").phase == "Pending"
    assert volume(store, "v").claim_ref["name"] == "first"  # type: ignore[index]


def test_stale_reservation_is_undone(store: Store) -> None:
    """A volume reserved (by the controller's side) for a claim that got another volume goes back
    to Available."""
    store.create(pv("v1"))
    store.create(pvc("c"))
    assert_bound(store, "c", "v1")
    c = claim(store, "c")
    store.create(pv("v2", claimRef={"kind": "PersistentVolumeClaim", "namespace": "default", "name": "c",
                                    "uid": c.uid}))
    v2 = volume(store, "v2")
    # The volume was not reserved by the controller, so only the UID is dropped.
    assert v2.claim_ref == {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "c"}
    assert v2.phase == "Available"


# ---- provisioning ------------------------------------------------------------------------

def test_immediate_class_with_provisioner_provisions(store: Store) -> None:
    store.create(sc("fast", provisioner="csi.example.com", reclaimPolicy="Retain", mountOptions=["ro"],
                    allowedTopologies=[{"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}]))
    store.create(pvc("c", cls="fast", size="3Gi"))
    c = claim(store, "c")
    name = f"pvc-{c.uid}"
    assert_bound(store, "c", name)
    v = volume(store, name)
    assert v.csi_driver == "csi.example.com" and v.csi_volume_handle == name
    assert v.capacity == 3 * 1024**3 and v.reclaim_policy == "Retain" and v.storage_class_name == "fast"
    assert v.annotations["pv.kubernetes.io/provisioned-by"] == "csi.example.com"
    assert v.raw["spec"]["mountOptions"] == ["ro"]
    assert v.node_affinity is not None
    assert v.node_affinity.matches("", {"zone": "b"}) and not v.node_affinity.matches("", {"zone": "c"})
    assert c.annotations["volume.kubernetes.io/storage-provisioner"] == "csi.example.com"


def test_wait_for_first_consumer_provisions_on_the_selected_node(store: Store) -> None:
    store.create(make_node("n1", labels={HOST: "host-1"}).raw)
    store.create(sc("fast", mode="WaitForFirstConsumer", provisioner="csi.example.com"))
    store.create(pvc("c", cls="fast"))
    assert [v.name for v in store.items("PersistentVolume")] == []
    store.patch("PersistentVolumeClaim", "default", "c",
                {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n1"}}})
    c = claim(store, "c")
    assert_bound(store, "c", f"pvc-{c.uid}")
    v = volume(store, f"pvc-{c.uid}")
    assert v.reclaim_policy == "Delete"
    assert v.raw["spec"]["nodeAffinity"] == {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": HOST, "operator": "In", "values": ["host-1"]}]}]}}


def test_selected_node_without_hostname_label_gets_no_affinity(store: Store) -> None:
    node = make_node("n1").deepcopy_raw()
    del node["metadata"]["labels"][HOST]
    store.create(node)
    store.create(sc("fast", mode="WaitForFirstConsumer", provisioner="csi.example.com"))
    store.create(pvc("c", cls="fast", annotations={"volume.kubernetes.io/selected-node": "n1"}))
    c = claim(store, "c")
    assert_bound(store, "c", f"pvc-{c.uid}")
    assert volume(store, f"pvc-{c.uid}").node_affinity is None


def test_missing_selected_node_fails_provisioning(store: Store) -> None:
    store.create(sc("fast", mode="WaitForFirstConsumer", provisioner="csi.example.com"))
    store.create(pvc("c", cls="fast", annotations={"volume.kubernetes.io/selected-node": "gone"}))
    c = claim(store, "c")
    assert "volume.kubernetes.io/selected-node" not in c.annotations
    assert c.volume_name == "" and store.items("PersistentVolume") == []


def test_no_provisioner_class_stays_pending(store: Store) -> None:
    store.create(sc("manual"))
    store.create(pvc("c", cls="manual"))
    assert claim(store, "c").phase == "Pending" and store.items("PersistentVolume") == []


def test_provisioning_waits_for_the_class(store: Store) -> None:
    store.create(pvc("c", cls="later"))
    assert claim(store, "c").phase == "Pending"
    store.create(sc("later", provisioner="csi.example.com"))
    c = claim(store, "c")
    assert_bound(store, "c", f"pvc-{c.uid}")


# ---- default class -----------------------------------------------------------------------

def test_default_class_is_assigned_newest_first(store: Store, ) -> None:
    clock = store.clock
    store.create(sc("old", provisioner="csi.example.com",
                    annotations={"storageclass.kubernetes.io/is-default-class": "true"}))
    clock.advance(10)  # type: ignore[attr-defined]
    store.create(sc("new", provisioner="csi.example.com",
                    annotations={"storageclass.beta.kubernetes.io/is-default-class": "true"}))
    store.create(sc("other", provisioner="csi.example.com"))
    store.create(pvc("c", cls=None))
    c = claim(store, "c")
    assert c.storage_class_name == "new"
    assert volume(store, c.volume_name).storage_class_name == "new"


def test_default_class_is_assigned_retroactively(store: Store) -> None:
    store.create(pvc("c", cls=None))
    store.create(pvc("explicit-none", cls=""))
    assert claim(store, "c").storage_class_name is None
    store.create(sc("std", annotations={"storageclass.kubernetes.io/is-default-class": "true"}))
    assert claim(store, "c").storage_class_name == "std"
    assert claim(store, "explicit-none").storage_class_name == ""


def test_beta_class_annotation_counts_as_a_class(store: Store) -> None:
    store.create(sc("std", annotations={"storageclass.kubernetes.io/is-default-class": "true"}))
    store.create(pv("v", cls="gold"))
    store.create(pvc("c", cls=None, annotations={"volume.beta.kubernetes.io/storage-class": "gold"}))
    assert claim(store, "c").storage_class_name is None
    assert_bound(store, "c", "v")


# ---- release and loss --------------------------------------------------------------------

def test_deleted_claim_releases_a_retained_volume(store: Store) -> None:
    store.create(pv("v", persistentVolumeReclaimPolicy="Retain"))
    store.create(pvc("c"))
    assert_bound(store, "c", "v")
    store.delete("PersistentVolumeClaim", "default", "c")
    v = volume(store, "v")
    assert v.phase == "Released" and v.claim_ref is not None
    # A released volume is not offered to new claims.
    store.create(pvc("d"))
    assert claim(store, "d").volume_name == ""


def test_deleted_claim_deletes_a_volume_with_delete_policy(store: Store) -> None:
    store.create(sc("fast", provisioner="csi.example.com"))
    store.create(pvc("c", cls="fast"))
    name = claim(store, "c").volume_name
    assert name
    store.delete("PersistentVolumeClaim", "default", "c")
    assert store.try_get("PersistentVolume", "", name) is None


def test_recreated_claim_does_not_take_over_a_released_volume(store: Store) -> None:
    store.create(pv("v", persistentVolumeReclaimPolicy="Retain"))
    store.create(pvc("c"))
    store.delete("PersistentVolumeClaim", "default", "c")
    store.create(pvc("c"))
    assert claim(store, "c").volume_name == "" and volume(store, "v").phase == "Released"


def test_deleted_volume_makes_the_claim_lost(store: Store) -> None:
    store.create(pv("v"))
    store.create(pvc("c"))
    assert_bound(store, "c", "v")
    store.delete("PersistentVolume", "", "v")
    assert claim(store, "c").phase == "Lost"


def test_indices_survive_a_restore(store: Store) -> None:
    store.create(pv("v"))
    objs = store.items("PersistentVolume") + store.items("Namespace")
    store.restore(objs, store.resource_version)
    store.create(pvc("c"))
    assert_bound(store, "c", "v")


def test_many_claims_and_volumes(store: Store) -> None:
    for i in range(300):
        store.create(pv(f"v{i:03d}", size=f"{i + 1}Gi"))
    for i in range(300):
        store.create(pvc(f"c{i:03d}", size=f"{300 - i}Gi"))
    got = {c.name: c.volume_name for c in store.items("PersistentVolumeClaim")}  # type: ignore[attr-defined]
    # Claims come largest first, each takes the smallest volume that fits: c_i gets v_(299-i).
    assert got == {f"c{i:03d}": f"v{299 - i:03d}" for i in range(300)}
