"""Values the scheduling cycle derives from a pod's spec, shared by the pods of one template.

Replicas of one template (a Deployment's pods, one app of a manifest directory) reach the
scheduler one after the other, each a separate object parsed from its own manifest, and each
scheduled once: every value a plugin derives from the pod and keeps on it (``Pod.cached()``:
its requests and their row-cache key, its tolerations' key, its host ports, its required node
affinity, its spread constraints, its images) is worked out again for every replica, although
the result is the same for all of them.

:func:`template_cache` gives the dict those values are kept in: one dict for every pod whose
namespace, labels and spec are the same, so each value is worked out once per template. Pods
are the same template when ``marshal.dumps((namespace, labels, spec))`` gives the same bytes:
``marshal`` writes the type of every value (``1``, ``1.0`` and ``True`` differ, as do ``"1"``
and ``1``) and the order of every dict's keys, and reading the bytes back gives the value
again, so equal bytes mean values that no parser can tell apart. A manifest value ``marshal``
cannot write (a YAML timestamp, a subclass of ``dict``) makes the pod its own template (its
``Pod.cached()``). Only values that are functions of the namespace, the labels and the spec may
be kept there (the pod's name, uid, annotations, owner references and status are not part of
the key), and, as in ``Pod.cached()``, they are shared and must not be modified.

The key is made without writing the spec again for every pod (:data:`SPEC_BY_OBJECT`): the
stored pods of one template share one admitted spec dict (``Store.share_admitted_specs``), and
stored manifests are never changed in place, so the spec's bytes are written once per spec
object (``marshal`` version 2: no back-references and no interning flags, so the bytes are a
function of the value alone) and kept by the object's ``id`` together with the object itself
(an ``id`` is not reused while its entry lives). The key is then the pair of
``marshal.dumps((namespace, labels), 2)`` and those bytes: equal pairs are equal namespaces,
labels and specs, as equal bytes of the whole are; pods whose spec dicts are equal but
distinct objects find each other through the bytes. It puts together pods the reference's
bytes keep apart only for how ``marshal`` version 4 wrote their equal values (whether a string
is interned, whether an object is referenced twice: a default-size run's 20,000 pods are 200
templates by the spec object, 400 by the reference). :data:`SPEC_BY_OBJECT` off makes
:func:`template_key` of every pod (the reference).

This relies on what ``ksched.api.pod`` guarantees: a Pod's parsed spec fields are those of its
``raw`` manifest (``Pod.admitted`` shares the loaded pod's parsed containers only where
admission left them as they were; ``Pod.with_status`` keeps the same spec).

:data:`SHARED` off (``per_pod()``) keeps every value on its own pod: the reference, which
``tests/scheduler/framework/test_template.py`` holds the shared values to.

Not an upstream file: upstream's plugins compute these per pod and cycle (Go's cost for that is
small); opportunistic batching (``batch.py``) reuses whole cycles, not parts of them.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ksched.api.pod import Pod
from ksched.boundedcache import BoundedCache

__all__ = ["SHARED", "SPEC_BY_OBJECT", "known_template_cache", "labels_frozenset", "per_pod", "spec_template_key",
           "template_cache", "template_key"]

# Whether pods of one template share their derived values (False: each pod keeps its own).
SHARED = True

_KEY = "template.cache"
_OWN: dict[str, Any] = {}  # marks a pod without a template key: its values stay on it

# Whether template_cache keys pods by spec_template_key (False: template_key, the reference).
SPEC_BY_OBJECT = True

# template key -> the shared dict. Forgetting one costs only the time to work its values out again.
_TEMPLATES: BoundedCache[bytes | tuple[bytes, bytes], dict[str, Any]] = BoundedCache(4096)

# id(spec) -> (spec, marshal.dumps(spec, 2) or b"" when marshal cannot write it). The entry holds
# the spec alive, so its id is not another object's while the entry is here.
_SPEC_BYTES: BoundedCache[int, tuple[Any, bytes]] = BoundedCache(4096)


def template_key(pod: Pod) -> bytes:
    """The bytes that identify the pod's template (b"" when it has none)."""
    try:
        return marshal.dumps((pod.namespace, pod.labels, pod.raw.get("spec")))
    except ValueError:
        return b""


def spec_template_key(pod: Pod) -> tuple[bytes, bytes] | None:
    """The pod's template as ``(marshal.dumps((namespace, labels), 2), marshal.dumps(spec, 2))``,
    the spec's bytes written once per spec object (None when the pod has no template): equal for
    two pods exactly when their namespaces, labels and specs are equal values (of the same
    types, keys in the same order)."""
    spec = pod.raw.get("spec")
    hit = _SPEC_BYTES.get(id(spec))
    if hit is not None and hit[0] is spec:
        spec_bytes = hit[1]
    else:
        try:
            spec_bytes = marshal.dumps(spec, 2)
        except ValueError:
            spec_bytes = b""
        _SPEC_BYTES.put(id(spec), (spec, spec_bytes))
    if not spec_bytes:
        return None
    try:
        return marshal.dumps((pod.namespace, pod.labels), 2), spec_bytes
    except ValueError:
        return None


def template_cache(pod: Pod) -> dict[str, Any]:
    """The dict for values derived from the pod's namespace, labels and spec alone: shared by
    every pod of its template (the pod's own ``cached()`` with :data:`SHARED` off)."""
    c = pod.cached()
    if not SHARED:
        return c
    t = c.get(_KEY)
    if t is None:
        key: bytes | tuple[bytes, bytes] | None = spec_template_key(pod) if SPEC_BY_OBJECT else template_key(pod)
        if not key:
            c[_KEY] = _OWN
            return c
        t = _TEMPLATES.get(key)
        if t is None:
            t = _TEMPLATES.put(key, {})
        c[_KEY] = t
    elif t is _OWN:
        return c
    return t  # type: ignore[no-any-return]


def known_template_cache(pod: Pod) -> dict[str, Any]:
    """The pod's template dict when :func:`template_cache` has already found it for this pod
    (or for the object it was copied from: a shallow copy shares ``Pod.cached()``, as the
    assumed pod of a scheduling cycle does), else the pod's own ``cached()``. For values also
    wanted of pods that never went through a scheduling cycle here (bound pods from an
    informer), where making the key would cost more than working the value out once."""
    c = pod.cached()
    if not SHARED:
        return c
    t = c.get(_KEY)
    if t is None or t is _OWN:
        return c
    return t  # type: ignore[no-any-return]


def labels_frozenset(pod: Pod) -> frozenset[tuple[str, str]]:
    """``frozenset(pod.labels.items())``, kept by :func:`known_template_cache`."""
    c = known_template_cache(pod)
    fs = c.get("labels.frozenset")
    if fs is None:
        fs = c["labels.frozenset"] = frozenset(pod.labels.items())
    return fs  # type: ignore[no-any-return]


@contextmanager
def per_pod() -> Iterator[None]:
    """Within the block, every pod keeps its derived values to itself (the reference)."""
    global SHARED
    old = SHARED
    SHARED = False
    try:
        yield
    finally:
        SHARED = old
