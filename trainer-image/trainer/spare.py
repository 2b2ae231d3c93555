"""`python -m trainer --spare <agent pid> [script args...]`: a trainer started before it is needed (trainer.agent).

It imports torch and the trainer's modules (seconds: `import torch` alone is 2.5-3 s) and takes one tiny optimizer
step (torch imports more on a first step) in a thread whose CPU priority it lowers (os.nice: on Linux a thread's
own), so the warm-up yields to the attempt training beside it, while the main thread, at normal priority, waits for
its order on stdin: one JSON line from the agent, {"attempt": N, "env": {"TJ_ATTEMPT": "N", ...}}. A spare whose
order is already there when it starts is a cold start (the pod's first attempt, or no spare was ready): it warms
up at full priority, since the attempt waits for it. With the order it sets those variables and runs exactly what
`python -m trainer [script args...]` runs without TJ_IN_PLACE: the built-in trainer in this process (one process per
pod: the warm imports pay off), or one process per local rank (TJ_NPROC_PER_POD > 1, or a user script: those start
cold, as they do today; only their launcher is warm). User code reads its attempt from TJ_ATTEMPT. The warm-up allocates
nothing on a GPU: a spare holds no GPU memory (its backward pass may count the GPUs, which a process that trains
itself can afford and a zygote cannot).

A spare dies with the agent that started it (PR_SET_PDEATHSIG), and one whose pipe closes without an order exits.
Once the pod's zygote (trainer.zygote) is warm, spares are forks of it: already warm, they only take their order.
"""

import importlib
import json
import logging
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any

from trainer import agent_procs
from trainer.contract import ExitCode
from trainer.failures import ConfigError
from trainer.signals import StopFlag

log = logging.getLogger(__name__)

# torch._dynamo: torch.optim imports it lazily when the first optimizer is built, 3-6 s on 2 cores (more than
# `import torch` itself).
WARM_MODULES = ("torch", "torch.distributed", "torch._dynamo", "trainer.ddp", "trainer.entrypoint", "trainer.workloads")
WARM_NICENESS = 10
ORDER_BYTES = 64 << 10


def die_with_parent(agent_pid: int) -> None:
    """SIGKILL this process when the agent that started it dies (it never outlives the agent); exit at once if the
    agent died before this process could ask for that."""
    agent_procs.prctl(agent_procs.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != agent_pid:
        os._exit(int(ExitCode.RETRYABLE))


def warm_up(modules: Sequence[str] = WARM_MODULES, *, lower_priority: bool = True, backward: bool = True) -> None:
    """Import `modules`, then rehearse a step, at a lower priority (this thread only) unless asked not to; a failing
    import is left for the run to report."""
    if lower_priority:
        try:
            os.nice(WARM_NICENESS)
        except OSError as error:
            log.warning("cannot lower the spare's warm-up priority: %s", error)
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as error:
            log.warning("warm-up import of %s failed (%s): the run reports it", name, error)
            return
    _rehearse(backward)


def _rehearse(backward: bool) -> None:
    """One tiny optimizer step: whatever else torch imports or starts lazily on a first step is done now. Without
    `backward` its gradient is set by hand: a backward pass starts the autograd engine's device threads and counts
    GPUs through CUDA, which the zygote (trainer.zygote) must not do, since no fork of it could use either; each
    fork then rehearses with a backward pass of its own."""
    try:
        import torch  # noqa: PLC0415

        weight = torch.zeros(2, requires_grad=True)
        optimizer = torch.optim.SGD([weight], lr=0.1)
        if backward:
            (weight * 2.0).sum().backward()  # type: ignore[no-untyped-call]
        else:
            weight.grad = torch.ones(2)
        optimizer.step()
    except Exception as error:
        log.warning("warm-up step failed (%s): the run reports it", error)


def read_order(stream: IO[bytes]) -> tuple[int, dict[str, str]] | None:
    """(attempt, variables) from one JSON line; None for an empty pipe or anything malformed."""
    line = stream.readline(ORDER_BYTES)
    try:
        order: Any = json.loads(line) if line.strip() else None
    except ValueError:
        order = None
    if not isinstance(order, dict):
        return None
    attempt, env = order.get("attempt"), order.get("env", {})
    valid_env = isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1 or not valid_env:
        return None
    return attempt, env


def serve(argv: Sequence[str], run: Callable[[Sequence[str]], int]) -> int:
    """`argv`: the agent's pid, then the pod's arguments. Warm up, wait for the order, then run as that attempt
    (`run`: the launcher's, without the agent)."""
    if not argv or not argv[0].isdigit():
        raise ConfigError("arguments", agent_procs.SPARE_FLAG, "must be followed by the agent's pid")
    die_with_parent(int(argv[0]))
    stop = StopFlag().install()
    # An order already waiting means a cold start: nothing to yield to, the attempt waits for these imports.
    cold = bool(select.select([sys.stdin], [], [], 0)[0])
    warming = threading.Thread(target=warm_up, kwargs={"lower_priority": not cold}, name="spare-warm-up", daemon=True)
    warming.start()
    return take_order(read_order(sys.stdin.buffer), argv[1:], run, stop, warming)


def take_order(
    order: tuple[int, dict[str, str]] | None,
    argv: Sequence[str],
    run: Callable[[Sequence[str]], int],
    stop: StopFlag,
    warming: threading.Thread | None = None,
) -> int:
    """Run as the attempt `order` (read_order's) names, once the warm-up (if one is under way) is done."""
    if order is None:
        log.info("the spare's pipe closed without an order: exiting")
        return ExitCode.SUCCEEDED
    attempt, env = order
    os.environ.update(env)
    warm = warming is None or not warming.is_alive()
    log.info("attempt %d: order received (%s)", attempt, "warm" if warm else "still warming up")
    if warming is not None:
        warming.join()
    if stop.is_set():
        return ExitCode.PREEMPTED
    return run(list(argv))
