"""BoundedCache (ksched.boundedcache): a dict of at most ``maxsize`` entries that, when full,
forgets the entry stored first; reads do not change which entry that is."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.boundedcache import DEFAULT_MAXSIZE, BoundedCache


@pytest.mark.parametrize("maxsize", [0, -1])
def test_maxsize_below_one_is_refused(maxsize: int) -> None:
    with pytest.raises(ValueError, match="maxsize must be at least 1"):
        BoundedCache(maxsize)


def test_default_maxsize() -> None:
    assert BoundedCache().maxsize == DEFAULT_MAXSIZE == 4096


def test_put_returns_the_value_and_the_oldest_stored_entry_goes_first() -> None:
    c: BoundedCache[str, int] = BoundedCache(3)
    for i, k in enumerate("abcde"):
        assert c.put(k, i) == i
        assert len(c) <= 3
    assert dict(c) == {"c": 2, "d": 3, "e": 4}


def test_maxsize_one_keeps_the_last_entry() -> None:
    c: BoundedCache[str, int] = BoundedCache(1)
    c.put("a", 1)
    c.put("b", 2)
    assert dict(c) == {"b": 2}


def test_put_on_an_existing_key_replaces_its_value_without_evicting() -> None:
    c: BoundedCache[str, int] = BoundedCache(3)
    for i, k in enumerate("abc"):
        c.put(k, i)
    assert c.put("b", 20) == 20
    assert c.put("a", 10) == 10
    assert dict(c) == {"a": 10, "b": 20, "c": 2}


def test_reads_do_not_keep_an_entry_longer() -> None:
    """Not an LRU: the entry stored first goes first however often it is read."""
    c: BoundedCache[str, int] = BoundedCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c["a"] == 1 and c.get("a") == 1 and "a" in c
    c.put("c", 3)
    assert dict(c) == {"b": 2, "c": 3}


KEYS = st.sampled_from("abcdefg")


@settings(max_examples=200, deadline=None)
@given(maxsize=st.integers(1, 5),
       ops=st.lists(st.one_of(st.tuples(st.just("put"), KEYS, st.integers()),
                              st.tuples(st.just("read"), KEYS, st.just(0))), max_size=40))
def test_random_operations_match_a_first_stored_first_forgotten_model(maxsize: int,
                                                                      ops: list[tuple[str, str, int]]) -> None:
    """The model: a list of (key, value) in the order keys were first stored; a full cache
    drops the head to store a new key; storing a present key replaces its value in place."""
    c: BoundedCache[str, int] = BoundedCache(maxsize)
    model: list[list[Any]] = []
    for op, k, v in ops:
        present = next((e for e in model if e[0] == k), None)
        if op == "read":
            assert c.get(k) == (present[1] if present else None)
            continue
        got = c.put(k, v)
        assert got == v
        if present is not None:
            present[1] = v
        else:
            if len(model) == maxsize:
                model.pop(0)
            model.append([k, v])
        assert len(c) <= maxsize
        assert list(c.items()) == [tuple(e) for e in model]
