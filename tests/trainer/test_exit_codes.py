"""Bad configuration is permanent: exit 78 with a message that names the field."""

import json
from pathlib import Path

import pytest
from testbed.trainer_procs import Pod, start_pod

pytestmark = pytest.mark.trainer

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


BUGGY_RECIPE = """
from functools import partial
import torch
from torch.utils.data import Dataset
from trainer.recipe import Recipe

class Broken(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, index):
        if {broken_data} and index == 7:
            raise IndexError("no sample 7")
        return torch.zeros(2), 0

def loss(model, batch):
    if {broken_loss}:
        return model(batch["inputs"])  # a bug: the batch is a list, not a dict
    return torch.nn.functional.cross_entropy(model(batch[0]), batch[1])

def build(config):
    return Recipe(model=torch.nn.Linear(2, 2), optimizer=partial(torch.optim.SGD, lr=0.1), train_data=Broken(),
                  loss=loss)
"""


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        pytest.param("loss", "the recipe's loss raised TypeError", id="bug-in-the-loss"),
        pytest.param("data", "the recipe's train_data raised IndexError", id="bug-in-a-dataloader-worker"),
    ],
)
def test_a_bug_in_the_recipe_fails_at_once_naming_it(
    pods: list[Pod], logs: Path, tmp_path: Path, broken: str, says: str
) -> None:
    code = BUGGY_RECIPE.format(broken_loss=broken == "loss", broken_data=broken == "data")
    (tmp_path / "buggy.py").write_text(code)
    config = {"entrypoint": f"{tmp_path / 'buggy.py'}:build", "steps": 20, "batchSize": 4, "dataLoaderWorkers": 2}
    pod = start_pod(f"buggy-{broken}", {"TJ_TRAINER_CONFIG": json.dumps(config)}, logs)
    pods.append(pod)
    assert pod.wait(60) == 78, pod.text()
    assert "field 'entrypoint'" in pod.text() and says in pod.text(), pod.text()
