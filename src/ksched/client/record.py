"""Event recording (``k8s.io/client-go/tools/record``): core/v1 Events about an object, with the
aggregation an event broadcaster does (a repeat of the same event bumps its count). Best effort:
an event the API refuses is dropped, as upstream's broadcaster drops it."""

from __future__ import annotations

import logging
import zlib
from typing import Any

from ksched.api.errors import ApiError
from ksched.api.meta import KubeObject, format_time

__all__ = ["EventRecorder"]

log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(self, client: Any, clock: Any, component: str = "default-scheduler", enabled: bool = True,
                 deterministic_names: bool = False) -> None:
        self.client = client
        self.clock = clock
        self.component = component
        self.enabled = enabled
        self.deterministic_names = deterministic_names or getattr(clock, "virtual", False)
        self._seen: dict[tuple[str, str, str], tuple[str, int]] = {}
        self._counter = 0
        # Deterministic names carry a tag of the component, so two recorders (the scheduler's,
        # a controller's) never pick the same name for events about one object.
        self._tag = zlib.crc32(component.encode()) & 0xFFFF
        self.recorded = 0
        # The in-process client can take ownership of the manifests we build (no copy), which are
        # valid Events (a name, an involvedObject): its store need not validate them again.
        self._owned = {"owned": True, "validated": True} if hasattr(client, "store") else {}

    def event(self, obj: KubeObject, etype: str, reason: str, action: str, message: str) -> None:
        if not self.enabled:
            return
        self.recorded += 1
        now = self.clock.now()
        key = (obj.uid or obj.key, reason, message)
        seen = self._seen.get(key)
        try:
            if seen is not None:
                name, count = seen
                self.client.patch("Event", obj.namespace or "default", name,
                                  {"count": count + 1, "lastTimestamp": format_time(now)})
                self._seen[key] = (name, count + 1)
                return
            # Upstream names events "<object>.<unix nanoseconds in hex>"; a counter keeps names
            # unique within a second (and deterministic on a virtual clock).
            self._counter += 1
            suffix = f"{self._tag:04x}{self._counter:012x}" if self.deterministic_names else \
                f"{int(now * 1e9) + self._counter:x}"
            name = f"{obj.name}.{suffix}"
            ts = format_time(now)
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
                "source": {"component": self.component},
                "reportingComponent": self.component,
                "reportingInstance": self.component,
            }, **self._owned)
            if len(self._seen) > 100_000:
                self._seen.clear()
            self._seen[key] = (name, 1)
        except ApiError as e:
            # Events are best effort, as upstream's broadcaster.
            log.debug("event %s for %s not recorded: %s", reason, obj.key, e)
            self._seen.pop(key, None)
