"""Node selectors as the scheduler evaluates them (upstream's
``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``, which upstream's
``pkg/scheduler/framework/plugins/helper/node_affinity.go`` wraps), reusable by every plugin that
needs a pod's required node affinity (NodeAffinity, PodTopologySpread's nodeAffinityPolicy, ...).

Parsing follows upstream exactly: a term with no requirements matches nothing; a term whose
requirements do not parse (unknown operator, ``In`` without values, ``Gt`` with a non-integer,
an invalid label key or value, a field requirement other than a single-valued ``In``/``NotIn``)
never matches and contributes an error. ``RequiredNodeAffinity`` (the pod's ``nodeSelector``
AND its required terms) is lazy about errors: broken terms are skipped. ``PreferredSchedulingTerms``
and ``NodeSelector.strict`` report them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ksched.api.affinity import PreferredSchedulingTerm
from ksched.api.errors import aggregate_error_message
from ksched.api.labels import NodeSelector, NodeSelectorTerm, Requirement
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.boundedcache import BoundedCache
from ksched.scheduler.framework.template import template_cache

__all__ = [
    "OBJECT_NAME_FIELD",
    "CompiledNodeSelector",
    "NodeSelectorParseError",
    "PreferredSchedulingTerms",
    "RequiredNodeAffinity",
    "compile_node_selector",
    "compile_preferred_terms",
    "get_required_node_affinity",
    "parse_int64",
]

OBJECT_NAME_FIELD = "metadata.name"

_INT64_RE = re.compile(r"^[+-]?[0-9]+$")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE = re.compile("^" + _QUALIFIED_NAME_FMT + "$")
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                       "alphanumeric character")
_DNS1123_SUBDOMAIN_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_SUBDOMAIN_RE = re.compile("^" + _DNS1123_SUBDOMAIN_FMT + "$")
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                          "'.', and must start and end with an alphanumeric character")
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_LABEL_VALUE_RE = re.compile("^" + _LABEL_VALUE_FMT + "$")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")


class NodeSelectorParseError(ValueError):
    """A node selector that does not parse (upstream's aggregated field errors)."""


def parse_int64(s: str) -> int | None:
    """``strconv.ParseInt(s, 10, 64)``: None when ``s`` is not a base-10 int64."""
    if not _INT64_RE.match(s):
        return None
    v = int(s)
    if v < _INT64_MIN or v > _INT64_MAX:
        return None
    return v


# ---- upstream's validation messages (apimachinery/pkg/util/validation) ------------------------


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    ex = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {ex}regex used for validation is '{fmt}')"


def _qualified_name_errors(value: str) -> list[str]:
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN_RE.match(prefix):
                errs.append("prefix part " + _regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT,
                                                          "example.com"))
    else:
        return ["a qualified name " + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                   "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME_RE.match(name):
        errs.append("name part " + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                "123-abc"))
    return errs


def _label_value_errors(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.match(value):
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _go_quote(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _go_strings(values: Sequence[str]) -> str:
    return "[]string{" + ", ".join(_go_quote(v) for v in values) + "}"


def _invalid(path: str, value: str, detail: str) -> str:
    return f"{path}: Invalid value: {value}: {detail}"


# ---- compiled requirements -------------------------------------------------------------------

Matcher = Callable[[Mapping[str, str]], bool]


def _label_matcher(key: str, op: str, values: tuple[str, ...]) -> Matcher:
    if op == "In":
        vs = frozenset(values)
        return lambda labels: key in labels and labels[key] in vs
    if op == "NotIn":
        vs = frozenset(values)
        return lambda labels: key not in labels or labels[key] not in vs
    if op == "Exists":
        return lambda labels: key in labels
    if op == "DoesNotExist":
        return lambda labels: key not in labels
    bound = parse_int64(values[0])
    assert bound is not None
    greater = op == "Gt"

    def compare(labels: Mapping[str, str]) -> bool:
        v = labels.get(key)
        if v is None:
            return False
        n = parse_int64(v)
        if n is None:
            return False
        return n > bound if greater else n < bound

    return compare


def _compile_label_requirements(reqs: Sequence[Requirement], path: str) -> tuple[list[Matcher], list[str]]:
    """Upstream's nodeSelectorRequirementsAsSelector (with labels.NewRequirement's checks)."""
    matchers: list[Matcher] = []
    errs: list[str] = []
    for i, r in enumerate(reqs):
        p = f"{path}[{i}]"
        op = r.op
        if op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
            errs.append(f"{p}.operator: Unsupported value: {_go_quote(op)}")
            continue
        rerrs: list[str] = []
        key_errs = _qualified_name_errors(r.key)
        if key_errs:
            rerrs.append(_invalid(f"{p}.key", _go_quote(r.key), "; ".join(key_errs)))
        vals = r.values
        vpath = f"{p}.values"
        if op in ("In", "NotIn"):
            if not vals:
                rerrs.append(_invalid(vpath, _go_strings(vals), "for 'in', 'notin' operators, values set can't be "
                                                               "empty"))
        elif op in ("Exists", "DoesNotExist"):
            if vals:
                rerrs.append(_invalid(vpath, _go_strings(vals), "values set must be empty for exists and does not "
                                                               "exist"))
        else:
            if len(vals) != 1:
                rerrs.append(_invalid(vpath, _go_strings(vals), "for 'Gt', 'Lt' operators, exactly one value is "
                                                               "required"))
            for j, v in enumerate(vals):
                if parse_int64(v) is None:
                    rerrs.append(_invalid(f"{vpath}[{j}]", _go_quote(v), "for 'Gt', 'Lt' operators, the value must "
                                                                         "be an integer"))
        for j, v in enumerate(vals):
            verrs = _label_value_errors(v)
            if verrs:
                rerrs.append(_invalid(f"{vpath}[{j}]", _go_quote(v), "; ".join(verrs)))
        if rerrs:
            errs.extend(rerrs)
            continue
        matchers.append(_label_matcher(r.key, op, vals))
    return matchers, errs


def _compile_field_requirements(reqs: Sequence[Requirement],
                                path: str) -> tuple[list[tuple[str, bool, str]], list[str]]:
    """Upstream's nodeSelectorRequirementsAsFieldSelector: (field, equal, value) terms."""
    terms: list[tuple[str, bool, str]] = []
    errs: list[str] = []
    for i, r in enumerate(reqs):
        p = f"{path}[{i}]"
        if r.op in ("In", "NotIn"):
            if len(r.values) != 1:
                errs.append(_invalid(f"{p}.values", _go_strings(r.values), "must have one element"))
            else:
                terms.append((r.key, r.op == "In", r.values[0]))
        else:
            errs.append(f'{p}.operator: Unsupported value: {_go_quote(r.op)}: supported values: "In", "NotIn"')
    return terms, errs


class _Term:
    """A parsed NodeSelectorTerm. ``errors`` non-empty: the term never matches."""

    __slots__ = ("errors", "fields", "labels")

    def __init__(self, term: NodeSelectorTerm, path: str) -> None:
        self.labels: list[Matcher] | None = None
        self.fields: list[tuple[str, bool, str]] | None = None
        self.errors: list[str] = []
        if term.labels:
            self.labels, errs = _compile_label_requirements(term.labels, path + ".matchExpressions")
            self.errors.extend(errs)
        if term.fields:
            self.fields, errs = _compile_field_requirements(term.fields, path + ".matchFields")
            self.errors.extend(errs)

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.errors:
            return False
        if self.labels is not None:
            for m in self.labels:
                if not m(labels):
                    return False
        if self.fields is not None and name:
            for f, eq, v in self.fields:
                actual = name if f == OBJECT_NAME_FIELD else ""
                if (actual == v) != eq:
                    return False
        return True


_TERM_CACHE: BoundedCache[tuple[Any, ...], _Term] = BoundedCache()


def _term(term: NodeSelectorTerm, path: str) -> _Term:
    """A parsed term, shared by every selector with an equal term (terms are immutable)."""
    key = (path, term.key())
    t = _TERM_CACHE.get(key)
    if t is None:
        t = _TERM_CACHE.put(key, _Term(term, path))
    return t


class CompiledNodeSelector:
    """NodeSelectorTerms ORed. Empty terms are dropped (they select nothing)."""

    __slots__ = ("errors", "key", "terms")

    def __init__(self, selector: NodeSelector) -> None:
        self.key = selector.key()
        self.terms: list[_Term] = []
        errs: list[str] = []
        for i, t in enumerate(selector.terms):
            if t.is_empty():
                continue
            ct = _term(t, f"nodeSelectorTerms[{i}]")
            errs.extend(ct.errors)
            self.terms.append(ct)
        self.errors = errs

    def error_message(self) -> str:
        return aggregate_error_message(self.errors)

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        for t in self.terms:
            if t.matches(name, labels):
                return True
        return False

    def match_node(self, node: Node | None) -> bool:
        if node is None:
            return False
        return self.matches(node.name, node.labels)


def compile_node_selector(selector: NodeSelector) -> CompiledNodeSelector:
    return CompiledNodeSelector(selector)


class PreferredSchedulingTerms:
    """Weighted terms; terms with weight 0 or no requirements are dropped. ``errors`` lists the
    parse errors (upstream refuses the whole list then)."""

    __slots__ = ("errors", "key", "terms")

    def __init__(self, terms: Sequence[PreferredSchedulingTerm]) -> None:
        self.terms: list[tuple[int, _Term]] = []
        self.errors: list[str] = []
        key: list[Any] = []
        for i, pt in enumerate(terms):
            if pt.weight == 0 or pt.term.is_empty():
                continue
            ct = _term(pt.term, f"[{i}]")
            if ct.errors:
                self.errors.extend(ct.errors)
            else:
                self.terms.append((pt.weight, ct))
                key.append((pt.weight, pt.term.key()))
        self.key = tuple(key)

    def error_message(self) -> str:
        return aggregate_error_message(self.errors)

    def score(self, name: str, labels: Mapping[str, str]) -> int:
        s = 0
        for w, t in self.terms:
            if t.matches(name, labels):
                s += w
        return s

    def score_node(self, node: Node) -> int:
        return self.score(node.name, node.labels)


def compile_preferred_terms(terms: Sequence[PreferredSchedulingTerm]) -> PreferredSchedulingTerms:
    return PreferredSchedulingTerms(terms)


class RequiredNodeAffinity:
    """A pod's ``spec.nodeSelector`` AND its required node affinity terms (parse errors in a
    term make that term not match, as upstream's lazy-error selector)."""

    __slots__ = ("key", "node_selector", "selector")

    def __init__(self, node_selector: Mapping[str, str], selector: NodeSelector | None) -> None:
        self.node_selector: tuple[tuple[str, str], ...] = tuple(sorted(node_selector.items()))
        self.selector = CompiledNodeSelector(selector) if selector is not None else None
        self.key = (self.node_selector, self.selector.key if self.selector is not None else None)

    def is_empty(self) -> bool:
        return not self.node_selector and self.selector is None

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        for k, v in self.node_selector:
            if labels.get(k) != v:
                return False
        if self.selector is not None:
            return self.selector.matches(name, labels)
        return True

    def match_node(self, node: Node | None) -> bool:
        if node is None:
            return False
        return self.matches(node.name, node.labels)


def get_required_node_affinity(pod: Pod) -> RequiredNodeAffinity:
    """The pod's RequiredNodeAffinity, computed once per template (``template_cache``)."""
    c = template_cache(pod)
    r = c.get("nodeaffinity.required")
    if r is None:
        aff = pod.affinity
        na = aff.node_affinity if aff is not None else None
        r = c["nodeaffinity.required"] = RequiredNodeAffinity(pod.node_selector,
                                                              na.required if na is not None else None)
    return r  # type: ignore[no-any-return]
