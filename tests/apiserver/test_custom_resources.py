"""CustomResourceDefinitions in the embedded store: a CRD's kind is served from its creation
(established at once), its objects are pruned, defaulted and validated against its schema, kept
in the storage version, watched, given generations and a status subresource; a CRD update
serves the new definition; deleting it deletes its objects; every store has its own custom
kinds; persistence brings them back after a restart."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from ksched.api.apiextensions import CustomObject, CustomResourceDefinition
from ksched.api.errors import Invalid, NotFound
from ksched.api.watch import ADDED, DELETED, MODIFIED
from ksched.apiserver.persistence import SqlitePersistence
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.sim.cluster import EmbeddedCluster

SCHEMA = {"openAPIV3Schema": {"type": "object", "properties": {
    "spec": {"type": "object", "required": ["size"], "properties": {
        "size": {"type": "integer", "minimum": 1}, "color": {"type": "string", "default": "red"}}},
    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}}


def crd(status: bool = True, scope: str = "Namespaced", group: str = "example.com",
        extra_version: bool = False) -> dict[str, Any]:
    v: dict[str, Any] = {"name": "v1", "served": True, "storage": True, "schema": copy.deepcopy(SCHEMA)}
    if status:
        v["subresources"] = {"status": {}}
    versions = [v]
    if extra_version:
        versions.append({"name": "v1beta1", "served": True, "storage": False,
                         "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}})
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": scope, "names": {"kind": "Widget", "plural": "widgets"},
                     "versions": versions}}


def widget(name: str = "w", group: str = "example.com", version: str = "v1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{group}/{version}", "kind": "Widget", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


@pytest.fixture
def store() -> Store:
    return Store(VirtualClock())


def test_a_crd_is_established_and_its_kind_served(store: Store) -> None:
    with pytest.raises(Exception, match='no kind "Widget" is registered'):
        store.create(widget(size=1))
    c = store.create(crd())
    assert isinstance(c, CustomResourceDefinition) and c.established
    assert [x["type"] for x in c.raw["status"]["conditions"]] == ["NamesAccepted", "Established"]
    w = store.create(widget(size=2, junk=True))
    assert isinstance(w, CustomObject) and type(w).KIND_KEY == "widgets.example.com"
    assert w.raw["spec"] == {"size": 2, "color": "red"} and w.generation == 1
    assert store.get("widgets.example.com", "default", "w") is w
    assert store.get("Widget", "default", "w") is w
    with pytest.raises(Invalid) as ei:
        store.create(widget("bad", size=0))
    assert ei.value.message == ('Widget.example.com "bad" is invalid: spec.size: Invalid value: 0: spec.size in body '
                                "should be greater than or equal to 1")
    with pytest.raises(Invalid):
        store.create(widget("bad", color="blue"))


def test_storage_version_status_subresource_and_generation(store: Store) -> None:
    store.create(crd(extra_version=True))
    w = store.create(widget(version="v1beta1", size=1, anything="kept"))
    assert w.raw["apiVersion"] == "example.com/v1" and w.raw["spec"]["anything"] == "kept"
    raw = w.deepcopy_raw()
    raw["status"] = {"ready": True}
    w2 = store.update(raw)  # the main resource ignores status changes
    assert "status" not in w2.raw and w2.resource_version == w.resource_version
    w3 = store.update_status(raw)
    assert w3.raw["status"] == {"ready": True} and w3.generation == 1
    raw = w3.deepcopy_raw()
    raw["spec"]["size"] = 5
    w4 = store.update(raw)
    assert w4.generation == 2 and w4.raw["status"] == {"ready": True}
    w5 = store.patch("Widget", "default", "w", {"spec": {"size": 6}})
    assert w5.raw["spec"]["size"] == 6 and w5.generation == 3


def test_watches_of_custom_kinds(store: Store) -> None:
    store.create(crd())
    w = store.watch("widgets.example.com", "default")
    store.create(widget(size=1))
    store.patch("Widget", "default", "w", {"spec": {"size": 2}})
    store.delete("Widget", "default", "w")
    assert [e.type for e in w.drain()] == [ADDED, MODIFIED, DELETED]


def test_updating_a_crd_serves_the_new_definition(store: Store) -> None:
    store.create(crd())
    store.create(widget(size=1))
    raw = store.get("CustomResourceDefinition", "", "widgets.example.com").deepcopy_raw()
    raw["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]["maximum"] = 3
    store.update(raw)
    with pytest.raises(Invalid, match="should be less than or equal to 3"):
        store.create(widget("big", size=9))
    assert store.get("Widget", "default", "w").raw["spec"]["size"] == 1
    raw = store.get("CustomResourceDefinition", "", "widgets.example.com").deepcopy_raw()
    raw["spec"]["scope"] = "Cluster"
    with pytest.raises(Invalid, match=re.escape('spec.scope: Invalid value: "Cluster": field is immutable')):
        store.update(raw)


def test_deleting_a_crd_deletes_its_objects_and_stops_serving(store: Store) -> None:
    store.create(crd())
    store.create(widget("a", size=1))
    store.create(widget("b", size=1))
    w = store.watch("Widget")
    assert len(w.drain()) == 2  # the objects there now
    store.delete("CustomResourceDefinition", "", "widgets.example.com")
    evs = w.drain()
    assert [(e.type, e.object.name) for e in evs if e.object is not None] == [(DELETED, "a"), (DELETED, "b")]
    assert w.closed
    with pytest.raises(NotFound):
        store.list("Widget")
    with pytest.raises(Exception, match='no kind "Widget"'):
        store.create(widget(size=1))
    # Defined again: served again, empty.
    store.create(crd())
    assert store.list("Widget")[0] == []


def test_invalid_and_conflicting_crds(store: Store) -> None:
    bad = crd()
    bad["spec"]["versions"][0].pop("schema")
    with pytest.raises(Invalid, match="schemas are required"):
        store.create(bad)
    assert store.count("CustomResourceDefinition") == 0
    store.create(crd())
    other = crd()
    other["metadata"]["name"] = "gadgets.example.com"
    other["spec"]["names"]["plural"] = "gadgets"
    c = store.create(other)
    assert not c.established and c.condition("NamesAccepted")["reason"] == "KindConflict"  # type: ignore[index]
    assert store.scheme.resolve("gadgets.example.com") is None


def test_custom_kinds_belong_to_their_store() -> None:
    a, b = Store(VirtualClock()), Store(VirtualClock())
    a.create(crd())
    a.create(widget(size=1))
    assert b.scheme.resolve("Widget") is None
    with pytest.raises(NotFound):
        b.list("Widget")


def test_namespace_deletion_removes_custom_objects() -> None:
    """The namespace controller deletes custom objects too (it asks the client's scheme, as
    upstream asks discovery)."""
    cluster = EmbeddedCluster(VirtualClock())
    store = cluster.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    store.create(crd())
    raw = widget(size=1)
    raw["metadata"]["namespace"] = "team"
    store.create(raw)
    store.delete("Namespace", "", "team")
    cluster.clock.advance(10)  # the controller's grace period before deleting content
    cluster.controllers.settle()
    assert store.list("Widget")[0] == []
    assert store.try_get("Namespace", "", "team") is None


def test_persistence_restores_crds_and_their_objects(tmp_path: Path) -> None:
    s1 = Store(VirtualClock())
    p1 = SqlitePersistence(tmp_path / "db.sqlite")
    p1.attach(s1)
    s1.create(crd(scope="Cluster", group="a.example.com"))
    w = {"apiVersion": "a.example.com/v1", "kind": "Widget", "metadata": {"name": "cw"}, "spec": {"size": 3}}
    s1.create(w)
    p1.close()
    s2 = Store(VirtualClock())
    p2 = SqlitePersistence(tmp_path / "db.sqlite")
    p2.attach(s2)
    got = s2.get("widgets.a.example.com", "", "cw")
    assert isinstance(got, CustomObject) and got.raw["spec"] == {"size": 3, "color": "red"}
    # Served after the restart: new objects validate against the restored definition.
    with pytest.raises(Invalid):
        s2.create({**w, "metadata": {"name": "x"}, "spec": {"size": 0}})
    s2.create({**w, "metadata": {"name": "y"}})
    p2.close()


def test_an_exported_crd_with_the_cleanup_finalizer_is_deleted(store: Store) -> None:
    raw = crd()
    raw["metadata"].update(finalizers=["customresourcecleanup.apiextensions.k8s.io"], uid="u",
                           resourceVersion="5", creationTimestamp="2024-01-01T00:00:00Z")
    store.create(raw, existing=True)
    store.create(widget(size=1))
    store.delete("CustomResourceDefinition", "", "widgets.example.com")
    assert store.count("CustomResourceDefinition") == 0 and store.scheme.resolve("Widget") is None
