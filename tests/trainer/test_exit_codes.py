"""Bad configuration is permanent: exit 78 with a message that names the field."""

from pathlib import Path

import pytest
from tests.trainer.trainer_procs import Pod, start_pod

GOOD = '"workload": "digits-mlp", "steps": 10'


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("TJ_TRAINER_CONFIG", "{" + GOOD + ', "batchSize": 0}', "batchSize"),
        ("TJ_TRAINER_CONFIG", "{" + GOOD + ', "learning_rate": 0.1}', "learning_rate"),
        ("TJ_TRAINER_CONFIG", '{"workload": "imagenet", "steps": 10}', "workload"),
        ("TJ_TRAINER_CONFIG", '{"workload": "digits-mlp"}', "steps"),
        ("TJ_TRAINER_CONFIG", "{" + GOOD + ', "optimizer": "adam", "momentum": 0.9}', "momentum"),
        ("TJ_TRAINER_CONFIG", "{not json", "(root)"),
        ("TJ_NPROC_PER_POD", "two", "TJ_NPROC_PER_POD"),
        ("TJ_TRAINER_CONFIG", '{"entrypoint": "no_such_package.train:build", "steps": 10}', "entrypoint"),
        ("TJ_TRAINER_CONFIG", '{"entrypoint": "trainer.recipe:length", "steps": 10}', "entrypoint"),
    ],
    ids=[
        "batch-size-zero",
        "snake-case-key",
        "unknown-workload",
        "no-steps",
        "momentum-with-adam",
        "not-json",
        "bad-nproc",
        "entrypoint-not-importable",
        "entrypoint-returns-no-recipe",
    ],
)
def test_bad_configuration_exits_78_naming_the_field(
    pods: list[Pod], logs: Path, variable: str, value: str, field: str
) -> None:
    env = {"TJ_TRAINER_CONFIG": "{" + GOOD + "}", variable: value}
    pod = start_pod(f"bad-{field}", env, logs)
    pods.append(pod)
    assert pod.wait(60) == 78, pod.text()
    assert f"field '{field}'" in pod.text()
