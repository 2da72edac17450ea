"""Label selectors, node selector terms and field selectors. String-form cases are ported from
k8s.io/apimachinery pkg/labels/selector_test.go and pkg/fields/selector_test.go."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.labels import (
    EVERYTHING,
    NOTHING,
    LabelSelector,
    NodeSelector,
    NodeSelectorTerm,
    Requirement,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)

# ---------------------------------------------------------------- TestSelectorParse


@pytest.mark.parametrize("text", [
    "x=a,y=b,z=c",
    "",
    "x!=a,y=b",
    "x=",
    "x= ",
    "x=,z= ",
    "x= ,z= ",
    "!x",
    "x>1",
    "x>1,z<5",
])
def test_good_selector_strings_print_back(text: str) -> None:
    assert str(parse_label_selector(text)) == text.replace(" ", "")


@pytest.mark.parametrize("text", ["x=a||y=b", "x==a==b", "!x=a", "x<a"])
def test_bad_selector_strings(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


def test_deterministic_parse() -> None:
    assert str(parse_label_selector("x=a,a=x")) == str(parse_label_selector("a=x,x=a")) == "a=x,x=a"
    assert parse_label_selector("x=a,a=x") == parse_label_selector("a=x,x=a")


# ---------------------------------------------------------------- TestSelectorMatches


@pytest.mark.parametrize(("selector", "labels", "match"), [
    ("", {"x": "y"}, True),
    ("x=y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),  # in and notin in exactMatch
    ("x", {"x": "z"}, True),
    ("!x", {"y": "z"}, True),
    ("x>1", {"x": "2"}, True),
    ("x<1", {"x": "0"}, True),
    ("x=z", {}, False),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("x", {"y": "z"}, False),
    ("!x", {"x": "z"}, False),
    ("x>1", {"x": "0"}, False),
    ("x<1", {"x": "2"}, False),
    ("x>1", {"x": "v2"}, False),  # not an integer: no match
    ("x>1", {}, False),
    ("foo=bar", {"foo": "bar", "baz": "blah"}, True),
    ("baz=blah", {"foo": "bar", "baz": "blah"}, True),
    ("foo=bar,baz=blah", {"foo": "bar", "baz": "blah"}, True),
    ("foo=blah", {"foo": "bar", "baz": "blah"}, False),
    ("baz=bar", {"foo": "bar", "baz": "blah"}, False),
    ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
    ("x notin (a)", {}, True),  # NotIn matches a missing key
    ("x in (a,b)", {"x": "b"}, True),
    ("x in (a,b)", {"x": "c"}, False),
    ("x==y", {"x": "y"}, True),
])
def test_selector_matches(selector: str, labels: dict[str, str], match: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is match


# ---------------------------------------------------------------- TestSetSelectorParser

R = Requirement


@pytest.mark.parametrize(("text", "reqs"), [
    ("", ()),
    ("\rx", (R("x", "Exists"),)),
    ("this-is-a-dns.domain.com/key-with-dash", (R("this-is-a-dns.domain.com/key-with-dash", "Exists"),)),
    ("this-is-another-dns.domain.com/key-with-dash in (so,what)",
     (R("this-is-another-dns.domain.com/key-with-dash", "In", ("so", "what")),)),
    ("0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
     (R("0.1.2.domain/99", "NotIn", ("10.10.100.1", "tick.tack.clock")),)),
    ("foo  in\t (abc)", (R("foo", "In", ("abc",)),)),
    ("x notin\n (abc)", (R("x", "NotIn", ("abc",)),)),
    ("x  notin\t\t\t(abc,def)", (R("x", "NotIn", ("abc", "def")),)),
    ("x in (abc,def)", (R("x", "In", ("abc", "def")),)),
    ("x in (abc,)", (R("x", "In", ("", "abc")),)),
    ("x in ()", (R("x", "In", ("",)),)),
    ("x notin (abc,,def),bar,z in (),w", (R("bar", "Exists"), R("w", "Exists"),
                                         R("x", "NotIn", ("", "abc", "def")), R("z", "In", ("",)))),
    ("x,y in (a)", (R("x", "Exists"), R("y", "In", ("a",)))),
    ("x=a", (R("x", "In", ("a",)),)),
    ("x>1", (R("x", "Gt", ("1",)),)),
    ("x<7", (R("x", "Lt", ("7",)),)),
    ("x=a,y!=b", (R("x", "In", ("a",)), R("y", "NotIn", ("b",)))),
    ("x=a,y!=b,z in (h,i,j)", (R("x", "In", ("a",)), R("y", "NotIn", ("b",)), R("z", "In", ("h", "i", "j")))),
    ("x notin ( )", (R("x", "NotIn", ("",)),)),
    ("x notin (, a)", (R("x", "NotIn", ("", "a")),)),
    ("a ", (R("a", "Exists"),)),
    ("a in (x,y,notin, z,in)", (R("a", "In", ("in", "notin", "x", "y", "z")),)),
])
def test_set_selector_parser_valid(text: str, reqs: tuple[Requirement, ...]) -> None:
    assert parse_label_selector(text).requirements == reqs


@pytest.mark.parametrize("text", [
    "x=a||y=b",
    "x,,y",
    ",x,y",
    "x nott in (y)",
    "a in (xyz),",
    "a in (xyz)b notin ()",
    "a in (xyz abc)",  # no comma
    "a notin(",  # badly formed
    "a (",
    "(",
    "a" * 254,  # key too long
    "x in a",
    "x=(a,b)",
    "x gt 1",  # the operators are > and <, not words
    "x>a",
    "x>-1",  # a Gt/Lt value must be a valid label value too, as upstream
    "x=a b",
    "-x=a",  # key must start alphanumeric
    "x=" + "v" * 64,  # value too long
])
def test_set_selector_parser_invalid(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


def test_empty_string_is_everything() -> None:
    sel = parse_label_selector("  ")
    assert sel.is_empty() and sel.matches({}) and sel.matches({"a": "b"})


def test_requirement_to_string_forms() -> None:
    # TestToString
    sel = parse_label_selector("x in (abc,def),y notin (jkl,mno),z")
    assert str(sel) == "x in (abc,def),y notin (jkl,mno),z"
    assert str(parse_label_selector("x notin (abc,def),y!=jkl,!z")) == "x notin (abc,def),y!=jkl,!z"
    assert str(parse_label_selector("x>2,y<8,z")) == "x>2,y<8,z"


# ---------------------------------------------------------------- LabelSelector.from_dict (metav1.LabelSelector)


def test_from_dict_nil_is_nothing_and_empty_is_everything() -> None:
    assert LabelSelector.from_dict(None) is NOTHING
    assert not NOTHING.matches({}) and NOTHING.is_nothing() and not NOTHING.is_empty()
    empty = LabelSelector.from_dict({})
    assert empty.is_empty() and empty.matches({}) and empty.matches({"a": "b"})
    assert empty == EVERYTHING
    assert LabelSelector.from_dict({"matchLabels": None, "matchExpressions": None}) == EVERYTHING


def test_from_dict_match_labels_and_expressions() -> None:
    sel = LabelSelector.from_dict({
        "matchLabels": {"app": "web", "tier": "front"},
        "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "staging"]},
            {"key": "track", "operator": "NotIn", "values": ["canary"]},
            {"key": "team", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist"},
        ],
    })
    good = {"app": "web", "tier": "front", "env": "prod", "team": "a"}
    assert sel.matches(good)
    assert not sel.matches({**good, "app": "db"})
    assert not sel.matches({k: v for k, v in good.items() if k != "tier"})
    assert not sel.matches({**good, "env": "dev"})
    assert not sel.matches({**good, "track": "canary"})
    assert sel.matches({**good, "track": "stable"})
    assert not sel.matches({k: v for k, v in good.items() if k != "team"})
    assert not sel.matches({**good, "legacy": ""})


def test_from_dict_values_are_strings() -> None:
    # YAML turns `version: 1` into an int; the label value is the string "1".
    sel = LabelSelector.from_dict({"matchLabels": {"version": 1}})
    assert sel.matches({"version": "1"})
    sel = LabelSelector.from_dict({"matchExpressions": [{"key": "v", "operator": "In", "values": [2, True]}]})
    assert sel.matches({"v": "2"})


@pytest.mark.parametrize("op", ["Gt", "Lt", "Equals", "", "in"])
def test_from_dict_rejects_operators_that_label_selectors_do_not_have(op: str) -> None:
    with pytest.raises(SelectorError):
        LabelSelector.from_dict({"matchExpressions": [{"key": "a", "operator": op, "values": ["1"]}]})


def test_in_with_empty_values_matches_nothing() -> None:
    sel = LabelSelector.from_dict({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
    assert not sel.matches({"a": ""}) and not sel.matches({})


def test_selector_equality_and_hash() -> None:
    a = LabelSelector.from_dict({"matchLabels": {"x": "1", "y": "2"}})
    b = LabelSelector.from_dict({"matchLabels": {"y": "2", "x": "1"}})
    assert a == b and hash(a) == hash(b)
    assert a != NOTHING and EVERYTHING != NOTHING


# ---------------------------------------------------------------- node selector terms


def test_empty_node_selector_term_matches_nothing() -> None:
    t = NodeSelectorTerm.from_dict({})
    assert t.is_empty()
    assert not t.matches("n1", {})
    assert not t.matches("n1", {"a": "b"})
    t2 = NodeSelectorTerm.from_dict({"matchExpressions": [], "matchFields": []})
    assert not t2.matches("n1", {"a": "b"})


def test_node_selector_term_match_fields_metadata_name() -> None:
    t = NodeSelectorTerm.from_dict({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]})
    assert t.matches("n1", {}) and t.matches("n2", {"x": "y"})
    assert not t.matches("n3", {})
    t = NodeSelectorTerm.from_dict({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]})
    assert not t.matches("n1", {}) and t.matches("n2", {})
    # Any other field never matches (upstream supports only metadata.name).
    t = NodeSelectorTerm.from_dict({"matchFields": [{"key": "spec.unschedulable", "operator": "In",
                                                     "values": ["false"]}]})
    assert not t.matches("n1", {"spec.unschedulable": "false"})


def test_node_selector_term_expressions_and_fields_are_anded() -> None:
    t = NodeSelectorTerm.from_dict({
        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                             {"key": "cores", "operator": "Gt", "values": ["4"]}],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
    })
    assert t.matches("n1", {"zone": "a", "cores": "8"})
    assert not t.matches("n2", {"zone": "a", "cores": "8"})
    assert not t.matches("n1", {"zone": "b", "cores": "8"})
    assert not t.matches("n1", {"zone": "a", "cores": "4"})
    assert not t.matches("n1", {"zone": "a", "cores": "many"})


@pytest.mark.parametrize(("op", "value", "label", "match"), [
    ("Gt", "5", "6", True), ("Gt", "5", "5", False), ("Lt", "5", "4", True), ("Lt", "5", "5", False),
    ("Gt", "-1", "0", True), ("Lt", "x", "0", False), ("Gt", "1", "", False),
])
def test_gt_lt(op: str, value: str, label: str, match: bool) -> None:
    t = NodeSelectorTerm.from_dict({"matchExpressions": [{"key": "k", "operator": op, "values": [value]}]})
    assert t.matches("n", {"k": label}) is match
    assert not t.matches("n", {})


def test_node_selector_terms_are_ored() -> None:
    ns = NodeSelector.from_dict({"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["special"]}]},
        {},
    ]})
    assert ns.matches("x", {"zone": "a"})
    assert ns.matches("special", {"zone": "b"})
    assert not ns.matches("x", {"zone": "b"})
    assert not NodeSelector.from_dict({"nodeSelectorTerms": []}).matches("x", {})
    assert ns.key() == NodeSelector.from_dict({"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["special"]}]},
        {},
    ]}).key()


# ---------------------------------------------------------------- field selectors (pkg/fields)


@pytest.mark.parametrize(("text", "terms"), [
    ("x=a,y=b,z=c", (("x", True, "a"), ("y", True, "b"), ("z", True, "c"))),
    ("", ()),
    ("x!=a,y=b", (("x", False, "a"), ("y", True, "b"))),
    ("x=a||y\\=b", (("x", True, "a||y=b"),)),
    ("x=a\\=\\=b", (("x", True, "a==b"),)),
    ("spec.nodeName=", (("spec.nodeName", True, ""),)),
    ("metadata.name==n1", (("metadata.name", True, "n1"),)),
    ("a=x\\,y", (("a", True, "x,y"),)),
    ("a=x\\\\y", (("a", True, "x\\y"),)),
])
def test_field_selector_good(text: str, terms: tuple) -> None:
    assert parse_field_selector(text).terms == terms


@pytest.mark.parametrize("text", ["x=a||y=b", "x==a==b", "x=a,b", "x in (a)", "x in (a,b,c)", "x",
                                  "x=a\\b", "x=a\\"])
def test_field_selector_bad(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_field_selector(text)


def test_field_selector_matches() -> None:
    fs = parse_field_selector("spec.nodeName=,status.phase!=Succeeded")
    assert fs.fields() == {"spec.nodeName", "status.phase"}
    assert fs.matches({"spec.nodeName": "", "status.phase": "Pending"})
    assert fs.matches({"status.phase": "Pending"})  # a missing field reads as ""
    assert not fs.matches({"spec.nodeName": "n1", "status.phase": "Pending"})
    assert not fs.matches({"spec.nodeName": "", "status.phase": "Succeeded"})
    assert parse_field_selector("").is_empty() and parse_field_selector("").matches({"a": "b"})
    # Deterministic: terms are sorted.
    assert parse_field_selector("x=a,a=x").terms == parse_field_selector("a=x,x=a").terms


# ---------------------------------------------------------------- round trip property

_keys = st.sampled_from(["a", "b", "app", "example.com/tier", "k8s.io/x-y", "z.z_z", "9num"])
_values = st.sampled_from(["", "v", "web", "a.b-c_d", "1", "42", "in", "notin"])


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    key = draw(_keys)
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    if op in ("Exists", "DoesNotExist"):
        return Requirement(key, op)
    if op in ("Gt", "Lt"):
        return Requirement(key, op, (str(draw(st.integers(0, 50))),))
    vals = tuple(sorted(set(draw(st.lists(_values, min_size=1, max_size=4)))))
    return Requirement(key, op, vals)


@settings(max_examples=300, deadline=None)
@given(st.lists(requirements(), max_size=5), st.dictionaries(_keys, _values, max_size=5))
def test_string_form_round_trips(reqs: list[Requirement], labels: dict[str, str]) -> None:
    sel = LabelSelector(tuple(sorted(reqs, key=lambda r: r.key)))
    parsed = parse_label_selector(str(sel))
    assert parsed.requirements == sel.requirements
    assert parsed.matches(labels) == sel.matches(labels)
    # ANDed requirements: matches iff every requirement matches.
    assert sel.matches(labels) == all(r.matches(labels) for r in reqs)
