"""``ksched.api.blockyaml.FAST_TAGS`` (a plain scalar no implicit resolver applies to, by its
first character, is a string without PyYAML's resolver) against the reference (every new
scalar resolved by the resolver): the same tag for any scalar text, and the same documents or
decline for whole texts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.api.test_blockyaml import _ACCEPTED, _DECLINED, near_misses
from tests.api.test_blockyaml_plans import one_shape

from ksched.api import blockyaml
from ksched.api.blockyaml import read_documents


def _tag(text: str, fast: bool) -> str:
    saved = blockyaml.FAST_TAGS
    blockyaml.FAST_TAGS = fast
    blockyaml._tags.clear()
    try:
        return blockyaml._tag(text)
    finally:
        blockyaml.FAST_TAGS = saved


def _read(text: str, fast: bool) -> list[Any] | None:
    saved = blockyaml.FAST_TAGS
    blockyaml.FAST_TAGS = fast
    try:
        return read_documents(text, {})
    finally:
        blockyaml.FAST_TAGS = saved


_SCALARS = st.one_of(
    st.sampled_from(["", "a", "app-0001-00001", "yes", "No", "on", "OFF", "true", "y", "n", "null", "Null", "~",
                     "1", "-1", "+1", "0x1f", "0o17", "017", "1_000", "1.5", ".5", ".inf", ".NaN", "-.inf",
                     "2001-12-14", "2001-12-14t21:59:43.10-05:00", "<<", "=", "1:20", "190:20:30", "registry/x:1"]),
    st.text(alphabet="aynNtTfFoO~<=.+-019x:_ eE", max_size=6), st.text(max_size=4))


@settings(max_examples=1000, deadline=None)
@given(_SCALARS)
def test_every_scalar_gets_the_resolvers_tag(text: str) -> None:
    assert _tag(text, True) == _tag(text, False)


def test_a_name_is_a_string_without_being_remembered() -> None:
    blockyaml._tags.clear()
    assert blockyaml.FAST_TAGS
    assert blockyaml._tag("app-0001-00001") == "tag:yaml.org,2002:str"
    assert "app-0001-00001" not in blockyaml._tags
    assert blockyaml._tag("yes") == "tag:yaml.org,2002:bool"


@pytest.mark.parametrize("text", _ACCEPTED + _DECLINED)
def test_fixed_texts_read_alike(text: str) -> None:
    assert repr(_read(text, True)) == repr(_read(text, False))


@settings(max_examples=300, deadline=None)
@given(st.one_of(one_shape(), near_misses()))
def test_random_texts_read_alike(text: str) -> None:
    blockyaml._tags.clear()
    want = repr(_read(text, False))
    blockyaml._tags.clear()
    assert repr(_read(text, True)) == want
