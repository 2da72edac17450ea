"""What the workload controllers share, as upstream's ``pkg/controller/controller_utils.go`` and
``controller_ref_manager.go`` have it: the pod-template hash, pods made from a template with a
controller reference, the order in which surplus pods are deleted (``ActivePodsWithRanks``),
slow-start batches, expectations, pod readiness and availability, and claiming objects for a
controller (adopting orphans that match its selector, releasing those that no longer do).

Divergences:

* ``compute_hash`` hashes a canonical JSON form of the template (Go's deep print of the struct
  cannot be reproduced), so hashes -- and the ReplicaSet and revision names made from them --
  have upstream's format but not its values. The JSON leaves out what Go's semantic equality
  ignores (nulls, empty maps and lists, false, ""), so templates that upstream deems equal hash
  equally.
* Slow-start batches run their calls one after another (upstream: concurrently per batch).
* Go's sorts are unstable; ties keep their input order here (inputs are sorted by name first
  wherever the order shows).
"""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ksched.api.errors import ApiError, Invalid, NotFound
from ksched.api.labels import LabelSelector
from ksched.api.meta import KubeObject, format_time, parse_time
from ksched.api.pod import Pod
from ksched.client.informer import SharedInformer
from ksched.client.record import EventRecorder
from ksched.clock import Clock

__all__ = [
    "EXPECTATIONS_TIMEOUT",
    "SLOW_START_INITIAL_BATCH_SIZE",
    "ControllerRefManager",
    "Expectations",
    "PodControl",
    "active_pods_ranked",
    "add_owner_index",
    "available_at",
    "by_creation",
    "canonical_json",
    "compute_hash",
    "controller_ref",
    "fnv32",
    "fnv32a",
    "is_pod_active",
    "is_pod_available",
    "is_pod_ready",
    "is_pod_terminating",
    "owned_pods",
    "pod_ready_time",
    "pod_from_template",
    "safe_encode_string",
    "semantic",
    "slow_start_batch",
]

SLOW_START_INITIAL_BATCH_SIZE = 1
# How long expectations wait for the informer to see a controller's writes (ExpectationsTimeout).
EXPECTATIONS_TIMEOUT = 5 * 60.0
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"

_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_OWNER_INDEX = "controller-uid"


# ---------------------------------------------------------------- hashing


def safe_encode_string(s: str) -> str:
    """apimachinery's ``rand.SafeEncodeString``: each character mapped into an alphabet without
    vowels (decimal digits become ``4 5 6 7 8 9 b c d f``)."""
    return "".join(_ALPHANUMS[ord(c) % len(_ALPHANUMS)] for c in s)


def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def fnv32(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = (h * 0x01000193) & 0xFFFFFFFF
        h ^= b
    return h


def semantic(x: Any) -> Any:
    """``x`` without what Go's semantic equality cannot see: nulls, empty maps and lists, false
    and "" (the zero values an omitempty field drops), recursively."""
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            v = semantic(v)
            if v is None or v == {} or v == [] or v is False or v == "":
                continue
            out[k] = v
        return out
    if isinstance(x, list):
        return [semantic(v) for v in x]
    return x


def canonical_json(x: Any) -> bytes:
    return json.dumps(semantic(x), sort_keys=True, separators=(",", ":")).encode()


def compute_hash(template: dict[str, Any], collision_count: int | None) -> str:
    """The ``pod-template-hash`` of a template (``controller.ComputeHash``): FNV-32a over the
    template, then over the collision count (4 little-endian bytes padded to 8), as decimal
    digits safe-encoded."""
    data = canonical_json(template)
    if collision_count is not None:
        data += (collision_count & 0xFFFFFFFF).to_bytes(4, "little") + b"\0\0\0\0"
    return safe_encode_string(str(fnv32a(data)))


# ---------------------------------------------------------------- pods


def is_pod_ready(pod: Pod) -> bool:
    c = pod.condition("Ready")
    return c is not None and c.get("status") == "True"


def pod_ready_time(pod: Pod) -> float | None:
    """When the pod turned ready (its Ready condition's lastTransitionTime), None if not ready."""
    c = pod.condition("Ready")
    if c is None or c.get("status") != "True":
        return None
    return parse_time(c.get("lastTransitionTime"))


def is_pod_available(pod: Pod, min_ready_seconds: int, now: float) -> bool:
    """Ready for at least ``min_ready_seconds`` (podutil.IsPodAvailable: strictly before now)."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds == 0:
        return True
    t = pod_ready_time(pod)
    return t is not None and t + min_ready_seconds < now


def available_at(pod: Pod, min_ready_seconds: int) -> float | None:
    """When a ready pod turns available (None when it is not ready)."""
    t = pod_ready_time(pod)
    return None if t is None else t + min_ready_seconds


def is_pod_active(pod: Pod) -> bool:
    """Neither finished nor being deleted (``IsPodActive``)."""
    return not pod.is_terminal and pod.deletion_timestamp is None


def is_pod_terminating(pod: Pod) -> bool:
    """Being deleted and not finished (``FilterTerminatingPods``)."""
    return not pod.is_terminal and pod.deletion_timestamp is not None


def controller_ref(owner: KubeObject) -> dict[str, Any]:
    """``metav1.NewControllerRef``: the owner as the controlling, deletion-blocking owner."""
    return {"apiVersion": owner.API_VERSION, "kind": owner.KIND, "name": owner.name, "uid": owner.uid,
            "controller": True, "blockOwnerDeletion": True}


def pods_prefix(controller_name: str) -> str:
    """``getPodsPrefix``: ``<name>-`` unless that is too long for a generateName."""
    prefix = f"{controller_name}-"
    return prefix if len(prefix) <= 253 else controller_name


def pod_from_template(template: dict[str, Any], owner: KubeObject, ref: dict[str, Any] | None) -> dict[str, Any]:
    """A pod manifest from a pod template (``GetPodFromTemplate``): the template's labels,
    annotations, finalizers and spec, ``generateName: <owner>-``, the controller reference."""
    tmd = template.get("metadata") or {}
    md: dict[str, Any] = {"generateName": pods_prefix(owner.name), "namespace": owner.namespace}
    for k in ("labels", "annotations", "finalizers"):
        if tmd.get(k):
            md[k] = copy.deepcopy(tmd[k])
    if ref is not None:
        md["ownerReferences"] = [dict(ref)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": copy.deepcopy(template.get("spec") or {})}


def by_creation(objs: Iterable[KubeObject]) -> list[KubeObject]:
    """Oldest first, ties by name (``ReplicaSetsByCreationTimestamp`` and its kin)."""
    return sorted(objs, key=lambda o: (o.creation_timestamp or 0.0, o.name))


def _deletion_cost(pod: Pod) -> int:
    v = pod.annotations.get(POD_DELETION_COST)
    try:
        n = int(v) if v is not None else 0
    except ValueError:
        return 0
    return n if -(2**31) <= n < 2**31 else 0


def _log2_rank(t: float, now: float) -> int:
    d = round((now - t) * 1e9)  # nanoseconds, as Go's time.Duration
    return -1 if d <= 0 else math.floor(math.log2(d))


def _max_restarts(pod: Pod) -> tuple[int, int]:
    """The highest restart count of the pod's regular containers, then of its sidecars."""
    st = pod.raw.get("status") or {}
    regular = max((int(c.get("restartCount") or 0) for c in st.get("containerStatuses") or ()), default=0)
    sidecars = {c.name for c in pod.init_containers if c.is_sidecar}
    side = max((int(c.get("restartCount") or 0) for c in st.get("initContainerStatuses") or ()
                if c.get("name") in sidecars), default=0)
    return regular, side


_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


def _compare_ranked(a: tuple[Pod, int], b: tuple[Pod, int], now: float) -> int:
    """``ActivePodsWithRanks.Less`` as a comparison: negative when ``a`` is deleted first."""
    pa, ra = a
    pb, rb = b
    # 1. Unassigned < assigned.
    if pa.node_name != pb.node_name and (not pa.node_name or not pb.node_name):
        return -1 if not pa.node_name else 1
    # 2. Pending < Unknown < Running.
    oa, ob = _PHASE_ORDINAL.get(pa.phase, 0), _PHASE_ORDINAL.get(pb.phase, 0)
    if oa != ob:
        return -1 if oa < ob else 1
    # 3. Not ready < ready.
    ready_a, ready_b = is_pod_ready(pa), is_pod_ready(pb)
    if ready_a != ready_b:
        return -1 if not ready_a else 1
    # 4. Lower pod-deletion-cost < higher.
    ca, cb = _deletion_cost(pa), _deletion_cost(pb)
    if ca != cb:
        return -1 if ca < cb else 1
    # 5. Doubled up (more related pods on the same node) < not.
    if ra != rb:
        return -1 if ra > rb else 1
    # 6. Ready for less time < more (log2 buckets, LogarithmicScaleDown), ties by UID.
    if ready_a and ready_b:
        ta, tb = pod_ready_time(pa), pod_ready_time(pb)
        if ta != tb:
            c = _newer_first(ta, tb, pa, pb, now)
            if c:
                return c
    # 7. Higher restart count < lower.
    xa, xb = _max_restarts(pa), _max_restarts(pb)
    if xa != xb:
        return -1 if xa > xb else 1
    # 8. Newer < older (log2 buckets), ties by UID; no creation time counts as newest.
    if pa.creation_timestamp != pb.creation_timestamp:
        return _newer_first(pa.creation_timestamp, pb.creation_timestamp, pa, pb, now)
    return 0


def _newer_first(ta: float | None, tb: float | None, pa: Pod, pb: Pod, now: float) -> int:
    if ta is None or tb is None:
        # afterOrZero: a zero time sorts first.
        if (ta is None) == (tb is None):
            return 0
        return -1 if ta is None else 1
    diff = _log2_rank(ta, now) - _log2_rank(tb, now)
    if diff == 0:
        if pa.uid == pb.uid:
            return 0
        return -1 if pa.uid < pb.uid else 1
    return -1 if diff < 0 else 1


def active_pods_ranked(pods: Sequence[Pod], related: Iterable[Pod], now: float) -> list[Pod]:
    """``pods`` in deletion order: ranked by how many active ``related`` pods (those of all
    ReplicaSets of the same owner) share their node (``getPodsRankedByRelatedPodsOnSameNode``),
    then sorted by ``ActivePodsWithRanks``."""
    on_node: dict[str, int] = {}
    for p in related:
        if is_pod_active(p):
            on_node[p.node_name] = on_node.get(p.node_name, 0) + 1
    ranked = [(p, on_node.get(p.node_name, 0)) for p in pods]
    cmp = functools.partial(_compare_ranked, now=now)
    ranked.sort(key=functools.cmp_to_key(lambda a, b: cmp(a, b)))
    return [p for p, _ in ranked]


# ---------------------------------------------------------------- batches and expectations


def slow_start_batch(count: int, initial_batch_size: int, fn: Callable[[int], Any],
                     max_batch: int | None = None) -> tuple[int, ApiError | None]:
    """Call ``fn(i)`` for ``i < count`` in batches of 1, 2, 4, ... (``slowStartBatch``; at most
    ``max_batch`` each), stopping after the first batch in which a call fails. Returns
    (successes, the first error)."""
    successes = 0
    pos = 0
    batch = min(count, initial_batch_size)
    while batch > 0:
        first_err: ApiError | None = None
        for i in range(pos, pos + batch):
            try:
                fn(i)
                successes += 1
            except ApiError as e:
                if first_err is None:
                    first_err = e
        if first_err is not None:
            return successes, first_err
        pos += batch
        batch = min(2 * batch, count - pos)
        if max_batch is not None:
            batch = min(batch, max_batch)
    return successes, None


class Expectations:
    """``ControllerExpectations`` with ``UIDTrackingControllerExpectations``' deletion keys: how
    many creations (and which deletions) a controller waits to see in its informer before it
    trusts its cache again. Expectations older than EXPECTATIONS_TIMEOUT count as met."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._adds: dict[str, int] = {}
        self._dels: dict[str, set[str]] = {}
        self._deleting: dict[str, int] = {}
        self._since: dict[str, float] = {}

    def satisfied(self, key: str) -> bool:
        if key not in self._since:
            return True
        if self._adds.get(key, 0) <= 0 and self._deleting.get(key, 0) <= 0:
            return True
        return self.clock.now() - self._since[key] > EXPECTATIONS_TIMEOUT

    def expect(self, key: str, adds: int = 0, deletes: Iterable[str] = ()) -> None:
        dels = set(deletes)
        self._adds[key] = adds
        self._dels[key] = dels
        self._deleting[key] = len(dels)
        self._since[key] = self.clock.now()

    def expect_deletions(self, key: str, count: int) -> None:
        """Deletions counted, not tracked by pod (the DaemonSet controller's SetExpectations)."""
        self._deleting[key] = count

    def creation_observed(self, key: str) -> None:
        if key in self._adds:
            self._adds[key] -= 1

    def lower(self, key: str, adds: int = 0, deletes: int = 0) -> None:
        if key in self._adds:
            self._adds[key] -= adds
        if key in self._deleting:
            self._deleting[key] -= deletes

    def deletion_observed(self, key: str, pod_key: str | None = None) -> None:
        """A deletion seen; with ``pod_key`` only if it was one of those expected."""
        if key not in self._deleting:
            return
        if pod_key is not None:
            dels = self._dels.get(key)
            if dels is None or pod_key not in dels:
                return
            dels.discard(pod_key)
        self._deleting[key] -= 1

    def delete(self, key: str) -> None:
        for d in (self._adds, self._dels, self._deleting, self._since):
            d.pop(key, None)


# ---------------------------------------------------------------- writes


class PodControl:
    """Creating and deleting a controller's pods with upstream's events (``RealPodControl``)."""

    def __init__(self, client: Any, recorder: EventRecorder) -> None:
        self.client = client
        self.recorder = recorder
        self._owned = {"owned": True} if hasattr(client, "store") else {}

    def create_pod(self, template: dict[str, Any], owner: KubeObject, ref: dict[str, Any] | None,
                   mutate: Callable[[dict[str, Any]], None] | None = None) -> Pod:
        raw = pod_from_template(template, owner, ref)
        if mutate is not None:
            mutate(raw)
        if not raw["metadata"].get("labels"):
            raise Invalid("unable to create pods, no labels", kind="Pod")
        try:
            pod = self.client.create(raw, **self._owned)
        except ApiError as e:
            self.recorder.event(owner, "Warning", "FailedCreate", "Create", f"Error creating: {e.message}")
            raise
        self.recorder.event(owner, "Normal", "SuccessfulCreate", "Create", f"Created pod: {pod.name}")
        assert isinstance(pod, Pod)
        return pod

    def delete_pod(self, namespace: str, name: str, owner: KubeObject) -> None:
        try:
            self.client.delete("Pod", namespace, name)
        except NotFound:
            raise
        except ApiError as e:
            self.recorder.event(owner, "Warning", "FailedDelete", "Delete", f"Error deleting: {e.message}")
            raise
        self.recorder.event(owner, "Normal", "SuccessfulDelete", "Delete", f"Deleted pod: {name}")


class ControllerRefManager:
    """Claims objects for one controller (``BaseControllerRefManager.ClaimObject``): keeps those
    it controls that still match, releases those that no longer do, adopts matching orphans. The
    first adoption re-reads the controller from the API and refuses if it is gone or being
    deleted (``RecheckDeletionTimestamp``)."""

    def __init__(self, client: Any, controller: KubeObject, selector: LabelSelector,
                 fresh: Callable[[], KubeObject]) -> None:
        self.client = client
        self.controller = controller
        self.selector = selector
        self._fresh = fresh
        self._can_adopt: ApiError | bool | None = None

    def _check_adopt(self) -> None:
        if self._can_adopt is None:
            try:
                fresh = self._fresh()
            except ApiError as e:
                self._can_adopt = e
            else:
                c = self.controller
                if fresh.uid != c.uid:
                    self._can_adopt = NotFound(f"original {c.namespace}/{c.name} is gone: got uid {fresh.uid}, "
                                               f"wanted {c.uid}")
                elif fresh.deletion_timestamp is not None:
                    self._can_adopt = NotFound(f"{c.namespace}/{c.name} has just been deleted at "
                                               f"{format_time(fresh.deletion_timestamp)}")
                else:
                    self._can_adopt = True
        if isinstance(self._can_adopt, ApiError):
            raise self._can_adopt

    def claim(self, objs: Iterable[KubeObject],
              filters: Sequence[Callable[[KubeObject], bool]] = ()) -> tuple[list[KubeObject], list[ApiError]]:
        """The objects this controller now controls, and the errors of failed adoptions/releases."""
        claimed: list[KubeObject] = []
        errors: list[ApiError] = []
        c = self.controller

        def match(o: KubeObject) -> bool:
            return self.selector.matches(o.labels) and all(f(o) for f in filters)

        for o in objs:
            ref = o.controller_ref()
            try:
                if ref is not None:
                    if ref.uid != c.uid:
                        continue  # someone else's
                    if match(o):
                        claimed.append(o)
                    elif c.deletion_timestamp is None:
                        self._release(o)
                    continue
                if c.deletion_timestamp is not None or not match(o) or o.deletion_timestamp is not None:
                    continue
                if c.namespace and c.namespace != o.namespace:
                    continue
                self._check_adopt()
                claimed.append(self._adopt(o))
            except NotFound:
                continue
            except ApiError as e:
                errors.append(e)
        return claimed, errors

    def _adopt(self, o: KubeObject) -> KubeObject:
        patch = {"metadata": {"ownerReferences": [controller_ref(self.controller)], "uid": o.uid}}
        return self.client.patch(o.KIND, o.namespace, o.name, patch,  # type: ignore[no-any-return]
                                 "application/strategic-merge-patch+json")

    def _release(self, o: KubeObject) -> None:
        patch = {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": self.controller.uid}],
                              "uid": o.uid}}
        try:
            self.client.patch(o.KIND, o.namespace, o.name, patch, "application/strategic-merge-patch+json")
        except Invalid:
            pass  # no such reference any more, or a new object of the same name: nothing to release


# ---------------------------------------------------------------- informers


def _owner_index(obj: KubeObject) -> list[str]:
    ref = obj.controller_ref()
    return [ref.uid] if ref is not None else [f"orphan/{obj.namespace}"]


def add_owner_index(informer: SharedInformer) -> None:
    """Index an informer's objects by controller UID, orphans by namespace (``PodControllerUIDIndex``
    and ``OrphanPodIndexKey``)."""
    if not informer.indexer.has_indexer(_OWNER_INDEX):
        informer.indexer.add_indexer(_OWNER_INDEX, _owner_index)


def owned_pods(informer: SharedInformer, owner: KubeObject, include_orphans: bool = True) -> list[Pod]:
    """Pods controlled by ``owner`` and (optionally) the orphans of its namespace
    (``FilterPodsByOwner``), sorted by name."""
    out = informer.indexer.by_index(_OWNER_INDEX, owner.uid)
    if include_orphans:
        out = out + informer.indexer.by_index(_OWNER_INDEX, f"orphan/{owner.namespace}")
    return sorted((p for p in out if isinstance(p, Pod) and p.namespace == owner.namespace), key=lambda p: p.name)
