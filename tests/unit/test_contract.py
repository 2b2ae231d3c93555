"""The operator's and the trainer's copies of their contract agree, name for name and code for code."""

import json

import pytest

import trainer.contract as trainer_side
import trainingjob.children.contract as operator_side
from trainer.config import parse_trainer_config
from trainingjob.model import TrainerSpec

pytestmark = pytest.mark.fast


def test_both_sides_name_the_same_environment_variables() -> None:
    assert operator_side.ALL_VARIABLES == trainer_side.ALL_VARIABLES
    for name in operator_side.ALL_VARIABLES:
        assert name.isupper()


def test_both_sides_give_exit_codes_the_same_meaning() -> None:
    operator_codes = {code.name: code.value for code in operator_side.ExitCode}
    assert operator_codes == {code.name: code.value for code in trainer_side.ExitCode}


def test_both_sides_name_the_roles_alike() -> None:
    assert operator_side.ROLE_WORKER == trainer_side.ROLE_WORKER
    assert operator_side.ROLE_PS == trainer_side.ROLE_PS


def test_both_sides_name_the_sweeper_mode_alike() -> None:
    assert operator_side.SWEEPER_FLAG == trainer_side.SWEEPER_FLAG


def test_exit_codes_do_not_collide_with_signal_deaths() -> None:
    assert all(0 <= code < 128 for code in operator_side.ExitCode)


@pytest.mark.parametrize(
    "trainer",
    [
        pytest.param({"steps": 5, "optimizer": "sgd", "momentum": 0.5, "stalenessBound": 0}, id="built-in"),
        pytest.param(
            {
                "entrypoint": "shapes.py:build",
                "config": {"width": 8, "layers": [1, 2]},
                "epochs": 2,
                "gradientAccumulationSteps": 4,
                "clipGradNorm": 1.0,
                "precision": "bf16",
                "dataLoaderWorkers": 2,
                "evalEverySteps": 50,
                "asyncCheckpoint": True,
            },
            id="entrypoint",
        ),
    ],
)
def test_what_the_operator_sends_the_trainer_parses_unchanged(trainer: dict[str, object]) -> None:
    sent = TrainerSpec.model_validate(trainer).model_dump(mode="json", by_alias=True, exclude_none=True)
    parsed = parse_trainer_config(json.dumps(sent)).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert {key: parsed[key] for key in sent} == sent
