"""Prometheus metrics of the operator, derived from what each reconcile reports: aggregates over every job, and a
small set of gauges per job (labels `namespace` and `trainingjob`) that are removed when the job goes; the same for
each TrainingSweep (labels `namespace` and `trainingsweep`).

The job's name is the `trainingjob` label, not `job`: `job` is the scrape target's own label in every Prometheus,
and an exported one would be renamed `exported_job` (or, with honor_labels, hide the target's)."""

import collections
import threading
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from trainingjob.children.goodput import PARTS, creation_time
from trainingjob.model import Phase, TrainingJob, TrainingJobStatus
from trainingjob.model.sweep_status import SweepPhase, TrainingSweepStatus
from trainingjob.runtime.queue import Key

JOB_LABELS = ("namespace", "trainingjob")
Series = tuple[Gauge, tuple[str, ...]]  # a per-job gauge and its label values


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
        self.cache_relists = Counter(
            "trainingjob_cache_relists",
            "Lists of a watched resource after its watch could not resume (410 Gone), by resource.",
            ["resource"],
            registry=self.registry,
        )
        self.writes_throttled = Counter(
            "trainingjob_writes_throttled",
            "Writes the apiserver answered with 429 (too many requests); each is retried after the wait it asked.",
            registry=self.registry,
        )
        self.write_limit = Gauge(
            "trainingjob_writes_in_flight_limit",
            "How many writes the operator lets fly at once now: halved on 429, grown back as writes succeed.",
            registry=self.registry,
        )
        self.events_skipped = Counter(
            "trainingjob_events_skipped",
            "Routine (Normal) Events not written because the operator's Event budget was spent"
            " (runtime/event_budget.py), by reason: the job's status says the same.",
            ["reason"],
            registry=self.registry,
        )
        self.cache_fallback_lists = Counter(
            "trainingjob_cache_fallback_lists",
            "Reconciles that listed a job's pods from the apiserver because the pod cache had not caught up yet.",
            registry=self.registry,
        )
        self.job_phase = self._gauge("phase", "1 for the job's current phase (one series per job).", "phase")
        self.job_attempt = self._gauge("attempt", "The job's current attempt (status.attempt).")
        self.job_restarts = self._gauge("restarts", "The job's restarts so far by failure class.", "failure_class")
        self.job_backoff_limit = self._gauge(
            "backoff_limit", "spec.runPolicy.backoffLimit: restarts allowed for retryable, oom and stalled failures."
        )
        self.job_step = self._gauge("step", "The last step rank 0 reported.")
        self.job_total_steps = self._gauge("total_steps", "The steps the whole run takes, as the trainer reported.")
        self.job_loss = self._gauge("loss", "The training loss at the last reported step.")
        self.job_samples_per_second = self._gauge("samples_per_second", "The job's throughput at the last report.")
        self.job_heartbeat = self._gauge(
            "last_heartbeat_timestamp_seconds",
            "When the operator last saw rank 0 of the current attempt report news (seconds since the epoch, on the"
            " operator's clock); absent before it has.",
        )
        self.job_time_to_running = self._gauge(
            "time_to_running_seconds", "From the job's creation until all its ranks first ran."
        )
        self.job_attempt_time_to_running = self._gauge(
            "attempt_time_to_running_seconds", "From the current attempt's start until all its ranks ran."
        )
        self.job_goodput = self._gauge(
            "goodput_ratio", "status.goodput.ratio: productive training over the job's time, suspended time left out."
        )
        self.job_time = self._gauge(
            "time_seconds",
            "status.goodput: the job's wall time by part (queued, startup, productive, checkpoint_stall, recovery, "
            "redone, shrunk, suspended); the parts add up to it.",
            "part",
        )
        for phase in Phase:
            self.jobs.labels(phase.value).set(0)
        self._phases: dict[Key, Phase] = {}
        self._counts: collections.Counter[Phase] = collections.Counter()
        self._series: dict[Key, set[Series]] = {}
        self._lock = threading.Lock()
        self._reporting = True  # False once this operator stopped leading, until it leads again
        self.sweeps = SweepMetrics(self.registry)

    def _gauge(self, name: str, documentation: str, *labels: str) -> Gauge:
        return Gauge(f"trainingjob_job_{name}", documentation, [*JOB_LABELS, *labels], registry=self.registry)

    def record(
        self,
        key: Key,
        before: TrainingJobStatus | None,
        after: TrainingJobStatus | None,
        job: TrainingJob | None = None,
    ) -> None:
        """Count a reconcile's phase change and new restarts, and set the job's gauges; `after` None means the
        job is gone (its series are removed). `job` (None when its spec is invalid) gives the creation time and
        the backoff limit. Reconciles of different jobs call this from several threads at once."""
        with self._lock:
            if not self._reporting:  # a reconcile that began before leadership was lost: the new leader reports
                return
            self._set_phase(key, after.phase if after is not None else None)
            if before is not None and after is not None:
                if before.phase != after.phase:
                    self.transitions.labels(before.phase.value, after.phase.value).inc()
                for name, value in after.restarts.model_dump().items():
                    grown = value - getattr(before.restarts, name)
                    if grown > 0:
                        self.restarts.labels(name).inc(grown)
            self._set_job_series(key, {} if after is None else self._job_values(key, after, job))

    def forget_all(self) -> None:
        """This operator no longer reports on any job (it stopped leading): drop every job from the gauges, and
        ignore records until report_again() (reconciles still running may finish after this)."""
        with self._lock:
            self._reporting = False
            for key in list(self._phases.keys() | self._series.keys()):
                self._set_phase(key, None)
                self._set_job_series(key, {})
        self.sweeps.forget_all()

    def report_again(self) -> None:
        """This operator leads again: its reconciles report on jobs again."""
        with self._lock:
            self._reporting = True
        self.sweeps.report_again()

    def _set_phase(self, key: Key, phase: Phase | None) -> None:
        old = self._phases.pop(key, None)
        if phase is not None:
            self._phases[key] = phase
        if old == phase:
            return
        for changed, by in ((old, -1), (phase, 1)):
            if changed is not None:
                self._counts[changed] += by
                self.jobs.labels(changed.value).set(self._counts[changed])

    def _set_job_series(self, key: Key, values: dict[Series, float]) -> None:
        set_series(self._series, key, values)

    def _job_values(self, key: Key, status: TrainingJobStatus, job: TrainingJob | None) -> dict[Series, float]:
        values: dict[Series, float] = {
            (self.job_phase, (*key, status.phase.value)): 1.0,
            (self.job_attempt, key): status.attempt,
        }
        for name, count in status.restarts.model_dump().items():
            values[(self.job_restarts, (*key, name))] = count
        if job is not None:
            values[(self.job_backoff_limit, key)] = job.spec.run_policy.backoff_limit
        job_seconds, attempt_seconds = _times_to_running(status, creation_time(job.metadata) if job else None)
        optional: dict[Gauge, float | None] = {
            self.job_time_to_running: job_seconds,
            self.job_attempt_time_to_running: attempt_seconds,
        }
        progress = status.progress
        if progress is not None:
            optional[self.job_step] = progress.step
            optional[self.job_total_steps] = progress.total_steps
            optional[self.job_loss] = progress.loss
            optional[self.job_samples_per_second] = progress.samples_per_second
            heard = progress.last_change_time or progress.last_heartbeat_time  # on the operator's clock when it can
            if progress.attempt == status.attempt and heard is not None:
                optional[self.job_heartbeat] = heard.timestamp()
        if status.goodput is not None:
            optional[self.job_goodput] = status.goodput.ratio
            for part in PARTS:
                values[(self.job_time, (*key, part))] = getattr(status.goodput, f"{part}_seconds")
        values.update({(gauge, key): value for gauge, value in optional.items() if value is not None})
        return values


def set_series(known: dict[Key, set[Series]], key: Key, values: dict[Series, float]) -> None:
    """Set an object's series to `values`, removing those it had and has no more; `known` remembers them."""
    for gauge, labels in known.pop(key, set()) - values.keys():
        gauge.remove(*labels)
    for (gauge, labels), value in values.items():
        gauge.labels(*labels).set(value)
    if values:
        known[key] = set(values)


def _times_to_running(status: TrainingJobStatus, created: datetime | None) -> tuple[float | None, float | None]:
    """Seconds until all ranks ran: of the whole job (creation to the first attempt that ran; known while
    status.history still holds attempt 1) and of the current attempt (its start to its running)."""
    attempts = status.history.attempts if status.history is not None else []
    first_ran = next((a.running_time for a in attempts if a.running_time is not None), None)
    whole = None
    if created is not None and first_ran is not None and attempts[0].attempt == 1:
        whole = (first_ran - created).total_seconds()
    current = attempts[-1] if attempts and attempts[-1].attempt == status.attempt else None
    this = None
    if current is not None and current.running_time is not None:
        this = (current.running_time - current.start_time).total_seconds()
    return whole, this


SWEEP_LABELS = ("namespace", "trainingsweep")


class SweepMetrics:
    """Each TrainingSweep's trials by phase and its best objective (labels `namespace`, `trainingsweep`, removed
    when the sweep goes), and sweeps by phase. Owned by Metrics, in its registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.sweeps = Gauge("trainingjob_sweeps", "TrainingSweeps by phase.", ["phase"], registry=registry)
        self.trials = Gauge(
            "trainingjob_sweep_trials", "A sweep's trials by phase.", [*SWEEP_LABELS, "phase"], registry=registry
        )
        self.best_objective = Gauge(
            "trainingjob_sweep_best_objective",
            "The objective of the sweep's best trial (absent until a trial has succeeded).",
            [*SWEEP_LABELS, "metric"],
            registry=registry,
        )
        for phase in SweepPhase:
            self.sweeps.labels(phase.value).set(0)
        self._phases: dict[Key, SweepPhase] = {}
        self._series: dict[Key, set[Series]] = {}
        self._lock = threading.Lock()
        self._reporting = True

    def record(self, key: Key, status: TrainingSweepStatus | None, metric: str = "") -> None:
        """Set a sweep's series after a reconcile; `status` None means the sweep is gone. `metric`: the objective's."""
        with self._lock:
            if not self._reporting:
                return
            self._set(key, status, metric)

    def forget_all(self) -> None:
        with self._lock:
            self._reporting = False
            for key in list(self._phases.keys() | self._series.keys()):
                self._set(key, None, "")

    def report_again(self) -> None:
        with self._lock:
            self._reporting = True

    def _set(self, key: Key, status: TrainingSweepStatus | None, metric: str) -> None:
        if status is None:
            self._phases.pop(key, None)
        else:
            self._phases[key] = status.phase
        for phase in SweepPhase:
            self.sweeps.labels(phase.value).set(sum(p == phase for p in self._phases.values()))
        values: dict[Series, float] = {}
        if status is not None:
            for name, count in status.counts.model_dump().items():
                values[(self.trials, (*key, name.capitalize()))] = count  # the TrialPhase: Pending ... Pruned
            if status.best_trial is not None:
                values[(self.best_objective, (*key, metric))] = status.best_trial.objective
        set_series(self._series, key, values)
