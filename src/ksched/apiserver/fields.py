"""Field selectors on the server side: the fields each kind can be selected by and their
values for one object (upstream's per-kind ``GetAttrs`` / field label conversion)."""

from __future__ import annotations

from ksched.api.errors import BadRequest
from ksched.api.event import Event
from ksched.api.labels import FieldSelector
from ksched.api.meta import KubeObject
from ksched.api.node import Node
from ksched.api.pod import Pod

__all__ = ["SUPPORTED_FIELDS", "check_field_selector", "field_values"]

_DEFAULT_FIELDS = frozenset(("metadata.name", "metadata.namespace"))

SUPPORTED_FIELDS: dict[str, frozenset[str]] = {
    "Pod": frozenset(("metadata.name", "metadata.namespace", "spec.nodeName", "status.phase", "spec.schedulerName",
                      "status.nominatedNodeName")),
    "Node": frozenset(("metadata.name", "spec.unschedulable")),
    "Event": frozenset(("metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace",
                        "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion",
                        "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason", "type", "source")),
}


def field_values(obj: KubeObject) -> dict[str, str]:
    """The fields a field selector may name for an object."""
    f = {"metadata.name": obj.name, "metadata.namespace": obj.namespace}
    if isinstance(obj, Pod):
        f["spec.nodeName"] = obj.node_name
        f["status.phase"] = obj.phase
        f["spec.schedulerName"] = obj.scheduler_name
        f["status.nominatedNodeName"] = obj.nominated_node_name
    elif isinstance(obj, Node):
        f["spec.unschedulable"] = "true" if obj.unschedulable else "false"
    elif isinstance(obj, Event):
        io = obj.involved_object
        for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"):
            f[f"involvedObject.{k}"] = str(io.get(k) or "")
        f["reason"] = obj.reason
        f["type"] = obj.type
        f["source"] = str(obj.source.get("component") or "")
    return f


def check_field_selector(kind: str, fs: FieldSelector | None) -> None:
    """BadRequest when the selector names a field the kind cannot be selected by."""
    if fs is None or fs.is_empty():
        return
    allowed = SUPPORTED_FIELDS.get(kind, _DEFAULT_FIELDS)
    for f in fs.fields():
        if f not in allowed:
            raise BadRequest(f'"{f}" is not a known field selector: only "{", ".join(sorted(allowed))}"')
