"""Status codes and statuses of plugin calls, and the FitError message upstream produces.

Success is represented by ``None`` (as upstream's nil ``*Status``), which keeps the hot path
free of allocations; :func:`is_success` accepts both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import IntEnum

__all__ = [
    "Code",
    "Diagnosis",
    "FitError",
    "Status",
    "as_status",
    "is_rejected",
    "is_success",
]

NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6

    def __str__(self) -> str:
        return _CODE_NAMES[self]


_CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


class Status:
    """The result of a plugin call: a code, reasons, the plugin that produced it."""

    __slots__ = ("code", "error", "plugin", "reasons")

    def __init__(self, code: Code, *reasons: str, plugin: str = "", error: BaseException | None = None) -> None:
        self.code = code
        self.reasons: tuple[str, ...] = reasons
        self.plugin = plugin
        self.error = error

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE, *reasons, plugin=plugin)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons, plugin=plugin)

    @classmethod
    def as_error(cls, err: BaseException | str, plugin: str = "") -> Status:
        e = err if isinstance(err, BaseException) else RuntimeError(err)
        return cls(Code.ERROR, str(e), plugin=plugin, error=e)

    @classmethod
    def skip(cls) -> Status:
        return _SKIP

    def with_plugin(self, plugin: str) -> Status:
        if self.plugin == plugin:
            return self
        return Status(self.code, *self.reasons, plugin=plugin, error=self.error)

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    def is_wait(self) -> bool:
        return self.code == Code.WAIT

    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def __repr__(self) -> str:
        p = f" [{self.plugin}]" if self.plugin else ""
        return f"Status({self.code!s}{p}: {self.message()!r})"

    def __eq__(self, other: object) -> bool:
        if other is None:
            return self.code == Code.SUCCESS
        if not isinstance(other, Status):
            return NotImplemented
        return self.code == other.code and self.reasons == other.reasons

    def __hash__(self) -> int:
        return hash((self.code, self.reasons))


class WaitUntil(Status):
    """A PreBind plugin's "not yet, ask again at ``retry_at``" (clock time): where upstream's
    PreBind blocks while it polls (VolumeBinding waiting for the PV controller, DynamicResources
    for device binding conditions), a ksched PreBind returns this and the binding cycle calls it
    again then, without blocking the single-threaded scheduler. ``resume``: the index of the PreBind plugin to go on from (set by
    the runtime)."""

    __slots__ = ("resume", "retry_at")

    def __init__(self, retry_at: float, *reasons: str, plugin: str = "") -> None:
        super().__init__(Code.WAIT, *reasons, plugin=plugin)
        self.retry_at = retry_at
        self.resume = 0


_SKIP = Status(Code.SKIP)
SUCCESS = Status(Code.SUCCESS)


def is_success(s: Status | None) -> bool:
    return s is None or s.code == Code.SUCCESS


def is_rejected(s: Status | None) -> bool:
    return s is not None and s.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)


def as_status(s: Status | None) -> Status:
    return SUCCESS if s is None else s


class Diagnosis:
    """Why a pod did not fit: per-node statuses, the plugins that rejected it, messages."""

    __slots__ = (
        "absent_status",
        "node_to_status",
        "pending_plugins",
        "post_filter_msg",
        "pre_filter_msg",
        "unschedulable_plugins",
    )

    def __init__(self) -> None:
        self.node_to_status: dict[str, Status] = {}
        # Status for nodes not in node_to_status (a PreFilter node subset excluded them).
        self.absent_status: Status | None = None
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()
        self.pre_filter_msg = ""
        self.post_filter_msg = ""

    def status_of(self, node_name: str) -> Status | None:
        s = self.node_to_status.get(node_name)
        return s if s is not None else self.absent_status

    def add_plugin_of(self, s: Status) -> None:
        if s.plugin:
            if s.code == Code.PENDING:
                self.pending_plugins.add(s.plugin)
            elif s.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE):
                self.unschedulable_plugins.add(s.plugin)


class FitError(Exception):
    """No node fits a pod; the message is upstream's ``FitError.Error()``."""

    def __init__(self, pod_key: str, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        self.pod_key = pod_key
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis
        super().__init__()

    def __str__(self) -> str:
        return fit_error_message(self.num_all_nodes, self.diagnosis)


def reasons_histogram(statuses: Iterable[Status], absent: tuple[Status | None, int] | None = None) -> dict[str, int]:
    # Nodes mostly share a few Status objects: count those first, then their reasons.
    by_id: dict[int, int] = {}
    objs: dict[int, Status] = {}
    for s in statuses:
        k = id(s)
        n = by_id.get(k)
        if n is None:
            by_id[k] = 1
            objs[k] = s
        else:
            by_id[k] = n + 1
    counts: dict[str, int] = {}
    for k, n in by_id.items():
        for r in objs[k].reasons:
            counts[r] = counts.get(r, 0) + n
    if absent is not None and absent[0] is not None and absent[1] > 0:
        for r in absent[0].reasons:
            counts[r] = counts.get(r, 0) + absent[1]
    return counts


def format_histogram(counts: Mapping[str, int]) -> str:
    # Upstream sorts the formatted strings ("<count> <reason>") lexicographically.
    return ", ".join(sorted(f"{v} {k}" for k, v in counts.items()))


def fit_error_message(num_all_nodes: int, d: Diagnosis) -> str:
    msg = NO_NODE_AVAILABLE_MSG.format(num_all_nodes) + ":"
    if d.pre_filter_msg:
        msg += f" {d.pre_filter_msg}."
    else:
        absent_n = num_all_nodes - len(d.node_to_status)
        counts = reasons_histogram(d.node_to_status.values(), (d.absent_status, absent_n))
        if counts:
            msg += f" {format_histogram(counts)}."
    if d.post_filter_msg:
        # As upstream: " %v" -- the PostFilter status's message carries its own period.
        msg += f" {d.post_filter_msg}"
    return msg
