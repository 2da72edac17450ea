"""A store on a virtual clock numbers its uids: ``Store._new_uid`` writes counters below 2^48
with their four leading groups as zeros, which is the reference format (``_uid_of``: the
counter's 32 hex digits in a UUID's five groups) of those counters."""

from __future__ import annotations

import itertools

from hypothesis import example, given
from hypothesis import strategies as st

from ksched.apiserver.store import _SHORT_UID, Store, _uid_of
from ksched.clock import VirtualClock


@given(st.one_of(st.integers(0, _SHORT_UID + 5), st.integers(0, (1 << 128) - 1)))
@example(0)
@example(1)
@example(_SHORT_UID - 1)
@example(_SHORT_UID)
@example((1 << 128) - 1)
def test_uids_are_the_reference_format(n: int) -> None:
    store = Store(VirtualClock(1000.0))
    store._uid_counter = itertools.count(n)
    got = store._new_uid()
    assert got == _uid_of(n)
    assert [len(g) for g in got.split("-")] == [8, 4, 4, 4, 12]


def test_created_objects_get_the_next_numbers() -> None:
    store = Store(VirtualClock(1000.0))
    a = store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}})
    b = store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "default"}})
    assert int(b.uid.replace("-", ""), 16) == int(a.uid.replace("-", ""), 16) + 1
    assert a.uid.startswith("00000000-0000-0000-0000-")
