"""The operator's metrics: the names and labels it exports, each job's gauges after a reconcile (through the real
reconcile against the in-memory cluster), and every per-job series released when the job goes."""

from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge
from tests.support.builders import SETTINGS, T0, at, job_manifest
from tests.support.fake_cluster import FakeCluster

from trainingjob.children.goodput import PARTS
from trainingjob.children.progress_report import progress_from_report
from trainingjob.model import Phase, Progress, TrainingJob, TrainingJobStatus
from trainingjob.reconcile.job import reconcile
from trainingjob.runtime.metrics import Metrics
from trainingjob.runtime.queue import Key

pytestmark = pytest.mark.fast

NS = "team-a"
KEY: Key = (NS, "bert")
PER_JOB = {
    "trainingjob_job_phase": {"phase"},
    "trainingjob_job_attempt": set(),
    "trainingjob_job_restarts": {"failure_class"},
    "trainingjob_job_backoff_limit": set(),
    "trainingjob_job_step": set(),
    "trainingjob_job_total_steps": set(),
    "trainingjob_job_loss": set(),
    "trainingjob_job_samples_per_second": set(),
    "trainingjob_job_last_heartbeat_timestamp_seconds": set(),
    "trainingjob_job_time_to_running_seconds": set(),
    "trainingjob_job_attempt_time_to_running_seconds": set(),
    "trainingjob_job_goodput_ratio": set(),
    "trainingjob_job_time_seconds": {"part"},
}
AGGREGATE = {
    "trainingjob_jobs": ("gauge", {"phase"}),
    "trainingjob_phase_transitions": ("counter", {"from_phase", "to_phase"}),
    "trainingjob_restarts": ("counter", {"failure_class"}),
    "trainingjob_reconcile_duration_seconds": ("histogram", set()),
    "trainingjob_queue_depth": ("gauge", set()),
}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> Any:
        return self.now


def job_series(registry: CollectorRegistry, name: str | None = None) -> dict[tuple[str, str], float]:
    """Every per-job sample (of one job, or of all): (metric, its other labels) -> value."""
    found = {}
    for family in registry.collect():
        for sample in family.samples:
            labels = dict(sample.labels)
            if "trainingjob" not in labels or (name is not None and labels["trainingjob"] != name):
                continue
            rest = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in ("namespace", "trainingjob"))
            found[(sample.name, rest)] = sample.value
    return found


def status(**fields: Any) -> TrainingJobStatus:
    return TrainingJobStatus.model_validate(fields)


def test_names_types_and_labels() -> None:
    metrics = Metrics()
    metrics.record(KEY, None, status(phase="Running", attempt=1, progress={"step": 1}))
    families = {family.name: family for family in metrics.registry.collect()}
    for name, (kind, labels) in AGGREGATE.items():
        assert families[name].type == kind, name
        for sample in families[name].samples:
            assert set(sample.labels) - {"le"} == labels, sample
    assert {name for name in families if name.startswith("trainingjob_job_")} == set(PER_JOB)
    gauges = {gauge._name: gauge for gauge in vars(metrics).values() if isinstance(gauge, Gauge)}
    for name, extra in PER_JOB.items():
        assert families[name].type == "gauge", name
        assert set(gauges[name]._labelnames) == {"namespace", "trainingjob"} | extra, name  # with samples or not


def test_a_running_job_through_the_real_reconcile() -> None:
    """Created 20 s before its pods, all ranks running 5 s after them; rank 0 reports; a retryable failure later."""
    clock = Clock()
    cluster, metrics = FakeCluster(clock=clock), Metrics()
    manifest = job_manifest("bert", namespace=NS, runPolicy={"backoffLimit": 5})
    manifest["metadata"]["creationTimestamp"] = (T0 - timedelta(seconds=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster.submit(manifest)

    def step() -> None:
        outcome = reconcile(cluster, NS, "bert", now=clock.now, settings=SETTINGS)
        metrics.record(KEY, outcome.before, outcome.after, outcome.job)

    step()
    assert job_series(metrics.registry)[("trainingjob_job_phase", "phase=Pending")] == 1
    clock.now = at(5)
    for key in list(cluster.pods):
        cluster.run(*key)
    heartbeat = at(4).timestamp()
    report = {"step": 42, "totalSteps": 100, "loss": 0.5, "samplesPerSecond": 900.0, "heartbeat": heartbeat}
    cluster.reports["bert-worker-0-1"] = progress_from_report(report)
    step()
    running = job_series(metrics.registry, "bert")
    assert running == {
        ("trainingjob_job_phase", "phase=Running"): 1,
        ("trainingjob_job_attempt", ""): 1,
        ("trainingjob_job_restarts", "failure_class=retryable"): 0,
        ("trainingjob_job_restarts", "failure_class=oom"): 0,
        ("trainingjob_job_restarts", "failure_class=disruption"): 0,
        ("trainingjob_job_restarts", "failure_class=stalled"): 0,
        ("trainingjob_job_backoff_limit", ""): 5,
        ("trainingjob_job_step", ""): 42,
        ("trainingjob_job_total_steps", ""): 100,
        ("trainingjob_job_loss", ""): 0.5,
        ("trainingjob_job_samples_per_second", ""): 900,
        ("trainingjob_job_last_heartbeat_timestamp_seconds", ""): at(5).timestamp(),  # when the operator saw it
        ("trainingjob_job_time_to_running_seconds", ""): 25,
        ("trainingjob_job_attempt_time_to_running_seconds", ""): 5,
        ("trainingjob_job_goodput_ratio", ""): 0,  # no first step reported yet
        **{("trainingjob_job_time_seconds", f"part={part}"): 0 for part in PARTS},
        ("trainingjob_job_time_seconds", "part=queued"): 20,  # until its pods were created
        ("trainingjob_job_time_seconds", "part=startup"): 5,
    }
    assert metrics.registry.get_sample_value("trainingjob_jobs", {"phase": "Running"}) == 1
    assert metrics.registry.get_sample_value("trainingjob_jobs", {"phase": "Pending"}) == 0

    clock.now = at(30)
    cluster.finish(NS, "bert-worker-1-1", 1)
    step()
    restarting = job_series(metrics.registry, "bert")
    assert restarting[("trainingjob_job_phase", "phase=Restarting")] == 1
    assert ("trainingjob_job_phase", "phase=Running") not in restarting
    assert restarting[("trainingjob_job_restarts", "failure_class=retryable")] == 1
    assert metrics.registry.get_sample_value("trainingjob_restarts_total", {"failure_class": "retryable"}) == 1


def test_the_heartbeat_of_an_earlier_attempt_is_not_the_current_ones() -> None:
    """After a restart the status still shows attempt 1's last report: a stalled alert must not count from it."""
    metrics = Metrics()
    earlier = {"step": 40, "lastHeartbeatTime": "2026-01-01T00:00:00Z", "attempt": 1}
    metrics.record(KEY, None, status(phase="Running", attempt=2, progress=earlier))
    series = job_series(metrics.registry)
    assert series[("trainingjob_job_step", "")] == 40
    assert ("trainingjob_job_last_heartbeat_timestamp_seconds", "") not in series
    current = Progress.model_validate({**earlier, "attempt": 2})
    metrics.record(KEY, None, status(phase="Running", attempt=2, progress=current.model_dump(by_alias=True)))
    assert job_series(metrics.registry)[("trainingjob_job_last_heartbeat_timestamp_seconds", "")] == T0.timestamp()


def test_what_is_not_known_is_absent_not_zero() -> None:
    """An invalid spec (no job model) has no backoff limit; no progress, no loss; no history, no startup time."""
    metrics = Metrics()
    metrics.record(KEY, None, status(phase="Failed", attempt=0), job=None)
    assert {name for name, _ in job_series(metrics.registry)} == {
        "trainingjob_job_phase",
        "trainingjob_job_attempt",
        "trainingjob_job_restarts",
    }


def test_time_to_running_needs_attempt_one_in_the_history() -> None:
    """status.history keeps the newest 32 attempts: once attempt 1 is gone, creation-to-running is unknown."""
    job = TrainingJob.from_manifest(
        {
            **job_manifest("bert", namespace=NS),
            "metadata": {"name": "bert", "creationTimestamp": "2026-01-01T00:00:00Z"},
        }
    )
    attempts = [
        {"attempt": n, "startTime": at(100 * n).isoformat(), "runningTime": at(100 * n + 7).isoformat()} for n in (2, 3)
    ]
    metrics = Metrics()
    metrics.record(KEY, None, status(phase="Running", attempt=3, history={"attempts": attempts}), job)
    series = job_series(metrics.registry)
    assert ("trainingjob_job_time_to_running_seconds", "") not in series
    assert series[("trainingjob_job_attempt_time_to_running_seconds", "")] == 7
    first = [{"attempt": 1, "startTime": at(3).isoformat()}, *attempts]  # attempt 1 never ran: attempt 2 did first
    metrics.record(KEY, None, status(phase="Running", attempt=3, history={"attempts": first}), job)
    assert job_series(metrics.registry)[("trainingjob_job_time_to_running_seconds", "")] == 207


@pytest.mark.parametrize("how", ["deleted", "not-leading"])
def test_every_series_of_a_job_goes_with_it(how: str) -> None:
    metrics = Metrics()
    full = {
        "phase": "Running",
        "attempt": 2,
        "restarts": {"oom": 1},
        "progress": {"step": 7, "loss": 1.0, "samplesPerSecond": 3.0, "totalSteps": 9, "attempt": 2},
        "history": {"attempts": [{"attempt": 2, "startTime": T0.isoformat(), "runningTime": at(1).isoformat()}]},
        "goodput": {
            "ratio": 0.5,
            "wallSeconds": 2,
            "productiveSeconds": 1,
            "queuedSeconds": 1,
            "time": at(2).isoformat(),
        },
    }
    job = TrainingJob.from_manifest(job_manifest("bert", namespace=NS))
    for name in ("bert", "gpt", "t5"):
        metrics.record((NS, name), None, status(**full), job)
    assert len(job_series(metrics.registry, "bert")) == 12 + 1 + len(PARTS)
    if how == "deleted":
        metrics.record((NS, "bert"), status(**full), None)
        assert job_series(metrics.registry, "bert") == {} and job_series(metrics.registry, "gpt")
        for name in ("gpt", "t5"):
            metrics.record((NS, name), status(**full), None)
    else:
        metrics.forget_all()
    assert job_series(metrics.registry) == {}
    assert all(metrics.registry.get_sample_value("trainingjob_jobs", {"phase": p.value}) == 0 for p in Phase)


def test_a_phase_change_moves_the_jobs_one_phase_series_and_the_aggregate() -> None:
    metrics = Metrics()
    pending, running = status(phase="Pending"), status(phase="Running", attempt=1)
    metrics.record(KEY, None, pending)
    metrics.record((NS, "other"), None, pending)
    metrics.record(KEY, pending, running)
    phases = [rest for name, rest in job_series(metrics.registry, "bert") if name == "trainingjob_job_phase"]
    assert phases == ["phase=Running"]
    count = metrics.registry.get_sample_value
    assert (count("trainingjob_jobs", {"phase": "Pending"}), count("trainingjob_jobs", {"phase": "Running"})) == (1, 1)
    transitions = {"from_phase": "Pending", "to_phase": "Running"}
    assert count("trainingjob_phase_transitions_total", transitions) == 1


def test_a_reconcile_that_ends_after_leadership_was_lost_reports_nothing() -> None:
    """forget_all() as the Lease is lost, then a reconcile that began before it records: no series come back
    (a frozen heartbeat there would fire TrainingJobStalled) until this operator leads again."""
    metrics, running = Metrics(), status(phase="Running", attempt=1, progress={"step": 3})
    metrics.record(KEY, None, running)
    metrics.forget_all()
    metrics.record(KEY, running, running)
    assert job_series(metrics.registry) == {}
    metrics.report_again()
    metrics.record(KEY, running, running)
    assert job_series(metrics.registry, "bert")
