"""The operator's per-sweep metrics: trials by phase and the best objective for each sweep (from statuses the
real sweep planner wrote), sweeps by phase, every series of a sweep gone with it, none reported while not leading."""

import pytest
from prometheus_client import CollectorRegistry
from tests.support.builders import at, make_sweep, sweep_step, trial_job

from trainingjob.model.sweep_status import TrainingSweepStatus
from trainingjob.runtime.metrics import Metrics
from trainingjob.runtime.queue import Key

pytestmark = pytest.mark.fast

KEY: Key = ("team-a", "lr-search")


def sweep_series(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    """Every sample of the sweep metrics: (metric, labels but namespace) -> value."""
    found = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name.startswith("trainingjob_sweep"):
                labels = dict(sample.labels)
                labels.pop("namespace", None)
                found[(sample.name, ",".join(f"{k}={v}" for k, v in sorted(labels.items())))] = sample.value
    return found


def _statuses() -> tuple[TrainingSweepStatus, TrainingSweepStatus]:
    """A sweep with two trials running, then with one succeeded (0.93) and one pruned."""
    sweep, _ = sweep_step(make_sweep(parallelism=2, maxTrials=3), [])
    assert sweep.status is not None
    running = sweep.status
    done, _ = sweep_step(
        sweep,
        [trial_job(sweep, 0, "Succeeded", final=0.93), trial_job(sweep, 1, "Failed")],
        at(5),
    )
    assert done.status is not None
    return running, done.status


def test_a_sweeps_trials_by_phase_and_its_best_objective() -> None:
    metrics = Metrics()
    running, later = _statuses()
    metrics.sweeps.record(KEY, running, "accuracy")
    series = sweep_series(metrics.registry)
    assert series[("trainingjob_sweep_trials", "phase=Pending,trainingsweep=lr-search")] == 2
    assert series[("trainingjob_sweep_trials", "phase=Succeeded,trainingsweep=lr-search")] == 0
    assert not [key for key in series if key[0] == "trainingjob_sweep_best_objective"]  # none succeeded yet
    assert series[("trainingjob_sweeps", "phase=Running")] == 1
    metrics.sweeps.record(KEY, later, "accuracy")
    series = sweep_series(metrics.registry)
    assert series[("trainingjob_sweep_trials", "phase=Succeeded,trainingsweep=lr-search")] == 1
    assert series[("trainingjob_sweep_trials", "phase=Failed,trainingsweep=lr-search")] == 1
    assert series[("trainingjob_sweep_best_objective", "metric=accuracy,trainingsweep=lr-search")] == 0.93


def test_every_series_of_a_sweep_goes_with_it_and_none_while_not_leading() -> None:
    metrics = Metrics()
    running, _ = _statuses()
    metrics.sweeps.record(KEY, running, "accuracy")
    metrics.sweeps.record(("team-b", "other"), running, "loss")
    metrics.sweeps.record(KEY, None)
    series = sweep_series(metrics.registry)
    assert not [key for key in series if "lr-search" in key[1]]
    assert series[("trainingjob_sweeps", "phase=Running")] == 1  # the other sweep
    metrics.forget_all()  # leadership lost: the jobs' and the sweeps' series go
    assert sweep_series(metrics.registry)[("trainingjob_sweeps", "phase=Running")] == 0
    metrics.sweeps.record(KEY, running, "accuracy")  # a reconcile that ends after leadership was lost
    assert not [key for key in sweep_series(metrics.registry) if "trainingsweep" in key[1]]
    metrics.report_again()
    metrics.sweeps.record(KEY, running, "accuracy")
    assert sweep_series(metrics.registry)[("trainingjob_sweep_trials", "phase=Pending,trainingsweep=lr-search")] == 2
