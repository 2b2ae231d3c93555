"""The built-in workloads, recipes like any user's; none downloads anything: digits (MLP, CNN) and synthetic data."""

import gzip
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

from trainer.config import OptimizerName, Workload
from trainer.recipe import OptimizerFactory, Recipe, classification_metrics

_TEST_FRACTION = 0.2
_SPLIT_SEED = 1234
_SYNTHETIC_FEATURES = 256
_SYNTHETIC_TRAIN, _SYNTHETIC_TEST = 16384, 2048


@dataclass(frozen=True)
class Dataset:
    """In-memory train and test tensors."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def _digits_file() -> Path | None:
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    return path if path.is_file() else None


def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    # Reading the file scikit-learn bundles saves the seconds `import sklearn` costs every rank.
    path = _digits_file()
    if path is None:
        from sklearn.datasets import load_digits  # noqa: PLC0415

        bunch = load_digits()
        return np.asarray(bunch.data, dtype=np.float32), np.asarray(bunch.target, dtype=np.int64)
    with gzip.open(path, "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.float32)
    return table[:, :-1], table[:, -1].astype(np.int64)


def _split(x: np.ndarray, y: np.ndarray) -> Dataset:
    order = np.random.default_rng(_SPLIT_SEED).permutation(len(y))
    test = int(len(y) * _TEST_FRACTION)
    x_t, y_t = torch.from_numpy(np.ascontiguousarray(x[order])), torch.from_numpy(y[order])
    return Dataset(x_t[test:], y_t[test:], x_t[:test], y_t[:test])


def _synthetic() -> Dataset:
    generator = torch.Generator().manual_seed(_SPLIT_SEED)
    x = torch.randn(_SYNTHETIC_TRAIN + _SYNTHETIC_TEST, _SYNTHETIC_FEATURES, generator=generator)
    teacher = torch.randn(_SYNTHETIC_FEATURES, 10, generator=generator)
    y = (x @ teacher).argmax(dim=1)
    return Dataset(x[_SYNTHETIC_TEST:], y[_SYNTHETIC_TEST:], x[:_SYNTHETIC_TEST], y[:_SYNTHETIC_TEST])


def load_dataset(workload: Workload) -> Dataset:
    """The workload's data, split the same way on every rank and every attempt."""
    if workload == Workload.SYNTHETIC:
        return _synthetic()
    x, y = _digits_arrays()
    x = x / 16.0
    if workload == Workload.DIGITS_CNN:
        x = x.reshape(-1, 1, 8, 8)
    return _split(x, y)


def build_model(workload: Workload) -> nn.Module:
    """The workload's model, initialised from torch's current RNG state."""
    if workload == Workload.DIGITS_MLP:
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    if workload == Workload.DIGITS_CNN:
        return nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, 10),
        )
    return nn.Sequential(
        nn.Linear(_SYNTHETIC_FEATURES, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )


def optimizer_factory(settings: dict[str, Any]) -> OptimizerFactory:
    """The built-in optimizers: sgd (with momentum), adam or adamw at `learningRate`."""
    learning_rate, name = float(settings["learningRate"]), OptimizerName(settings["optimizer"])
    if name == OptimizerName.ADAM:
        return partial(torch.optim.Adam, lr=learning_rate)
    if name == OptimizerName.ADAMW:
        return partial(torch.optim.AdamW, lr=learning_rate)
    return partial(torch.optim.SGD, lr=learning_rate, momentum=float(settings.get("momentum", 0.0)))


def workload_recipe(workload: Workload, settings: dict[str, Any]) -> Recipe:
    """A built-in workload as an ordinary recipe: in-memory tensors, classification metrics."""
    data = load_dataset(workload)
    return Recipe(
        model=build_model(workload),
        optimizer=optimizer_factory(settings),
        train_data=TensorDataset(data.x_train, data.y_train),
        eval_data=TensorDataset(data.x_test, data.y_test),
        metrics=classification_metrics,
    )


def digits_mlp(settings: dict[str, Any]) -> Recipe:
    """spec.trainer.workload digits-mlp: a two-layer perceptron on scikit-learn's 8x8 digits."""
    return workload_recipe(Workload.DIGITS_MLP, settings)


def digits_cnn(settings: dict[str, Any]) -> Recipe:
    """spec.trainer.workload digits-cnn: a small CNN on the same digits."""
    return workload_recipe(Workload.DIGITS_CNN, settings)


def synthetic(settings: dict[str, Any]) -> Recipe:
    """spec.trainer.workload synthetic: a wider MLP on random data labelled by a random linear teacher."""
    return workload_recipe(Workload.SYNTHETIC, settings)


RECIPES: dict[Workload, Callable[[dict[str, Any]], Recipe]] = {
    Workload.DIGITS_MLP: digits_mlp,
    Workload.DIGITS_CNN: digits_cnn,
    Workload.SYNTHETIC: synthetic,
}
