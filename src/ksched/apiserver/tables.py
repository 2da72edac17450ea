"""Server-side ``Table`` responses (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``) with
upstream's printer columns (``pkg/printers/internalversion/printers.go``) for every kind kubectl
shows, declared per kind name: a column's name, type, format, description, priority (1: only
with ``-o wide``) and the function making its cell from the object's manifest. A kind without
a declaration gets upstream's default columns (Name, Created At), as for custom resources.

Cells are formatted as upstream's printers do: ages with ``HumanDuration``, ``<none>``,
``<unset>`` and ``<unknown>`` placeholders, access modes as RWO/ROX/RWX/RWOP, label selectors
as ``metav1.FormatLabelSelector``. Known divergences: quantities are printed as written in the
manifest (not canonicalised)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ksched.api.meta import KubeObject, format_time, parse_time
from ksched.api.node import Node
from ksched.api.pod import Pod

__all__ = ["COLUMNS", "Column", "human_duration", "to_table"]


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


# ------------------------------------------------------------------------------ declarations

Cell = Callable[[dict[str, Any], float], Any]


@dataclass(frozen=True, slots=True)
class Column:
    """One printer column: its definition in the Table and how a row's cell is made."""

    name: str
    type: str
    description: str
    cell: Cell
    priority: int = 0
    format: str = ""

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "format": self.format, "description": self.description,
                "priority": self.priority}


_NAME_DESC = "Name must be unique within a namespace."
_AGE_DESC = "CreationTimestamp is a timestamp representing the server time when this object was created."


def _md(o: dict[str, Any]) -> dict[str, Any]:
    return o.get("metadata") or {}


def _spec(o: dict[str, Any]) -> dict[str, Any]:
    return o.get("spec") or {}


def _status(o: dict[str, Any]) -> dict[str, Any]:
    return o.get("status") or {}


def _name_col() -> Column:
    return Column("Name", "string", _NAME_DESC, lambda o, now: _md(o).get("name", ""), format="name")


def _since(ts: Any, now: float) -> str:
    t = parse_time(ts)
    return "<unknown>" if t is None else human_duration(now - t)


def _age_col() -> Column:
    return Column("Age", "string", _AGE_DESC, lambda o, now: _since(_md(o).get("creationTimestamp"), now))


def _created_at_col() -> Column:
    def cell(o: dict[str, Any], now: float) -> str:
        t = parse_time(_md(o).get("creationTimestamp"))
        return "" if t is None else format_time(t)

    return Column("Created At", "date", _AGE_DESC, cell)


def _int(v: Any) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return 0


def format_label_selector(sel: Any) -> str:
    """metav1.FormatLabelSelector: ``a=b,c in (d,e),!f``; ``<none>`` when it selects everything."""
    if not isinstance(sel, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or ():
        op, key, vals = e.get("operator"), e.get("key", ""), ",".join(sorted(e.get("values") or ()))
        if op == "In":
            parts.append(f"{key} in ({vals})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({vals})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


def _map_selector(sel: Any) -> str:
    if not isinstance(sel, dict) or not sel:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(sel.items()))


def _template_spec(o: dict[str, Any]) -> dict[str, Any]:
    return ((_spec(o).get("template") or {}).get("spec")) or {}


def _workload_wide(get_pod_spec: Callable[[dict[str, Any]], dict[str, Any]], selector: bool = True) -> list[Column]:
    cols = [
        Column("Containers", "string", "Names of each container in the template.",
               lambda o, now: ",".join(c.get("name", "") for c in get_pod_spec(o).get("containers") or ()), 1),
        Column("Images", "string", "Images referenced by each container in the template.",
               lambda o, now: ",".join(c.get("image", "") for c in get_pod_spec(o).get("containers") or ()), 1),
    ]
    if selector:
        cols.append(Column("Selector", "string", "Label selector of the workload's pods.",
                           lambda o, now: format_label_selector(_spec(o).get("selector")), 1))
    return cols


_ACCESS_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
                 "ReadWriteOncePod": "RWOP"}


def _access_modes(modes: Any) -> str:
    seen = [m for m in ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod") if m in (modes or ())]
    return ",".join(_ACCESS_MODES[m] for m in seen)


def _event_last_seen(o: dict[str, Any], now: float) -> str:
    series = o.get("series") or {}
    ts = series.get("lastObservedTime") or o.get("lastTimestamp") or o.get("eventTime") \
        or _md(o).get("creationTimestamp")
    return _since(ts, now)


def _event_first_seen(o: dict[str, Any], now: float) -> str:
    return _since(o.get("firstTimestamp") or o.get("eventTime") or _md(o).get("creationTimestamp"), now)


def _event_source(o: dict[str, Any], now: float) -> str:
    src = o.get("source") or {}
    comp = src.get("component") or o.get("reportingComponent") or ""
    host = src.get("host") or o.get("reportingInstance") or ""
    return f"{comp}, {host}" if comp and host else comp or host


def _event_object(o: dict[str, Any], now: float) -> str:
    ref = o.get("involvedObject") or o.get("regarding") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _service_external_ip(o: dict[str, Any], now: float) -> str:
    spec = _spec(o)
    typ = spec.get("type") or "ClusterIP"
    ext = list(spec.get("externalIPs") or ())
    if typ == "ExternalName":
        return str(spec.get("externalName") or "<none>")
    if typ == "LoadBalancer":
        ingress = [i.get("ip") or i.get("hostname") for i in (_status(o).get("loadBalancer") or {}).get("ingress")
                   or ()]
        ips = [i for i in ingress if i] + ext
        return ",".join(ips) if ips else "<pending>"
    return ",".join(ext) if ext else "<none>"


def _service_ports(o: dict[str, Any], now: float) -> str:
    out = []
    for p in _spec(o).get("ports") or ():
        port = f"{p.get('port')}"
        if p.get("nodePort"):
            port += f":{p['nodePort']}"
        out.append(f"{port}/{p.get('protocol') or 'TCP'}")
    return ",".join(out) or "<none>"


def _endpoints(o: dict[str, Any], now: float) -> str:
    addrs = []
    for sub in o.get("subsets") or ():
        ports = sub.get("ports") or [{}]
        for a in sub.get("addresses") or ():
            for p in ports:
                addrs.append(f"{a.get('ip')}:{p['port']}" if "port" in p else str(a.get("ip")))
    return _first_three(addrs, "<none>")


def _first_three(items: list[str], empty: str) -> str:
    if not items:
        return empty
    more = f" + {len(items) - 3} more..." if len(items) > 3 else ""
    return ",".join(items[:3]) + more


def _slice_ports(o: dict[str, Any], now: float) -> str:
    ports = [str(p["port"]) for p in o.get("ports") or () if p.get("port") is not None]
    return _first_three(ports, "<unset>")


def _slice_endpoints(o: dict[str, Any], now: float) -> str:
    addrs = [a for e in o.get("endpoints") or () for a in e.get("addresses") or ()]
    return _first_three(addrs, "<unset>")


def _quota_column(limits: bool) -> Cell:
    def cell(o: dict[str, Any], now: float) -> str:
        st = _status(o)
        hard, used = st.get("hard") or {}, st.get("used") or {}
        out = [f"{r}: {used.get(r, '0')}/{hard[r]}" for r in sorted(hard) if r.startswith("limits.") == limits]
        return ", ".join(out)
    return cell


def _job_status(o: dict[str, Any], now: float) -> str:
    conds = {c.get("type"): c.get("status") for c in _status(o).get("conditions") or ()}
    if conds.get("Complete") == "True":
        return "Complete"
    if conds.get("Failed") == "True":
        return "Failed"
    if _md(o).get("deletionTimestamp"):
        return "Terminating"
    for t in ("SuccessCriteriaMet", "FailureTarget", "Suspended"):
        if conds.get(t) == "True":
            return t
    return "Running"


def _job_completions(o: dict[str, Any], now: float) -> str:
    spec, succeeded = _spec(o), _int(_status(o).get("succeeded"))
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = _int(spec.get("parallelism", 1))
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_duration(o: dict[str, Any], now: float) -> str:
    st = _status(o)
    start = parse_time(st.get("startTime"))
    if start is None:
        return ""
    end = parse_time(st.get("completionTime"))
    return human_duration((end if end is not None else now) - start)


def _bool_ptr(v: Any) -> str:
    return "<unset>" if v is None else ("True" if v else "False")


def _cronjob_last_schedule(o: dict[str, Any], now: float) -> str:
    ts = _status(o).get("lastScheduleTime")
    return "<none>" if not ts else _since(ts, now)


def _controller(o: dict[str, Any], now: float) -> str:
    for ref in _md(o).get("ownerReferences") or ():
        if ref.get("controller"):
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            kind = str(ref.get("kind", "")).lower()
            return f"{kind}.{group}/{ref.get('name')}" if group else f"{kind}/{ref.get('name')}"
    return "<none>"


def _storage_class_name(o: dict[str, Any], now: float) -> str:
    ann = _md(o).get("annotations") or {}
    name = _md(o).get("name", "")
    default = "true" in (ann.get("storageclass.kubernetes.io/is-default-class"),
                         ann.get("storageclass.beta.kubernetes.io/is-default-class"))
    return f"{name} (default)" if default else name


def _pv_claim(o: dict[str, Any], now: float) -> str:
    ref = _spec(o).get("claimRef") or {}
    return f"{ref.get('namespace')}/{ref.get('name')}" if ref.get("name") else ""


def _pvc_status(o: dict[str, Any], now: float) -> str:
    return "Terminating" if _md(o).get("deletionTimestamp") else str(_status(o).get("phase") or "")


def _subjects(kind: str) -> Cell:
    def cell(o: dict[str, Any], now: float) -> str:
        out = []
        for s in o.get("subjects") or ():
            if s.get("kind") != kind:
                continue
            out.append(f"{s.get('namespace', '')}/{s.get('name')}" if kind == "ServiceAccount" else str(s.get("name")))
        return ", ".join(out)
    return cell


def _resource_claim_state(o: dict[str, Any], now: float) -> str:
    """printers.go resourceClaimState: deleted, pending, allocated, reserved."""
    states = []
    deleted = bool(_md(o).get("deletionTimestamp"))
    if deleted:
        states.append("deleted")
    st = _status(o)
    if not st.get("allocation"):
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if st.get("reservedFor"):
            states.append("reserved")
    return ",".join(states)


def _replicas(o: dict[str, Any]) -> int:
    r = _spec(o).get("replicas")
    return 1 if r is None else _int(r)


def _c(name: str, typ: str, desc: str, cell: Cell, priority: int = 0) -> Column:
    return Column(name, typ, desc, cell, priority)


COLUMNS: dict[str, list[Column]] = {
    "Namespace": [_name_col(), _c("Status", "string", "The status of the namespace",
                                  lambda o, now: _status(o).get("phase", "")), _age_col()],
    "Event": [
        _c("Last Seen", "string", "Time when last event from this group was observed.", _event_last_seen),
        _c("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future.",
           lambda o, now: o.get("type", "")),
        _c("Reason", "string", "This should be a short, machine understandable string that gives the reason for "
                               "this event being generated.", lambda o, now: o.get("reason", "")),
        _c("Object", "string", "The object that this event is about.", _event_object),
        _c("Subobject", "string", "The field of the object that this event is about.",
           lambda o, now: (o.get("involvedObject") or {}).get("fieldPath", ""), 1),
        _c("Source", "string", "The component reporting this event.", _event_source, 1),
        _c("Message", "string", "A human-readable description of the status of this operation.",
           lambda o, now: str(o.get("message", "")).strip()),
        _c("First Seen", "string", "The time at which the event was first recorded.", _event_first_seen, 1),
        _c("Count", "string", "The number of times this event has occurred.",
           lambda o, now: str((o.get("series") or {}).get("count") or o.get("count") or 1), 1),
        _c("Name", "string", _NAME_DESC, lambda o, now: _md(o).get("name", ""), 1),
    ],
    "Service": [
        _name_col(),
        _c("Type", "string", "The type of the service.", lambda o, now: _spec(o).get("type") or "ClusterIP"),
        _c("Cluster-IP", "string", "The IP address of the service.",
           lambda o, now: _spec(o).get("clusterIP") or "<none>"),
        _c("External-IP", "string", "The external IP addresses of the service.", _service_external_ip),
        _c("Port(s)", "string", "The ports that are exposed by this service.", _service_ports),
        _age_col(),
        _c("Selector", "string", "Route service traffic to pods with label keys and values matching this "
                                 "selector.", lambda o, now: _map_selector(_spec(o).get("selector")), 1),
    ],
    "Endpoints": [_name_col(), _c("Endpoints", "string", "Endpoints of the service.", _endpoints), _age_col()],
    "EndpointSlice": [
        _name_col(),
        _c("AddressType", "string", "The type of address carried by this EndpointSlice.",
           lambda o, now: o.get("addressType", "")),
        _c("Ports", "string", "Ports of the EndpointSlice.", _slice_ports),
        _c("Endpoints", "string", "Addresses of the endpoints.", _slice_endpoints),
        _age_col(),
    ],
    "ConfigMap": [_name_col(), _c("Data", "integer", "The number of entries in the data and binaryData.",
                                  lambda o, now: len(o.get("data") or {}) + len(o.get("binaryData") or {})),
                  _age_col()],
    "Secret": [_name_col(), _c("Type", "string", "The type of the secret.", lambda o, now: o.get("type") or "Opaque"),
               _c("Data", "integer", "The number of entries in the data.",
                  lambda o, now: len(o.get("data") or {}) + len(o.get("stringData") or {})), _age_col()],
    "ServiceAccount": [_name_col(), _c("Secrets", "integer", "The number of secrets of the service account.",
                                       lambda o, now: len(o.get("secrets") or ())), _age_col()],
    "LimitRange": [_name_col(), _created_at_col()],
    "ResourceQuota": [_name_col(), _age_col(),
                      _c("Request", "string", "Request represents a minimum amount of cpu/memory that a container "
                                              "may consume.", _quota_column(False)),
                      _c("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may "
                                            "use independent of contention on the node.", _quota_column(True))],
    "PersistentVolume": [
        _name_col(),
        _c("Capacity", "string", "The capacity of the volume.",
           lambda o, now: (_spec(o).get("capacity") or {}).get("storage", "")),
        _c("Access Modes", "string", "The access modes of the volume.",
           lambda o, now: _access_modes(_spec(o).get("accessModes"))),
        _c("Reclaim Policy", "string", "What happens to the volume when released from its claim.",
           lambda o, now: _spec(o).get("persistentVolumeReclaimPolicy") or "Retain"),
        _c("Status", "string", "The phase of the volume.",
           lambda o, now: "Terminating" if _md(o).get("deletionTimestamp") else _status(o).get("phase", "")),
        _c("Claim", "string", "The claim bound to the volume.", _pv_claim),
        _c("StorageClass", "string", "The storage class of the volume.",
           lambda o, now: _spec(o).get("storageClassName", "")),
        _c("VolumeAttributesClass", "string", "The volume attributes class of the volume.",
           lambda o, now: _spec(o).get("volumeAttributesClassName") or "<unset>"),
        _c("Reason", "string", "Why the volume is in its phase.", lambda o, now: _status(o).get("reason", "")),
        _age_col(),
        _c("VolumeMode", "string", "Whether the volume is a filesystem or a raw block device.",
           lambda o, now: _spec(o).get("volumeMode") or "Filesystem", 1),
    ],
    "PersistentVolumeClaim": [
        _name_col(),
        _c("Status", "string", "The phase of the claim.", _pvc_status),
        _c("Volume", "string", "The volume bound to the claim.", lambda o, now: _spec(o).get("volumeName", "")),
        _c("Capacity", "string", "The capacity of the bound volume.",
           lambda o, now: (_status(o).get("capacity") or {}).get("storage", "")),
        _c("Access Modes", "string", "The access modes of the bound volume.",
           lambda o, now: _access_modes(_status(o).get("accessModes"))),
        _c("StorageClass", "string", "The storage class of the claim.",
           lambda o, now: _spec(o).get("storageClassName") or ""),
        _c("VolumeAttributesClass", "string", "The volume attributes class of the claim.",
           lambda o, now: _spec(o).get("volumeAttributesClassName") or "<unset>"),
        _age_col(),
        _c("VolumeMode", "string", "Whether the claim wants a filesystem or a raw block device.",
           lambda o, now: _spec(o).get("volumeMode") or "Filesystem", 1),
    ],
    "Deployment": [
        _name_col(),
        _c("Ready", "string", "Number of the pod with ready state",
           lambda o, now: f"{_int(_status(o).get('readyReplicas'))}/{_replicas(o)}"),
        _c("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the "
                                   "desired template spec.",
           lambda o, now: _int(_status(o).get("updatedReplicas"))),
        _c("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted "
                                  "by this deployment.", lambda o, now: _int(_status(o).get("availableReplicas"))),
        _age_col(),
        *_workload_wide(_template_spec),
    ],
    "ReplicaSet": [
        _name_col(),
        _c("Desired", "integer", "Number of desired pods.", lambda o, now: _replicas(o)),
        _c("Current", "integer", "Number of actual running pods.", lambda o, now: _int(_status(o).get("replicas"))),
        _c("Ready", "integer", "Number of pods ready.", lambda o, now: _int(_status(o).get("readyReplicas"))),
        _age_col(),
        *_workload_wide(_template_spec),
    ],
    "StatefulSet": [
        _name_col(),
        _c("Ready", "string", "Number of the pod with ready state",
           lambda o, now: f"{_int(_status(o).get('readyReplicas'))}/{_replicas(o)}"),
        _age_col(),
        *_workload_wide(_template_spec, selector=False),
    ],
    "DaemonSet": [
        _name_col(),
        _c("Desired", "integer", "The total number of nodes that should be running the daemon pod.",
           lambda o, now: _int(_status(o).get("desiredNumberScheduled"))),
        _c("Current", "integer", "The number of nodes that are running at least 1 daemon pod.",
           lambda o, now: _int(_status(o).get("currentNumberScheduled"))),
        _c("Ready", "integer", "The number of nodes that should be running the daemon pod and have one or more of "
                               "the daemon pod running and ready.",
           lambda o, now: _int(_status(o).get("numberReady"))),
        _c("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod",
           lambda o, now: _int(_status(o).get("updatedNumberScheduled"))),
        _c("Available", "integer", "The number of nodes that should be running the daemon pod and have one or "
                                   "more of the daemon pod running and available.",
           lambda o, now: _int(_status(o).get("numberAvailable"))),
        _c("Node Selector", "string", "NodeSelector is a selector which must be true for the pod to fit on a node.",
           lambda o, now: _map_selector(_template_spec(o).get("nodeSelector"))),
        _age_col(),
        *_workload_wide(_template_spec),
    ],
    "ControllerRevision": [
        _name_col(),
        _c("Controller", "string", "Controller of the object.", _controller),
        _c("Revision", "integer", "Revision indicates the revision of the state represented by Data.",
           lambda o, now: _int(o.get("revision"))),
        _age_col(),
    ],
    "Job": [
        _name_col(),
        _c("Status", "string", "Status of the job.", _job_status),
        _c("Completions", "string", "The completed job and the desired completions.", _job_completions),
        _c("Duration", "string", "Time required to complete the job.", _job_duration),
        _age_col(),
        *_workload_wide(_template_spec),
    ],
    "CronJob": [
        _name_col(),
        _c("Schedule", "string", "The schedule in Cron format.", lambda o, now: _spec(o).get("schedule", "")),
        _c("Timezone", "string", "The time zone name for the given schedule.",
           lambda o, now: _spec(o).get("timeZone") or "<none>"),
        _c("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions.",
           lambda o, now: _bool_ptr(_spec(o).get("suspend"))),
        _c("Active", "integer", "A list of pointers to currently running jobs.",
           lambda o, now: len(_status(o).get("active") or ())),
        _c("Last Schedule", "string", "Information when was the last time the job was successfully scheduled.",
           _cronjob_last_schedule),
        _age_col(),
        *_workload_wide(lambda o: ((((_spec(o).get("jobTemplate") or {}).get("spec") or {}).get("template") or {})
                                   .get("spec") or {}), selector=False),
        _c("Selector", "string", "Label selector of the jobs' pods.",
           lambda o, now: format_label_selector(((_spec(o).get("jobTemplate") or {}).get("spec") or {})
                                                .get("selector")), 1),
    ],
    "PodDisruptionBudget": [
        _name_col(),
        _c("Min Available", "string", "The minimum number of pods that must be available simultaneously.",
           lambda o, now: str(_spec(o)["minAvailable"]) if _spec(o).get("minAvailable") is not None else "N/A"),
        _c("Max Unavailable", "string", "The maximum number of pods that may be unavailable simultaneously.",
           lambda o, now: str(_spec(o)["maxUnavailable"]) if _spec(o).get("maxUnavailable") is not None
           else "N/A"),
        _c("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time.",
           lambda o, now: _int(_status(o).get("disruptionsAllowed"))),
        _age_col(),
    ],
    "PriorityClass": [
        _name_col(),
        _c("Value", "integer", "The value of this priority class.", lambda o, now: _int(o.get("value"))),
        _c("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should be considered "
                                        "as the default priority.", lambda o, now: bool(o.get("globalDefault"))),
        _age_col(),
        _c("PreemptionPolicy", "string", "PreemptionPolicy is the Policy for preempting pods with lower priority.",
           lambda o, now: o.get("preemptionPolicy") or "PreemptLowerPriority"),  # the API default
    ],
    "StorageClass": [
        Column("Name", "string", _NAME_DESC, _storage_class_name, format="name"),
        _c("Provisioner", "string", "Indicates the type of the provisioner.",
           lambda o, now: o.get("provisioner", "")),
        _c("ReclaimPolicy", "string", "Indicates the type of the reclaim policy.",
           lambda o, now: o.get("reclaimPolicy") or "Delete"),
        _c("VolumeBindingMode", "string", "Indicates when volume binding and dynamic provisioning should occur.",
           lambda o, now: o.get("volumeBindingMode") or "Immediate"),
        _c("AllowVolumeExpansion", "string", "Indicates whether the storage class allow volume expand.",
           lambda o, now: bool(o.get("allowVolumeExpansion"))),
        _age_col(),
    ],
    "CSINode": [_name_col(), _c("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on "
                                                     "the node", lambda o, now: len(_spec(o).get("drivers") or ())),
                _age_col()],
    "Lease": [_name_col(), _c("Holder", "string", "The holder of the lease.",
                              lambda o, now: _spec(o).get("holderIdentity") or ""), _age_col()],
    "RuntimeClass": [_name_col(), _c("Handler", "string", "Handler specifies the underlying runtime and "
                                                          "configuration that the CRI implementation will use.",
                                     lambda o, now: o.get("handler", "")), _age_col()],
    # resource.k8s.io/v1 (printers.go: printDeviceClass, printResourceClaim, printResourceClaimTemplate,
    # printResourceSlice).
    "DeviceClass": [_name_col(), _age_col()],
    "ResourceClaim": [_name_col(), _c("State", "string", "A summary of the current state (allocated, pending, "
                                                         "reserved, etc.).", _resource_claim_state), _age_col()],
    "ResourceClaimTemplate": [_name_col(), _age_col()],
    "ResourceSlice": [
        _name_col(),
        _c("Node", "string", "NodeName identifies the node which provides the resources in this pool.",
           lambda o, now: _spec(o).get("nodeName") or ""),
        _c("Driver", "string", "Driver identifies the DRA driver providing the capacity information.",
           lambda o, now: _spec(o).get("driver") or ""),
        _c("Pool", "string", "Name is used to identify the pool.",
           lambda o, now: (_spec(o).get("pool") or {}).get("name") or ""),
        _age_col(),
    ],
    "Role": [_name_col(), _created_at_col()],
    "ClusterRole": [_name_col(), _created_at_col()],
    "ValidatingWebhookConfiguration": [
        _name_col(), _c("Webhooks", "integer", "Webhooks indicates the number of webhooks registered in this "
                                               "configuration", lambda o, now: len(o.get("webhooks") or ())),
        _age_col()],
}
for _kind in ("RoleBinding", "ClusterRoleBinding"):
    COLUMNS[_kind] = [
        _name_col(),
        _c("Role", "string", "RoleRef is the reference to the role.",
           lambda o, now: f"{(o.get('roleRef') or {}).get('kind', '')}/{(o.get('roleRef') or {}).get('name', '')}"),
        _age_col(),
        _c("Users", "string", "Users in the binding.", _subjects("User"), 1),
        _c("Groups", "string", "Groups in the binding.", _subjects("Group"), 1),
        _c("ServiceAccounts", "string", "ServiceAccounts in the binding.", _subjects("ServiceAccount"), 1),
    ]
_DEFAULT_COLUMNS = [_name_col(), _created_at_col()]
# Pods and nodes: rows made from the typed objects.
_TABLES: dict[str, tuple[list[dict[str, Any]], Callable[[Any, float], list[Any]]]] = {
    "Pod": (POD_COLUMNS, _pod_row),
    "Node": (NODE_COLUMNS, _node_row),
}


def _partial_metadata(obj: KubeObject) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.raw.get("metadata") or {}}


def to_table(kind: str, objs: list[KubeObject], now: float, resource_version: str = "",
             continue_token: str = "", include_object: str = "Metadata") -> dict[str, Any]:
    special = _TABLES.get(kind)
    if special is not None:
        defs, row_of = special
        rows = [row_of(o, now) for o in objs]
    else:
        cols = COLUMNS.get(kind, _DEFAULT_COLUMNS)
        defs = [c.definition() for c in cols]
        rows = [[c.cell(o.raw, now) for c in cols] for o in objs]
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
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md, "columnDefinitions": defs,
            "rows": out_rows}
