"""A loaded pod whose spec equals one admitted before takes that admitted spec
(``Store.share_admitted_specs``; ``admission.admission_key``) and, with the same namespace and
labels, the parse of the first pod stored with it (``Pod.like``): the stored manifests, refusals,
resourceVersions and every parsed attribute are those of admitting each pod on its own (the
reference, ``share_admitted_specs = False``), across writes of the objects admission reads."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.api.test_pod_with_status import structure
from tests.sim.test_single_validation import cluster, loaded_pods

from ksched.api.errors import ApiError
from ksched.api.pod import Pod
from ksched.api.validation import validate
from ksched.apiserver.store import Store

# Writes of the kinds admission reads (ADMISSION_KINDS), each changing what a pod is given.
_WRITES: list[tuple[str, dict[str, Any]]] = [
    ("create", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "everyone"},
                "value": 7, "globalDefault": True}),
    ("create", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "limited"}}),
    ("create", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "missing"},
                "value": 5}),
    ("delete", {"kind": "LimitRange", "namespace": "limited", "name": "lr"}),
    ("create", {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr2", "namespace": "default"},
                "spec": {"limits": [{"type": "Container", "defaultRequest": {"memory": "64Mi"}}]}}),
    ("delete", {"kind": "RuntimeClass", "namespace": "", "name": "kata"}),
]

_pod_op = st.tuples(st.just("pod"), st.integers(0, 2), st.integers(0, 9),
                    st.sampled_from([None, None, "default", "limited"]),
                    st.sampled_from([None, None, {"app": "a"}, {"app": "b"}]), st.integers(0, 5).map(lambda i: i == 0))
_op = st.one_of(_pod_op, _pod_op, _pod_op, st.tuples(st.just("write"), st.integers(0, len(_WRITES) - 1)))


@st.composite
def templates(draw: st.DrawFn) -> dict[str, Any]:
    """``loaded_pods()``, most of them without the fields that make admission refuse them or
    keep them from sharing (a missing PriorityClass or ServiceAccount, a RuntimeClass)."""
    raw = draw(loaded_pods())
    for field in ("priorityClassName", "runtimeClassName", "serviceAccountName", "overhead"):
        if field in raw["spec"] and draw(st.integers(0, 3)) > 0:
            del raw["spec"][field]
    return raw


def _pod_raw(template: dict[str, Any], name: int, ns: str | None, labels: dict[str, str] | None,
             mirror: bool) -> dict[str, Any]:
    raw = copy.deepcopy(template)
    md = raw["metadata"]
    md.pop("generateName", None)
    md["name"] = f"p{name}"
    if ns is not None:
        md["namespace"] = ns
    if labels is not None:
        md["labels"] = dict(labels)
    if mirror:
        md["annotations"] = {"kubernetes.io/config.mirror": "x"}
    return raw


def _apply(store: Store, op: tuple[Any, ...], templates: list[dict[str, Any]]) -> Any:
    try:
        if op[0] == "write":
            verb, what = _WRITES[op[1]]
            if verb == "create":
                return store.create(copy.deepcopy(what)).raw
            store.delete(what["kind"], what["namespace"], what["name"])
            return "deleted"
        raw = _pod_raw(templates[op[1] % len(templates)], *op[2:])
        if validate(raw):
            return "invalid"
        got = store.create(Pod(raw), owned=True, validated=True)
    except ApiError as e:
        return (type(e).__name__, e.message)
    assert structure(got) == structure(Pod(json.loads(json.dumps(got.raw))))  # every attribute, recursively
    return json.dumps(got.raw)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.lists(templates(), min_size=1, max_size=3), st.lists(_op, min_size=8, max_size=30))
def test_shared_admission_stores_what_admitting_each_pod_stores(templates: list[dict[str, Any]],
                                                                 ops: list[tuple[Any, ...]]) -> None:
    shared, plain = cluster(), cluster()
    plain.share_admitted_specs = False
    for op in ops:
        assert _apply(shared, op, templates) == _apply(plain, op, templates)
    assert [json.dumps(p.raw) for p in shared.items("Pod")] == [json.dumps(p.raw) for p in plain.items("Pod")]
    assert shared.resource_version == plain.resource_version


def _template() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t", "namespace": "default",
                                                            "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}],
                     "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                                    "labelSelector": {"matchLabels": {"app": "a"}}}]}}


def _create(store: Store, name: str, **md: Any) -> Pod:
    raw = _template()
    raw["metadata"].update(name=name, **md)
    got = store.create(Pod(raw), owned=True, validated=True)
    assert isinstance(got, Pod)
    return got


def test_pods_of_one_template_share_the_admitted_spec_and_the_first_ones_parse() -> None:
    s = cluster()
    a, b = _create(s, "a"), _create(s, "b")
    assert a.raw["spec"] is b.raw["spec"] and a.raw["spec"]["priority"] == 0
    assert b.containers is a.containers and b.tolerations is a.tolerations
    assert b.topology_spread_constraints is a.topology_spread_constraints
    assert b.raw["status"] == {"phase": "Pending", "qosClass": "Burstable"} and b.cached()["qos"] == "Burstable"
    # Other labels: the same admitted spec, parsed for its own labels.
    c = _create(s, "c", labels={"app": "c"})
    assert c.raw["spec"] is a.raw["spec"] and c.topology_spread_constraints is not a.topology_spread_constraints
    # Another namespace, a mirror pod: admitted on their own.
    d = _create(s, "d", namespace="limited")
    e = _create(s, "e", annotations={"kubernetes.io/config.mirror": "x"})
    assert d.raw["spec"] is not a.raw["spec"] and e.raw["spec"] is not a.raw["spec"]
    # A new default PriorityClass: the next pod is admitted again, and given it.
    s.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "everyone"},
              "value": 7, "globalDefault": True})
    f, g = _create(s, "f"), _create(s, "g")
    assert f.raw["spec"] is not a.raw["spec"] and f.raw["spec"]["priority"] == 7
    assert g.raw["spec"] is f.raw["spec"]
    # The reference admits every pod on its own.
    off = cluster()
    off.share_admitted_specs = False
    assert _create(off, "a").raw["spec"] is not _create(off, "b").raw["spec"]


def test_a_spec_marshal_cannot_write_is_admitted_on_its_own() -> None:
    import datetime

    s = cluster()
    raws = [_template(), _template()]
    for i, raw in enumerate(raws):
        raw["metadata"]["name"] = f"x{i}"
        raw["spec"]["containers"][0]["env"] = [{"name": "WHEN", "value": datetime.date(2024, 1, 1)}]
    got = [s.create(Pod(r), owned=True, validated=True) for r in raws]
    assert got[0].raw["spec"] is not got[1].raw["spec"]


def test_the_loaders_spec_key_is_used_for_that_very_spec_only(tmp_path: Any) -> None:
    """The loader leaves each validated pod's spec key on its typed pod (``LOADED_SPEC_KEY``):
    the spec's ``marshal`` bytes, which the store's admission key then reuses; a pod whose
    manifest has another spec object by then is keyed afresh."""
    import marshal

    from ksched.api.loader import LoadResult, build_objects, read_manifests
    from ksched.api.validation import LOADED_SPEC_KEY
    from ksched.sim.realistic import generate

    generate(tmp_path, 2, 6, 2, 0)
    res = LoadResult()
    build_objects(read_manifests([str(tmp_path)], res), res)
    pods = [o for o in res.objects if isinstance(o, Pod)]
    assert len(pods) == 6
    for p in pods:
        spec, key = p.cached()[LOADED_SPEC_KEY]
        assert spec is p.raw["spec"] and key == marshal.dumps(spec, 2)
    app = [p for p in pods if p.cached()[LOADED_SPEC_KEY][1] == pods[0].cached()[LOADED_SPEC_KEY][1]]
    assert len(app) == 3  # one app's pods: the same spec
    s = cluster()
    first = s.create(app[0], owned=True, validated=True)
    # A pod of the same app whose spec object was replaced (with other values) after loading.
    other = app[1]
    other.raw["spec"] = copy.deepcopy(other.raw["spec"])
    other.raw["spec"]["containers"][0]["image"] = "else"
    got = s.create(other, owned=True, validated=True)
    assert got.raw["spec"] is not first.raw["spec"] and got.raw["spec"]["containers"][0]["image"] == "else"
    assert s.create(app[2], owned=True, validated=True).raw["spec"] is first.raw["spec"]
