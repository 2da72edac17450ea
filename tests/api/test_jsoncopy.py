"""``deep_copy`` equals ``copy.deepcopy`` on manifests and shares no mutable part with its input."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ksched.api.jsoncopy import deep_copy

_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5))
_tree = st.recursive(_scalar, lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.text(max_size=4), c,
                                                                                             max_size=4)),
                     max_leaves=30)


def _mutables(x: Any) -> list[int]:
    if isinstance(x, dict):
        return [id(x), *(i for v in x.values() for i in _mutables(v))]
    if isinstance(x, list):
        return [id(x), *(i for v in x for i in _mutables(v))]
    return []


@given(_tree)
def test_equal_and_unshared(x: Any) -> None:
    y = deep_copy(x)
    assert y == x
    assert not set(_mutables(x)) & set(_mutables(y))


def test_other_values_and_recursion() -> None:
    class Sub(dict):  # type: ignore[type-arg]
        pass

    when = datetime.datetime(2024, 1, 1)
    x = {"t": when, "s": Sub(a=[1]), "tup": (1, [2])}
    y = deep_copy(x)
    assert y == x and type(y["s"]) is Sub and y["s"]["a"] is not x["s"]["a"] and y["tup"][1] is not x["tup"][1]
    r: list[Any] = []
    r.append(r)
    c = deep_copy({"r": r})
    assert c["r"][0] is c["r"] and c["r"] is not r
