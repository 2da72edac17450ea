"""ksched.api.jsoncodec writes what json.dumps writes for the JSON types and hands everything
else to the json module; reads what json.loads reads."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from enum import StrEnum
from typing import Any

import pytest

from ksched.api.jsoncodec import dumps, loads


def compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@pytest.mark.parametrize("obj", [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"b": "2", "a": "1"}},
     "spec": {"containers": [{"resources": {"requests": {"cpu": "100m"}}}], "priority": -5, "x": 1.5,
              "y": None, "z": [True, False], "big": 2**63 - 1, "neg": -(2**63)}},
    [], {}, "plain", 0, 1e100, -0.0,
])
def test_json_types_are_written_as_json_dumps_writes_them(obj: Any) -> None:
    assert dumps(obj) == compact(obj)
    assert loads(dumps(obj)) == obj


def test_non_ascii_is_utf8_and_reads_back_the_same() -> None:
    obj = {"message": "nœud plein — 节点"}
    assert dumps(obj) == '{"message":"nœud plein — 节点"}'.encode()
    assert loads(dumps(obj)) == loads(compact(obj)) == obj


def test_what_orjson_does_not_write_as_json_would_goes_to_json() -> None:
    class S(str):
        pass

    class Color(StrEnum):
        RED = "red"

    @dataclasses.dataclass
    class D:
        a: int

    assert dumps({"k": S("v"), "c": Color.RED}) == compact({"k": S("v"), "c": Color.RED})
    assert dumps({"huge": 2**70}) == compact({"huge": 2**70})
    assert dumps({1: "int key"}) == compact({1: "int key"})
    for bad in ({"t": datetime.datetime(2024, 1, 1)}, {"d": D(1)}):
        with pytest.raises(TypeError):
            json.dumps(bad)
        with pytest.raises(TypeError):
            dumps(bad)


def test_loads_reads_what_json_reads() -> None:
    assert loads(b'{"a":[1,2,{"b":null}]}') == {"a": [1, 2, {"b": None}]}
    # Beyond 64 bits a number is read as a float, as kube-apiserver's decoder reads it.
    assert loads('{"huge": 123456789012345678901234567890}') == {"huge": 1.2345678901234568e29}
    assert loads('{"max": 18446744073709551615}') == {"max": 2**64 - 1}
    assert math.isnan(loads("NaN")) and loads("Infinity") == math.inf
    with pytest.raises(ValueError):
        loads(b"{not json")
