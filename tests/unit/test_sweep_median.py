"""The median rule from per-step medians computed once per reconcile decides as Optuna's MedianPruner asked trial by
trial and step by step (what the planner did before; its cost grew as trials x steps x finished trials)."""

import random

import pytest
from optuna.trial import TrialState, create_trial
from tests.support.builders import T0, make_sweep

from trainingjob.model.sweep import TrainingSweepSpec
from trainingjob.model.sweep_status import ObjectivePoint, Trial, TrialPhase
from trainingjob.sweep.plan import job_name
from trainingjob.sweep.pruning import aligned, to_prune
from trainingjob.sweep.study import NUMBER, rebuilt

pytestmark = pytest.mark.fast
STEPS = [10 * k for k in range(1, 17)]


def _optuna_verdicts(spec: TrainingSweepSpec, trials: list[Trial]) -> dict[int, int]:
    """Trial number -> the first own step at which MedianPruner stops it, asking at each prefix of its curve."""
    study = rebuilt(spec, aligned(trials), len(trials))
    frozen = {t.user_attrs[NUMBER]: t for t in study.trials}
    found = {}
    for trial in trials:
        if trial.phase != TrialPhase.RUNNING or not trial.curve:
            continue
        mine = frozen[trial.number]
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


def _world(seed: int) -> tuple[TrainingSweepSpec, list[Trial]]:
    rng = random.Random(seed)
    stopping = {"algorithm": "Median", "startupTrials": rng.choice([0, 1, 3, 6]), "warmupSteps": rng.choice([0, 40])}
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


@pytest.mark.parametrize("seed", range(60), ids=lambda s: f"world-{s}")
def test_the_median_rule_stops_the_trials_optuna_would_at_the_same_steps(seed: int) -> None:
    spec, trials = _world(seed)
    ours = {p.number: int(p.message.split("near step ")[1].split()[0]) for p in to_prune(spec, trials)}
    assert ours == _optuna_verdicts(spec, trials)


def test_the_worlds_prune_some_trials_and_spare_others() -> None:
    """The comparison above means something only if the worlds hold both verdicts."""
    pruned = spared = 0
    for seed in range(60):
        spec, trials = _world(seed)
        stopped = len(_optuna_verdicts(spec, trials))
        pruned += stopped
        spared += sum(t.phase == TrialPhase.RUNNING for t in trials) - stopped
    assert pruned >= 20 and spared >= 20
