"""Server-side printer columns (ksched.apiserver.tables) per kind, with hand-written objects (kinds
not served yet included): the header kubectl prints (non-wide and wide) and the cells, as
upstream's printers (pkg/printers/internalversion/printers.go) make them."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.meta import KubeObject, parse_time
from ksched.apiserver.tables import COLUMNS, format_label_selector, to_table

T0 = "2024-05-01T10:00:00Z"
NOW = parse_time(T0) + 3 * 3600 + 120  # type: ignore[operator]


def _obj(**raw: Any) -> KubeObject:
    raw.setdefault("metadata", {})
    raw["metadata"].setdefault("name", "x")
    raw["metadata"].setdefault("creationTimestamp", T0)
    return KubeObject.from_dict(raw)


def _table(kind: str, raw: dict[str, Any]) -> tuple[list[str], list[str], list[Any]]:
    t = to_table(kind, [_obj(**raw)], NOW)
    names = [c["name"] for c in t["columnDefinitions"] if c["priority"] == 0]
    wide = [c["name"] for c in t["columnDefinitions"] if c["priority"] == 1]
    return names, wide, t["rows"][0]["cells"]


CASES: list[tuple[str, dict[str, Any], list[str], list[str], list[Any]]] = [
    ("Event", {"metadata": {"name": "e1"}, "type": "Warning", "reason": "FailedScheduling", "message": " no fit\n",
               "involvedObject": {"kind": "Pod", "name": "web-1", "fieldPath": "spec"}, "count": 4,
               "source": {"component": "default-scheduler"}, "firstTimestamp": T0,
               "lastTimestamp": "2024-05-01T13:01:00Z"},
     ["Last Seen", "Type", "Reason", "Object", "Message"],
     ["Subobject", "Source", "First Seen", "Count", "Name"],
     ["60s", "Warning", "FailedScheduling", "pod/web-1", "spec", "default-scheduler", "no fit", "3h2m", "4", "e1"]),
    ("Event", {"type": "Normal", "reason": "Scheduled", "regarding": {"kind": "Pod", "name": "p"},
               "reportingController": "x", "eventTime": "2024-05-01T13:00:00.000000Z",
               "series": {"count": 7, "lastObservedTime": "2024-05-01T13:01:30.000000Z"}},
     ["Last Seen", "Type", "Reason", "Object", "Message"], ["Subobject", "Source", "First Seen", "Count", "Name"],
     ["30s", "Normal", "Scheduled", "pod/p", "", "", "", "2m", "7", "x"]),
    ("Namespace", {"status": {"phase": "Active"}}, ["Name", "Status", "Age"], [], ["x", "Active", "3h2m"]),
    ("Service", {"spec": {"type": "NodePort", "clusterIP": "10.0.0.7", "selector": {"b": "2", "a": "1"},
                          "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]}},
     ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age"], ["Selector"],
     ["x", "NodePort", "10.0.0.7", "<none>", "80:30080/TCP,53/UDP", "3h2m", "a=1,b=2"]),
    ("Service", {"spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.8", "ports": [{"port": 443}]}},
     ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age"], ["Selector"],
     ["x", "LoadBalancer", "10.0.0.8", "<pending>", "443/TCP", "3h2m", "<none>"]),
    ("Endpoints", {"subsets": [{"addresses": [{"ip": f"10.1.0.{i}"} for i in range(5)], "ports": [{"port": 80}]}]},
     ["Name", "Endpoints", "Age"], [], ["x", "10.1.0.0:80,10.1.0.1:80,10.1.0.2:80 + 2 more...", "3h2m"]),
    ("EndpointSlice", {"addressType": "IPv4", "ports": [{"port": 80}],
                       "endpoints": [{"addresses": ["10.1.0.1"]}, {"addresses": ["10.1.0.2"]}]},
     ["Name", "AddressType", "Ports", "Endpoints", "Age"], [], ["x", "IPv4", "80", "10.1.0.1,10.1.0.2", "3h2m"]),
    ("ConfigMap", {"data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}, ["Name", "Data", "Age"], [],
     ["x", 3, "3h2m"]),
    ("Secret", {"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}, ["Name", "Type", "Data", "Age"],
     [], ["x", "kubernetes.io/tls", 2, "3h2m"]),
    ("ServiceAccount", {}, ["Name", "Secrets", "Age"], [], ["x", 0, "3h2m"]),
    ("LimitRange", {}, ["Name", "Created At"], [], ["x", T0]),
    ("ResourceQuota", {"status": {"hard": {"pods": "10", "limits.cpu": "4", "cpu": "2"},
                                  "used": {"pods": "3", "cpu": "500m"}}},
     ["Name", "Age", "Request", "Limit"], [], ["x", "3h2m", "cpu: 500m/2, pods: 3/10", "limits.cpu: 0/4"]),
    ("PersistentVolume", {"spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                                   "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "fast",
                                   "claimRef": {"namespace": "ns", "name": "data"}}, "status": {"phase": "Bound"}},
     ["Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass",
      "VolumeAttributesClass", "Reason", "Age"], ["VolumeMode"],
     ["x", "10Gi", "RWO,RWX", "Delete", "Bound", "ns/data", "fast", "<unset>", "", "3h2m", "Filesystem"]),
    ("PersistentVolumeClaim", {"spec": {"volumeName": "pv1", "storageClassName": "fast"},
                               "status": {"phase": "Bound", "capacity": {"storage": "1Gi"},
                                          "accessModes": ["ReadWriteOncePod"]}},
     ["Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass", "VolumeAttributesClass", "Age"],
     ["VolumeMode"], ["x", "Bound", "pv1", "1Gi", "RWOP", "fast", "<unset>", "3h2m", "Filesystem"]),
    ("Deployment", {"spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                             "template": {"spec": {"containers": [{"name": "a", "image": "i:1"},
                                                                  {"name": "b", "image": "j:2"}]}}},
                    "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}},
     ["Name", "Ready", "Up-to-date", "Available", "Age"], ["Containers", "Images", "Selector"],
     ["x", "2/3", 3, 2, "3h2m", "a,b", "i:1,j:2", "app=web"]),
    ("ReplicaSet", {"spec": {"replicas": 2}, "status": {"replicas": 2, "readyReplicas": 1}},
     ["Name", "Desired", "Current", "Ready", "Age"], ["Containers", "Images", "Selector"],
     ["x", 2, 2, 1, "3h2m", "", "", "<none>"]),
    ("StatefulSet", {"spec": {}, "status": {"readyReplicas": 1}}, ["Name", "Ready", "Age"], ["Containers", "Images"],
     ["x", "1/1", "3h2m", "", ""]),
    ("DaemonSet", {"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}}},
                   "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                              "updatedNumberScheduled": 3, "numberAvailable": 2}},
     ["Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age"],
     ["Containers", "Images", "Selector"], ["x", 3, 3, 2, 3, 2, "kubernetes.io/os=linux", "3h2m", "", "", "<none>"]),
    ("ControllerRevision", {"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                                              "name": "web", "controller": True}]}, "revision": 2},
     ["Name", "Controller", "Revision", "Age"], [], ["x", "statefulset.apps/web", 2, "3h2m"]),
    ("Job", {"spec": {"completions": 5, "selector": {"matchExpressions": [
        {"key": "batch.kubernetes.io/controller-uid", "operator": "In", "values": ["u1"]}]}},
             "status": {"succeeded": 5, "startTime": T0, "completionTime": "2024-05-01T10:01:05Z",
                        "conditions": [{"type": "Complete", "status": "True"}]}},
     ["Name", "Status", "Completions", "Duration", "Age"], ["Containers", "Images", "Selector"],
     ["x", "Complete", "5/5", "65s", "3h2m", "", "", "batch.kubernetes.io/controller-uid in (u1)"]),
    ("Job", {"spec": {"parallelism": 3}, "status": {"succeeded": 1, "startTime": T0}},
     ["Name", "Status", "Completions", "Duration", "Age"], ["Containers", "Images", "Selector"],
     ["x", "Running", "1/1 of 3", "3h2m", "3h2m", "", "", "<none>"]),
    ("CronJob", {"spec": {"schedule": "*/5 * * * *", "suspend": False,
                          "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c",
                                                                                         "image": "busybox"}]}}}}},
                 "status": {"active": [{"name": "j1"}], "lastScheduleTime": "2024-05-01T13:00:00Z"}},
     ["Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age"],
     ["Containers", "Images", "Selector"],
     ["x", "*/5 * * * *", "<none>", "False", 1, "2m", "3h2m", "c", "busybox", "<none>"]),
    ("PodDisruptionBudget", {"spec": {"minAvailable": "80%"}, "status": {"disruptionsAllowed": 3}},
     ["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"], [],
     ["x", "80%", "N/A", 3, "3h2m"]),
    ("PriorityClass", {"value": 1000, "globalDefault": True},
     ["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"], [],
     ["x", 1000, True, "3h2m", "PreemptLowerPriority"]),
    ("StorageClass", {"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                      "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"},
     ["Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"], [],
     ["x (default)", "ebs.csi.aws.com", "Delete", "WaitForFirstConsumer", False, "3h2m"]),
    ("CSINode", {"spec": {"drivers": [{"name": "a"}, {"name": "b"}]}}, ["Name", "Drivers", "Age"], [],
     ["x", 2, "3h2m"]),
    ("Lease", {"spec": {"holderIdentity": "sched-1"}}, ["Name", "Holder", "Age"], [], ["x", "sched-1", "3h2m"]),
    ("RuntimeClass", {"handler": "runc"}, ["Name", "Handler", "Age"], [], ["x", "runc", "3h2m"]),
    ("ClusterRole", {}, ["Name", "Created At"], [], ["x", T0]),
    ("RoleBinding", {"roleRef": {"kind": "Role", "name": "reader"},
                     "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                                  {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]},
     ["Name", "Role", "Age"], ["Users", "Groups", "ServiceAccounts"],
     ["x", "Role/reader", "3h2m", "alice", "devs", "ns/sa"]),
    ("Widget", {}, ["Name", "Created At"], [], ["x", T0]),
]


@pytest.mark.parametrize(("kind", "raw", "columns", "wide", "cells"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_columns_and_cells(kind: str, raw: dict[str, Any], columns: list[str], wide: list[str],
                           cells: list[Any]) -> None:
    got_cols, got_wide, got_cells = _table(kind, raw)
    assert (got_cols, got_wide) == (columns, wide)
    assert got_cells == cells


def test_every_kind_the_issue_names_is_declared() -> None:
    assert {"Namespace", "Event", "Service", "Endpoints", "EndpointSlice", "ConfigMap", "Secret", "ServiceAccount",
            "LimitRange", "ResourceQuota", "PersistentVolume", "PersistentVolumeClaim", "Deployment", "ReplicaSet",
            "StatefulSet", "DaemonSet", "ControllerRevision", "Job", "CronJob", "PodDisruptionBudget",
            "PriorityClass", "StorageClass", "CSINode", "Lease", "RuntimeClass", "Role", "ClusterRole",
            "RoleBinding", "ClusterRoleBinding"} <= set(COLUMNS)
    for kind, cols in COLUMNS.items():
        assert cols[0].name == "Name" or kind == "Event", kind
        for c in cols:
            d = c.definition()
            assert d["type"] in ("string", "integer", "boolean", "date", "number") and d["description"], (kind, d)


def test_terminating_claims_and_jobs() -> None:
    raw = {"metadata": {"deletionTimestamp": T0}, "status": {"phase": "Bound"}}
    assert _table("PersistentVolumeClaim", raw)[2][1] == "Terminating"
    assert _table("Job", {"metadata": {"deletionTimestamp": T0}})[2][1] == "Terminating"
    assert _table("Job", {"status": {"conditions": [{"type": "Failed", "status": "True"}]}})[2][1] == "Failed"
    assert _table("Job", {"spec": {"suspend": True}, "status": {"conditions": [
        {"type": "Suspended", "status": "True"}]}})[2][1] == "Suspended"


@pytest.mark.parametrize(("sel", "want"), [
    (None, "<none>"),
    ({}, "<none>"),
    ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
    ({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["y", "x"]},
                           {"key": "e", "operator": "Exists"}, {"key": "d", "operator": "DoesNotExist"}]},
     "k notin (x,y),e,!d"),
])
def test_format_label_selector(sel: Any, want: str) -> None:
    assert format_label_selector(sel) == want


def test_include_object_and_list_metadata() -> None:
    objs = [_obj(metadata={"name": "a"}), _obj(metadata={"name": "b"})]
    t = to_table("ConfigMap", objs, NOW, "42", "tok", include_object="Object")
    assert t["metadata"] == {"resourceVersion": "42", "continue": "tok"}
    assert [r["object"]["metadata"]["name"] for r in t["rows"]] == ["a", "b"]
    t = to_table("ConfigMap", objs, NOW, include_object="None")
    assert all("object" not in r for r in t["rows"])
    t = to_table("ConfigMap", objs, NOW)
    assert t["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
