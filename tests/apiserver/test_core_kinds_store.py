"""What the registry does per kind (ksched.apiserver.strategy, ipallocator): Service defaults,
cluster IPs and node ports (given ones checked, missing ones allocated, released with the
Service), Secret stringData, immutable ConfigMaps and Secrets, RuntimeClass handlers and
binding roleRefs; objects created as existing (imported from another cluster)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.errors import Conflict, Invalid
from ksched.api.pod import Pod
from ksched.apiserver.ipallocator import ServiceAllocator
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock


@pytest.fixture
def store() -> Store:
    return Store(VirtualClock())


def svc(name: str, stype: str = "ClusterIP", ports: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": stype, "ports": ports or [{"port": 80}], **spec}}


def test_service_defaults_and_allocation(store: Store) -> None:
    s = store.create(svc("web", "NodePort", selector={"app": "web"}))
    spec = s.raw["spec"]
    assert spec["clusterIP"] == "10.96.1.0" and spec["clusterIPs"] == ["10.96.1.0"]
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80, "nodePort": 30086}]
    assert (spec["sessionAffinity"], spec["internalTrafficPolicy"], spec["externalTrafficPolicy"],
            spec["ipFamilies"], spec["ipFamilyPolicy"]) == ("None", "Cluster", "Cluster", ["IPv4"], "SingleStack")
    assert store.create(svc("db")).raw["spec"]["clusterIP"] == "10.96.1.1"
    headless = store.create(svc("h", clusterIP="None"))
    assert headless.raw["spec"]["clusterIPs"] == ["None"]
    ext = store.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"},
                        "spec": {"type": "ExternalName", "externalName": "example.com"}})
    assert "clusterIP" not in ext.raw["spec"]
    lb = store.create(svc("lb", "LoadBalancer"))
    assert lb.raw["status"] == {"loadBalancer": {}} and lb.raw["spec"]["ports"][0]["nodePort"] == 30087


def test_given_addresses_and_ports_are_checked(store: Store) -> None:
    store.create(svc("a", "NodePort", clusterIP="10.96.0.10", ports=[{"port": 80, "nodePort": 30000}]))
    with pytest.raises(Invalid) as ei:
        store.create(svc("b", clusterIP="10.96.0.10"))
    assert ei.value.message == ('Service "b" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.10"}: '
                                "failed to allocate IP 10.96.0.10: provided IP is already allocated")
    with pytest.raises(Invalid, match=re.escape("the provided IP (192.168.0.1) is not in the valid range. The range of "
                                      "valid IPs is 10.96.0.0/12")):
        store.create(svc("b", clusterIP="192.168.0.1"))
    with pytest.raises(Invalid, match=re.escape("spec.ports[0].nodePort: Invalid value: 30000: provided port is already "
                                      "allocated")):
        store.create(svc("b", "NodePort", ports=[{"port": 80, "nodePort": 30000}]))
    with pytest.raises(Invalid, match=re.escape("provided port is not in the valid range. The range of valid ports is "
                                      "30000-32767")):
        store.create(svc("b", "NodePort", ports=[{"port": 80, "nodePort": 80}]))
    # The same port number over another protocol is free.
    store.create(svc("udp", "NodePort", ports=[{"port": 53, "protocol": "UDP", "nodePort": 30000}]))
    # Deleting a Service gives its address and ports back.
    store.delete("Service", "default", "a")
    store.create(svc("b", "NodePort", clusterIP="10.96.0.10", ports=[{"port": 80, "nodePort": 30000}]))


def test_cluster_ip_is_immutable_and_kept_on_update(store: Store) -> None:
    s = store.create(svc("web"))
    raw = s.deepcopy_raw()
    raw["spec"].pop("clusterIP")
    raw["spec"].pop("clusterIPs")
    raw["metadata"]["labels"] = {"x": "y"}
    s2 = store.update(raw)
    assert s2.raw["spec"]["clusterIP"] == s.raw["spec"]["clusterIP"] and s2.labels == {"x": "y"}
    raw = s2.deepcopy_raw()
    raw["spec"]["clusterIP"] = "10.96.0.99"
    with pytest.raises(Invalid, match=r"spec.clusterIPs\[0\]: Invalid value: \"10.96.0.99\": may not change once set"):
        store.update(raw)
    # NodePort -> ClusterIP drops the node ports; back to NodePort allocates again.
    n = store.create(svc("np", "NodePort"))
    port = n.raw["spec"]["ports"][0]["nodePort"]
    n2 = store.patch("Service", "default", "np", {"spec": {"type": "ClusterIP", "externalTrafficPolicy": None}})
    assert "nodePort" not in n2.raw["spec"]["ports"][0]
    n3 = store.patch("Service", "default", "np", {"spec": {"type": "NodePort"}})
    assert 30000 <= n3.raw["spec"]["ports"][0]["nodePort"] <= 32767 and port != 0


@given(st.lists(st.tuples(st.sampled_from(["create", "delete"]), st.integers(0, 6),
                          st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer"])), max_size=30))
@settings(max_examples=50, deadline=None)
def test_addresses_and_ports_are_never_shared(ops: list[tuple[str, int, str]]) -> None:
    st_ = Store(VirtualClock())
    st_.services = ServiceAllocator("10.96.0.0/28", (30000, 30004))  # a tiny range: collisions and full ranges
    for op, i, stype in ops:
        try:
            if op == "create":
                st_.create(svc(f"s{i}", stype))
            else:
                st_.delete("Service", "default", f"s{i}")
        except Exception as e:
            assert type(e).__name__ in ("AlreadyExists", "NotFound", "Invalid"), e
        services = st_.items("Service")
        ips = [s.raw["spec"]["clusterIP"] for s in services]
        ports = [p["nodePort"] for s in services for p in s.raw["spec"]["ports"] if "nodePort" in p]
        assert len(ips) == len(set(ips)) and len(ports) == len(set(ports))
        assert all(30000 <= p <= 30004 for p in ports)


def test_secret_string_data_is_write_only(store: Store) -> None:
    s = store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                      "data": {"a": "eA=="}, "stringData": {"a": "over", "b": "bee"}})
    assert s.raw["data"] == {"a": "b3Zlcg==", "b": "YmVl"} and "stringData" not in s.raw and s.raw["type"] == "Opaque"


def test_immutable_fields(store: Store) -> None:
    cm = store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"},
                       "immutable": True})
    raw = cm.deepcopy_raw()
    raw["data"]["k"] = "w"
    with pytest.raises(Invalid, match="data: Forbidden: field is immutable when `immutable` is set"):
        store.update(raw)
    raw = cm.deepcopy_raw()
    raw["metadata"]["labels"] = {"ok": "yes"}
    store.update(raw)  # metadata may change
    rc = store.create({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "r"},
                       "handler": "runc"})
    with pytest.raises(Invalid, match='handler: Invalid value: "crun": field is immutable'):
        store.patch("RuntimeClass", "", "r", {"handler": "crun"})
    assert rc.handler == "runc"  # type: ignore[attr-defined]
    store.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "b"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r1"}})
    with pytest.raises(Invalid, match=r"roleRef: Invalid value: .*cannot change roleRef"):
        store.patch("RoleBinding", "default", "b", {"roleRef": {"name": "r2"}})


def test_limit_range_items_are_defaulted(store: Store) -> None:
    lr = store.create({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr"},
                       "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "1Mi"}}]}})
    assert lr.raw["spec"]["limits"][0] == {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "1Mi"},
                                           "default": {"cpu": "2"}, "defaultRequest": {"cpu": "2", "memory": "1Mi"}}


# ---------------------------------------------------------------- existing objects


def exported_pod(name: str, node: str = "n1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "98765",
                         "creationTimestamp": "2020-01-01T00:00:00Z", "generation": 3},
            "spec": {"nodeName": node, "priority": 7, "serviceAccountName": "builder",
                     "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}], **spec},
            "status": {"phase": "Running", "startTime": "2020-01-01T00:00:05Z",
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def test_existing_objects_keep_what_their_cluster_gave_them(store: Store) -> None:
    store.create({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr"},
                  "spec": {"limits": [{"type": "Container", "max": {"cpu": "500m"}}]}})
    p = store.create(exported_pod("old"), existing=True)
    assert isinstance(p, Pod)
    assert (p.uid, p.raw["metadata"]["creationTimestamp"], p.generation) == ("uid-old", "2020-01-01T00:00:00Z", 3)
    assert p.resource_version != "98765"
    assert (p.node_name, p.phase, p.priority) == ("n1", "Running", 7)
    assert p.raw["status"]["startTime"] == "2020-01-01T00:00:05Z"
    # Not admitted again: no LimitRanger bound, no service account check, no priority check.
    assert "kubernetes.io/limit-ranger" not in p.annotations
    # It is on its node: the conflict resolver counts it (a 4-cpu node has room for three more).
    store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                  "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    for i in range(4):
        store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"more{i}"},
                      "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "450m"}}},
                                              {"name": "d", "image": "i", "resources": {"limits": {"cpu": "450m"}}}]}})
    for i in range(3):
        store.bind("default", f"more{i}", "n1")
    with pytest.raises(Conflict):
        store.bind("default", "more3", "n1")
    # The same pod as a new object is refused by admission.
    raw = exported_pod("new")
    del raw["metadata"]["resourceVersion"]
    with pytest.raises(Exception, match="forbidden"):
        store.create(raw)


def test_existing_pods_are_charged_to_quota_but_never_refused(store: Store) -> None:
    q = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {"requests.cpu": "1"}},
         "status": {"hard": {"requests.cpu": "1"}, "used": {"requests.cpu": "0"}}}
    store.create(q, existing=True)
    store.create(exported_pod("a"), existing=True)
    store.create(exported_pod("b"), existing=True)  # over the quota: the other cluster admitted it
    assert store.get("ResourceQuota", "default", "q").raw["status"]["used"] == {"requests.cpu": "2"}
