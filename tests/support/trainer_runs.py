"""What the trainer tests share: the shapes recipe's config and goal, and the parameter-server runs' bounds."""

from typing import Any

from testbed.trainer_procs import config_json

SHAPES = "examples/image-classification/shapes.py:build"
EVAL_EVERY = 40
GOAL = 0.9  # test accuracy the recipe reaches on 4 shapes (chance: 0.25)
RUN_TIMEOUT = 120.0  # a parameter-server run's
REPLY_LIMIT = 4 << 20  # far above a digits-mlp shard's parameters


def shapes(**fields: Any) -> str:
    """TJ_TRAINER_CONFIG for the shapes recipe on a smaller data set."""
    user = {"trainSamples": 2048, "evalSamples": 256, "learningRate": 0.01}
    return config_json(entrypoint=SHAPES, config=user, batchSize=32, seed=3, evalEverySteps=EVAL_EVERY, **fields)


def assert_refused_exactly_beyond(progress: dict[str, object], bound: int) -> None:
    """Every gradient staler than the bound was refused, and only those (the shards' own histogram)."""
    histogram = {int(k): v for k, v in progress["stalenessHistogram"].items()}  # type: ignore[attr-defined]
    assert progress["refusedGradients"] == sum(n for staleness, n in histogram.items() if staleness > bound)
    assert progress["acceptedGradients"] == sum(n for staleness, n in histogram.items() if staleness <= bound)
