"""Events handed to the store as built and valid (the event recorder's: ``create(owned=True,
validated=True)``) are stored directly (``Store._create_event``), exactly as the generic create
path stores them (``Store.direct_events = False``, the reference): the same objects, the same
errors, the same resourceVersions and watch events, whatever the namespace, quota and name."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ksched.api.errors import ApiError
from ksched.api.event import Event
from ksched.apiserver.store import Store
from ksched.client.record import EventRecorder
from ksched.clock import VirtualClock

_SLOTS = ("name", "namespace", "uid", "resource_version", "labels", "annotations", "creation_timestamp",
          "deletion_timestamp", "generation", "finalizers", "owner_references", "involved_object", "reason",
          "message", "type", "count", "source")


def _event(name: str | None, ns: str | None, api_version: str | None, extra_md: dict[str, Any]) -> dict[str, Any]:
    md: dict[str, Any] = dict(extra_md)
    if name is not None:
        md["name"] = name
    if ns is not None:
        md["namespace"] = ns
    raw: dict[str, Any] = {"kind": "Event", "metadata": md,
                           "involvedObject": {"kind": "Pod", "namespace": ns or "default", "name": "p"},
                           "reason": "Scheduled", "message": "m", "type": "Normal", "count": 1}
    if api_version is not None:
        raw = {"apiVersion": api_version, **raw}
    return raw


_ops = st.lists(st.one_of(
    st.tuples(st.just("event"), st.sampled_from(["a", "b", "", None]), st.sampled_from(["default", "other", "gone", None]),
              st.sampled_from(["v1", "v1", "events.k8s.io/v1", None]),
              st.sampled_from([{}, {"uid": "u-1", "resourceVersion": "7"}, {"generateName": "g-"},
                               {"labels": {"x": "y"}}])),
    st.tuples(st.just("namespace"), st.sampled_from(["other", "gone"])),
    st.tuples(st.just("terminate"), st.sampled_from(["other", "gone"])),
    st.tuples(st.just("quota"), st.sampled_from(["default", "other"])),
    st.tuples(st.just("tick"))), max_size=14)


def _run(direct: bool, ops: list[tuple[Any, ...]], auto_ns: bool) -> list[Any]:
    clock = VirtualClock(1000.0)
    store = Store(clock, auto_create_namespaces=auto_ns)
    store.direct_events = direct
    watch = store.watch("Event")
    out: list[Any] = []
    for op in ops:
        try:
            if op[0] == "event":
                ev = store.create(_event(*op[1:4], copy.deepcopy(op[4])), owned=True, validated=True)
                assert isinstance(ev, Event)
                out.append(("stored", json.dumps(ev.raw), [repr(getattr(ev, s)) for s in _SLOTS]))
            elif op[0] == "namespace":
                store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": op[1]}})
            elif op[0] == "terminate":
                store.delete("Namespace", "", op[1])
            elif op[0] == "quota":
                store.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": op[1]},
                              "spec": {"hard": {"count/events": "2"}}})
            else:
                clock.advance(1.5)
        except ApiError as e:
            out.append(("error", type(e).__name__, str(e)))
    out.append(("rv", store.resource_version))
    out.append(("watch", [(e.type, e.resource_version, json.dumps(e.object.raw)) for e in watch.drain()]))
    out.append(("events", sorted(json.dumps(o.raw) for o in store.items("Event"))))
    return out


@settings(max_examples=150, deadline=None)
@given(_ops, st.booleans())
@example([("namespace", "other"), ("terminate", "other"), ("event", "a", "other", "v1", {})], False)
@example([("quota", "other"), ("event", "a", "other", "v1", {}), ("event", "b", "default", "v1", {})], True)
@example([("event", "a", "default", "v1", {}), ("tick",), ("event", "a", "default", "v1", {}),
          ("event", "b", "gone", "v1", {"uid": "u-1", "resourceVersion": "7"})], True)
def test_direct_event_creates_store_what_the_generic_path_stores(ops: list[tuple[Any, ...]], auto_ns: bool) -> None:
    assert _run(True, ops, auto_ns) == _run(False, ops, auto_ns)


def test_the_recorders_events_take_the_direct_path_and_the_rest_do_not(monkeypatch: Any) -> None:
    clock = VirtualClock(1000.0)
    store = Store(clock)
    # The recorder's manifests (its Events as values: tests/apiserver/test_recorded_event_values.py).
    store.direct_recorded_events = False
    taken: list[bool] = []
    direct = Store._create_event

    def counted(self: Store, raw: dict[str, Any]) -> Event | None:
        got = direct(self, raw)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(Store, "_create_event", counted)
    from ksched.apiserver.inprocess import InProcessClient

    pod = store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                        "spec": {"containers": [{"name": "c", "image": "i"}]}})
    rec = EventRecorder(InProcessClient(store), clock, component="default-scheduler")
    rec.event(pod, "Normal", "Scheduled", "Binding", "Successfully assigned default/p to n1")
    assert taken == [True]
    ev = store.items("Event")[0]
    assert ev.creation_timestamp == 1000.0 and ev.raw["metadata"]["creationTimestamp"] == "1970-01-01T00:16:40Z"
    store.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "default"},
                  "spec": {"hard": {"count/events": "5"}}})
    rec.event(pod, "Warning", "FailedScheduling", "Scheduling", "0/1 nodes are available")
    assert taken == [True, False]  # a quota: the generic path charges it
    assert len(store.items("Event")) == 2
    store.create(_event("x", "default", "v1", {}), validated=True)  # not handed over: copied, generic
    assert taken == [True, False]

