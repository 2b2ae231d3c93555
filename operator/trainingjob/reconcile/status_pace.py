"""A job's status writes, paced: a pass that would change only what is counted again on every pass (the replica
counts, the Running condition's message, "5 of 8 pods of attempt 1 are running; ...", and goodput, which moves with
them) writes it at most once a PACE_SECONDS per job, and at the end of that time writes what it counts then.
Everything else (a phase, a condition's status or reason, the pods tracked, a failure, progress) is written at
once, the counts with it.

Why: while a gang's pods come up, each of them turning Running wakes the job, and every pass used to write the new
count, a status patch fanned out to every watcher of the job: about five writes for a job of 8 ranks, half of them
counts nobody acts on. Kubernetes' Job controller batches its pod updates for a second. A second was not enough
here: 20 jobs of 8 ranks created at once on the cluster tier still wrote their counts about twice each on the way up
(5.1 status writes a job: two at creation, 2.1 of counts, one for Running), because a busy cluster brings a gang's
pods up over several seconds. Five seconds cover that, and a stuck gang's counts and reasons ("0 of 8 pods...:
0/2 nodes are available") still show within them. A pass held back also holds no worker on a write, so the passes
that do write (a gang turning Running) wait less behind it.

Only a pass that does nothing else is held (no pod to create or delete, no Event, no order to a rank): its status is
all it would write, and the counts it holds back are counted again by the next pass, so nothing is lost. The memory
of when each job last wrote is the operator's (runtime/controller.py); after a restart the first write of each job
goes at once."""

import time
from collections.abc import Callable, Mapping
from typing import Any

from trainingjob.model import ConditionType
from trainingjob.plan import Plan

Key = tuple[str, str]  # namespace, job name
PACE_SECONDS = 5.0
# Recomputed on every pass: the replica counts from the pods (plan/phase.py), and goodput from the status and the
# clock (plan/goodput.py: its whole seconds change as time passes, with any change of the status).
COUNTED = ("workers", "parameterServers", "goodput")


def counts_only(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether the status `new` (as dumped for the API) differs from `old` in the counts and the Running
    condition's message alone (its status and reason the same)."""
    return _steady(old) == _steady(new)


def _steady(status: Mapping[str, Any]) -> dict[str, Any]:
    """The status without what is counted again on every pass."""
    conditions = [
        {k: v for k, v in c.items() if k != "message"} if c.get("type") == ConditionType.RUNNING.value else c
        for c in status.get("conditions") or []
    ]
    return {**{k: v for k, v in status.items() if k not in COUNTED}, "conditions": conditions}


def status_only(plan: Plan) -> bool:
    """Whether the pass writes nothing but the status (what it holds back changes nothing else it does)."""
    acts = (plan.create, plan.delete, plan.force_delete, plan.ungate, plan.release, plan.events, plan.order_workers)
    return not any(acts) and not plan.delete_job and plan.order_attempt is None and plan.ask_checkpoint is None


class StatusPace:
    """When each job last wrote its status (on the operator's monotonic clock), and how long a counts-only change
    waits for that."""

    def __init__(self, seconds: float = PACE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self._clock = seconds, clock
        self._written: dict[Key, float] = {}

    def hold(self, job: Key, old: Mapping[str, Any], new: Mapping[str, Any], plan: Plan) -> float | None:
        """Seconds to hold this pass's status write back (the job is reconciled again then), or None to write it
        now."""
        since = self._written.get(job)
        if since is None or old == new or not status_only(plan) or not counts_only(old, new):
            return None
        left = self.seconds - (self._clock() - since)
        return left if left > 0 else None

    def wrote(self, job: Key) -> None:
        self._written[job] = self._clock()

    def forget(self, job: Key) -> None:
        self._written.pop(job, None)

    def clear(self) -> None:
        """Forget every job (a lost Lease)."""
        self._written.clear()
