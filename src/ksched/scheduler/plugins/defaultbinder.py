"""DefaultBinder: binds through the ``pods/binding`` subresource."""

from __future__ import annotations

from ksched.api.pod import Pod
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import BindPlugin
from ksched.scheduler.framework.status import Status

__all__ = ["DefaultBinder"]


class DefaultBinder(BindPlugin):
    name = "DefaultBinder"

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Any error of the binding call becomes an Error status (upstream's AsStatus(err)); the
        original exception (e.g. an ApiError with its code) stays in ``status.error``."""
        try:
            if self.handle is None or self.handle.client is None:
                raise RuntimeError("DefaultBinder has no API client")
            self.handle.client.bind(pod, node_name)
        except Exception as e:
            return Status.as_error(e, self.name)
        return None
