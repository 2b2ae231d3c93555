"""Pods a node's kubelet refused to admit (OutOfnvidia.com/gpu, UnexpectedAdmissionError: children/observe.py
NODE_REFUSALS): the scheduler placed them, their node would not run them. Such a pod never started, so it is no
failure of the attempt: no restart is counted (not against disruptionLimit either) and the gang is not restarted.
Its slot's pod is deleted and created again alone, after a backoff of its own that doubles with each refusal
(backoffBaseSeconds, at most backoffMaxSeconds; status.replacements), while the rest of the gang waits for it as
for a slow start (a DDP rank waits for its peers up to startupDeadlineSeconds). The slot keeps its first refusal
across the re-creations, so the startup deadline counts from it (plan/slots.py): pods no node will admit fail the
job once the deadline is out, naming the node and its reason. A pod of the slot that runs clears it.

At most MOST_SLOTS slots are handled so at once, each with a record in the status (about 350 bytes): a refused pod
beyond them stays as it is, never a failure of the attempt, until a slot clears; its slot's refusal stretch (and
the startup deadline) begins when it is handled. A 10,240-rank gang
whose every pod is refused keeps its status near 200 KB, not 3.6 MB (README, "Status at scale")."""

from trainingjob.children.observe import PodState
from trainingjob.model import NodeRefusal, SlotBackoff, TrainingJobStatus
from trainingjob.plan import classify, replacement, tracking
from trainingjob.plan.transitions import after
from trainingjob.plan.types import Context, Decision, Event

REASON = "PodRefusedByNode"
MOST_SLOTS = 512


def waits(pod: PodState) -> bool:
    """A pod a node refused, never started: this policy's, never a failure of the attempt (handled, or waiting for
    room among the MOST_SLOTS)."""
    return pod.refused_by_node and pod.started_at is None and bool(pod.uid)


def refused(ctx: Context, status: TrainingJobStatus) -> list[PodState]:
    """The current attempt's pods a node refused that are not handled yet."""
    counted = tracking.counted_uids(status)
    return [p for p in ctx.pods_of(status.current_pods_attempt) if waits(p) and p.uid not in counted]


def decide(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    """Clear the refusals of slots whose pod runs; note each new refusal on its slot, delete the refused pod and let
    creation make it again once the slot's backoff is over."""
    cleared = _cleared(ctx, status)
    slots = {r.pod: r for r in cleared.replacements}
    found = _within_room(refused(ctx, cleared), slots)
    if not found:
        return None if cleared == status else Decision(cleared)
    firsts = []
    for pod in found:
        slots[pod.name], first = _noted(ctx, slots.get(pod.name), pod)
        if first:
            firsts.append(pod)
    status = cleared.model_copy(update={"replacements": sorted(slots.values(), key=lambda r: r.pod)})
    status = tracking.counted_failed(status, found, [])
    wait = (min(slots[p.name].not_before for p in found) - ctx.now).total_seconds()
    return Decision(
        status,
        delete=tuple(p.name for p in found if not p.deleting),
        events=(_announced(ctx, firsts, wait),) if firsts else (),
        requeue_after=max(wait, 0.1),
    )


def _within_room(found: list[PodState], slots: dict[str, SlotBackoff]) -> list[PodState]:
    """The refused pods of slots handled already, and of new slots as many as there is room for."""
    room = max(MOST_SLOTS - sum(r.refused is not None for r in slots.values()), 0)
    new = [p for p in found if p.name not in slots]
    return [p for p in found if p.name in slots] + new[:room]


def _noted(ctx: Context, slot: SlotBackoff | None, pod: PodState) -> tuple[SlotBackoff, bool]:
    """The slot with this refusal counted, its pod due after the delay for that many refusals; and whether it is
    the first of the stretch."""
    before = slot.refused if slot is not None else None
    count = before.count + 1 if before is not None else 1
    since = before.since if before is not None else ctx.now
    refusal = NodeRefusal(since=since, count=count, node=pod.node, reason=pod.reason)
    due = after(ctx.now, replacement.delay(ctx, count))
    if slot is None:
        return SlotBackoff(pod=pod.name, not_before=due, refused=refusal), True
    return slot.model_copy(update={"refused": refusal, "not_before": max(slot.not_before, due)}), before is None


def _announced(ctx: Context, pods: list[PodState], wait: float, shown: int = 3) -> Event:
    """One Warning for the slots whose pods nodes began to refuse in this pass, naming the first few."""
    limit = ctx.job.spec.run_policy.startup_deadline_seconds
    said = "; ".join(classify.describe(p) for p in pods[:shown])
    more = f"; and {len(pods) - shown} more pods" if len(pods) > shown else ""
    which = "It is" if len(pods) == 1 else "Each is"
    return Event(
        "Warning",
        REASON,
        f"{said[0].upper()}{said[1:]}{more}. {which} created again alone in {wait:.0f} s, later after each further "
        f"refusal; the job fails if a pod is not running {limit} s (startupDeadlineSeconds) after its first refusal. "
        "Node refusals do not count against disruptionLimit.",
    )


def _cleared(ctx: Context, status: TrainingJobStatus) -> TrainingJobStatus:
    """The refusals of slots whose pod runs (or ran) are over; a slot kept for its refusals alone (no failure of
    the job's own to back off from) is let go, making room for another."""
    ran = {p.name for p in ctx.pods_of(status.current_pods_attempt) if p.is_up or p.started_at is not None}
    over = {r.pod for r in status.replacements if r.refused is not None and r.pod in ran}
    if not over:
        return status
    last = status.last_failure.pod if status.last_failure is not None else None
    slots = [
        r.model_copy(update={"refused": None}) if r.pod in over else r
        for r in status.replacements
        if r.pod not in over or r.failures or r.pod == last  # a slot kept only for its refusals goes
    ]
    return status.model_copy(update={"replacements": slots})
