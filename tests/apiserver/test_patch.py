"""JSON merge patch (RFC 7386 test vectors), JSON patch (RFC 6902 examples) and strategic merge
patch as kubectl sends them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.apiserver.patch import PatchError, apply_patch, json_patch, merge_patch, strategic_merge_patch

# ---------------------------------------------------------------- RFC 7386, appendix A


@pytest.mark.parametrize(("target", "patch", "result"), [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_rfc7386_vectors(target: Any, patch: Any, result: Any) -> None:
    before = copy.deepcopy(target)
    assert merge_patch(target, patch) == result
    assert target == before  # the target is not modified


# ---------------------------------------------------------------- RFC 6902, appendix A


@pytest.mark.parametrize(("doc", "ops", "result"), [
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"baz": "qux", "foo": "bar"}),
    ({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}], {"foo": ["bar", "qux", "baz"]}),
    ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
    ({"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}], {"baz": "boo", "foo": "bar"}),
    ({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
     [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
     {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
    ({"foo": ["all", "grass", "cows", "eat"]}, [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
     {"foo": ["all", "cows", "eat", "grass"]}),
    ({"baz": "qux", "foo": ["a", 2, "c"]},
     [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
     {"baz": "qux", "foo": ["a", 2, "c"]}),
    ({"foo": "bar"}, [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
     {"foo": "bar", "child": {"grandchild": {}}}),
    ({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}], {"foo": ["bar", ["abc", "def"]]}),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}, {"op": "remove", "path": "/~1"}], {"~1": 10}),
    ({"a": 1}, [{"op": "copy", "from": "/a", "path": "/b"}], {"a": 1, "b": 1}),
    ({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}], {"b": 2}),
])
def test_rfc6902_examples(doc: Any, ops: list[dict[str, Any]], result: Any) -> None:
    before = copy.deepcopy(doc)
    assert json_patch(doc, ops) == result
    assert doc == before


@pytest.mark.parametrize(("doc", "ops"), [
    ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}]),
    ({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}]),
    ({"foo": "bar"}, [{"op": "remove", "path": "/nope"}]),
    ({"foo": "bar"}, [{"op": "replace", "path": "/nope", "value": 1}]),
    ({"foo": [1]}, [{"op": "add", "path": "/foo/5", "value": 1}]),
    ({"foo": [1]}, [{"op": "add", "path": "/foo/x", "value": 1}]),
    ({"foo": "bar"}, [{"op": "frobnicate", "path": "/foo"}]),
    ({"foo": "bar"}, [{"path": "/foo"}]),
    ({"foo": "bar"}, [{"op": "add", "path": "foo", "value": 1}]),  # not a JSON pointer
    ({"foo": "bar"}, {"op": "add", "path": "/x", "value": 1}),  # not a list
    ({"foo": "bar"}, [{"op": "remove", "path": ""}]),
    ({"foo": "bar"}, [{"op": "add", "path": "/foo/x", "value": 1}]),  # into a scalar
])
def test_rfc6902_errors(doc: Any, ops: Any) -> None:
    with pytest.raises(PatchError):
        json_patch(doc, ops)


def test_json_patch_is_all_or_nothing() -> None:
    doc = {"a": 1}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/zz"}])
    assert doc == {"a": 1}


# ---------------------------------------------------------------- strategic merge patch

POD: dict[str, Any] = {
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x/one", "x/two"]},
    "spec": {
        "containers": [
            {"name": "app", "image": "app:v1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
             "args": ["--x", "--y"], "ports": [{"containerPort": 80, "protocol": "TCP"}]},
            {"name": "sidecar", "image": "side:v1"},
        ],
        "tolerations": [{"key": "k1", "operator": "Exists"}],
        "nodeSelector": {"zone": "a"},
    },
}


def smp(patch: Any) -> dict[str, Any]:
    before = copy.deepcopy(POD)
    out = strategic_merge_patch(POD, patch)
    assert before == POD
    return out


def test_smp_merges_containers_by_name() -> None:
    out = smp({"spec": {"containers": [{"name": "app", "image": "app:v2"}]}})
    app, side = out["spec"]["containers"]
    assert app["image"] == "app:v2" and app["args"] == ["--x", "--y"] and len(app["env"]) == 2
    assert side == {"name": "sidecar", "image": "side:v1"}


def test_smp_adds_and_deletes_list_elements() -> None:
    out = smp({"spec": {"containers": [{"name": "extra", "image": "e"}, {"name": "sidecar", "$patch": "delete"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["app", "extra"]
    out = smp({"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}]}})
    assert out["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"},
                                                   {"name": "C", "value": "4"}]


def test_smp_lists_without_merge_key_are_replaced() -> None:
    out = smp({"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}],
                        "containers": [{"name": "app", "args": ["--z"]}]}})
    assert out["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}]
    assert out["spec"]["containers"][0]["args"] == ["--z"]


def test_smp_maps_merge_and_null_deletes() -> None:
    out = smp({"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"nodeSelector": None}})
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert "nodeSelector" not in out["spec"]


def test_smp_replace_directive() -> None:
    out = smp({"metadata": {"labels": {"$patch": "replace", "only": "this"}}})
    assert out["metadata"]["labels"] == {"only": "this"}
    out = smp({"spec": {"containers": [{"name": "new", "image": "n"}, {"$patch": "replace"}]}})
    assert out["spec"]["containers"] == [{"name": "new", "image": "n"}]
    out = smp({"spec": {"nodeSelector": {"$patch": "delete"}}})
    assert "nodeSelector" not in out["spec"]


def test_smp_finalizers_are_a_set_and_can_be_deleted_from() -> None:
    out = smp({"metadata": {"finalizers": ["x/two", "x/three"]}})
    assert out["metadata"]["finalizers"] == ["x/one", "x/two", "x/three"]
    out = smp({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x/one"]}})
    assert out["metadata"]["finalizers"] == ["x/two"]


def test_smp_ignores_set_element_order_and_retains_keys() -> None:
    out = smp({"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
                        "containers": [{"name": "app", "image": "app:v3"}]}})
    assert out["spec"]["containers"][0]["image"] == "app:v3"
    out = smp({"spec": {"$retainKeys": ["containers"], "containers": [{"name": "app", "image": "x"}]}})
    assert set(out["spec"]) == {"containers"}


def test_kubectl_cordon_and_taint_patches() -> None:
    node = {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}
    out = apply_patch(node, {"spec": {"unschedulable": True}}, "application/strategic-merge-patch+json")
    assert out["spec"] == {"taints": [{"key": "a", "effect": "NoSchedule"}], "unschedulable": True}
    out = apply_patch(out, {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"},
                                                {"key": "b", "value": "v", "effect": "NoExecute"}]}},
                      "application/strategic-merge-patch+json")
    assert [t["key"] for t in out["spec"]["taints"]] == ["a", "b"]
    out = apply_patch(out, {"spec": {"unschedulable": None}}, "application/merge-patch+json; charset=utf-8")
    assert "unschedulable" not in out["spec"]


def test_apply_patch_errors() -> None:
    with pytest.raises(PatchError):
        apply_patch({}, {}, "application/apply-patch+yaml")
    with pytest.raises(PatchError):
        apply_patch({"a": 1}, ["x"], "application/merge-patch+json")  # result is not an object


# ---------------------------------------------------------------- properties

_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text("abc", max_size=2)),
    lambda ch: st.one_of(st.lists(ch, max_size=3), st.dictionaries(st.text("abcd", min_size=1, max_size=2), ch,
                                                                   max_size=3)),
    max_leaves=12)


def _strip_nulls(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _strip_nulls(v) for k, v in x.items() if v is not None}
    return x


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text("abcd", min_size=1, max_size=2), _json, max_size=4),
       st.dictionaries(st.text("abcd", min_size=1, max_size=2), _json, max_size=4))
def test_merge_patch_properties(target: dict[str, Any], patch: dict[str, Any]) -> None:
    out = merge_patch(target, patch)
    # Idempotent, and every non-null patch value is in the result as the patch says.
    assert merge_patch(out, patch) == out
    for k, v in patch.items():
        if v is None:
            assert k not in out
        elif not isinstance(v, dict):
            assert out[k] == v
        else:
            assert out[k] == merge_patch(target.get(k), v)
    for k in target:
        if k not in patch:
            assert out[k] == target[k]
    assert merge_patch(target, {}) == target
    assert merge_patch({}, patch) == _strip_nulls(patch)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text("abcd", min_size=1, max_size=2), _json, max_size=4),
       st.dictionaries(st.text("abcd", min_size=1, max_size=2), _json, max_size=4))
def test_an_owned_merge_patch_gives_the_same_document_without_copying_its_values(
        target: dict[str, Any], patch: dict[str, Any]) -> None:
    before = copy.deepcopy(target)
    copied = merge_patch(target, patch)
    owned = merge_patch(target, copy.deepcopy(patch), owned=True)
    assert owned == copied
    assert target == before  # the target is never changed
    given_patch = {k: v for k, v in patch.items() if v is not None and not isinstance(v, dict)}
    out = merge_patch(target, given_patch, owned=True)
    for k, v in given_patch.items():
        if isinstance(v, list):
            assert out[k] is v  # taken over, not copied
            assert merge_patch(target, given_patch)[k] is not v
