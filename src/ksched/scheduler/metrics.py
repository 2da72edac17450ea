"""Scheduler metrics (Prometheus), named as upstream's where upstream has them. Each scheduler
owns a registry, so several schedulers (and tests) never collide.

The metrics that change on every scheduling cycle -- the attempts and their durations
(:class:`AttemptStats`), opportunistic batching (:class:`BatchStats`) -- are kept as plain counts
(a few integer increments a cycle, on the scheduling thread, where a Prometheus counter and
histogram take a lock per increment and walk the buckets in Python) and turned into Prometheus
samples only when the registry is collected."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["AttemptStats", "BatchStats", "SchedulerMetrics"]

_LATENCY_BUCKETS = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10)
# Upstream's ExponentialBuckets(0.00001, 2, 12): 10 us to about 20 ms.
_BATCH_BUCKETS = tuple(0.00001 * 2**i for i in range(12))
BATCH_BUCKETS = _BATCH_BUCKETS  # (framework/batch.py counts into BatchStats' lists itself)


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # scheduler_schedule_attempts_total{result,profile} and
        # scheduler_scheduling_attempt_duration_seconds{result,profile}: one record() a cycle.
        self.attempts = AttemptStats()
        self.schedule_attempts = _AttemptCounter(self.attempts)
        self.attempt_duration = _AttemptHistogram(self.attempts)
        r.register(self.schedule_attempts)
        r.register(self.attempt_duration)
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


def _histogram_buckets(bounds: tuple[float, ...], counts: list[float]) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs from per-bucket counts (the last one past the highest bound)."""
    cum = 0.0
    out: list[tuple[str, float]] = []
    for bound, n in zip(bounds, counts):
        cum += n
        out.append((repr(float(bound)), cum))
    cum += counts[len(bounds)]
    out.append(("+Inf", cum))
    return out


class AttemptStats:
    """Scheduling attempts as plain counts: per (result, profile), how many
    (``scheduler_schedule_attempts_total``) and their durations per bucket of
    ``_LATENCY_BUCKETS`` with their sum (``scheduler_scheduling_attempt_duration_seconds``)."""

    __slots__ = ("counts", "durations")

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], float] = {}
        # labels -> per-bucket counts (the last one past the highest bound), then the sum
        self.durations: dict[tuple[str, str], list[float]] = {}

    def record(self, result: str, profile: str, seconds: float) -> None:
        """One attempt: counted and its duration observed."""
        k = (result, profile)
        self.counts[k] = self.counts.get(k, 0) + 1
        self.observe(k, seconds)

    def observe(self, key: tuple[str, str], seconds: float) -> None:
        d = self.durations.get(key)
        if d is None:
            d = self.durations[key] = [0.0] * (len(_LATENCY_BUCKETS) + 2)
        d[bisect_left(_LATENCY_BUCKETS, seconds)] += 1  # as Prometheus: the first bound >= seconds
        d[-1] += seconds

    def total(self) -> int:
        """Attempts of every result and profile."""
        return int(sum(list(self.counts.values())))


class _Child:
    """``labels(...)`` of the attempt metrics: ``inc`` counts, ``observe`` a duration."""

    __slots__ = ("_key", "_stats")

    def __init__(self, stats: AttemptStats, key: tuple[str, str]) -> None:
        self._stats = stats
        self._key = key

    def inc(self, amount: float = 1) -> None:
        c = self._stats.counts
        c[self._key] = c.get(self._key, 0) + amount

    def observe(self, amount: float) -> None:
        self._stats.observe(self._key, amount)


class _AttemptCounter(Collector):
    """``scheduler_schedule_attempts_total{result,profile}`` from :class:`AttemptStats`."""

    def __init__(self, stats: AttemptStats) -> None:
        self.stats = stats

    def labels(self, result: str, profile: str) -> _Child:
        return _Child(self.stats, (result, profile))

    def collect(self) -> Iterator[Metric]:
        c = CounterMetricFamily("scheduler_schedule_attempts", "Number of attempts to schedule pods, by the result.",
                                labels=["result", "profile"])
        for labels, v in list(self.stats.counts.items()):
            c.add_metric(list(labels), v)
        yield c


class _AttemptHistogram(Collector):
    """``scheduler_scheduling_attempt_duration_seconds{result,profile}`` from :class:`AttemptStats`."""

    def __init__(self, stats: AttemptStats) -> None:
        self.stats = stats

    def labels(self, result: str, profile: str) -> _Child:
        return _Child(self.stats, (result, profile))

    def collect(self) -> Iterator[Metric]:
        h = HistogramMetricFamily("scheduler_scheduling_attempt_duration_seconds",
                                  "Scheduling attempt latency in seconds.", labels=["result", "profile"])
        for labels, counts in list(self.stats.durations.items()):
            h.add_metric(list(labels), _histogram_buckets(_LATENCY_BUCKETS, counts), sum_value=counts[-1])
        yield h


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
                h.add_metric(list(labels), _histogram_buckets(_BATCH_BUCKETS, counts), sum_value=counts[-1])
            yield h
