"""The resourcequota controller (upstream's ``pkg/controller/resourcequota``, ``resourcequota``
in kube-controller-manager's ``--controllers``): keeps every ResourceQuota's ``status.hard``
equal to its ``spec.hard`` and ``status.used`` equal to what the objects of its namespace use
(``ksched.api.quota``), for every resource it limits.

Quota admission charges a new object to ``status.used`` as it is created; this controller
computes the usage anew when a quota is created or its ``spec.hard`` changes, and when usage is
given back (replenishment): an object of a counted kind is deleted, or a pod finishes.

Divergence: no periodic full resync (upstream's ``--resource-quota-sync-period``, 5 minutes):
on the virtual clock a simulation would never run out of timers. Usage that only changes with
time (a pod past its deletion grace period) is counted at the next recomputation.
"""

from __future__ import annotations

from typing import Any

from ksched.api.pod import Pod
from ksched.api.quantity import Quantity
from ksched.api.quota import ResourceList, add, matches, matching_resources, parse_resource_list, usage
from ksched.api.resourcequota import ResourceQuota
from ksched.api.scheme import Scheme, group_version
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory, SharedInformer
from ksched.clock import Clock
from ksched.controllers.controller import Controller

__all__ = ["ResourceQuotaController"]

# Kinds whose informers the controller always holds (the evaluators upstream registers).
_CORE_KINDS = ("Pod", "Service", "PersistentVolumeClaim", "ConfigMap", "Secret", "ResourceQuota")


class ResourceQuotaController(Controller):
    """Keys are quota keys (``namespace/name``)."""

    name = "resourcequota"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.scheme: Scheme = getattr(client, "scheme", None) or Scheme()
        self.quotas = informers.informer("ResourceQuota")
        self.quotas.add_handler(EventHandler(self._on_quota, self._on_quota_update))
        self._watched: dict[str, SharedInformer] = {}
        self._waiting: set[Any] = set()
        for kind in _CORE_KINDS:
            self._watch(kind)

    # ------------------------------------------------------------ events

    def _on_quota(self, q: Any) -> None:
        self.queue.add(q.key)

    def _on_quota_update(self, old: Any, new: Any) -> None:
        # Only a change of the limits asks for a recomputation (a status write does not).
        if old.raw.get("spec", {}).get("hard") != new.raw.get("spec", {}).get("hard"):
            self.queue.add(new.key)

    def _watch(self, kind: str) -> SharedInformer:
        inf = self._watched.get(kind)
        if inf is None:
            inf = self._watched[kind] = self.informers.informer(kind)
            inf.add_handler(EventHandler(on_update=self._on_update, on_delete=self._replenish))
        return inf

    def _on_update(self, old: Any, new: Any) -> None:
        # A pod that finishes gives its compute resources back. (The new pod first: most updates
        # leave it running, and the old version is then not read at all.)
        if isinstance(new, Pod) and new.is_terminal and isinstance(old, Pod) and not old.is_terminal:
            self._replenish(new)

    def _replenish(self, obj: Any) -> None:
        target = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        cls = type(target)
        for q in self.quotas.indexer.by_index("namespace", target.namespace):
            if isinstance(q, ResourceQuota) and matching_resources(cls, q.hard):
                self.queue.add(q.key)

    # ------------------------------------------------------------ sync

    def _kind_for(self, resource: str) -> str | None:
        """The kind whose objects a quota resource counts (``count/<plural>[.<group>]``)."""
        if not resource.startswith("count/"):
            return None
        plural, _, group = resource[len("count/"):].partition(".")
        for c in self.scheme.classes():
            if plural == c.PLURAL and group_version(c)[0] == group:
                return c.KIND_KEY
        return None

    def sync(self, key: Any) -> None:
        q = self.quotas.get(str(key))
        if not isinstance(q, ResourceQuota) or q.deletion_timestamp is not None:
            return
        kinds = set(_CORE_KINDS)
        for r in q.hard:
            k = self._kind_for(r)
            if k is not None:
                kinds.add(k)
        informers = [self._watch(k) for k in sorted(kinds)]
        if not all(inf.has_synced() for inf in informers):
            # A kind watched for the first time: count once its informer has listed.
            if key in self._waiting:
                self.queue.add_after(key, 0.05)
            else:
                self._waiting.add(key)
                self.queue.add(key)
            return
        self._waiting.discard(key)
        hard = dict(q.hard)
        probe = ResourceQuota.from_dict({**q.raw, "status": {"hard": hard}})
        now = self.clock.now()
        used: ResourceList = {}
        for inf in informers:
            for obj in inf.indexer.by_index("namespace", q.namespace):
                if matches(probe, obj):
                    used = add(used, _masked(usage(obj, now), hard))
        for r in hard:
            used.setdefault(r, Quantity(0))
        status = {"hard": hard, "used": {k: str(v) for k, v in sorted(used.items())}}
        old = q.raw.get("status") or {}
        if old.get("hard") == status["hard"] and parse_resource_list(old.get("used")) == used:
            return
        raw = dict(q.raw)
        raw["status"] = status
        self.client.update_status(raw)


def _masked(rl: ResourceList, names: dict[str, Any]) -> ResourceList:
    return {k: v for k, v in rl.items() if k in names}

