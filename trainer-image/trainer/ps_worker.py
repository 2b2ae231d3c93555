"""A parameter-server worker: compute a gradient, push it to every shard, train on the fresh parameters."""

import logging
import time
from collections.abc import Callable
from typing import Any

import torch

from trainer import faults
from trainer.config import TrainerConfig
from trainer.contract import ExitCode
from trainer.entrypoint import build_recipe
from trainer.env import TrainerEnv
from trainer.failures import RetryableError
from trainer.ps_auth import read_job_key
from trainer.ps_fence import hello_message
from trainer.ps_shard import SYNC_ROUND_SECONDS, assign_shards
from trainer.ps_wire import Connection, Message, frame_limit
from trainer.recipe import Recipe
from trainer.rendezvous import wait_for_port
from trainer.reporting import RunReport
from trainer.signals import StopFlag
from trainer.steps import accumulate_gradients, evaluate_share, means
from trainer.training import configure_determinism, total_steps, train_batches

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = SYNC_ROUND_SECONDS + 30.0  # a push may wait out a synchronous round
DONE_POLL_SECONDS = 1.0


class PsWorker:
    """One worker: stateless apart from the parameters; its next step lives on the parameter servers."""

    def __init__(self, env: TrainerEnv, config: TrainerConfig, recipe: Recipe, stop: StopFlag) -> None:
        self.env, self.config, self.recipe, self.stop = env, config, recipe, stop
        self.key = read_job_key(env.job_key_file)
        self.index = env.replica_index
        self.device = torch.device("cuda", env.local_rank) if torch.cuda.is_available() else torch.device("cpu")
        self.batches = train_batches(recipe, config, self.device, replicas=env.num_workers, rank=self.index)
        self.total = total_steps(config, self.batches.order.steps_per_epoch)
        self.model = recipe.model.to(self.device)
        self.params = dict(self.model.named_parameters())
        sizes = [(name, p.numel()) for name, p in self.params.items()]
        self.assignment = assign_shards(sizes, len(env.ps_addrs))
        self.reply_limits = [frame_limit(self._shard_params(shard)) for shard in range(len(env.ps_addrs))]
        self.connections: list[Connection] = []
        self.versions = [0] * len(env.ps_addrs)
        self.step = 0
        self.max_staleness_seen = 0
        self.pacing_news: dict[str, Any] | None = None  # shard 0's checkpoint pacing, told and not yet reported
        self.checkpoints: dict[int, dict[str, Any]] = {}  # each shard's newest complete checkpoint, as it told
        self.checkpoint_news = False  # one was told and not yet reported

    def _shard_params(self, shard: int) -> dict[str, torch.Tensor]:
        return {name: p.detach().cpu() for name, p in self.params.items() if self.assignment[name] == shard}

    def connect(self) -> None:
        """(Re)connect to every shard, waiting for each with a deadline; resume at the shards' step for us.

        Each connection says hello at once: a server drops a connection whose first message is late.
        """
        self.close()
        next_steps = []
        for shard, (host, port) in enumerate(self.env.ps_addrs):
            wait_for_port(host, port, self.env.master_wait_seconds, "parameter server", stopped=self.stop.is_set)
            connection = Connection(host, port, self.key, self.reply_limits[shard], REQUEST_TIMEOUT)
            self.connections.append(connection)
            reply = connection.request(hello_message(self.index, self.env.agent_id, self.env.incarnation))
            self._load(shard, reply)
            next_steps.append(int(reply["next_step"]))
        self.step = min(next_steps)

    def _broadcast(self, message: Message, per_shard: list[Message] | None = None) -> list[Message]:
        for shard, connection in enumerate(self.connections):
            connection.send({**message, **(per_shard[shard] if per_shard else {})})
        replies = [connection.receive() for connection in self.connections]
        for shard, reply in enumerate(replies):
            if "params" in reply:
                self._load(shard, reply)
        return replies

    def _load(self, shard: int, reply: Message) -> None:
        with torch.no_grad():
            for name, value in reply["params"].items():
                self.params[name].copy_(value)
        self.versions[shard] = int(reply["version"])
        self._heard_checkpoint(shard, reply)

    def _heard_checkpoint(self, shard: int, reply: Message) -> None:
        if isinstance(reply.get("checkpoint"), dict):
            self.checkpoints[shard], self.checkpoint_news = reply["checkpoint"], True

    def job_checkpoint(self) -> dict[str, Any] | None:
        """The job's newest complete checkpoint, once every shard has told its own: the oldest of the shards'
        newest (every shard has one at least that far), named by the job's step."""
        if len(self.checkpoints) < len(self.env.ps_addrs):
            return None
        return min(self.checkpoints.values(), key=lambda said: int(said["step"]))

    def report_news(self, report: RunReport) -> None:
        """What the shards told since the last report: shard 0's checkpoint pacing, the job's checkpoint."""
        if self.pacing_news is not None:
            report.update(checkpointPacing=self.pacing_news)
            self.pacing_news = None
        checkpoint = self.job_checkpoint() if self.checkpoint_news else None
        if checkpoint is not None:
            report.saved(
                int(checkpoint["step"]), str(checkpoint["path"]), float(checkpoint["time"]), checkpoint["kept"]
            )
            self.checkpoint_news = False

    def final_checkpoint(self, report: RunReport) -> None:
        """Worker 0 stops: every shard checkpoints at its next step and says so, and the report names that
        checkpoint (as DDP's rank 0 reports its final one); a shard already gone leaves the report as it was."""
        if not report.is_reporter:
            return
        try:
            replies = self._broadcast({"op": "checkpoint"})
        except (OSError, ValueError) as error:  # a server gone, or one too old to know the ask (it hangs up)
            log.warning("could not ask the parameter servers for a final checkpoint: %s", error)
            return
        for shard, reply in enumerate(replies):
            self._heard_checkpoint(shard, reply)
        self.report_news(report)

    def train_step(self) -> float:
        """Gradient on this step's micro-batches, pushed to every shard; the replies carry the new parameters."""
        batches = self.batches.step(self.step)
        self.model.zero_grad(set_to_none=True)
        loss = accumulate_gradients(self.model, self.recipe, batches, self.config, device=self.device)
        grads: list[dict[str, Any]] = [{} for _ in self.connections]
        for name, param in self.params.items():
            grad = param.grad if param.grad is not None else torch.zeros_like(param)  # unused in this step's loss
            grads[self.assignment[name]][name] = grad.cpu()
        per_shard = [{"grads": g, "version": self.versions[shard]} for shard, g in enumerate(grads)]
        replies = self._broadcast({"op": "push", "worker": self.index, "step": self.step}, per_shard)
        self.max_staleness_seen = max([self.max_staleness_seen, *(int(r["staleness"]) for r in replies)])
        pacing = replies[0].get("checkpointPacing")  # shard 0's, every few seconds, to worker 0 (it reports)
        self.pacing_news = pacing if isinstance(pacing, dict) else self.pacing_news
        self.step += 1
        return loss

    def train(self, report: RunReport) -> ExitCode:
        """Steps until the end or a SIGTERM; a lost shard gets reconnected to within the deadline; worker 0
        evaluates every evalEverySteps."""
        samples = self.config.batch_size * self.config.gradient_accumulation_steps * self.env.num_workers
        every = self.config.eval_every_steps
        while self.step < self.total:
            if self.stop.is_set():
                self.final_checkpoint(report)
                return ExitCode.PREEMPTED
            try:
                loss = self.train_step()
            except OSError as error:
                if self.stop.is_set():  # the servers stop too (a suspend): no reconnecting, the loop's top ends it
                    log.info("lost a parameter server while stopping (%s)", error)
                    continue
                log.warning("lost a parameter server (%s): reconnecting", error)
                self.connect()
                continue
            report.stepped(self.step, loss, samples)
            if self.env.incarnation == 1:  # local mode's --kill stops the worker's first incarnation only
                faults.maybe_pause(self.step)
            faults.maybe_delay_step()
            self.report_news(report)
            if report.is_reporter and every is not None and self.step % every == 0 and self.step < self.total:
                self.evaluate(report)
        return ExitCode.SUCCEEDED

    def evaluate(self, report: RunReport) -> dict[str, float] | None:
        """Worker 0 evaluates the parameters it last received on the whole evaluation set."""
        if self.recipe.eval_data is None:
            return None
        metrics = means([evaluate_share(self.model, self.recipe, self.config, self.device, replicas=1, rank=0)])
        report.evaluated(self.step, metrics)
        return metrics

    def finish(self, report: RunReport) -> None:
        """Tell the shards we are done; worker 0 waits for everyone, evaluates and releases the shards."""
        self._broadcast({"op": "done", "worker": self.index})
        if not report.is_reporter:
            return
        replies = self.wait_for_everyone(report.alive)
        self._broadcast({"op": "pull"})
        stats = [reply["stats"] for reply in replies]
        self.evaluate(report)
        summary = {
            "finished": True,
            "etaSeconds": 0.0,
            "stalenessBound": self.config.staleness_bound,
            "maxStaleness": max(s["max_staleness"] for s in stats),
            "maxStalenessSeen": max(s["max_staleness_seen"] for s in stats),
            "acceptedGradients": sum(s["accepted"] for s in stats),
            "refusedGradients": sum(s["refused"] for s in stats),
            "stalenessHistogram": _merged_histogram(stats),
            "workersDone": min(len(reply["done"]) for reply in replies),
        }
        log.info("parameter-server training done: %s", summary)
        report.update(**summary)
        self._broadcast({"op": "finish"})

    def wait_for_everyone(self, alive: Callable[[], None] = lambda: None) -> list[Message]:
        """Worker 0's final wait: until every worker told every shard it is done, however long one still trains;
        `alive` is called at each poll (the heartbeat: the operator must not take the wait for a stall).

        A worker that is not done but has been silent on every shard for the wait deadline (and at least that
        long into this wait, so a restarted one has time to come back) is gone: a RetryableError, and the
        shards are not released (they end on their own silence deadline). With workers.minReplicas
        (TJ_MIN_WORKERS), a worker from it on is not required (plan/ps_room.py: no node may have room for it):
        one no shard has heard from is not waited for, and one gone silent is left behind.
        """
        deadline, started, announced = self.env.master_wait_seconds, time.monotonic(), False
        while True:
            alive()
            replies = self._broadcast({"op": "wait_done", "timeout": min(DONE_POLL_SECONDS, deadline)})
            missing = sorted(_waited_for(self.env.num_workers, self.env.min_workers, replies))
            if not missing:
                return replies
            silent = min(time.monotonic() - started, *(float(reply["idle"]) for reply in replies))
            if silent >= deadline and all(w >= self.env.min_workers for w in missing):
                log.info("releasing the parameter servers without worker(s) %s (beyond minReplicas)", missing)
                return replies
            if silent >= deadline:
                raise RetryableError(
                    f"worker(s) {missing} have not finished and have been silent for {silent:.0f}s: "
                    "not releasing the parameter servers"
                )
            if not announced:
                log.info("waiting for worker(s) %s to finish before releasing the parameter servers", missing)
                announced = True

    def close(self) -> None:
        """Close every shard connection."""
        for connection in self.connections:
            connection.close()
        self.connections = []


def _waited_for(workers: int, required: int, replies: list[Message]) -> set[int]:
    """The workers worker 0 still waits for: those not done on every shard, but for workers from `required` on
    that no shard has heard from (never placed)."""
    done = set.intersection(*(set(r["done"]) for r in replies))
    heard = set().union(*(set(r.get("heard", ())) for r in replies))
    return {w for w in range(workers) if w not in done and (w < required or w in heard)}


def run_ps_worker(env: TrainerEnv, config: TrainerConfig, stop: StopFlag) -> ExitCode:
    """The `worker` role's entry point in parameter-server mode."""
    configure_determinism()
    worker = PsWorker(env, config, build_recipe(config), stop)
    report = RunReport(env, is_reporter=env.replica_index == 0)
    try:
        worker.connect()
        report.start(worker.step, worker.total)
        worker.report_news(report)  # where it resumed from: the shards' newest complete checkpoints
        started = time.monotonic()
        code = worker.train(report)
        if code == ExitCode.SUCCEEDED:
            worker.finish(report)
        report.update(exitCode=int(code))
        log.info(
            "worker %d: %s after %.1fs at step %d",
            worker.index,
            code.name,
            time.monotonic() - started,
            worker.step,
        )
        return code
    except InterruptedError:  # told to stop while waiting for a server that is gone (a suspend stops them first)
        log.info("worker %d: PREEMPTED while waiting for its parameter servers", worker.index)
        report.update(exitCode=int(ExitCode.PREEMPTED))
        return ExitCode.PREEMPTED
    except (OSError, ConnectionError) as error:
        raise RetryableError(f"parameter-server worker {env.replica_index} lost its servers: {error}") from error
    finally:
        worker.close()
        report.close()


def _merged_histogram(stats: list[dict[str, Any]]) -> dict[str, int]:
    """Gradients per staleness over every shard, as {"0": n0, "1": n1, ...} (JSON keys are strings)."""
    merged: dict[int, int] = {}
    for shard in stats:
        for staleness, count in shard["histogram"].items():
            merged[int(staleness)] = merged.get(int(staleness), 0) + int(count)
    return {str(staleness): merged[staleness] for staleness in sorted(merged)}
