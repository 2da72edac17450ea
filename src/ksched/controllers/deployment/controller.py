"""The Deployment controller (upstream's ``pkg/controller/deployment/deployment_controller.go``):
watches Deployments, ReplicaSets and (for Recreate) pod deletions, claims the ReplicaSets its
selector matches (adopting orphans, releasing those that no longer match) and dispatches each
sync: a Deployment being deleted only gets its status; a paused one or a scaling event is
scaled proportionally (:mod:`.sync`); the rollback annotation rolls back (:mod:`.rollback`);
otherwise the strategy rolls out (:mod:`.rolling`, :mod:`.recreate`) and the status and
``Progressing`` condition follow (:mod:`.progress`).

Divergence: no periodic resync (a rollout without progress is re-synced at its deadline, as
upstream does besides the resync).
"""

from __future__ import annotations

from typing import Any

from ksched.api.apps import RECREATE, Deployment, ReplicaSet
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.client.record import EventRecorder
from ksched.clock import Clock
from ksched.controllers.controller import Controller
from ksched.controllers.controller_utils import ControllerRefManager
from ksched.controllers.deployment.progress import ProgressMixin
from ksched.controllers.deployment.recreate import RecreateMixin
from ksched.controllers.deployment.rollback import RollbackMixin, rollback_to
from ksched.controllers.deployment.rolling import RollingMixin
from ksched.controllers.deployment.sync import SyncMixin

__all__ = ["DeploymentController"]


def _target(obj: Any) -> Any:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _ref_key(ref: Any) -> tuple[str, str, str] | None:
    return None if ref is None else (ref.kind, ref.name, ref.uid)


class DeploymentController(SyncMixin, RollingMixin, RecreateMixin, ProgressMixin, RollbackMixin, Controller):
    """Keys are ``namespace/name`` of Deployments."""

    name = "deployment"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.d_informer = informers.informer("Deployment")
        self.rs_informer = informers.informer("ReplicaSet")
        self.pod_informer = informers.informer("Pod")
        self.recorder = EventRecorder(client, clock, component="deployment-controller")
        self.d_informer.add_handler(EventHandler(self._enqueue, lambda old, new: self._enqueue(new), self._enqueue))
        self.rs_informer.add_handler(EventHandler(self._rs_added, self._rs_updated, self._rs_deleted))
        self.pod_informer.add_handler(EventHandler(None, None, self._pod_deleted))

    # ---- events ---------------------------------------------------------------------------

    def _enqueue(self, d: Any) -> None:
        self.queue.add(_target(d).key)

    def _resolve(self, namespace: str, ref: Any) -> Deployment | None:
        if ref is None or ref.kind != "Deployment":
            return None
        d = self.d_informer.get(f"{namespace}/{ref.name}")
        if not isinstance(d, Deployment) or d.uid != ref.uid:
            return None
        return d

    def _deployments_for(self, rs: ReplicaSet) -> list[Deployment]:
        """Deployments whose selector matches an orphan ReplicaSet's labels."""
        return [d for d in self.d_informer.indexer.by_index("namespace", rs.namespace)
                if isinstance(d, Deployment) and not d.selector.is_empty() and d.selector.matches(rs.labels)]

    def _rs_added(self, rs: ReplicaSet) -> None:
        if rs.deletion_timestamp is not None:
            self._rs_deleted(rs)
            return
        ref = rs.controller_ref()
        if ref is not None:
            d = self._resolve(rs.namespace, ref)
            if d is not None:
                self.queue.add(d.key)
            return
        for d in self._deployments_for(rs):
            self.queue.add(d.key)

    def _rs_updated(self, old: ReplicaSet, new: ReplicaSet) -> None:
        if old.resource_version == new.resource_version:
            return
        cur_ref, old_ref = new.controller_ref(), old.controller_ref()
        ref_changed = _ref_key(cur_ref) != _ref_key(old_ref)
        if ref_changed and old_ref is not None:
            d = self._resolve(old.namespace, old_ref)
            if d is not None:
                self.queue.add(d.key)
        if cur_ref is not None:
            d = self._resolve(new.namespace, cur_ref)
            if d is not None:
                self.queue.add(d.key)
            return
        if old.labels != new.labels or ref_changed:
            for d in self._deployments_for(new):
                self.queue.add(d.key)

    def _rs_deleted(self, obj: Any) -> None:
        rs = _target(obj)
        d = self._resolve(rs.namespace, rs.controller_ref())
        if d is not None:
            self.queue.add(d.key)

    def _pod_deleted(self, obj: Any) -> None:
        """A Recreate Deployment whose last old pod went away can scale up its new ReplicaSet."""
        pod = _target(obj)
        ref = pod.controller_ref()
        if ref is None or ref.kind != "ReplicaSet":
            return
        rs = self.rs_informer.get(f"{pod.namespace}/{ref.name}")
        if not isinstance(rs, ReplicaSet) or rs.uid != ref.uid:
            return
        d = self._resolve(rs.namespace, rs.controller_ref())
        if d is None or d.strategy_type != RECREATE:
            return
        rs_list = [r for r in self.rs_informer.indexer.by_index("namespace", d.namespace)
                   if isinstance(r, ReplicaSet) and (c := r.controller_ref()) is not None and c.uid == d.uid]
        if not any(self._pod_map(d, rs_list).values()):
            self.queue.add(d.key)

    # ---- sync -----------------------------------------------------------------------------

    def _replica_sets_for(self, d: Deployment) -> list[ReplicaSet]:
        """The ReplicaSets this Deployment controls after claiming (``getReplicaSetsForDeployment``)."""
        rss = sorted((r for r in self.rs_informer.indexer.by_index("namespace", d.namespace)
                      if isinstance(r, ReplicaSet)), key=lambda r: r.name)
        manager = ControllerRefManager(self.client, d, d.selector,
                                       lambda: self.client.get("Deployment", d.namespace, d.name))
        claimed, errors = manager.claim(rss)
        if errors:
            raise errors[0]
        return [r for r in claimed if isinstance(r, ReplicaSet)]

    def _pod_map(self, d: Deployment, rs_list: list[ReplicaSet]) -> dict[str, list[Pod]]:
        """Pods the Deployment selects, by the UID of their ReplicaSet (``getPodMapForDeployment``)."""
        out: dict[str, list[Pod]] = {rs.uid: [] for rs in rs_list}
        for p in self.pod_informer.indexer.by_index("namespace", d.namespace):
            if not isinstance(p, Pod) or not d.selector.matches(p.labels):
                continue
            ref = p.controller_ref()
            if ref is not None and ref.uid in out:
                out[ref.uid].append(p)
        return out

    def sync(self, key: Any) -> None:
        d = self.d_informer.get(key)
        if not isinstance(d, Deployment):
            return
        if d.selector.is_empty():
            self.recorder.event(d, "Warning", "SelectingAll", "Select",
                                "This deployment is selecting all pods. A non-empty selector is required.")
            if d.observed_generation < d.generation:
                self._update_status(d, {**d.status, "observedGeneration": d.generation})
            return
        rs_list = self._replica_sets_for(d)
        if d.deletion_timestamp is not None:
            self._sync_status_only(d, rs_list)
            return
        d = self._check_paused_conditions(d)
        if d.paused:
            self._sync(d, rs_list)
            return
        if rollback_to(d) is not None:
            self._rollback(d, rs_list)
            return
        scaling, d = self._is_scaling_event(d, rs_list)
        if scaling:
            self._sync(d, rs_list)
            return
        if d.strategy_type == RECREATE:
            self._rollout_recreate(d, rs_list, self._pod_map(d, rs_list))
        else:
            self._rollout_rolling(d, rs_list)
