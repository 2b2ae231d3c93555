"""The early-stopping rules decide as Optuna's pruners did on every trial's curve aligned to every step any trial
was evaluated at (what the planner did before; its cost grew as trials x steps x finished trials): the median rule
from medians computed once, at the running trials' steps; successive halving from rungs found among those steps."""

import random
from typing import Any

import pytest
from optuna.trial import TrialState, create_trial
from tests.support.builders import T0, make_sweep

from trainingjob.model.sweep import TrainingSweepSpec
from trainingjob.model.sweep_status import ObjectivePoint, Trial, TrialPhase
from trainingjob.sweep.plan import job_name
from trainingjob.sweep.pruning import to_prune
from trainingjob.sweep.study import NUMBER, rebuilt

pytestmark = pytest.mark.fast
STEPS = [10 * k for k in range(1, 17)]


def aligned(trials: list[Trial]) -> list[Trial]:
    """The trials with their curves at the same steps (what the planner did before, materialised): every step any
    trial was evaluated at, up to each trial's last, its value there the trial's latest evaluation at or before
    it."""
    steps = sorted({point.step for trial in trials for point in trial.curve})
    result = []
    for trial in trials:
        points, seen, latest = list(trial.curve), 0, None
        filled = []
        for step in steps:
            while seen < len(points) and points[seen].step <= step:
                latest, seen = points[seen], seen + 1
            if latest is not None and step <= points[-1].step:
                filled.append(ObjectivePoint(step=step, value=latest.value))
        result.append(trial.model_copy(update={"curve": filled}))
    return result


def _optuna_verdicts(spec: TrainingSweepSpec, trials: list[Trial]) -> dict[int, int]:
    """Trial number -> the own step at which the pruner stops it: MedianPruner asked at each prefix of its curve,
    SuccessiveHalvingPruner at its latest evaluation."""
    study = rebuilt(spec, aligned(trials), len(trials))
    frozen = {t.user_attrs[NUMBER]: t for t in study.trials}
    found = {}
    for trial in trials:
        if trial.phase != TrialPhase.RUNNING or not trial.curve:
            continue
        mine = frozen[trial.number]
        if spec.early_stopping and spec.early_stopping.algorithm.value == "SuccessiveHalving":
            if study.pruner.prune(study, mine):
                found[trial.number] = trial.curve[-1].step
            continue
        for step in (p.step for p in trial.curve):
            values = {s: v for s, v in mine.intermediate_values.items() if s <= step}
            prefix = create_trial(
                state=TrialState.RUNNING,
                params=mine.params,
                distributions=mine.distributions,
                intermediate_values=values,
            )
            if study.pruner.prune(study, prefix):
                found[trial.number] = step
                break
    return found


def _world(seed: int, algorithm: str) -> tuple[TrainingSweepSpec, list[Trial]]:
    rng = random.Random(seed)
    stopping: dict[str, Any] = {"algorithm": "Median", "startupTrials": rng.choice([0, 1, 3, 6])}
    stopping["warmupSteps"] = rng.choice([0, 40])
    if algorithm == "SuccessiveHalving":
        stopping = {"algorithm": algorithm, "reductionFactor": rng.choice([2, 3])}
        stopping |= {"minSteps": rng.choice([10, 20, 40])} if rng.random() < 0.8 else {}
    goal = rng.choice(["Maximize", "Minimize"])
    spec = make_sweep(earlyStopping=stopping, objective={"metric": "accuracy", "goal": goal}).spec
    trials = []
    for number in range(rng.randint(1, 14)):
        phase = rng.choice([TrialPhase.SUCCEEDED, TrialPhase.RUNNING, TrialPhase.RUNNING, TrialPhase.FAILED])
        steps = sorted(rng.sample(STEPS, rng.randint(1, 8)))  # trials evaluated at steps of their own
        curve = [ObjectivePoint(step=s, value=round(rng.random(), 2)) for s in steps]
        trials.append(
            Trial(
                number=number,
                job_name=job_name("sweep", number),
                parameters={"lr": 0.01, "batch": 16},
                phase=phase,
                objective=curve[-1].value,
                objective_step=curve[-1].step,
                curve=curve,
                total_steps=1000,
                start_time=T0,
            )
        )
    return spec, trials


ALGORITHMS = ("Median", "SuccessiveHalving")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("seed", range(60), ids=lambda s: f"world-{s}")
def test_each_rule_stops_the_trials_optuna_would_at_the_same_steps(algorithm: str, seed: int) -> None:
    spec, trials = _world(seed, algorithm)
    ours = {p.number: int(p.message.split("near step ")[1].split()[0]) for p in to_prune(spec, trials)}
    assert ours == _optuna_verdicts(spec, trials)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_worlds_prune_some_trials_and_spare_others(algorithm: str) -> None:
    """The comparison above means something only if the worlds hold both verdicts."""
    pruned = spared = 0
    for seed in range(60):
        spec, trials = _world(seed, algorithm)
        stopped = len(_optuna_verdicts(spec, trials))
        pruned += stopped
        spared += sum(t.phase == TrialPhase.RUNNING for t in trials) - stopped
    assert pruned >= 20 and spared >= 20
