"""The cost of "Kubernetes is the database" for sweeps: one sweep reconcile's decision (plan(): the Optuna study
rebuilt from the status, every running trial judged by the median rule, the next trial drawn by TPE) against the
same decisions on a persistent in-memory Optuna study that already holds every trial (what a study database buys),
measured alternately at 50, 200 and 500 finished trials with 10 running. No cluster: both sides are pure CPU."""

import random
import statistics
import time
from datetime import UTC, datetime, timedelta

import optuna
from optuna.trial import TrialState

from trainingjob.model import API_VERSION
from trainingjob.model.sweep import SWEEP_KIND, TrainingSweep
from trainingjob.model.sweep_status import ObjectivePoint, SweepPhase, TrainingSweepStatus, Trial, TrialPhase
from trainingjob.sweep.plan import job_name, plan
from trainingjob.sweep.space import distributions
from trainingjob.sweep.study import pruner, rebuilt
from trainingjob.sweep.trial_jobs import trial_manifest
from trainingjob.sweep.trials import Child, child

RUNNING = 10
STEPS = [100 * k for k in range(1, 17)]  # 16 evaluations, as a status keeps at most
ROUNDS = 5
T0 = datetime(2026, 1, 1, tzinfo=UTC)
PARAMETERS = [
    {"name": "lr", "path": "trainer.learningRate", "type": "Float", "min": 0.001, "max": 1.0, "log": True},
    {"name": "batch", "path": "trainer.batchSize", "type": "Categorical", "values": [16, 32, 64]},
]


def _trial(number: int, phase: TrialPhase, rng: random.Random, points: int) -> Trial:
    lr, batch = 10 ** rng.uniform(-3, 0), rng.choice([16, 32, 64])
    quality = rng.random()
    curve = [ObjectivePoint(step=s, value=quality * (1 - 1 / (1 + i))) for i, s in enumerate(STEPS[:points])]
    return Trial(
        number=number,
        job_name=job_name("sweep", number),
        parameters={"lr": lr, "batch": batch},
        phase=phase,
        objective=curve[-1].value,
        objective_step=curve[-1].step,
        curve=curve,
        start_time=T0,
    )


def world(finished: int) -> TrainingSweep:
    """A sweep with `finished` succeeded trials and RUNNING running ones, halfway through their curves."""
    rng = random.Random(finished)
    trials = [_trial(n, TrialPhase.SUCCEEDED, rng, len(STEPS)) for n in range(finished)]
    trials += [_trial(finished + n, TrialPhase.RUNNING, rng, len(STEPS) // 2) for n in range(RUNNING)]
    template = {"spec": {"mode": "DDP", "workers": {"replicas": 2}, "trainer": {"steps": 100, "evalEverySteps": 10}}}
    spec = {
        "template": template,
        "parameters": PARAMETERS,
        "objective": {"metric": "accuracy", "goal": "Maximize"},
        "maxTrials": 500,
        "parallelism": RUNNING + 1,
        "earlyStopping": {"algorithm": "Median", "startupTrials": 5},
    }
    metadata = {"name": "sweep", "namespace": "ns", "uid": "sweep-uid", "generation": 1, "resourceVersion": "1"}
    manifest = {"apiVersion": API_VERSION, "kind": SWEEP_KIND, "metadata": metadata, "spec": spec}
    sweep = TrainingSweep.from_manifest(manifest)
    return sweep.model_copy(update={"status": TrainingSweepStatus(phase=SweepPhase.RUNNING, trials=trials)})


def running_trial(sweep: TrainingSweep, trial: Trial) -> Child:
    """A running trial's job as the store holds it, with its evaluations so far."""
    manifest = trial_manifest(sweep, trial)
    manifest["metadata"].update(uid=f"job-{trial.number}", creationTimestamp=T0.isoformat())
    evaluations = [{"step": p.step, "time": T0.isoformat(), "metrics": {"accuracy": p.value}} for p in trial.curve]
    return child({**manifest, "status": {"phase": "Running", "history": {"evaluations": evaluations}}})


def ours(sweep: TrainingSweep) -> float:
    """plan(): one reconcile's decisions, the study rebuilt from the status (one new trial: one place is free)."""
    assert sweep.status is not None
    children = {t.job_name: running_trial(sweep, t) for t in sweep.status.trials if t.phase == TrialPhase.RUNNING}
    start = time.perf_counter()
    result = plan(sweep, children, T0 + timedelta(seconds=60))
    elapsed = time.perf_counter() - start
    assert len(result.create) == 1
    return elapsed


def persistent(sweep: TrainingSweep) -> tuple[optuna.Study, list[optuna.trial.FrozenTrial]]:
    """The same trials in a study that is kept: built once, outside the timing."""
    assert sweep.status is not None
    study = rebuilt(sweep.spec, sweep.status.trials, len(sweep.status.trials))
    running = [t for t in study.trials if t.state == TrialState.RUNNING]
    return study, running


def baseline(study: optuna.Study, running: list[optuna.trial.FrozenTrial], sweep: TrainingSweep) -> float:
    """The same decisions on the kept study: each running trial judged at its latest step, one trial asked."""
    space = distributions(sweep.spec.parameters)
    judge = pruner(sweep.spec.early_stopping, None)
    start = time.perf_counter()
    for trial in running:
        judge.prune(study, trial)
    asked = study.ask(space)
    elapsed = time.perf_counter() - start
    study.tell(asked, state=TrialState.FAIL)  # keep the study as it was, but for one failed trial
    return elapsed


def main() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(f"sweep reconcile decisions, {RUNNING} trials running, median of {ROUNDS} rounds (ms)")
    print(f"  {'finished':>8} {'rebuilt (ours)':>15} {'kept study':>11} {'ratio':>6}")
    for finished in (50, 200, 500 - RUNNING - 1):
        sweep = world(finished)
        study, running = persistent(sweep)
        ours_times, base_times = [], []
        for _ in range(ROUNDS):  # alternately, so drift in the machine's speed hits both sides
            ours_times.append(ours(sweep))
            base_times.append(baseline(study, running, sweep))
        mine, theirs = statistics.median(ours_times) * 1000, statistics.median(base_times) * 1000
        print(f"  {finished:>8} {mine:>15.1f} {theirs:>11.1f} {mine / theirs:>5.2f}x")


if __name__ == "__main__":
    main()
