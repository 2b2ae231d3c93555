"""`python -m trainer` pods as real processes on this machine, as the operator would set them up: one pod, a DDP
gang, a parameter-server job; their logs, progress files and checkpoints."""

import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch

from testbed.processes import free_port
from trainer.agent_http import request_json

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def config_json(**fields: Any) -> str:
    """TJ_TRAINER_CONFIG for the given camelCase fields."""
    return json.dumps(fields)


def base_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The test process's environment, made importable, plus `extra`."""
    env = dict(os.environ)
    paths = [str(REPO / "trainer-image"), str(REPO)]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    if env.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        # Without cached bytecode every rank recompiles torch's sources: seconds per process.
        env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "trainingjob-pycache")
    env.update(extra)
    return env


@dataclass
class Pod:
    """One trainer process (a pod's PID 1) and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def wait(self, timeout: float) -> int:
        """The exit code; fails the test (with the log) if it takes longer than `timeout`."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"{self.name} did not exit within {timeout}s:\n{self.text()}") from None

    def text(self) -> str:
        """What the pod logged so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def start_pod(name: str, env: Mapping[str, str], logs: Path, args: tuple[str, ...] = ()) -> Pod:
    """Start `python -m trainer` with `env` added to ours."""
    log = logs / f"{name}.log"
    with log.open("ab") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "trainer", *args],
            env=base_env(env),
            cwd=REPO,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    return Pod(name, process, log)


@contextmanager
def pods_cleanup() -> Iterator[list[Pod]]:
    """Kill whatever pods a test left running, even when it fails."""
    pods: list[Pod] = []
    try:
        yield pods
    finally:
        for pod in pods:
            if pod.process.poll() is None:
                pod.process.kill()
                pod.process.wait()


def wait_for(predicate: Callable[[], T | None], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll until `predicate` returns something truthy; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file written atomically, or None if it is not there yet."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else None


def load_model_state(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The model tensors a `step-N` checkpoint holds."""
    state = torch.load(checkpoint / "state.pt", map_location="cpu", weights_only=True)
    model: dict[str, torch.Tensor] = state["model"]
    return model


def children_of(pid: int) -> list[int]:
    """The direct child processes of `pid` (Linux /proc)."""
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        children += [int(child) for child in text]
    return children


def ddp_env(
    port: int, world: int, nproc: int, node: int, directory: Path, *, config: str, **extra: str
) -> dict[str, str]:
    """What the operator sets on one DDP pod (checkpoints every 40 steps, keep 2)."""
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "WORLD_SIZE": str(world),
        "RANK": str(node * nproc),
        "NODE_RANK": str(node),
        "PET_NNODES": str(world // nproc),
        "TJ_NPROC_PER_POD": str(nproc),
        "TJ_TRAINER_CONFIG": config,
        "TJ_CHECKPOINT_DIR": str(directory / "checkpoints"),
        "TJ_CHECKPOINT_EVERY_STEPS": "40",
        "TJ_CHECKPOINT_KEEP": "2",
        "TJ_PROGRESS_FILE": str(directory / "progress.json"),
        "TJ_MASTER_WAIT_SECONDS": "60",
        **extra,
    }


def start_gang(
    pods: list[Pod], logs: Path, directory: Path, world: int, nproc: int, *, config: str, **extra: str
) -> list[Pod]:
    """All pods of one DDP attempt, on a fresh port."""
    port = free_port()
    gang = [
        start_pod(
            f"{directory.name}-node{node}", ddp_env(port, world, nproc, node, directory, config=config, **extra), logs
        )
        for node in range(world // nproc)
    ]
    pods += gang
    return gang


@dataclass
class AgentGang:
    """A DDP gang of in-place agents (TJ_IN_PLACE=1), one pod per rank, each agent on a port of its own."""

    pods: list[Pod]
    agent_ports: list[int]
    key: bytes

    def address(self, node: int = 0) -> tuple[str, int]:
        """Where node `node`'s agent listens (node 0's is the coordinator)."""
        return ("127.0.0.1", self.agent_ports[node])

    def status_with(self, *fields: str, node: int = 0) -> dict[str, Any] | None:
        """Node `node`'s GET /status once its agent serves and names these processes (child, spare, zygote), else
        None (for wait_for)."""
        try:
            answer = request_json(self.address(node), "GET", "/status")[1]
        except OSError:
            return None  # not listening yet
        return answer if answer is not None and all(answer[field] for field in fields) else None


def start_agent_gang(
    pods: list[Pod], logs: Path, directory: Path, world: int, *, config: str, **extra: str
) -> AgentGang:
    """All pods of one in-place DDP gang: rank 0's agent coordinates, the job key signs the orders."""
    directory.mkdir(parents=True, exist_ok=True)
    key_file = write_job_key(directory)
    port, agent_ports = free_port(), [free_port() for _ in range(world)]
    shared = {
        "TJ_IN_PLACE": "1",
        "TJ_JOB_KEY_FILE": str(key_file),
        "TJ_NUM_WORKERS": str(world),
        "TJ_AGENT_COORDINATOR": f"127.0.0.1:{agent_ports[0]}",
        **extra,
    }
    gang = [
        start_pod(
            f"{directory.name}-node{node}",
            ddp_env(port, world, 1, node, directory, config=config, TJ_AGENT_PORT=str(agent_ports[node]), **shared),
            logs,
        )
        for node in range(world)
    ]
    pods += gang
    return AgentGang(gang, agent_ports, key_file.read_bytes())


def progress_of(directory: Path) -> dict[str, Any]:
    """The progress file rank 0 left in `directory`."""
    progress = read_json(directory / "progress.json")
    assert progress is not None, f"no progress file under {directory}"
    return progress


def write_job_key(directory: Path) -> Path:
    """A random job key, as the operator's per-job Secret mounts it into every pod."""
    path = directory / "job.key"
    path.write_bytes(secrets.token_bytes(32))
    return path


def single_pod_env(directory: Path, config: str, **extra: str) -> dict[str, str]:
    """One DDP pod holding the whole job, its checkpoints and progress file under `directory`."""
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "TJ_TRAINER_CONFIG": config,
        "TJ_CHECKPOINT_DIR": str(directory / "checkpoints"),
        "TJ_PROGRESS_FILE": str(directory / "progress.json"),
        **extra,
    }


def ps_env(directory: Path, *, shards: int, workers: int, config: str, wait: str) -> dict[str, str]:
    """What every pod of one parameter-server job shares."""
    return {
        "TJ_JOB_KEY_FILE": str(write_job_key(directory)),
        "TJ_NUM_PS": str(shards),
        "TJ_NUM_WORKERS": str(workers),
        "TJ_PS_ADDRS": ",".join(f"127.0.0.1:{free_port()}" for _ in range(shards)),
        "TJ_TRAINER_CONFIG": config,
        "TJ_MASTER_WAIT_SECONDS": wait,
        "TJ_CHECKPOINT_DIR": str(directory / "checkpoints"),
        "TJ_PROGRESS_FILE": str(directory / "progress.json"),
    }


def start_role(pods: list[Pod], logs: Path, env: dict[str, str], role: str, index: int) -> Pod:
    """One `ps` or `worker` pod of the job."""
    pod = start_pod(f"{role}{index}", {**env, "TJ_ROLE": role, "TJ_REPLICA_INDEX": str(index)}, logs)
    pods.append(pod)
    return pod


def start_ps_job(
    pods: list[Pod], logs: Path, directory: Path, *, shards: int, workers: int, config: str, wait: str
) -> tuple[list[Pod], list[Pod]]:
    """Parameter servers first, then workers, as the operator would create them (in any order)."""
    env = ps_env(directory, shards=shards, workers=workers, config=config, wait=wait)
    servers = [start_role(pods, logs, env, "ps", index) for index in range(shards)]
    return servers, [start_role(pods, logs, env, "worker", index) for index in range(workers)]


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed since the listing
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def is_connected_to(pid: int, port: int) -> bool:
    """Whether process `pid` holds an established TCP connection to `port` on this machine (Linux /proc)."""
    established = "01"
    inodes = _socket_inodes(pid)
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[3] == established and fields[9] in inodes:
                return True
    return False
