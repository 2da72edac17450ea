"""Event recording for the scheduler: core/v1 Events for pods (Scheduled, FailedScheduling,
Preempted) through ``ksched.client.record.EventRecorder``, and a background writer that keeps a
remote API server's round trips off the scheduling thread."""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from ksched.api.errors import ApiError
from ksched.client.record import EventRecorder

__all__ = ["BackgroundWriter", "EventRecorder"]

log = logging.getLogger(__name__)


class BackgroundWriter:
    """Events sent from a background thread, as upstream's event broadcaster does: a remote
    API server's round trip stays off the scheduling thread. Bounded; when full, events are
    dropped (best effort, as upstream)."""

    def __init__(self, client: Any, limit: int = 10_000) -> None:
        self.client = client
        self.dropped = 0
        self._q: queue.Queue[tuple[str, tuple[Any, ...], dict[str, Any]] | None] = queue.Queue(limit)
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

    def _put(self, op: str, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        try:
            self._q.put_nowait((op, args, kw))
        except queue.Full:
            self.dropped += 1

    def create(self, *args: Any, **kw: Any) -> None:
        kw.pop("owned", None)
        self._put("create", args, kw)

    def patch(self, *args: Any, **kw: Any) -> None:
        self._put("patch", args, kw)

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            op, args, kw = item
            try:
                getattr(self.client, op)(*args, **kw)
            except ApiError as e:
                log.debug("event not recorded: %s", e)
            except Exception as e:  # a broken connection must not end the event thread
                log.warning("event not recorded: %s", e)

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued (up to ``timeout``), then stop."""
        try:
            self._q.put(None, timeout=timeout)
        except Exception:
            return
        self._thread.join(timeout)
