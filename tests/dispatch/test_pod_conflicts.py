"""Constraints between pods across scheduler instances whose watches lag: required pod
anti-affinity, DoNotSchedule topology spread and ReadWriteOncePod claims. Without the conflict
resolver's checks between pods, instances that have not seen each other's bindings break them;
with them (``Store.enable_pod_conflicts``, on under ``ksched serve --schedulers N``), never, and
the cluster still takes every pod one scheduler would place. The resolver's verdicts are also
checked one by one against a single store (ksched.api.podconflicts)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from dispatch_harness import Cluster, node, pod

from ksched.api.errors import BindingConflict, Conflict
from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.dispatch.webhook import BindingWebhook

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def anti_affine(name: str, app: str = "solo", key: str = HOST, **kw: Any) -> dict[str, Any]:
    p = pod(name, cpu="100m", labels={"app": app}, **kw)
    p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]}}
    return p


def spread(name: str, app: str = "spread", max_skew: int = 1, **extra: Any) -> dict[str, Any]:
    p = pod(name, cpu="100m", labels={"app": app})
    p["spec"]["topologySpreadConstraints"] = [{"maxSkew": max_skew, "topologyKey": ZONE,
                                               "whenUnsatisfiable": "DoNotSchedule",
                                               "labelSelector": {"matchLabels": {"app": app}}, **extra}]
    return p


def rwop_user(name: str, claim: str = "solo-disk") -> dict[str, Any]:
    p = pod(name, cpu="100m", labels={"app": "disk"})
    p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return p


def rwop_claim(name: str = "solo-disk") -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{name}"},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOncePod"], "storageClassName": "",
                  "claimRef": {"namespace": "default", "name": name},
                  "csi": {"driver": "disk.csi.example.com", "volumeHandle": name}},
         "status": {"phase": "Bound"}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": name, "namespace": "default", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
         "spec": {"storageClassName": "", "volumeName": f"pv-{name}", "accessModes": ["ReadWriteOncePod"],
                  "resources": {"requests": {"storage": "1Gi"}}},
         "status": {"phase": "Bound", "accessModes": ["ReadWriteOncePod"], "capacity": {"storage": "1Gi"}}}]


def create(s: Store, objs: list[dict[str, Any]]) -> None:
    """Create, then write the status of the objects that carry one (a bound claim and volume)."""
    for o in objs:
        made = s.create(o)
        if o["kind"] in ("PersistentVolume", "PersistentVolumeClaim"):
            s.update_status({**made.raw, "status": o["status"]})


def zoned_nodes(zones: int = 3, per_zone: int = 2) -> list[dict[str, Any]]:
    return [node(f"z{z}-n{i}", cpu="8", labels={ZONE: f"z{z}"}) for z in range(zones) for i in range(per_zone)]


# ---------------------------------------------------------------- the final state, judged independently


def violations(pods: list[Pod], zone_of: dict[str, str]) -> list[str]:
    """Broken constraints among the bound pods of the cluster below: two ``solo`` pods on one
    node, ``spread`` pods more than one apart between zones, two pods on the one
    ReadWriteOncePod claim."""
    bound = [p for p in pods if p.node_name]
    bad: list[str] = []
    solo = Counter(p.node_name for p in bound if p.labels.get("app") == "solo")
    bad += [f"{n}: {c} solo pods" for n, c in sorted(solo.items()) if c > 1]
    per_zone = Counter({z: 0 for z in set(zone_of.values())})
    per_zone.update(zone_of[p.node_name] for p in bound if p.labels.get("app") == "spread")
    if per_zone and max(per_zone.values()) - min(per_zone.values()) > 1:
        bad.append(f"spread: {dict(sorted(per_zone.items()))}")
    disk = [p.key for p in bound if p.labels.get("app") == "disk"]
    if len(disk) > 1:
        bad.append(f"ReadWriteOncePod claim used by {disk}")
    return bad


def race(pod_conflicts: bool, seed: int, n_instances: int) -> Cluster:
    """6 nodes in 3 zones; 8 pods that may not share a node, 3 spread over the zones, 3 that
    use one ReadWriteOncePod claim; instances that catch up with their watches rarely."""
    c = Cluster(seed=seed, pod_conflicts=pod_conflicts)
    c.create(zoned_nodes())
    create(c.store, rwop_claim())
    for i in range(n_instances):
        c.add_instance(f"s{i}")
    c.create([*(anti_affine(f"solo-{i}") for i in range(8)), *(spread(f"spread-{i}") for i in range(3)),
              *(rwop_user(f"disk-{i}") for i in range(3))])
    c.dispatcher.run_until_idle()
    for inst in c.instances.values():
        inst.scheduler.sync()  # every instance holds its pods, and the same (empty) view
    c.race(poll_prob=0.1)
    return c


def _zones(c: Cluster) -> dict[str, str]:
    return {n.name: n.labels[ZONE] for n in c.store.items("Node")}  # type: ignore[attr-defined]


@pytest.mark.parametrize("n_instances", [2, 3])
def test_without_the_checks_lagging_instances_break_constraints_between_pods(n_instances: int) -> None:
    found: set[str] = set()
    for seed in range(4):
        c = race(False, seed, n_instances)
        for v in violations(c.pods(), _zones(c)):
            found.add("anti-affinity" if v.startswith("z") else v.split(" ")[0].rstrip(":"))
    # Each kind of constraint is broken in some run: the race is real.
    assert found == {"anti-affinity", "spread", "ReadWriteOncePod"}, found


@pytest.mark.parametrize("n_instances", [2, 3])
def test_with_the_checks_no_constraint_between_pods_is_broken(n_instances: int) -> None:
    refused = 0
    for seed in range(4):
        c = race(True, seed, n_instances)
        pods = c.pods()
        assert violations(pods, _zones(c)) == [], seed
        bound = Counter(p.labels["app"] for p in pods if p.node_name)
        # As one scheduler: a solo pod per node, every spread pod, one user of the claim.
        assert bound == {"solo": 6, "spread": 3, "disk": 1}, (seed, bound)
        refused += sum(i.conflicts for i in c.instances.values())
    assert refused > 0  # the resolver did refuse bindings made on stale views


# ---------------------------------------------------------------- verdicts one by one


def store(objs: list[dict[str, Any]], *, pod_conflicts: bool = True) -> Store:
    s = Store(VirtualClock(), auto_create_namespaces=True)
    if pod_conflicts:
        s.enable_pod_conflicts()
    create(s, objs)
    return s


def refusal(s: Store, name: str, node_name: str) -> str | None:
    try:
        s.bind("default", name, node_name)
    except BindingConflict as e:
        return e.message
    return None


def test_anti_affinity_of_the_incoming_pod_and_of_the_bound_ones() -> None:
    s = store([*zoned_nodes(), anti_affine("a", key=ZONE), anti_affine("b", key=ZONE),
               pod("plain", cpu="100m", labels={"app": "solo"})])
    assert refusal(s, "a", "z0-n0") is None
    # b's own term selects a, in the same zone (another node): refused; another zone is fine.
    assert refusal(s, "b", "z0-n1") == (
        'Operation cannot be fulfilled on pods/binding "b": node z0-n1 would break the required pod '
        'anti-affinity of default/b: default/a runs on z0-n0 in topology.kubernetes.io/zone=z0')
    # plain has no term, but a's term selects it.
    assert refusal(s, "plain", "z0-n1") == (
        'Operation cannot be fulfilled on pods/binding "plain": node z0-n1 would break the required pod '
        'anti-affinity of default/a (on z0-n0) in topology.kubernetes.io/zone=z0')
    assert refusal(s, "b", "z1-n0") is None
    assert refusal(s, "plain", "z2-n0") is None


def test_anti_affinity_counts_namespaces_as_the_term_says() -> None:
    other = anti_affine("x", namespace="other")
    s = store([*zoned_nodes(1, 1), other, anti_affine("a")])
    assert s.bind("other", "x", "z0-n0").node_name == "z0-n0"
    # x's term covers its own namespace only; a's covers default only.
    assert refusal(s, "a", "z0-n0") is None


def test_a_finished_pod_no_longer_counts() -> None:
    s = store([*zoned_nodes(1, 1), anti_affine("a"), anti_affine("b")])
    assert refusal(s, "a", "z0-n0") is None
    a = s.get("Pod", "default", "a")
    s.update_status({**a.raw, "status": {**a.raw.get("status", {}), "phase": "Succeeded"}})
    assert refusal(s, "b", "z0-n0") is None


def test_topology_spread_skew_and_min_domains() -> None:
    s = store([*zoned_nodes(2, 1), *(spread(f"s{i}") for i in range(3))])
    assert refusal(s, "s0", "z0-n0") is None
    assert refusal(s, "s1", "z0-n0") == (
        'Operation cannot be fulfilled on pods/binding "s1": node z0-n0 would break a topology spread '
        'constraint of default/s1 (topology.kubernetes.io/zone, maxSkew 1): topology.kubernetes.io/zone=z0 '
        'would hold 2 matching pods, the emptiest eligible domain 0')
    assert refusal(s, "s1", "z1-n0") is None
    assert refusal(s, "s2", "z0-n0") is None  # 2 - 1 <= 1
    # minDomains above the eligible domains: the minimum is 0, so one pod per domain.
    s = store([*zoned_nodes(2, 1), *(spread(f"m{i}", app="m", minDomains=3) for i in range(3))])
    assert refusal(s, "m0", "z0-n0") is None
    assert refusal(s, "m1", "z1-n0") is None
    assert refusal(s, "m2", "z0-n0") is not None


def test_topology_spread_counts_eligible_nodes_only() -> None:
    """Nodes the pod's nodeSelector excludes are no domain (nodeAffinityPolicy Honor, the
    default); with Ignore they are."""
    nodes = [*zoned_nodes(2, 1), node("z2-n0", cpu="8", labels={ZONE: "z2", "pool": "other"})]
    for n in nodes[:2]:
        n["metadata"]["labels"]["pool"] = "main"
    honor = [spread(f"h{i}", app="h") for i in range(2)]
    ignore = [spread(f"i{i}", app="i", nodeAffinityPolicy="Ignore") for i in range(2)]
    for p in (*honor, *ignore):
        p["spec"]["nodeSelector"] = {"pool": "main"}
    s = store([*nodes, *honor, *ignore])
    assert refusal(s, "h0", "z0-n0") is None and refusal(s, "h1", "z1-n0") is None
    assert refusal(s, "i0", "z0-n0") is None
    assert refusal(s, "i1", "z1-n0") is None


def test_read_write_once_pod_claims_have_one_user() -> None:
    s = store([*zoned_nodes(1, 2), *rwop_claim(), rwop_user("d0"), rwop_user("d1")])
    assert refusal(s, "d0", "z0-n0") is None
    assert refusal(s, "d1", "z0-n1") == (
        'Operation cannot be fulfilled on pods/binding "d1": PersistentVolumeClaim default/solo-disk has the '
        'ReadWriteOncePod access mode and is in use by default/d0')
    s.delete("Pod", "default", "d0")
    # Terminating, it still has the claim (upstream counts every pod of its snapshot); gone, not.
    assert refusal(s, "d1", "z0-n1") is not None
    s.delete("Pod", "default", "d0", grace_period_seconds=0)
    assert refusal(s, "d1", "z0-n1") is None


def test_off_unless_enabled_one_scheduler_is_never_refused_for_them() -> None:
    s = store([*zoned_nodes(1, 1), anti_affine("a"), anti_affine("b"), *rwop_claim(), rwop_user("d0"),
               rwop_user("d1")], pod_conflicts=False)
    for name in ("a", "b", "d0", "d1"):
        assert refusal(s, name, "z0-n0") is None


# ---------------------------------------------------------------- the webhook (real clusters)


def test_the_webhook_checks_between_pods_with_the_bindings_it_admitted() -> None:
    """Two bindings admitted a moment apart, the first not yet observed through the watch: the
    webhook counts it for anti-affinity, spread and ReadWriteOncePod as it does for resources."""
    s = Store(VirtualClock(), conflict_resolver=False, auto_create_namespaces=True)
    create(s, [*zoned_nodes(2, 1), anti_affine("a", key=ZONE), anti_affine("b", key=ZONE), spread("s0"),
               spread("s1"), *rwop_claim(), rwop_user("d0"), rwop_user("d1")])
    hook = BindingWebhook(InProcessClient(s), allow_plain_http=True)
    hook.sync()
    hook.sync = lambda: None  # type: ignore[method-assign]  # its watch lags from now on
    for name, node_name in (("a", "z0-n0"), ("s0", "z1-n0"), ("d0", "z0-n0")):
        assert hook.check("default", name, node_name) is None
        s.bind("default", name, node_name)  # (bound; the webhook has not seen it)
    assert hook.check("default", "b", "z0-n0") == (
        "node z0-n0 would break the required pod anti-affinity of default/b: default/a runs on z0-n0 in "
        "topology.kubernetes.io/zone=z0")
    assert hook.check("default", "s1", "z1-n0") is not None
    assert hook.check("default", "d1", "z1-n0") == (
        "PersistentVolumeClaim default/solo-disk has the ReadWriteOncePod access mode and is in use by default/d0")
    assert hook.check("default", "b", "z1-n0", dry_run=True) is None
    assert hook.check("default", "s1", "z0-n0", dry_run=True) is None


# ---------------------------------------------------------------- devices (DRA)


def claim(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}


def gpu_slice(shared: bool) -> dict[str, Any]:
    dev: dict[str, Any] = {"name": "gpu-0", "capacity": {"memory": {"value": "48Gi"}}}
    if shared:
        dev["allowMultipleAllocations"] = True
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu"},
            "spec": {"driver": "gpu.example.com", "nodeName": "z0-n0", "pool": {"name": "n1", "resourceSliceCount": 1},
                     "devices": [dev]}}


def allocate(s: Store, name: str, share: str = "", memory: str = "") -> str | None:
    """Write an allocation of gpu-0 to claim ``name``; the resolver's refusal, or None."""
    result: dict[str, Any] = {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}
    if share:
        result["shareID"] = share
    if memory:
        result["consumedCapacity"] = {"memory": memory}
    c = s.get("ResourceClaim", "default", name)
    raw = {**c.raw, "status": {"allocation": {"devices": {"results": [result]}, "nodeSelector": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["z0-n0"]}]}]}}}}
    try:
        s.update_status(raw)
    except Conflict as e:
        return e.message
    return None


def test_a_device_is_allocated_to_one_claim_unless_shared_within_its_capacity() -> None:
    s = store([*zoned_nodes(1, 1), gpu_slice(False), claim("c0"), claim("c1")])
    assert allocate(s, "c0") is None
    assert allocate(s, "c1") == ('Operation cannot be fulfilled on resourceclaims.resource.k8s.io "c1": device '
                                 'gpu.example.com/n1/gpu-0 is already allocated to claim default/c0')
    s.update_status({**s.get("ResourceClaim", "default", "c0").raw, "status": {}})  # deallocated
    assert allocate(s, "c1") is None

    s = store([*zoned_nodes(1, 1), gpu_slice(True), *(claim(f"s{i}") for i in range(4))])
    for i in range(3):
        assert allocate(s, f"s{i}", share=f"id-{i}", memory="16Gi") is None
    assert allocate(s, "s3", share="id-3", memory="16Gi") == (
        'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "s3": device gpu.example.com/n1/gpu-0 '
        'would be over-committed on memory: requested 16Gi, capacity 48Gi, already allocated 48Gi')
    # Off unless enabled.
    s = store([*zoned_nodes(1, 1), gpu_slice(False), claim("c0"), claim("c1")], pod_conflicts=False)
    assert allocate(s, "c0") is None and allocate(s, "c1") is None
