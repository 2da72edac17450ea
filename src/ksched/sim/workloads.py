"""scheduler_perf workloads (test/integration/scheduler_perf): the node and pod templates of
``templates/`` and the counts of the ``*_test.yaml`` configs, as data for ``ksched bench``.

Each workload: nodes from a template, init pods (scheduled before measuring), measured pods
(timed), optionally a routine creating pods at a fixed interval while measuring (PreemptionAsync,
Unschedulable) and extra objects (priority classes, per-pod volumes).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "WORKLOADS",
    "Phase",
    "Routine",
    "SteadyState",
    "Workload",
    "node_default",
    "pod_default",
]

Manifest = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"

# ---------------------------------------------------------------- templates


def node_default(i: int, labels: dict[str, str] | None = None, extra: dict[str, str] | None = None) -> Manifest:
    """templates/node-default.yaml: 4 CPU, 32Gi, 110 pods, Ready (allocatable = capacity)."""
    cap = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    if extra:
        cap.update(extra)
    name = f"node-{i}"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME: name, **(labels or {})}},
            "status": {"capacity": cap, "allocatable": dict(cap),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_default(name: str, namespace: str = "default", cpu: str = "100m", memory: str = "500Mi",
                labels: dict[str, str] | None = None, priority: int | None = None,
                spec: dict[str, Any] | None = None) -> Manifest:
    """templates/pod-default.yaml: one pause container, requests = limits (100m, 500Mi)."""
    res = {"cpu": cpu, "memory": memory}
    sp: dict[str, Any] = {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                          "ports": [{"containerPort": 80}],
                                          "resources": {"requests": dict(res), "limits": dict(res)}}]}
    if priority is not None:
        sp["priority"] = priority
    if spec:
        sp.update(copy.deepcopy(spec))
    md: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        md["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": sp}


def _term(color: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": key,
            "namespaces": ["sched-1", "sched-0"]}


def pod_anti_affinity(name: str, ns: str) -> Manifest:
    """templates/pod-with-pod-anti-affinity.yaml."""
    return pod_default(name, ns, labels={"color": "green", "name": "test"}, spec={"affinity": {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("green", HOSTNAME)]}}})


def pod_affinity(name: str, ns: str) -> Manifest:
    """templates/pod-with-pod-affinity.yaml."""
    return pod_default(name, ns, labels={"color": "blue", "foo": ""}, spec={"affinity": {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("blue", ZONE)]}}})


def pod_preferred_affinity(name: str, ns: str) -> Manifest:
    """templates/pod-with-preferred-pod-affinity.yaml."""
    return pod_default(name, ns, labels={"color": "red", "foo": ""}, spec={"affinity": {
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": _term("red", HOSTNAME)}]}}})


def pod_preferred_anti_affinity(name: str, ns: str) -> Manifest:
    """templates/pod-with-preferred-pod-anti-affinity.yaml."""
    return pod_default(name, ns, labels={"color": "yellow", "foo": ""}, spec={"affinity": {
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": _term("yellow", HOSTNAME)}]}}})


def pod_node_affinity(name: str, ns: str) -> Manifest:
    """templates/pod-with-node-affinity.yaml."""
    return pod_default(name, ns, spec={"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": ["zone1", "zone2"]}]}]}}}})


def pod_topology_spreading(name: str, ns: str, when: str = "DoNotSchedule") -> Manifest:
    """templates/pod-with-topology-spreading.yaml (ScheduleAnyway for the preferred variant)."""
    return pod_default(name, ns, labels={"color": "blue"}, spec={"topologySpreadConstraints": [{
        "maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"color": "blue"}}}]})


def pod_low_priority(name: str, ns: str) -> Manifest:
    """templates/pod-low-priority.yaml: 900m / 500Mi, priority 0, terminationGracePeriodSeconds 0."""
    return pod_default(name, ns, cpu="900m", memory="500Mi", priority=0,
                       spec={"terminationGracePeriodSeconds": 0})


def pod_high_priority(name: str, ns: str) -> Manifest:
    """templates/pod-high-priority.yaml: priority 10, 3000m / 500Mi."""
    return pod_default(name, ns, cpu="3000m", memory="500Mi", priority=10)


def pod_high_priority_large_cpu(name: str, ns: str) -> Manifest:
    """templates/pod-high-priority-large-cpu.yaml: priority 10, 9 CPU (more than any node)."""
    return pod_default(name, ns, cpu="9", memory="500Mi", priority=10)


def pod_with_csi_pv(name: str, ns: str) -> list[Manifest]:
    """A pod with its own PersistentVolumeClaim bound to a CSI PersistentVolume (pv-csi.yaml,
    pvc.yaml)."""
    pv_name = f"pv-{ns}-{name}"
    pvc_name = f"pvc-{name}"
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name},
          "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadOnlyMany"],
                   "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                   "claimRef": {"namespace": ns, "name": pvc_name},
                   "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{ns}-{name}"}}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": pvc_name, "namespace": ns},
           "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "", "volumeName": pv_name,
                    "resources": {"requests": {"storage": "1Gi"}}}}
    pod = pod_default(name, ns, spec={"volumes": [{"name": "vol", "persistentVolumeClaim": {"claimName": pvc_name}}]})
    return [pv, pvc, pod]


def csinode(i: int) -> Manifest:
    """The CSINode scheduler_perf creates for each node (nodeAllocatableStrategy: 39 EBS volumes)."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": f"node-{i}"},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": f"node-{i}",
                                  "allocatable": {"count": 39}}]}}


# ---------------------------------------------------------------- workloads


@dataclass(slots=True)
class Phase:
    """``count`` pods of one template in ``namespace``; ``make(name, namespace)`` returns the
    pod manifest, or a list of manifests (the pod last) when the pod needs other objects."""

    count: int
    make: Callable[[str, str], Manifest | list[Manifest]]
    namespace: str = "default"


@dataclass(slots=True)
class Routine:
    """Pods created every ``interval`` seconds while the measured pods are being scheduled."""

    interval: float
    make: Callable[[str, str], Manifest]
    namespace: str = "default"


@dataclass(slots=True)
class SteadyState:
    """createPods with ``steadyState``: the measured phase creates ``count`` pods (the measured
    Phase's), waits until they are scheduled, deletes them and starts again, for ``duration``
    seconds of wall time, so the cluster stays at the same utilization."""

    duration: float


@dataclass(slots=True)
class Workload:
    name: str
    description: str
    nodes: int
    make_node: Callable[[int], Manifest]
    init: list[Phase]
    measured: Phase
    upstream_threshold: float | None = None
    small_nodes: int = 500
    small_init: list[int] = field(default_factory=list)
    small_measured: int = 1000
    config: dict[str, Any] | None = None
    node_objects: Callable[[int], list[Manifest]] | None = None  # per node (CSINode)
    routine: Routine | None = None
    objects: list[Manifest] = field(default_factory=list)  # created once, after the nodes
    controllers: tuple[str, ...] = ()  # kube-controller-manager controllers the workload needs
    steady: SteadyState | None = None
    # allocResourceClaims: the init phases' ResourceClaims (namespace "init") are allocated
    # directly, without pods, before measuring (pre-existing device utilization).
    alloc_init_claims: bool = False

    @property
    def target(self) -> float | None:
        """ksched's target on a 2-core machine, in-process: SchedulingBasic 5000 pods/s; every
        other workload 10x upstream's threshold and at least 1000 where that threshold is above
        100; none where upstream has no threshold."""
        if self.name == "SchedulingBasic":
            return 5000.0
        if self.upstream_threshold is None:
            return None
        t = 10.0 * self.upstream_threshold
        return max(t, 1000.0) if self.upstream_threshold > 100 else t


def _zone1(i: int) -> Manifest:
    return node_default(i, labels={ZONE: "zone1"})


def _moons(i: int) -> Manifest:
    return node_default(i, labels={ZONE: f"moon-{i % 3 + 1}"})


def _basic() -> Workload:
    return Workload("SchedulingBasic", "5000 nodes, 1000 init pods, 10000 measured pods (pod-default)",
                    5000, node_default, [Phase(1000, pod_default)], Phase(10000, pod_default),
                    upstream_threshold=680, small_init=[500], small_measured=1000)


def _anti_affinity() -> Workload:
    return Workload("SchedulingPodAntiAffinity",
                    "5000 nodes, 1000 init + 2000 measured pods with required anti-affinity by hostname",
                    5000, node_default, [Phase(1000, pod_anti_affinity, "sched-0")],
                    Phase(2000, pod_anti_affinity, "sched-1"),
                    upstream_threshold=60, small_init=[100], small_measured=400)


def _affinity() -> Workload:
    return Workload("SchedulingPodAffinity",
                    "5000 nodes in zone1, 5000 init + 5000 measured pods with required affinity by zone",
                    5000, _zone1, [Phase(5000, pod_affinity, "sched-0")], Phase(5000, pod_affinity, "sched-1"),
                    upstream_threshold=35, small_init=[500], small_measured=500)


def _preferred_affinity() -> Workload:
    return Workload("SchedulingPreferredPodAffinity",
                    "5000 nodes, 5000 init + 5000 measured pods with preferred affinity by hostname",
                    5000, node_default, [Phase(5000, pod_preferred_affinity, "sched-0")],
                    Phase(5000, pod_preferred_affinity, "sched-1"),
                    upstream_threshold=90, small_init=[500], small_measured=500)


def _preferred_anti_affinity() -> Workload:
    return Workload("SchedulingPreferredPodAntiAffinity",
                    "5000 nodes, 5000 init + 5000 measured pods with preferred anti-affinity by hostname",
                    5000, node_default, [Phase(5000, pod_preferred_anti_affinity, "sched-0")],
                    Phase(5000, pod_preferred_anti_affinity, "sched-1"),
                    upstream_threshold=90, small_init=[500], small_measured=500)


def _node_affinity() -> Workload:
    return Workload("SchedulingNodeAffinity",
                    "5000 nodes in zone1, 5000 init + 10000 measured pods with required node affinity",
                    5000, _zone1, [Phase(5000, pod_node_affinity)], Phase(10000, pod_node_affinity),
                    upstream_threshold=220, small_init=[500], small_measured=1000)


def _topology_spreading() -> Workload:
    return Workload("TopologySpreading",
                    "5000 nodes over 3 zones, 5000 init pods, 5000 measured pods spread by zone (DoNotSchedule)",
                    5000, _moons, [Phase(5000, pod_default)], Phase(5000, pod_topology_spreading),
                    upstream_threshold=460, small_init=[1000], small_measured=1000)


def _preferred_topology_spreading() -> Workload:
    return Workload("PreferredTopologySpreading",
                    "5000 nodes over 3 zones, 5000 init pods, 5000 measured pods spread by zone (ScheduleAnyway)",
                    5000, _moons, [Phase(5000, pod_default)],
                    Phase(5000, lambda n, ns: pod_topology_spreading(n, ns, "ScheduleAnyway")),
                    upstream_threshold=340, small_init=[1000], small_measured=1000)


# Not upstream's: the spreading workloads with one selector per app (issue 17: many distinct
# selectors), pods of the apps in turn.
_SELECTOR_APPS = 50


def _app_spreading(name: str, ns: str, when: str) -> Manifest:
    """pod-with-topology-spreading.yaml, but of app ``i % 50`` (the pod's number ``i``), spreading
    over that app's own pods."""
    app = f"app-{int(name.rsplit('-', 1)[1]) % _SELECTOR_APPS}"
    return pod_default(name, ns, labels={"app": app}, spec={"topologySpreadConstraints": [{
        "maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": app}}}]})


def _many_selectors(name: str, when: str) -> Workload:
    return Workload(name,
                    f"as {'Preferred' if when == 'ScheduleAnyway' else ''}TopologySpreading ({when}), but the pods "
                    f"are of {_SELECTOR_APPS} apps in turn, each spreading over its own pods (not upstream's)",
                    5000, _moons, [Phase(5000, lambda n, ns: _app_spreading(n, ns, when))],
                    Phase(5000, lambda n, ns: _app_spreading(n, ns, when)),
                    small_init=[1000], small_measured=1000)


def _csi_pvs() -> Workload:
    return Workload("SchedulingCSIPVs",
                    "5000 nodes with CSI limits, 5000 init + 5000 measured pods each with its own CSI PV",
                    5000, node_default, [Phase(5000, pod_with_csi_pv)], Phase(5000, pod_with_csi_pv),
                    upstream_threshold=100, small_init=[500], small_measured=500, node_objects=lambda i: [csinode(i)])


def _mixed() -> Workload:
    return Workload("MixedSchedulingBasePod",
                    "5000 nodes in zone1; 2000 init pods of each of 5 kinds, 5000 measured pod-default",
                    5000, _zone1,
                    [Phase(2000, pod_default, "sched-0"), Phase(2000, pod_affinity, "sched-0"),
                     Phase(2000, pod_anti_affinity, "sched-0"), Phase(2000, pod_preferred_affinity, "sched-0"),
                     Phase(2000, pod_preferred_anti_affinity, "sched-0")],
                    Phase(5000, pod_default, "sched-1"),
                    upstream_threshold=140, small_init=[200, 200, 200, 200, 200], small_measured=500)


def _preemption_basic() -> Workload:
    return Workload("PreemptionBasic",
                    "1000 nodes full of low-priority pods (4000), 1000 high-priority pods that must preempt",
                    1000, node_default, [Phase(4000, pod_low_priority)], Phase(1000, pod_high_priority),
                    small_nodes=500, small_init=[2000], small_measured=500)


def _preemption_async() -> Workload:
    return Workload("PreemptionAsync",
                    "5000 nodes with 20000 low-priority pods, 5000 measured pod-default, a high-priority "
                    "preemptor every 200 ms",
                    5000, node_default, [Phase(20000, pod_low_priority)], Phase(5000, pod_default),
                    upstream_threshold=570, small_init=[2000], small_measured=1000,
                    routine=Routine(0.2, pod_high_priority))


def _unschedulable() -> Workload:
    return Workload("Unschedulable",
                    "5000 nodes, 100 unschedulable 9-CPU pods, 10000 measured pod-default, another 9-CPU pod "
                    "every 200 ms",
                    5000, node_default, [Phase(100, pod_high_priority_large_cpu)], Phase(10000, pod_default),
                    upstream_threshold=590, small_init=[100], small_measured=1000,
                    routine=Routine(0.2, pod_high_priority_large_cpu))


def _pod_host_port(name: str, namespace: str = "default") -> Manifest:
    """A pod-default pod with a host port: one such pod fits a node (NodePorts)."""
    pod = pod_default(name, namespace)
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    return pod


def _one_pod_per_node() -> Workload:
    # ksched's own workload, where opportunistic batching applies: one pod per node (a host port
    # each), every node evaluated (percentageOfNodesToScore 100; ksched batches only then) and
    # no system default spreading (with it no pod is signable, as upstream).
    return Workload("OnePodPerNodeHostPort",
                    "5000 nodes, 5000 measured pods with the same host port (one per node); every node "
                    "scored, no default spreading: opportunistic batching's case",
                    5000, node_default, [], Phase(5000, _pod_host_port),
                    small_nodes=500, small_measured=500,
                    config={"percentageOfNodesToScore": 100, "profiles": [{"pluginConfig": [
                        {"name": "PodTopologySpread",
                         "args": {"defaultingType": "List", "defaultConstraints": []}}]}]})


# ---------------------------------------------------------------- DRA (scheduler_perf/dra)

DRA_DRIVER = "test-driver.cdi.k8s.io"


def node_with_dra_test_driver(i: int) -> Manifest:
    """dra/templates/node-with-dra-test-driver.yaml: 4 CPU, 32Gi, 110 pods, Ready."""
    n = node_default(i)
    name = f"scheduler-perf-dra-{i}"
    n["metadata"] = {"name": name, "labels": {HOSTNAME: name}}
    return n


def dra_resource_slice(i: int, max_claims_per_node: int) -> Manifest:
    """The ResourceSlice the createResourceDriver op publishes for a node: ``maxClaimsPerNode``
    devices ``instance-<j>`` (model A100, family GPU, driverVersion 1.2.3, dra.example.com/numa
    j, 1Gi of memory) in one slice, the pool named after the node."""
    node = f"scheduler-perf-dra-{i}"
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": node},
            "spec": {"driver": DRA_DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
                     "devices": [{"name": f"instance-{j}",
                                  "attributes": {"model": {"string": "A100"}, "family": {"string": "GPU"},
                                                 "driverVersion": {"version": "1.2.3"},
                                                 "dra.example.com/numa": {"int": j}},
                                  "capacity": {"memory": {"value": "1Gi"}}} for j in range(max_claims_per_node)]}}


def dra_device_class() -> Manifest:
    """dra/templates/deviceclass.yaml."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "test-class"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}]}}


def dra_claim_template(namespace: str) -> Manifest:
    """dra/templates/resourceclaimtemplate.yaml (one request, no selectors or constraints)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "test-claim-template", "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [{"name": "req-0", "exactly": {
                "deviceClassName": "test-class"}}]}}}}


def _dra_pod(name: str, ns: str, claim: dict[str, str]) -> Manifest:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
                                     "resources": {"claims": [{"name": "resource"}]}}],
                     "resourceClaims": [{"name": "resource", **claim}]}}


def pod_with_claim_template(name: str, ns: str) -> Manifest:
    """dra/templates/pod-with-claim-template.yaml."""
    return _dra_pod(name, ns, {"resourceClaimTemplateName": "test-claim-template"})


def pod_with_claim_ref(name: str, ns: str) -> list[Manifest]:
    """dra/templates/pod-with-claim-ref.yaml: pod ``i`` uses claim ``test-claim-<i/5>`` (five pods
    share one; dra/templates/resourceclaim.yaml), created just before the first of its pods."""
    i = int(name.rsplit("-", 1)[1])
    claim = f"test-claim-{i // 5}"
    pod = _dra_pod(name, ns, {"resourceClaimName": claim})
    if i % 5:
        return [pod]
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": claim, "namespace": ns},
             "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}}},
            pod]


def dra_claim(name: str, ns: str) -> Manifest:
    """dra/templates/resourceclaim.yaml (one request of the test class)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}}}


def _dra_steady_state(variant: str, init_claims: int, small_init_claims: int) -> Callable[[], Workload]:
    """SteadyStateClusterResourceClaimTemplate (dra/performance-config.yaml): 500 nodes with 10
    devices each, ``initClaims`` claims allocated without pods (allocResourceClaims), then batches
    of ten pods with a claim from a template, scheduled and deleted again for 10 s. The ``empty``,
    ``half`` and ``full`` variants: 0, 2500 and 4990 pre-allocated claims (small: 100 nodes and
    0, 500, 990)."""
    def make() -> Workload:
        suffix = "" if variant == "empty" else variant.capitalize()
        return Workload(f"SteadyStateClusterResourceClaimTemplate{suffix}",
                        f"500 nodes with 10 devices each, {init_claims} pre-allocated claims, batches of 10 pods "
                        "with a claim from a template scheduled and deleted for 10 s (dra/performance-config.yaml "
                        f"SteadyStateClusterResourceClaimTemplate {variant}_500nodes)",
                        500, node_with_dra_test_driver, [Phase(init_claims, dra_claim, "init")],
                        Phase(10, pod_with_claim_template, "test"),
                        small_nodes=100, small_init=[small_init_claims], small_measured=10,  # {variant}_100nodes
                        node_objects=lambda i: [dra_resource_slice(i, 10)],
                        objects=[dra_device_class(), dra_claim_template("test")],
                        controllers=("resourceclaim",), steady=SteadyState(10.0), alloc_init_claims=True)
    return make


def dra_extended_resource_classes(n: int) -> list[Manifest]:
    """dra/templates/deviceclass-extended-resource.yaml, ``classes`` times: ``test-class-<i>`` for
    ``example.com/gpu-<i>``."""
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"test-class-{i}"},
             "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}],
                      "extendedResourceName": f"example.com/gpu-{i}"}} for i in range(n)]


def pod_with_extended_resource(name: str, ns: str) -> Manifest:
    """dra/templates/pod-with-extended-resource.yaml: pod ``i`` asks for one ``example.com/gpu-<i>``."""
    i = int(name.rsplit("-", 1)[1])
    res = {f"example.com/gpu-{i}": "1"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                                     "resources": {"requests": dict(res), "limits": dict(res)}}]}}


def _dra_extended_resource() -> Workload:
    return Workload("SchedulingWithExtendedResource",
                    "500 nodes with 10 devices each, 2500 DeviceClasses for example.com/gpu-<i>, 2500 init + 2500 "
                    "measured pods asking for one example.com/gpu-<i> each (dra/extendedresource/"
                    "performance-config.yaml 5000pods_500nodes)",
                    500, node_with_dra_test_driver, [Phase(2500, pod_with_extended_resource, "init")],
                    Phase(2500, pod_with_extended_resource, "test"),
                    # 2000pods_100nodes (1000 classes): the init pods take every device.
                    small_nodes=100, small_init=[1000], small_measured=1000,
                    node_objects=lambda i: [dra_resource_slice(i, 10)],
                    objects=dra_extended_resource_classes(2500))


def _dra_claim_template() -> Workload:
    return Workload("SchedulingWithResourceClaimTemplate",
                    "500 nodes with 10 devices each, 2500 init + 2500 measured pods each with a claim from a "
                    "ResourceClaimTemplate (dra/performance-config.yaml 5000pods_500nodes)",
                    500, node_with_dra_test_driver, [Phase(2500, pod_with_claim_template, "init")],
                    Phase(2500, pod_with_claim_template, "test"),
                    small_nodes=200, small_init=[1000], small_measured=1000,  # 2000pods_200nodes
                    node_objects=lambda i: [dra_resource_slice(i, 10)],
                    objects=[dra_device_class(), dra_claim_template("init"), dra_claim_template("test")],
                    controllers=("resourceclaim",))


def _dra_claim() -> Workload:
    return Workload("SchedulingWithResourceClaim",
                    "500 nodes with 2 devices each, 2500 init + 2500 measured pods, five pods sharing each "
                    "ResourceClaim (500 + 500 claims; dra/performance-config.yaml 5000pods_500nodes)",
                    500, node_with_dra_test_driver, [Phase(2500, pod_with_claim_ref, "init")],
                    Phase(2500, pod_with_claim_ref, "test"),
                    small_nodes=200, small_init=[1000], small_measured=1000,  # 2000pods_200nodes
                    node_objects=lambda i: [dra_resource_slice(i, 2)],
                    objects=[dra_device_class()], controllers=("resourceclaim",))


WORKLOADS: dict[str, Callable[[], Workload]] = {
    "SchedulingBasic": _basic,
    "SchedulingPodAntiAffinity": _anti_affinity,
    "SchedulingPodAffinity": _affinity,
    "SchedulingPreferredPodAffinity": _preferred_affinity,
    "SchedulingPreferredPodAntiAffinity": _preferred_anti_affinity,
    "SchedulingNodeAffinity": _node_affinity,
    "TopologySpreading": _topology_spreading,
    "PreferredTopologySpreading": _preferred_topology_spreading,
    "TopologySpreadingManySelectors": lambda: _many_selectors("TopologySpreadingManySelectors", "DoNotSchedule"),
    "PreferredTopologySpreadingManySelectors": lambda: _many_selectors("PreferredTopologySpreadingManySelectors",
                                                                      "ScheduleAnyway"),
    "SchedulingCSIPVs": _csi_pvs,
    "MixedSchedulingBasePod": _mixed,
    "PreemptionBasic": _preemption_basic,
    "PreemptionAsync": _preemption_async,
    "Unschedulable": _unschedulable,
    "OnePodPerNodeHostPort": _one_pod_per_node,
    "SchedulingWithResourceClaimTemplate": _dra_claim_template,
    "SchedulingWithResourceClaim": _dra_claim,
    "SchedulingWithExtendedResource": _dra_extended_resource,
    "SteadyStateClusterResourceClaimTemplate": _dra_steady_state("empty", 0, 0),
    "SteadyStateClusterResourceClaimTemplateHalf": _dra_steady_state("half", 2500, 500),
    "SteadyStateClusterResourceClaimTemplateFull": _dra_steady_state("full", 4990, 990),
}
