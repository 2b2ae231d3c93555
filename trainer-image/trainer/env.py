"""The operator's environment contract, read once into a typed TrainerEnv."""

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from trainer import contract as c
from trainer.checkpoint_pacing import PacingInputs, parse_pacing
from trainer.failures import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointPolicy:
    """Where checkpoints go, how often they are taken and how many are kept; `pacing` (TJ_CHECKPOINT_PACING) with
    `auto` paces time-based saves to the failure rate, without it only measures what Auto would pick."""

    directory: Path | None = None
    every_steps: int | None = None
    every_seconds: float | None = None
    keep: int = 3
    pacing: PacingInputs | None = None
    request_file: Path | None = None  # where rank 0's agent writes a checkpoint request (trainer.checkpoint_request)


@dataclass(frozen=True)
class TrainerEnv:
    """Everything the trainer reads from its environment, validated."""

    job_name: str = "local"
    attempt: int = 1
    role: str = c.ROLE_WORKER
    replica_index: int = 0
    node_rank: int = 0
    nnodes: int = 1
    nproc_per_pod: int = 1
    local_rank: int = 0
    world_size: int = 1
    desired_world_size: int = 1  # the job's full world: the global batch is defined at it (an elastic job may shrink)
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    master_wait_seconds: float = 300.0
    num_workers: int = 1
    min_workers: int = 1  # parameter-server mode: workers from this index on may never come (no room for them)
    num_ps: int = 0
    ps_addrs: tuple[tuple[str, int], ...] = ()
    checkpoint: CheckpointPolicy = CheckpointPolicy()
    progress_port: int | None = None
    progress_file: Path | None = None
    job_key_file: Path | None = None
    incarnation: int = 1  # a parameter-server worker's: 1 for its pod's first trainer, N+1 after N restarts in place
    agent_id: str = ""  # its pod agent's random id ("" without an agent)
    remove_checkpoints: str = ""  # a sweep's trial: the JSON list of earlier trials' checkpoint folders to remove

    @property
    def rank(self) -> int:
        """The global rank: NODE_RANK * processes per pod + LOCAL_RANK."""
        return self.node_rank * self.nproc_per_pod + self.local_rank

    @property
    def is_parameter_server_job(self) -> bool:
        """True in parameter-server mode, for both roles."""
        return self.role == c.ROLE_PS or self.num_ps > 0

    def for_local_rank(self, local_rank: int) -> "TrainerEnv":
        """The same environment as one of this pod's local ranks sees it."""
        return replace(self, local_rank=local_rank)


def _int(env: Mapping[str, str], names: tuple[str, ...], default: int, minimum: int = 0) -> int:
    for name in names:
        raw = env.get(name, "").strip()
        if not raw:
            continue
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError("environment", name, f"must be an integer, got {raw!r}") from None
        if value < minimum:
            raise ConfigError("environment", name, f"must be >= {minimum}, got {value}")
        return value
    return default


def _optional_number(env: Mapping[str, str], name: str) -> float | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError("environment", name, f"must be a number, got {raw!r}") from None
    if value <= 0:
        raise ConfigError("environment", name, f"must be > 0, got {value}")
    return value


def parse_address(text: str, field: str) -> tuple[str, int]:
    """host:port (the host may be a DNS name) -> (host, port)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError("environment", field, f"expected host:port, got {text!r}")
    return host, int(port)


def _checkpoint_policy(env: Mapping[str, str]) -> CheckpointPolicy:
    directory = env.get(c.CHECKPOINT_DIR, "").strip()
    every_steps = _int(env, (c.CHECKPOINT_EVERY_STEPS,), 0) or None
    every_seconds = _optional_number(env, c.CHECKPOINT_EVERY_SECONDS)
    raw_pacing = env.get(c.CHECKPOINT_PACING, "").strip()
    pacing = parse_pacing(raw_pacing) if raw_pacing else None
    if pacing is not None and pacing.auto and (every_steps or every_seconds):
        # The operator sends no fixed interval with Auto; if one comes anyway, two schedules would both save.
        log.warning("%s asks for Auto: the fixed checkpoint interval is ignored", c.CHECKPOINT_PACING)
        every_steps, every_seconds = None, None
    return CheckpointPolicy(
        directory=Path(directory) if directory else None,
        every_steps=every_steps,
        every_seconds=every_seconds,
        keep=_int(env, (c.CHECKPOINT_KEEP,), 3, minimum=1),
        pacing=pacing,
        request_file=Path(request) if (request := env.get(c.CHECKPOINT_REQUEST_FILE, "").strip()) else None,
    )


def _ps_addrs(env: Mapping[str, str]) -> tuple[tuple[str, int], ...]:
    raw = env.get(c.PS_ADDRS, "").strip()
    return tuple(parse_address(part, c.PS_ADDRS) for part in raw.split(",") if part.strip())


def read_env(env: Mapping[str, str]) -> TrainerEnv:
    """Read and validate the operator's variables; a bad one raises ConfigError naming it."""
    role = env.get(c.ROLE, c.ROLE_WORKER).strip() or c.ROLE_WORKER
    if role not in (c.ROLE_WORKER, c.ROLE_PS):
        raise ConfigError("environment", c.ROLE, f"must be '{c.ROLE_WORKER}' or '{c.ROLE_PS}', got {role!r}")
    nproc = _int(env, (c.NPROC_PER_POD, c.PET_NPROC_PER_NODE), 1, minimum=1)
    nnodes = _int(env, (c.PET_NNODES,), 1, minimum=1)
    progress_file = env.get(c.PROGRESS_FILE, "").strip()
    job_key_file = env.get(c.JOB_KEY_FILE, "").strip()
    world = _int(env, (c.WORLD_SIZE,), nnodes * nproc, minimum=1)
    result = TrainerEnv(
        job_name=env.get(c.JOB_NAME, "local"),
        attempt=_int(env, (c.ATTEMPT,), 1, minimum=1),
        role=role,
        replica_index=_int(env, (c.REPLICA_INDEX,), 0),
        node_rank=_int(env, (c.NODE_RANK, c.PET_NODE_RANK), 0),
        nnodes=nnodes,
        nproc_per_pod=nproc,
        local_rank=_int(env, (c.LOCAL_RANK,), 0),
        world_size=world,
        desired_world_size=_int(env, (c.DESIRED_WORLD_SIZE,), world, minimum=1),
        master_addr=env.get(c.MASTER_ADDR) or env.get(c.PET_MASTER_ADDR) or "127.0.0.1",
        master_port=_int(env, (c.MASTER_PORT, c.PET_MASTER_PORT), 29500, minimum=1),
        master_wait_seconds=_optional_number(env, c.MASTER_WAIT_SECONDS) or 300.0,
        num_workers=_int(env, (c.NUM_WORKERS,), 1, minimum=1),
        min_workers=_int(env, (c.MIN_WORKERS, c.NUM_WORKERS), 1, minimum=1),
        num_ps=_int(env, (c.NUM_PS,), 0),
        ps_addrs=_ps_addrs(env),
        checkpoint=_checkpoint_policy(env),
        progress_port=_int(env, (c.PROGRESS_PORT,), 0) or None,
        progress_file=Path(progress_file) if progress_file else None,
        job_key_file=Path(job_key_file) if job_key_file else None,
        incarnation=_int(env, (c.INCARNATION,), 1, minimum=1),
        agent_id=env.get(c.AGENT_ID, "").strip()[:64],
        remove_checkpoints=env.get(c.REMOVE_CHECKPOINTS, ""),
    )
    _check_consistency(result)
    return result


def _check_consistency(env: TrainerEnv) -> None:
    if env.local_rank >= env.nproc_per_pod:
        raise ConfigError("environment", c.LOCAL_RANK, f"{env.local_rank} >= {c.NPROC_PER_POD}")
    if env.rank >= env.world_size and not env.is_parameter_server_job:
        raise ConfigError("environment", c.WORLD_SIZE, f"rank {env.rank} does not fit in {env.world_size}")
    if env.desired_world_size < env.world_size:
        problem = f"{env.desired_world_size} is less than {c.WORLD_SIZE} {env.world_size}"
        raise ConfigError("environment", c.DESIRED_WORLD_SIZE, problem)
    if env.is_parameter_server_job and len(env.ps_addrs) != max(env.num_ps, 1):
        raise ConfigError("environment", c.PS_ADDRS, f"needs {env.num_ps} addresses, got {len(env.ps_addrs)}")
    if env.role == c.ROLE_PS and env.replica_index >= len(env.ps_addrs):
        raise ConfigError("environment", c.REPLICA_INDEX, f"no address for parameter server {env.replica_index}")
    if env.is_parameter_server_job and env.job_key_file is None:
        raise ConfigError("environment", c.JOB_KEY_FILE, "is required in parameter-server mode")
