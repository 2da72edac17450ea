"""ControllerRevisions (ksched.controllers.history, upstream's controller_history.go): names
``<parent>-<hash>`` (the parent cut to 223 characters), the hash of the data and the collision
count, a name taken by other data retried with a higher count, the same data found again,
semantic equality, sorting."""

from __future__ import annotations

import re

import pytest

from api_objects import mksts
from ksched.api.apps import ControllerRevision
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.controllers.history import (
    controller_revision_name,
    create_controller_revision,
    equal_revision,
    hash_controller_revision,
    new_controller_revision,
    sort_revisions,
    template_patch,
)


@pytest.fixture
def store(clock: VirtualClock) -> Store:
    """A plain store: the StatefulSet made here has no controller acting on it."""
    return Store(clock)


DATA = template_patch({"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}})


def test_names_and_hashes() -> None:
    h = hash_controller_revision(DATA, None)
    assert re.fullmatch(r"[456789bcdf]{1,10}", h)
    assert hash_controller_revision(DATA, 0) != h != hash_controller_revision(DATA, 1)
    assert controller_revision_name("web", "abc") == "web-abc"
    assert controller_revision_name("x" * 300, "abc") == "x" * 223 + "-abc"
    assert DATA["spec"]["template"]["$patch"] == "replace"


def test_a_taken_name_bumps_the_collision_count(store: Store) -> None:
    client = InProcessClient(store)
    parent = store.create(mksts("db"))
    rev = new_controller_revision(parent, {"app": "db"}, DATA, 1, 0)
    assert rev["metadata"]["labels"] == {"app": "db", "controller.kubernetes.io/hash": hash_controller_revision(DATA, 0)}
    # Someone else's revision already has the name this one hashes to.
    squatter = {**rev, "metadata": {**rev["metadata"], "ownerReferences": []}, "data": {"other": True}}
    store.create(squatter)
    created, collisions = create_controller_revision(client, parent, rev, 0)
    assert collisions == 1 and created.name == f"db-{hash_controller_revision(DATA, 1)}"
    assert created.controller_ref().uid == parent.uid  # type: ignore[union-attr]
    # The same data again: the existing revision, no new count.
    again, collisions = create_controller_revision(client, parent, rev, 1)
    assert (again.name, collisions) == (created.name, 1)


def test_equality_is_semantic_and_sorting() -> None:
    def cr(name: str, revision: int, data: object, created: int = 0) -> ControllerRevision:
        return ControllerRevision({"metadata": {"name": name, "creationTimestamp": f"2025-01-01T00:00:0{created}Z"},
                                   "data": data, "revision": revision})

    same = template_patch({"metadata": {"labels": {"app": "db"}, "annotations": {}},
                           "spec": {"containers": [{"name": "c", "image": "i", "ports": []}]}})
    assert equal_revision(cr("a", 1, DATA), cr("b", 2, same))
    assert not equal_revision(cr("a", 1, DATA), cr("b", 2, template_patch({"spec": {}})))
    assert equal_revision(None, None) and not equal_revision(cr("a", 1, DATA), None)
    revs = [cr("c", 2, DATA), cr("b", 1, DATA, 2), cr("a", 1, DATA, 2), cr("z", 1, DATA, 1)]
    assert [r.name for r in sort_revisions(revs)] == ["z", "a", "b", "c"]
