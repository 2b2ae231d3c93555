"""`python -m trainer`: read the contract, pick the mode, spawn local ranks, map failures to exit codes.

With TJ_IN_PLACE=1 on a DDP pod, PID 1 is the in-place agent instead (trainer.agent), which runs what this module
would run in a child per attempt (`--spare`, trainer.spare), forked by the pod's zygote once it is warm (`--zygote`,
trainer.zygote)."""

import logging
import os
import subprocess
import sys
import time
from collections.abc import Sequence

from trainer import agent
from trainer import contract as c
from trainer.agent_procs import SPARE_FLAG
from trainer.config import parse_trainer_config
from trainer.contract import ExitCode
from trainer.env import TrainerEnv, read_env
from trainer.failures import TrainerError, combine_exit_codes
from trainer.rendezvous import wait_for_port
from trainer.signals import StopFlag
from trainer.zygote_link import ZYGOTE_FLAG

log = logging.getLogger("trainer")

RANK_FLAG = "--local-rank-process"
KILL_GRACE_SECONDS = 30.0


def _configure_logging(env: dict[str, str]) -> None:
    who = f"{env.get(c.ROLE, 'worker')}{env.get(c.REPLICA_INDEX, '')}"
    rank = env.get(c.RANK) if env.get(c.ROLE) != c.ROLE_PS else None
    label = f"{who} rank {rank}" if rank is not None else who
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [trainer {label}] %(levelname)s %(message)s")


def local_rank_env(env: TrainerEnv, base: dict[str, str], local_rank: int) -> dict[str, str]:
    """The torchrun-style variables one local rank sees."""
    rank_env = env.for_local_rank(local_rank)
    return {
        "OMP_NUM_THREADS": "1",
        **base,
        c.RANK: str(rank_env.rank),
        c.LOCAL_RANK: str(local_rank),
        c.WORLD_SIZE: str(env.world_size),
        c.NODE_RANK: str(env.node_rank),
        "LOCAL_WORLD_SIZE": str(env.nproc_per_pod),
        "GROUP_RANK": str(env.node_rank),
        c.MASTER_ADDR: env.master_addr,
        c.MASTER_PORT: str(env.master_port),
    }


def supervise(commands: list[tuple[list[str], dict[str, str]]], stop: StopFlag) -> ExitCode:
    """Run one process per local rank; forward SIGTERM; if one fails, stop the rest; combine exit codes."""
    processes = [subprocess.Popen(command, env=env) for command, env in commands]
    codes: dict[int, int] = {}
    forwarded = False
    while len(codes) < len(processes):
        if stop.is_set() and not forwarded:
            _signal_all(processes, codes)
            forwarded = True
        for index, process in enumerate(processes):
            code = process.poll()
            if code is not None and index not in codes:
                codes[index] = code
                if code not in (ExitCode.SUCCEEDED, ExitCode.PREEMPTED):
                    log.error("local rank %d exited with %d: stopping the other local ranks", index, code)
                    _signal_all(processes, codes)
                    _reap(processes, codes)
        time.sleep(0.1)
    return combine_exit_codes(list(codes.values()), forwarded)


def _signal_all(processes: list[subprocess.Popen[bytes]], codes: dict[int, int]) -> None:
    for index, process in enumerate(processes):
        if index not in codes and process.poll() is None:
            process.terminate()


def _reap(processes: list[subprocess.Popen[bytes]], codes: dict[int, int]) -> None:
    deadline = time.monotonic() + KILL_GRACE_SECONDS
    for index, process in enumerate(processes):
        if index in codes:
            continue
        try:
            codes[index] = process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            codes[index] = process.wait()


def _spawn_local_ranks(env: TrainerEnv, script: Sequence[str], stop: StopFlag) -> ExitCode:
    if env.node_rank != 0:
        wait_for_port(env.master_addr, env.master_port, env.master_wait_seconds, "rank 0 (MASTER_ADDR)")
    command = [sys.executable, *script] if script else [sys.executable, "-m", "trainer", RANK_FLAG]
    base = dict(os.environ)
    commands = [(command, local_rank_env(env, base, i)) for i in range(env.nproc_per_pod)]
    log.info("starting %d local ranks: %s", env.nproc_per_pod, " ".join(command))
    return supervise(commands, stop)


def _run_in_process(env: TrainerEnv, stop: StopFlag) -> ExitCode:
    # The modes import torch (seconds): only the process that trains pays for it, never the launcher.
    config = parse_trainer_config(os.environ.get(c.TRAINER_CONFIG))
    if env.role == c.ROLE_PS:
        from trainer.ps_server import run_parameter_server  # noqa: PLC0415

        return run_parameter_server(env, config, stop)
    if env.is_parameter_server_job:
        from trainer.ps_worker import run_ps_worker  # noqa: PLC0415

        return run_ps_worker(env, config, stop)
    from trainer.ddp import run_ddp_rank  # noqa: PLC0415

    return run_ddp_rank(env, config, stop)


def run(argv: Sequence[str]) -> int:
    """Dispatch: the in-place agent, a spare, a sweep's sweeper, or a user script or the built-in trainer, in this
    process or one process per local rank."""
    if argv and argv[0] == SPARE_FLAG:
        from trainer.spare import serve  # noqa: PLC0415

        return serve(argv[1:], run)
    if argv and argv[0] == ZYGOTE_FLAG:
        from trainer import zygote  # noqa: PLC0415

        return zygote.serve(argv[1:], run)
    stop = StopFlag().install()
    env = read_env(os.environ)
    if argv and argv[0] == c.SWEEPER_FLAG:  # a sweep's sweeper: removes checkpoint folders, trains nothing
        from trainer.checkpoint_cleanup import sweep_only  # noqa: PLC0415

        return sweep_only(env, argv[1] if len(argv) > 1 else "")
    is_rank_process = bool(argv) and argv[0] == RANK_FLAG
    script = [] if is_rank_process else list(argv)
    if not script and not is_rank_process:
        parse_trainer_config(os.environ.get(c.TRAINER_CONFIG))
    if not is_rank_process and agent.is_enabled(os.environ, env):
        return agent.run_agent(os.environ, env, script, stop)
    if script or (env.nproc_per_pod > 1 and not is_rank_process and not env.is_parameter_server_job):
        return _spawn_local_ranks(env, script, stop)
    return _run_in_process(env, stop)


def main(argv: Sequence[str] | None = None) -> int:
    """The entry point: every failure ends in one of the contract's exit codes, with a clear log line."""
    _configure_logging(dict(os.environ))
    try:
        code = run(list(sys.argv[1:] if argv is None else argv))
    except TrainerError as error:
        log.error("%s (exit %d, %s)", error, error.exit_code, error.exit_code.name)
        return int(error.exit_code)
    except Exception:
        log.exception("unexpected failure: exiting as retryable")
        return int(ExitCode.RETRYABLE)
    log.info("exiting with %d (%s)", code, _describe(code))
    return int(code)


def _describe(code: int) -> str:
    """The contract's name of an exit code, or what a container's code above 128 means."""
    names = {int(known): known.name for known in ExitCode}
    return names.get(code, f"signal {code - 128}" if code > 128 else "failure")
