"""The TrainingSweep model: a bad search space is refused with an error naming the field, when it is submitted;
grids list their values; the search draws the same parameters from the same history."""

from typing import Any

import pytest
from pydantic import ValidationError
from tests.support.builders import SWEEP_PARAMETERS, T0, job_manifest, make_sweep, sweep_manifest, sweep_step

from trainingjob.model.history import EvaluationPoint
from trainingjob.model.sweep import TrainingSweep
from trainingjob.model.sweep_space import Parameter
from trainingjob.model.sweep_status import ObjectivePoint, Trial
from trainingjob.sweep.pruning import at_its_end
from trainingjob.sweep.sampling import grid_order, grid_position, next_parameters, trial_budget
from trainingjob.sweep.space import grid_point, grid_size
from trainingjob.sweep.trials import curve

pytestmark = pytest.mark.fast

LR = SWEEP_PARAMETERS[0]
WIDTHS = {"name": "width", "path": "workers.replicas", "type": "Int", "min": 1, "max": 3}


def _refusal(parameters: list[dict[str, Any]], **spec: Any) -> str:
    with pytest.raises(ValidationError) as refused:
        TrainingSweep.from_manifest(sweep_manifest(parameters=parameters, **spec))
    return str(refused.value)


@pytest.mark.parametrize(
    ("parameter", "where", "words"),
    [
        pytest.param({**LR, "min": None}, "type", "needs min and max", id="range-without-min"),
        pytest.param({**LR, "values": [1]}, "type", "needs min and max (and no values)", id="range-with-values"),
        pytest.param({**LR, "type": "Categorical"}, "type", "needs values", id="categorical-without-values"),
        pytest.param({**LR, "min": 0.5, "max": 0.1}, "max", "greater than min", id="max-below-min"),
        pytest.param({**LR, "min": 0.0}, "min", "log-scale parameter needs min above 0", id="log-from-zero"),
        pytest.param({**LR, "step": 0.1}, "step", "cannot be combined with log", id="log-with-step"),
        pytest.param({**LR, "log": False, "min": 0.0, "step": 1e-6}, "step", "or more values", id="grid-of-a-million"),
        pytest.param({**LR, "type": "Int", "log": False, "min": 1.5}, "min", "whole numbers", id="int-fraction"),
        pytest.param({**LR, "path": "metadata.name"}, "path", "should match pattern", id="path-outside-spec"),
        pytest.param({**LR, "name": "a b"}, "name", "should match pattern", id="name-with-space"),
        pytest.param({**LR, "max": 50.0}, "parameters.0", "less than or equal to 10", id="value-the-job-refuses"),
        pytest.param(
            {**LR, "path": "trainer.batchSize", "log": False}, "parameters.0", "valid integer", id="float-for-int"
        ),
        pytest.param(
            {**LR, "path": "trainer.optimiser"}, "parameters.0", "Extra inputs", id="field-the-job-does-not-have"
        ),
    ],
)
def test_a_bad_parameter_is_refused_naming_its_field(parameter: dict[str, Any], where: str, words: str) -> None:
    parameter = {k: v for k, v in parameter.items() if v is not None}
    message = _refusal([parameter])
    location = f"spec.{where}" if where.startswith("parameters") else f"spec.parameters.0.{where}"
    assert f"{location}\n" in message and words in message


def test_two_parameters_may_not_share_a_name_or_a_path() -> None:
    assert "duplicate name: lr" in _refusal([LR, {**LR, "path": "trainer.momentum"}])
    assert "duplicate path: trainer.learningRate" in _refusal([LR, {**LR, "name": "lr2"}])


def test_a_grid_needs_a_step_on_every_float() -> None:
    assert "Grid search needs a step" in _refusal([LR], search={"algorithm": "Grid"})


def test_a_grid_lists_every_combination_the_last_parameter_fastest() -> None:
    batch = Parameter.model_validate(SWEEP_PARAMETERS[1])
    width = Parameter.model_validate({"name": "w", "path": "workers.replicas", "type": "Int", "min": 1, "max": 3})
    assert width.grid() == [1, 2, 3] and grid_size([width, batch]) == 9
    assert [grid_point([width, batch], i) for i in (0, 1, 3, 8)] == [
        {"w": 1, "batch": 16},
        {"w": 1, "batch": 32},
        {"w": 2, "batch": 16},
        {"w": 3, "batch": 64},
    ]
    stepped = Parameter.model_validate(
        {"name": "m", "path": "trainer.momentum", "type": "Float", "min": 0.0, "max": 0.9, "step": 0.3}
    )
    assert stepped.grid() == pytest.approx([0.0, 0.3, 0.6, 0.9])


def test_a_grid_runs_each_combination_once_in_the_seeds_order() -> None:
    grid: dict[str, Any] = {"search": {"algorithm": "Grid"}, "parameters": [SWEEP_PARAMETERS[1]]}
    whole = make_sweep(maxTrials=10, **grid)
    assert trial_budget(whole.spec) == 3 and sorted(grid_order(whole.spec)) == [0, 1, 2]
    assert sorted(p["batch"] for p in next_parameters(whole.spec, [], 3)) == [16, 32, 64]
    assert next_parameters(whole.spec, [], 5) == next_parameters(whole.spec, [], 3)  # the budget bounds it
    # The cluster, browser and e2e sweep tests name a two-value grid's trials by their order under seed 0.
    assert [grid_position(2, 0, n) for n in range(2)] == [0, 1]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1000, 4099], ids=lambda size: f"size-{size}")
def test_the_grid_order_is_a_permutation_for_every_seed(size: int) -> None:
    for seed in (0, 1, 2**31 - 1):
        assert sorted(grid_position(size, seed, n) for n in range(size)) == list(range(size))
    if size >= 64:  # another seed, another order; and not the grid's own order
        assert [grid_position(size, 0, n) for n in range(16)] != [grid_position(size, 1, n) for n in range(16)]
        assert [grid_position(size, 0, n) for n in range(16)] != list(range(16))


def _ran(parameters: list[dict[str, Any]]) -> list[Trial]:
    return [Trial(number=n, job_name=f"t-{n}", parameters=p) for n, p in enumerate(parameters)]


def test_raising_max_trials_continues_the_grid_without_repeats() -> None:
    space: dict[str, Any] = {"search": {"algorithm": "Grid", "seed": 5}, "parameters": [SWEEP_PARAMETERS[1], WIDTHS]}
    small, large = make_sweep(maxTrials=3, **space), make_sweep(maxTrials=9, **space)
    first = next_parameters(small.spec, [], 3)
    assert next_parameters(small.spec, _ran(first), 2) == []  # its budget is spent
    rest = next_parameters(large.spec, _ran(first), 6)
    assert first + rest == next_parameters(large.spec, [], 9)  # the same order, continued
    assert len({tuple(sorted(p.items())) for p in first + rest}) == 9  # every combination, once


def test_a_grid_skips_combinations_earlier_trials_ran_in_another_order() -> None:
    sweep = make_sweep(maxTrials=9, search={"algorithm": "Grid"}, parameters=[SWEEP_PARAMETERS[1], WIDTHS])
    earlier = [{"batch": 16, "width": 1}, {"batch": 64, "width": 3}]  # what an older operator's order chose
    rest = next_parameters(sweep.spec, _ran(earlier), 7)
    assert len(rest) == 7 and not any(p in earlier for p in rest)
    assert len({tuple(sorted(p.items())) for p in earlier + rest}) == 9


@pytest.mark.parametrize("algorithm", ["Random", "TPE"])
def test_the_same_history_draws_the_same_parameters_and_a_new_seed_others(algorithm: str) -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=2, search={"algorithm": algorithm, "startupTrials": 1}), [])
    assert sweep.status is not None
    trials = sweep.status.trials
    assert next_parameters(sweep.spec, trials, 2) == next_parameters(sweep.spec, trials, 2)
    other = make_sweep(parallelism=2, search={"algorithm": algorithm, "seed": 7})
    assert next_parameters(other.spec, trials, 2) != next_parameters(sweep.spec, trials, 2)
    for values in next_parameters(sweep.spec, trials, 5):
        assert 0.001 <= float(values["lr"]) <= 1.0 and values["batch"] in (16, 32, 64)


def test_a_curve_keeps_at_most_16_points_at_the_same_steps_for_every_trial() -> None:
    def evaluations(last: int) -> list[EvaluationPoint]:
        return [EvaluationPoint(step=s, time=T0, metrics={"accuracy": s / 1000}) for s in range(10, last + 1, 10)]

    long, longer = curve(evaluations(400), "accuracy"), curve(evaluations(700), "accuracy")
    assert len(long) <= 16 and len(longer) <= 16
    assert {p.step for p in longer} <= {p.step for p in long} | set(range(0, 701, 80))
    assert all(p.step % 40 == 0 for p in long) and long[0] == ObjectivePoint(step=40, value=0.04)
    assert curve(evaluations(50), "accuracy")[-1].step == 50 and curve(evaluations(50), "loss") == []


def test_a_curve_with_total_steps_takes_the_same_sixteenths_for_every_trial() -> None:
    def evaluations(every: int, last: int) -> list[EvaluationPoint]:
        return [EvaluationPoint(step=s, time=T0, metrics={"accuracy": s / 1000}) for s in range(every, last + 1, every)]

    dense, sparse = curve(evaluations(10, 490), "accuracy", 1600), curve(evaluations(70, 490), "accuracy", 1600)
    assert [p.step for p in dense] == [p.step for p in sparse] == [100, 200, 300, 400]  # only the marks reached
    assert [p.value for p in dense] == [0.1, 0.2, 0.3, 0.4]
    assert [p.value for p in sparse] == [0.07, 0.21, 0.28, 0.42]  # the evaluation nearest each mark
    whole = curve(evaluations(10, 1600), "accuracy", 1600)
    assert len(whole) == 16 and whole[-1].step == 1600
    assert curve(evaluations(10, 50), "accuracy", 1600) == [] and curve(evaluations(10, 50), "loss", 1600) == []


@pytest.mark.parametrize(
    ("step", "objective_step", "total", "at_end"),
    [
        (1000, 950, 1000, True),
        (400, 1000, 1000, True),
        (999, 950, 1000, False),
        (1000, 1000, None, False),
        (None, None, 1000, False),
    ],
    ids=["reported-last-step", "evaluated-last-step", "one-step-short", "total-unknown", "nothing-reported"],
)
def test_a_trial_is_at_its_end_once_it_reached_its_total_steps(
    step: int | None, objective_step: int | None, total: int | None, at_end: bool
) -> None:
    trial = Trial(number=0, job_name="t-0", parameters={}, step=step, objective_step=objective_step, total_steps=total)
    assert at_its_end(trial) is at_end


def test_a_template_with_a_ttl_is_refused_naming_the_field() -> None:
    template = {"spec": {**job_manifest(trainer={"steps": 100})["spec"], "runPolicy": {"ttlSecondsAfterFinished": 60}}}
    refusal = _refusal(SWEEP_PARAMETERS, template=template)
    assert "template.spec.runPolicy.ttlSecondsAfterFinished" in refusal and "before the sweep recorded" in refusal
