"""Raw API objects (dicts, as a client sends them) and small store helpers shared by test files
of several directories: pods (the API server's watch and eviction tests, the informer's tests,
the disruption controller's), nodes and budgets (eviction, disruption), storage classes, claims
and volumes (the PV controller's tests and ``ksched.api.volumes``')."""

from __future__ import annotations

from typing import Any

from ksched.api.pdb import PodDisruptionBudget
from ksched.api.pod import Pod
from ksched.api.resources import pod_requests
from ksched.apiserver.store import Store

# ---------------------------------------------------------------- pods, nodes, budgets


def mkpod(name: str, labels: dict[str, str] | None = None, ns: str = "default", **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": [{"name": "c", "image": "img"}]}
    s.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": s}


def summed_requests(pods: list[Pod]) -> dict[str, int]:
    """The pods' requests added up, resources summing to 0 left out (the reference for the
    kubelet's kept request sums)."""
    out: dict[str, int] = {}
    for p in pods:
        for r, v in pod_requests(p).items():
            out[r] = out.get(r, 0) + v
    return {r: v for r, v in out.items() if v}


def mknode(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}}


def mkpdb(name: str, selector: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = dict(spec)
    if selector is not None:
        s["selector"] = selector
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"}, "spec": s}


def running(store: Store, name: str, labels: dict[str, str] | None = None, ready: bool = True) -> Pod:
    """A pod created, bound to node n1 and Running (Ready unless ``ready`` is False)."""
    store.create(mkpod(name, labels))
    store.bind("default", name, "n1")
    p = store.get("Pod", "default", name)
    raw = p.deepcopy_raw()
    raw["status"]["phase"] = "Running"
    raw["status"]["conditions"] = [*raw["status"]["conditions"],
                                   {"type": "Ready", "status": "True" if ready else "False"}]
    out = store.update_status(raw)
    assert isinstance(out, Pod)
    return out


def pdb(store: Store, name: str = "web") -> PodDisruptionBudget:
    p = store.get("PodDisruptionBudget", "default", name)
    assert isinstance(p, PodDisruptionBudget)
    return p


WEB = {"matchLabels": {"app": "web"}}

# ---------------------------------------------------------------- storage

HOST = "kubernetes.io/hostname"


def sc(name: str, mode: str = "Immediate", provisioner: str = "kubernetes.io/no-provisioner",
       annotations: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if annotations:
        md["annotations"] = annotations
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": md, "provisioner": provisioner,
            "volumeBindingMode": mode, **extra}


def pvc(name: str, cls: str | None = "", size: str = "1Gi", modes: tuple[str, ...] = ("ReadWriteOnce",),
        annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}, **spec}
    if cls is not None:
        s["storageClassName"] = cls
    md: dict[str, Any] = {"name": name, "namespace": "default"}
    if annotations:
        md["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": md, "spec": s}


def pv(name: str, cls: str = "", size: str = "5Gi", modes: tuple[str, ...] = ("ReadWriteOnce",),
       labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": md,
            "spec": {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls, **spec}}


# ---------------------------------------------------------------- apps/v1 workloads


def mktemplate(labels: dict[str, str], image: str = "img", cpu: str | None = None, **spec: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": image}
    if cpu is not None:
        c["resources"] = {"requests": {"cpu": cpu}}
    return {"metadata": {"labels": dict(labels)}, "spec": {"containers": [c], **spec}}


def mkdeploy(name: str, replicas: int | None = 3, labels: dict[str, str] | None = None, image: str = "img",
             ns: str = "default", strategy: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    labels = labels or {"app": name}
    s: dict[str, Any] = {"selector": {"matchLabels": dict(labels)}, "template": mktemplate(labels, image), **spec}
    if replicas is not None:
        s["replicas"] = replicas
    if strategy is not None:
        s["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns}, "spec": s}


def mkrs(name: str, replicas: int = 3, labels: dict[str, str] | None = None, image: str = "img",
         ns: str = "default", **spec: Any) -> dict[str, Any]:
    labels = labels or {"app": name}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)},
                     "template": mktemplate(labels, image), **spec}}


def mksts(name: str, replicas: int = 3, labels: dict[str, str] | None = None, image: str = "img",
          ns: str = "default", **spec: Any) -> dict[str, Any]:
    labels = labels or {"app": name}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": dict(labels)},
                     "template": mktemplate(labels, image), **spec}}


def mkds(name: str, labels: dict[str, str] | None = None, image: str = "img", ns: str = "default",
         **spec: Any) -> dict[str, Any]:
    labels = labels or {"app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": dict(labels)}, "template": mktemplate(labels, image), **spec}}


def placements(store: Store) -> dict[str, tuple[str | None, str]]:
    """Per pod of ``store``: its node (None while pending) and the message of its PodScheduled
    condition (for a pod that fits nowhere, the FitError message with its per-reason counts):
    what two scheduling paths that must agree are compared by."""
    out: dict[str, tuple[str | None, str]] = {}
    for p in store.items("Pod"):
        assert isinstance(p, Pod)
        cond = p.condition("PodScheduled") or {}
        out[p.name] = (p.node_name or None, str(cond.get("message") or ""))
    return out


def pods_of(store: Store, owner: str, kind: str | None = None, live: bool = False) -> list[Pod]:
    """The pods whose controller is named ``owner`` (of ``kind``), by name; ``live``: not being deleted."""
    return sorted((p for p in store.items("Pod") if isinstance(p, Pod) and (r := p.controller_ref()) is not None
                   and r.name == owner and (kind is None or r.kind == kind)
                   and (not live or p.deletion_timestamp is None)), key=lambda p: p.name)


def events_of(store: Store, name: str, kind: str | None = None) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the events about an object, in the order they were recorded."""
    from ksched.api.event import Event

    evs = sorted((e for e in store.items("Event") if isinstance(e, Event) and e.involved_object.get("name") == name
                  and (kind is None or e.involved_object.get("kind") == kind)), key=lambda e: int(e.resource_version))
    return [(e.type, e.reason, e.message) for e in evs]
