"""The storage helpers of ksched.api.volumes that the PV controller shares with the scheduler's
volume binding: a claim's class, whether a volume is bound to a claim, binding one to it,
finding a matching volume, topology selector terms."""

from __future__ import annotations

from typing import Any

from api_objects import HOST, pv, pvc
from ksched.api.storage import PersistentVolume, PersistentVolumeClaim
from ksched.api.volumes import (
    bind_volume_to_claim,
    claim_class,
    find_matching_volume,
    is_volume_bound_to_claim,
    match_topology_selector_terms,
)


def _pv(**kw: Any) -> PersistentVolume:
    return PersistentVolume(pv("v", **kw))


def _pvc(**kw: Any) -> PersistentVolumeClaim:
    raw = pvc("c", **kw)
    raw["metadata"]["uid"] = "uid-c"
    raw["metadata"]["resourceVersion"] = "7"
    return PersistentVolumeClaim(raw)


def test_claim_class() -> None:
    assert claim_class(_pvc(cls=None)) == ""
    assert claim_class(_pvc(cls="a")) == "a"
    assert claim_class(_pvc(cls="a", annotations={"volume.beta.kubernetes.io/storage-class": "b"})) == "b"


def test_is_volume_bound_to_claim() -> None:
    c = _pvc()
    assert not is_volume_bound_to_claim(_pv(), c)
    assert is_volume_bound_to_claim(_pv(claimRef={"namespace": "default", "name": "c"}), c)
    assert is_volume_bound_to_claim(_pv(claimRef={"namespace": "default", "name": "c", "uid": "uid-c"}), c)
    assert not is_volume_bound_to_claim(_pv(claimRef={"namespace": "default", "name": "c", "uid": "x"}), c)
    assert not is_volume_bound_to_claim(_pv(claimRef={"namespace": "other", "name": "c"}), c)


def test_bind_volume_to_claim() -> None:
    c = _pvc()
    new, dirty = bind_volume_to_claim(_pv(), c)
    assert dirty and new.claim_ref == {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "c",
                                       "uid": "uid-c", "apiVersion": "v1", "resourceVersion": "7"}
    assert new.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    # Pre-bound by the user (no UID): the UID is filled in, no bound-by-controller annotation.
    new, dirty = bind_volume_to_claim(_pv(claimRef={"namespace": "default", "name": "c"}), c)
    assert dirty and new.claim_ref["uid"] == "uid-c"  # type: ignore[index]
    assert "pv.kubernetes.io/bound-by-controller" not in new.annotations
    done = _pv(claimRef={"namespace": "default", "name": "c", "uid": "uid-c"})
    again, dirty = bind_volume_to_claim(done, c)
    assert not dirty and again is done


def test_find_matching_volume_prebound_volume_must_fit_the_node() -> None:
    c = _pvc()
    affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": HOST, "operator": "In", "values": ["n1"]}]}]}}
    reserved = PersistentVolume(pv("reserved", claimRef={"namespace": "default", "name": "c"}, nodeAffinity=affinity))
    free = PersistentVolume(pv("free", size="1Gi"))
    free.raw["status"] = {"phase": "Available"}
    assert find_matching_volume(c, [free, reserved], {HOST: "n1"}, None, True) is reserved
    # Reserved for the claim but not usable on this node: nothing (not another volume).
    assert find_matching_volume(c, [free, reserved], {HOST: "n2"}, None, True) is None
    # Controller path, delay binding: only a reserved volume.
    assert find_matching_volume(c, [free], None, None, True) is None
    assert find_matching_volume(c, [free], None, None, False) is free
    assert find_matching_volume(c, [free], None, {"free": free}, False) is None


def test_match_topology_selector_terms() -> None:
    terms = [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}, {"key": "rack", "values": ["1", "2"]}]},
             {"matchLabelExpressions": [{"key": "zone", "values": ["z"]}]}]
    assert match_topology_selector_terms([], {})
    assert match_topology_selector_terms(terms, {"zone": "a", "rack": "2"})
    assert match_topology_selector_terms(terms, {"zone": "z"})
    assert not match_topology_selector_terms(terms, {"zone": "a"})
