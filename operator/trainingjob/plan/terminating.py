"""Pods the next creation waits for that do not go: still there terminatingTimeout after their grace period ended.
Each is force-deleted once: a pod whose deletion has no grace left (forced already, or never scheduled) is not asked
again, since what keeps it then is a finalizer nobody removes or a node that does not answer, and asking changes
nothing. The Created condition names the pod and its finalizers (announced once per change, by the force delete's
Event or its own), the startup deadline counts the wait from then (plan/slots.py), and the wait is polled with a
growing delay: the pod's deletion wakes the job anyway."""

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from trainingjob.children.observe import PodState
from trainingjob.model import ConditionType
from trainingjob.plan.slots import STUCK
from trainingjob.plan.transitions import condition_of, with_condition
from trainingjob.plan.types import Context, Decision, Event

POLL_SECONDS = 2.0  # the shortest wait before looking again


def stuck(ctx: Context, pods: Sequence[PodState]) -> list[PodState]:
    """The pods still there terminatingTimeout after their grace period ended, oldest deletion first."""
    limit = ctx.settings.terminating_timeout_seconds
    late = [p for p in pods if p.deleting_since and (ctx.now - p.deleting_since).total_seconds() >= limit]
    return sorted(late, key=lambda p: (p.deleting_since, p.name))


def stuck_from(ctx: Context) -> datetime | None:
    """When the first of the pods now stuck became stuck (its grace period's end plus terminatingTimeout): what the
    startup deadline counts a wait for pods that do not go from."""
    late = stuck(ctx, [p for p in ctx.observed.pods if p.deleting])
    limit = timedelta(seconds=ctx.settings.terminating_timeout_seconds)
    return min((p.deleting_since + limit for p in late if p.deleting_since is not None), default=None)


def to_force(pods: Sequence[PodState]) -> list[PodState]:
    """The stuck pods a force delete can still help: those with grace left."""
    return [p for p in pods if not p.no_grace_left]


def _keeps(pod: PodState) -> str:
    if pod.finalizers:
        return f"its finalizers {', '.join(pod.finalizers)} keep it until their controllers remove them"
    where = f"its node {pod.node}" if pod.node else "its node"
    return f"{where} has not confirmed it stopped (node lost?)"


def forced_event(pod: PodState) -> Event:
    where = f" on node {pod.node}" if pod.node else ""
    return Event(
        "Warning",
        "ForceDeleted",
        f"Force-deleted pod {pod.name}{where}: it was still terminating long after its grace period; {_keeps(pod)}.",
    )


def message(pods: Sequence[PodState]) -> str:
    """What the job waits for, from the first stuck pod; stable from pass to pass while nothing changes."""
    first = pods[0]
    more = f" (and {len(pods) - 1} more)" if len(pods) > 1 else ""
    return f"Waiting for pod {first.name}{more} to go: it was deleted and is still there; {_keeps(first)}."


def waiting(ctx: Context, decision: Decision, pods: Sequence[PodState]) -> Decision:
    """The creation waits for `pods`: Created says so (an Event when the pod it names is news and no force delete
    said it already), and the job looks again after as long as the oldest has waited (2 s at least, backoffMax at
    most)."""
    said = message(pods)
    before = condition_of(decision.status, ConditionType.CREATED)
    status = with_condition(ctx, decision.status, ConditionType.CREATED, False, reason=STUCK, message=said)
    events = decision.events
    named = f"Waiting for pod {pods[0].name} "  # the cause: which pod, not how many others wait with it
    if not events and (before is None or before.reason != STUCK or not before.message.startswith(named)):
        events = (Event("Warning", STUCK, said),)
    oldest = min(p.deleting_since for p in pods if p.deleting_since is not None)
    waited = (ctx.now - oldest).total_seconds()
    delay = min(max(waited, POLL_SECONDS), ctx.settings.backoff_max_seconds)
    return replace(decision, status=status, events=events, requeue_after=delay)
