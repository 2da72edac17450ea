"""A simulated DRA driver for the embedded cluster: the node side of Dynamic Resource
Allocation, as a kubelet plugin (for example NVIDIA's GPU driver) is on a real node. It is a
client of the API only: it watches Nodes and ResourceClaims and writes ResourceSlices and claim
statuses.

What a node offers, in the order looked at:

* the annotation ``dra.ksched.io/devices``: a JSON list of devices in the ResourceSlice's own
  form (``name``, ``attributes``, ``capacity``, ``allowMultipleAllocations``, ``taints``, ...),
  published as written;
* the annotation ``dra.ksched.io/gpus``: a JSON object ``{"count": 4, "model": "A100",
  "memory": "80Gi", "numa": [0, 0, 1, 1], "shared": true}``: GPUs named ``gpu-<i>`` with the
  attributes ``model``, ``index``, ``numa`` and the capacities ``memory`` and ``milli`` (1000 per
  GPU); ``shared`` makes them multi-allocation devices (consumable capacity);
* the GPU model of the trace-replay work (:mod:`ksched.api.gpu`): a node with
  ``alibabacloud.com/gpu-count`` GPUs of the ``alibabacloud.com/gpu-card-model`` label gets that
  many shared GPUs with ``milli`` capacity 1000 each: the same devices the GpuShare plugin
  hands out by annotation, so a cluster can be described either way.

Each node's devices go to one ResourceSlice ``<node>-<driver>`` (pool: the node; generation
bumped on every change; deleted with the node). Devices allocated to a claim reserved for a
pod get an entry in the claim's ``status.devices`` (driver, pool, device, shareID, a ``Ready``
condition), as DRAResourceClaimDeviceStatus drivers report them.

Binding conditions (DRADeviceBindingConditions): devices declared with ``bindingConditions``
(and ``bindingFailureConditions``) in ``dra.ksched.io/devices``, or with those keys in
``dra.ksched.io/gpus`` (for every GPU), get their status entry only once the device is "attached":
``delay`` seconds of the cluster's clock after the claim's ``allocationTimestamp`` (the driver's
``binding_delay``, 10 s by default, or the node annotation ``dra.ksched.io/binding``: a JSON object
``{"delay": 30, "fail": false}``), with each binding condition True -- or, with ``"fail": true``,
each failure condition True (reason ``BindingFailed``), as a fabric-attach controller would report.

Known divergences: no CDI, no NodePrepareResources/NodeUnprepareResources calls (the simulated
kubelet starts pods without them); the binding conditions are set by this driver rather than a
separate controller.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ksched.api.errors import AlreadyExists, ApiError, NotFound
from ksched.api.gpu import GPU_DRIVER, LABEL_GPU_MODEL, MILLI, node_gpus
from ksched.api.meta import format_time, parse_time
from ksched.api.node import Node
from ksched.api.resource import ResourceClaim, ResourceSlice
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory

__all__ = ["ANNOTATION_BINDING", "ANNOTATION_DEVICES", "ANNOTATION_GPUS", "DEFAULT_DRIVER", "DRADriver",
           "node_devices"]

log = logging.getLogger(__name__)

DEFAULT_DRIVER = GPU_DRIVER
ANNOTATION_DEVICES = "dra.ksched.io/devices"
ANNOTATION_GPUS = "dra.ksched.io/gpus"
ANNOTATION_BINDING = "dra.ksched.io/binding"
DEFAULT_BINDING_DELAY = 10.0


class DeviceSpecError(ValueError):
    """A node's device annotation that cannot be read: names the node and the annotation."""


def _gpus(count: int, model: str, memory: str | None, numa: list[int] | None, shared: bool,
          binding: list[str] | None = None, failure: list[str] | None = None) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        attrs: dict[str, Any] = {"index": {"int": i}}
        if model:
            attrs["model"] = {"string": model}
        if numa is not None and i < len(numa):
            attrs["numa"] = {"int": int(numa[i])}
        cap: dict[str, Any] = {"milli": {"value": str(MILLI)}}
        if memory:
            cap["memory"] = {"value": str(memory)}
        d: dict[str, Any] = {"name": f"gpu-{i}", "attributes": attrs, "capacity": cap}
        if shared:
            d["allowMultipleAllocations"] = True
        if binding:
            d["bindingConditions"] = list(binding)
            d["bindingFailureConditions"] = list(failure or ())
        out.append(d)
    return out


def node_devices(node: Node) -> list[dict[str, Any]]:
    """The devices a node offers (see the module docstring); raises DeviceSpecError."""
    ann = node.annotations
    if ANNOTATION_DEVICES in ann:
        try:
            devs = json.loads(ann[ANNOTATION_DEVICES])
        except json.JSONDecodeError as e:
            raise DeviceSpecError(f"node {node.name}: annotation {ANNOTATION_DEVICES} is not JSON: {e}") from None
        if not isinstance(devs, list) or not all(isinstance(d, dict) and d.get("name") for d in devs):
            raise DeviceSpecError(f"node {node.name}: annotation {ANNOTATION_DEVICES} must be a list of devices "
                                  "with names")
        return devs
    if ANNOTATION_GPUS in ann:
        try:
            g = json.loads(ann[ANNOTATION_GPUS])
        except json.JSONDecodeError as e:
            raise DeviceSpecError(f"node {node.name}: annotation {ANNOTATION_GPUS} is not JSON: {e}") from None
        if not isinstance(g, dict) or not isinstance(g.get("count", 0), int) or g.get("count", 0) < 0:
            raise DeviceSpecError(f"node {node.name}: annotation {ANNOTATION_GPUS} must be an object with a "
                                  "non-negative integer count")
        numa = g.get("numa")
        if numa is not None and not isinstance(numa, list):
            raise DeviceSpecError(f"node {node.name}: annotation {ANNOTATION_GPUS}: numa must be a list")
        bc, bf = g.get("bindingConditions"), g.get("bindingFailureConditions")
        for key, v in (("bindingConditions", bc), ("bindingFailureConditions", bf)):
            if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                raise DeviceSpecError(f"node {node.name}: annotation {ANNOTATION_GPUS}: {key} must be a list of "
                                      "condition types")
        return _gpus(int(g.get("count", 0)), str(g.get("model", "")), g.get("memory"), numa,
                     bool(g.get("shared", False)), bc, bf)
    gpus = node_gpus(node)
    if gpus.count:
        return _gpus(gpus.count, node.labels.get(LABEL_GPU_MODEL, ""), None, None, True)
    return []


class DRADriver:
    """One driver acting for every node (as the simulated kubelet does)."""

    def __init__(self, client: Any, informers: InformerFactory, clock: Any, driver: str = DEFAULT_DRIVER,
                 binding_delay: float = DEFAULT_BINDING_DELAY) -> None:
        self.client = client
        self.clock = clock
        self.driver = driver
        self.binding_delay = binding_delay
        self._binding_due: dict[str, float] = {}  # claim key -> when its next device is attached
        self.nodes = informers.informer("Node")
        self.slices = informers.informer("ResourceSlice")
        self.claims = informers.informer("ResourceClaim")
        self._dirty_nodes: set[str] = set()
        self._deleted_nodes: set[str] = set()
        self._dirty_claims: set[str] = set()
        self._published: dict[str, tuple[str, int]] = {}  # node -> (devices as JSON, generation)
        self.nodes.add_handler(EventHandler(self._node, lambda _o, n: self._node(n), self._node_deleted))
        self.claims.add_handler(EventHandler(self._claim, lambda _o, n: self._claim(n), None))

    def slice_name(self, node: str) -> str:
        return f"{node}-{self.driver}"

    def _node(self, n: Any) -> None:
        if isinstance(n, Node):
            self._dirty_nodes.add(n.name)
            self._deleted_nodes.discard(n.name)

    def _node_deleted(self, obj: Any) -> None:
        n = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if isinstance(n, Node):
            self._deleted_nodes.add(n.name)
            self._dirty_nodes.discard(n.name)

    def _claim(self, c: Any) -> None:
        if isinstance(c, ResourceClaim) and c.allocation is not None and c.reserved_for:
            self._dirty_claims.add(c.key)

    def pending(self) -> bool:
        return bool(self._dirty_nodes or self._deleted_nodes or self._dirty_claims)

    def next_wakeup(self) -> float | None:
        """When a device with binding conditions is next attached."""
        return min(self._binding_due.values()) if self._binding_due else None

    def _binding(self, node_name: str) -> tuple[float, bool]:
        """(delay, fail) for devices of a node: its ``dra.ksched.io/binding`` annotation, else the
        driver's delay and success."""
        node = self.nodes.get(node_name)
        text = node.annotations.get(ANNOTATION_BINDING) if isinstance(node, Node) else None
        if not text:
            return self.binding_delay, False
        try:
            cfg = json.loads(text)
            delay = float(cfg.get("delay", self.binding_delay))
            fail = cfg.get("fail", False)
            if not isinstance(fail, bool) or delay < 0:
                raise ValueError("delay must be a non-negative number and fail a boolean")
        except (ValueError, TypeError, AttributeError) as e:
            log.warning("node %s: annotation %s: %s", node_name, ANNOTATION_BINDING, e)
            return self.binding_delay, False
        return delay, fail

    def step(self) -> int:
        """Publish what changed; returns how many writes were made."""
        n = 0
        for name in sorted(self._deleted_nodes):
            self._deleted_nodes.discard(name)
            self._published.pop(name, None)
            try:
                self.client.delete("ResourceSlice", "", self.slice_name(name))
                n += 1
            except NotFound:
                pass
            except ApiError as e:
                log.debug("deleting the slice of %s: %s", name, e)
        for name in sorted(self._dirty_nodes):
            self._dirty_nodes.discard(name)
            node = self.nodes.get(name)
            if isinstance(node, Node):
                n += self._publish(node)
        now = self.clock.now()
        for key, due in list(self._binding_due.items()):
            if due <= now:
                del self._binding_due[key]
                self._dirty_claims.add(key)
        for key in sorted(self._dirty_claims):
            self._dirty_claims.discard(key)
            c = self.claims.get(key)
            if isinstance(c, ResourceClaim):
                n += self._report_devices(c)
        return n

    def _publish(self, node: Node) -> int:
        try:
            devices = node_devices(node)
        except DeviceSpecError as e:
            log.warning("%s", e)
            devices = []
        text = json.dumps(devices, sort_keys=True)
        cur = self.slices.get(self.slice_name(node.name))
        prev = self._published.get(node.name)
        if prev is not None and prev[0] == text and cur is not None:
            return 0
        if not devices:
            self._published[node.name] = (text, prev[1] if prev else 0)
            if cur is not None:
                try:
                    self.client.delete("ResourceSlice", "", self.slice_name(node.name))
                    return 1
                except NotFound:
                    return 0
            return 0
        gen = (cur.pool_generation if isinstance(cur, ResourceSlice) else 0) + 1
        raw = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": self.slice_name(node.name),
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node.name,
                                                 "uid": node.uid, "controller": True}]},
               "spec": {"driver": self.driver, "nodeName": node.name,
                        "pool": {"name": node.name, "generation": gen, "resourceSliceCount": 1},
                        "devices": devices}}
        try:
            if cur is None:
                try:
                    self.client.create(raw)
                except AlreadyExists:
                    got = self.client.get("ResourceSlice", "", self.slice_name(node.name))
                    raw["metadata"]["resourceVersion"] = got.resource_version
                    raw["spec"]["pool"]["generation"] = getattr(got, "pool_generation", 0) + 1
                    self.client.update(raw)
            else:
                raw["metadata"]["resourceVersion"] = cur.resource_version
                self.client.update(raw)
        except ApiError as e:
            log.warning("publishing the devices of node %s: %s", node.name, e)
            self._dirty_nodes.add(node.name)
            return 0
        self._published[node.name] = (text, gen)
        return 1

    def _report_devices(self, c: ResourceClaim) -> int:
        have = {(d.get("driver"), d.get("pool"), d.get("device"), d.get("shareID") or "") for d in c.device_statuses}
        add = []
        for r in c.results:
            if r.get("driver") != self.driver:
                continue
            k = (r.get("driver"), r.get("pool"), r.get("device"), r.get("shareID") or "")
            if k in have:
                continue
            now = self.clock.now()
            conds = [{"type": "Ready", "status": "True", "reason": "Prepared", "message": "",
                      "lastTransitionTime": format_time(now)}]
            if r.get("bindingConditions"):
                delay, fail = self._binding(str(r.get("pool", "")))
                since = parse_time((c.allocation or {}).get("allocationTimestamp"))
                due = (since if since is not None else now) + delay
                if due > now:
                    cur = self._binding_due.get(c.key)
                    self._binding_due[c.key] = due if cur is None else min(cur, due)
                    continue
                if fail:
                    conds = [{"type": t, "status": "True", "reason": "BindingFailed",
                              "message": f"device {r['device']} could not be attached", "lastTransitionTime":
                                  format_time(now)} for t in r.get("bindingFailureConditions") or ()]
                else:
                    conds = [{"type": t, "status": "True", "reason": "Attached", "message": "",
                              "lastTransitionTime": format_time(now)} for t in r["bindingConditions"]]
            entry: dict[str, Any] = {"driver": r["driver"], "pool": r["pool"], "device": r["device"],
                                     "conditions": conds}
            if r.get("shareID"):
                entry["shareID"] = r["shareID"]
            add.append(entry)
        if not add:
            return 0
        raw = c.deepcopy_raw()
        raw.setdefault("status", {}).setdefault("devices", []).extend(add)
        try:
            self.client.update_status(raw)
        except ApiError as e:
            log.debug("reporting devices of claim %s: %s", c.key, e)
            return 0
        return 1
