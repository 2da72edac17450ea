"""Server-side field validation (``fieldValidation=Strict|Warn|Ignore``), as kube-apiserver's
strict decoding (``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/{create,update,patch}.go``
with ``sigs.k8s.io/json``'s strict errors): a request body is compared with the kind's schema
(``ksched.apiserver.openapi``) for unknown fields, and a JSON body for duplicate fields.

* Strict: create/update answer 400 ``<Kind> in version "v1" cannot be handled as a <Kind>:
  strict decoding error: unknown field "spec.foo", duplicate field "metadata.name"``; a patch
  whose result has unknown fields answers 422 (``patch: Invalid value: ...``).
* Warn (the default): the request succeeds with one ``Warning: 299 - "unknown field \\"spec.foo\\""``
  header per problem.
* Ignore: silently.

Unknown fields are never stored (upstream decodes into Go types, which have no place for them):
under Warn and Ignore they are dropped from the object.

Known divergences: duplicates are found in JSON bodies only (not YAML); for a patch only the
fields the patch brings are judged (an object stored in-process with fields unknown to the
schema is not blamed on a later patch)."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

from ksched.api.errors import BadRequest, Invalid
from ksched.apiserver.openapi import SchemaSet

__all__ = ["DIRECTIVES", "FieldValidator", "Pairs", "directive", "duplicate_fields", "loads_with_duplicates", "plain",
           "warning_header"]

DIRECTIVES = ("Ignore", "Warn", "Strict")


def directive(value: str | None) -> str:
    """The request's directive (Warn when absent); anything else is a 400."""
    if value is None or value == "":
        return "Warn"
    if value not in DIRECTIVES:
        raise BadRequest(f'fieldValidation must be one of "Ignore", "Warn" or "Strict", got "{value}"')
    return value


class Pairs(dict):  # type: ignore[type-arg]
    """A JSON object that remembers the keys it had more than once."""

    __slots__ = ("duplicates",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        seen: set[str] = set()
        dups: list[str] = []
        for k, _ in pairs:
            if k in seen and k not in dups:
                dups.append(k)
            seen.add(k)
        self.duplicates = dups

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}  # a plain copy


def loads_with_duplicates(raw: bytes | str) -> Any:
    """``json.loads`` whose objects are :class:`Pairs` (the last value of a duplicate wins, as in Go)."""
    return json.loads(raw, object_pairs_hook=Pairs)


def plain(v: Any) -> Any:
    """The same JSON value with plain dicts (what the store keeps)."""
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def duplicate_fields(v: Any, path: str = "") -> list[str]:
    """The duplicate fields of a value parsed by :func:`loads_with_duplicates`, in document order."""
    out: list[str] = []
    if isinstance(v, dict):
        out += [f'duplicate field "{_child(path, k)}"' for k in getattr(v, "duplicates", ())]
        for k, item in v.items():
            out += duplicate_fields(item, _child(path, k))
    elif isinstance(v, list):
        for i, item in enumerate(v):
            out += duplicate_fields(item, f"{path}[{i}]")
    return out


def warning_header(message: str) -> str:
    """An RFC 7234 warning as kube-apiserver sends it: ``299 - "<escaped message>"``."""
    return '299 - "' + message.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class FieldValidator:
    """Finds (and drops) unknown fields of objects of the served kinds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._schemas: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}

    def _root(self, cls: Any) -> tuple[str, dict[str, Any]]:
        # SCHEMA_KEY: a custom kind's schema changes with its CRD.
        key = (cls.API_VERSION, cls.KIND, getattr(cls, "SCHEMA_KEY", ""))
        with self._lock:
            got = self._schemas.get(key)
            if got is None:
                s = SchemaSet("#/components/schemas/")
                name, _ = s.add_kind(cls)
                got = self._schemas[key] = (name, s.schemas)
        return got

    def problems(self, cls: Any, obj: Any, *, prune: bool = False,
                 ignore: frozenset[str] = frozenset()) -> list[str]:
        """Unknown and duplicate fields of ``obj`` in document order (``unknown field "spec.foo"``).
        With ``prune`` the unknown fields are removed from ``obj``. Paths in ``ignore`` are not
        reported (and not pruned)."""
        name, schemas = self._root(cls)
        out: list[str] = []
        self._walk(schemas, schemas[name], obj, "", out, prune, ignore)
        return out

    def _resolve(self, schemas: dict[str, Any], s: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in s:
            s = schemas[s["$ref"].rsplit("/", 1)[1]]
        return s

    def _walk(self, schemas: dict[str, Any], s: dict[str, Any], v: Any, path: str, out: list[str], prune: bool,
              ignore: frozenset[str]) -> None:
        s = self._resolve(schemas, s)
        if isinstance(v, dict):
            for k in getattr(v, "duplicates", ()):
                out.append(f'duplicate field "{_child(path, k)}"')
            props = s.get("properties")
            if s.get("x-kubernetes-preserve-unknown-fields") or not isinstance(props, dict):
                extra = s.get("additionalProperties")
                if isinstance(extra, dict):
                    for k, item in v.items():
                        self._walk(schemas, extra, item, _child(path, k), out, prune, ignore)
                return
            for k in list(v):
                p = _child(path, k)
                sub = props.get(k)
                if sub is None:
                    if p in ignore:
                        continue
                    out.append(f'unknown field "{p}"')
                    if prune:
                        del v[k]
                    continue
                self._walk(schemas, sub, v[k], p, out, prune, ignore)
        elif isinstance(v, list):
            items = s.get("items")
            if isinstance(items, dict):
                for i, item in enumerate(v):
                    self._walk(schemas, items, item, f"{path}[{i}]", out, prune, ignore)

    def check_body(self, cls: Any, obj: dict[str, Any], mode: str) -> list[str]:
        """Judge a create/update body: raise under Strict, else drop the unknown fields and
        answer the warnings to send (none under Ignore)."""
        problems = self.problems(cls, obj, prune=mode != "Strict")
        if not problems:
            return []
        if mode == "Strict":
            version = cls.API_VERSION.rpartition("/")[2]
            raise BadRequest(f'{cls.KIND} in version "{version}" cannot be handled as a {cls.KIND}: '
                             f"strict decoding error: {', '.join(problems)}")
        return problems if mode == "Warn" else []

    def check_patched(self, cls: Any, old: dict[str, Any], new: dict[str, Any], mode: str,
                      duplicates: list[str]) -> list[str]:
        """Judge the result of a patch: the duplicate fields of the patch and the unknown fields
        the result has that the object before did not (422 under Strict)."""
        before = {p.split('"')[1] for p in self.problems(cls, old)}
        problems = duplicates + self.problems(cls, new, prune=mode != "Strict", ignore=frozenset(before))
        if not problems:
            return []
        if mode == "Strict":
            value = json.dumps(new, separators=(",", ":"))
            msg = f"strict decoding error: {', '.join(problems)}"
            raise Invalid(f' "" is invalid: patch: Invalid value: {json.dumps(value)}: {msg}',
                          causes=[{"reason": "FieldValueInvalid", "message": f"Invalid value: {msg}",
                                   "field": "patch"}])
        return problems if mode == "Warn" else []
