"""Label selectors (equality and set-based), node selector terms and field selectors."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "EVERYTHING",
    "NOTHING",
    "FieldSelector",
    "LabelMatcher",
    "LabelSelector",
    "NodeSelector",
    "NodeSelectorTerm",
    "Requirement",
    "SelectorError",
    "compile_matcher",
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
            elif r.op == "NotIn" and len(r.values) == 1:
                parts.append(f"{r.key}!={r.values[0]}")
            elif r.op == "NotIn":
                parts.append(f"{r.key} notin ({','.join(r.values)})")
            elif r.op == "Exists":
                parts.append(r.key)
            elif r.op == "DoesNotExist":
                parts.append(f"!{r.key}")
            else:
                parts.append(f"{r.key}{'>' if r.op == 'Gt' else '<'}{r.values[0]}")
        return ",".join(parts)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector.nothing()

# ---- the selector string grammar, as k8s.io/apimachinery/pkg/labels/selector.go parses it

_SPECIAL = "=!(),><"
_OPERATORS = ("!=", "==", "=", "!", "(", ")", ",", ">", "<")
_IDENT, _IN, _NOTIN, _EOS = "identifier", "in", "notin", "end of string"
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


LabelMatcher = Callable[[Mapping[str, str]], bool]


def compile_matcher(sel: LabelSelector) -> LabelMatcher:
    """A fast function equivalent to ``sel.matches`` (each requirement compiled to a closure)."""
    if sel.is_nothing():
        return lambda labels: False
    checks: list[LabelMatcher] = []
    for r in sel.requirements:
        k = r.key
        if r.op == "In" and len(r.values) == 1:
            v = r.values[0]
            checks.append(lambda labels, k=k, v=v: labels.get(k) == v)  # type: ignore[misc]
        elif r.op == "In":
            vs = frozenset(r.values)
            checks.append(lambda labels, k=k, vs=vs: labels.get(k) in vs)  # type: ignore[misc]
        elif r.op == "NotIn":
            vs = frozenset(r.values)
            checks.append(lambda labels, k=k, vs=vs: labels.get(k) not in vs)  # type: ignore[misc]
        elif r.op == "Exists":
            checks.append(lambda labels, k=k: k in labels)  # type: ignore[misc]
        elif r.op == "DoesNotExist":
            checks.append(lambda labels, k=k: k not in labels)  # type: ignore[misc]
        else:
            checks.append(r.matches)
    if not checks:
        return lambda labels: True
    if len(checks) == 1:
        return checks[0]
    return lambda labels: all(c(labels) for c in checks)


def _lex(text: str) -> list[tuple[str, str]]:
    """Tokens as (type, literal); an operator's type is its literal."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in _SPECIAL:
            two = text[i:i + 2]
            lit = two if two in ("!=", "==") else ch
            out.append((lit, lit))
            i += len(lit)
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] not in _SPECIAL:
            j += 1
        lit = text[i:j]
        out.append((_IN if lit == "in" else _NOTIN if lit == "notin" else _IDENT, lit))
        i = j
    out.append((_EOS, ""))
    return out


def _check_key(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return f"invalid label key {key!r}: prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (f"invalid label key {key!r}: name part must consist of alphanumeric characters, '-', '_' "
                "or '.', must start and end with an alphanumeric character, and be at most 63 characters")
    return None


def _check_value(v: str) -> str | None:
    if len(v) > 63 or not _LABEL_VALUE.match(v):
        return (f"invalid label value {v!r}: must be 63 characters or less and must be empty or begin and end "
                "with an alphanumeric character with '-', '_', '.' or alphanumerics between")
    return None


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _lex(text)
        self.pos = 0

    def err(self, msg: str) -> SelectorError:
        return SelectorError(f"unable to parse requirement: {msg} (in {self.text!r})")

    def peek(self, values: bool = True) -> tuple[str, str]:
        t, lit = self.toks[self.pos]
        if values and t in (_IN, _NOTIN):
            t = _IDENT  # in a value position the keywords are plain identifiers
        return t, lit

    def take(self, values: bool = True) -> tuple[str, str]:
        tok = self.peek(values)
        if self.pos < len(self.toks) - 1:
            self.pos += 1
        return tok

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            t, lit = self.peek()
            if t == _EOS:
                return reqs
            if t not in (_IDENT, "!"):
                raise self.err(f"found '{lit}', expected: !, identifier, or 'end of string'")
            reqs.append(self.requirement())
            t, lit = self.take()
            if t == _EOS:
                return reqs
            if t != ",":
                raise self.err(f"found '{lit}', expected: ',' or 'end of string'")
            t, lit = self.peek()
            if t not in (_IDENT, "!"):
                raise self.err(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        op = ""
        t, key = self.take()
        if t == "!":
            op = "DoesNotExist"
            t, key = self.take()
        if t != _IDENT:
            raise self.err(f"found '{key}', expected: identifier")
        why = _check_key(key)
        if why:
            raise self.err(why)
        if op or self.peek()[0] in (_EOS, ","):
            return Requirement(key, op or "Exists")
        t, lit = self.take(values=False)
        if t in (_IN, _NOTIN):
            values = self.set_values()
            return self.make(key, "In" if t == _IN else "NotIn", values)
        if t in ("=", "==", "!=", ">", "<"):
            values = self.exact_value()
            ops = {"=": "In", "==": "In", "!=": "NotIn", ">": "Gt", "<": "Lt"}
            return self.make(key, ops[t], values)
        raise self.err(f"found '{lit}', expected: in, notin, =, ==, !=, gt, lt")

    def set_values(self) -> list[str]:
        t, lit = self.take()
        if t != "(":
            raise self.err(f"found '{lit}', expected: '('")
        t, lit = self.peek()
        if t == ")":
            self.take()
            return [""]
        if t not in (_IDENT, ","):
            raise self.err(f"found '{lit}', expected: ',', ')' or identifier")
        vals: list[str] = []
        while True:
            t, lit = self.take()
            if t == _IDENT:
                vals.append(lit)
                t2, lit2 = self.peek()
                if t2 == ",":
                    continue
                if t2 == ")":
                    break
                raise self.err(f"found '{lit2}', expected: ',' or ')'")
            elif t == ",":
                if not vals:
                    vals.append("")  # "(,"
                t2, _ = self.peek()
                if t2 == ")":
                    vals.append("")  # ",)"
                    break
                if t2 == ",":
                    self.take()
                    vals.append("")  # ",,"
            else:
                raise self.err(f"found '{lit}', expected: ',', or identifier")
        t, lit = self.take()
        if t != ")":
            raise self.err(f"found '{lit}', expected: ')'")
        return vals

    def exact_value(self) -> list[str]:
        t, lit = self.peek()
        if t in (_EOS, ","):
            return [""]
        t, lit = self.take()
        if t == _IDENT:
            return [lit]
        raise self.err(f"found '{lit}', expected: identifier")

    def make(self, key: str, op: str, values: list[str]) -> Requirement:
        vals = tuple(sorted(set(values)))
        if op in ("Gt", "Lt"):
            try:
                int(vals[0])
            except ValueError:
                raise self.err(f"for 'Gt', 'Lt' operators, the value must be an integer: {vals[0]!r}") from None
        for v in vals:
            why = _check_value(v)
            if why:
                raise self.err(why)
        return Requirement(key, op, vals)


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the string form used in ``?labelSelector=`` and ``kubectl -l`` (``a=b,c!=d,e in (f,g),
    !h,i,j>1``) with upstream's grammar and checks; requirements are sorted by key, as upstream."""
    reqs = _Parser(text).parse()
    if not reqs:
        return EVERYTHING
    return LabelSelector(tuple(sorted(reqs, key=lambda r: r.key)))


class NodeSelectorTerm:
    """Requirements ANDed; an empty term matches no node (as upstream)."""

    __slots__ = ("fields", "labels")

    def __init__(self, labels: tuple[Requirement, ...], fields: tuple[Requirement, ...]) -> None:
        self.labels = labels
        self.fields = fields

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> NodeSelectorTerm:
        d = d or {}  # a null term decodes to an empty one (which matches nothing)
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


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    esc = False
    for ch in text:
        if esc:
            cur.append(ch)
            esc = False
        elif ch == "\\":
            cur.append(ch)
            esc = True
        elif ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _unescape_field_value(v: str, selector: str) -> str:
    out: list[str] = []
    esc = False
    for ch in v:
        if esc:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector {selector!r}: invalid escape sequence '\\{ch}'")
            out.append(ch)
            esc = False
        elif ch == "\\":
            esc = True
        elif ch in ",=":
            raise SelectorError(f"invalid field selector {selector!r}: invalid character '{ch}' in value; "
                                "',' and '=' must be escaped with a backslash")
        else:
            out.append(ch)
    if esc:
        raise SelectorError(f"invalid field selector {selector!r}: invalid escape sequence '\\'")
    return "".join(out)


def parse_field_selector(text: str) -> FieldSelector:
    """Parse ``metadata.name=x,spec.nodeName!=y`` as upstream's fields.ParseSelector: ``=``, ``==``
    and ``!=`` (the first operator in a term wins), ``\\``, ``\\,`` and ``\\=`` escapes in
    values, an unescaped ``,`` or ``=`` in a value is an error."""
    text = text.strip()
    terms = []
    for part in _split_unescaped(text, ","):
        if not part.strip():
            continue
        i, n = 0, len(part)
        found: tuple[int, str] | None = None
        while i < n:
            if part[i] == "\\":
                i += 2
                continue
            for op in ("!=", "==", "="):
                if part.startswith(op, i):
                    found = (i, op)
                    break
            if found:
                break
            i += 1
        if found is None:
            raise SelectorError(f"invalid field selector {part!r}: expected field=value or field!=value")
        pos, op = found
        field = part[:pos].strip()
        val = _unescape_field_value(part[pos + len(op):].strip(), text)
        terms.append((field, op != "!=", val))
    return FieldSelector(tuple(sorted(terms)))
