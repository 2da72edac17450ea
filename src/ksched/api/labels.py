"""Label selectors (equality and set-based), node selector terms and field selectors."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "EVERYTHING",
    "NOTHING",
    "FieldSelector",
    "LabelSelector",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "Requirement",
    "SelectorError",
    "parse_field_selector",
    "parse_label_selector",
]


class SelectorError(ValueError):
    """A selector string or object that cannot be parsed."""


class Requirement:
    """One label requirement: ``key op values`` with op in, notin, exists, !, =, ==, !=, gt, lt."""

    __slots__ = ("key", "op", "values")

    def __init__(self, key: str, op: str, values: tuple[str, ...] = ()) -> None:
        self.key = key
        self.op = op
        self.values = values

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op == "In":
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == "NotIn":
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        if op in ("Gt", "Lt"):
            v = labels.get(self.key)
            if v is None:
                return False
            try:
                lv = int(v)
                rv = int(self.values[0])
            except (ValueError, IndexError):
                return False
            return lv > rv if op == "Gt" else lv < rv
        raise SelectorError(f"unknown operator {op!r}")

    def __repr__(self) -> str:
        return f"Requirement({self.key!r}, {self.op!r}, {self.values!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Requirement) and (self.key, self.op, self.values) == (
            other.key, other.op, other.values)

    def __hash__(self) -> int:
        return hash((self.key, self.op, self.values))


class LabelSelector:
    """A metav1.LabelSelector (``matchLabels`` + ``matchExpressions``), or a parsed selector string.

    An empty selector matches everything; ``LabelSelector.nothing()`` matches nothing (as a nil
    selector does where upstream uses ``labels.Nothing()``).
    """

    __slots__ = ("_nothing", "key", "requirements")

    def __init__(self, requirements: tuple[Requirement, ...] = (), nothing: bool = False) -> None:
        self.requirements = requirements
        self._nothing = nothing
        self.key = (nothing, requirements)

    @classmethod
    def nothing(cls) -> LabelSelector:
        return cls((), nothing=True)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> LabelSelector:
        """From the API form; ``None`` (a nil selector) matches nothing."""
        if d is None:
            return NOTHING
        reqs: list[Requirement] = []
        for k, v in sorted((d.get("matchLabels") or {}).items()):
            reqs.append(Requirement(k, "In", (str(v),)))
        for e in d.get("matchExpressions") or ():
            op = e.get("operator", "")
            if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
                raise SelectorError(f"{op!r} is not a valid label selector operator")
            reqs.append(Requirement(e.get("key", ""), op, tuple(str(x) for x in (e.get("values") or ()))))
        return cls(tuple(reqs))

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self._nothing:
            return False
        for r in self.requirements:
            if not r.matches(labels):
                return False
        return True

    def is_empty(self) -> bool:
        return not self._nothing and not self.requirements

    def is_nothing(self) -> bool:
        return self._nothing

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LabelSelector) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        if self._nothing:
            return "LabelSelector(<nothing>)"
        return f"LabelSelector({self!s})"

    def __str__(self) -> str:
        parts = []
        for r in self.requirements:
            if r.op == "In" and len(r.values) == 1:
                parts.append(f"{r.key}={r.values[0]}")
            elif r.op == "In":
                parts.append(f"{r.key} in ({','.join(r.values)})")
            elif r.op == "NotIn":
                parts.append(f"{r.key} notin ({','.join(r.values)})")
            elif r.op == "Exists":
                parts.append(r.key)
            elif r.op == "DoesNotExist":
                parts.append(f"!{r.key}")
            else:
                parts.append(f"{r.key} {r.op.lower()} {r.values[0]}")
        return ",".join(parts)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector.nothing()

_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the string form used in ``?labelSelector=`` (``a=b,c!=d,e in (f,g),!h,i``)."""
    text = text.strip()
    if not text:
        return EVERYTHING
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise SelectorError(f"unable to parse requirement: {text!r}")
        tokens.append(m.group(1))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    reqs: list[Requirement] = []
    i = 0

    def expect_value() -> str:
        nonlocal i
        if i >= len(tokens) or tokens[i] in ("=", "==", "!=", "(", ")", ",", "!"):
            raise SelectorError(f"expected a value in {text!r}")
        v = tokens[i]
        i += 1
        return v

    while i < len(tokens):
        tok = tokens[i]
        if tok == "!":
            i += 1
            reqs.append(Requirement(expect_value(), "DoesNotExist"))
        else:
            key = tok
            i += 1
            if i >= len(tokens) or tokens[i] == ",":
                reqs.append(Requirement(key, "Exists"))
            elif tokens[i] in ("=", "=="):
                i += 1
                val = tokens[i] if i < len(tokens) and tokens[i] not in (",",) else ""
                if val:
                    i += 1
                reqs.append(Requirement(key, "In", (val,)))
            elif tokens[i] == "!=":
                i += 1
                val = tokens[i] if i < len(tokens) and tokens[i] not in (",",) else ""
                if val:
                    i += 1
                reqs.append(Requirement(key, "NotIn", (val,)))
            elif tokens[i] in ("in", "notin"):
                op = "In" if tokens[i] == "in" else "NotIn"
                i += 1
                if i >= len(tokens) or tokens[i] != "(":
                    raise SelectorError(f"expected '(' after {tokens[i - 1]!r} in {text!r}")
                i += 1
                vals: list[str] = []
                while i < len(tokens) and tokens[i] != ")":
                    if tokens[i] == ",":
                        i += 1
                        continue
                    vals.append(tokens[i])
                    i += 1
                if i >= len(tokens):
                    raise SelectorError(f"missing ')' in {text!r}")
                i += 1
                reqs.append(Requirement(key, op, tuple(vals)))
            elif tokens[i] in ("gt", "lt"):
                op = "Gt" if tokens[i] == "gt" else "Lt"
                i += 1
                reqs.append(Requirement(key, op, (expect_value(),)))
            else:
                raise SelectorError(f"unable to parse requirement {key!r} in {text!r}")
        if i < len(tokens):
            if tokens[i] != ",":
                raise SelectorError(f"expected ',' in {text!r}")
            i += 1
    return LabelSelector(tuple(reqs))


class NodeSelectorRequirement:
    """A requirement of a node selector term on a label (``matchExpressions``) or a field
    (``matchFields``, only ``metadata.name``)."""

    __slots__ = ("key", "op", "values")

    def __init__(self, key: str, op: str, values: tuple[str, ...]) -> None:
        self.key = key
        self.op = op
        self.values = values

    def matches_labels(self, labels: Mapping[str, str]) -> bool:
        return Requirement(self.key, self.op, self.values).matches(labels)


class NodeSelectorTerm:
    """Requirements ANDed; an empty term matches no node (as upstream)."""

    __slots__ = ("fields", "labels")

    def __init__(self, labels: tuple[Requirement, ...], fields: tuple[Requirement, ...]) -> None:
        self.labels = labels
        self.fields = fields

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeSelectorTerm:
        labels = tuple(
            Requirement(e.get("key", ""), e.get("operator", ""), tuple(str(v) for v in e.get("values") or ()))
            for e in d.get("matchExpressions") or ())
        fields = tuple(
            Requirement(e.get("key", ""), e.get("operator", ""), tuple(str(v) for v in e.get("values") or ()))
            for e in d.get("matchFields") or ())
        return cls(labels, fields)

    def is_empty(self) -> bool:
        return not self.labels and not self.fields

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.labels and not self.fields:
            return False
        for r in self.labels:
            if not r.matches(labels):
                return False
        if self.fields:
            fields = {"metadata.name": node_name}
            for r in self.fields:
                if r.key != "metadata.name" or not r.matches(fields):
                    return False
        return True

    def key(self) -> tuple[Any, ...]:
        return (tuple((r.key, r.op, r.values) for r in self.labels),
                tuple((r.key, r.op, r.values) for r in self.fields))


class NodeSelector:
    """Terms ORed (``nodeSelectorTerms``)."""

    __slots__ = ("terms",)

    def __init__(self, terms: tuple[NodeSelectorTerm, ...]) -> None:
        self.terms = terms

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeSelector:
        return cls(tuple(NodeSelectorTerm.from_dict(t) for t in d.get("nodeSelectorTerms") or ()))

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        for t in self.terms:
            if t.matches(node_name, labels):
                return True
        return False

    def key(self) -> tuple[Any, ...]:
        return tuple(t.key() for t in self.terms)


class FieldSelector:
    """A field selector: ``metadata.name=x,spec.nodeName!=y`` (equality only, as the API server)."""

    __slots__ = ("terms",)

    def __init__(self, terms: tuple[tuple[str, bool, str], ...]) -> None:
        self.terms = terms  # (field, equal, value)

    def matches(self, fields: Mapping[str, str]) -> bool:
        for f, eq, v in self.terms:
            if (fields.get(f, "") == v) != eq:
                return False
        return True

    def is_empty(self) -> bool:
        return not self.terms

    def fields(self) -> set[str]:
        return {f for f, _, _ in self.terms}


def parse_field_selector(text: str) -> FieldSelector:
    text = text.strip()
    if not text:
        return FieldSelector(())
    terms = []
    for part in text.split(","):
        part = part.strip()
        if "!=" in part:
            f, v = part.split("!=", 1)
            terms.append((f.strip(), False, v.strip()))
        elif "==" in part:
            f, v = part.split("==", 1)
            terms.append((f.strip(), True, v.strip()))
        elif "=" in part:
            f, v = part.split("=", 1)
            terms.append((f.strip(), True, v.strip()))
        else:
            raise SelectorError(f"invalid field selector {part!r}: expected field=value or field!=value")
    return FieldSelector(tuple(terms))
