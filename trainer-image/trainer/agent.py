"""The in-place agent (TJ_IN_PLACE=1, DDP jobs and parameter-server workers): PID 1 supervises its pod's trainer
and restarts it in place.

The agent never imports torch. It runs each attempt's trainer as a child in a process group of its own, with
TJ_ATTEMPT set to that attempt (the pod's environment names the first), from a warm spare (trainer.spare) when one
is ready, and keeps one spare warm while the attempt runs (trainer.agent_procs): after the first, spares are forks of
the pod's zygote, which imported torch once (trainer.zygote). How a child's end is handled:

- 0: report "succeeded", exit 0 (the pod succeeds). 79 (PREEMPTED): exit 79. 78 (PERMANENT): report, exit 78 at
  once (restarting cannot help).
- anything else (75, 137 for a SIGKILL, 1...): report "failed" and wait for an order, at most
  TJ_IN_PLACE_WAIT_SECONDS (default 120); without one, exit with the child's code, and the operator falls back to
  re-creating the pods.
- the gang failed elsewhere: the healthy child is in a broken collective; its group is killed and the agent waits
  for an order the same way (exiting 75, RETRYABLE, if none comes).
- an order for a newer attempt (after a failure, or to restart a stalled gang): the old child's group is killed and
  reaped (its ports free, nothing stale left), then the new attempt starts. The order may carry the job's failure
  history for `everySteps: Auto` (checkpointPacing): rank 0's new child gets it as TJ_CHECKPOINT_PACING, in place of
  the pod's (only rank 0 decides time-based saves: the other pods need nothing).
- SIGTERM or SIGINT: SIGTERM to the child (it checkpoints and forwards it to its local ranks), SIGKILL to its group
  after 30 s, exit with its code. The agent's children never outlive it.

A parameter-server worker's agent is a gang of one (its own coordinator): its "attempts" are the worker's
incarnations (TJ_INCARNATION, 1 for the pod's first trainer) while TJ_ATTEMPT stays the job's attempt, and each
trainer also gets TJ_AGENT_ID, the agent's random id: the servers refuse a worker's older incarnation once a newer
one of the same agent said hello (trainer.ps_server), so a stale process never pushes as the new one.

Rank 0's agent is the coordinator: it holds the gang's state (trainer.agent_state) and serves the operator and the
other agents over HTTP (trainer.agent_http, signed as trainer.agent_auth says); the others long-poll it and report
to it (trainer.agent_link). Attempt N's processes are fenced off attempt N+1's: rendezvous under an attempt prefix
(trainer.ddp) and a checkpoint fence (trainer.checkpoint_store).
"""

import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer import checkpoint_request
from trainer import contract as c
from trainer.agent_http import AgentServer, Endpoints
from trainer.agent_link import CoordinatorLink
from trainer.agent_procs import Child, Spares, become_subreaper, end_group
from trainer.agent_state import FAILED, GangState
from trainer.contract import ExitCode
from trainer.env import TrainerEnv, parse_address
from trainer.failures import ConfigError
from trainer.ps_auth import read_job_key
from trainer.signals import StopFlag

log = logging.getLogger(__name__)

DEFAULT_PORT = 29401
DEFAULT_WAIT_SECONDS = 120.0
KILL_GRACE_SECONDS = 30.0
POLL_SECONDS = 0.1
REPORT_FLUSH_SECONDS = 5.0
NO_SPARE = "TJ_TEST_NO_SPARE"  # tests and measurements only: "1" starts every attempt cold
NO_ZYGOTE = "TJ_TEST_NO_ZYGOTE"  # tests and measurements only: "1" starts every spare as a new process (no zygote)


def is_enabled(environ: Mapping[str, str], env: TrainerEnv) -> bool:
    """TJ_IN_PLACE=1 on a DDP job's pod or a parameter-server worker's (a parameter server keeps one trainer per
    container's life: its state is the model's)."""
    return environ.get(c.IN_PLACE, "").strip() == "1" and env.role == c.ROLE_WORKER


@dataclass(frozen=True)
class AgentSettings:
    """The agent's variables, validated."""

    port: int
    coordinator: tuple[str, int]
    wait_seconds: float
    key: bytes
    warm_spare: bool = True
    zygote: bool = True


def _port(environ: Mapping[str, str]) -> int:
    raw = environ.get(c.AGENT_PORT, "").strip() or str(DEFAULT_PORT)
    if not raw.isdigit() or int(raw) > 65535:
        raise ConfigError("environment", c.AGENT_PORT, f"must be a port number (0 for any), got {raw!r}")
    return int(raw)


def _wait_seconds(environ: Mapping[str, str]) -> float:
    raw = environ.get(c.IN_PLACE_WAIT_SECONDS, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_WAIT_SECONDS
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise ConfigError("environment", c.IN_PLACE_WAIT_SECONDS, f"must be a number of seconds > 0, got {raw!r}")
    return value


def read_settings(environ: Mapping[str, str], env: TrainerEnv) -> AgentSettings:
    """The agent's settings; a ConfigError names a bad variable (the job key is required: orders are signed)."""
    port = _port(environ)
    coordinator = environ.get(c.AGENT_COORDINATOR, "").strip()
    if not coordinator and port == 0 and env.node_rank != 0 and not env.is_parameter_server_job:
        raise ConfigError("environment", c.AGENT_COORDINATOR, f"is required when {c.AGENT_PORT} is 0")
    address = parse_address(coordinator, c.AGENT_COORDINATOR) if coordinator else (env.master_addr, port)
    if env.job_key_file is None:
        raise ConfigError("environment", c.JOB_KEY_FILE, f"is required with {c.IN_PLACE}=1 (orders are signed)")
    return AgentSettings(
        port=port,
        coordinator=address,
        wait_seconds=_wait_seconds(environ),
        key=read_job_key(env.job_key_file),
        warm_spare=environ.get(NO_SPARE, "").strip() != "1",
        zygote=environ.get(NO_ZYGOTE, "").strip() != "1",
    )


class Agent:
    """One pod's agent: the main loop owns every process; HTTP and the coordinator link only update state."""

    def __init__(self, settings: AgentSettings, env: TrainerEnv, argv: Sequence[str], stop: StopFlag) -> None:
        self.solo = env.is_parameter_server_job  # a PS worker: a gang of one, counting incarnations, not attempts
        self.settings, self.rank, self.stop = settings, 0 if self.solo else env.node_rank, stop
        self.job_attempt, self.agent_id = env.attempt, secrets.token_hex(8)
        self.attempt = env.incarnation if self.solo else env.attempt
        self.unit = "incarnation" if self.solo else "attempt"  # what its logs call what it runs
        self.wake = threading.Event()
        pods = 1 if self.solo else env.num_workers
        self.gang = GangState(self.attempt, pods) if self.rank == 0 else None
        self.link = None
        if self.gang is None:
            self.link = CoordinatorLink(settings.coordinator, settings.key, self.rank, self.attempt, self.wake.set)
        self.spares = Spares(argv, os.environ, warm=settings.warm_spare, fork=settings.zygote)
        self.child: Child | None = None
        self.failed_code = int(ExitCode.RETRYABLE)
        self.waiting_until: float | None = None  # set while the pod has no child and waits for an order
        self.connections = max(64, 2 * env.num_workers + 16)
        self.requests = Path(tempfile.mkdtemp(prefix="tj-agent-")) if self.gang is not None and not self.solo else None

    def ask_checkpoint(self, attempt: int, after_step: int) -> bool:
        """POST /attempt's checkpointAfter: the current attempt's rank 0 saves a checkpoint newer than `after_step`
        (trainer.checkpoint_request); False for another attempt, or on an agent that does not coordinate a gang."""
        if self.requests is None or attempt != self.attempt:
            return False
        checkpoint_request.write(self.requests / "checkpoint", attempt, after_step)
        return True

    def status(self) -> dict[str, Any]:
        """GET /status: this pod as its agent sees it."""
        child, spare, zygote = self.child, self.spares.spare, self.spares.zygote
        return {
            "rank": self.rank,
            "attempt": self.attempt,
            "child": child.pid if child is not None else None,
            "spare": spare.pid if spare is not None else None,
            "zygote": zygote.process.pid if zygote is not None else None,
            "waiting": self.waiting_until is not None,
        }

    def run(self) -> int:
        """Serve, start the first attempt, supervise until the pod's exit code is known; leave no child behind."""
        if not become_subreaper():
            self.spares.fork = False  # a spare the zygote forked would be init's child, not this agent's
        endpoints = Endpoints(self.settings.key, self.status, self.gang, self.wake.set, self.ask_checkpoint)
        server = AgentServer(self.settings.port, endpoints, self.connections).start()
        role = "coordinator" if self.gang is not None else f"coordinator at {self.settings.coordinator}"
        who = "a parameter-server worker, its own coordinator" if self.solo else role
        log.info("in-place agent of rank %d on port %d (%s)", self.rank, server.port, who)
        try:
            self.begin(self.attempt)
            if self.link is not None:
                self.link.start()
            return self.supervise()
        finally:
            self.close(server)

    def supervise(self) -> int:
        """The main loop: follow orders, handle the child's end, give up at the wait's deadline."""
        while True:
            if self.stop.is_set():
                return self.stopped()
            self.follow_orders()
            code = self.check_child()
            if code is not None:
                return code
            if self.waiting_until is not None and time.monotonic() >= self.waiting_until:
                log.error(
                    "no order within %gs: exiting with %d (the operator re-creates the pods)",
                    self.settings.wait_seconds,
                    self.failed_code,
                )
                return self.failed_code
            self.spares.keep_warm()
            self.wake.wait(POLL_SECONDS)
            self.wake.clear()

    def view(self) -> tuple[int, bool]:
        """(the newest attempt ordered, whether this pod's attempt has failed), from the gang or the link."""
        if self.gang is not None:
            return self.gang.ordered, self.gang.has_failed(self.attempt)
        assert self.link is not None
        attempt, state = self.link.view()
        return attempt, attempt == self.attempt and state == FAILED

    def follow_orders(self) -> None:
        """Start a newer attempt when one was ordered; stop this pod's child when the gang failed elsewhere."""
        ordered, failed = self.view()
        if ordered > self.attempt:
            self.begin(ordered)
        elif failed and self.child is not None:
            log.error("attempt %d failed on another pod: stopping this pod's trainer", self.attempt)
            end_group(self.child)
            self.child = None
            self.wait_for_order(int(ExitCode.RETRYABLE))

    def begin(self, attempt: int) -> None:
        """Run `attempt` in this pod: the old child's group dead first, then (on the coordinator) the gang on it."""
        if attempt != self.attempt:
            log.info("%s %d ordered (this pod was on %s %d)", self.unit, attempt, self.unit, self.attempt)
        if self.child is not None:
            end_group(self.child)
            self.child = None
        self.attempt = attempt
        overrides: dict[str, str] = {}
        if self.gang is not None:
            self.gang.begin(attempt)
            pacing = self.gang.pacing_for(attempt)
            if pacing is not None:
                overrides[c.CHECKPOINT_PACING] = pacing  # the order's failure history, newer than the pod's
        if self.requests is not None:
            overrides[c.CHECKPOINT_REQUEST_FILE] = str(self.requests / "checkpoint")
        if self.solo:  # the job's attempt stays; the worker's incarnation moves (the servers fence by it)
            overrides |= {c.INCARNATION: str(attempt), c.AGENT_ID: self.agent_id}
        self.child = self.spares.launch(self.job_attempt if self.solo else attempt, overrides)
        threading.Thread(target=self._wake_at_exit, args=(self.child,), name="agent-child", daemon=True).start()
        self.waiting_until = None
        self.report("started")

    def _wake_at_exit(self, child: Child) -> None:
        """Wake the main loop the moment `child` exits: its failure is reported without a polling delay."""
        child.wait()
        self.wake.set()

    def check_child(self) -> int | None:
        """The pod's exit code once the child's end decides it; None while it runs or when the pod waits."""
        if self.child is None or self.child.poll() is None:
            return None
        child, self.child = self.child, None
        code = end_group(child)  # its group's leftovers too
        log.info("%s %d's trainer (pid %d) exited with %d", self.unit, self.attempt, child.pid, code)
        if code == ExitCode.SUCCEEDED:
            self.report("succeeded")
            return code
        if code == ExitCode.PREEMPTED:
            return code
        self.report("failed", code)
        if code == ExitCode.PERMANENT:
            log.error("attempt %d failed permanently (bad configuration): exiting at once", self.attempt)
            return code
        self.wait_for_order(code)
        return None

    def wait_for_order(self, code: int) -> None:
        """No child now: wait for an order until the deadline, then exit with `code`."""
        self.failed_code = code
        self.waiting_until = time.monotonic() + self.settings.wait_seconds
        log.info("waiting up to %gs for the order to start the next %s", self.settings.wait_seconds, self.unit)

    def report(self, event: str, exit_code: int = 0) -> None:
        """Tell the coordinator (or, on rank 0, the gang directly) what this pod's attempt did."""
        if self.gang is not None:
            self.gang.report(self.rank, self.attempt, event, exit_code)
        elif self.link is not None:
            self.link.report(self.attempt, event, exit_code)

    def stopped(self) -> int:
        """SIGTERM or SIGINT: the child stops (grace, then SIGKILL); its code is the pod's."""
        if self.child is None:
            return self.failed_code
        log.info("stopping attempt %d's trainer (pid %d)", self.attempt, self.child.pid)
        child, self.child = self.child, None
        return end_group(child, grace=KILL_GRACE_SECONDS)

    def close(self, server: AgentServer) -> None:
        """End every child, deliver the last reports, stop serving."""
        if self.child is not None:
            end_group(self.child)
            self.child = None
        self.spares.close()
        if self.link is not None:
            self.link.flush(REPORT_FLUSH_SECONDS)
            self.link.close()
        if self.gang is not None:
            self.gang.close()
        if self.requests is not None:
            shutil.rmtree(self.requests, ignore_errors=True)
        server.stop()


def run_agent(environ: Mapping[str, str], env: TrainerEnv, argv: Sequence[str], stop: StopFlag) -> int:
    """`python -m trainer` in agent mode: the pod's exit code (a trainer's death by signal N is 128 + N)."""
    return Agent(read_settings(environ, env), env, argv, stop).run()
