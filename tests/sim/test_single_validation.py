"""One validation per loaded pod (issue 17): ``ksched simulate`` validates each manifest in the
loader, whose errors name the file, the document, the List item and the field path, and hands the
store the validated manifests (``Store.create(validated=True)``); the store validates a pod again
only where admission may have made it invalid (LimitRanger, RuntimeClass, a generated name).
A store handed a validated pod gives exactly what it gives when it validates everything."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tests.api.test_pod_with_status import structure

from ksched.api.errors import ApiError
from ksched.api.pod import Pod
from ksched.api.scheme import Scheme
from ksched.api.validation import validate
from ksched.apiserver.store import Store
from ksched.cli.main import main
from ksched.clock import VirtualClock
from ksched.sim.simulation import Simulation

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                   "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}


def pod(name: str, ns: str | None = None, **spec: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if ns:
        md["namespace"] = ns
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


def simulate(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(["simulate", *args])
    return rc, err.getvalue()


def test_a_malformed_pod_keeps_its_file_index_and_field_path(tmp_path: Path) -> None:
    bad = pod("bad", "team")
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    (tmp_path / "a.yaml").write_text(yaml.safe_dump_all([NODE, pod("ok"), bad]))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
        pod("fine"), pod("worse", tolerations=[{"operator": "Sometimes"}])]}))
    rc, err = simulate(str(tmp_path), "--quiet")
    assert rc == 2
    assert err.splitlines() == [
        f'error: {tmp_path / "a.yaml"}[2]: Pod team/bad: spec.containers[0].resources.requests.cpu: invalid '
        'quantity "lots"',
        f'error: {tmp_path / "b.yaml"}[0]: Pod worse: items[1].spec.tolerations[0].operator: Unsupported value: '
        '"Sometimes": supported values: "Equal", "Exists"',
        f'error: {tmp_path / "b.yaml"}[0]: Pod worse: items[1].spec.tolerations[0].operator: Invalid value: '
        '"Sometimes": operator must be Exists when `key` is empty, which means "match all values and all keys"',
        "3 error(s); nothing was simulated."]


def test_a_pod_admission_makes_invalid_is_still_refused_where_it_is(tmp_path: Path) -> None:
    """A LimitRange's default limit below the request: valid in the file, invalid once admitted."""
    lr = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr", "namespace": "default"},
          "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}}
    big = pod("big")
    big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3"}}
    (tmp_path / "a.yaml").write_text(yaml.safe_dump_all([NODE, lr, big]))
    rc, err = simulate(str(tmp_path), "--quiet")
    assert rc == 2
    assert err.splitlines()[0] == (
        f'error: {tmp_path / "a.yaml"}[2]: Pod big: Pod "big" is invalid: spec.containers[0].resources.requests.cpu: '
        'Invalid value: "3": must be less than or equal to cpu limit of 500m')


def count_pod_validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = Scheme.validate

    def spy(self: Scheme, raw: dict[str, Any], cls: Any = None) -> Any:
        if raw.get("kind") == "Pod":
            seen.append(str(raw["metadata"].get("name")))
        return real(self, raw, cls)

    monkeypatch.setattr(Scheme, "validate", spy)
    return seen


def test_the_store_validates_a_validated_pod_only_where_admission_may_break_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen = count_pod_validations(monkeypatch)
    sim = Simulation(kubelet=False)
    lr = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr", "namespace": "limited"},
          "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}}
    rc = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"}, "handler": "kata"}
    generated = pod("")
    generated["metadata"] = {"generateName": "gen-"}
    objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "limited"}}, lr, rc, NODE,
            pod("plain"), pod("with-limits", containers=[{"name": "c", "image": "i", "resources": {
                "limits": {"cpu": "1"}}, "ports": [{"containerPort": 80}]}]),
            pod("limited", "limited"), pod("kata", runtimeClassName="kata"), generated]
    assert sim.load(objs, validated=True) == []
    assert sorted("gen-*" if n.startswith("gen-") else n for n in seen) == ["gen-*", "kata", "limited"]
    assert sim.store.get("Pod", "limited", "limited").raw["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "500m"}, "requests": {"cpu": "500m"}}
    seen.clear()
    sim2 = Simulation(kubelet=False)
    assert sim2.load([pod("plain")]) == []
    assert seen == ["plain"]  # without the promise, the store validates


# ---------------------------------------------------------------- validated and not: the same outcome

_QTY = st.sampled_from(["100m", "1", "2", "64Mi", "1Gi"])


@st.composite
def containers(draw: st.DrawFn, prefix: str) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(1, 2))):
        c: dict[str, Any] = {"name": f"{prefix}{i}", "image": "i"}
        res: dict[str, Any] = {}
        for field in ("requests", "limits"):
            if draw(st.booleans()):
                res[field] = {r: draw(_QTY) for r in draw(st.sets(st.sampled_from(["cpu", "memory"]), max_size=2))}
        if draw(st.booleans()):
            res.setdefault("limits", {})["example.com/dev"] = draw(st.sampled_from(["1", "2"]))
        if res or draw(st.booleans()):
            c["resources"] = res
        if draw(st.booleans()):
            port: dict[str, Any] = {"containerPort": draw(st.integers(1, 100))}
            if draw(st.booleans()):
                port["protocol"] = draw(st.sampled_from(["TCP", "UDP"]))
            c["ports"] = [port]
        out.append(c)
    return out


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    md: dict[str, Any] = {"namespace": draw(st.sampled_from(["default", "limited"]))}
    if draw(st.integers(0, 4)) == 0:
        md["generateName"] = draw(st.sampled_from(["gen-", "Bad_"]))
    else:
        md["name"] = "p"
    spec: dict[str, Any] = {"containers": draw(containers("c"))}
    if draw(st.booleans()):
        spec["initContainers"] = draw(containers("i"))
    if draw(st.booleans()):
        spec["tolerations"] = draw(st.lists(st.sampled_from([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
            {"operator": "Exists"}, {"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule"}]),
            max_size=2))
    for field, values in (("priorityClassName", ["high", "system-node-critical", "missing"]),
                          ("runtimeClassName", ["kata", "plain"]), ("preemptionPolicy", ["Never"]),
                          ("serviceAccountName", ["default", "robot"]), ("nodeSelector", [{"zone": "a"}]),
                          ("overhead", [{"cpu": "250m"}])):
        if draw(st.integers(0, 3)) == 0:
            spec[field] = draw(st.sampled_from(values))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def cluster() -> Store:
    s = Store(VirtualClock(), auto_create_namespaces=True)
    s.create({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr", "namespace": "limited"},
              "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m", "memory": "128Mi"},
                                   "defaultRequest": {"cpu": "200m"}}]}})
    s.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
              "value": 1000, "preemptionPolicy": "Never"})
    s.create({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"},
              "handler": "kata", "overhead": {"podFixed": {"cpu": "250m"}},
              "scheduling": {"nodeSelector": {"zone": "b"}, "tolerations": [{"key": "kata", "operator": "Exists"}]}})
    s.create({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "plain"},
              "handler": "plain"})
    s.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "default"}})
    return s


def outcome(store: Store, raw: dict[str, Any], **kw: Any) -> Any:
    try:
        return store.create(raw, owned=True, **kw).raw
    except ApiError as e:
        return (type(e).__name__, e.message)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(pods(), st.booleans())
def test_a_validated_pod_is_stored_or_refused_exactly_as_any_other(raw: dict[str, Any], existing: bool) -> None:
    assume(validate(raw) == [])
    copy_a, copy_b = yaml.safe_load(yaml.safe_dump(raw)), yaml.safe_load(yaml.safe_dump(raw))
    assert outcome(cluster(), copy_a, validated=True, existing=existing) == outcome(cluster(), copy_b,
                                                                                  existing=existing)


# ---------------------------------------------------------------- one typed object per loaded pod

_AFFINITY = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "a"}},
                                        "topologyKey": "kubernetes.io/hostname"}}]},
    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "b"]}]}]}}}
_SPREAD = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "a"}}, "matchLabelKeys": ["app"]}]


@st.composite
def loaded_pods(draw: st.DrawFn) -> dict[str, Any]:
    """``pods()`` with what the loader's parse shares when the store takes it: labels, an
    affinity (whose namespace defaults), volumes (named after the pod), spread constraints, a
    pod without a namespace, scheduling gates (admission adds a condition), a status."""
    raw = draw(pods())
    md, spec = raw["metadata"], raw["spec"]
    if draw(st.booleans()):
        md["labels"] = {"app": "a"}
    if draw(st.integers(0, 3)) == 0:
        del md["namespace"]
    if draw(st.booleans()):
        spec["affinity"] = _AFFINITY
    if draw(st.booleans()):
        spec["topologySpreadConstraints"] = _SPREAD
    if draw(st.booleans()):
        spec["volumes"] = [{"name": "data", "emptyDir": {}}, {"name": "scratch", "ephemeral": {
            "volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"],
                                             "resources": {"requests": {"storage": "1Gi"}}}}}}]
    if draw(st.integers(0, 3)) == 0:
        spec["schedulingGates"] = [{"name": "wait"}]
    if draw(st.integers(0, 3)) == 0:
        spec["nodeName"] = "n1"
    if draw(st.integers(0, 3)) == 0:
        raw["status"] = {"phase": draw(st.sampled_from(["Pending", "Running"])),
                         "conditions": [{"type": "Ready", "status": "False"}]}
    return raw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(loaded_pods(), st.booleans())
def test_a_loaded_pod_handed_over_is_stored_as_its_manifest_would_be(raw: dict[str, Any], existing: bool) -> None:
    """The store given the loader's typed pod (owned, validated) shares its parse where admission
    leaves the containers alone (``Pod.admitted``); the stored manifest, the refusal and every
    attribute of the stored object are those of a full parse (the reference path: the manifest
    alone, or ``share_loaded_parse=False``)."""
    assume(validate(raw) == [])
    a, b, c = (yaml.safe_load(yaml.safe_dump(raw)) for _ in range(3))
    loaded = Pod(a)
    shared = cluster()
    plain = cluster()
    off = cluster()
    off.share_loaded_parse = False
    try:
        got = shared.create(loaded, owned=True, validated=True, existing=existing)
    except ApiError as e:
        got_outcome: Any = (type(e).__name__, e.message)
    else:
        got_outcome = got.raw
        assert structure(got) == structure(Pod(got.raw))  # every attribute, recursively
        assert got.key == f"{got.namespace}/{got.name}"
    assert got_outcome == outcome(plain, b, validated=True, existing=existing)
    assert got_outcome == outcome(off, Pod(c), validated=True, existing=existing)


def test_the_stored_pod_shares_the_loaders_containers_only_where_admission_keeps_them() -> None:
    s = cluster()
    # What Pod.admitted shares; with share_admitted_specs the last pod (the first's spec) would
    # take the first stored pod's parse instead (tests/apiserver/test_store_admitted_specs.py).
    s.share_admitted_specs = False
    plain = Pod(pod("plain", "default", affinity=_AFFINITY))
    limited = Pod(pod("limited", "limited"))
    kata = Pod(pod("kata", "default", runtimeClassName="kata"))
    no_ns = Pod(pod("no-ns", None, affinity=_AFFINITY))
    stored = [s.create(p, owned=True, validated=True) for p in (plain, limited, kata, no_ns)]
    assert stored[0].containers is plain.containers and stored[0].affinity is plain.affinity
    assert stored[1].containers is not limited.containers  # LimitRanger set its limits
    assert stored[1].containers[0].limits == {"cpu": 500, "memory": 128 * 2**20}
    assert stored[2].containers is not kata.containers and stored[2].overhead == {"cpu": 250}
    assert stored[3].containers is no_ns.containers
    assert stored[3].affinity is not no_ns.affinity  # parsed again in its defaulted namespace
    assert stored[3].namespace == "default"
    assert stored[0] is not plain  # a new object: the caller's is as the loader made it
    assert plain.namespace == "default" and plain.resource_version == ""


def test_an_admitted_pod_parses_its_affinity_again_when_its_labels_changed() -> None:
    """The affinity's terms read the pod's labels (matchLabelKeys): a manifest whose labels are
    not the loader's gets its own parse, the spread constraints likewise."""
    aff = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname",
         "matchLabelKeys": ["version"]}]}}
    raw = pod("p", "default", affinity=aff)
    raw["metadata"]["labels"] = {"app": "a", "version": "1"}
    loaded = Pod(raw)
    same = loaded.admitted(raw)
    assert same.affinity is loaded.affinity
    relabelled = yaml.safe_load(yaml.safe_dump(raw))
    relabelled["metadata"]["labels"]["version"] = "2"
    other = loaded.admitted(relabelled)
    assert other.affinity is not loaded.affinity
    assert structure(other) == structure(Pod(relabelled))
