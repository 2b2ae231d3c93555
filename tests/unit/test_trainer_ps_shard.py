"""Parameter-server rules: shard assignment, the staleness bound, idempotent pushes."""

from functools import partial

import pytest
import torch

from trainer.ps_shard import ShardState, assign_shards, is_accepted

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("staleness", "bound", "accepted"),
    [(0, 0, True), (1, 0, False), (4, 4, True), (5, 4, False), (-1, 4, False)],
    ids=["fresh", "bound-zero", "at-bound", "over-bound", "from-the-future"],
)
def test_staleness_rule(staleness: int, bound: int, accepted: bool) -> None:
    assert is_accepted(staleness, bound) is accepted


def test_assign_shards_balances_sizes_deterministically() -> None:
    sizes = [("a", 100), ("b", 60), ("c", 50), ("d", 10)]
    assignment = assign_shards(sizes, 2)
    assert assignment == {"a": 0, "b": 1, "c": 1, "d": 0}
    assert assign_shards(list(reversed(sizes)), 2) == assignment


def shard(bound: int) -> ShardState:
    return ShardState({"w": torch.zeros(2)}, partial(torch.optim.SGD, lr=1.0), bound)


def test_stale_gradients_are_refused_and_repeats_ignored() -> None:
    state = shard(bound=1)
    grad = {"w": torch.ones(2)}
    assert state.apply(worker=0, step=0, version=0, grads=grad).accepted
    assert state.apply(worker=1, step=0, version=0, grads=grad).accepted
    refused = state.apply(worker=2, step=0, version=0, grads=grad)
    assert (refused.accepted, refused.staleness) == (False, 2)
    assert state.apply(worker=0, step=0, version=2, grads=grad).duplicate
    assert torch.equal(state.values()["w"], torch.full((2,), -2.0))
    assert (state.version, state.stats.max_staleness, state.stats.max_staleness_seen) == (2, 1, 2)
    assert state.next_step(2) == 1


def test_state_round_trips() -> None:
    state = shard(bound=3)
    state.apply(worker=0, step=0, version=0, grads={"w": torch.ones(2)})
    copy = shard(bound=3)
    copy.load_state_dict(state.state_dict())
    assert (copy.version, copy.next_steps, copy.stats) == (state.version, state.next_steps, state.stats)
    assert torch.equal(copy.values()["w"], state.values()["w"])


@pytest.mark.parametrize(
    ("step", "version", "grads", "problem"),
    [
        (2, 0, {"w": torch.ones(2)}, "step 2"),
        (-1, 0, {"w": torch.ones(2)}, "step -1"),
        (1, 2, {"w": torch.ones(2)}, "version 2"),
        (1, 0, {"w": torch.ones(3)}, "gradient of 'w'"),
        (1, 0, {"w": torch.ones(2, dtype=torch.float64)}, "gradient of 'w'"),
        (1, 0, {"w": torch.ones(2), "x": torch.ones(2)}, "exactly"),
        (1, 0, {}, "exactly"),
        (1, 0, None, "exactly"),
    ],
    ids=["skips-a-step", "negative-step", "future-version", "shape", "dtype", "extra-name", "missing", "not-a-dict"],
)
def test_pushes_that_do_not_fit_the_shard_are_refused(step: int, version: int, grads: object, problem: str) -> None:
    state = shard(bound=1)
    state.apply(worker=0, step=0, version=0, grads={"w": torch.ones(2)})
    with pytest.raises(ValueError, match=problem):
        state.check_push(worker=0, step=step, version=version, grads=grads)


def test_a_repeated_or_next_step_fits() -> None:
    state = shard(bound=1)
    state.apply(worker=0, step=0, version=0, grads={"w": torch.ones(2)})
    grads = {"w": torch.ones(2)}
    assert state.check_push(worker=0, step=0, version=1, grads=grads) is grads
    assert state.check_push(worker=0, step=1, version=0, grads=grads) is grads
    assert state.check_push(worker=1, step=0, version=1, grads=grads) is grads
