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
        from ksched.apiserver.errors import ApiError

        assert self.handle is not None
        try:
            self.handle.client.bind(pod, node_name)
        except ApiError as e:
            st = Status.as_error(e, self.name)
            st.error = e
            return st
        return None
