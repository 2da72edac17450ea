"""What a simulated container does, and the pod status a kubelet reports for it: the
``ksched.io/`` annotations that set run times and exit codes, the restart rule and
CrashLoopBackOff of ``pkg/kubelet`` (``kuberuntime_manager.go`` doBackOff with client-go's
``flowcontrol.Backoff``: 10 s doubling to 300 s, forgotten when more than 600 s passed between
the last back-off and a container's exit; ``pkg/api/v1/pod/util.go`` ShouldContainerBeRestarted),
and the container statuses and pod conditions the status manager writes.

Annotations (on the pod, or on the pod template of a Job, ReplicaSet... -- controllers copy
template annotations to the pods they create):

* ``ksched.io/run-seconds``: how long the pod's containers run before they exit (default: for
  ever).
* ``ksched.io/exit-code``: the code they exit with (default 0).
* ``ksched.io/termination-seconds``: how long they take to stop once the pod is deleted
  (default 1 s, a process exiting on SIGTERM); capped by the deletion's grace period, after
  which they are killed (exit code 137).

Divergences: all of a pod's containers run and exit together; init containers complete at once;
probes, lifecycle hooks and the pod's activeDeadlineSeconds are not simulated; no kubelet events.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ksched.api.meta import format_time
from ksched.api.pod import Pod

__all__ = [
    "DEFAULT_TERMINATION_SECONDS",
    "EXIT_CODE_ANNOTATION",
    "RUN_SECONDS_ANNOTATION",
    "TERMINATION_SECONDS_ANNOTATION",
    "CrashLoopBackOff",
    "exit_code",
    "go_duration",
    "kill_delay",
    "run_seconds",
    "should_restart",
    "stop_delay",
]

log = logging.getLogger(__name__)

RUN_SECONDS_ANNOTATION = "ksched.io/run-seconds"
EXIT_CODE_ANNOTATION = "ksched.io/exit-code"
TERMINATION_SECONDS_ANNOTATION = "ksched.io/termination-seconds"
DEFAULT_TERMINATION_SECONDS = 1.0

# The exit codes of a container stopped on SIGTERM, and killed when its grace period ran out.
SIGTERM_EXIT_CODE = 143
SIGKILL_EXIT_CODE = 137

# kuberuntime's minimal shutdown window (minimumGracePeriodInSeconds).
MINIMUM_GRACE_PERIOD_SECONDS = 2

BACKOFF_INITIAL = 10.0
BACKOFF_MAX = 300.0


def _seconds(pod: Pod, key: str) -> float | None:
    v = pod.annotations.get(key)
    if v is None:
        return None
    try:
        s = float(v)
    except ValueError:
        log.warning("pod %s: annotation %s=%r is not a number of seconds; ignored", pod.key, key, v)
        return None
    if s < 0 or s != s:
        log.warning("pod %s: annotation %s=%r is negative; ignored", pod.key, key, v)
        return None
    return s


def run_seconds(pod: Pod) -> float | None:
    """How long the pod's containers run (None: until the pod is deleted)."""
    return _seconds(pod, RUN_SECONDS_ANNOTATION)


def exit_code(pod: Pod) -> int:
    v = pod.annotations.get(EXIT_CODE_ANNOTATION)
    if v is None:
        return 0
    try:
        return int(v)
    except ValueError:
        log.warning("pod %s: annotation %s=%r is not an integer; exit code 0", pod.key, EXIT_CODE_ANNOTATION, v)
        return 0


def stop_delay(pod: Pod) -> tuple[float, bool]:
    """How long a deleted pod's containers take to stop, and whether they are killed (they
    would take longer than the grace period)."""
    want = _seconds(pod, TERMINATION_SECONDS_ANNOTATION)
    want = DEFAULT_TERMINATION_SECONDS if want is None else want
    grace = pod.deletion_grace_period_seconds
    if grace is None:
        grace = pod.termination_grace_period_seconds
    if want > grace:
        return float(grace), True
    return want, False


def kill_delay(pod: Pod, grace_period: int) -> tuple[float, bool]:
    """How long a pod the kubelet itself terminates (an eviction) takes to stop, and whether it
    is killed: its containers get SIGTERM and stop after ``ksched.io/termination-seconds``
    (default 1 s), or are killed once the grace period is over -- which the runtime never makes
    shorter than 2 s (``kuberuntime_container.go`` minimumGracePeriodInSeconds)."""
    want = _seconds(pod, TERMINATION_SECONDS_ANNOTATION)
    want = DEFAULT_TERMINATION_SECONDS if want is None else want
    window = float(max(grace_period, MINIMUM_GRACE_PERIOD_SECONDS))
    if want > window:
        return window, True
    return want, False


def restart_policy(pod: Pod) -> str:
    return str((pod.raw.get("spec") or {}).get("restartPolicy") or "Always")


def should_restart(policy: str, code: int) -> bool:
    """ShouldContainerBeRestarted for an exited container of a pod not being deleted."""
    if policy == "Never":
        return False
    if policy == "OnFailure":
        return code != 0
    return True


def go_duration(seconds: float) -> str:
    """Go's time.Duration.String for whole seconds: 10s, 1m20s, 5m0s, 1h0m0s."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s}s"
    h, m = divmod(m, 60)
    return f"{h}h{m}m{s}s"


@dataclass
class _Entry:
    backoff: float
    last_update: float


@dataclass
class CrashLoopBackOff:
    """The kubelet's per-container restart back-off (client-go flowcontrol.Backoff)."""

    initial: float = BACKOFF_INITIAL
    maximum: float = BACKOFF_MAX
    _entries: dict[Any, _Entry] = field(default_factory=dict)

    def _expired(self, event_time: float, e: _Entry) -> bool:
        return event_time - e.last_update > 2 * self.maximum

    def in_backoff_since(self, key: Any, event_time: float, now: float) -> bool:
        e = self._entries.get(key)
        if e is None or self._expired(event_time, e):
            return False
        return now - event_time < e.backoff

    def next(self, key: Any, event_time: float, now: float) -> None:
        e = self._entries.get(key)
        if e is None or self._expired(event_time, e):
            self._entries[key] = _Entry(self.initial, now)
        else:
            e.backoff = min(e.backoff * 2, self.maximum)
            e.last_update = now

    def get(self, key: Any) -> float:
        e = self._entries.get(key)
        return e.backoff if e is not None else 0.0

    def restart_at(self, key: Any, finished: float, now: float) -> float:
        """When a container that exited at ``finished`` restarts: at once unless it is backing off."""
        e = self._entries.get(key)
        if e is None or self._expired(finished, e):
            return now
        return max(now, finished + e.backoff)

    def forget(self, key: Any) -> None:
        self._entries.pop(key, None)


# ---------------------------------------------------------------- status builders


# Equal status values written at one instant (a condition, a container's running state, an empty
# lastState) are one object for every pod: the statuses the kubelet writes are handed to the store, and nothing
# changes a stored manifest in place (its readers copy before they change anything). 20,000 pods
# started at a few instants hold a few dozen condition dicts instead of 60,000. False: a new
# object for each pod (the reference; equal values).
SHARE_STATUS_VALUES = True
_SHARED_MAX = 256  # distinct values kept (those of the last instants): cleared when full
_shared: dict[tuple[Any, ...], dict[str, Any]] = {}


def _share(key: tuple[Any, ...], make: Any) -> dict[str, Any]:
    """The value of ``key`` made once (``make()``), while sharing is on."""
    if not SHARE_STATUS_VALUES:
        return make()  # type: ignore[no-any-return]
    try:
        v = _shared.get(key)
    except TypeError:  # an unhashable value (a malformed loaded status): not shared
        return make()  # type: ignore[no-any-return]
    if v is None:
        if len(_shared) >= _SHARED_MAX:
            _shared.clear()
        v = _shared[key] = make()
    return v


_ALIKE_WHEN_EQUAL = (str, int, bool)


def _make_condition(ctype: str, status: str, ts: str, reason: str = "", message: str = "") -> dict[str, Any]:
    c: dict[str, Any] = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": ts}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def _condition(ctype: str, status: str, ts: str, reason: str = "", message: str = "") -> dict[str, Any]:
    """A pod condition (shared with every other equal one: do not change it in place). Only a
    transition time of a type whose equal values are alike (a string, an int, a bool) is shared:
    a loaded status's may be any value, and equal ones are not always alike (YAML timestamps of
    one instant in two offsets: a new dict each, as the reference)."""
    if type(ts) not in _ALIKE_WHEN_EQUAL:
        return _make_condition(ctype, status, ts, reason, message)
    return _share(("c", ctype, status, type(ts), ts, reason, message),
                  lambda: _make_condition(ctype, status, ts, reason, message))


# The conditions list of a pod whose conditions are the very objects another pod's were, at the
# same instant with the same readiness, reason and message, is that pod's list: one list for the
# pods a kubelet starts at one instant (their binding's PodScheduled condition is one object,
# ``Store.share_status_values``), made once. Only while SHARE_STATUS_VALUES is on (the same rule:
# nothing changes a stored manifest in place). False: a list for each pod (the reference).
SHARE_CONDITION_LISTS = True
_LISTS_MAX = 256  # distinct lists kept (those of the last instants): cleared when full
# (now, ready, reason, message, ids of the pod's conditions...) -> (those conditions, the list).
_lists: dict[tuple[Any, ...], tuple[tuple[Any, ...], list[dict[str, Any]]]] = {}


def pod_conditions(pod: Pod, now: float, ready: bool, reason: str = "", message: str = "") -> list[dict[str, Any]]:
    """The pod's conditions with Initialized True and ContainersReady/Ready as given (a condition
    whose status does not change keeps its transition time). Shared with an earlier pod's whose
    conditions were the same objects (``SHARE_CONDITION_LISTS``): do not change it in place."""
    if not (SHARE_CONDITION_LISTS and SHARE_STATUS_VALUES):
        return _pod_conditions(pod, now, ready, reason, message)
    conds = pod.conditions
    key = (now, ready, reason, message, *map(id, conds))
    hit = _lists.get(key)
    if hit is not None:
        return hit[1]
    out = _pod_conditions(pod, now, ready, reason, message)
    if len(_lists) >= _LISTS_MAX:
        _lists.clear()
    # The entry holds the conditions: while it is kept, no other object has their ids.
    _lists[key] = (tuple(conds), out)
    return out


def _pod_conditions(pod: Pod, now: float, ready: bool, reason: str, message: str) -> list[dict[str, Any]]:
    ts = format_time(now)
    keep = [c for c in pod.conditions if c.get("type") not in ("Initialized", "ContainersReady", "Ready")]
    out = list(keep)
    for ctype, status, r, m in (("Initialized", "True", "", ""),
                                ("ContainersReady", "True" if ready else "False", reason, message),
                                ("Ready", "True" if ready else "False", reason, message)):
        old = pod.condition(ctype)
        since = ts
        if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
            since = old["lastTransitionTime"]
        out.append(_condition(ctype, status, since, r, m))
    return out


def _container_id(pod: Pod, name: str, restart: int) -> str:
    return f"ksched://{pod.uid}/{name}/{restart}"


def container_status(pod: Pod, c: Any, state: dict[str, Any], restart_count: int,
                     last_state: dict[str, Any] | None = None, ready: bool = False) -> dict[str, Any]:
    st: dict[str, Any] = {"name": c.name, "image": c.image, "imageID": "", "ready": ready,
                          "restartCount": restart_count, "started": "running" in state, "state": state,
                          "lastState": last_state or _share(("lastState",), dict)}
    if "waiting" not in state:
        st["containerID"] = _container_id(pod, c.name, restart_count)
    return st


# Containers started at one instant, ready, without restarts or a last state, have statuses
# equal but for the pod's containerID: each is a copy of one dict per container and instant with
# the pod's containerID added, the dicts kept per container list (the replicas of a template
# share one parsed list) and instant, so a pod costs one lookup and a copy per container.
# False: each built whole (``container_status``, the reference).
STAMP_RUNNING_STATUSES = True
_STAMPS_MAX = 1024  # container lists kept (those of the last instants): cleared when full
# id(pod.containers) -> (the containers, the instant, ((name, status without containerID), ...)).
_stamps: dict[int, tuple[Any, float, tuple[tuple[str, dict[str, Any]], ...]]] = {}


def started_statuses(pod: Pod, started: float) -> list[dict[str, Any]]:
    """The pod's container statuses when its containers have just started (ready, no restarts,
    no last state): ``container_status(pod, c, running(started), 0, ready=True)`` for each."""
    if not (STAMP_RUNNING_STATUSES and SHARE_STATUS_VALUES):
        return [container_status(pod, c, running(started), 0, ready=True) for c in pod.containers]
    containers = pod.containers
    hit = _stamps.get(id(containers))
    if hit is None or hit[0] is not containers or hit[1] != started:
        if len(_stamps) >= _STAMPS_MAX:
            _stamps.clear()
        state = running(started)
        bases = []
        for c in containers:
            base = container_status(pod, c, state, 0, ready=True)
            del base["containerID"]
            bases.append((c.name, base))
        # (the entry holds the containers: while it is kept, no other object has their id)
        hit = _stamps[id(containers)] = (containers, started, tuple(bases))
    prefix = f"ksched://{pod.uid}/"
    out = []
    for name, base in hit[2]:
        st = base.copy()
        st["containerID"] = f"{prefix}{name}/0"
        out.append(st)
    return out


def running(started: float) -> dict[str, Any]:
    """A running container's state (shared with every other equal one: do not change it)."""
    ts = format_time(started)
    return _share(("r", ts), lambda: {"running": {"startedAt": ts}})


def terminated(pod: Pod, name: str, restart: int, code: int, started: float | None, finished: float,
               reason: str | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                         "finishedAt": format_time(finished), "containerID": _container_id(pod, name, restart)}
    if started is not None:
        t["startedAt"] = format_time(started)
    return {"terminated": t}


def init_container_statuses(pod: Pod, started: float) -> list[dict[str, Any]]:
    """Init containers ran to completion at once (sidecars keep running)."""
    out = []
    for c in pod.init_containers:
        if c.is_sidecar:
            out.append(container_status(pod, c, running(started), 0, ready=True))
        else:
            out.append(container_status(pod, c, terminated(pod, c.name, 0, 0, started, started), 0))
    return out


def crash_loop_message(backoff: float, container: str, pod: Pod) -> str:
    return (f"back-off {go_duration(backoff)} restarting failed container={container} "
            f"pod={pod.name}_{pod.namespace}({pod.uid})")
