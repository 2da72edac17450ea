"""The embedded API store: a versioned, thread-safe object store with watch.

Semantics follow kube-apiserver for the kinds ksched knows:

* one monotonic ``resourceVersion`` across all kinds; optimistic concurrency on update;
* watch from a resourceVersion with ADDED / MODIFIED / DELETED and BOOKMARK events, bounded
  history per kind and ``410 Gone`` for a version older than the history;
* admission on create (``admission.py``: defaults, LimitRanger, ServiceAccount, Priority,
  DefaultTolerationSeconds, RuntimeClass, ResourceQuota with the quota charged in the same step),
  per-kind create/update behaviour (``strategy.py``: Service addresses, Secret ``stringData``,
  LimitRange defaults, immutable fields), validation with field paths; a rejected object is
  never stored;
* the kinds of a per-store :class:`Scheme`: CustomResourceDefinitions add and remove custom kinds
  as they are created and deleted (their objects are pruned, defaulted and validated against the
  CRD's schema; deleting a CRD deletes its objects);
* objects exported from another cluster (``create(..., existing=True)``) keep their uid,
  creation time and status: a bound pod stays bound;
* ``pods/binding`` (with the conflict resolver), ``pods/status``, ``pods/eviction``
  (PodDisruptionBudget-aware), graceful deletion of bound pods, finalizers;
* ``after_write`` hooks, where a simulation runs its controllers (which are clients of the
  store like any other: see ``ksched.controllers``).

Stored objects are immutable: every change makes a new object and a new manifest.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import os
import random
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable
from typing import Any

from ksched.api.accounting import NodeAccounting
from ksched.api.apiextensions import (
    CRD_CLEANUP_FINALIZER,
    CustomObject,
    CustomResourceDefinition,
    crd_status,
    validate_crd,
)
from ksched.api.deviceconflicts import DeviceAllocations, slice_capacity
from ksched.api.errors import (
    AlreadyExists,
    BadRequest,
    BindingConflict,
    Conflict,
    FieldError,
    Forbidden,
    InternalError,
    Invalid,
    NotFound,
    TooManyRequests,
)
from ksched.api.event import CompactEvent, Event, recorder_layout
from ksched.api.jsoncopy import deep_copy
from ksched.api.kinds import UnknownKindError
from ksched.api.labels import FieldSelector, LabelSelector
from ksched.api.meta import KubeObject, format_time, parse_time
from ksched.api.namespace import Namespace
from ksched.api.node import Node
from ksched.api.pdb import PodDisruptionBudget, set_disruption_allowed_condition
from ksched.api.pod import Pod
from ksched.api.podconflicts import BoundPods, pod_conflict
from ksched.api.priorityclass import PriorityClass, system_priority_classes
from ksched.api.resource import ResourceClaim, ResourceSlice
from ksched.api.resourcequota import ResourceQuota
from ksched.api.resources import qos_class
from ksched.api.scheme import Scheme, resource_name
from ksched.api.storage import PersistentVolumeClaim
from ksched.api.validation import LOADED_SPEC_KEY, validate_update
from ksched.api.watch import ADDED, DELETED, MODIFIED
from ksched.apiserver.admission import (
    ADMISSION_KINDS,
    admission_key,
    admit_pod,
    admit_priority_class,
    check_plugins,
    default_pod_status,
    forbidden,
    validate_admission,
)
from ksched.apiserver.batch import PREPARE_FOR_CREATE, UPDATE_STRATEGY
from ksched.apiserver.deletion import DeleteOptions, gc_finalizers
from ksched.apiserver.fields import check_field_selector, field_values
from ksched.apiserver.ipallocator import ServiceAllocator
from ksched.apiserver.patch import MERGE_PATCH, PatchError, apply_patch, merge_patch
from ksched.apiserver.resourcequota import QuotaRefused, check_request
from ksched.apiserver.strategy import prepare_for_create, prepare_for_update
from ksched.apiserver.watch import Watch, WatchCache
from ksched.boundedcache import BoundedCache
from ksched.clock import Clock, RealClock

__all__ = ["Store"]

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Metadata an object exported from another cluster keeps when it is created here.
_EXISTING_KEEPS = ("uid", "creationTimestamp", "generation")
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MAX_GENERATED_BASE = 58
# NamespaceLifecycle admission: these may not be deleted.
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")
# Built-in kinds whose metadata.generation counts changes of their spec.
_GENERATION_KINDS = frozenset(("Pod", "PodDisruptionBudget", "CustomResourceDefinition", "Deployment", "ReplicaSet",
                               "StatefulSet", "DaemonSet"))
# Kinds whose status subresource also writes annotations (the apps/v1 status strategies reset only
# the spec, so the deployment controller records its revision annotation with the status).
_STATUS_WRITES_ANNOTATIONS = frozenset(("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"))
# Kinds whose generation also counts changes of their annotations (a Deployment copies them to its
# ReplicaSets).
_GENERATION_COUNTS_ANNOTATIONS = frozenset(("Deployment",))
# Kinds whose creation changes nothing their validation reads (no admission or create strategy
# of theirs does): a manifest validated as given is not validated again.
_CREATED_AS_GIVEN = frozenset(("Event",))
# Pod spec fields an update may change (upstream's ValidatePodUpdate allows these, roughly).
_POD_MUTABLE_SPEC = frozenset(("activeDeadlineSeconds", "tolerations", "schedulingGates",
                               "terminationGracePeriodSeconds"))


def _group(cls: type[KubeObject]) -> str:
    return cls.API_VERSION.rpartition("/")[0]


def _parse(cls: type[KubeObject], raw: dict[str, Any], same_spec_as: Pod | None = None,
           admitted_from: Pod | None = None, like: Pod | None = None) -> KubeObject:
    """The typed object of a validated manifest; a shape validation does not check (a status of
    the wrong type) is refused as invalid rather than crashing the write. ``same_spec_as``: a
    stored pod with the same metadata and spec (a status write), whose parsed parts are shared.
    ``admitted_from``: the caller's parse of this very manifest before admission left its
    containers as they were (``Pod.admitted``). ``like``: a stored pod with the very same spec
    object, namespace and labels (``Pod.like``)."""
    try:
        if like is not None:
            return like.like(raw)
        if same_spec_as is not None:
            return same_spec_as.with_status(raw)
        if admitted_from is not None:
            return admitted_from.admitted(raw)
        return cls.from_dict(raw)
    except (TypeError, AttributeError, ValueError) as e:
        md = raw.get("metadata") or {}
        raise Invalid.of(cls.KIND, str(md.get("name") or ""), [FieldError("", f"cannot parse: {e}")],
                         _group(cls)) from e


class _Lookup:
    """What admission reads of the store (called under the store's lock)."""

    __slots__ = ("store",)

    def __init__(self, store: Store) -> None:
        self.store = store

    def list(self, kind: str, namespace: str) -> list[KubeObject]:
        bucket = self.store._objects.get(kind) or {}
        if not namespace:
            return list(bucket.values())
        return [o for o in bucket.values() if o.namespace == namespace]

    def get(self, kind: str, namespace: str, name: str) -> KubeObject | None:
        bucket = self.store._objects.get(kind) or {}
        return bucket.get(f"{namespace}/{name}" if namespace else name)
def scale_of(obj: KubeObject) -> dict[str, Any]:
    """The autoscaling/v1 Scale of a Deployment, ReplicaSet or StatefulSet (status.selector in
    its string form, requirements sorted by key as labels.Selector prints them)."""
    md = obj.raw.get("metadata") or {}
    spec = obj.raw.get("spec") or {}
    status = obj.raw.get("status") or {}
    try:
        sel = LabelSelector.from_dict(spec.get("selector"))
        selector = str(LabelSelector(tuple(sorted(sel.requirements, key=lambda r: r.key))))
    except (ValueError, AttributeError, TypeError):
        selector = ""
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in md},
            "spec": {"replicas": spec.get("replicas", 1)},
            "status": {"replicas": int(status.get("replicas") or 0), "selector": selector}}


def _with_meta(raw: dict[str, Any], **fields: Any) -> dict[str, Any]:
    md = dict(raw.get("metadata") or {})
    for k, v in fields.items():
        if v is None:
            md.pop(k, None)
        else:
            md[k] = v
    out = dict(raw)
    out["metadata"] = md
    return out


_SHORT_UID = 1 << 48


def _uid_of(n: int) -> str:
    """The deterministic uid of counter ``n``: its 32 hex digits in a UUID's five groups (the
    reference for :meth:`Store._new_uid`'s shortcut below 2^48)."""
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# Fast paths of the pod write path, each with its reference behind the flag (False):
# ``Store.bind`` in one body with the node ledger read once (:meth:`Store._bind_fast`).
FAST_BIND = True
# ``Store._patch_pod_status`` (the kubelet's status writes) committed by its own steps, not the
# generic :meth:`Store._commit`.
FAST_STATUS_COMMIT = True
# ``Store.create_recorded_event`` with the uid, creation stamp and version steps inline.
FAST_RECORDED_EVENT = True


class Store:
    """The embedded API store. Thread-safe; all methods may raise :class:`ApiError`."""

    def __init__(self, clock: Clock | None = None, *, history: int = 100_000, conflict_resolver: bool = True,
                 auto_create_namespaces: bool = False, disable_admission_plugins: Iterable[str] = (),
                 start_rv: int = 0, name_seed: int = 0, delivered_history: int | None = None) -> None:
        """``history``: changes kept per kind for watches from an older resourceVersion;
        ``delivered_history``: when set, of the changes every open watch has taken, only the
        last this many are kept (``WatchCache._trim``: a simulation, whose informers never watch
        from an old version)."""
        self.clock: Clock = clock or RealClock()
        self.conflict_resolver = conflict_resolver
        self.auto_create_namespaces = auto_create_namespaces
        self.disabled_admission = check_plugins(disable_admission_plugins)
        # The kinds this store serves: the built-in ones and those its CRDs define.
        self.scheme = Scheme()
        self.services = ServiceAllocator()
        self._lookup = _Lookup(self)
        self._lock = threading.RLock()
        self._rv = start_rv
        self._objects: dict[str, dict[str, KubeObject]] = {c.KIND_KEY: {} for c in self.scheme.classes()}
        # Each kind's keys in order, with the version they were sorted at (paged lists).
        self._key_order: dict[str, tuple[int, int, list[str]]] = {}
        self.watch_cache = WatchCache(list(self._objects), self._lock, history, start_rv, delivered_history)
        self.accounting = NodeAccounting()
        # The resolver's checks between pods (anti-affinity, spread, ReadWriteOncePod): off
        # unless several schedulers share this server (enable_pod_conflicts).
        self.pod_conflicts: BoundPods | None = None
        self.device_conflicts: DeviceAllocations | None = None  # with them: devices held by claims
        self._uid_counter = itertools.count(1)
        self.deterministic_uids = self.clock.virtual
        # generateName suffixes: reproducible for a seed on a virtual clock, random otherwise.
        self._name_rng: random.Random = random.Random(name_seed) if self.deterministic_uids else random.SystemRandom()
        # Write hooks (persistence): called with (event type, kind, object, rv) under the lock,
        # before the change is applied or sent to any watch.
        self.on_commit: list[Callable[[str, str, KubeObject, int], None]] = []
        self._terminating: dict[str, float] = {}  # pod key -> deletion deadline
        # Called after each write method returns its change (outside the lock): the simulation
        # runs its controllers there, so they react before the writer continues.
        self.after_write: list[Callable[[], None]] = []
        # Events handed over as built and valid (the event recorder's) are stored without the
        # generic create steps, none of which changes them (:meth:`_create_event`); False: the
        # generic path (the reference).
        self.direct_events = True
        # ... and, laid out as the event recorder builds them, their compact stored form built
        # from that layout (:meth:`CompactEvent.of_recorded`); False: typed first, then made
        # compact (the reference).
        self.direct_compact_events = True
        # ... and the recorder's new Events handed over as their values, no manifest built
        # (:meth:`create_recorded_event`); False: declined, the recorder's manifest through
        # ``create`` (the reference).
        self.direct_recorded_events = True
        # A pod's status handed over as a merge patch of plain values (the kubelet's) is written
        # without the generic patch and update steps, none of which changes it
        # (:meth:`_patch_pod_status`); False: the generic path (the reference).
        self.direct_pod_status = True
        # A binding committed by its own steps (:meth:`_commit_binding`: the ledger charged
        # with ``add``, no dispatch on the kind); False: the generic :meth:`_commit` (the
        # reference).
        self.direct_binding_commit = True
        # ... and the recorder's new Events (:meth:`create_recorded_event`) by theirs: hooks, the
        # bucket, the watch cache; False: the generic :meth:`_commit` (the reference).
        self.direct_event_commit = True

        # A validated Pod handed over (the loader's) gives its parse (:meth:`create`); False:
        # its manifest is parsed again as any other's (the reference).
        self.share_loaded_parse = True
        # A loaded pod whose spec equals one admitted before (admission.admission_key), while
        # no object admission reads was written since, gets that admitted spec (one dict for
        # the pods of a template) instead of being admitted again (:meth:`_admit_pod`); False:
        # every pod admitted (the reference).
        self.share_admitted_specs = True
        self._admission_writes = 0  # writes of ADMISSION_KINDS' objects
        # A new pod's kind without the scheme's lookup (``kind: Pod`` is always the built-in
        # Pod: ``Scheme.resolve`` looks the built-in kinds up first), and a loaded pod stored
        # with the admitted spec of the earlier pod it shares its parse with (same namespace,
        # no admission kind written since) is not asked ``validate_admission`` again: it reads
        # only the spec, the namespace and those kinds, and that pod passed it (node11);
        # False: both for every pod (the reference).
        self.template_create = True
        # A Node validated as given (``validated=True``: the loader's) is not validated again:
        # its create changes nothing validation reads but dropping its namespace and the
        # server-set fields (resourceVersion, uid, deletion), which adds no error (node11);
        # False: validated again (the reference).
        self.nodes_as_given = True
        # Key -> [the writes count then, the admitted spec, the first pod stored with it].
        self._admitted_specs: BoundedCache[tuple[Any, ...], list[Any]] = BoundedCache(4096)
        self._event_time: tuple[str, float | None] = ("", None)
        # The PodScheduled condition of the last instant's bindings, shared by them
        # (:meth:`_scheduled_condition`); False: one per binding (the reference).
        self.share_status_values = True
        self._scheduled_at: tuple[str, dict[str, Any]] = ("", {})
        with self._lock:
            for ns in DEFAULT_NAMESPACES:
                self._create_unlocked({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            for pc in system_priority_classes():
                self._create_unlocked(pc)

    # ------------------------------------------------------------------ basics

    @property
    def resource_version(self) -> int:
        return self._rv

    def _new_uid(self) -> str:
        if self.deterministic_uids:
            n = next(self._uid_counter)
            if n < _SHORT_UID:  # (every counter a run reaches: the first four groups are zeros)
                return f"00000000-0000-0000-0000-{n:012x}"
            return _uid_of(n)
        # A random (version 4) UUID, formatted directly (uuid.uuid4() builds a UUID object first).
        h = os.urandom(16).hex()
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"

    def _resolve_kind(self, kind: str | type[KubeObject]) -> type[KubeObject]:
        cls = self.scheme.resolve(kind)
        if cls is None:
            raise NotFound(f'the server could not find the requested resource (kind "{kind}")')
        return cls
    def _generate_name(self, cls: type[KubeObject], md: dict[str, Any]) -> str:
        """metadata.generateName: the base (cut to 58 characters) and five random characters from
        upstream's alphabet (``apiserver/pkg/storage/names``); a name taken already is generated
        again, up to eight times, as the API server retries."""
        base = str(md["generateName"])[:_MAX_GENERATED_BASE]
        ns = (md.get("namespace") or "default") if cls.NAMESPACED else ""
        bucket = self._bucket(cls)
        name = ""
        for _ in range(8):
            name = base + "".join(self._name_rng.choice(_NAME_ALPHABET) for _ in range(5))
            if self._key(cls, ns, name) not in bucket:
                break
        return name

    def _bucket(self, cls: type[KubeObject]) -> dict[str, KubeObject]:
        return self._objects[cls.KIND_KEY]

    @staticmethod
    def _key(cls: type[KubeObject], namespace: str, name: str) -> str:
        return f"{namespace}/{name}" if cls.NAMESPACED else name

    def _commit(self, cls: type[KubeObject], etype: str, old: KubeObject | None, new: KubeObject | None,
                rv: int) -> None:
        kind = cls.KIND_KEY
        obj = new if new is not None else old
        assert obj is not None
        # Hooks (persistence) first: no watcher or reader sees a version before it is durable,
        # and a write that cannot be persisted (the hook raises) changes nothing.
        for hook in self.on_commit:
            hook(etype, kind, obj, rv)
        bucket = self._objects[kind]
        if kind in ADMISSION_KINDS:
            self._admission_writes += 1
        if etype == DELETED:
            bucket.pop(obj.key, None)
        else:
            bucket[obj.key] = obj  # type: ignore[assignment]
        if kind == "Pod":
            if etype != DELETED and obj.deletion_timestamp is not None:
                self._terminating[obj.key] = obj.deletion_timestamp
            elif self._terminating:
                self._terminating.pop(obj.key, None)
            self.accounting.update(old if isinstance(old, Pod) else None,  # type: ignore[arg-type]
                                   new if isinstance(new, Pod) and etype != DELETED else None)  # type: ignore[arg-type]
            if self.pod_conflicts is not None:
                self.pod_conflicts.update(old if isinstance(old, Pod) else None,  # type: ignore[arg-type]
                                          new if isinstance(new, Pod) and etype != DELETED else None)  # type: ignore[arg-type]
        elif kind == "ResourceClaim" and self.device_conflicts is not None:
            self.device_conflicts.update(old, new if etype != DELETED else None)
        elif kind == "Service":
            self.services.observe(old, new if etype != DELETED else None)
        self.watch_cache.commit(kind, etype, old, new, rv)

    def _written(self) -> None:
        for hook in self.after_write:
            hook()

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def now(self) -> float:
        return self.clock.now()

    # ------------------------------------------------------------------ reads

    def get(self, kind: str | type[KubeObject], namespace: str, name: str) -> KubeObject:
        cls = self._resolve_kind(kind)
        with self._lock:
            obj = self._bucket(cls).get(self._key(cls, namespace, name))
        if obj is None:
            raise NotFound.of(cls.PLURAL, name, _group(cls))
        return obj

    def try_get(self, kind: str | type[KubeObject], namespace: str, name: str) -> KubeObject | None:
        cls = self._resolve_kind(kind)
        with self._lock:
            return self._bucket(cls).get(self._key(cls, namespace, name))

    def list(self, kind: str | type[KubeObject], namespace: str | None = None,
             label_selector: LabelSelector | None = None, field_selector: FieldSelector | None = None,
             limit: int = 0, continue_token: str = "") -> tuple[list[KubeObject], int, str]:
        """Objects (sorted by key), the list's resourceVersion and a continue token (or "")."""
        cls = self._resolve_kind(kind)
        check_field_selector(cls.KIND_KEY, field_selector)
        start = ""
        list_rv: int | None = None
        if continue_token:
            try:
                tok = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                start = tok["start"]
                list_rv = int(tok["rv"])
            except (ValueError, KeyError, TypeError) as e:
                raise BadRequest(f"invalid continue token: {e}") from e
        with self._lock:
            rv = self._rv if list_rv is None else list_rv
            objs = self._bucket(cls)
            if limit or continue_token:
                keys = self._sorted_keys(cls.KIND_KEY, objs)
                first = bisect_right(keys, start) if start else 0
            else:
                keys, first = list(objs), 0
            out: list[KubeObject] = []
            nxt = ""
            for k in itertools.islice(keys, first, None):
                o = objs[k]
                if namespace and o.namespace != namespace:
                    continue
                if label_selector is not None and not label_selector.matches(o.labels):
                    continue
                if field_selector is not None and not field_selector.matches(field_values(o)):
                    continue
                if limit and len(out) >= limit:
                    nxt = base64.urlsafe_b64encode(json.dumps({"rv": rv, "start": out[-1].key}).encode()).decode()
                    break
                out.append(o)
        return out, rv, nxt

    def _sorted_keys(self, kind_key: str, objs: dict[str, KubeObject]) -> list[str]:
        """The keys of a kind in order (the caller holds the lock), sorted once per version of
        the store: the pages of one paged list (and the lists of several clients) are served
        at the same version while nothing is written, each page then found by bisection instead
        of sorting and skipping every key before it."""
        cached = self._key_order.get(kind_key)
        if cached is not None and cached[0] == self._rv and cached[1] == len(objs):
            return cached[2]
        keys = sorted(objs)
        self._key_order[kind_key] = (self._rv, len(keys), keys)
        return keys

    def items(self, kind: str | type[KubeObject]) -> list[KubeObject]:
        cls = self._resolve_kind(kind)
        with self._lock:
            return list(self._bucket(cls).values())

    def count(self, kind: str | type[KubeObject]) -> int:
        return len(self._bucket(self._resolve_kind(kind)))

    # ------------------------------------------------------------------ watch

    def watch(self, kind: str | type[KubeObject], namespace: str | None = None, resource_version: str | int = "",
              label_selector: LabelSelector | None = None, field_selector: FieldSelector | None = None,
              bookmarks: bool = False) -> Watch:
        """Watch from ``resource_version``: "" or "0" start with synthetic ADDED events for what
        exists now; a version older than the kept history raises :class:`Gone`."""
        cls = self._resolve_kind(kind)
        check_field_selector(cls.KIND_KEY, field_selector)
        rv_s = str(resource_version) if resource_version is not None else ""
        with self._lock:
            return self.watch_cache.open(cls.KIND_KEY, namespace, label_selector, field_selector, bookmarks, rv_s,
                                         self._bucket(cls).values(), self._rv)

    def send_bookmarks(self) -> None:
        """A BOOKMARK with the current resourceVersion to every watch that asked for them."""
        with self._lock:
            self.watch_cache.send_bookmarks(self._rv)

    def close_watches(self, kind: str | None = None) -> None:
        """Close watches (as an API server restart would); clients must re-watch."""
        self.watch_cache.close(kind)

    def compact(self, kind: str | None = None) -> None:
        """Drop the watch history (as etcd compaction): older versions answer 410 Gone."""
        with self._lock:
            self.watch_cache.compact(self._rv, kind)

    def restore(self, objects: Iterable[KubeObject], resource_version: int) -> None:
        """Replace the contents with saved objects (a restart from persistence). The history
        starts empty at ``resource_version``: watches from older versions get 410 Gone."""
        objects = list(objects)
        with self._lock:
            for c in self.scheme.custom_classes():
                self.scheme.remove_crd(c.KIND_KEY)
            for o in objects:
                if isinstance(o, CustomResourceDefinition) and o.established:
                    self._serve_crd(o)
            for k in self._objects:
                self._objects[k] = {}
            self._key_order.clear()
            self._admission_writes += 1
            self.accounting = NodeAccounting()
            if self.pod_conflicts is not None:
                self.pod_conflicts = BoundPods()
                self.device_conflicts = DeviceAllocations(self._device_capacity)
            self.services.clear()
            self._terminating = {}
            top = resource_version
            for o in objects:
                cls = self.scheme.resolve(o.KIND_KEY)
                if cls is None:
                    continue
                if type(o) is not cls:
                    o = cls.from_dict(o.raw)
                self._objects[cls.KIND_KEY][o.key] = o
                if cls.KIND_KEY == "Service":
                    self.services.observe(None, o)
                if isinstance(o, Pod):
                    self.accounting.add(o)
                    if self.pod_conflicts is not None:
                        self.pod_conflicts.add(o)
                elif self.device_conflicts is not None:
                    self.device_conflicts.update(None, o)
                    if o.deletion_timestamp is not None:
                        self._terminating[o.key] = o.deletion_timestamp
                try:
                    top = max(top, int(o.resource_version or 0))
                except ValueError:
                    pass
            self._rv = top
            self.watch_cache.compact(top)

    # ------------------------------------------------------------------ create

    def create(self, obj: dict[str, Any] | KubeObject, namespace: str | None = None, *,
               owned: bool = False, existing: bool = False, validated: bool = False) -> KubeObject:
        """Create an object. ``owned=True`` hands the manifest over (no defensive copy): the
        caller built it for this call and will not touch it again. ``existing=True``: the object
        was exported from another cluster (a ``kubectl get -o yaml`` dump, a snapshot) and keeps
        its uid, creation time, generation and status; admission that already ran there (defaults,
        limits, priority, quota) does not refuse or change it again. ``validated=True``: the
        manifest passed :func:`ksched.api.validation.validate` as it is given (the loader did, so
        its errors name the file and document; the event recorder builds valid Events); a pod is
        then validated again only where admission may have made it invalid (LimitRanger,
        RuntimeClass, a generated name), an Event not at all. A validated ``Pod`` handed over
        (``owned`` and ``validated``: the loader's typed object) gives the store its manifest
        and its parse: where admission leaves the pod's containers alone the stored object
        shares the parsed containers, volumes and affinity (``Pod.admitted``) instead of parsing
        the manifest again; the caller's object is not used after the call."""
        loaded: Pod | None = None
        if owned and validated and isinstance(obj, Pod) and namespace is None and not existing \
                and self.share_loaded_parse:
            loaded, obj = obj, obj.raw
        if owned and validated and namespace is None and not existing and self.direct_events \
                and isinstance(obj, dict) and obj.get("kind") == "Event":
            with self._lock:
                event = self._create_event(obj)
            if event is not None:
                self._written()
                return event
        raw = obj if owned and isinstance(obj, dict) else deep_copy(obj.raw if isinstance(obj, KubeObject) else obj)
        if not isinstance(raw, dict):
            raise BadRequest("the object must be a JSON object")
        if namespace is not None:
            md = raw.setdefault("metadata", {})
            if isinstance(md, dict):
                if md.get("namespace") and md["namespace"] != namespace:
                    raise BadRequest("the namespace of the provided object does not match the namespace sent "
                                     "on the request")
                md["namespace"] = namespace
        with self._lock:
            obj = self._create_unlocked(raw, existing, validated and namespace is None, loaded)
        self._written()
        return obj

    def _create_event(self, raw: dict[str, Any]) -> Event | None:
        """A valid core/v1 Event handed over with its name, into an existing namespace that is not
        terminating and no ResourceQuota anywhere: what the generic create does to it (the
        version, the namespace default, a uid, the creation time, a resourceVersion), without
        the steps that change nothing for an Event (kind resolution, create strategies,
        admission plugins, quota). Anything else (None) takes the generic path, untouched."""
        md = raw.get("metadata")
        if raw.get("apiVersion") != "v1" or not isinstance(md, dict):
            return None  # (v1 Event: the generic path's kind whatever custom kinds exist)
        name = md.get("name")
        if not name or not isinstance(name, str) or self._bucket(ResourceQuota):
            return None
        ns = md.get("namespace") or "default"
        nso = self._bucket(Namespace).get(ns)
        key = f"{ns}/{name}"
        if nso is None or nso.deletion_timestamp is not None or key in self._bucket(Event):
            return None
        md["namespace"] = ns
        for f in ("resourceVersion", "uid", "deletionTimestamp", "deletionGracePeriodSeconds"):
            md.pop(f, None)
        md["uid"] = self._new_uid()
        if self.direct_compact_events and recorder_layout(raw, md):
            # The recorder's layout: its compact form built straight from it (what the typed
            # Event's CompactEvent.of below gives, :meth:`CompactEvent.of_recorded`).
            md["creationTimestamp"], created = self._event_stamp()
            rv = self._next_rv()
            md["resourceVersion"] = str(rv)
            stored = CompactEvent.of_recorded(raw, created)
            self._commit(Event, ADDED, None, stored, rv)
            return stored
        obj = _parse(Event, raw)
        # The creation time after parsing.
        md["creationTimestamp"], obj.creation_timestamp = self._event_stamp()
        rv = self._next_rv()
        md["resourceVersion"] = obj.resource_version = str(rv)
        # Kept compact (one shared shape and a tuple of values, the manifest built on each read):
        # about 2.2 KB less per Event.
        stored = CompactEvent.of(obj)  # type: ignore[arg-type]
        self._commit(Event, ADDED, None, stored, rv)
        return stored

    def create_recorded_event(self, name: str, namespace: str, involved: tuple[Any, ...], reason: str,
                              message: str, etype: str, action: str, timestamp: str,
                              component: str) -> Event | None:
        """The event recorder's new Event (``ksched.client.record``) given as its values, not as
        a manifest: what ``create`` of the manifest the recorder builds from them (``owned``,
        ``validated``) stores, commits and returns, where that create takes the direct path
        of :meth:`_create_event` with the recorder's layout (:meth:`CompactEvent.of_recorded`);
        None, with nothing done, where it would not (then the recorder creates the manifest,
        the reference). ``involved``: the involved object's apiVersion, kind, namespace, name,
        uid and resourceVersion; ``timestamp`` the first and last timestamp; ``component`` the
        source's component and the reporting component and instance. No manifest is built, no
        layout checked and no value read back from dicts. ``direct_recorded_events=False``
        declines every call (the reference)."""
        if not (self.direct_recorded_events and self.direct_events and self.direct_compact_events):
            return None
        # recorder_layout's conditions on these values (every other one holds by construction).
        if type(name) is not str or type(namespace) is not str or not name or not namespace:
            return None
        for v in involved:
            if type(v) is dict:
                return None
        if type(reason) is dict or type(message) is dict or type(etype) is dict or type(action) is dict \
                or type(timestamp) is dict or type(component) is dict:
            return None
        with self._lock:
            # _create_event's conditions, in its order.
            if self._objects["ResourceQuota"]:
                return None
            nso = self._objects["Namespace"].get(namespace)
            key = f"{namespace}/{name}"
            events = self._objects["Event"]
            if nso is None or nso.deletion_timestamp is not None or key in events:
                return None
            if FAST_RECORDED_EVENT and self.deterministic_uids:
                # _new_uid, _event_stamp and _next_rv inline (the deterministic uid's short form;
                # the instant's stamp formatted and parsed once).
                n = next(self._uid_counter)
                uid = f"00000000-0000-0000-0000-{n:012x}" if n < _SHORT_UID else _uid_of(n)
                ts = format_time(self.clock.now())
                stamp = self._event_time
                if stamp[0] != ts:
                    stamp = self._event_time = (ts, parse_time(ts))
                created_s, created = stamp
                self._rv = rv = self._rv + 1
            else:
                uid = self._new_uid()
                created_s, created = self._event_stamp()
                rv = self._next_rv()
            stored = CompactEvent.of_values(
                ("v1", "Event", name, namespace, uid, created_s, str(rv), *involved, reason, message, etype, action,
                 1, timestamp, timestamp, component, component, component), created, key)
            if self.direct_event_commit:
                # _commit(Event, ADDED, None, stored, rv) of a new Event: hooks, the bucket, the
                # watch cache (an Event is no admission kind, no Pod, claim or Service).
                for hook in self.on_commit:
                    hook(ADDED, "Event", stored, rv)
                events[stored.key] = stored
                self.watch_cache.commit("Event", ADDED, None, stored, rv)
            else:
                self._commit(Event, ADDED, None, stored, rv)
        self._written()
        return stored

    def _event_stamp(self) -> tuple[str, float | None]:
        """A created Event's creationTimestamp now, and its parsed value: events come in bursts of
        one instant, whose time is formatted and parsed back once (as KubeObject reads it), one
        string per instant."""
        ts = format_time(self.now())
        if self._event_time[0] != ts:
            self._event_time = (ts, parse_time(ts))
        return self._event_time

    def _kind_of(self, raw: dict[str, Any]) -> type[KubeObject]:
        kind = raw.get("kind")
        av = raw.get("apiVersion")
        cls = self.scheme.resolve(str(kind)) if isinstance(kind, str) and kind else None
        if cls is not None and issubclass(cls, CustomObject) and av:
            cls = None  # a custom kind is named by its group and version
        if cls is None and isinstance(kind, str) and kind and isinstance(av, str) and av:
            try:
                cls = self.scheme.kind_class(av, kind)
            except UnknownKindError:
                cls = None
        if cls is None:
            raise BadRequest(str(UnknownKindError(str(av or ""), str(kind or ""))))
        return cls

    def _create_unlocked(self, raw: dict[str, Any], existing: bool = False, validated: bool = False,
                         loaded: Pod | None = None) -> KubeObject:
        kind_name = raw.get("kind")
        cls = Pod if type(kind_name) is str and kind_name == "Pod" and self.template_create else self._kind_of(raw)
        raw.setdefault("apiVersion", cls.API_VERSION)
        md = raw.get("metadata")
        if md is None:
            md = raw["metadata"] = {}
        if not isinstance(md, dict):
            raise Invalid.of(cls.KIND, "", [FieldError("metadata", "must be an object")])
        if cls.NAMESPACED:
            md["namespace"] = md.get("namespace") or "default"
        else:
            md.pop("namespace", None)
        kept = {f: md[f] for f in _EXISTING_KEEPS if f in md} if existing else {}
        if not md.get("name") and md.get("generateName"):
            md["name"] = self._generate_name(cls, md)
            validated = False  # the generated name is checked
        name = md.get("name") or ""
        for f in ("resourceVersion", "uid", "deletionTimestamp", "deletionGracePeriodSeconds"):
            md.pop(f, None)
        kind = cls.KIND_KEY
        errors: list[FieldError] = []
        kept_status = raw.get("status") if existing else None
        try:
            cls.prepare_for_create(raw)
        except (TypeError, AttributeError, ValueError):
            pass  # malformed: validation below says where
        if kept_status is not None:
            raw["status"] = kept_status
        entry: list[Any] | None = None  # (a loaded pod's admitted spec: _admit_pod)
        if cls is Pod:
            try:
                # Still valid if it was: a pod the caller validated is not validated again.
                keeps, entry = self._admit_pod(raw, existing, loaded if validated else None)
                validated = keeps and validated
            except (TypeError, AttributeError, ValueError):
                validated = False  # malformed: validation below says where
        elif cls is PriorityClass:
            admit_priority_class(raw, self._lookup, self.disabled_admission)
        else:
            try:
                errors = prepare_for_create(kind, raw, self.services)
            except (TypeError, AttributeError, ValueError):
                pass  # malformed: validation below says where
        prepare = PREPARE_FOR_CREATE.get(kind)
        if prepare is not None:
            # An exported object keeps its uid (a Job's generated selector names it) and status.
            status = raw.get("status") if existing else None
            errors = prepare(raw, lambda: kept.get("uid") or self._new_uid()) + errors
            if status is not None:
                raw["status"] = status
        if not (validated and (cls is Pod or kind in _CREATED_AS_GIVEN or (cls is Node and self.nodes_as_given))):
            errors = self.scheme.validate(raw, cls) + errors
        if errors:
            raise Invalid.of(cls.KIND, str(name), errors, _group(cls))
        if cls.NAMESPACED:
            ns = md["namespace"]
            nso = self._bucket(Namespace).get(ns)
            if nso is None:
                if self.auto_create_namespaces:
                    self._create_unlocked({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
                else:
                    raise NotFound(f'namespaces "{ns}" not found', kind="namespaces", name=ns)
            elif nso.deletion_timestamp is not None:
                why = f"unable to create new content in namespace {ns} because it is being terminated"
                raise Forbidden(f'{cls.PLURAL} "{name}" is forbidden: {why}', kind=cls.PLURAL, name=str(name),
                                group=_group(cls), causes=[{"reason": "NamespaceTerminating", "message": why,
                                                            "field": "metadata.namespace"}])
        key = self._key(cls, md.get("namespace", ""), name)
        if key in self._bucket(cls):
            raise AlreadyExists.of(cls.PLURAL, name, _group(cls))
        md["uid"] = md.get("uid") or self._new_uid()
        md["creationTimestamp"] = format_time(self.now())
        md.update(kept)
        if cls is Namespace:
            raw.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            raw.setdefault("status", {}).setdefault("phase", "Active")
            if not existing:
                raw["status"]["phase"] = "Active"
        if "generation" not in md and (cls.KIND_KEY in _GENERATION_KINDS or issubclass(cls, CustomObject)):
            md["generation"] = 1
        if cls is CustomResourceDefinition:
            raw["status"] = crd_status(raw, self.scheme.names_conflict(CustomResourceDefinition.from_dict(raw)))
        # A pod the caller parsed, valid as admission left it (so neither LimitRanger nor
        # RuntimeClass changed it, nor a generated name): its parsed containers are still right.
        share = loaded is not None and validated and cls is Pod and loaded.raw is raw and not existing
        first = entry[2] if entry is not None and share else None
        admitted_as_first = False  # validate_admission passed for ``first``, as for this pod
        if first is not None and first.raw["spec"] is raw["spec"] and first.namespace == md["namespace"] \
                and first.labels == (md.get("labels") or {}):
            # The very spec a pod of the same namespace and labels was stored with: its parse
            # (what parsing the spec reads besides the spec), and its QoS class (the spec's).
            obj = _parse(cls, raw, like=first)
            q = first.raw["status"]["qosClass"]
            obj.cached()["qos"] = q  # type: ignore[attr-defined]  # (as qos_class leaves it)
            raw["status"]["qosClass"] = q
            admitted_as_first = self.template_create
        else:
            obj = _parse(cls, raw, admitted_from=loaded if share else None)
            if cls is Pod:
                raw["status"]["qosClass"] = qos_class(obj)  # type: ignore[arg-type]
        charges: list[tuple[ResourceQuota, Any]] = []
        if not existing and not admitted_as_first:
            validate_admission(obj, self._lookup, self.disabled_admission)
        if cls.NAMESPACED and "ResourceQuota" not in self.disabled_admission:
            rq = self._objects["ResourceQuota"]
            quotas = [q for q in rq.values() if q.namespace == obj.namespace] if rq else []
            if quotas:
                try:
                    charges = check_request(obj, quotas, self.now(), force=existing)  # type: ignore[arg-type]
                except QuotaRefused as e:
                    raise forbidden(resource_name(cls), md.get("name") or md.get("generateName") or "Unknown",
                                    str(e)) from e
        for q, used in charges:
            status = dict(q.raw.get("status") or {})
            status["used"] = {k: str(v) for k, v in sorted(used.items())}
            self._write_status(ResourceQuota, q, status)
        rv = self._next_rv()
        md["resourceVersion"] = str(rv)
        obj.resource_version = str(rv)
        self._commit(cls, ADDED, None, obj, rv)
        if entry is not None and share and entry[2] is None and entry[1] is raw["spec"]:
            entry[2] = obj
        if isinstance(obj, CustomResourceDefinition) and obj.established:
            self._serve_crd(obj)
        return obj

    def _admit_pod(self, raw: dict[str, Any], existing: bool,
                   loaded: Pod | None) -> tuple[bool, list[Any] | None]:
        """``admit_pod`` on a new pod's manifest (in place): whether it stays valid, and the
        entry of ``_admitted_specs`` its spec is (or None). A pod the
        loader handed over (``loaded``) whose ``admission_key`` is that of a pod admitted
        before, unchanged (kept valid: no LimitRange, no RuntimeClass), while no object of
        ``ADMISSION_KINDS`` was written since, takes that pod's admitted spec (stored manifests
        are never changed in place, so the pods of one template share it) and gets the status
        defaults; its admission would have made an equal spec of its own."""
        key = None
        if loaded is not None and not existing and self.share_admitted_specs:
            # The spec's key as the loader's validation made it, if it did, for this very spec.
            known = loaded.cached().get(LOADED_SPEC_KEY)
            spec_key = known[1] if known is not None and known[0] is raw.get("spec") else None
            key = admission_key(raw, self.disabled_admission, spec_key)
            if key is not None:
                hit = self._admitted_specs.get(key)
                if hit is not None and hit[0] == self._admission_writes:
                    raw["spec"] = hit[1]
                    default_pod_status(raw)
                    return True, hit
        keeps = admit_pod(raw, self._lookup, self.disabled_admission, existing=existing)
        if key is None or not keeps:
            return keeps, None
        entry = self._admitted_specs.put(key, [self._admission_writes, raw["spec"], None])
        return keeps, entry

    # ------------------------------------------------------------------ custom resource definitions

    def _serve_crd(self, crd: CustomResourceDefinition) -> None:
        """Serve the kind an established CRD defines (again, after an update: stored objects are
        re-read with the new definition, without a change anyone sees)."""
        cls = self.scheme.add_crd(crd)
        bucket = self._objects.get(cls.KIND_KEY)
        if bucket is None:
            self._objects[cls.KIND_KEY] = {}
            self.watch_cache.add_kind(cls.KIND_KEY, self._rv)
        else:
            for k, o in list(bucket.items()):
                bucket[k] = cls.from_dict(o.raw)

    def _unserve_crd(self, crd: CustomResourceDefinition) -> None:
        """Delete every object of the CRD's kind (what the CRD finalizer does), then stop serving it."""
        cls = self.scheme.resolve(crd.name)
        if cls is None or not issubclass(cls, CustomObject):
            return
        for o in list(self._bucket(cls).values()):
            self._remove(cls, o)
        self.scheme.remove_crd(crd.name)
        self.watch_cache.close(cls.KIND_KEY)

    # ------------------------------------------------------------------ update

    def update(self, obj: dict[str, Any] | KubeObject, subresource: str = "") -> KubeObject:
        raw = deep_copy(obj.raw if isinstance(obj, KubeObject) else obj)
        with self._lock:
            if not isinstance(raw, dict):
                raise BadRequest("the object must be a JSON object")
            obj = self._update_unlocked(raw, subresource, cls=self._kind_of(raw))
        self._written()
        return obj

    def update_status(self, obj: dict[str, Any] | KubeObject) -> KubeObject:
        return self.update(obj, "status")

    def _update_unlocked(self, raw: dict[str, Any], subresource: str = "", *, check_rv: bool = True,
                         cls: type[KubeObject] | None = None) -> KubeObject:
        if cls is None:
            cls = self._resolve_kind(str(raw.get("kind") or ""))
        md = raw.get("metadata")
        if not isinstance(md, dict):
            raise Invalid.of(cls.KIND, "", [FieldError("metadata", "must be an object")])
        name = md.get("name") or ""
        ns = (md.get("namespace") or "default") if cls.NAMESPACED else ""
        key = self._key(cls, ns, name)
        old = self._bucket(cls).get(key)
        if old is None:
            raise NotFound.of(cls.PLURAL, name, _group(cls))
        given_rv = str(md.get("resourceVersion") or "")
        if check_rv and given_rv and given_rv != old.resource_version:
            raise Conflict.of(cls.PLURAL, name, "the object has been modified; please apply your changes to the "
                                                "latest version and try again", _group(cls))
        if md.get("uid") and md["uid"] != old.uid:
            raise Conflict.of(cls.PLURAL, name, f"Precondition failed: UID in precondition: {md['uid']}, UID in "
                                                f"object meta: {old.uid}", _group(cls))
        strategy = UPDATE_STRATEGY.get(cls.KIND_KEY) if subresource == "" else None
        if strategy is not None and isinstance(raw.get("spec"), dict):
            errs = strategy(old.raw, raw)
            if errs:
                raise Invalid.of(cls.KIND, name, errs, _group(cls))
        if subresource == "":
            try:
                cls.prepare_for_update(raw, old.raw)
            except (TypeError, AttributeError, ValueError):
                pass  # malformed: validation below says where
        new_raw = self._merge_update(cls, old, raw, subresource)
        if new_raw is None:
            return old  # no-op: nothing changed, no new resourceVersion
        errors: list[FieldError] = []
        if cls is Pod and subresource != "status":
            self._check_pod_update(old, new_raw)  # type: ignore[arg-type]
        elif cls is PriorityClass:
            admit_priority_class(new_raw, self._lookup, self.disabled_admission)
        elif cls is CustomResourceDefinition:
            errors = validate_crd(new_raw, old.raw)
            new_raw["status"] = crd_status(new_raw, self.scheme.names_conflict(
                CustomResourceDefinition.from_dict(new_raw)))
        elif subresource != "status":
            try:
                errors = prepare_for_update(cls.KIND_KEY, old, new_raw, self.services)
            except (TypeError, AttributeError, ValueError):
                pass  # malformed: validation below says where
        status_only = (cls is Pod and subresource == "status" and new_raw.get("spec") is old.raw.get("spec")
                       and new_raw["metadata"] == old.raw.get("metadata"))
        if not status_only:
            # A pod's validation reads its metadata and spec only: a status write that keeps both
            # (the very spec object, equal metadata) cannot make them invalid.
            errors = self.scheme.validate(new_raw, cls) + errors
        if not errors and subresource == "":
            errors = validate_update(new_raw, old.raw)
        if errors:
            raise Invalid.of(cls.KIND, name, errors, _group(cls))
        if new_raw == old.raw:
            return old  # defaulting took the change back
        # Finalizers emptied on an object being deleted: it goes away now (a namespace once its
        # spec.finalizers are empty too: the namespace controller finalized it).
        nmd = new_raw["metadata"]
        if old.deletion_timestamp is not None and not nmd.get("finalizers") and not self._graceful_pending(old) \
                and not (cls is Namespace and (new_raw.get("spec") or {}).get("finalizers")):
            rv = self._next_rv()
            gone = cls.from_dict(_with_meta(new_raw, resourceVersion=str(rv)))
            self._commit(cls, DELETED, old, gone, rv)
            return gone
        new = _parse(cls, new_raw, old if status_only and type(old) is Pod else None)  # type: ignore[arg-type]
        if self.device_conflicts is not None and isinstance(new, ResourceClaim) and self.conflict_resolver:
            why = self.device_conflicts.conflict(old, new)  # type: ignore[arg-type]
            if why is not None:
                raise Conflict.of(cls.PLURAL, name, why, _group(cls))
        rv = self._next_rv()
        nmd["resourceVersion"] = str(rv)
        new.resource_version = str(rv)
        self._commit(cls, MODIFIED, old, new, rv)
        if isinstance(new, CustomResourceDefinition):
            if new.established:
                self._serve_crd(new)
            else:
                self._unserve_crd(new)
        return new

    def _graceful_pending(self, obj: KubeObject) -> bool:
        """A bound pod whose grace period has not yet run out (the kubelet has not finished)."""
        return isinstance(obj, Pod) and bool(obj.node_name) and not obj.is_terminal and \
            obj.deletion_timestamp is not None and obj.deletion_timestamp > self.now()

    def _merge_update(self, cls: type[KubeObject], old: KubeObject, raw: dict[str, Any],
                      subresource: str) -> dict[str, Any] | None:
        """The manifest to store, or None if the update changes nothing."""
        old_raw = old.raw
        omd = old_raw.get("metadata") or {}
        if subresource == "status":
            new_raw = dict(old_raw)
            if "status" in raw:
                new_raw["status"] = raw["status"]
            new_md = dict(omd)
            rmd = raw.get("metadata")
            if cls.KIND in _STATUS_WRITES_ANNOTATIONS and isinstance(rmd, dict) and "annotations" in rmd:
                if rmd["annotations"]:
                    new_md["annotations"] = rmd["annotations"]
                else:
                    new_md.pop("annotations", None)
        elif subresource == "finalize":
            if cls is not Namespace:
                raise NotFound(f"the server could not find the requested resource ({cls.PLURAL}/finalize)")
            # namespaces/finalize: only spec.finalizers change.
            new_raw = dict(old_raw)
            new_spec = raw.get("spec") if isinstance(raw.get("spec"), dict) else {}
            new_raw["spec"] = {**(old_raw.get("spec") or {}), "finalizers": list(new_spec.get("finalizers") or [])}
            new_md = dict(omd)
        else:
            new_raw = dict(raw)
            if cls.STATUS_SUBRESOURCE:  # the main resource ignores status changes
                if "status" in old_raw:
                    new_raw["status"] = old_raw["status"]
                else:
                    new_raw.pop("status", None)
            new_md = dict(raw.get("metadata") or {})
            # System fields are not the client's to change.
            for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                      "namespace", "name"):
                if f in omd:
                    new_md[f] = omd[f]
                else:
                    new_md.pop(f, None)
        new_md["resourceVersion"] = omd.get("resourceVersion")
        new_raw["metadata"] = new_md
        new_raw.setdefault("apiVersion", old_raw.get("apiVersion", cls.API_VERSION))
        new_raw.setdefault("kind", cls.KIND)
        if new_raw == old_raw:
            return None
        if subresource != "status" and "generation" in omd and (
                new_raw.get("spec") != old_raw.get("spec") or (
                    cls.KIND in _GENERATION_COUNTS_ANNOTATIONS
                    and (new_md.get("annotations") or {}) != (omd.get("annotations") or {}))):
            new_md["generation"] = int(omd["generation"]) + 1
        return new_raw

    @staticmethod
    def _check_pod_update(old: Pod, new_raw: dict[str, Any]) -> None:
        os_ = old.raw.get("spec") or {}
        ns_ = new_raw.get("spec") or {}
        if not isinstance(ns_, dict):
            raise Invalid.of("Pod", old.name, [FieldError("spec", "must be an object")])
        errs: list[FieldError] = []
        for k in set(os_) | set(ns_):
            if k in _POD_MUTABLE_SPEC:
                continue
            if k == "containers" or k == "initContainers":
                a = [{**c, "image": None} for c in os_.get(k) or ()]
                b = [{**c, "image": None} for c in ns_.get(k) or ()]
                if a != b:
                    errs.append(FieldError("spec", "Forbidden: pod updates may not change fields other than "
                                                   "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                                                   "`spec.activeDeadlineSeconds`, `spec.tolerations` (only "
                                                   "additions to existing tolerations), "
                                                   "`spec.terminationGracePeriodSeconds`", "FieldValueForbidden"))
                    break
            elif os_.get(k) != ns_.get(k):
                errs.append(FieldError("spec", "Forbidden: pod updates may not change fields other than "
                                               "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                                               "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions "
                                               "to existing tolerations), `spec.terminationGracePeriodSeconds`",
                                       "FieldValueForbidden"))
                break
        old_gates = [g.get("name") for g in os_.get("schedulingGates") or ()]
        new_gates = [g.get("name") for g in ns_.get("schedulingGates") or ()]
        if any(g not in old_gates for g in new_gates):
            errs.append(FieldError("spec.schedulingGates", "Forbidden: only deletion is allowed, but found new "
                                                           "scheduling gate", "FieldValueForbidden"))
        if errs:
            raise Invalid.of("Pod", old.name, errs)

    # ------------------------------------------------------------------ patch

    def patch(self, kind: str | type[KubeObject], namespace: str, name: str, patch: Any,
              content_type: str = "application/merge-patch+json", subresource: str = "", *,
              check: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
              owned: bool = False) -> KubeObject:
        """Patch an object. ``check(old, patched)`` sees the patched manifest before anything
        is written: it may refuse (raise) or change it (the HTTP front's field validation).
        ``owned``: the caller hands a merge patch of a pod over (built for this call, not touched
        again, its values never mutated): they become the new version's without a copy."""
        if owned and subresource == "status" and check is None and content_type == MERGE_PATCH \
                and self.direct_pod_status and (kind == "Pod" or kind is Pod) and type(patch) is dict \
                and len(patch) == 1 and type(patch.get("status")) is dict:
            with self._lock:
                written = self._patch_pod_status(namespace, name, patch["status"])
            if written is not None:
                self._written()
                return written
        cls = self._resolve_kind(kind)
        with self._lock:
            old = self._bucket(cls).get(self._key(cls, namespace, name))
            if old is None:
                raise NotFound.of(cls.PLURAL, name, _group(cls))
            try:
                if cls is Pod and check is None and content_type == MERGE_PATCH:
                    # Copy on write: a merge patch builds new dicts along the paths it changes and
                    # shares the rest with the stored pod, which nothing on a pod's update path
                    # mutates; only the metadata, changed below, gets its own copy.
                    new_raw = merge_patch(old.raw, patch, owned)
                    if isinstance(new_raw.get("metadata"), dict):
                        new_raw["metadata"] = dict(new_raw["metadata"])
                else:
                    new_raw = apply_patch(deep_copy(old.raw), patch, content_type)
            except PatchError as e:
                raise Invalid(f"the patch cannot be applied: {e}", kind=cls.KIND, name=name) from e
            if check is not None:
                check(old.raw, new_raw)
            md = new_raw.get("metadata")
            if not isinstance(md, dict):
                raise Invalid.of(cls.KIND, name, [FieldError("metadata", "must be an object")])
            # A patch only carries a resourceVersion precondition if it names one explicitly.
            patched_rv = str(md.get("resourceVersion") or "")
            check = patched_rv != old.resource_version
            if not check:
                md["resourceVersion"] = old.resource_version
            md["name"] = name
            if cls.NAMESPACED:
                md["namespace"] = namespace
            new_raw["kind"] = cls.KIND
            obj = self._update_unlocked(new_raw, subresource, check_rv=check, cls=cls)
        self._written()
        return obj

    def patch_pod_status(self, namespace: str, name: str, status: dict[str, Any]) -> KubeObject:
        """``patch("Pod", namespace, name, {"status": status}, MERGE_PATCH, "status", owned=True)``
        (``status`` handed over as there): the kubelet's status writes, one a pod at least,
        without the generic entry's checks of what this call fixes (the kind, subresource,
        content type, the patch's shape) and the patch wrapped around ``status``. The same
        outcome: a write ``_patch_pod_status`` takes is that path's, anything else is ``patch``."""
        if self.direct_pod_status and type(status) is dict:
            with self._lock:
                written = self._patch_pod_status(namespace, name, status)
            if written is not None:
                self._written()
                return written
        return self.patch("Pod", namespace, name, {"status": status}, MERGE_PATCH, "status", owned=True)

    def _patch_pod_status(self, namespace: str, name: str, status: dict[str, Any]) -> Pod | None:
        """``pods/status`` merge patch ``{"status": status}`` handed over (``owned``) whose values
        are plain (none is an object: no nested merge) on a stored pod that is not being deleted
        and whose manifest has its own kind, apiVersion, name, namespace and resourceVersion:
        what the generic patch gives it (the new status is the old one with the patch's keys
        set or, for null, removed, in the same key order; nothing else changes, so nothing is
        validated; an unchanged status is no write), without the generic steps. Anything else
        (None) takes the generic path, untouched. Called under the lock."""
        old = self._objects["Pod"].get(f"{namespace}/{name}")
        if type(old) is not Pod or old.deletion_timestamp is not None:
            return None
        raw = old.raw
        md = raw.get("metadata")
        if type(md) is not dict or raw.get("kind") != "Pod" or "apiVersion" not in raw \
                or md.get("resourceVersion") != old.resource_version or md.get("name") != name \
                or md.get("namespace") != namespace:
            return None
        ostatus = raw.get("status")
        new_status = dict(ostatus) if isinstance(ostatus, dict) else {}
        for k, v in status.items():
            if v is None:
                new_status.pop(k, None)
            elif type(v) is dict:
                return None  # merged recursively: the generic path
            else:
                new_status[k] = v
        if "status" in raw and new_status == ostatus:
            return old  # no change, no new resourceVersion
        new_raw = dict(raw)
        new_raw["status"] = new_status
        new_md = dict(md)
        new_raw["metadata"] = new_md
        try:
            new = old.with_status(new_raw)
        except (TypeError, AttributeError, ValueError):
            return None  # a status that does not parse: the generic path refuses it
        rv = self._next_rv()
        new_md["resourceVersion"] = new.resource_version = str(rv)
        if not FAST_STATUS_COMMIT:
            self._commit(Pod, MODIFIED, old, new, rv)
            return new
        # _commit(Pod, MODIFIED, old, new, rv) with what a status write knows: a Pod (no
        # admission kind, claim or Service), a modification, the new version not being deleted
        # (the old one is not; the metadata is shared), and the two versions sharing everything
        # but the status (``Pod.with_status``), so the ledger's ``update`` is a no-op unless the
        # write makes the pod terminal or not (``_same_charge`` compares the rest by identity).
        # The same steps in the same order: hooks, the bucket, the terminating set, the ledger,
        # the resolver's pod conflicts, the watch cache.
        for hook in self.on_commit:
            hook(MODIFIED, "Pod", new, rv)
        key = new.key
        self._objects["Pod"][key] = new
        if self._terminating:
            self._terminating.pop(key, None)
        if old.phase != new.phase and old.is_terminal != new.is_terminal:
            self.accounting.update(old, new)
        if self.pod_conflicts is not None:
            self.pod_conflicts.update(old, new)
        self.watch_cache.commit("Pod", MODIFIED, old, new, rv)
        return new

    # ------------------------------------------------------------------ delete

    def delete(self, kind: str | type[KubeObject], namespace: str, name: str, *,
               grace_period_seconds: int | None = None, uid: str | None = None,
               resource_version: str | None = None, propagation_policy: str | None = None,
               orphan_dependents: bool | None = None, options: DeleteOptions | None = None) -> KubeObject:
        """Delete; bound pods are deleted gracefully (deletionTimestamp set, gone once the grace
        period ends), objects with finalizers wait for them. ``propagation_policy`` (Orphan,
        Background, Foreground; or the legacy ``orphan_dependents``) sets the garbage collector's
        finalizers, defaulting per kind (see ``ksched.apiserver.deletion``); a namespace turns
        Terminating and waits for the namespace controller. ``options`` (DeleteOptions as sent
        over HTTP) replaces the keyword arguments."""
        cls = self._resolve_kind(kind)
        opts = options or DeleteOptions(grace_period_seconds, propagation_policy, orphan_dependents, uid,
                                        resource_version)
        opts.validate()
        with self._lock:
            old = self._bucket(cls).get(self._key(cls, namespace, name))
            if old is None:
                raise NotFound.of(cls.PLURAL, name, _group(cls))
            if opts.uid and opts.uid != old.uid:
                raise Conflict.of(cls.PLURAL, name, f"Precondition failed: UID in precondition: {opts.uid}, UID in "
                                                    f"object meta: {old.uid}", _group(cls))
            if opts.resource_version and opts.resource_version != old.resource_version:
                raise Conflict.of(cls.PLURAL, name, "Precondition failed: ResourceVersion in precondition: "
                                                    f"{opts.resource_version}, ResourceVersion in object meta: "
                                                    f"{old.resource_version}", _group(cls))
            if cls is Namespace:
                obj = self._delete_namespace(old, opts)
            else:
                obj = self._delete_unlocked(cls, old, opts)
        self._written()
        return obj

    def _delete_unlocked(self, cls: type[KubeObject], old: KubeObject, opts: DeleteOptions) -> KubeObject:
        if isinstance(old, CustomResourceDefinition):
            # What the CRD finalizer waits for (its objects deleted) is done at once.
            self._unserve_crd(old)
            if CRD_CLEANUP_FINALIZER in old.finalizers:
                old = cls.from_dict(_with_meta(old.raw, finalizers=[
                    f for f in old.finalizers if f != CRD_CLEANUP_FINALIZER] or None))
        grace = opts.effective_grace()
        graceful = isinstance(old, Pod) and bool(old.node_name) and not old.is_terminal
        period = (grace if grace is not None else old.termination_grace_period_seconds) \
            if graceful else 0  # type: ignore[attr-defined]
        changed_finalizers = gc_finalizers(old.finalizers, opts, cls.KIND)
        finalizers = changed_finalizers if changed_finalizers is not None else old.finalizers
        fields: dict[str, Any] = {}
        if changed_finalizers is not None:
            fields["finalizers"] = changed_finalizers or None
        if old.deletion_timestamp is not None:
            # Already terminating: a shorter grace period, or other GC finalizers, change anything.
            current = old.deletion_grace_period_seconds or 0
            if isinstance(old, Pod) and period < current:
                if period == 0 and not finalizers:
                    return self._remove(cls, old)
                fields["deletionTimestamp"] = format_time(self.now() + period)
                fields["deletionGracePeriodSeconds"] = period
            elif not fields:
                if not finalizers and current == 0:
                    return self._remove(cls, old)  # left half-deleted: finish it, as upstream
                return old
        else:
            if period == 0 and not finalizers:
                return self._remove(cls, old)
            fields["deletionTimestamp"] = format_time(self.now() + period)
            fields["deletionGracePeriodSeconds"] = period
            if old.generation > 0:
                fields["generation"] = old.generation + 1
        rv = self._next_rv()
        new = cls.from_dict(_with_meta(old.raw, resourceVersion=str(rv), **fields))
        self._commit(cls, MODIFIED, old, new, rv)
        return new

    def _remove(self, cls: type[KubeObject], old: KubeObject) -> KubeObject:
        rv = self._next_rv()
        gone = cls.from_dict(_with_meta(old.raw, resourceVersion=str(rv)))
        self._commit(cls, DELETED, old, gone, rv)
        return gone

    def _delete_namespace(self, ns: KubeObject, opts: DeleteOptions) -> KubeObject:
        """The namespace registry's delete: the first one marks the namespace Terminating (the
        namespace controller then deletes its content and removes the ``kubernetes`` finalizer);
        once finalized, an ordinary delete (which waits for GC finalizers)."""
        if ns.name in IMMORTAL_NAMESPACES:
            raise Forbidden(f'namespaces "{ns.name}" is forbidden: this namespace may not be deleted',
                            kind="namespaces", name=ns.name)
        if ns.deletion_timestamp is None:
            raw = copy.deepcopy(ns.raw)
            md = raw["metadata"]
            md["deletionTimestamp"] = format_time(self.now())
            changed = gc_finalizers(ns.finalizers, opts, "Namespace")
            if changed is not None:
                if changed:
                    md["finalizers"] = changed
                else:
                    md.pop("finalizers", None)
            raw.setdefault("status", {})["phase"] = "Terminating"
            rv = self._next_rv()
            md["resourceVersion"] = str(rv)
            new = Namespace.from_dict(raw)
            self._commit(Namespace, MODIFIED, ns, new, rv)
            return new
        if (ns.raw.get("spec") or {}).get("finalizers"):
            return ns
        return self._delete_unlocked(Namespace, ns, opts)

    def finalize_expired(self) -> int:
        """Remove bound pods whose graceful deletion period has ended (what the kubelet does once
        a pod's containers stop). Returns how many were removed."""
        if not self._terminating:
            return 0
        now = self.now()
        n = 0
        with self._lock:
            pods = self._objects["Pod"]
            for key, deadline in list(self._terminating.items()):
                o = pods.get(key)
                if o is not None and deadline <= now and not o.finalizers:
                    self._remove(Pod, o)
                    n += 1
        if n:
            self._written()
        return n

    def next_deletion_deadline(self) -> float | None:
        """When the next terminating pod (without finalizers) is due to go."""
        if not self._terminating:
            return None
        with self._lock:
            pods = self._objects["Pod"]
            ts = [d for k, d in self._terminating.items() if (o := pods.get(k)) is not None and not o.finalizers]
        return min(ts) if ts else None

    # ------------------------------------------------------------------ scale subresource

    def _scalable(self, kind: str | type[KubeObject], namespace: str, name: str) -> tuple[type[KubeObject],
                                                                                          KubeObject]:
        cls = self._resolve_kind(kind)
        if not cls.SCALE_SUBRESOURCE:
            raise NotFound(f"the server could not find the requested resource ({cls.PLURAL}/scale)")
        obj = self._bucket(cls).get(self._key(cls, namespace, name))
        if obj is None:
            raise NotFound.of(cls.PLURAL, name, _group(cls))
        return cls, obj

    def get_scale(self, kind: str | type[KubeObject], namespace: str, name: str) -> dict[str, Any]:
        """``<resource>/scale``: the object's replicas as an autoscaling/v1 Scale."""
        with self._lock:
            _, obj = self._scalable(kind, namespace, name)
            return scale_of(obj)

    def update_scale(self, kind: str | type[KubeObject], namespace: str, name: str,
                     scale: Any) -> dict[str, Any]:
        """PUT ``<resource>/scale``: set ``spec.replicas`` from a Scale (its resourceVersion, when
        given, is a precondition). Returns the new Scale."""
        with self._lock:
            cls, old = self._scalable(kind, namespace, name)
            obj = self._set_replicas(cls, old, name, scale)
        self._written()
        return scale_of(obj)

    def patch_scale(self, kind: str | type[KubeObject], namespace: str, name: str, patch: Any,
                    content_type: str = "application/merge-patch+json") -> dict[str, Any]:
        """PATCH ``<resource>/scale`` (what ``kubectl scale`` sends): the patch applies to the Scale."""
        with self._lock:
            cls, old = self._scalable(kind, namespace, name)
            try:
                scale = apply_patch(scale_of(old), patch, content_type)
            except PatchError as e:
                raise Invalid(f"the patch cannot be applied: {e}", kind="Scale", name=name) from e
            obj = self._set_replicas(cls, old, name, scale)
        self._written()
        return scale_of(obj)

    def _set_replicas(self, cls: type[KubeObject], old: KubeObject, name: str, scale: Any) -> KubeObject:
        if not isinstance(scale, dict):
            raise BadRequest("a Scale must be a JSON object")
        md = scale.get("metadata") if isinstance(scale.get("metadata"), dict) else {}
        if md.get("name") not in (None, "", name):
            raise BadRequest("the name of the object does not match the name on the URL")
        replicas = (scale.get("spec") if isinstance(scale.get("spec"), dict) else {}).get("replicas", 0)
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            raise Invalid.of("Scale", name, [FieldError("spec.replicas", f"Invalid value: {replicas!r}: must be "
                                                                         "an integer")], "autoscaling")
        if replicas < 0:
            raise Invalid.of("Scale", name, [FieldError("spec.replicas", f"Invalid value: {replicas}: must be "
                                                                         "greater than or equal to 0")],
                             "autoscaling")
        rv = str(md.get("resourceVersion") or "")
        if rv and rv != old.resource_version:
            raise Conflict.of(cls.PLURAL, name, "the object has been modified; please apply your changes to the "
                                                "latest version and try again", _group(cls))
        raw = copy.deepcopy(old.raw)
        spec = raw.get("spec")
        if not isinstance(spec, dict):
            spec = raw["spec"] = {}
        spec["replicas"] = replicas
        return self._update_unlocked(raw)

    # ------------------------------------------------------------------ pods subresources

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None,
             annotations: dict[str, str] | None = None) -> Pod:
        """``pods/binding``: set spec.nodeName once, with PodScheduled=True. With the conflict
        resolver on, a binding that would over-commit the node fails with Conflict."""
        if FAST_BIND and self.direct_binding_commit and self.share_status_values:
            new = self._bind_fast(namespace, name, node_name, uid, annotations)
            self._written()
            return new
        with self._lock:
            old = self._bucket(Pod).get(f"{namespace}/{name}")
            if old is None:
                raise NotFound.of("pods", name)
            assert isinstance(old, Pod)
            if uid and uid != old.uid:
                raise Conflict.of("pods", name, f"Precondition failed: UID in precondition: {uid}, UID in object "
                                                f"meta: {old.uid}")
            if old.deletion_timestamp is not None:
                raise Conflict.of("pods", name, "pod is being deleted, cannot be assigned to a host")
            if old.node_name:
                raise Conflict.of("pods", name, f"pod {name} is already assigned to node \"{old.node_name}\"")
            if not node_name:
                raise Invalid.of("Binding", name, [FieldError("target.name", "Required value")])
            if self.conflict_resolver:
                node = self._bucket(Node).get(node_name)
                why = self.accounting.check(old, node, node_name)  # type: ignore[arg-type]
                if why is None and self.pod_conflicts is not None and isinstance(node, Node):
                    why = self._pod_conflict(old, node)
                if why is not None:
                    raise BindingConflict.over_commit(name, why)
            rv = self._next_rv()
            now_s = format_time(self.now())
            raw = dict(old.raw)
            spec = dict(raw.get("spec") or {})
            spec["nodeName"] = node_name
            raw["spec"] = spec
            status = dict(raw.get("status") or {})
            # ClearingNominatedNodeNameAfterBinding (beta, on in 1.36): the pod is where it goes.
            status.pop("nominatedNodeName", None)
            conds = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
            conds.append(self._scheduled_condition(now_s))
            status["conditions"] = conds
            raw["status"] = status
            md = dict(raw["metadata"])
            md["resourceVersion"] = str(rv)
            if annotations:
                md["annotations"] = {**(md.get("annotations") or {}), **annotations}
            raw["metadata"] = md
            new = old.shallow_copy()
            new.raw = raw
            new.node_name = node_name
            new.resource_version = str(rv)
            new.conditions = conds
            new.nominated_node_name = ""
            if annotations:
                new.annotations = md["annotations"]
            if self.direct_binding_commit:
                self._commit_binding(old, new, rv)
            else:
                self._commit(Pod, MODIFIED, old, new, rv)
        self._written()
        return new

    def _bind_fast(self, namespace: str, name: str, node_name: str, uid: str | None,
                   annotations: dict[str, str] | None) -> Pod:
        """:meth:`bind` with :meth:`_commit_binding` (``direct_binding_commit``) and the shared
        PodScheduled condition (``share_status_values``) in one body, under the lock: the same
        checks, errors, manifest, object and commit steps in the same order, without the calls
        between them (bucket, version, clock and condition lookups), and the node ledger read
        once (``NodeAccounting.check_charge``: the requests and host ports the check reads are
        what ``add`` charges, the bound pod sharing the parsed containers and their cache).
        ``FAST_BIND = False``: :meth:`bind`'s own steps (the reference)."""
        with self._lock:
            objects = self._objects
            pods = objects["Pod"]
            old = pods.get(f"{namespace}/{name}")
            if old is None:
                raise NotFound.of("pods", name)
            assert isinstance(old, Pod)
            if uid and uid != old.uid:
                raise Conflict.of("pods", name, f"Precondition failed: UID in precondition: {uid}, UID in object "
                                                f"meta: {old.uid}")
            if old.deletion_timestamp is not None:
                raise Conflict.of("pods", name, "pod is being deleted, cannot be assigned to a host")
            if old.node_name:
                raise Conflict.of("pods", name, f"pod {name} is already assigned to node \"{old.node_name}\"")
            if not node_name:
                raise Invalid.of("Binding", name, [FieldError("target.name", "Required value")])
            accounting = self.accounting
            charge = None
            if self.conflict_resolver:
                node = objects["Node"].get(node_name)
                why, charge = accounting.check_charge(old, node, node_name)  # type: ignore[arg-type]
                if why is None and self.pod_conflicts is not None and isinstance(node, Node):
                    why = self._pod_conflict(old, node)
                if why is not None:
                    raise BindingConflict.over_commit(name, why)
            self._rv = rv = self._rv + 1
            rv_s = str(rv)
            now_s = format_time(self.clock.now())
            raw = dict(old.raw)
            spec = dict(raw.get("spec") or {})
            spec["nodeName"] = node_name
            raw["spec"] = spec
            status = dict(raw.get("status") or {})
            # ClearingNominatedNodeNameAfterBinding (beta, on in 1.36): the pod is where it goes.
            status.pop("nominatedNodeName", None)
            conds = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
            at, cond = self._scheduled_at  # _scheduled_condition's shared dict
            if at != now_s:
                cond = {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_s}
                self._scheduled_at = (now_s, cond)
            conds.append(cond)
            status["conditions"] = conds
            raw["status"] = status
            md = dict(raw["metadata"])
            md["resourceVersion"] = rv_s
            if annotations:
                md["annotations"] = {**(md.get("annotations") or {}), **annotations}
            raw["metadata"] = md
            new = old.shallow_copy()
            new.raw = raw
            new.node_name = node_name
            new.resource_version = rv_s
            new.conditions = conds
            new.nominated_node_name = ""
            if annotations:
                new.annotations = md["annotations"]
            # _commit_binding's steps.
            for hook in self.on_commit:
                hook(MODIFIED, "Pod", new, rv)
            key = new.key
            pods[key] = new
            if self._terminating:
                self._terminating.pop(key, None)
            if charge is None:  # (no conflict resolver: nothing checked)
                accounting.add(new)
            else:
                accounting.add_charged(new, charge)
            if self.pod_conflicts is not None:
                self.pod_conflicts.update(old, new)
            self.watch_cache.commit("Pod", MODIFIED, old, new, rv)
        return new

    def _commit_binding(self, old: Pod, new: Pod, rv: int) -> None:
        """:meth:`_commit` of a binding (``_commit(Pod, MODIFIED, old, new, rv)``) with what the
        binding already knows taken as known: the kind is Pod (no admission kind, no claim or
        Service), the event a modification, both versions Pods with the same key, the new one
        not being deleted (:meth:`bind` refuses a pod being deleted), and the old one bound to no
        node, so the ledger's ``update(old, new)`` has nothing to take back (``remove`` of an
        unbound pod does nothing and the two charges differ by node) and is ``add(new)``. The
        same steps in the same order: hooks, the bucket, the terminating set, the ledger, the
        resolver's pod conflicts, the watch cache."""
        for hook in self.on_commit:
            hook(MODIFIED, "Pod", new, rv)
        key = new.key
        self._objects["Pod"][key] = new
        if self._terminating:
            self._terminating.pop(key, None)
        self.accounting.add(new)
        if self.pod_conflicts is not None:
            self.pod_conflicts.update(old, new)
        self.watch_cache.commit("Pod", MODIFIED, old, new, rv)

    def _scheduled_condition(self, now_s: str) -> dict[str, Any]:
        """The PodScheduled=True condition a binding at ``now_s`` writes: one dict for all the
        bindings of an instant (stored manifests are never changed in place) unless
        ``share_status_values`` is off (the reference: a dict per binding, equal)."""
        at, cond = self._scheduled_at
        if at != now_s or not self.share_status_values:
            cond = {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_s}
            self._scheduled_at = (now_s, cond)
        return cond

    def enable_pod_conflicts(self) -> None:
        """With the conflict resolver on, also refuse bindings that break a required pod
        anti-affinity, a DoNotSchedule topology spread or a ReadWriteOncePod claim given the pods
        already bound (``ksched.api.podconflicts``), and claim writes that allocate a device
        another claim holds (``ksched.api.deviceconflicts``): for several schedulers sharing this
        server. One scheduler needs none of it (and its own bindings in flight could be refused)."""
        with self._lock:
            if self.pod_conflicts is None:
                bound = BoundPods()
                for p in self._bucket(Pod).values():
                    bound.add(p)  # type: ignore[arg-type]
                devices = DeviceAllocations(self._device_capacity)
                for c in self._bucket(ResourceClaim).values():
                    devices.update(None, c)
                self.pod_conflicts = bound
                self.device_conflicts = devices

    def _device_capacity(self, key: tuple[str, str, str]) -> dict[str, int] | None:
        return slice_capacity(self._bucket(ResourceSlice).values(), key)

    def _pod_conflict(self, pod: Pod, node: Node) -> str | None:
        assert self.pod_conflicts is not None
        nodes = self._bucket(Node)
        namespaces = self._bucket(Namespace)
        claims = self._bucket(PersistentVolumeClaim)

        def node_of(name: str) -> Node | None:
            n = nodes.get(name)
            return n if isinstance(n, Node) else None

        def ns_labels(name: str) -> dict[str, str] | None:
            ns = namespaces.get(name)
            return ns.labels if ns is not None else None

        def claim_of(namespace: str, name: str) -> PersistentVolumeClaim | None:
            c = claims.get(f"{namespace}/{name}")
            return c if isinstance(c, PersistentVolumeClaim) else None

        return pod_conflict(pod, node, self.pod_conflicts, nodes=[n for n in nodes.values() if isinstance(n, Node)],
                            node_of=node_of, ns_labels=ns_labels, claim_of=claim_of)

    def evict(self, namespace: str, name: str, grace_period_seconds: int | None = None) -> KubeObject:
        """``pods/eviction``: delete the pod unless a PodDisruptionBudget forbids it (429)."""
        with self._lock:
            pod = self._bucket(Pod).get(f"{namespace}/{name}")
            if pod is None:
                raise NotFound.of("pods", name)
            assert isinstance(pod, Pod)
            ignore_pdb = pod.phase in ("Succeeded", "Failed", "Pending") or pod.deletion_timestamp is not None
            if not ignore_pdb:
                pdbs = [p for p in self._bucket(PodDisruptionBudget).values()
                        if isinstance(p, PodDisruptionBudget) and p.matches(pod)]
                if len(pdbs) > 1:
                    raise InternalError("This pod has more than one PodDisruptionBudget, which the eviction "
                                        "subresource does not support.")
                if pdbs:
                    pdb = pdbs[0]
                    if pdb.disruptions_allowed <= 0:
                        raise TooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.",
                                              causes=[{"reason": "DisruptionBudget",
                                                       "message": f"The disruption budget {pdb.name} needs "
                                                                  f"{pdb.desired_healthy} healthy pods and has "
                                                                  f"{pdb.current_healthy} currently"}])
                    status = dict(pdb.raw.get("status") or {})
                    status["disruptionsAllowed"] = pdb.disruptions_allowed - 1
                    status["disruptedPods"] = {**(status.get("disruptedPods") or {}),
                                               pod.name: format_time(self.now())}
                    if status["disruptionsAllowed"] == 0:
                        set_disruption_allowed_condition(status, format_time(self.now()))
                    self._write_status(PodDisruptionBudget, pdb, status)
            obj = self._delete_unlocked(Pod, pod, DeleteOptions(grace_period_seconds))
        self._written()
        return obj

    def _write_status(self, cls: type[KubeObject], old: KubeObject, status: dict[str, Any]) -> KubeObject:
        rv = self._next_rv()
        raw = _with_meta(old.raw, resourceVersion=str(rv))
        raw["status"] = status
        new = cls.from_dict(raw)
        self._commit(cls, MODIFIED, old, new, rv)
        return new
