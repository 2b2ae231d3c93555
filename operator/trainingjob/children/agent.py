"""The in-pod agent as the operator sees it. The trainer image's launcher (`python -m trainer`) runs each attempt's
trainer as a child process and, told so by the pod's environment, keeps the pod when its trainer fails: it waits
for rank 0's agent (the gang's coordinator) to start the next attempt inside the same pods. This module says
which pods get an agent, what they are told, how rank 0's agent's account of the gang is read (untrusted input),
and how the operator signs its orders with the job's key. Pure: the HTTP calls are the cluster adapter's.

Rank 0's pod has a readiness probe on its agent: the kubelet's Ready flip (one pod status write) is how the
operator learns that the gang's trainer failed, without polling every job. A parameter-server worker's agent is a
gang of one: each worker pod has the probe, and its agent's "attempts" are the worker's incarnations (the job's
attempt stays; plan/worker_in_place.py).
"""

import hashlib
import hmac
import json
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trainingjob.children import contract
from trainingjob.children.naming import LABEL_PREFIX, Replica
from trainingjob.model import Mode, TrainingJob

AGENT_PORT = 29401
IN_PLACE_LABEL = f"{LABEL_PREFIX}/in-place"  # on pods whose agent restarts their trainer in place
READY_PATH, GANG_PATH, ORDER_PATH = "/ready", "/gang", "/attempt"
SIGNATURE_HEADER = "X-TJ-Signature"
MAX_GANG_BYTES = 16 * 1024
MAX_FAILURES = 8
WAIT_SECONDS = 120  # how long an agent whose trainer failed waits for the next attempt before its pod fails
_KEY_LABEL = b"trainingjob job key v1\n"


def has_agent(job: TrainingJob, replica: Replica | None = None) -> bool:
    """Workers that run the trainer image's own command restart in place: a DDP job's pods as a gang, each
    parameter-server worker's alone (`replica`: a parameter server has none; its state is the model)."""
    if job.spec.workers.command is not None:
        return False
    if job.spec.mode == Mode.PARAMETER_SERVER:
        return replica is not None and replica.role == contract.ROLE_WORKER
    return job.spec.mode == Mode.DDP


def environment(job: TrainingJob) -> dict[str, str]:
    """What tells the launcher to act as the agent (and where to find rank 0's: its MASTER_ADDR; a
    parameter-server worker's agent is its own coordinator)."""
    if job.spec.workers.command is not None:
        return {}
    return {
        contract.IN_PLACE: "1",
        contract.AGENT_PORT: str(AGENT_PORT),
        contract.IN_PLACE_WAIT_SECONDS: str(WAIT_SECONDS),
    }


def readiness_probe(replica: Replica, *, every_worker: bool = False) -> dict[str, Any] | None:
    """Rank 0's probe (`every_worker`: each parameter-server worker's, a gang of one): its agent answers 503 while
    the gang's attempt has failed and waits for the next one."""
    if replica != Replica(contract.ROLE_WORKER, 0) and not (every_worker and replica.role == contract.ROLE_WORKER):
        return None
    return {
        "httpGet": {"path": READY_PATH, "port": AGENT_PORT},
        "periodSeconds": 1,
        "failureThreshold": 1,
        "successThreshold": 1,
        "timeoutSeconds": 1,
    }


class GangState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    FAILED = "failed"
    SUCCEEDED = "succeeded"


@dataclass(frozen=True)
class RankFailure:
    """A pod's trainer that ended badly, as its agent told rank 0's."""

    rank: int
    exit_code: int | None
    time: float | None


@dataclass(frozen=True)
class Gang:
    """Rank 0's agent's account of the gang: the attempt it runs, how that goes, and who failed."""

    attempt: int
    state: GangState
    pods: int  # the gang's pods
    running: int  # pods whose agent runs this attempt
    failures: tuple[RankFailure, ...] = ()

    @property
    def all_running(self) -> bool:
        return self.state in (GangState.RUNNING, GangState.SUCCEEDED) and self.running >= self.pods > 0


def _count(value: Any, limit: int = 1 << 20) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limit
    return value if ok else None


def _exit_code(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and -1 <= value <= 255 else None


def _time(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok and 0 <= value < 32_503_680_000 else None


def _failure(item: Any) -> RankFailure | None:
    if not isinstance(item, dict) or _count(item.get("rank")) is None:
        return None
    return RankFailure(int(item["rank"]), _exit_code(item.get("exitCode")), _time(item.get("time")))


def parse_gang(body: bytes) -> Gang | None:
    """The gang from rank 0's agent's answer; None for anything that is not a well-formed account."""
    if len(body) > MAX_GANG_BYTES:
        return None
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("state") not in GangState.__members__.values():
        return None
    attempt, pods, running = _count(data.get("attempt")), _count(data.get("pods")), _count(data.get("running"))
    if attempt is None or pods is None or running is None:
        return None
    raw = data.get("failures")
    failures = [f for f in (_failure(i) for i in (raw if isinstance(raw, list) else [])[:MAX_FAILURES]) if f]
    return Gang(attempt, GangState(data["state"]), pods, running, tuple(failures))


def job_key(operator_key: bytes, uid: str) -> bytes:
    """The job's key, derived from the operator's and the job's UID: the operator puts it in the job's Secret and
    signs its orders with it, and never reads a Secret back."""
    return hmac.new(operator_key, _KEY_LABEL + uid.encode(), hashlib.sha256).digest()


def signature(key: bytes, method: str, path: str, body: bytes) -> str:
    """HMAC-SHA256 under the job key of `METHOD\\npath\\nbody`, in hex: what the agents check."""
    return hmac.new(key, f"{method}\n{path}\n".encode() + body, hashlib.sha256).hexdigest()


def order_body(attempt: int, pacing: str | None = None, checkpoint_after: int | None = None) -> bytes:
    """Run `attempt`: rank 0's agent starts it in every pod, its own trainer with TJ_CHECKPOINT_PACING `pacing`
    (children/pacing.py) when given. Monotonic, so a replay changes nothing. With `checkpoint_after`, the attempt
    running saves a checkpoint newer than that step instead (as often as it is sent: one is enough)."""
    if checkpoint_after is not None:
        return json.dumps({"attempt": attempt, "checkpointAfter": checkpoint_after}).encode()
    return json.dumps({"attempt": attempt} | ({"checkpointPacing": pacing} if pacing else {})).encode()
