"""The apps/v1 kinds in the API store: upstream's defaults (pkg/apis/apps/v1/defaults.go), create
and update strategies (status cleared on create, generation, the DaemonSet's template
generation, immutable selectors), validation messages (pkg/apis/apps/validation), the scale
subresource, and generateName suffixes."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from api_objects import mkdeploy, mkds, mkrs, mksts
from ksched.api.apps import DaemonSet, Deployment, StatefulSet, scaled_value
from ksched.api.errors import Conflict, Invalid, NotFound
from ksched.api.validation import validate
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock


def errs(raw: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate(raw)]


# ---------------------------------------------------------------- defaults


def test_deployment_defaults_and_status_cleared_on_create(store: Store) -> None:
    raw = mkdeploy("web", replicas=None)
    raw["spec"]["template"]["metadata"]["creationTimestamp"] = None  # as kubectl create deployment sends
    raw["status"] = {"replicas": 7}
    d = store.create(raw)
    assert isinstance(d, Deployment)
    spec = d.raw["spec"]
    assert spec["replicas"] == 1 and d.replicas == 1
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert (spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (10, 600)
    tpl = spec["template"]
    assert "creationTimestamp" not in tpl["metadata"]
    assert {k: tpl["spec"][k] for k in ("restartPolicy", "terminationGracePeriodSeconds", "dnsPolicy",
                                        "securityContext", "schedulerName")} == {
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "securityContext": {}, "schedulerName": "default-scheduler"}
    c = tpl["spec"]["containers"][0]
    assert (c["terminationMessagePath"], c["terminationMessagePolicy"], c["imagePullPolicy"]) == (
        "/dev/termination-log", "File", "Always")
    assert d.raw["status"] == {} and d.generation == 1


@pytest.mark.parametrize(("image", "policy"), [
    ("nginx", "Always"), ("nginx:latest", "Always"), ("nginx:1.27", "IfNotPresent"),
    ("registry:5000/nginx", "Always"), ("registry:5000/nginx:1", "IfNotPresent"),
    ("nginx@sha256:abcd", "IfNotPresent"),
])
def test_image_pull_policy_default(store: Store, image: str, policy: str) -> None:
    d = store.create(mkdeploy("web", image=image))
    assert d.raw["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_recreate_deployment_gets_no_rolling_update(store: Store) -> None:
    d = store.create(mkdeploy("web", strategy={"type": "Recreate"}))
    assert isinstance(d, Deployment)
    assert d.raw["spec"]["strategy"] == {"type": "Recreate"}
    assert (d.strategy_type, d.max_surge, d.max_unavailable) == ("Recreate", 0, 0)


def test_statefulset_defaults(store: Store) -> None:
    raw = mksts("db")
    raw["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
    s = store.create(raw)
    assert isinstance(s, StatefulSet)
    spec = s.raw["spec"]
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert spec["revisionHistoryLimit"] == 10
    vct = spec["volumeClaimTemplates"][0]
    assert vct["spec"]["volumeMode"] == "Filesystem" and vct["status"] == {"phase": "Pending"}
    assert (vct["apiVersion"], vct["kind"]) == ("v1", "PersistentVolumeClaim")
    assert (s.partition, s.ordinals_start, s.when_deleted, s.when_scaled) == (0, 0, "Retain", "Retain")


def test_daemonset_defaults_and_template_generation(store: Store) -> None:
    ds = store.create(mkds("agent"))
    assert isinstance(ds, DaemonSet)
    assert ds.raw["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                               "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert ds.template_generation == 1 and ds.generation == 1
    raw = ds.deepcopy_raw()
    raw["spec"]["minReadySeconds"] = 5
    ds = store.update(raw)
    assert (ds.generation, ds.template_generation) == (2, 1)  # type: ignore[attr-defined]
    raw = ds.deepcopy_raw()
    raw["spec"]["template"]["spec"]["containers"][0]["image"] = "img:2"
    ds = store.update(raw)
    assert (ds.generation, ds.template_generation) == (3, 2)  # type: ignore[attr-defined]
    # A template generation given on create (a dump of a real cluster) is kept.
    raw = mkds("other")
    raw["metadata"]["annotations"] = {"deprecated.daemonset.template.generation": "4"}
    assert store.create(raw).template_generation == 4  # type: ignore[attr-defined]


def test_replicaset_defaults(store: Store) -> None:
    raw = mkrs("web")
    del raw["spec"]["replicas"]
    rs = store.create(raw)
    assert rs.raw["spec"]["replicas"] == 1 and rs.generation == 1


# ---------------------------------------------------------------- validation

_BAD: list[tuple[str, dict[str, Any], list[str]]] = []


def _bad(name: str, raw: dict[str, Any], *messages: str) -> None:
    _BAD.append((name, raw, list(messages)))


def _with(raw: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    cur = out
    keys = path.split(".")
    for k in keys[:-1]:
        cur = cur.setdefault(k, {})
    cur[keys[-1]] = value
    return out


_D = mkdeploy("d")
_bad("selector-mismatch", _with(_D, "spec.selector", {"matchLabels": {"app": "x"}}),
     "spec.template.metadata.labels: Invalid value: dict: `selector` does not match template `labels`")
_bad("empty-selector", _with(_D, "spec.selector", {}),
     "spec.selector: Invalid value: dict: empty selector is invalid for deployment")
_bad("no-selector", {**_D, "spec": {k: v for k, v in _D["spec"].items() if k != "selector"}},
     "spec.selector: Required value")
_bad("negative-replicas", _with(_D, "spec.replicas", -1),
     "spec.replicas: Invalid value: -1: must be greater than or equal to 0")
_bad("restart-never", _with(_D, "spec.template.spec.restartPolicy", "Never"),
     'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"')
_bad("active-deadline", _with(_D, "spec.template.spec.activeDeadlineSeconds", 5),
     "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported")
_bad("recreate-rolling", _with(_D, "spec.strategy", {"type": "Recreate", "rollingUpdate": {}}),
     "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'")
_bad("both-zero", _with(_D, "spec.strategy", {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}}),
     "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0")
_bad("over-100", _with(_D, "spec.strategy", {"rollingUpdate": {"maxUnavailable": "150%"}}),
     'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "150%": must not be greater than 100%')
_bad("not-percent", _with(_D, "spec.strategy", {"rollingUpdate": {"maxSurge": "abc"}}),
     'spec.strategy.rollingUpdate.maxSurge: Invalid value: "abc": a valid percent string must be a numeric string '
     "followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")
_bad("strategy-type", _with(_D, "spec.strategy", {"type": "BlueGreen"}),
     'spec.strategy.type: Unsupported value: "BlueGreen": supported values: "Recreate", "RollingUpdate"')
_bad("deadline", _with(_with(_D, "spec.minReadySeconds", 10), "spec.progressDeadlineSeconds", 10),
     "spec.progressDeadlineSeconds: Invalid value: 10: must be greater than minReadySeconds")
_bad("bad-container", _with(_D, "spec.template.spec.containers", [{"name": "Bad_Name", "image": "x"}]),
     'spec.template.spec.containers[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of '
     "lower case alphanumeric characters or '-'")
_bad("rs-empty-selector", _with(mkrs("r"), "spec.selector", {}),
     "spec.selector: Invalid value: dict: empty selector is invalid for replicaset")
_S = mksts("s")
_bad("sts-policy", _with(_S, "spec.podManagementPolicy", "Random"),
     'spec.podManagementPolicy: Invalid value: "Random": must be \'OrderedReady\' or \'Parallel\'')
_bad("sts-ondelete-rolling", _with(_S, "spec.updateStrategy", {"type": "OnDelete", "rollingUpdate": {}}),
     "spec.updateStrategy.rollingUpdate: Invalid value: dict: only allowed for updateStrategy 'RollingUpdate'")
_bad("sts-partition", _with(_S, "spec.updateStrategy", {"rollingUpdate": {"partition": -1}}),
     "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0")
_bad("sts-retention", _with(_S, "spec.persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Keep"}),
     'spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: "Keep": supported values: '
     '"Retain", "Delete"')
_bad("sts-vct", _with(_S, "spec.volumeClaimTemplates", [{"metadata": {"name": "data"},
                                                         "spec": {"accessModes": ["ReadWriteOnce"]}}]),
     "spec.volumeClaimTemplates[0].spec.resources.requests.storage: Required value")
_bad("sts-empty-selector", _with(_S, "spec.selector", {}),
     "spec.selector: Invalid value: dict: empty selector is invalid for statefulset")
_DS = mkds("ds")
_bad("ds-both", _with(_DS, "spec.updateStrategy", {"rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}}),
     "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero")
_bad("ds-none", _with(_DS, "spec.updateStrategy", {"rollingUpdate": {"maxUnavailable": 0}}),
     "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0")
_bad("ds-active-deadline", _with(_DS, "spec.template.spec.activeDeadlineSeconds", 5),
     "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in DaemonSet is not Supported")
_bad("cr-revision", {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "c", "namespace": "d"},
                     "revision": -1, "data": {}},
     "revision: Invalid value: -1: must be greater than or equal to 0")


@pytest.mark.parametrize(("raw", "messages"), [(r, m) for _, r, m in _BAD], ids=[n for n, _, _ in _BAD])
def test_validation_messages(raw: dict[str, Any], messages: list[str]) -> None:
    assert errs(raw) == messages


@pytest.mark.parametrize("raw", [mkdeploy("d"), mkrs("r"), mksts("s"), mkds("x"),
                                 mkdeploy("m", strategy={"rollingUpdate": {"maxUnavailable": 0}}),
                                 mkds("y", updateStrategy={"type": "OnDelete"})],
                         ids=["deployment", "replicaset", "statefulset", "daemonset", "surge-only", "ondelete"])
def test_valid_workloads(raw: dict[str, Any]) -> None:
    assert errs(raw) == []


def test_invalid_create_names_the_group_and_stores_nothing(store: Store) -> None:
    rv = store.resource_version
    with pytest.raises(Invalid) as e:
        store.create(_with(mkdeploy("bad"), "spec.replicas", -2))
    assert e.value.message == 'Deployment.apps "bad" is invalid: spec.replicas: Invalid value: -2: must be greater ' \
                              "than or equal to 0"
    assert store.try_get("Deployment", "default", "bad") is None and store.resource_version == rv


# ---------------------------------------------------------------- updates


@pytest.mark.parametrize("make", [mkdeploy, mkrs, mkds], ids=["deployment", "replicaset", "daemonset"])
def test_selectors_are_immutable(store: Store, make: Any) -> None:
    obj = store.create(make("web"))
    raw = obj.deepcopy_raw()
    raw["spec"]["selector"] = {"matchLabels": {"app": "web", "tier": "x"}}
    raw["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    with pytest.raises(Invalid) as e:
        store.update(raw)
    assert e.value.message == (f'{obj.KIND}.apps "web" is invalid: spec.selector: Invalid value: dict: '
                               "field is immutable")


def test_statefulset_spec_is_mostly_immutable(store: Store) -> None:
    s = store.create(mksts("db"))
    raw = s.deepcopy_raw()
    raw["spec"]["serviceName"] = "other"
    with pytest.raises(Invalid) as e:
        store.update(raw)
    assert "spec: Forbidden: updates to statefulset spec for fields other than 'replicas'" in e.value.message
    raw = s.deepcopy_raw()
    raw["spec"]["replicas"] = 5
    raw["spec"]["template"]["spec"]["containers"][0]["image"] = "img:2"
    raw["spec"]["updateStrategy"] = {"type": "OnDelete"}
    assert store.update(raw).generation == 2


def test_controller_revision_data_is_immutable(store: Store) -> None:
    cr = store.create({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                       "metadata": {"name": "c", "namespace": "default"}, "revision": 1, "data": {"a": 1}})
    raw = cr.deepcopy_raw()
    raw["revision"] = 2
    cr = store.update(raw)
    assert cr.revision == 2  # type: ignore[attr-defined]
    raw = cr.deepcopy_raw()
    raw["data"] = {"a": 2}
    with pytest.raises(Invalid, match="data: Invalid value: dict: field is immutable"):
        store.update(raw)


def test_generation_and_status_subresource(store: Store) -> None:
    d = store.create(mkdeploy("web"))
    raw = d.deepcopy_raw()
    raw["spec"]["replicas"] = 4
    d = store.update(raw)
    assert d.generation == 2
    # A Deployment's generation counts its annotations too (they are copied to its ReplicaSets).
    raw = d.deepcopy_raw()
    raw["metadata"]["annotations"] = {"team": "a"}
    d = store.update(raw)
    assert d.generation == 3
    # The status subresource writes status and annotations (the revision), never the spec or generation.
    raw = d.deepcopy_raw()
    raw["spec"]["replicas"] = 9
    raw["status"] = {"observedGeneration": 3, "replicas": 4}
    raw["metadata"]["annotations"] = {"team": "a", "deployment.kubernetes.io/revision": "1"}
    d = store.update_status(raw)
    assert isinstance(d, Deployment)
    assert (d.replicas, d.generation, d.observed_generation, d.status_replicas) == (4, 3, 3, 4)
    assert d.annotations["deployment.kubernetes.io/revision"] == "1"
    # A main-resource update keeps the stored status.
    raw = d.deepcopy_raw()
    raw["status"] = {}
    assert store.update(raw).raw["status"] == {"observedGeneration": 3, "replicas": 4}
    rs = store.create(mkrs("rs"))
    raw = rs.deepcopy_raw()
    raw["metadata"]["annotations"] = {"x": "y"}
    assert store.update(raw).generation == 1  # only the Deployment counts annotations


# ---------------------------------------------------------------- scale


def test_scale_subresource(store: Store) -> None:
    d = store.create(mkdeploy("web", labels={"app": "web", "tier": "a"}))
    sc = store.get_scale("Deployment", "default", "web")
    assert sc == {"kind": "Scale", "apiVersion": "autoscaling/v1",
                  "metadata": {"name": "web", "namespace": "default", "uid": d.uid,
                               "resourceVersion": d.resource_version,
                               "creationTimestamp": d.raw["metadata"]["creationTimestamp"]},
                  "spec": {"replicas": 3}, "status": {"replicas": 0, "selector": "app=web,tier=a"}}
    sc = store.patch_scale("Deployment", "default", "web", {"spec": {"replicas": 5}})
    assert sc["spec"]["replicas"] == 5
    got = store.get("Deployment", "default", "web")
    assert got.raw["spec"]["replicas"] == 5 and got.generation == 2
    stale = {**sc, "metadata": {**sc["metadata"], "resourceVersion": d.resource_version}, "spec": {"replicas": 1}}
    with pytest.raises(Conflict):
        store.update_scale("Deployment", "default", "web", stale)
    with pytest.raises(Invalid) as e:
        store.update_scale("Deployment", "default", "web", {"spec": {"replicas": -1}})
    assert e.value.message == ('Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be '
                               "greater than or equal to 0")
    assert store.update_scale("Deployment", "default", "web", {"spec": {"replicas": 2}})["spec"]["replicas"] == 2
    store.create(mksts("db"))
    assert store.patch_scale("StatefulSet", "default", "db", {"spec": {"replicas": 0}})["spec"]["replicas"] == 0
    store.create(mkds("agent"))
    with pytest.raises(NotFound):
        store.get_scale("DaemonSet", "default", "agent")
    with pytest.raises(NotFound):
        store.get_scale("Deployment", "default", "nope")


# ---------------------------------------------------------------- generateName


def _generated(store: Store, n: int, base: str = "web-") -> list[str]:
    return [store.create({"apiVersion": "v1", "kind": "Event",
                          "metadata": {"generateName": base, "namespace": "default"},
                          "involvedObject": {}}).name for _ in range(n)]


def test_generate_name_uses_upstreams_alphabet_and_is_seeded() -> None:
    a = _generated(Store(VirtualClock(), name_seed=1), 20)
    assert all(re.fullmatch(r"web-[bcdfghjklmnpqrstvwxz2456789]{5}", n) for n in a)
    assert a == _generated(Store(VirtualClock(), name_seed=1), 20)
    assert a != _generated(Store(VirtualClock(), name_seed=2), 20)
    long = _generated(Store(VirtualClock()), 1, "x" * 80)[0]
    assert len(long) == 63 and long.startswith("x" * 58)


def test_generate_name_retries_a_taken_name() -> None:
    first = _generated(Store(VirtualClock(), name_seed=7), 1)[0]
    store = Store(VirtualClock(), name_seed=7)
    store.create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": first, "namespace": "default"},
                  "involvedObject": {}})
    (again,) = _generated(store, 1)
    assert again != first and again.startswith("web-")


@pytest.mark.parametrize(("value", "total", "up", "want"), [
    ("25%", 10, True, 3), ("25%", 10, False, 2), ("25%", 4, True, 1), ("25%", 3, False, 0), (5, 3, True, 5),
    ("0%", 10, True, 0), ("100%", 7, False, 7), (None, 10, True, 0),
])
def test_scaled_value(value: Any, total: int, up: bool, want: int) -> None:
    assert scaled_value(value, total, up) == want


@pytest.mark.parametrize("value", ["25", "x%", True, 1.5])
def test_scaled_value_refuses_non_int_or_percent(value: Any) -> None:
    with pytest.raises(ValueError):
        scaled_value(value, 10, True)
