"""Loading real clusters' objects into a simulation (ksched.sim.loading, ksched.api.loader and
``ksched simulate``): dependency order with dependents before their owners, objects a fresh
cluster has merged, duplicates in the input still refused, exported objects kept as they were
(bound pods stay bound, owners missing from the input forgotten), unknown kinds skipped with one
warning per kind (errors with --strict), custom resources loaded with their CRDs."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import yaml

from ksched.api.loader import load_manifests
from ksched.cli.main import main
from ksched.sim.loading import order
from ksched.sim.simulation import Simulation


def obj(kind: str, name: str, api_version: str = "v1", ns: str | None = "default", uid: str = "",
        owners: list[str] = (), **fields: Any) -> dict[str, Any]:  # type: ignore[assignment]
    md: dict[str, Any] = {"name": name}
    if ns:
        md["namespace"] = ns
    if uid:
        md["uid"] = uid
    if owners:
        md["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": o, "uid": o,
                                  "controller": True} for o in owners]
    return {"apiVersion": api_version, "kind": kind, "metadata": md, **fields}


def test_order_puts_referenced_kinds_first_and_dependents_before_owners() -> None:
    raws = [obj("Deployment", "d", "apps/v1", uid="D"),
            obj("ReplicaSet", "rs", "apps/v1", uid="RS", owners=["D"]),
            obj("Pod", "p", uid="P", owners=["RS"]),
            obj("Widget", "w", "example.com/v1"),
            obj("Node", "n", ns=None),
            obj("Namespace", "team", ns=None),
            obj("CustomResourceDefinition", "widgets.example.com", "apiextensions.k8s.io/v1", ns=None),
            obj("Event", "e"),
            obj("PriorityClass", "pc", "scheduling.k8s.io/v1", ns=None)]
    names = [raws[i]["metadata"]["name"] for i in order(raws)]
    assert names == ["widgets.example.com", "team", "pc", "n", "p", "rs", "d", "w", "e"]


def test_an_ownership_cycle_does_not_hang() -> None:
    raws = [obj("ReplicaSet", "a", "apps/v1", uid="A", owners=["B"]), obj("ReplicaSet", "b", "apps/v1", uid="B",
                                                                          owners=["A"])]
    assert sorted(order(raws)) == [0, 1]


def exported(raw: dict[str, Any], **status: Any) -> dict[str, Any]:
    raw["metadata"].update(resourceVersion="123", creationTimestamp="2024-05-01T00:00:00Z")
    raw["metadata"].setdefault("uid", f"uid-{raw['metadata']['name']}")
    if status:
        raw["status"] = status
    return raw


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def dump() -> dict[str, Any]:
    """What ``kubectl get ns,nodes,pods,pc,sa -A -o yaml`` of a small cluster looks like."""
    items = [
        exported(obj("Namespace", "default", ns=None, labels=None), phase="Active"),
        exported(obj("Namespace", "kube-system", ns=None), phase="Active"),
        exported(obj("ServiceAccount", "default")),
        exported(obj("PriorityClass", "system-node-critical", "scheduling.k8s.io/v1", ns=None, value=2000001000,
                     description="Used for system critical pods that must not be moved from their current node.")),
        exported(obj("PriorityClass", "system-cluster-critical", "scheduling.k8s.io/v1", ns=None, value=2000000000)),
        exported({**NODE, "metadata": {**NODE["metadata"], "labels": {"kubernetes.io/hostname": "n1"}}}),
        exported(obj("Pod", "coredns", ns="kube-system", owners=["rs-coredns"],
                     spec={"nodeName": "n1", "priority": 2000000000, "priorityClassName": "system-cluster-critical",
                           "serviceAccountName": "coredns",
                           "containers": [{"name": "c", "image": "coredns", "resources": {"requests": {
                               "cpu": "1"}}}]}), phase="Running", startTime="2024-05-01T00:00:10Z"),
        exported(obj("Pod", "done", spec={"nodeName": "n1", "containers": [{"name": "c", "image": "job"}]}),
                 phase="Succeeded"),
        exported(obj("Event", "coredns.1", involvedObject={"kind": "Pod", "name": "coredns"})),
        exported(obj("HorizontalPodAutoscaler", "hpa", "autoscaling/v2")),
        exported(obj("HorizontalPodAutoscaler", "hpa2", "autoscaling/v2")),
    ]
    items[0]["metadata"]["labels"] = {"kubernetes.io/metadata.name": "default", "team": "core"}
    return {"apiVersion": "v1", "kind": "List", "items": items}


def simulate(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["simulate", *args])
    return rc, out.getvalue(), err.getvalue()


def test_a_cluster_dump_loads_merges_and_keeps_bound_pods(tmp_path: Path) -> None:
    f = tmp_path / "dump.yaml"
    f.write_text(yaml.safe_dump(dump()))
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "newcomer"},
                                   "spec": {"containers": [{"name": "c", "image": "app", "resources": {
                                       "requests": {"cpu": "3500m"}}}]}}))
    rc, out, err = simulate(str(f), str(new), "--format", "json", "--quiet")
    assert rc == 0, err
    assert "skipping 2 object(s) of kind HorizontalPodAutoscaler (autoscaling/v2)" in err
    assert "skipping 1 Event(s) exported from another cluster" in err
    assert "1 object(s) refer to owners not in the input (first: Pod kube-system/coredns)" in err
    report = json.loads(out)
    pods = {f"{p['namespace']}/{p['name']}": p for p in report["pods"]}
    assert pods["kube-system/coredns"]["node"] == "n1" and pods["kube-system/coredns"]["attempts"] == 0
    # The bound pod takes its cpu: the newcomer (3.5 of the 3 left) does not fit.
    assert pods["default/newcomer"]["node"] is None
    assert "Insufficient cpu" in pods["default/newcomer"]["message"]


def test_what_a_fresh_cluster_has_is_merged_and_duplicates_are_refused(tmp_path: Path) -> None:
    sim = Simulation(kubelet=False)
    items = dump()["items"][:6]
    errors = sim.load(items, existing=range(len(items)))
    assert errors == []
    assert sorted(sim.last_load.merged) == ["Namespace default", "Namespace kube-system",
                                            "PriorityClass system-cluster-critical", "PriorityClass system-node-critical",
                                            "ServiceAccount default/default"]
    assert sim.store.get("Namespace", "", "default").labels["team"] == "core"
    # The same object twice in one input is still an error.
    sim2 = Simulation(kubelet=False)
    errors = sim2.load([obj("ConfigMap", "c"), obj("ConfigMap", "c")])
    assert [(i, e.reason) for i, e in errors] == [(1, "AlreadyExists")]


def test_unknown_kinds_are_errors_with_strict(tmp_path: Path) -> None:
    f = tmp_path / "dump.yaml"
    f.write_text(yaml.safe_dump(dump()))
    rc, _, err = simulate(str(f), "--strict", "--quiet")
    assert rc == 2
    assert err.count("ksched does not know the kind HorizontalPodAutoscaler (autoscaling/v2)") == 2
    assert "nothing was simulated" in err


def test_custom_resources_load_with_their_crd(tmp_path: Path) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Widget", "plural": "widgets"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "size": {"type": "integer", "maximum": 5}}}}}}}]}}
    good = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}
    bad = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "x"}, "spec": {"size": 9}}
    (tmp_path / "a-crs.yaml").write_text(yaml.safe_dump_all([good]))  # read before the CRD's file
    (tmp_path / "b-crd.yaml").write_text(yaml.safe_dump(crd))
    res = load_manifests([tmp_path])
    assert res.errors == [] and [o.KIND for o in res.objects] == ["Widget", "CustomResourceDefinition"]
    sim = Simulation(kubelet=False)
    assert sim.load(res.objects) == []
    assert sim.store.get("Widget", "default", "w").raw["spec"] == {"size": 1}
    (tmp_path / "c-bad.yaml").write_text(yaml.safe_dump(bad))
    res = load_manifests([tmp_path])
    assert [str(e) for e in res.errors] == [
        f"{tmp_path / 'c-bad.yaml'}[0]: Widget x: spec.size: Invalid value: 9: spec.size in body should be less than "
        "or equal to 5"]


def test_a_pod_refused_by_admission_stops_the_simulation(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump_all([NODE, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sneaky"},
                                            "spec": {"priority": 1000000, "containers": [{"name": "c", "image": "i"}]}}]))
    rc, _, err = simulate(str(f), "--quiet")
    assert rc == 2
    assert ('pods "sneaky" is forbidden: the integer value of priority (1000000) must not be provided in pod spec; '
            "priority admission controller computed 0 from the given PriorityClass name") in err
    rc, _, err = simulate(str(f), "--quiet", "--disable-admission-plugins", "Priority")
    assert rc == 0, err
    rc, _, err = simulate(str(f), "--quiet", "--disable-admission-plugins", "Nope")
    assert rc == 2 and "unknown admission plugin(s): Nope" in err


def test_nothing_to_simulate() -> None:
    rc, _, err = simulate("--quiet")
    assert rc == 2 and "nothing to simulate" in err


def test_controllers_see_pods_before_their_owners() -> None:
    """Pods load before any other kind that may own them: a controller created later finds them."""
    raws = [obj("Widget", "owner", "example.com/v1", uid="W"), obj("Pod", "p", uid="P", owners=["W"])]
    assert [raws[i]["metadata"]["name"] for i in order(raws)] == ["p", "owner"]
