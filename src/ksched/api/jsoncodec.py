"""JSON for API objects, fast: orjson where it gives the json module's result, the json module
for the rest.

orjson parses 3x and writes 10-15x faster than the json module on pod-sized objects, which
matters where every pod crosses the wire (the REST client's watches and bindings, the API
server's lists and watch streams). ``loads`` falls back to ``json.loads`` for what orjson
refuses and the json module reads (NaN and Infinity, which are not JSON); it reads integers
beyond 64 bits as floats, as kube-apiserver's decoder does (the json module keeps them exact:
no Kubernetes API field holds one). ``dumps`` writes
the JSON types (what API objects hold: dict, list, str, int, float, bool, None) as compact
``json.dumps(obj, separators=(",", ":"))`` does, except that non-ASCII text is written as UTF-8
instead of ``\\u`` escapes (the same JSON text); anything else (datetimes, dataclasses,
subclasses of the JSON types, integers beyond 64 bits) goes to ``json.dumps``, so it is written,
or refused, exactly as before.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["dumps", "loads"]

_OPTS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def loads(data: bytes | bytearray | str) -> Any:
    """JSON text -> Python values."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumps(obj: Any) -> bytes:
    """Python values -> compact JSON (UTF-8 bytes)."""
    try:
        return orjson.dumps(obj, option=_OPTS)
    except TypeError:
        return json.dumps(obj, separators=(",", ":")).encode()
