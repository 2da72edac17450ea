"""Scheduler metrics (Prometheus), named as upstream's where upstream has them. Each scheduler
owns a registry, so several schedulers (and tests) never collide.

The opportunistic-batching metrics change on every scheduling cycle, so they are kept as plain
counts (:class:`BatchStats`, a few integer increments a cycle, on the scheduling thread) and
turned into Prometheus samples only when the registry is collected."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["BatchStats", "SchedulerMetrics"]

_LATENCY_BUCKETS = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10)
# Upstream's ExponentialBuckets(0.00001, 2, 12): 10 us to about 20 ms.
_BATCH_BUCKETS = tuple(0.00001 * 2**i for i in range(12))


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts", "Number of attempts to schedule pods, by the result.",
            ["result", "profile"], registry=r)
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds", "Scheduling attempt latency in seconds.",
            ["result", "profile"], buckets=_LATENCY_BUCKETS, registry=r)
        self.pending_pods = Gauge(
            "scheduler_pending_pods", "Number of pending pods, by the queue type.", ["queue"], registry=r)
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts", "Total preemption attempts in the cluster till now.", registry=r)
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims", "Number of selected preemption victims.",
            buckets=(1, 2, 4, 8, 16, 32, 64), registry=r)
        # Opportunistic batching (framework/batch.py), as upstream's.
        self.batch = BatchStats()
        r.register(_BatchCollector(self.batch))
        self.binding_conflicts = Counter(
            "ksched_binding_conflicts", "Bindings refused by the API server's conflict resolver.", registry=r)
        self.binding_errors = Counter(
            "ksched_binding_errors", "Bindings that failed for any other reason.", registry=r)


class BatchStats:
    """The batching metrics as plain counts: ``scheduler_batch_attempts_total{profile,result}``,
    ``scheduler_batch_cache_flushed_total{profile,reason}``,
    ``scheduler_get_node_hint_duration_seconds{hinted,profile}`` and
    ``scheduler_store_schedule_results_duration_seconds{profile}`` (upstream's buckets)."""

    __slots__ = ("attempts", "flushed", "hint_seconds", "store_seconds")

    def __init__(self) -> None:
        self.attempts: dict[tuple[str, str], int] = {}
        self.flushed: dict[tuple[str, str], int] = {}
        # labels -> per-bucket counts (the last one past the highest bound), then the sum
        self.hint_seconds: dict[tuple[str, str], list[float]] = {}
        self.store_seconds: dict[tuple[str], list[float]] = {}

    def attempt(self, profile: str, result: str) -> None:
        k = (profile, result)
        self.attempts[k] = self.attempts.get(k, 0) + 1

    def flush(self, profile: str, reason: str) -> None:
        k = (profile, reason)
        self.flushed[k] = self.flushed.get(k, 0) + 1

    @staticmethod
    def _observe(h: dict, key: tuple[str, ...], seconds: float) -> None:  # type: ignore[type-arg]
        counts = h.get(key)
        if counts is None:
            counts = h[key] = [0.0] * (len(_BATCH_BUCKETS) + 2)
        counts[bisect_left(_BATCH_BUCKETS, seconds)] += 1
        counts[-1] += seconds

    def observe_hint(self, hinted: str, profile: str, seconds: float) -> None:
        self._observe(self.hint_seconds, (hinted, profile), seconds)

    def observe_store(self, profile: str, seconds: float) -> None:
        self._observe(self.store_seconds, (profile,), seconds)


class _BatchCollector(Collector):
    def __init__(self, stats: BatchStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        s = self.stats
        c = CounterMetricFamily("scheduler_batch_attempts",
                                "Results of the attempts to use batching: no_hint, hint_used, hint_not_used.",
                                labels=["profile", "result"])
        for labels, v in list(s.attempts.items()):
            c.add_metric(list(labels), v)
        yield c
        c = CounterMetricFamily("scheduler_batch_cache_flushed",
                                "Times the batch state was found unusable, by the reason.",
                                labels=["profile", "reason"])
        for labels, v in list(s.flushed.items()):
            c.add_metric(list(labels), v)
        yield c
        for name, doc, label_names, data in (
                ("scheduler_get_node_hint_duration_seconds", "Time taken to work out a batching hint, in seconds.",
                 ["hinted", "profile"], s.hint_seconds),
                ("scheduler_store_schedule_results_duration_seconds",
                 "Time taken to keep a scheduling decision's results for batching, in seconds.",
                 ["profile"], s.store_seconds)):
            h = HistogramMetricFamily(name, doc, labels=label_names)
            for labels, counts in list(data.items()):
                cum = 0.0
                buckets: list[tuple[str, float]] = []
                for bound, n in zip(_BATCH_BUCKETS, counts):
                    cum += n
                    buckets.append((repr(float(bound)), cum))
                cum += counts[len(_BATCH_BUCKETS)]
                buckets.append(("+Inf", cum))
                h.add_metric(list(labels), buckets, sum_value=counts[-1])
            yield h
