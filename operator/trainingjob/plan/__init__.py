"""The pure planner: plan(job, observed, now) -> what to write, say, delete and create. No I/O, no clock.

Each policy is a pure function of (context, status) in a file of its own, returning a frozen Decision or
None. plan() applies them in this order, each seeing the status the ones before it left; a final decision
stops the rest:

    finished      a Succeeded or Failed job: cleanPodPolicy, TTL; nothing else ever runs
    progress      record rank 0's latest progress report (its last words too: a suspended rank's final checkpoint),
                  with the percent done and the estimated completion time (dropped when suspended or finished)
    suspend       suspended: stop every pod; resumed: a new attempt if the last one had pods. Kueue's hold on a
                  queued job is a suspension too, or a Pending job with no pods until it is admitted (queue.py)
    tracking      record the attempt's pods by UID (an earlier operator's gated ones: release them from the gate)
    gates         a pod another controller holds at its own scheduling gate: Queued names it; not startup time
    active        activeDeadlineSeconds, suspended time not counted
    start         attempt 0 becomes attempt 1
    success       every worker succeeded: the result (final metrics, step, checkpoint) is recorded
    completion    DDP: workers ran on completionGraceSeconds after one succeeded: success if worker 0 did, else
                  a restart counted as a stall
    refused       a pod a node's kubelet refused to admit: its slot's pod alone is created again after a backoff of
                  its own, no restart counted; the startup deadline counts from the slot's first refusal
    failure       failed, deleted or vanished pods, a trainer failed in a healthy pod: restart the gang (in its pods
                  when they are all up), replace a PS worker, or fail
    in_place      a restart in place under way: tell rank 0's agent, until every pod runs it or it falls back
    worker_in_place  ParameterServer mode: a worker's trainer failed in its healthy pod: count it and restart it
                  in place as its next incarnation (tell its agent until it runs it, or re-create its pod)
    resize        an elastic DDP job: shrink at once when its gang cannot be placed within resizeWaitSeconds, grow
                  at the next checkpoint when room returns; status.scale says how many workers and why
    stalled       no progress for progressDeadlineSeconds (once the attempt has reported)
    startup       a pod not running startupDeadlineSeconds after it was due
    creation      create missing pods after earlier attempts are gone and the backoff is over
    phase         Running, or why not yet

The replica counts are recomputed last, whatever decided, the pods whose tracking finalizer the status no longer
needs are let go of (release.py), status.history notes what changed (history.py), and
status.goodput is brought up to date from it when due (goodput.py). A queued job's one write on its Kueue Workload
is decided from the status the plan leaves (queue.action), and its pods are placed where Kueue admitted them.
"""

from collections.abc import Callable
from datetime import datetime

from trainingjob.children.goodput import creation_time
from trainingjob.children.naming import Replica
from trainingjob.children.observe import Observed
from trainingjob.children.pacing import pacing_variable
from trainingjob.children.specs import access_manifests, pod_manifest, service_manifest
from trainingjob.model import TrainingJob, TrainingJobStatus
from trainingjob.plan import (
    completion,
    creation,
    deadlines,
    failure,
    finished,
    gates,
    goodput,
    history,
    in_place,
    phase,
    prepared,
    progress,
    queue,
    refused,
    resize,
    success,
    suspend,
    tracking,
    worker_in_place,
)
from trainingjob.plan.release import released
from trainingjob.plan.types import Context, Decision, Event, Manifest, Plan, Settings

Policy = Callable[[Context, TrainingJobStatus], Decision | None]

POLICIES: tuple[tuple[str, Policy], ...] = (
    ("finished", finished.decide),
    ("progress", progress.record),
    ("suspend", suspend.decide),
    ("tracking", tracking.decide),
    ("gates", gates.decide),
    ("active", deadlines.active),
    ("start", creation.start),
    ("success", success.decide),
    ("completion", completion.decide),
    ("refused", refused.decide),
    ("failure", failure.decide),
    ("in_place", in_place.decide),
    ("worker_in_place", worker_in_place.decide),
    ("resize", resize.decide),
    ("stalled", progress.stalled),
    ("startup", deadlines.startup),
    ("creation", creation.decide),
    ("phase", phase.decide),
)

__all__ = ["POLICIES", "Context", "Decision", "Event", "Plan", "Settings", "plan"]


def plan(job: TrainingJob, observed: Observed, now: datetime, settings: Settings | None = None) -> Plan:
    """Decide one reconcile of `job` from what was observed; `now` is the only clock."""
    ctx = Context(job, observed, now, settings or Settings())
    status = (job.status or TrainingJobStatus()).model_copy(update={"observed_generation": ctx.generation})
    taken: list[tuple[str, Decision]] = []
    for name, policy in POLICIES:
        decision = policy(ctx, status)
        if decision is None:
            continue
        taken.append((name, decision))
        status = decision.status
        if decision.final:
            break
    before, created = job.status or TrainingJobStatus(), creation_time(job.metadata)
    status = history.record(before, phase.counts(ctx, status), now, created)
    status = goodput.refreshed(before, status, created, now)
    return _fold(ctx, status, [d for _, d in taken], [n for n, d in taken if _acts(d)])


def _pods(ctx: Context, creates: list[Replica], attempt: int, image: str, pacing: str | None) -> list[Manifest]:
    in_place = ctx.settings.in_place_restart
    return [
        queue.placed(
            pod_manifest(ctx.job, ctx.uid, r, attempt, image, in_place=in_place, pacing=pacing),
            queue.placement(ctx, r.role),
        )
        for r in dict.fromkeys(creates)
    ]


def _acts(decision: Decision) -> bool:
    return bool(
        decision.delete
        or decision.force_delete
        or decision.create
        or decision.ungate
        or decision.events
        or decision.delete_job
        or decision.order_attempt
        or decision.order_workers
        or decision.ask_checkpoint is not None
    )


def _fold(ctx: Context, status: TrainingJobStatus, decisions: list[Decision], names: list[str]) -> Plan:
    """One plan from the decisions: their actions in order, without repeats, and the soonest requeue."""
    creates = [r for d in decisions for r in d.create]
    image = status.default_image or ctx.settings.default_trainer_image
    attempt, settings = status.current_pods_attempt, ctx.settings
    bounds = (settings.checkpoint_min_seconds, settings.checkpoint_max_seconds)
    pacing = pacing_variable(ctx.job.spec.checkpoint, status, settings.checkpoint_prior_mtbf_seconds, bounds)
    manifests = _pods(ctx, creates, attempt, image, pacing)
    service = any(d.create_service for d in decisions) and not status.phase.is_terminal
    # Until Prepared, the key and policy go with whatever is sent (a Service alone too): Prepared, once recorded,
    # then always means the key exists.
    if (manifests or service) and not prepared.created(status):
        manifests[:0] = access_manifests(ctx.job, ctx.uid, settings.operator_namespace, settings.network_policy)
    if service:
        manifests.insert(0, service_manifest(ctx.job, ctx.uid))
    requeues = [d.requeue_after for d in decisions if d.requeue_after is not None]
    forced = tuple(dict.fromkeys(n for d in decisions for n in d.force_delete))
    deleted = tuple(n for n in dict.fromkeys(n for d in decisions for n in d.delete) if n not in forced)
    going = set(forced) | set(deleted)
    every = bool(creates) and all(d.creates_all for d in decisions if d.create)
    return Plan(
        status=status,
        create=tuple(manifests),
        delete=deleted,
        force_delete=forced,
        ungate=tuple(n for n in dict.fromkeys(n for d in decisions for n in d.ungate) if n not in going),
        release=released(ctx.observed.pods, status, forced + deleted),
        events=tuple(e for d in decisions for e in d.events),
        requeue_after=max(min(requeues), 0.1) if requeues else None,
        delete_job=any(d.delete_job for d in decisions),
        order_attempt=next((d.order_attempt for d in decisions if d.order_attempt), None),
        order_workers=tuple(dict.fromkeys(o for d in decisions for o in d.order_workers)),
        pacing=pacing,
        ask_checkpoint=next((d.ask_checkpoint for d in decisions if d.ask_checkpoint is not None), None),
        decisions=tuple(names),
        workload=queue.action(ctx, status),
        all_created=creation.all_created(ctx, status) if every else None,
    )
