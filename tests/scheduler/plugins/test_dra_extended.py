"""DRA-backed extended resources (DRAExtendedResource): the special claim's requests and request
mappings (upstream's ``extendeddynamicresources_test.go`` tables), which class a resource name
maps to, NodeResourcesFit leaving such resources to DynamicResources (vectorized and per-node
forms agreeing), Filter's messages, the claim PreBind writes and the pod's
``status.extendedResourceClaimStatus``, the stale claim PostFilter deletes, the conflict
resolver and the kubelet's admission."""

from __future__ import annotations

from typing import Any

import pytest
from tests.scheduler.plugins.test_dynamicresources import device_class, get_pod, gpu_slice, message, node

from ksched.api.accounting import NodeAccounting
from ksched.api.errors import NotFound
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.resource import (
    ANNOTATION_EXTENDED_RESOURCE_CLAIM,
    FINALIZER_DELETE_PROTECTION,
    DeviceClass,
    ResourceClaim,
)
from ksched.kubelet.predicate import general_predicates
from ksched.scheduler.plugins.dynamicresources.extended import DeviceClassResolver, requests_and_mappings
from ksched.sim.simulation import Simulation
from ksched.testing import PluginRunner

ERN = "example.com/gpu"
PREFIX = "deviceclass.resource.kubernetes.io/"


# ---------------------------------------------------------------- requests and mappings (upstream's tables)


def _ctr(name: str, res: dict[str, str], sidecar: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "i", "resources": {"requests": dict(res), "limits": dict(res)}}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def _pod(containers: list[dict[str, str]], init: list[tuple[str, dict[str, str]]] = ()) -> Pod:  # type: ignore[assignment]
    """st.MakePod: ``Res`` adds con<i>; ``InitReq`` init-con<i>; ``SidecarReq`` sidecar-con<i>."""
    spec: dict[str, Any] = {"containers": [_ctr(f"con{i}", r) for i, r in enumerate(containers)]}
    if init:
        spec["initContainers"] = [_ctr(f"{kind}-con{i}", r, kind == "sidecar") for i, (kind, r) in enumerate(init)]
    return Pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "u"},
                "spec": spec})


class _Resolver:
    """upstream's mockDeviceClassResolver: resource name -> class, nothing implicit."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = {k: DeviceClass({"metadata": {"name": v}}) for k, v in mapping.items()}

    def get(self, resource: str) -> DeviceClass | None:
        return self.mapping.get(resource)

    def __bool__(self) -> bool:
        return bool(self.mapping)


POD1 = _pod([{ERN: "1", ERN + "1": "2"}])
POD2 = _pod([{ERN: "1"}, {ERN + "1": "2"}])
POD_INIT = _pod([{ERN: "1"}], [("init", {ERN + "init": "2"})])
POD_INIT2 = _pod([{ERN: "1"}], [("init", {ERN + "init": "1"}), ("init", {ERN + "init": "2"})])
POD_INIT3 = _pod([{ERN: "1"}], [("init", {ERN + "init": "1"}), ("sidecar", {ERN + "init": "1"}),
                                ("init", {ERN + "init": "2"})])
POD1_INIT_IMPLICIT = _pod([], [("init", {ERN + "init": "1", PREFIX + "classInit": "2"})])
POD_INIT_IMPLICIT = _pod([{ERN: "1"}], [("init", {ERN + "init": "1"}), ("init", {PREFIX + "classInit": "2"})])

RES = [ERN]
RES2 = [ERN, ERN + "1"]
RES_INIT = [ERN, ERN + "init"]
RES_INIT_IMPLICIT = [ERN, ERN + "init", PREFIX + "classInit"]
MAP = {ERN: "class"}
MAP2 = {ERN: "class", ERN + "1": "class1"}
MAP_INIT = {ERN: "class", ERN + "init": "classInit", PREFIX + "classInit": "classInit"}


@pytest.mark.parametrize(("pod", "resources", "mapping", "want"), [
    pytest.param(POD1, [], {}, [], id="nil"),
    pytest.param(POD1, RES, MAP, [("container-0-request-0", "class", 1)], id="one resource match"),
    pytest.param(POD1, RES2, MAP, [("container-0-request-0", "class", 1)],
                 id="one resource match, one resource not match"),
    pytest.param(POD1, RES2, MAP2, [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)],
                 id="two resources match"),
    pytest.param(POD2, RES2, MAP2, [("container-0-request-0", "class", 1), ("container-1-request-0", "class1", 2)],
                 id="two containers match"),
    pytest.param(POD_INIT, RES_INIT, MAP_INIT,
                 [("container-0-request-0", "classInit", 2), ("container-1-request-0", "class", 1)],
                 id="one init container, one regular container"),
    pytest.param(POD_INIT2, RES_INIT, MAP_INIT,
                 [("container-1-request-0", "classInit", 2), ("container-2-request-0", "class", 1)],
                 id="two init containers, one regular container"),
    pytest.param(POD_INIT3, RES_INIT, MAP_INIT,
                 [("container-1-request-0", "classInit", 1), ("container-2-request-0", "classInit", 2),
                  ("container-3-request-0", "class", 1)],
                 id="three init containers, one sidecar, one regular container"),
])
def test_requests(pod: Pod, resources: list[str], mapping: dict[str, str], want: list[tuple[str, str, int]]) -> None:
    reqs, _ = requests_and_mappings(pod, resources, _Resolver(mapping))  # type: ignore[arg-type]
    assert [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in reqs] == want
    assert all(r["exactly"]["allocationMode"] == "ExactCount" for r in reqs)


@pytest.mark.parametrize(("pod", "resources", "mapping", "want"), [
    pytest.param(POD1, RES2, MAP2, [("container-0-request-0", "con0", ERN), ("container-0-request-1", "con0", ERN + "1")],
                 id="one container, two requests"),
    pytest.param(POD1_INIT_IMPLICIT, RES_INIT_IMPLICIT, MAP_INIT,
                 [("container-0-request-0", "init-con0", PREFIX + "classInit"),
                  ("container-0-request-1", "init-con0", ERN + "init")],
                 id="one container, one explicit and one implicit request"),
    pytest.param(POD2, RES2, MAP2, [("container-0-request-0", "con0", ERN), ("container-1-request-0", "con1", ERN + "1")],
                 id="two containers, two requests"),
    pytest.param(POD_INIT, RES_INIT, MAP_INIT,
                 [("container-0-request-0", "init-con0", ERN + "init"), ("container-1-request-0", "con0", ERN)],
                 id="one init container, one regular container, one request"),
    pytest.param(POD_INIT2, RES_INIT, MAP_INIT,
                 [("container-1-request-0", "init-con0", ERN + "init"),
                  ("container-1-request-0", "init-con1", ERN + "init"), ("container-2-request-0", "con0", ERN)],
                 id="three containers (two are init container), two requests"),
    pytest.param(POD_INIT_IMPLICIT, RES_INIT_IMPLICIT, MAP_INIT,
                 [("container-0-request-0", "init-con0", ERN + "init"),
                  ("container-1-request-0", "init-con1", PREFIX + "classInit"), ("container-2-request-0", "con0", ERN)],
                 id="three containers (two are init container), both explicit and implicit resources"),
    pytest.param(POD_INIT3, RES_INIT, MAP_INIT,
                 [("container-1-request-0", "init-con0", ERN + "init"),
                  ("container-1-request-0", "sidecar-con1", ERN + "init"),
                  ("container-2-request-0", "init-con2", ERN + "init"), ("container-3-request-0", "con0", ERN)],
                 id="four containers (two are init container, one sidecar), three requests"),
])
def test_mappings(pod: Pod, resources: list[str], mapping: dict[str, str], want: list[tuple[str, str, str]]) -> None:
    _, got = requests_and_mappings(pod, resources, _Resolver(mapping))  # type: ignore[arg-type]
    assert sorted((m["requestName"], m["containerName"], m["resourceName"]) for m in got) == want


# ---------------------------------------------------------------- which class a name maps to


def _class(name: str, ern: str = "", created: str = "2025-01-01T00:00:00Z") -> DeviceClass:
    spec = {"extendedResourceName": ern} if ern else {}
    return DeviceClass({"metadata": {"name": name, "creationTimestamp": created}, "spec": spec})


def test_resolver_implicit_and_explicit_names() -> None:
    r = DeviceClassResolver([_class("gpu", ERN), _class("fpga")])
    assert r.get(ERN).name == "gpu"  # type: ignore[union-attr]
    assert r.get(PREFIX + "gpu").name == "gpu"  # type: ignore[union-attr]
    assert r.get(PREFIX + "fpga").name == "fpga"  # type: ignore[union-attr]
    assert r.get("example.com/fpga") is None
    assert not DeviceClassResolver([])


def test_resolver_conflicts_newer_wins_then_smaller_name() -> None:
    old, new = _class("b-old", ERN, "2025-01-01T00:00:00Z"), _class("c-new", ERN, "2025-01-02T00:00:00Z")
    assert DeviceClassResolver([new, old]).get(ERN).name == "c-new"  # type: ignore[union-attr]
    assert DeviceClassResolver([old, new]).get(ERN).name == "c-new"  # type: ignore[union-attr]
    tie = _class("a-tie", ERN, "2025-01-02T00:00:00Z")
    assert DeviceClassResolver([new, tie]).get(ERN).name == "a-tie"  # type: ignore[union-attr]


# ---------------------------------------------------------------- scheduling end to end


def gpu_class(name: str = "gpu", ern: str | None = ERN) -> dict[str, Any]:
    d = device_class(name)
    if ern:
        d["spec"]["extendedResourceName"] = ern
    return d


def xpod(name: str, res: dict[str, str], gated: bool = False) -> dict[str, Any]:
    p: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                         "spec": {"containers": [{"name": "c", "image": "i",
                                                  "resources": {"requests": {"cpu": "1", **res}, "limits": dict(res)}}]}}
    if gated:
        p["spec"]["schedulingGates"] = [{"name": "wait"}]
    return p


def plugin_node(name: str, gpus: int = 0) -> dict[str, Any]:
    n = node(name)
    if gpus:
        n["status"]["allocatable"][ERN] = str(gpus)
        n["status"]["capacity"][ERN] = str(gpus)
    return n


def run(*objs: dict[str, Any]) -> Simulation:
    sim = Simulation(seed=1)
    assert not sim.load(objs)
    sim.run(max_seconds=600)
    return sim


def claims(sim: Simulation) -> list[ResourceClaim]:
    return [c for c in sim.store.list("ResourceClaim")[0] if isinstance(c, ResourceClaim)]


def test_extended_resource_from_dra_devices_writes_the_claim_and_the_pod_status() -> None:
    sim = run(node("n1"), node("n2"), gpu_slice("n2", 3), gpu_class(), xpod("p", {ERN: "2"}))
    p = get_pod(sim, "p")
    assert p.node_name == "n2"
    assert p.phase == "Running"  # the kubelet admitted it without example.com/gpu in its allocatable
    [c] = claims(sim)
    assert c.name.startswith("p-extended-resources-") and len(c.name) == len("p-extended-resources-") + 5
    assert c.annotations == {ANNOTATION_EXTENDED_RESOURCE_CLAIM: "true"}
    [owner] = c.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Pod", "p", p.uid, True)
    assert c.raw["spec"] == {"devices": {"requests": [
        {"name": "container-0-request-1",
         "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}]}}
    assert [(r["request"], r["device"]) for r in c.results] == [("container-0-request-1", "gpu-0"),
                                                               ("container-0-request-1", "gpu-1")]
    assert c.reserved_for == ({"resource": "pods", "name": "p", "uid": p.uid},)
    assert FINALIZER_DELETE_PROTECTION in c.finalizers
    assert p.raw["status"]["extendedResourceClaimStatus"] == {
        "requestMappings": [{"containerName": "c", "resourceName": ERN, "requestName": "container-0-request-1"}],
        "resourceClaimName": c.name}
    # The pod goes, the claim goes with it (owner reference) and its devices are free again.
    sim.store.delete("Pod", "default", "p")
    sim.run(max_seconds=600)
    assert claims(sim) == []


def test_implicit_class_name_and_device_plugin_nodes() -> None:
    sim = run(plugin_node("dp", gpus=1), node("n2"), gpu_slice("n2", 1), gpu_class(ern=None),
              xpod("a", {PREFIX + "gpu": "1"}), xpod("b", {ERN: "1"}), xpod("c", {ERN: "1"}))
    # a gets a DRA device through the class's implicit name; b and c ask for example.com/gpu,
    # which no class stands for: only the device-plugin node has it, once.
    assert get_pod(sim, "a").node_name == "n2"
    placed = {n: get_pod(sim, n).node_name for n in ("b", "c")}
    assert sorted(placed.values()) == ["", "dp"]
    waiting = next(n for n, v in placed.items() if not v)
    assert message(sim, waiting) == (
        "0/2 nodes are available: 2 Insufficient example.com/gpu. no new claims to deallocate, preemption: 0/2 "
        "nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for "
        "scheduling.")
    assert [c.raw["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] for c in claims(sim)] == ["gpu"]
    assert "extendedResourceClaimStatus" not in get_pod(sim, next(n for n in placed if placed[n])).raw["status"]


def test_node_with_the_resource_in_its_allocatable_uses_it_not_dra() -> None:
    sim = run(plugin_node("dp", gpus=2), gpu_class(), xpod("p", {ERN: "1"}))
    p = get_pod(sim, "p")
    assert p.node_name == "dp"
    assert claims(sim) == []
    assert "extendedResourceClaimStatus" not in p.raw["status"]


def test_no_devices_left_message() -> None:
    sim = run(node("n1"), gpu_slice("n1", 1), gpu_class(), xpod("a", {ERN: "1"}), xpod("b", {ERN: "1"}))
    pending = [n for n in ("a", "b") if not get_pod(sim, n).node_name]
    assert len(pending) == 1
    assert message(sim, pending[0]) == ("0/1 nodes are available: 1 cannot allocate all claims. still not "
                                        "schedulable, preemption: 0/1 nodes are available: 1 Preemption is not "
                                        "helpful for scheduling.")


def test_dra_extended_and_user_claims_together() -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "uc", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}
    p = xpod("p", {ERN: "1"})
    p["spec"]["resourceClaims"] = [{"name": "u", "resourceClaimName": "uc"}]
    sim = run(node("n1"), gpu_slice("n1", 2), gpu_class(), claim, p)
    assert get_pod(sim, "p").node_name == "n1"
    by_name = {c.name: c for c in claims(sim)}
    assert [r["device"] for r in by_name.pop("uc").results] == ["gpu-0"]
    [ext] = by_name.values()
    assert [r["device"] for r in ext.results] == ["gpu-1"]


def test_stale_claim_of_an_earlier_cycle_is_deleted_by_postfilter() -> None:
    sim = Simulation(seed=1)
    assert not sim.load([node("n1"), gpu_slice("n1", 1), gpu_class(), xpod("p", {ERN: "1"}, gated=True)])
    sim.run(max_seconds=60)
    p = get_pod(sim, "p")
    stale = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "p-extended-resources-stale", "namespace": "default",
                          "annotations": {ANNOTATION_EXTENDED_RESOURCE_CLAIM: "true"},
                          "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": p.uid,
                                               "controller": True}]},
             "spec": {"devices": {"requests": [{"name": "container-0-request-1",
                                                "exactly": {"deviceClassName": "gpu"}}]}}}
    sim.client.create(stale)
    raw = p.deepcopy_raw()
    raw["spec"].pop("schedulingGates")
    sim.client.update(raw)
    # One attempt: Filter refuses the stale claim on every node, PostFilter deletes it.
    sim.scheduler.run_until_idle(max_steps=3)
    cond = get_pod(sim, "p").condition("PodScheduled")
    assert cond is not None and cond["message"] == (
        "0/1 nodes are available: 1 cannot schedule extended resource claim. deletion of ResourceClaim completed, "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    with pytest.raises(NotFound):
        sim.store.get("ResourceClaim", "default", "p-extended-resources-stale")
    # No event of a deleted claim requeues the pod (as upstream): the periodic flush does.
    sim.clock.advance(301)
    sim.run(max_seconds=600)
    p = get_pod(sim, "p")
    assert p.node_name == "n1"
    [c] = claims(sim)
    assert c.name == p.raw["status"]["extendedResourceClaimStatus"]["resourceClaimName"]


# ---------------------------------------------------------------- the plugins' Filter, node by node


def _runner(sim: Simulation, plugins: list[str]) -> PluginRunner:
    nodes = [n for n in sim.store.list("Node")[0] if isinstance(n, Node)]
    r = PluginRunner(plugins, nodes, client=sim.client, informers=sim.informers, clock=sim.clock)
    sim.informers.poll()
    return r


def test_filter_messages_and_fit_delegation_agree_vectorized() -> None:
    other = "example.com/other"
    sim = Simulation(seed=1)
    n_other = plugin_node("other")
    n_other["status"]["allocatable"][other] = "1"
    n_zero = plugin_node("zero")
    n_zero["status"]["allocatable"][ERN] = "0"
    assert not sim.load([plugin_node("plain"), plugin_node("dp", gpus=1), n_other, n_zero,
                         gpu_slice("plain", 1), gpu_slice("zero", 1), gpu_slice("other", 1), gpu_class()])
    sim.run(max_seconds=60)
    pod = Pod(xpod("p", {ERN: "1"}))
    # NodeResourcesFit leaves example.com/gpu to DRA where the allocatable has none (absent or 0);
    # the vectorized form agrees (PluginRunner.filter checks it).
    fit = _runner(sim, ["NodeResourcesFit"]).filter(pod)
    assert {k: v is None for k, v in fit.items()} == {"plain": True, "dp": True, "other": True, "zero": True}
    both = Pod(xpod("q", {ERN: "2", other: "1"}))
    fit = _runner(sim, ["NodeResourcesFit"]).filter(both)
    assert {k: (v.reasons if v is not None else None) for k, v in fit.items()} == {
        "plain": ("Insufficient example.com/other",), "dp": ("Insufficient example.com/gpu",
                                                             "Insufficient example.com/other"),
        "other": None, "zero": ("Insufficient example.com/other",)}
    dra = _runner(sim, ["DynamicResources"]).filter(both)
    assert {k: (v.reasons if v is not None else None) for k, v in dra.items()} == {
        "plain": ("cannot fit resource",), "dp": ("cannot fit resource",), "other": ("cannot allocate all claims",),
        "zero": ("cannot fit resource",)}


# ---------------------------------------------------------------- the conflict resolver and the kubelet


def _node_obj(alloc: dict[str, str]) -> Node:
    return Node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                 "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10", **alloc}}})


def test_conflict_resolver_accepts_dra_backed_resources_only() -> None:
    raw = xpod("p", {ERN: "2"})
    raw["metadata"]["uid"] = "u"
    acc = NodeAccounting()
    assert "over-committed on example.com/gpu" in (acc.check(Pod(raw), _node_obj({}), "n") or "")
    raw["status"] = {"extendedResourceClaimStatus": {
        "requestMappings": [{"containerName": "c", "resourceName": ERN, "requestName": "container-0-request-1"}],
        "resourceClaimName": "p-extended-resources-abcde"}}
    assert acc.check(Pod(raw), _node_obj({}), "n") is None
    # A node that advertises the resource is still held to it.
    assert "over-committed on example.com/gpu" in (acc.check(Pod(raw), _node_obj({ERN: "1"}), "n") or "")
    assert acc.check(Pod(raw), _node_obj({ERN: "2"}), "n") is None


def test_kubelet_admits_resources_its_allocatable_has_none_of() -> None:
    pod = Pod(xpod("p", {ERN: "1", PREFIX + "gpu": "1"}))
    assert general_predicates(pod, _node_obj({}), []).admit
    assert general_predicates(pod, _node_obj({ERN: "0"}), []).admit
    got = general_predicates(pod, _node_obj({ERN: "1"}), [Pod(xpod("o", {ERN: "1"}))])
    assert (got.admit, got.reason) == (False, "OutOfexample.com/gpu")
