"""Scheduler metrics (Prometheus), named as upstream's where upstream has them. Each scheduler
owns a registry, so several schedulers (and tests) never collide."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["SchedulerMetrics"]

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
        self.batch_attempts = Counter(
            "scheduler_batch_attempts", "Results of the attempts to use batching: no_hint, hint_used, hint_not_used.",
            ["profile", "result"], registry=r)
        self.batch_cache_flushed = Counter(
            "scheduler_batch_cache_flushed", "Times the batch state was found unusable, by the reason.",
            ["profile", "reason"], registry=r)
        self.get_node_hint_duration = Histogram(
            "scheduler_get_node_hint_duration_seconds", "Time taken to work out a batching hint, in seconds.",
            ["hinted", "profile"], buckets=_BATCH_BUCKETS, registry=r)
        self.store_schedule_results_duration = Histogram(
            "scheduler_store_schedule_results_duration_seconds",
            "Time taken to keep a scheduling decision's results for batching, in seconds.",
            ["profile"], buckets=_BATCH_BUCKETS, registry=r)
        self.binding_conflicts = Counter(
            "ksched_binding_conflicts", "Bindings refused by the API server's conflict resolver.", registry=r)
        self.binding_errors = Counter(
            "ksched_binding_errors", "Bindings that failed for any other reason.", registry=r)
