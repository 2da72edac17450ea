"""Review of 3862f89 (load_objects hands the store the loader's typed Pod): an existing pod
(exported from a cluster) does not share the loader's parse, and the store deep-copies the
manifest of a typed object whose parse it does not take; so each existing pod handed over
(owned) was copied again, where it was taken as it is before. The stored pods are the same
either way; only the copy (a cost per existing pod of every ``ksched simulate`` of a cluster
snapshot) is at stake."""

from __future__ import annotations

from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.sim.loading import load_objects
from ksched.testing import make_pod


def test_an_existing_pod_handed_over_is_stored_without_a_copy() -> None:
    existing = make_pod("e", uid="u1", node_name="n1")
    existing.raw["metadata"]["resourceVersion"] = "5"
    new = make_pod("f")
    store = Store()
    report = load_objects(store, [existing, new], existing={0}, owned=True, validated=True)
    assert not report.errors
    assert store.get("Pod", "default", "e").raw is existing.raw  # taken as it is, as before 3862f89
    assert store.get("Pod", "default", "f").raw is new.raw


def test_existing_and_new_pods_are_stored_alike_either_way() -> None:
    def stored(owned: bool) -> list[object]:
        store = Store(VirtualClock(1000.0))
        e = make_pod("e", uid="u1", node_name="n1", tolerations=[{"key": "k", "operator": "Exists"}])
        e.raw["metadata"]["resourceVersion"] = "5"
        n = make_pod("f", uid="u2", tolerations=[{"key": "k", "operator": "Exists"}])
        assert not load_objects(store, [e, n], existing={0}, owned=owned, validated=True).errors
        return [({**p.raw, "metadata": {k: v for k, v in p.raw["metadata"].items() if k != "uid"}},
                 [t.key_tuple() for t in p.tolerations], p.namespace)
                for p in (store.get("Pod", "default", "e"), store.get("Pod", "default", "f"))]

    assert stored(True) == stored(False)
