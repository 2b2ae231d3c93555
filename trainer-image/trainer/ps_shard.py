"""A parameter shard and its rules: shard assignment, bounded staleness, synchronous rounds, idempotent pushes.

The staleness rule: a gradient's staleness is the number of updates this shard applied between the pull the
worker computed it from (the version it names) and its arrival. A gradient staler than the bound is refused
(dropped), never applied; the worker simply carries on with the fresh parameters that come with the refusal.

With a bound above 0 the shard is asynchronous: each accepted gradient is applied at once, no worker ever waits
for another, and every applied gradient is at most `stalenessBound` updates old.

A bound of 0 is synchronous: the gradients computed on the current version are summed into an open round, and
closing the round applies their mean as one update (the server closes it once every worker it expects has
contributed, see ps_server). Every applied gradient is fresh; one computed on a replaced version is refused.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from torch.optim.lr_scheduler import LRScheduler

from trainer.config import TrainerConfig
from trainer.env import TrainerEnv
from trainer.recipe import Recipe, length
from trainer.training import build_optimizer, build_scheduler, data_order, total_steps

OptimizerBuilder = Callable[[list[torch.Tensor]], torch.optim.Optimizer]
SchedulerBuilder = Callable[[torch.optim.Optimizer], LRScheduler | None]

SYNC_ROUND_SECONDS = 30.0
"""The longest a synchronous round waits for an expected worker's gradient before closing without it."""


def assign_shards(sizes: Sequence[tuple[str, int]], shards: int) -> dict[str, int]:
    """Parameter name -> shard index, balancing element counts: largest first onto the least loaded shard."""
    loads = [0] * shards
    assignment: dict[str, int] = {}
    for name, size in sorted(sizes, key=lambda item: (-item[1], item[0])):
        target = min(range(shards), key=lambda index: (loads[index], index))
        assignment[name] = target
        loads[target] += size
    return assignment


def is_accepted(staleness: int, bound: int) -> bool:
    """The bounded-staleness rule: apply a gradient only if at most `bound` updates came in between."""
    return 0 <= staleness <= bound


@dataclass(frozen=True)
class PushResult:
    """What became of one pushed gradient."""

    accepted: bool
    staleness: int
    duplicate: bool = False


@dataclass
class ShardStats:
    """Counters the job reports at the end."""

    accepted: int = 0
    refused: int = 0
    duplicates: int = 0
    max_staleness: int = 0
    max_staleness_seen: int = 0
    histogram: dict[int, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for messages and checkpoints."""
        return {
            "accepted": self.accepted,
            "refused": self.refused,
            "duplicates": self.duplicates,
            "max_staleness": self.max_staleness,
            "max_staleness_seen": self.max_staleness_seen,
            "histogram": dict(self.histogram),
        }


class ShardState:
    """This shard's parameters, optimizer, version and each worker's next step."""

    def __init__(
        self,
        params: dict[str, torch.Tensor],
        optimizer: OptimizerBuilder,
        bound: int,
        scheduler: SchedulerBuilder | None = None,
    ) -> None:
        self.params = {name: tensor.detach().clone().requires_grad_(True) for name, tensor in params.items()}
        self.optimizer = optimizer(list(self.params.values()))
        self.scheduler = scheduler(self.optimizer) if scheduler is not None else None
        self.bound = bound
        self.version = 0
        self.next_steps: dict[int, int] = {}
        self.stats = ShardStats()
        self.round_workers: set[int] = set()
        self.round_sum: dict[str, torch.Tensor] = {}
        self.round_size = 0

    @property
    def synchronous(self) -> bool:
        """A bound of 0: updates are synchronous rounds (see the module's docstring)."""
        return self.bound == 0

    def next_step(self, worker: int) -> int:
        """The first step this shard has not seen from `worker`."""
        return self.next_steps.get(worker, 0)

    def check_push(self, worker: int, step: int, version: int, grads: object) -> dict[str, torch.Tensor]:
        """`grads`, if the push fits this shard: else ValueError, and nothing changes.

        A worker's steps arrive in order with no gap (it resumes at the smallest next step its shards report), so
        a step past this shard's next one for the worker is refused rather than allowed to skip steps; a version
        is one this shard has had; the gradients are exactly this shard's tensors: names, shapes, dtypes, devices.
        """
        if not 0 <= step <= self.next_step(worker):
            raise ValueError(f"step {step} of worker {worker} is outside [0, {self.next_step(worker)}]")
        if not 0 <= version <= self.version:
            raise ValueError(f"version {version} is outside [0, {self.version}]")
        if not isinstance(grads, dict) or set(grads) != set(self.params):
            raise ValueError("the gradients must name exactly this shard's parameters")
        for name, param in self.params.items():
            if not _is_like(grads[name], param):
                raise ValueError(f"the gradient of {name!r} is not a dense tensor shaped like its parameter")
        return grads

    def apply(self, worker: int, step: int, version: int, grads: dict[str, torch.Tensor]) -> PushResult:
        """Take or refuse one worker's gradient for one step; a step seen before is ignored.

        An accepted gradient is applied at once, or, when synchronous, added to the open round.
        """
        if step < self.next_step(worker):
            self.stats.duplicates += 1
            return PushResult(False, self.version - version, duplicate=True)
        self.next_steps[worker] = step + 1
        staleness = self.version - version
        self.stats.max_staleness_seen = max(self.stats.max_staleness_seen, staleness)
        self.stats.histogram[staleness] = self.stats.histogram.get(staleness, 0) + 1
        if not is_accepted(staleness, self.bound):
            self.stats.refused += 1
            return PushResult(False, staleness)
        if self.synchronous:
            self._add_to_round(worker, grads)
        else:
            self._update(grads)
        self.stats.accepted += 1
        self.stats.max_staleness = max(self.stats.max_staleness, staleness)
        return PushResult(True, staleness)

    def _add_to_round(self, worker: int, grads: dict[str, torch.Tensor]) -> None:
        for name, grad in grads.items():
            self.round_sum[name] = self.round_sum[name] + grad if name in self.round_sum else grad.clone()
        self.round_workers.add(worker)
        self.round_size += 1

    def close_round(self) -> None:
        """Apply the mean of the open round's gradients as one update (nothing if it has none)."""
        if self.round_size:
            self._update({name: total / self.round_size for name, total in self.round_sum.items()})
        self.round_workers, self.round_sum, self.round_size = set(), {}, 0

    def _update(self, grads: dict[str, torch.Tensor]) -> None:
        for name, tensor in self.params.items():
            tensor.grad = grads[name]
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.version += 1

    def values(self) -> dict[str, torch.Tensor]:
        """The parameters as plain tensors, for a reply."""
        return {name: tensor.detach() for name, tensor in self.params.items()}

    def state_dict(self) -> dict[str, Any]:
        """Everything a restarted parameter server needs."""
        return {
            "params": self.values(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "version": self.version,
            "next_steps": dict(self.next_steps),
            "stats": self.stats.as_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what state_dict() captured."""
        with torch.no_grad():
            for name, tensor in self.params.items():
                tensor.copy_(state["params"][name])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.version = state["version"]
        self.next_steps = {int(worker): step for worker, step in state["next_steps"].items()}
        stats = dict(state["stats"])
        self.stats = ShardStats(**stats)


def _is_like(value: object, param: torch.Tensor) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and value.layout == torch.strided
        and (value.shape, value.dtype, value.device) == (param.shape, param.dtype, param.device)
    )


def shard_params(recipe: Recipe, index: int, shards: int) -> dict[str, torch.Tensor]:
    """The initial values of the parameters shard `index` owns (shards balanced by size, see assign_shards)."""
    named = dict(recipe.model.named_parameters())
    assignment = assign_shards([(name, p.numel()) for name, p in named.items()], shards)
    return {name: p.detach() for name, p in named.items() if assignment[name] == index}


def new_shard(env: TrainerEnv, config: TrainerConfig, recipe: Recipe) -> ShardState:
    """This server's shard, with the recipe's optimizer and LR schedule over it.

    The schedule runs over the updates the shard will apply: one per worker step when asynchronous, one per
    synchronous round otherwise.
    """
    order = data_order(config, length(recipe.train_data), env.num_workers, 0)
    updates = total_steps(config, order.steps_per_epoch) * (1 if config.staleness_bound == 0 else env.num_workers)
    return ShardState(
        shard_params(recipe, env.replica_index, len(env.ps_addrs)),
        partial(build_optimizer, recipe),
        config.staleness_bound,
        partial(build_scheduler, recipe, updates=updates),
    )
