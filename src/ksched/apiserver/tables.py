"""Server-side ``Table`` responses (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``), with
upstream's printer columns for pods and nodes (``-o wide`` columns have priority 1) and the
default name/age columns for the other kinds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ksched.api.meta import KubeObject
from ksched.api.node import Node
from ksched.api.pod import Pod

__all__ = ["human_duration", "to_table"]


def human_duration(seconds: float) -> str:
    """Upstream's duration.HumanDuration (the AGE column)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m" if rem == 0 else f"{minutes}m{rem}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def _age(obj: KubeObject, now: float) -> str:
    if obj.creation_timestamp is None:
        return "<unknown>"
    return human_duration(now - obj.creation_timestamp)


def _col(name: str, typ: str, desc: str, priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": typ, "format": fmt, "description": desc, "priority": priority}


# The default columns, which the pod and node tables start with too.
_NAME_COLUMN = _col("Name", "string", "Name must be unique within a namespace.", fmt="name")
_AGE_COLUMN = _col("Age", "string", "CreationTimestamp is a timestamp representing the server time when this "
                                    "object was created.")

POD_COLUMNS = [
    _NAME_COLUMN,
    _col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", "string", "The aggregate status of the containers in this pod."),
    _col("Restarts", "string", "The number of times the containers in this pod have been restarted and when the "
                               "last container in this pod has restarted."),
    _AGE_COLUMN,
    _col("IP", "string", "IP address allocated to the pod. Routable at least within the cluster.", 1),
    _col("Node", "string", "NodeName is a request to schedule this pod onto a specific node.", 1),
    _col("Nominated Node", "string", "nominatedNodeName is set only when this pod preempts other pods on the "
                                     "node.", 1),
    _col("Readiness Gates", "string", "If specified, all readiness gates will be evaluated for pod readiness.", 1),
]

NODE_COLUMNS = [
    _NAME_COLUMN,
    _col("Status", "string", "The status of the node"),
    _col("Roles", "string", "The roles of the node"),
    _AGE_COLUMN,
    _col("Version", "string", "Kubelet Version reported by the node."),
    _col("Internal-IP", "string", "List of addresses reachable to the node. Queried from cloud provider, if "
                                  "available.", 1),
    _col("External-IP", "string", "List of addresses reachable to the node. Queried from cloud provider, if "
                                  "available.", 1),
    _col("OS-Image", "string", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 "
                               "(wheezy)).", 1),
    _col("Kernel-Version", "string", "Kernel Version reported by the node from 'uname -r' (e.g. "
                                     "3.16.0-0.bpo.4-amd64).", 1),
    _col("Container-Runtime", "string", "Container runtime version reported by the node through runtime remote "
                                        "API (e.g. containerd://1.4.2).", 1),
]

DEFAULT_COLUMNS = [_NAME_COLUMN, _AGE_COLUMN]


def _pod_row(p: Pod, now: float) -> list[Any]:
    status = p.raw.get("status") or {}
    cstatuses = status.get("containerStatuses") or []
    total = len(p.containers)
    ready = sum(1 for c in cstatuses if c.get("ready"))
    if not cstatuses and p.phase == "Running":
        ready = total if (p.condition("Ready") or {}).get("status") == "True" else 0
    restarts = sum(int(c.get("restartCount") or 0) for c in cstatuses)
    reason = status.get("reason") or p.phase
    if p.scheduling_gates and not p.node_name:
        reason = "SchedulingGated"
    for c in cstatuses:
        st = c.get("state") or {}
        if "waiting" in st and st["waiting"].get("reason"):
            reason = st["waiting"]["reason"]
        elif "terminated" in st and st["terminated"].get("reason"):
            reason = st["terminated"]["reason"]
    if p.deletion_timestamp is not None:
        reason = "Terminating"
    gates = (p.raw.get("spec") or {}).get("readinessGates") or []
    return [p.name, f"{ready}/{total}", reason, str(restarts), _age(p, now), status.get("podIP") or "<none>",
            p.node_name or "<none>", p.nominated_node_name or "<none>",
            f"{len(gates)}" if gates else "<none>"]


def _node_row(n: Node, now: float) -> list[Any]:
    ready = n.condition_status("Ready")
    status = "Ready" if ready == "True" else "NotReady" if ready == "False" else "Unknown"
    if n.unschedulable:
        status += ",SchedulingDisabled"
    roles = sorted(k.split("/", 1)[1] for k in n.labels if k.startswith("node-role.kubernetes.io/"))
    if n.labels.get("kubernetes.io/role"):
        roles.append(n.labels["kubernetes.io/role"])
    info = (n.raw.get("status") or {}).get("nodeInfo") or {}
    addrs = (n.raw.get("status") or {}).get("addresses") or []
    internal = next((a.get("address") for a in addrs if a.get("type") == "InternalIP"), "<none>")
    external = next((a.get("address") for a in addrs if a.get("type") == "ExternalIP"), "<none>")
    return [n.name, status, ",".join(roles) or "<none>", _age(n, now), info.get("kubeletVersion") or "",
            internal, external, info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


def _default_row(o: KubeObject, now: float) -> list[Any]:
    return [o.name, _age(o, now)]


# kind -> (columns, row of an object), for the kinds with columns of their own.
_TABLES: dict[str, tuple[list[dict[str, Any]], Callable[[Any, float], list[Any]]]] = {
    "Pod": (POD_COLUMNS, _pod_row),
    "Node": (NODE_COLUMNS, _node_row),
}


def _partial_metadata(obj: KubeObject) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.raw.get("metadata") or {}}


def to_table(kind: str, objs: list[KubeObject], now: float, resource_version: str = "",
             continue_token: str = "", include_object: str = "Metadata") -> dict[str, Any]:
    cols, row_of = _TABLES.get(kind, (DEFAULT_COLUMNS, _default_row))
    rows = [row_of(o, now) for o in objs]
    out_rows = []
    for o, cells in zip(objs, rows):
        row: dict[str, Any] = {"cells": cells}
        if include_object == "Object":
            row["object"] = o.raw
        elif include_object != "None":
            row["object"] = _partial_metadata(o)
        out_rows.append(row)
    md: dict[str, Any] = {}
    if resource_version:
        md["resourceVersion"] = resource_version
    if continue_token:
        md["continue"] = continue_token
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md, "columnDefinitions": cols,
            "rows": out_rows}
