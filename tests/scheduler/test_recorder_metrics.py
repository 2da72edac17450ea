"""Event recording (aggregation like an event broadcaster) and scheduler metrics."""

from __future__ import annotations

import pytest

from ksched.api.errors import Forbidden
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.scheduler.metrics import SchedulerMetrics
from ksched.scheduler.recorder import EventRecorder
from ksched.testing import make_pod


def setup() -> tuple[VirtualClock, Store, EventRecorder]:
    clock = VirtualClock()
    store = Store(clock, auto_create_namespaces=True)
    return clock, store, EventRecorder(InProcessClient(store), clock, component="my-scheduler")


def test_events_are_created_and_repeats_aggregated():
    clock, store, rec = setup()
    pod = store.create(make_pod("p", namespace="team"))
    rec.event(pod, "Warning", "FailedScheduling", "Scheduling", "0/1 nodes are available: 1 x.")
    clock.advance(10)
    rec.event(pod, "Warning", "FailedScheduling", "Scheduling", "0/1 nodes are available: 1 x.")
    rec.event(pod, "Warning", "FailedScheduling", "Scheduling", "0/2 nodes are available: 2 y.")
    evs = sorted(store.list("Event")[0], key=lambda e: e.raw["message"])
    assert len(evs) == 2
    first = evs[0].raw
    assert first["count"] == 2
    assert first["firstTimestamp"] == "2025-01-01T00:00:00Z"
    assert first["lastTimestamp"] == "2025-01-01T00:00:10Z"
    assert first["involvedObject"]["kind"] == "Pod" and first["involvedObject"]["name"] == "p"
    assert first["involvedObject"]["uid"] == pod.uid
    assert first["source"] == {"component": "my-scheduler"} and first["reportingComponent"] == "my-scheduler"
    assert evs[0].namespace == "team"
    assert evs[1].raw["count"] == 1
    assert rec.recorded == 3


def test_event_names_are_deterministic_on_a_virtual_clock():
    names = []
    for _ in range(2):
        _, store, rec = setup()
        pod = store.create(make_pod("p", uid="fixed"))
        rec.event(pod, "Normal", "Scheduled", "Binding", "Successfully assigned default/p to n")
        names.append([e.name for e in store.list("Event")[0]])
    assert names[0] == names[1]
    assert names[0][0].startswith("p.")


def test_disabled_recorder_and_api_errors():
    _, store, rec = setup()
    pod = store.create(make_pod("p"))
    rec.enabled = False
    rec.event(pod, "Normal", "Scheduled", "Binding", "m")
    assert store.list("Event")[0] == [] and rec.recorded == 0
    rec.enabled = True

    class Refusing:
        store = None

        def create(self, obj, owned=False, validated=False):
            raise Forbidden("events are forbidden")

    rec.client = Refusing()
    rec.event(pod, "Normal", "Scheduled", "Binding", "m")  # best effort: no exception
    assert rec._seen == {}  # a later repeat tries to create it again


def test_metrics_registries_are_separate():
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.binding_conflicts.inc()
    assert a.registry.get_sample_value("ksched_binding_conflicts_total") == 1
    assert b.registry.get_sample_value("ksched_binding_conflicts_total") == 0
    a.schedule_attempts.labels("scheduled", "p").inc()
    assert a.registry.get_sample_value("scheduler_schedule_attempts_total",
                                       {"result": "scheduled", "profile": "p"}) == 1


def test_events_name_the_profile_that_scheduled_the_pod() -> None:
    """Each profile's events carry its own schedulerName as source (kubectl describe's "From")."""
    from ksched.apiserver.inprocess import InProcessClient
    from ksched.apiserver.store import Store
    from ksched.clock import VirtualClock
    from ksched.scheduler.config import parse_configuration
    from ksched.scheduler.scheduler import Scheduler
    from ksched.testing import make_node, make_pod

    clock = VirtualClock()
    store = Store(clock)
    cfg = parse_configuration({"profiles": [{"schedulerName": "default-scheduler"},
                                            {"schedulerName": "second"}]})
    sched = Scheduler(InProcessClient(store), cfg, clock=clock)
    store.create(make_node("n1").raw)
    store.create(make_pod("a", uid="").raw)
    store.create(make_pod("b", uid="", scheduler_name="second").raw)
    sched.run_until_idle()
    sources = {e.involved_object["name"]: e.source["component"] for e in store.items("Event")}
    assert sources == {"a": "default-scheduler", "b": "second"}



def test_attempts_are_counted_and_their_durations_bucketed_as_prometheus_would():
    """scheduler_schedule_attempts_total and scheduler_scheduling_attempt_duration_seconds kept as
    plain counts give the samples a Prometheus histogram with the same buckets gives (a
    duration on a bound falls in that bucket)."""
    from prometheus_client import CollectorRegistry, Histogram, generate_latest

    bounds = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10)
    ref_registry = CollectorRegistry()
    ref = Histogram("ref_seconds", "", ["result", "profile"], buckets=bounds, registry=ref_registry)
    m = SchedulerMetrics()
    for result, seconds in (("scheduled", 0.00015), ("scheduled", 0.0002), ("scheduled", 30.0),
                            ("unschedulable", 0.004)):
        m.attempts.record(result, "p", seconds)
        ref.labels(result, "p").observe(seconds)
    get = m.registry.get_sample_value
    assert get("scheduler_schedule_attempts_total", {"result": "scheduled", "profile": "p"}) == 3
    assert get("scheduler_schedule_attempts_total", {"result": "unschedulable", "profile": "p"}) == 1
    assert m.attempts.total() == 4
    for result in ("scheduled", "unschedulable"):
        for le in [repr(float(b)) for b in bounds] + ["+Inf"]:
            labels = {"result": result, "profile": "p", "le": le}
            assert get("scheduler_scheduling_attempt_duration_seconds_bucket", labels) == \
                ref_registry.get_sample_value("ref_seconds_bucket", labels), (result, le)
        for suffix in ("_count", "_sum"):
            labels = {"result": result, "profile": "p"}
            assert get("scheduler_scheduling_attempt_duration_seconds" + suffix, labels) == \
                pytest.approx(ref_registry.get_sample_value("ref_seconds" + suffix, labels))
    assert get("scheduler_scheduling_attempt_duration_seconds_bucket",
               {"result": "scheduled", "profile": "p", "le": "0.0002"}) == 2
    text = generate_latest(m.registry).decode()
    assert 'scheduler_schedule_attempts_total{profile="p",result="scheduled"} 3.0' in text
