"""The manifests under deploy/ against what ksched actually does.

RBAC: each component runs a scenario through a client that records every request as RBAC sees
it (API group, resource[/subresource], verb, namespace, name) -- the scheduler binds, records
events, sets conditions, preempts (DisruptionTarget, delete, nominated node), binds volumes and
elects a leader; an instance heartbeats its Lease; the dispatcher dispatches and elects; the
webhook reads -- and every request must be allowed by the roles bound to the component's
ServiceAccount, evaluated as the RBAC authorizer does (ClusterRoleBindings everywhere,
RoleBindings in their namespace, resourceNames for named requests). In the other direction,
every grant of the scheduler's ClusterRole is used by the scenario or listed with its reason.

Workloads: the containers' arguments parse with ksched's own command line, the probes point at
the paths and port the process serves, the configuration in the ConfigMap loads and is the one
mounted, the ServiceAccounts exist, the webhook's Service and configuration meet."""

from __future__ import annotations

import argparse
import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ksched.api.kinds import KINDS
from ksched.api.meta import KubeObject
from ksched.apiserver.store import Store
from ksched.cli.main import build_parser
from ksched.client.leaderelection import LeaderElector
from ksched.clock import VirtualClock
from ksched.dispatch.dispatcher import Dispatcher
from ksched.dispatch.instance import INSTANCE_ANNOTATION, InstanceRegistration
from ksched.dispatch.webhook import WEBHOOK_NAME, BindingWebhook
from ksched.scheduler.config import parse_configuration
from ksched.scheduler.recorder import EventRecorder
from ksched.scheduler.scheduler import Scheduler
from ksched.sim.cluster import EmbeddedCluster
from ksched.testing import make_node, make_pod

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _docs(*parts: str) -> list[dict[str, Any]]:
    path = DEPLOY.joinpath(*parts)
    files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
    return [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]


def _one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


# ----------------------------------------------------------------------------- requests as RBAC sees them


@dataclass(frozen=True)
class Request:
    group: str
    resource: str
    verb: str
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        named = f" {self.name!r}" if self.name else ""
        return f"{self.verb} {self.group or 'core'}/{self.resource}{named}{where}"


def _gr(kind: str | type[KubeObject]) -> tuple[str, str, bool]:
    cls = kind if isinstance(kind, type) else KINDS[kind]
    group = cls.API_VERSION.rpartition("/")[0]
    return group, cls.PLURAL, cls.NAMESPACED


class Recording:
    """A ClusterClient that records every request before passing it on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: set[Request] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _add(self, kind: Any, verb: str, namespace: str | None, name: str = "", sub: str = "") -> None:
        group, plural, namespaced = _gr(kind)
        self.requests.add(Request(group, plural + (f"/{sub}" if sub else ""), verb,
                                  (namespace or "") if namespaced else "", name))

    def list(self, kind: str, namespace: str | None = None, *a: Any, **kw: Any) -> Any:
        self._add(kind, "list", namespace)
        return self.inner.list(kind, namespace, *a, **kw)

    def watch(self, kind: str, namespace: str | None = None, *a: Any, **kw: Any) -> Any:
        self._add(kind, "watch", namespace)
        return self.inner.watch(kind, namespace, *a, **kw)

    def get(self, kind: str, namespace: str, name: str) -> Any:
        self._add(kind, "get", namespace, name)
        return self.inner.get(kind, namespace, name)

    def create(self, obj: Any, *a: Any, **kw: Any) -> Any:
        raw = obj.raw if isinstance(obj, KubeObject) else obj
        self._add(raw["kind"], "create", (raw.get("metadata") or {}).get("namespace") or "default")
        return self.inner.create(obj, *a, **kw)

    def update(self, obj: Any) -> Any:
        raw = obj.raw if isinstance(obj, KubeObject) else obj
        md = raw.get("metadata") or {}
        self._add(raw["kind"], "update", md.get("namespace"), md.get("name", ""))
        return self.inner.update(obj)

    def update_status(self, obj: Any) -> Any:
        raw = obj.raw if isinstance(obj, KubeObject) else obj
        md = raw.get("metadata") or {}
        self._add(raw["kind"], "update", md.get("namespace"), md.get("name", ""), "status")
        return self.inner.update_status(obj)

    def patch(self, kind: str, namespace: str, name: str, patch: Any, *a: Any, **kw: Any) -> Any:
        sub = kw.get("subresource", a[1] if len(a) > 1 else "")
        self._add(kind, "patch", namespace, name, sub)
        return self.inner.patch(kind, namespace, name, patch, *a, **kw)

    def delete(self, kind: str, namespace: str, name: str, *a: Any, **kw: Any) -> Any:
        self._add(kind, "delete", namespace, name)
        return self.inner.delete(kind, namespace, name, *a, **kw)

    def bind(self, pod: Any, node_name: str, *a: Any, **kw: Any) -> Any:
        self._add("Pod", "create", pod.namespace, pod.name, "binding")
        return self.inner.bind(pod, node_name, *a, **kw)

    def evict(self, namespace: str, name: str, *a: Any, **kw: Any) -> Any:
        self._add("Pod", "create", namespace, name, "eviction")
        return self.inner.evict(namespace, name, *a, **kw)


# ----------------------------------------------------------------------------- the RBAC authorizer


class Authorizer:
    """The rules bound to one ServiceAccount by the given manifests, evaluated as Kubernetes'
    RBAC authorizer does."""

    def __init__(self, docs: list[dict[str, Any]], namespace: str, account: str) -> None:
        roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d["rules"]
                 for d in docs if d["kind"] in ("Role", "ClusterRole")}
        self.grants: list[tuple[str, dict[str, Any]]] = []  # (namespace or "" for cluster-wide, rule)
        for d in docs:
            if d["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
                continue
            if not any(s.get("kind") == "ServiceAccount" and s.get("name") == account
                       and s.get("namespace") == namespace for s in d.get("subjects") or ()):
                continue
            ref = d["roleRef"]
            scope = d["metadata"].get("namespace", "") if d["kind"] == "RoleBinding" else ""
            role_ns = scope if ref["kind"] == "Role" else ""
            rules = roles.get((ref["kind"], role_ns, ref["name"]))
            assert rules is not None, f"{d['kind']} {d['metadata']['name']}: no {ref['kind']} {ref['name']}"
            self.grants += [(scope, r) for r in rules]

    @staticmethod
    def _match(rule: dict[str, Any], r: Request) -> bool:
        def has(key: str, v: str) -> bool:
            vals = rule.get(key) or []
            return v in vals or "*" in vals

        if not (has("apiGroups", r.group) and has("resources", r.resource) and has("verbs", r.verb)):
            return False
        names = rule.get("resourceNames") or []
        return not names or (bool(r.name) and r.name in names)

    def allows(self, r: Request) -> bool:
        return any((not scope or scope == r.namespace) and self._match(rule, r) for scope, rule in self.grants)

    def denied(self, requests: set[Request]) -> list[str]:
        return sorted(str(r) for r in requests if not self.allows(r))


# ----------------------------------------------------------------------------- the scenarios


def _sc(name: str, provisioner: str = "kubernetes.io/no-provisioner") -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}


def _pv(name: str, cls: str, host: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}}}


def _pvc(name: str, cls: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                     "resources": {"requests": {"storage": "1Gi"}}}}


def scheduling_requests(annotate: dict[str, str] | None = None,
                        make: Callable[[Any, Any, VirtualClock], Scheduler] | None = None) -> set[Request]:
    """What a scheduler asks of the API while it binds pods (with volumes to bind and to
    provision), explains an unschedulable pod twice (a new event, then the same one counted),
    and preempts."""
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock)
    store: Store = cluster.store
    for n in ("n1", "n2"):
        store.create(make_node(n, cpu="2").raw)
    store.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                  "value": 1000})
    store.create(_sc("local"))
    store.create(_pv("pv-n2", "local", "n2"))
    store.create(_pvc("data", "local"))
    store.create(_sc("fast", "csi.example.com"))
    store.create(_pvc("dynamic", "fast"))
    rec = Recording(cluster.client)
    sched = make(rec, parse_configuration({}), clock) if make else Scheduler(rec, None, clock=clock)

    def add(p: Any, **spec: Any) -> None:
        raw = p.raw
        if annotate:
            raw["metadata"].setdefault("annotations", {}).update(annotate)
        raw["spec"].update(spec)
        store.create(raw)

    sched.sync()
    add(make_pod("low-1", requests={"cpu": "1500m"}))
    add(make_pod("low-2", requests={"cpu": "1500m"}))
    add(make_pod("with-volume", requests={"cpu": "100m"},
                 volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]))
    add(make_pod("provisioned", requests={"cpu": "100m"},
                 volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "dynamic"}}]))
    add(make_pod("picky", node_selector={"disk": "ssd"}))
    sched.run_until_idle()
    clock.advance(301)  # podMaxInUnschedulablePodsDuration: picky is tried again, the same event counted
    sched.queue.flush_unschedulable_leftover()
    sched.run_until_idle()
    add(make_pod("high", requests={"cpu": "1500m"}), priorityClassName="high")
    sched.run_until_idle()
    assert store.get("Pod", "default", "with-volume").node_name == "n2"  # type: ignore[attr-defined]
    assert store.get("PersistentVolumeClaim", "default", "data").raw["spec"].get("volumeName") == "pv-n2"
    high = store.get("Pod", "default", "high")
    assert high.raw["status"].get("nominatedNodeName"), high.raw["status"]  # it preempted
    verbs = {(r.resource, r.verb) for r in rec.requests}
    assert {("pods/binding", "create"), ("pods/status", "patch"), ("pods", "delete"), ("events", "create"),
            ("events", "patch"), ("persistentvolumes", "update"), ("persistentvolumeclaims", "update")} <= verbs
    return rec.requests


def election_requests(lease: str, namespace: str = "kube-system", events: bool = False) -> set[Request]:
    """Leader election on ``lease`` (created, renewed, read by a second candidate, released)."""
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock)
    rec = Recording(cluster.client)
    recorder = EventRecorder(rec, clock, component="default-scheduler")

    def on_event(obj: Any, message: str) -> None:
        if events and obj is not None:
            recorder.event(obj, "Normal", "LeaderElection", "", message)

    a = LeaderElector(rec, lease, namespace, "a", clock=clock.now, on_event=on_event)
    b = LeaderElector(rec, lease, namespace, "b", clock=clock.now)
    assert a.try_acquire_or_renew()
    a._record("became leader")
    clock.advance(2)
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    assert a.release()
    return rec.requests


@pytest.fixture(scope="module")
def scheduler_requests() -> set[Request]:
    return scheduling_requests() | election_requests("kube-scheduler", events=True) | election_requests("ksched")


# ----------------------------------------------------------------------------- deploy/scheduler


# Grants of ksched:scheduler the scenario does not exercise, and why they are there.
UNEXERCISED = {
    ("", "events", "update"): "upstream's event sink may update; ksched creates and patches",
    ("events.k8s.io", "events", "create"): "upstream records through events.k8s.io/v1; ksched writes core/v1",
    ("events.k8s.io", "events", "patch"): "as above",
    ("events.k8s.io", "events", "update"): "as above",
    ("", "bindings", "create"): "the legacy binding resource upstream still grants; ksched posts pods/binding",
    ("", "pods/status", "update"): "upstream grants update with patch; ksched patches",
    ("", "nodes", "get"): "read access comes as get/list/watch, as upstream grants it",
    ("", "namespaces", "get"): "as above",
    ("", "persistentvolumes", "patch"): "system:volume-scheduler grants patch with update; ksched updates",
    ("", "persistentvolumeclaims", "patch"): "as above",
    ("", "services", "get"): "PodTopologySpread's default constraints select pods by their Service (listed)",
    ("", "replicationcontrollers", "get"): "... or controller (listed where the API server serves the kind)",
    ("apps", "replicasets", "get"): "as above", ("apps", "statefulsets", "get"): "as above",
    ("extensions", "replicasets", "get"): "as upstream",
    ("extensions", "replicasets", "list"): "as upstream", ("extensions", "replicasets", "watch"): "as upstream",
    # The default selector's controller kinds are listed and watched once ksched serves them.
    **{(group, res, verb): "PodTopologySpread lists this controller kind only where it is served"
       for group, res, kind in (("", "replicationcontrollers", "ReplicationController"),
                                ("apps", "replicasets", "ReplicaSet"), ("apps", "statefulsets", "StatefulSet"))
       if kind not in KINDS for verb in ("list", "watch")},
    ("policy", "poddisruptionbudgets", "get"): "read access as get/list/watch",
    ("storage.k8s.io", "storageclasses", "get"): "as above",
    ("storage.k8s.io", "csinodes", "get"): "as above",
    ("storage.k8s.io", "csidrivers", "get"): "NodeVolumeLimits and VolumeBinding's CSI checks, as upstream",
    ("storage.k8s.io", "csidrivers", "list"): "as above", ("storage.k8s.io", "csidrivers", "watch"): "as above",
    ("storage.k8s.io", "csistoragecapacities", "get"): "VolumeBinding's capacity check, as upstream",
    ("storage.k8s.io", "csistoragecapacities", "list"): "as above",
    ("storage.k8s.io", "csistoragecapacities", "watch"): "as above",
    # The DynamicResources plugin lists and watches classes, claims and slices (used); the rest:
    **{("resource.k8s.io", res, verb): "dynamic resource allocation (the DynamicResources plugin)"
       for res in ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices",
                   "resourceclaims/status")
       for verb in ("get", "list", "watch")
       if not (res in ("deviceclasses", "resourceclaims", "resourceslices") and verb in ("list", "watch"))},
    ("resource.k8s.io", "resourceclaims/status", "patch"): "DynamicResources writes the allocation",
    ("resource.k8s.io", "resourceclaims/status", "update"): "as above",
}


def _grants(docs: list[dict[str, Any]], kind: str, name: str) -> Iterator[tuple[str, str, str]]:
    for rule in _one(docs, kind, name)["rules"]:
        for g in rule["apiGroups"]:
            for res in rule["resources"]:
                for v in rule["verbs"]:
                    yield g, res, v


def test_the_scheduler_may_make_every_request_it_makes(scheduler_requests: set[Request]) -> None:
    docs = _docs("scheduler")
    auth = Authorizer(docs, "kube-system", "ksched")
    assert auth.denied(scheduler_requests) == []
    # The authorizer itself refuses what the role does not grant.
    assert not auth.allows(Request("", "secrets", "get", "kube-system", "x"))
    assert not auth.allows(Request("coordination.k8s.io", "leases", "update", "kube-system", "kube-controller-manager"))
    assert not auth.allows(Request("", "pods", "patch", "default", "p"))


def test_every_grant_of_the_scheduler_is_used_or_explained(scheduler_requests: set[Request]) -> None:
    used = {(r.group, r.resource, r.verb) for r in scheduler_requests}
    granted = set(_grants(_docs("scheduler"), "ClusterRole", "ksched:scheduler"))
    unexplained = sorted(g for g in granted - used if g not in UNEXERCISED)
    assert unexplained == []
    assert sorted(k for k in UNEXERCISED if k not in granted) == []  # no stale explanations
    assert sorted(k for k in UNEXERCISED if k in used) == []  # ... nor ones for grants now used


def _args(container: dict[str, Any], env: dict[str, str] | None = None) -> argparse.Namespace:
    args = [a.replace("$(POD_NAME)", (env or {}).get("POD_NAME", "")) for a in container["args"]]
    return build_parser().parse_args(args)


def _config_mount(spec: dict[str, Any], container: dict[str, Any], path: str) -> tuple[str, str]:
    """The ConfigMap and key a file path inside the container comes from."""
    vols = {v["name"]: v for v in spec["volumes"]}
    for m in container["volumeMounts"]:
        if path.startswith(m["mountPath"].rstrip("/") + "/"):
            cm = vols[m["name"]]["configMap"]["name"]
            return cm, path[len(m["mountPath"].rstrip("/")) + 1:]
    raise AssertionError(f"{path} is not mounted")


def _check_probes(container: dict[str, Any], port: int, ready: str = "/readyz", live: str = "/livez") -> None:
    assert container["livenessProbe"]["httpGet"] == {"path": live, "port": port, "scheme": "HTTPS"}
    assert container["readinessProbe"]["httpGet"] == {"path": ready, "port": port, "scheme": "HTTPS"}
    assert {p["containerPort"] for p in container["ports"]} == {port}


def _check_hardening(spec: dict[str, Any], container: dict[str, Any]) -> None:
    assert spec["securityContext"]["runAsNonRoot"] is True
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert container["resources"]["requests"]["cpu"] and container["resources"]["limits"]["memory"]


def test_the_scheduler_deployment() -> None:
    docs = _docs("scheduler")
    dep = _one(docs, "Deployment", "ksched")
    assert dep["metadata"]["namespace"] == "kube-system" and dep["spec"]["replicas"] == 2
    spec = dep["spec"]["template"]["spec"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    _one(docs, "ServiceAccount", spec["serviceAccountName"])
    (c,) = spec["containers"]
    args = _args(c)
    assert args.command == "run" and args.leader_elect is None  # the configuration decides: on
    _check_probes(c, args.secure_port)
    _check_hardening(spec, c)
    # The in-memory serving certificate needs a writable temporary directory.
    assert any(m["mountPath"] == "/tmp" for m in c["volumeMounts"])
    cm, key = _config_mount(spec, c, args.config)
    cfg = parse_configuration(yaml.safe_load(_one(docs, "ConfigMap", cm)["data"][key]))
    le = cfg.leader_election
    assert le.leader_elect and (le.resource_namespace, le.resource_name) == ("kube-system", "ksched")
    assert [p.scheduler_name for p in cfg.profiles] == ["ksched"]
    # The Lease names the role lets it use follow the rule: ksched's own, or kube-scheduler's when
    # the profile is renamed default-scheduler.
    replaced = parse_configuration({**yaml.safe_load(_one(docs, "ConfigMap", cm)["data"][key]),
                                    "profiles": [{"schedulerName": "default-scheduler"}]})
    auth = Authorizer(docs, "kube-system", "ksched")
    for name in (le.resource_name, replaced.leader_election.resource_name):
        assert auth.allows(Request("coordination.k8s.io", "leases", "update", "kube-system", name))
    pdb = _one(docs, "PodDisruptionBudget", "ksched")
    assert pdb["spec"]["selector"] == dep["spec"]["selector"]


# ----------------------------------------------------------------------------- deploy/multi


def instance_requests() -> set[Request]:
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock)
    rec = Recording(cluster.client)
    reg = InstanceRegistration(rec, "ksched-instance-7d9f-x2x9z", clock=clock)
    assert reg.heartbeat()
    clock.advance(5)
    assert reg.heartbeat()
    reg.release()
    return rec.requests


def dispatcher_requests() -> set[Request]:
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock)
    store = cluster.store
    reg = InstanceRegistration(cluster.client, "sched-0", clock=clock)
    assert reg.heartbeat()
    rec = Recording(cluster.client)
    d = Dispatcher(rec, scheduler_names=["ksched"], clock=clock)
    store.create(make_pod("p", scheduler_name="ksched").raw)
    d.run_until_idle()
    assert store.get("Pod", "default", "p").annotations.get(INSTANCE_ANNOTATION) == "sched-0"
    return rec.requests | election_requests("ksched-dispatcher")


def webhook_requests() -> set[Request]:
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock)
    store = cluster.store
    store.create(make_node("n1").raw)
    rec = Recording(cluster.client)
    hook = BindingWebhook(rec, allow_plain_http=True)
    hook.sync()
    hook.sync = lambda: None  # type: ignore[method-assign]  # its watch lags from now on
    store.create(make_pod("late").raw)  # not yet in its view: read directly
    assert hook.check("default", "late", "n1", dry_run=True) is None
    assert hook.check("default", "late", "n-unknown", dry_run=True) is not None
    # Checks between pods read a claim's access modes and a namespace's labels when they need them.
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    store.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
                  "spec": {"accessModes": ["ReadWriteOncePod"], "resources": {"requests": {"storage": "1Gi"}}}})
    term = {"labelSelector": {}, "namespaceSelector": {}, "topologyKey": "kubernetes.io/hostname"}
    for name, volumes, terms in (("d0", [claim], []), ("d1", [claim], []), ("d2", [], [term])):
        p = make_pod(name).raw
        p["spec"]["volumes"] = volumes
        p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}
        store.create(p)
    assert hook.check("default", "d0", "n1") is None
    assert hook.check("default", "d1", "n1", dry_run=True) is not None  # the claim is d0's
    assert hook.check("default", "d2", "n1", dry_run=True) is not None  # d0 is in every namespace's reach
    return rec.requests


def test_each_multi_component_may_make_every_request_it_makes() -> None:
    docs = _docs("multi")
    sched = scheduling_requests(annotate={INSTANCE_ANNOTATION: "sched-0"})
    checks = {
        "ksched-instance": sched | instance_requests(),
        "ksched-dispatcher": dispatcher_requests(),
        "ksched-webhook": webhook_requests(),
    }
    for account, requests in checks.items():
        auth = Authorizer(docs, "kube-system", account)
        assert auth.denied(requests) == [], account
    # Nothing beyond: the dispatcher and the webhook use all they are granted.
    for account, kind_name in (("ksched-dispatcher", [("ClusterRole", "ksched:dispatcher"),
                                                      ("Role", "ksched:dispatcher-leases")]),
                               ("ksched-webhook", [("ClusterRole", "ksched:webhook")])):
        used = {(r.group, r.resource, r.verb) for r in checks[account]}
        granted = {g for k, n in kind_name for g in _grants(docs, k, n)}
        assert sorted(granted - used) == [], account
    # Instance Leases stay in kube-system.
    inst = Authorizer(docs, "kube-system", "ksched-instance")
    assert not inst.allows(Request("coordination.k8s.io", "leases", "update", "default", "ksched-instance-a"))
    # The instances' role is the scheduler's, without its leader-election Lease.
    scheduler_rules = [r for r in _one(_docs("scheduler"), "ClusterRole", "ksched:scheduler")["rules"]
                       if r["apiGroups"] != ["coordination.k8s.io"]]
    assert _one(docs, "ClusterRole", "ksched:instance")["rules"] == scheduler_rules


def test_the_multi_workloads() -> None:
    docs = _docs("multi")
    inst = _one(docs, "Deployment", "ksched-instance")
    spec = inst["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in c["env"]
    args = _args(c, {"POD_NAME": "ksched-instance-7d9f-x2x9z"})
    assert args.command == "run" and args.dispatch and args.instance == "ksched-instance-7d9f-x2x9z"
    _check_probes(c, args.secure_port)
    _check_hardening(spec, c)
    cm, key = _config_mount(spec, c, args.config)
    cfg = parse_configuration(yaml.safe_load(_one(docs, "ConfigMap", cm)["data"][key]))
    names = [p.scheduler_name for p in cfg.profiles]
    assert "default-scheduler" not in names  # instances do not elect: they must not race kube-scheduler

    disp = _one(docs, "Deployment", "ksched-dispatcher")
    assert disp["spec"]["replicas"] == 2
    spec = disp["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    args = _args(c)
    assert args.command == "dispatch" and args.leader_elect is True and args.scheduler_name == names
    _check_probes(c, args.secure_port)
    _check_hardening(spec, c)

    hook = _one(docs, "Deployment", "ksched-webhook")
    assert hook["spec"]["replicas"] == 1 and hook["spec"]["strategy"] == {"type": "Recreate"}
    spec = hook["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    args = _args(c)
    assert args.command == "webhook"
    port = int(args.listen.rpartition(":")[2])
    _check_probes(c, port, ready="/healthz", live="/healthz")
    tls = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert args.tls_cert.startswith("/tls/") and args.tls_key.startswith("/tls/") and "/tls" in tls
    for d in (inst, disp, hook):
        _one(docs, "ServiceAccount", d["spec"]["template"]["spec"]["serviceAccountName"])

    svc = _one(docs, "Service", "ksched-webhook")
    assert svc["spec"]["selector"] == hook["spec"]["selector"]["matchLabels"]
    (sp,) = svc["spec"]["ports"]
    assert sp["targetPort"] == port
    text = (DEPLOY / "multi" / "admission" / "validatingwebhookconfiguration.yaml").read_text()
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    vwc = yaml.safe_load(text.replace("${CA_BUNDLE}", ca))
    (wh,) = vwc["webhooks"]
    assert wh["name"] == WEBHOOK_NAME and wh["failurePolicy"] == "Fail" and wh["clientConfig"]["caBundle"] == ca
    ref = wh["clientConfig"]["service"]
    assert (ref["name"], ref["namespace"], ref["port"], ref["path"]) == (
        "ksched-webhook", "kube-system", sp["port"], "/validate")
    assert wh["rules"][0]["resources"] == ["pods/binding", "bindings"]
