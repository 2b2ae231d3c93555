"""The training API's pure parts: data order with accumulation, seeded samples, entrypoints, gradients, metrics."""

import json
from functools import partial
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from trainer.config import parse_trainer_config
from trainer.data import DataOrder, TrainBatches
from trainer.entrypoint import build_recipe
from trainer.failures import ConfigError
from trainer.recipe import Recipe, cross_entropy
from trainer.steps import accumulate_gradients, evaluate, means

pytestmark = pytest.mark.fast

CPU = torch.device("cpu")


class Noisy(Dataset[tuple[torch.Tensor, int]]):
    """A data set that augments with torch's global RNG, like a transform pipeline does."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.full((3,), float(index)) + torch.rand(3), index % 2


def order(accumulation: int = 1, rank: int = 0) -> DataOrder:
    return DataOrder(64, 4, accumulation, replicas=2, rank=rank, seed=3)


def test_a_step_takes_consecutive_micro_batches_and_an_epoch_takes_each_sample_once() -> None:
    data = order(accumulation=2)
    assert data.steps_per_epoch == 4  # 32 samples per replica / (4 x 2)
    epoch = [index for step in range(4) for batch in data.micro_batches(step, step + 1) for index in batch.tolist()]
    assert len(set(epoch)) == 32
    other = {
        i for step in range(4) for b in order(accumulation=2, rank=1).micro_batches(step, step + 1) for i in b.tolist()
    }
    assert not other & set(epoch), "the two replicas share samples"
    assert sorted(other | set(epoch)) == list(range(64))
    assert data.permutation(1).tolist() != data.permutation(0).tolist()


def test_a_step_larger_than_a_replicas_share_names_the_batch_size() -> None:
    with pytest.raises(ValueError, match="batchSize 16 x gradientAccumulationSteps 4"):
        DataOrder(64, 16, 4, replicas=2, rank=0, seed=0)


def batches_of(workers: int, steps: range) -> list[torch.Tensor]:
    source = TrainBatches(Noisy(), order(accumulation=2), device=CPU, seed=5, workers=workers)
    return [batch[0] for step in steps for batch in source.step(step)]


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "two-workers"])
def test_augmented_samples_depend_on_seed_epoch_and_index_only(workers: int) -> None:
    reference = batches_of(0, range(10))
    assert all(torch.equal(a, b) for a, b in zip(batches_of(workers, range(10)), reference, strict=True))
    resumed = batches_of(workers, range(6, 10))  # a run resumed at step 6 (mid-epoch 1)
    assert all(torch.equal(a, b) for a, b in zip(resumed, reference[12:], strict=True))
    epochs = batches_of(workers, range(4)), batches_of(workers, range(4, 8))
    assert not torch.equal(torch.cat(epochs[0]).sort(0).values, torch.cat(epochs[1]).sort(0).values)


def test_loading_samples_leaves_torchs_own_random_state_alone() -> None:
    state = torch.get_rng_state()
    batches_of(0, range(3))
    assert torch.equal(torch.get_rng_state(), state)


def test_in_memory_tensors_are_indexed_directly_with_the_same_order() -> None:
    x, y = torch.arange(64.0).unsqueeze(1), torch.arange(64)
    fast = TrainBatches(TensorDataset(x, y), order(), device=CPU, seed=0)
    assert fast.tensors is not None
    slow = TrainBatches(TensorDataset(x, y), order(), device=CPU, seed=0, collate=torch.utils.data.default_collate)
    for step in range(5):
        assert torch.equal(fast.step(step)[0][1], slow.step(step)[0][1])


def write_module(folder: Path, body: str) -> str:
    (folder / "user_recipe.py").write_text(body)
    return f"{folder / 'user_recipe.py'}:build"


GOOD = """
from functools import partial
import torch
from torch.utils.data import TensorDataset
from trainer.recipe import Recipe
def build(config):
    return Recipe(model=torch.nn.Linear(2, 2), optimizer=partial(torch.optim.SGD, lr=config["lr"]),
                  train_data=TensorDataset(torch.zeros(8, 2), torch.zeros(8, dtype=torch.long)))
"""


@pytest.mark.parametrize(
    ("body", "entrypoint", "problem"),
    [
        pytest.param(None, "no_such_module:build", "importing 'no_such_module' failed", id="missing-module"),
        pytest.param(None, "missing/file.py:build", "no file missing/file.py", id="missing-file"),
        pytest.param(GOOD, "{module}:nope", "has no function 'nope'", id="missing-function"),
        pytest.param("def build(config):\n    return 1\n", "{module}:build", "returned int", id="not-a-recipe"),
        pytest.param(
            "def build(config):\n    raise KeyError('lr')\n", "{module}:build", "raised KeyError", id="raises"
        ),
        pytest.param("import nonexistent_dependency\n", "{module}:build", "ModuleNotFoundError", id="bad-import"),
        pytest.param(
            GOOD.replace("torch.zeros(8, 2)", "torch.zeros(0, 2)").replace("zeros(8,", "zeros(0,"),
            "{module}:build",
            "train_data is empty",
            id="empty-data",
        ),
    ],
)
def test_an_entrypoint_that_cannot_give_a_recipe_is_a_config_error_naming_it(
    tmp_path: Path, body: str | None, entrypoint: str, problem: str
) -> None:
    module = write_module(tmp_path, body).rpartition(":")[0] if body is not None else ""
    config = parse_trainer_config(
        json.dumps({"entrypoint": entrypoint.format(module=module), "steps": 1, "config": {"lr": 0.1}})
    )
    with pytest.raises(ConfigError, match="entrypoint") as raised:
        build_recipe(config)
    assert problem in str(raised.value)


def test_an_entrypoint_gets_its_config_and_a_seeded_model(tmp_path: Path) -> None:
    raw = {"entrypoint": write_module(tmp_path, GOOD), "steps": 1, "seed": 4, "config": {"lr": 0.5}}
    first, second = (build_recipe(parse_trainer_config(json.dumps(raw))) for _ in range(2))
    assert first.optimizer(first.model.parameters()).param_groups[0]["lr"] == 0.5
    assert torch.equal(first.model.state_dict()["weight"], second.model.state_dict()["weight"])


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        pytest.param({"entrypoint": "m:build", "learningRate": 0.1}, "learningRate", id="entrypoint-and-lr"),
        pytest.param({"entrypoint": "m:build", "workload": "synthetic"}, "workload", id="entrypoint-and-workload"),
        pytest.param({"config": {"a": 1}}, "config", id="config-without-entrypoint"),
        pytest.param({"entrypoint": "not a path"}, "entrypoint", id="malformed-entrypoint"),
        pytest.param({"precision": "fp8"}, "precision", id="unknown-precision"),
        pytest.param({"gradientAccumulationSteps": 0}, "gradientAccumulationSteps", id="zero-accumulation"),
    ],
)
def test_conflicting_trainer_settings_name_the_field(fields: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=f"TJ_TRAINER_CONFIG.*{field}"):
        parse_trainer_config(json.dumps({"steps": 1, **fields}))


def linear_recipe() -> Recipe:
    torch.manual_seed(0)
    return Recipe(model=nn.Linear(4, 3), optimizer=partial(torch.optim.SGD, lr=0.1), train_data=TensorDataset())


def test_accumulated_micro_batches_give_the_gradient_of_the_whole_batch() -> None:
    recipe, x, y = linear_recipe(), torch.randn(16, 4), torch.randint(3, (16,))
    config = parse_trainer_config('{"steps": 1}')
    accumulate_gradients(recipe.model, recipe, [(x[:8], y[:8]), (x[8:], y[8:])], config, device=CPU)
    weight = dict(recipe.model.named_parameters())["weight"]
    assert weight.grad is not None
    accumulated = weight.grad.clone()
    recipe.model.zero_grad()
    cross_entropy(recipe.model, (x, y)).backward()  # type: ignore[no-untyped-call]
    assert weight.grad is not None and torch.allclose(accumulated, weight.grad)


def test_clipping_bounds_the_gradient_norm_and_bf16_autocasts_the_forward() -> None:
    recipe, x, y = linear_recipe(), 100 * torch.randn(8, 4), torch.randint(3, (8,))
    seen: list[torch.dtype] = []
    recipe.model.register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
    config = parse_trainer_config('{"steps": 1, "clipGradNorm": 0.5, "precision": "bf16"}')
    loss = accumulate_gradients(recipe.model, recipe, [(x, y)], config, device=CPU)
    grads = [p.grad for p in recipe.model.parameters() if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.cat([grad.flatten() for grad in grads]))
    assert seen == [torch.bfloat16] and loss > 0 and norm <= 0.5 + 1e-6


def test_metrics_are_sample_weighted_means_over_every_replica() -> None:
    recipe, config = linear_recipe(), parse_trainer_config('{"steps": 1}')
    batches = [(torch.randn(3, 4), torch.randint(3, (3,))), (torch.randn(1, 4), torch.randint(3, (1,)))]
    sums, count = evaluate(recipe.model, recipe, batches, CPU, config)
    assert count == 4 and set(sums) == {"loss"}
    assert means([(sums, count), ({"loss": 0.0}, 4)]) == {"loss": sums["loss"] / 8}
    assert recipe.model.training
