"""TJ_TRAINER_CONFIG parsing: camelCase fields, defaults, and errors that name the field."""

import json

import pytest

from trainer.config import OptimizerName, Workload, parse_trainer_config
from trainer.failures import ConfigError

pytestmark = pytest.mark.fast


def test_camel_case_fields_parse() -> None:
    raw = json.dumps(
        {
            "workload": "digits-cnn",
            "epochs": 3,
            "batchSize": 16,
            "learningRate": 0.01,
            "optimizer": "sgd",
            "momentum": 0.9,
            "seed": 5,
            "stalenessBound": 2,
            "asyncCheckpoint": True,
        }
    )
    config = parse_trainer_config(raw)
    assert config.workload == Workload.DIGITS_CNN
    assert (config.epochs, config.steps, config.batch_size, config.seed) == (3, None, 16, 5)
    assert (config.optimizer, config.momentum, config.staleness_bound) == (OptimizerName.SGD, 0.9, 2)
    assert config.async_checkpoint is True


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"steps": 1, "batchSize": -1}', "batchSize"),
        ('{"steps": 1, "learningRate": 0}', "learningRate"),
        ('{"steps": 1, "optimizer": "lbfgs"}', "optimizer"),
        ('{"steps": 1, "batch_size": 4}', "batch_size"),
        ('{"steps": 0}', "steps"),
        ('{"steps": 1, "epochs": 1}', "steps"),
        ("{}", "steps"),
        ('{"steps": 1, "optimizer": "adamw", "momentum": 0.5}', "momentum"),
        ('{"steps": 1, "stalenessBound": -1}', "stalenessBound"),
        ("[]", "(root)"),
        ("", "(root)"),
    ],
    ids=[
        "negative-batch",
        "zero-lr",
        "unknown-optimizer",
        "snake-case",
        "zero-steps",
        "steps-and-epochs",
        "neither",
        "momentum-adamw",
        "negative-staleness",
        "not-an-object",
        "empty",
    ],
)
def test_errors_name_the_field(raw: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_trainer_config(raw)
    assert caught.value.field == field
    assert f"field '{field}'" in str(caught.value)
