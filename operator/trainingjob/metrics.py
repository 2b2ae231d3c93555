"""Prometheus metrics of the operator, derived from status transitions that reconcile reports."""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from trainingjob.model import Phase, TrainingJobStatus


class Metrics:
    """The operator's metrics, in a registry of their own (so tests can make several)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.jobs = Gauge("trainingjob_jobs", "TrainingJobs by phase.", ["phase"], registry=self.registry)
        self.transitions = Counter(
            "trainingjob_phase_transitions",
            "Phase changes of TrainingJobs.",
            ["from_phase", "to_phase"],
            registry=self.registry,
        )
        self.restarts = Counter(
            "trainingjob_restarts",
            "Restarts of TrainingJobs by failure class.",
            ["failure_class"],
            registry=self.registry,
        )
        self.reconcile_seconds = Histogram(
            "trainingjob_reconcile_duration_seconds",
            "Time one reconcile took.",
            registry=self.registry,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.queue_depth = Gauge("trainingjob_queue_depth", "Jobs waiting to be reconciled.", registry=self.registry)
        self._phases: dict[tuple[str, str], Phase] = {}

    def record(self, key: tuple[str, str], before: TrainingJobStatus | None, after: TrainingJobStatus | None) -> None:
        """Count a reconcile's phase change and new restarts; `after` None means the job is gone."""
        if after is None:
            self._phases.pop(key, None)
        else:
            self._phases[key] = after.phase
            if before is not None and before.phase != after.phase:
                self.transitions.labels(before.phase.value, after.phase.value).inc()
            if before is not None:
                for name, value in after.restarts.model_dump().items():
                    grown = value - getattr(before.restarts, name)
                    if grown > 0:
                        self.restarts.labels(name).inc(grown)
        for phase in Phase:
            self.jobs.labels(phase.value).set(sum(1 for p in self._phases.values() if p == phase))
