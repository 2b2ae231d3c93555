"""Classify small images of shapes with a CNN: a recipe for the TrainingJob trainer (spec.trainer.entrypoint).

The images are drawn on the fly (nothing is downloaded): a circle, a square, a triangle or a cross, at a size and
place that depend on the sample's index. Training samples are augmented (flips, shifts, noise) from torch's random
generator, which the platform seeds per sample, so a resumed run sees exactly the same batches.

Try it without a cluster, from the repository's root:
  bin/tjctl run examples/image-classification/shapes-ddp.yaml
"""

import math
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

from trainer.recipe import Recipe, classification_metrics

CLASSES = ("circle", "square", "triangle", "cross")
SIZE = 16


def draw(label: int, generator: torch.Generator) -> torch.Tensor:
    """One SIZE x SIZE image of shape `label`, its size and centre drawn from `generator`."""
    radius = 3.0 + 3.0 * torch.rand((), generator=generator).item()
    cy, cx = (radius + (SIZE - 2 * radius) * torch.rand(2, generator=generator)).tolist()
    y, x = torch.meshgrid(torch.arange(SIZE) - cy, torch.arange(SIZE) - cx, indexing="ij")
    if CLASSES[label] == "circle":
        mask = x**2 + y**2 <= radius**2
    elif CLASSES[label] == "square":
        mask = (x.abs() <= radius * 0.8) & (y.abs() <= radius * 0.8)
    elif CLASSES[label] == "triangle":
        mask = (y <= radius * 0.7) & (y >= 2 * x.abs() - radius)
    else:
        mask = ((x.abs() <= radius / 3) | (y.abs() <= radius / 3)) & (x.abs() <= radius) & (y.abs() <= radius)
    return mask.float().unsqueeze(0)


class Shapes(Dataset[tuple[torch.Tensor, int]]):
    """`samples` labelled images; sample i is the same everywhere (drawn from a generator seeded with i)."""

    def __init__(self, samples: int, *, offset: int = 0, augment: bool = False) -> None:
        self.samples, self.offset, self.augment = samples, offset, augment

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        generator = torch.Generator().manual_seed(self.offset + index)
        label = int(torch.randint(len(CLASSES), (), generator=generator))
        image = draw(label, generator)
        if self.augment:  # torch's global generator: the platform seeds it for every sample
            if torch.rand(()) < 0.5:
                image = image.flip(-1)
            shift = torch.randint(-1, 2, (2,)).tolist()
            image = image.roll(shifts=shift, dims=(-2, -1))
            image = image + 0.1 * torch.randn_like(image)
        return image, label


class SmallCnn(nn.Module):
    """Two convolutions and a linear classifier, with dropout."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Dropout(0.1),
        )
        self.classify = nn.Linear(2 * width * (SIZE // 4) ** 2, len(CLASSES))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.classify(self.features(images))
        return logits


def warmup_cosine(optimizer: torch.optim.Optimizer, updates: int, warmup: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over `warmup` updates, then a cosine decay to zero at the last update."""

    def factor(update: int) -> float:
        if update < warmup:
            return (update + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (update - warmup) / max(1, updates - warmup))))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def build(config: dict[str, Any]) -> Recipe:
    """The recipe; `config` is spec.trainer.config (every key optional)."""
    return Recipe(
        model=SmallCnn(width=int(config.get("width", 8))),
        optimizer=partial(
            torch.optim.AdamW,
            lr=float(config.get("learningRate", 0.01)),
            weight_decay=float(config.get("weightDecay", 1e-4)),
        ),
        scheduler=partial(warmup_cosine, warmup=int(config.get("warmupUpdates", 20))),
        train_data=Shapes(int(config.get("trainSamples", 4096)), augment=bool(config.get("augment", True))),
        eval_data=Shapes(int(config.get("evalSamples", 512)), offset=1_000_000),
        metrics=classification_metrics,
    )
