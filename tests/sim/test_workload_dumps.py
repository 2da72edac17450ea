"""A dump of a real cluster (``kubectl get ... -o yaml``: UIDs, owner references, hashes made by
upstream's controllers, bound pods) re-simulated: loaded as existing objects (UIDs kept, so owner
references still point at their owners), the controllers start once everything is loaded and
adopt what the dump holds -- no pod is made or moved, no ReplicaSet or revision added."""

from __future__ import annotations

import copy
from typing import Any

from ksched.api.pod import Pod
from ksched.sim.simulation import Simulation

TS = "2024-06-01T10:00:00Z"


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-{name}"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _template(app: str, extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    # As the API server stores a template: every default filled in.
    return {"metadata": {"labels": {"app": app, **(extra_labels or {})}},
            "spec": {"containers": [{"name": "c", "image": f"{app}:1", "imagePullPolicy": "IfNotPresent",
                                     "resources": {}, "terminationMessagePath": "/dev/termination-log",
                                     "terminationMessagePolicy": "File"}],
                     "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                     "securityContext": {}, "terminationGracePeriodSeconds": 30}}


def _ref(kind: str, name: str, uid: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": True,
             "blockOwnerDeletion": True}]


def _pod(name: str, node: str, template: dict[str, Any], owner: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "creationTimestamp": TS,
                         "labels": dict(template["metadata"]["labels"]), "ownerReferences": owner},
            "spec": {**copy.deepcopy(template["spec"]), "nodeName": node},
            "status": {"phase": "Running", "startTime": TS,
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": TS}]}}


def dump() -> list[dict[str, Any]]:
    web_tpl = _template("web")
    rs_tpl = _template("web", {"pod-template-hash": "5d8f7c9b6d"})
    ds_tpl = _template("agent")
    ss_tpl = _template("db")
    objs: list[dict[str, Any]] = [_node("n1"), _node("n2")]
    objs.append({"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "web", "namespace": "default", "uid": "uid-d", "generation": 4,
                              "annotations": {"deployment.kubernetes.io/revision": "3"}},
                 "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": web_tpl,
                          "strategy": {"type": "RollingUpdate",
                                       "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                          "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
                 "status": {"replicas": 3, "availableReplicas": 3, "observedGeneration": 4}})
    objs.append({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                 "metadata": {"name": "web-5d8f7c9b6d", "namespace": "default", "uid": "uid-rs",
                              "labels": {"app": "web", "pod-template-hash": "5d8f7c9b6d"},
                              "annotations": {"deployment.kubernetes.io/revision": "3",
                                              "deployment.kubernetes.io/desired-replicas": "3",
                                              "deployment.kubernetes.io/max-replicas": "4"},
                              "ownerReferences": _ref("Deployment", "web", "uid-d")},
                 "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d8f7c9b6d"}},
                          "template": rs_tpl}})
    objs += [_pod(f"web-5d8f7c9b6d-{s}", n, rs_tpl, _ref("ReplicaSet", "web-5d8f7c9b6d", "uid-rs"))
             for s, n in (("abcde", "n1"), ("fghjk", "n2"), ("lmnpq", "n2"))]
    objs.append({"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": {"name": "agent", "namespace": "default", "uid": "uid-ds",
                              "annotations": {"deprecated.daemonset.template.generation": "2"}},
                 "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": ds_tpl,
                          "updateStrategy": {"type": "RollingUpdate",
                                             "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}}})
    for n in ("n1", "n2"):
        p = _pod(f"agent-{n}x7k", n, ds_tpl, _ref("DaemonSet", "agent", "uid-ds"))
        p["metadata"]["labels"].update({"pod-template-generation": "2", "controller-revision-hash": "6c4f8b9d77"})
        objs.append(p)
    objs.append({"apiVersion": "apps/v1", "kind": "StatefulSet",
                 "metadata": {"name": "db", "namespace": "default", "uid": "uid-ss"},
                 "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                          "template": ss_tpl},
                 "status": {"currentRevision": "db-7f6d9c8b5", "updateRevision": "db-7f6d9c8b5"}})
    objs.append({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                 "metadata": {"name": "db-7f6d9c8b5", "namespace": "default", "uid": "uid-cr",
                              "labels": {"app": "db", "controller.kubernetes.io/hash": "7f6d9c8b5"},
                              "ownerReferences": _ref("StatefulSet", "db", "uid-ss")},
                 "data": {"spec": {"template": {**ss_tpl, "$patch": "replace"}}}, "revision": 1})
    for i, n in enumerate(("n1", "n2")):
        p = _pod(f"db-{i}", n, ss_tpl, _ref("StatefulSet", "db", "uid-ss"))
        p["metadata"]["labels"].update({"controller-revision-hash": "db-7f6d9c8b5",
                                        "statefulset.kubernetes.io/pod-name": f"db-{i}",
                                        "apps.kubernetes.io/pod-index": str(i)})
        p["spec"].update(hostname=f"db-{i}", subdomain="db")
        objs.append(p)
    return objs


def test_a_dump_re_simulates_with_its_pods_kept() -> None:
    objs = dump()
    pods_before = {o["metadata"]["name"]: o["spec"]["nodeName"] for o in objs if o["kind"] == "Pod"}
    sim = Simulation(seed=3)
    assert sim.load(list(reversed(objs)), existing=range(len(objs))) == []  # any order
    sim.run()
    pods = {p.name: p for p in sim.store.items("Pod") if isinstance(p, Pod)}
    assert {n: p.node_name for n, p in pods.items()} == pods_before
    rs = sim.store.get("ReplicaSet", "default", "web-5d8f7c9b6d")
    assert [r.name for r in sim.store.items("ReplicaSet")] == ["web-5d8f7c9b6d"]
    d = sim.store.get("Deployment", "default", "web")
    assert rs.controller_ref().uid == d.uid  # type: ignore[union-attr]
    assert pods["web-5d8f7c9b6d-abcde"].controller_ref().uid == rs.uid  # type: ignore[union-attr]
    assert d.raw["status"]["availableReplicas"] == 3
    assert d.annotations["deployment.kubernetes.io/revision"] == "3"
    assert [c.name for c in sim.store.items("ControllerRevision") if c.name.startswith("db-")] == ["db-7f6d9c8b5"]
    ss = sim.store.get("StatefulSet", "default", "db")
    assert (ss.current_revision, ss.ready_replicas) == ("db-7f6d9c8b5", 2)  # type: ignore[attr-defined]
    ds = sim.store.get("DaemonSet", "default", "agent")
    assert (ds.updated_number_scheduled, ds.number_available) == (2, 2)  # type: ignore[attr-defined]
    assert not [e for e in sim.store.items("Event") if e.raw.get("reason") in ("SuccessfulCreate", "SuccessfulDelete")]


def test_serve_loads_a_dump_before_its_controllers_start() -> None:
    """``ksched serve --load``: the same loading; the controllers start afterwards and find every
    pod claimed by its owner; a restart finds what is stored already and skips it."""
    from ksched.clock import VirtualClock
    from ksched.sim.cluster import EmbeddedCluster
    from ksched.sim.loading import load_objects

    cluster = EmbeddedCluster(VirtualClock(), synchronous=False, auto_create_namespaces=True)
    objs = list(reversed(dump()))
    assert load_objects(cluster.store, objs, set(range(len(objs)))).errors == []
    assert load_objects(cluster.store, dump()[:2], {0, 1}, skip_present=True).errors == []
    cluster.controllers.settle()  # what the controllers' thread does first
    names = sorted(p.name for p in cluster.store.items("Pod"))
    assert names == sorted(o["metadata"]["name"] for o in dump() if o["kind"] == "Pod")
    assert not [e for e in cluster.store.items("Event") if e.raw.get("reason") == "SuccessfulCreate"]
