"""A finished job (Succeeded or Failed) is final: its pods are cleaned by cleanPodPolicy, the job itself is
deleted after ttlSecondsAfterFinished, and nothing is ever created again."""

from dataclasses import replace
from datetime import datetime, timedelta

from trainingjob.children.observe import Observed, PodState
from trainingjob.model import CleanPodPolicy, Phase, RunPolicy, TrainingJobStatus
from trainingjob.plan import estimate
from trainingjob.plan.transitions import moved
from trainingjob.plan.types import Context, Decision


def to_clean(pods: list[PodState], policy: CleanPodPolicy) -> tuple[str, ...]:
    """The pods cleanPodPolicy removes: All, those still holding their node (Running: unfinished, or held up by
    a sidecar after their trainer ended), or None."""
    if policy == CleanPodPolicy.ALL:
        chosen = pods
    elif policy == CleanPodPolicy.RUNNING:
        chosen = [p for p in pods if p.holds_its_node]
    else:
        chosen = []
    return tuple(p.name for p in chosen if not p.deleting)


def decide(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    if not status.phase.is_terminal:
        return None
    return cleanup(ctx.observed, ctx.now, status, ctx.job.spec.run_policy)


def cleanup(observed: Observed, now: datetime, status: TrainingJobStatus, policy: RunPolicy) -> Decision:
    """Clean the pods, then delete the job once its TTL has passed; a requeue for the TTL otherwise."""
    delete = to_clean(list(observed.pods), policy.clean_pod_policy)
    ttl, done = policy.ttl_seconds_after_finished, status.completion_time
    if ttl is None or done is None:
        return Decision(status, delete=delete, final=True)
    expires = done + timedelta(seconds=ttl)
    if now >= expires:
        return Decision(status, delete=delete, delete_job=True, final=True)
    left = min((expires - now).total_seconds(), float(ttl))  # a clock set back must not hold a job for ever
    return Decision(status, delete=delete, requeue_after=left, final=True)


def finish(ctx: Context, status: TrainingJobStatus, phase: Phase, reason: str, message: str) -> Decision:
    """End the job in a terminal phase, announce it, and clean up as a finished job does."""
    status, events = moved(ctx, estimate.stopped(status), phase, reason, message)
    return replace(cleanup(ctx.observed, ctx.now, status, ctx.job.spec.run_policy), events=events)
