"""Structural schemas of custom resources (ksched.api.structural): value validation with
upstream's field paths and messages, pruning of unknown fields and nulls, defaulting, and the
structural checks a CRD's schema must pass."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.errors import Path
from ksched.api.structural import Schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "ratio": {"type": "number", "exclusiveMaximum": True, "maximum": 1},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
                "email": {"type": "string", "format": "email"},
                "when": {"type": "string", "format": "date-time"},
                "port": {"x-kubernetes-int-or-string": True},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "port": {"type": "integer"}}},
                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "maybe": {"type": "string", "nullable": True},
                "replicas": {"type": "integer", "default": 1},
                "nested": {"type": "object", "default": {}, "properties": {
                    "mode": {"type": "string", "default": "fast"}}},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


def check(obj: dict[str, Any]) -> list[str]:
    return [str(e) for e in Schema(SCHEMA).validate(obj, Path(""), root=True)]


@pytest.mark.parametrize(("spec", "want"), [
    ({"size": 3}, []),
    ({}, ["spec.size: Required value"]),
    ({"size": "big"}, ['spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"']),
    ({"size": 3.0}, []),  # a JSON number that is an integer
    ({"size": True}, ['spec.size: Invalid value: "boolean": spec.size in body must be of type integer: "boolean"']),
    ({"size": 11}, ["spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"]),
    ({"size": 0}, ["spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"]),
    ({"size": 1, "ratio": 1}, ["spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"]),
    ({"size": 1, "color": "pink"}, ['spec.color: Unsupported value: "pink": supported values: "red", "blue"']),
    ({"size": 1, "name": "a"}, ['spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long']),
    ({"size": 1, "name": "abcdef"}, ["spec.name: Too long: may not be more than 5 bytes"]),
    ({"size": 1, "name": "AB"}, ["spec.name: Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'"]),
    ({"size": 1, "email": "nope"}, ['spec.email: Invalid value: "nope": spec.email in body must be of type email: '
                                    '"nope"']),
    ({"size": 1, "when": "2024-01-02T03:04:05Z"}, []),
    ({"size": 1, "when": "yesterday"}, ['spec.when: Invalid value: "yesterday": spec.when in body must be of type '
                                        'date-time: "yesterday"']),
    ({"size": 1, "port": 80}, []),
    ({"size": 1, "port": "http"}, []),
    ({"size": 1, "port": [80]}, ['spec.port: Invalid value: "array": spec.port in body must be of type '
                                 'integer,string: "array"']),
    ({"size": 1, "tags": ["a", "b", "c"]}, ["spec.tags: Too many: 3: must have at most 2 items"]),
    ({"size": 1, "tags": ["a", "a"]}, ['spec.tags[1]: Duplicate value: "a"']),
    ({"size": 1, "ports": [{"name": "x", "port": 1}, {"name": "x", "port": 2}]},
     ['spec.ports[1]: Duplicate value: map[string]interface {}{name: "x"}']),
    ({"size": 1, "labels": {"a": "b", "c": 1}}, ['spec.labels.c: Invalid value: "integer": spec.labels.c in body '
                                                 'must be of type string: "integer"']),
    ({"size": 1, "free": {"anything": [1, {"goes": True}]}}, []),
    ({"size": 1, "maybe": None}, []),
])
def test_value_validation(spec: dict[str, Any], want: list[str]) -> None:
    assert check({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}) == want


def test_pruning_drops_unknown_fields_and_keeps_what_the_schema_allows() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "b"}},
           "spec": {"size": 1, "extra": 1, "free": {"x": {"y": 1}}, "labels": {"k": "v"}, "maybe": None,
                    "color": None, "ports": [{"name": "a", "bogus": 1}]},
           "status": {"ready": True, "junk": 2}, "unknownTop": {}}
    dropped = Schema(SCHEMA).prune(obj, root=True)
    assert sorted(dropped) == ["spec.extra", "spec.ports[0].bogus", "status.junk", "unknownTop"]
    assert obj == {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "b"}},
                   "spec": {"size": 1, "free": {"x": {"y": 1}}, "labels": {"k": "v"}, "maybe": None,
                            "ports": [{"name": "a"}]},
                   "status": {"ready": True}}


def test_defaulting_fills_absent_fields_only_and_recurses_into_defaults() -> None:
    obj: dict[str, Any] = {"spec": {"size": 1, "replicas": 3}}
    Schema(SCHEMA).default_in(obj)
    assert obj["spec"] == {"size": 1, "replicas": 3, "color": "red", "nested": {"mode": "fast"}}


def test_an_object_without_spec_gets_no_spec() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "w"}}
    Schema(SCHEMA).default_in(obj)
    assert "spec" not in obj


@pytest.mark.parametrize(("schema", "want"), [
    ({"type": "object", "properties": {"a": {"type": "string"}}}, []),
    ({"type": "string"}, ['s.type: Invalid value: "string": must be object at the root']),
    ({"type": "object", "properties": {"a": {"description": "no type"}}},
     ["s.properties[a].type: Required value: must not be empty for specified object fields"]),
    ({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": True}}}, []),
    ({"type": "object", "properties": {"a": {"type": "array"}}}, ["s.properties[a].items: Required value: must be "
                                                                  "specified"]),
    ({"type": "object", "properties": {"a": {"type": "thing"}}},
     ['s.properties[a].type: Unsupported value: "thing": supported values: "object", "array", "string", "integer", '
      '"number", "boolean"']),
    ({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}},
                                             "additionalProperties": {"type": "string"}}}},
     ["s.properties[a].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"]),
    ({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}},
     ["s.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata "
      "is implicitly specified"]),
    ({"type": "object", "properties": {"n": {"type": "integer", "maximum": 3, "default": 5}}},
     ["s.properties[n].default: Invalid value: 5: body should be less than or equal to 3"]),
    ({"type": "object", "properties": {"o": {"type": "object", "default": {"x": 1}, "properties": {
        "y": {"type": "string"}}}}},
     ['s.properties[o].default: Invalid value: {"x":1}: must not have unknown fields: x']),
])
def test_structural_checks(schema: dict[str, Any], want: list[str]) -> None:
    assert [str(e) for e in Schema(schema).check(Path("s"))] == want


_values = st.recursive(st.none() | st.booleans() | st.integers(-5, 20) | st.text(max_size=4),
                       lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(
                           ["size", "color", "tags", "free", "x", "name", "nested", "mode"]), c, max_size=4),
                       max_leaves=10)


def _only_known(value: Any, schema: Schema, root: bool = False) -> bool:
    if isinstance(value, dict):
        for k, v in value.items():
            if root and k in ("apiVersion", "kind", "metadata"):
                continue
            sub = schema.properties.get(k) or (schema.additional if isinstance(schema.additional, Schema) else None)
            if sub is None:
                if not (schema.preserve_unknown or schema.additional is True):
                    return False
                continue
            if v is None and not sub.nullable:
                return False
            if not _only_known(v, sub):
                return False
    elif isinstance(value, list) and schema.items is not None:
        return all(_only_known(it, schema.items) for it in value)
    return True


@given(st.dictionaries(st.sampled_from(["spec", "status", "kind", "other"]), _values, max_size=3))
@settings(max_examples=200, deadline=None)
def test_pruned_objects_hold_only_what_the_schema_specifies(obj: dict[str, Any]) -> None:
    schema = Schema(SCHEMA)
    schema.prune(obj, root=True)
    assert _only_known(obj, schema, root=True)
    # Pruning is idempotent and defaulting never removes anything.
    again = copy.deepcopy(obj)
    assert schema.prune(again, root=True) == [] and again == obj
    # Defaults are themselves pruned-clean: defaulting adds nothing the schema does not specify.
    schema.default_in(obj)
    assert _only_known(obj, schema, root=True)
