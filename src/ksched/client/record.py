"""Event recording (``k8s.io/client-go/tools/record``): core/v1 Events about an object, with the
aggregation an event broadcaster does (a repeat of the same event bumps its count). Best effort:
an event the API refuses is dropped, as upstream's broadcaster drops it.

Repeats are recognized as upstream's ``eventLogger`` (``events_cache.go``) does: by the event's
key in a least-recently-used cache of ``MAX_LRU_CACHE_ENTRIES`` (4096, upstream's
``maxLruCacheEntries``); a repeat refreshes its key, and the least recently seen key is
forgotten when the cache is full (a repeat after that is a new Event).

Divergences: the key is (involved object's uid, or its key without one; reason; message) within
one recorder (one source component), not upstream's joined string of source, object, type,
reason and message; the EventAggregator (similar events combined after 10 in 10 minutes) and the
spam filter (25 per object, refilled every 5 minutes) are not simulated.
"""

from __future__ import annotations

import logging
import zlib
from collections import OrderedDict
from typing import Any

from ksched.api.errors import ApiError
from ksched.api.meta import KubeObject, format_time

__all__ = ["MAX_LRU_CACHE_ENTRIES", "EventRecorder"]

MAX_LRU_CACHE_ENTRIES = 4096

# EventRecorder.event's new Event with the recorder's own helpers inline (the instant's stamp,
# the values path's lookup, the deterministic name's tag formatted once); False: through them
# (the reference).
FAST_EVENT = True

log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(self, client: Any, clock: Any, component: str = "default-scheduler", enabled: bool = True,
                 deterministic_names: bool = False) -> None:
        self.client = client
        self.clock = clock
        self.component = component
        self.enabled = enabled
        self.deterministic_names = deterministic_names or getattr(clock, "virtual", False)
        # Event key -> (the Event's name, its count), least recently seen first (an LRU cache).
        # An OrderedDict: dropping a plain dict's first key again and again costs a walk over the
        # deleted entries before it (about 3 us per event at 4096 keys, against 0.7).
        self._seen: OrderedDict[tuple[str, str, str], tuple[str, int]] = OrderedDict()
        self.max_keys = MAX_LRU_CACHE_ENTRIES
        self._counter = 0
        # Deterministic names carry a tag of the component, so two recorders (the scheduler's,
        # a controller's) never pick the same name for events about one object.
        self._tag = zlib.crc32(component.encode()) & 0xFFFF
        self._tag_hex = f"{self._tag:04x}"  # (its formatting in a deterministic name, made once)
        self.recorded = 0
        self._stamp: tuple[float | None, str] = (None, "")  # the last instant, formatted
        # The in-process client can take ownership of the manifests we build (no copy), which are
        # valid Events (a name, an involvedObject): its store need not validate them again.
        self._owned = {"owned": True, "validated": True} if hasattr(client, "store") else {}
        # Every Event's source: one dict for them all (the store never changes a manifest in
        # place), not one per Event (about 180 bytes each).
        self._source = {"component": component}
        # An in-process client takes a new Event as its values (``create_recorded_event``: no
        # manifest built, read back and checked by the store); it answers None where the store
        # would not store the manifest as the recorder's layout, and the manifest is created.
        # Looked up again when ``client`` is replaced (see :meth:`_values_path`).
        self._values_client: Any = None
        self._create_values: Any = None

    def _values_path(self) -> Any:
        """The client's ``create_recorded_event``, or None: only a method its class defines (a
        wrapper that hands other attributes to an inner client, one that records or refuses
        creates, gets every Event as a manifest through its own ``create``)."""
        client = self.client
        if client is not self._values_client:
            self._values_client = client
            self._create_values = client.create_recorded_event \
                if callable(getattr(type(client), "create_recorded_event", None)) else None
        return self._create_values

    def _format(self, now: float) -> str:
        """``format_time(now)``, made once per instant (events come in bursts of one instant)."""
        at, text = self._stamp
        if at != now:
            text = format_time(now)
            self._stamp = (now, text)
        return text

    def event(self, obj: KubeObject, etype: str, reason: str, action: str, message: str) -> None:
        if not self.enabled:
            return
        self.recorded += 1
        now = self.clock.now()
        key = (obj.uid or obj.key, reason, message)
        seen = self._seen.pop(key, None)  # (put back below: the most recently seen key)
        try:
            if seen is not None:
                name, count = seen
                self.client.patch("Event", obj.namespace or "default", name,
                                  {"count": count + 1, "lastTimestamp": self._format(now)})
                self._seen[key] = (name, count + 1)
                return
            # Upstream names events "<object>.<unix nanoseconds in hex>"; a counter keeps names
            # unique within a second (and deterministic on a virtual clock).
            self._counter += 1
            if FAST_EVENT:
                # The same name, stamp and values path: the tag's digits made once, _format and
                # _values_path inline (each looked up again only when the instant or the client
                # changes).
                name = f"{obj.name}.{self._tag_hex}{self._counter:012x}" if self.deterministic_names else \
                    f"{obj.name}.{int(now * 1e9) + self._counter:x}"
                at, ts = self._stamp
                if at != now:
                    ts = format_time(now)
                    self._stamp = (now, ts)
                direct = self._create_values if self.client is self._values_client else self._values_path()
            else:
                suffix = f"{self._tag:04x}{self._counter:012x}" if self.deterministic_names else \
                    f"{int(now * 1e9) + self._counter:x}"
                name = f"{obj.name}.{suffix}"
                ts = self._format(now)
                direct = self._values_path()
            if direct is None or direct(
                    name, obj.namespace or "default",
                    (obj.API_VERSION, obj.KIND, obj.namespace, obj.name, obj.uid, obj.resource_version),
                    reason, message, etype, action, ts, self.component) is None:
                self._create(obj, etype, reason, action, message, name, ts)
            seen_keys = self._seen
            if len(seen_keys) >= self.max_keys:
                seen_keys.popitem(last=False)  # the least recently seen
            seen_keys[key] = (name, 1)
        except ApiError as e:
            # Events are best effort, as upstream's broadcaster.
            log.debug("event %s for %s not recorded: %s", reason, obj.key, e)
            self._seen.pop(key, None)

    def _create(self, obj: KubeObject, etype: str, reason: str, action: str, message: str, name: str,
                ts: str) -> None:
        """Create the new Event's manifest (the reference for ``create_recorded_event``)."""
        self.client.create({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": obj.namespace or "default"},
            "involvedObject": {"apiVersion": obj.API_VERSION, "kind": obj.KIND, "namespace": obj.namespace,
                               "name": obj.name, "uid": obj.uid, "resourceVersion": obj.resource_version},
            "reason": reason,
            "message": message,
            "type": etype,
            "action": action,
            "count": 1,
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "source": self._source if self._source["component"] == self.component else
            {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.component,
        }, **self._owned)
