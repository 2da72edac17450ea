"""The scheduler's Pod handlers registered as one (``eventhandlers.COMBINED_POD_HANDLERS``) make
the same calls, in the same order, as the filtered pair they replace (the reference), with and
without the short paths of its updates (``eventhandlers.FAST_POD_UPDATES``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.loader import LoadResult, build_objects, read_manifests
from ksched.api.pod import Pod
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler
from ksched.scheduler import eventhandlers
from ksched.sim.realistic import generate
from ksched.sim.report import build_report, write_json
from ksched.sim.simulation import Simulation
from ksched.testing import make_pod


class _Recorder:
    """Any method call is logged as (owner, name, args); ``is_assumed`` answers from the pod."""

    def __init__(self, owner: str, log: list[tuple[Any, ...]]) -> None:
        self._owner = owner
        self._log = log

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            self._log.append((self._owner, name, *(_ident(a) for a in args)))
            if name == "is_assumed":
                return args[0].name.endswith("a")
            return 0
        return call


def _ident(a: Any) -> Any:
    if isinstance(a, DeletedFinalStateUnknown):
        return ("dfsu", id(a.obj))
    if isinstance(a, Pod | _NotAPod):
        return id(a)
    return repr(a)


class _NotAPod:
    node_name = "n1"
    name = "x"
    key = "ns/x"
    uid = "u-x"


class _Informer:
    def __init__(self) -> None:
        self.handlers: list[EventHandler] = []

    def add_handler(self, h: EventHandler) -> None:
        self.handlers.append(h)


class _Factory:
    def __init__(self) -> None:
        self.informers: dict[str, _Informer] = {}

    def informer(self, kind: str) -> _Informer:
        return self.informers.setdefault(kind, _Informer())


class _Target:
    def __init__(self, log: list[tuple[Any, ...]]) -> None:
        self.informers = _Factory()
        self.cache = _Recorder("cache", log)
        self.queue = _Recorder("queue", log)
        self.queue.nominator = _Recorder("nominator", log)  # type: ignore[attr-defined]
        self.profiles = {"default-scheduler": _Recorder("fw", log)}
        self.node_filter = None
        self._log = log

    def responsible_for(self, pod: Pod) -> bool:
        return pod.scheduler_name in self.profiles and not pod.name.startswith("elsewhere")

    def watches(self, kind: str) -> bool:
        return False


def _handlers(combined: bool, fast: bool = True) -> tuple[list[EventHandler], list[tuple[Any, ...]]]:
    log: list[tuple[Any, ...]] = []
    target = _Target(log)
    eventhandlers.COMBINED_POD_HANDLERS = combined
    eventhandlers.FAST_POD_UPDATES = fast
    try:
        eventhandlers.add_all_event_handlers(target)  # type: ignore[arg-type]
    finally:
        eventhandlers.COMBINED_POD_HANDLERS = True
        eventhandlers.FAST_POD_UPDATES = True
    return target.informers.informer("Pod").handlers, log


def _pod(name: str, node: str, phase: str, sched: str, rv: str) -> Pod:
    p = make_pod(name, uid=f"u-{name}", node_name=node, phase=phase, scheduler_name=sched)
    return Pod({**p.raw, "metadata": {**p.raw["metadata"], "resourceVersion": rv}})


_pods = st.builds(_pod,
    st.sampled_from(["p", "pa", "elsewhere"]), st.sampled_from(["", "n1", "n2"]),
    st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]),
    st.sampled_from(["default-scheduler", "other-scheduler"]), st.sampled_from(["1", "2"]))
_objs = st.one_of(_pods, st.just(None))  # None: an object that is not a Pod
_events = st.lists(st.tuples(st.sampled_from(["add", "update", "status", "delete", "dfsu"]), _objs, _objs),
                   min_size=1, max_size=12)


def _status_write(a: Pod, phase: str) -> Pod:
    """``a`` after a write of its status (the parsed spec and labels shared, as the store's)."""
    b = a.with_status({**a.raw, "status": {**a.raw.get("status", {}), "phase": phase}})
    b.resource_version = a.resource_version + "0"
    return b


@settings(max_examples=300, deadline=None)
@given(_events, st.booleans())
def test_combined_handler_makes_the_filtered_pairs_calls(events: list[tuple[str, Any, Any]], fast: bool) -> None:
    combined, log_c = _handlers(True, fast)
    reference, log_r = _handlers(False)
    assert len(combined) == 1 and len(reference) == 2
    not_a_pod = _NotAPod()
    for kind, a, b in events:
        a = not_a_pod if a is None else a
        b = not_a_pod if b is None else b
        if kind == "status" and isinstance(a, Pod):
            kind, b = "update", _status_write(a, b.phase if isinstance(b, Pod) else "Running")
        for hs in (combined, reference):
            for h in hs:
                if kind == "add":
                    h.add(a)
                elif kind in ("update", "status"):
                    h.update(a, b)
                elif kind == "delete":
                    h.delete(a)
                else:
                    h.delete(DeletedFinalStateUnknown("ns/p", a))
        assert log_c == log_r
    assert log_c == log_r


def test_the_reference_pair_is_what_the_flag_restores() -> None:
    """With the flag off, the two filtered handlers; a bound pod's update is the cache's add and
    the queue's delete both ways."""
    combined, log_c = _handlers(True)
    reference, log_r = _handlers(False)
    assert [h.filter is not None for h in reference] == [True, True]
    assert combined[0].filter is None
    old = _pod("p", "", "Pending", "default-scheduler", "1")
    new = _pod("p", "n1", "Pending", "default-scheduler", "2")
    combined[0].update(old, new)
    for h in reference:
        h.update(old, new)
    assert [e[:2] for e in log_c] == [("cache", "add_pod"), ("queue", "assigned_pod_added"), ("queue", "delete"),
                                     ("fw", "reject_waiting_pod")]
    assert log_c == log_r


def _report(directory: Path) -> str:
    res = LoadResult()
    manifests = read_manifests([str(directory)], res)
    build_objects(manifests, res, unknown_kinds="skip")
    sim = Simulation(None, seed=0)
    existing = [i for i, m in enumerate(res.manifests) if m.existing]
    assert not sim.load(res.objects, existing, owned=True, validated=True)
    result = sim.run()
    out = io.StringIO()
    write_json(build_report(sim, result), out)
    return out.getvalue()


def test_whole_simulations_report_the_same_either_way(tmp_path: Path, monkeypatch: Any) -> None:
    generate(tmp_path, nodes=12, pods=240, apps=8, seed=5)
    fast = _report(tmp_path)
    monkeypatch.setattr(eventhandlers, "FAST_POD_UPDATES", False)
    assert _report(tmp_path) == fast  # the combined handler's general path
    monkeypatch.setattr(eventhandlers, "COMBINED_POD_HANDLERS", False)
    reference = _report(tmp_path)
    assert fast == reference
    assert '"nodeName": "' in fast or '"node": "' in fast
