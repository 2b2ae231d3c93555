"""The invariants of the model-based test, checked after every reconcile and every step, with the ledger of
what the model did to pods (so the operator's counts can be held against it)."""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tests.support.fake_cluster import FakeCluster
from tests.support.job_status import job_status

from trainingjob.children.access import key_secret_name
from trainingjob.children.naming import CONTAINER_NAME
from trainingjob.children.observe import PodPhase, PodState, controller_uid, pod_state
from trainingjob.model import AttemptOutcome, ConditionType, FailureClass, Phase, PodOutcome, TrainingJobStatus
from trainingjob.plan import Settings, gates
from trainingjob.plan.failure import PEER_LOST_WAIT_SECONDS
from trainingjob.plan.slots import NAME_IN_USE, REFUSED

Manifest = dict[str, Any]


@dataclass
class Ledger:
    """What the model knows: pods it made fail (by job UID), pods the operator counted, finished jobs."""

    eligible: dict[str, set[str]] = field(default_factory=dict)  # pod UIDs that failed, were evicted, lost...
    counted: dict[str, set[str]] = field(default_factory=dict)
    finished: dict[str, set[str]] = field(default_factory=dict)  # pods a job had when it finished
    attempts_with_pods: dict[str, set[int]] = field(default_factory=dict)
    trainer_failures: dict[str, set[int]] = field(default_factory=dict)  # attempts whose trainer failed in place
    counted_in_place: dict[str, set[int]] = field(default_factory=dict)
    worker_failures: dict[str, set[tuple[str, int]]] = field(default_factory=dict)  # (pod UID, incarnation) failed
    counted_workers: dict[str, set[tuple[str, int]]] = field(default_factory=dict)  # ...and restarted in place
    backoff_base: float = 0.0  # the planner's first backoff: no pod is created sooner after a failure
    terminating_timeout: float = 0.0  # a deleted pod still there this long after its grace period is stuck
    stats: Counter[str] = field(default_factory=Counter)

    def disrupted(self, job_uid: str, pod_uid: str) -> None:
        self.eligible.setdefault(job_uid, set()).add(pod_uid)

    def count(self, job_uid: str, pod_uids: set[str]) -> None:
        eligible, counted = self.eligible.get(job_uid, set()), self.counted.setdefault(job_uid, set())
        assert pod_uids <= eligible, f"counted failures that never happened: {pod_uids - eligible}"
        assert not pod_uids & counted, f"failures counted twice: {pod_uids & counted}"
        counted |= pod_uids


def _resolved(job: Manifest, cluster: FakeCluster) -> TrainingJobStatus:
    """The job's status, each record read back without a UID given the UID of the pod made last under its name:
    the operator makes a pod under a recorded name only once that record is gone (model/tracked.py), so between
    one of its writes and its next, that is the record's pod. The checks below compare pods by UID."""
    status, namespace = job_status(job), job["metadata"]["namespace"]
    made = {name: uid for (ns, name), uid in cluster.named.items() if ns == namespace}
    records = [
        t if t.uid else t.model_copy(update={"uid": made.get(t.name, "never made")}) for t in status.tracked_pods
    ]
    return status.model_copy(update={"tracked_pods": records})


def _total(status: TrainingJobStatus) -> int:
    r = status.restarts
    return r.retryable + r.oom + r.disruption + r.stalled


def _failed_uids(status: TrainingJobStatus, outcome: PodOutcome | None) -> set[str]:
    return {t.uid for t in status.tracked_pods if t.outcome == outcome}


def check_after_reconcile(
    ledger: Ledger,
    cluster: FakeCluster,
    before: Manifest | None,
    after: Manifest | None,
    *,
    pods: list[Manifest],
    now: datetime,
    crashed: bool,
) -> None:
    ledger.stats["reconciles"] += 1
    ledger.stats["crashes"] += crashed
    if before is None:
        return
    uid, b = before["metadata"]["uid"], _resolved(before, cluster)
    if after is None:
        ttl = (before["spec"].get("runPolicy") or {}).get("ttlSecondsAfterFinished")
        assert b.phase.is_terminal or ttl == 0, f"job {uid} was deleted in phase {b.phase}"
        ledger.stats["deleted after TTL"] += 1
        return
    a = _resolved(after, cluster)
    refused = {s.uid for p in pods if (s := pod_state(p, CONTAINER_NAME)) and s.refused_by_node and not s.started_at}
    _check_transition(ledger, uid, b, a, before, refused=refused)
    _check_legitimate(ledger, uid, (b, a), before, now)
    created = [
        p
        for p in cluster.pods.values()
        if controller_uid(p) == uid and p["metadata"]["uid"] not in {q["metadata"]["uid"] for q in pods}
    ]
    if created and a.last_failure is not None:
        _check_backoff(ledger, a, [p["metadata"]["name"] for p in created], now)
    if a.phase.is_terminal and not b.phase.is_terminal:
        ledger.finished[uid] = {p["metadata"]["uid"] for p in cluster.pods.values() if controller_uid(p) == uid}
        ledger.stats[f"ended {a.phase.value}"] += 1
    owned = [p for p in pods if controller_uid(p) == uid]
    if a.phase.is_terminal and not b.phase.is_terminal:
        _check_not_premature(b, a, before, owned, now, stuck=ledger.terminating_timeout)
    _check_progress(b, a)
    _check_history(b, a)
    _check_key_exists(cluster, after, a)
    if not crashed:
        _check_settled(b, a, after, owned, now)
        _check_cleared(a, [p for p in cluster.pods.values() if controller_uid(p) == uid])


def _check_key_exists(cluster: FakeCluster, job: Manifest, a: TrainingJobStatus) -> None:
    """Prepared True says the key Secret every pod mounts was created (it is never sent again): it exists."""
    prepared = next((c for c in a.conditions if c.type == ConditionType.PREPARED), None)
    if prepared is not None and prepared.status == "True":
        metadata = job["metadata"]
        name = key_secret_name(metadata["name"], metadata["uid"])
        assert (metadata["namespace"], "Secret", name) in cluster.others, f"Prepared, yet no Secret {name}"


def _check_backoff(ledger: Ledger, a: TrainingJobStatus, created: list[str], now: datetime) -> None:
    """No pod is created within the base backoff of the failure it replaces: the attempt's last failure for a
    whole-attempt restart, the worker's own for a parameter-server worker replaced alone (another worker's failure
    does not hold it back)."""
    failure = a.last_failure
    assert failure is not None
    alone = failure.attempt == a.attempt and any(r.pod == failure.pod for r in a.replacements)
    if alone and failure.pod not in created:
        return
    since = (now - failure.time).total_seconds()
    assert since >= ledger.backoff_base, f"pods created {since:.1f} s after a failure, within the backoff"


def _check_progress(b: TrainingJobStatus, a: TrainingJobStatus) -> None:
    """The percent is the step's share of the total; only a running job has an estimate, only a Succeeded one a
    result, and a result never changes."""
    progress = a.progress
    if progress is not None:
        total = progress.total_steps
        assert progress.percent == (min(progress.step * 100 // total, 100) if total else None), progress
        if a.phase.is_terminal or a.phase == Phase.SUSPENDED:
            assert progress.estimated_completion_time is None, f"an estimated completion in phase {a.phase}"
    assert (a.result is not None) == (a.phase == Phase.SUCCEEDED), f"result {a.result} in phase {a.phase}"
    if b.phase == Phase.SUCCEEDED:
        assert a.result == b.result, "the result of a Succeeded job changed"
    elif a.result is not None:
        reported = a.progress.step if a.progress else None
        assert a.result.step == reported, "the result's step is not the last reported one"


def _check_history(b: TrainingJobStatus, a: TrainingJobStatus) -> None:
    """The history tells the attempts as they went: in order, each with ordered times, only the current one
    open, a gang restart's attempt ended Failed with its class, and the last failure on record."""
    attempts = a.history.attempts if a.history else []
    numbers = [r.attempt for r in attempts]
    assert numbers == sorted(numbers), f"attempts out of order: {numbers}"
    assert all(r.end_time is not None for r in attempts[:-1]), "an attempt left open before the current one"
    for r in attempts:
        times = [t for t in (r.start_time, r.pods_time, r.running_time, r.end_time) if t is not None]
        assert times == sorted(times), f"attempt {r.attempt}'s times out of order: {r}"
        assert (r.outcome is None) == (r.end_time is None), f"attempt {r.attempt} ended without an outcome"
    stopped = a.phase.is_terminal or a.phase == Phase.SUSPENDED
    if a.attempt > 0 and not stopped:
        assert attempts and attempts[-1].attempt == a.attempt and attempts[-1].end_time is None, (a.attempt, numbers)
    if stopped and attempts:
        assert attempts[-1].end_time is not None, f"attempt {attempts[-1].attempt} open in phase {a.phase}"
    if a.attempt == b.attempt + 1 and _total(a) > _total(b) and a.last_failure is not None:
        ended = [r for r in attempts if r.attempt == b.attempt][-1]  # resumed before it had pods: two records
        assert (ended.outcome, ended.reason) == (AttemptOutcome.FAILED, a.last_failure.failure_class.value), ended
    if a.last_failure is not None:
        last = a.history.failures[-1] if a.history and a.history.failures else None
        assert last is not None and (last.pod, last.time) == (a.last_failure.pod, a.last_failure.time), last


RESIZE_WAIT = Settings().resize_wait_seconds  # the model's operator keeps the default


def resized(b: TrainingJobStatus, a: TrainingJobStatus) -> bool:
    """Whether the pass between them resized an elastic job (each resize records its moment): a new attempt that
    counts no restart (tests/support/model_elastic.py checks the rest)."""
    moment = a.scale.last_resize_time if a.scale is not None else None
    return moment is not None and moment != (b.scale.last_resize_time if b.scale is not None else None)


def _check_transition(
    ledger: Ledger, uid: str, b: TrainingJobStatus, a: TrainingJobStatus, job: Manifest, *, refused: set[str]
) -> None:
    """Restarts only grow, one attempt at a time, each for a failure that happened (a pod its node refused is none:
    `refused`, created again alone, uncounted)."""
    if b.phase.is_terminal:
        assert a.phase == b.phase, f"a finished job moved from {b.phase} to {a.phase}"
    for name, value in a.restarts.model_dump().items():
        assert value >= getattr(b.restarts, name), f"restarts.{name} went down"
    grown, steps = _total(a) - _total(b), a.attempt - b.attempt
    assert steps in (0, 1), f"attempt moved by {steps} in one reconcile"
    if steps == 1:
        assert grown == 1 or (grown == 0 and (b.phase in (Phase.SUSPENDED, Phase.PENDING) or resized(b, a))), (b, a)
    in_place = _check_workers_in_place(ledger, uid, b, a) if steps == 0 else 0
    if a.in_place_restarts > b.in_place_restarts and steps == 1:
        _check_in_place(ledger, uid, b, a)
    elif grown and steps == 1 and a.last_failure and a.last_failure.failure_class != FailureClass.STALLED:
        # A pod that vanished while recorded by name alone leaves no UID in the failure: its record's, resolved.
        culprit = {a.last_failure.pod_uid} if a.last_failure.pod_uid else set()
        if a.last_failure.reason == "Vanished" and not culprit:
            culprit = {t.uid for t in b.tracked_pods if t.name == a.last_failure.pod and t.outcome is None}
        ledger.count(uid, culprit)
        ledger.stats["gang restarts"] += 1
    if b.pods_attempt is not None and a.pods_attempt is None and a.attempt == b.attempt:
        assert grown == 0, "a restart in place that fell back to new pods was counted again"
        ledger.stats["in-place fallbacks"] += 1
    elif grown > in_place and steps == 0:
        assert job["spec"].get("mode") == "ParameterServer", "pods replaced alone outside ParameterServer mode"
        newly = _failed_uids(a, PodOutcome.FAILED) - _failed_uids(b, PodOutcome.FAILED)
        newly |= _failed_uids(b, None) - {t.uid for t in a.tracked_pods}
        newly -= {t.uid for t in b.tracked_pods if t.restarting_since is not None}  # counted when restarted in place
        newly -= refused
        assert len(newly) == grown - in_place, f"{grown - in_place} restarts counted for {len(newly)} pods"
        ledger.count(uid, newly)
        ledger.stats["workers replaced"] += grown - in_place
    policy = job["spec"].get("runPolicy") or {}
    budgeted = a.restarts.retryable + a.restarts.oom + a.restarts.stalled
    assert budgeted <= policy.get("backoffLimit", 3), "restarts beyond backoffLimit"
    assert a.restarts.disruption <= policy.get("disruptionLimit", 100), "restarts beyond disruptionLimit"
    if policy.get("restartPolicy") == "Never":
        assert budgeted == 0, "a restart under restartPolicy Never"


def _check_in_place(ledger: Ledger, uid: str, b: TrainingJobStatus, a: TrainingJobStatus) -> None:
    """A restart in place: one attempt on, counted once, in the same pods, for a trainer that failed or stalled."""
    assert a.in_place_restarts == b.in_place_restarts + 1 and a.attempt == b.attempt + 1, (b, a)
    assert _total(a) == _total(b) + 1, "a restart in place not counted as one restart"
    assert a.current_pods_attempt == b.current_pods_attempt, "a restart in place changed the pods"
    assert a.in_place_restart is not None and a.in_place_restart.attempt == a.attempt, a.in_place_restart
    assert a.last_failure is not None
    if a.last_failure.failure_class != FailureClass.STALLED:
        failed, counted = ledger.trainer_failures.get(uid, set()), ledger.counted_in_place.setdefault(uid, set())
        assert b.attempt in failed, f"attempt {b.attempt} restarted in place though its trainer never failed"
        assert b.attempt not in counted, f"attempt {b.attempt}'s trainer failure counted twice"
        counted.add(b.attempt)
    ledger.stats["in-place restarts"] += 1


def _check_workers_in_place(ledger: Ledger, uid: str, b: TrainingJobStatus, a: TrainingJobStatus) -> int:
    """Parameter-server workers restarted in place (the attempt stays): each a worker whose trainer failed in that
    incarnation, counted once, in the same pod, its next incarnation recorded. How many."""
    before = {t.uid: t.incarnation for t in b.tracked_pods}
    moved = {(t.uid, t.incarnation) for t in a.tracked_pods if t.incarnation and t.incarnation != before.get(t.uid)}
    restarted = a.in_place_restarts - b.in_place_restarts
    assert len(moved) == restarted, f"{restarted} restarts in place for {len(moved)} workers' new incarnations"
    assert _total(a) - _total(b) >= restarted, "a worker's restart in place not counted"
    failed, counted = ledger.worker_failures.get(uid, set()), ledger.counted_workers.setdefault(uid, set())
    for pod, incarnation in moved:
        assert (pod, incarnation - 1) in failed, f"pod {pod} restarted as {incarnation} though no trainer failed"
        assert (pod, incarnation - 1) not in counted, f"pod {pod}'s incarnation {incarnation - 1} counted twice"
        counted.add((pod, incarnation - 1))
    ledger.stats["workers restarted in place"] += restarted
    return restarted


def _check_legitimate(
    ledger: Ledger, uid: str, statuses: tuple[TrainingJobStatus, TrainingJobStatus], job: Manifest, now: datetime
) -> None:
    """A new attempt without a restart only on resuming one that had pods, or on resizing an elastic job (which may
    come before the attempt it leaves made any pod: room returned while it waited out its backoff); a stall only
    after a heartbeat."""
    b, a = statuses
    if a.attempt == b.attempt + 1 and _total(a) == _total(b) and b.attempt > 0 and not resized(b, a):
        assert b.attempt in ledger.attempts_with_pods.get(uid, set()), f"attempt {b.attempt} never had pods"
    if a.restarts.stalled > b.restarts.stalled:
        limit = (job["spec"].get("runPolicy") or {})["progressDeadlineSeconds"]
        progress = a.progress if a.progress and a.progress.attempt == b.attempt else None
        heard = (progress.last_change_time or progress.last_heartbeat_time) if progress else None  # operator's clock
        assert heard is not None and heard + timedelta(seconds=limit) <= now, "a stall without a heartbeat"


def _check_settled(
    b: TrainingJobStatus, a: TrainingJobStatus, job: Manifest, pods: list[Manifest], now: datetime
) -> None:
    """After a reconcile that ran to its end: nothing left undecided, deadlines kept, status true to the pods."""
    policy = job["spec"].get("runPolicy") or {}
    if a.phase.is_terminal:
        assert a.completion_time is not None
        return
    assert (a.phase == Phase.SUSPENDED) == bool(policy.get("suspend")), f"phase {a.phase}, suspend {policy}"
    if a.phase == Phase.SUSPENDED:
        return
    states = [
        s for p in pods if (s := pod_state(p, CONTAINER_NAME)) is not None and s.attempt == a.current_pods_attempt
    ]
    if a.attempt == b.attempt:
        counted = _failed_uids(a, PodOutcome.FAILED)
        left = [
            s for s in states if (s.has_failed or s.deleting) and s.phase != PodPhase.SUCCEEDED and s.uid not in counted
        ]
        assert not left or _awaiting_cause(left, states, now), f"failures left uncounted: {[s.name for s in left]}"
        gone = (_failed_uids(b, None) - {s.uid for s in states}) & _failed_uids(a, None)
        assert not gone, f"vanished pods left uncounted: {gone}"
        limit, lifted = timedelta(seconds=policy.get("startupDeadlineSeconds", 1800)), gates.lifted_at(a)
        late = [  # (held by another controller's gate: its wait; counted from when the operator saw it lifted)
            s.name
            for s in states
            if not (s.deleting or s.is_up or s.has_failed or s.is_finished or any(h.held_by for h in states))
            and not _waits_for_room(job, s)
            and not _elastic_wait(job, states, now)
            and s.created
            and max(s.created, lifted or s.created) <= now - limit
        ]
        assert not late, f"pods past the startup deadline in a running job: {late}"
        created = next((c for c in b.conditions if c.type == ConditionType.CREATED), None)
        missing = len({(s.replica.role, s.replica.index) for s in states}) < _slot_count(job)
        if missing and created is not None and created.status == "False" and created.reason in (REFUSED, NAME_IN_USE):
            assert created.last_transition_time > now - limit, "refused creations past the startup deadline"
    active = policy.get("activeDeadlineSeconds")
    if active is not None and a.start_time is not None:
        used = (now - a.start_time).total_seconds() - a.suspended_seconds
        assert used < active, f"active {used:.0f} s past activeDeadlineSeconds {active}"
    workers = [s for s in states if s.replica.role == "worker" and not s.deleting]
    assert a.workers.active == sum(not s.is_finished for s in workers), "status.workers.active is not the pods'"


def _waits_for_room(job: Manifest, state: PodState) -> bool:
    """A parameter-server worker beyond minReplicas that the scheduler cannot place: it waits without a deadline."""
    fewest = job["spec"]["workers"].get("minReplicas")
    return (
        job["spec"].get("mode") == "ParameterServer"
        and fewest is not None
        and state.replica.role == "worker"
        and state.replica.index >= fewest
        and not state.node
        and bool(state.unschedulable)
    )


def _elastic_wait(job: Manifest, states: list[PodState], now: datetime) -> bool:
    """An elastic DDP job's gang waits resizeWaitSeconds for room from when the first of its unplaced workers was
    called unschedulable: its startup deadline does not count meanwhile (then it shrinks, or the deadline counts)."""
    workers = job["spec"]["workers"]
    elastic = workers.get("minReplicas", workers["replicas"]) < workers["replicas"]
    if job["spec"].get("mode", "DDP") != "DDP" or not elastic:
        return False
    since = [s.unschedulable_since or s.created for s in states if s.unschedulable and not s.node and not s.deleting]
    first = min((t for t in since if t is not None), default=None)
    return first is not None and now < first + timedelta(seconds=RESIZE_WAIT)


def _awaiting_cause(left: list[PodState], states: list[PodState], now: datetime) -> bool:
    """Uncounted failures the operator may still hold: ranks that all exited 75 (a peer was lost) while another pod
    runs, less than PEER_LOST_WAIT_SECONDS after the first of them ended (the rank that died may show a moment
    later)."""
    if not all(s.exit_code == 75 and not s.disrupted and s.finished_at is not None for s in left):
        return False
    names = {s.name for s in left}
    if not any(s.phase == PodPhase.RUNNING and not s.deleting for s in states if s.name not in names):
        return False
    first = min(s.finished_at for s in left if s.finished_at is not None)
    return timedelta(0) <= now - first < timedelta(seconds=PEER_LOST_WAIT_SECONDS)


def _check_cleared(a: TrainingJobStatus, pods: list[Manifest]) -> None:
    """After a reconcile that ran to its end, every pod of an earlier attempt and every counted failure is going."""
    if a.phase.is_terminal or a.phase == Phase.SUSPENDED:
        return
    counted = _failed_uids(a, PodOutcome.FAILED)
    states = [s for p in pods if (s := pod_state(p, CONTAINER_NAME)) is not None]
    left = [s.name for s in states if not s.deleting and (s.attempt != a.current_pods_attempt or s.uid in counted)]
    assert not left, f"pods an earlier attempt or a counted failure left standing: {left}"


def _check_nothing_vanishes_untracked(cluster: FakeCluster) -> None:
    """A pod of a job's current attempt may go (it holds neither the tracking finalizer nor an earlier operator's
    tracking gate) only once the job's status names it, or once the job is finished or suspended: so no pod can
    run, fail and vanish without the operator having a record of it."""
    statuses = {job["metadata"]["uid"]: _resolved(job, cluster) for job in cluster.jobs.values()}
    for pod in cluster.pods.values():
        status = statuses.get(controller_uid(pod))
        state = pod_state(pod, CONTAINER_NAME)
        if status is None or state is None or state.gated or state.held or state.attempt != status.current_pods_attempt:
            continue
        if status.phase.is_terminal or status.phase == Phase.SUSPENDED:
            continue
        assert state.uid in {t.uid for t in status.tracked_pods}, f"{state.name} may vanish untracked"


def workers_now(job: Manifest) -> int:
    """The workers the job's attempt runs with: status.scale.current once an elastic job was resized, else
    spec.workers.replicas (the test's own reading of what children/specs.worker_count does)."""
    scale = job_status(job).scale
    return scale.current if scale is not None and scale.current >= 1 else int(job["spec"]["workers"]["replicas"])


def _slot_count(job: Manifest) -> int:
    """The attempt's pods: its workers and servers."""
    return workers_now(job) + int((job["spec"].get("parameterServers") or {}).get("replicas", 0))


def _check_not_premature(
    b: TrainingJobStatus, a: TrainingJobStatus, job: Manifest, pods: list[Manifest], now: datetime, *, stuck: float
) -> None:
    """A deadline fails a job only when it has really passed."""
    policy = job["spec"].get("runPolicy") or {}
    reason = next((c.reason for c in a.conditions if c.type == ConditionType.FAILED and c.status == "True"), "")
    if reason == "StartupDeadlineExceeded":
        limit = timedelta(seconds=policy.get("startupDeadlineSeconds", 1800))
        states = [
            s for p in pods if (s := pod_state(p, CONTAINER_NAME)) is not None and s.attempt == b.current_pods_attempt
        ]
        waiting = [
            s
            for s in states
            if not s.is_up and not s.deleting and not s.has_failed and s.created and s.created <= now - limit
        ]
        created = next((c for c in b.conditions if c.type == ConditionType.CREATED), None)
        refused = created is not None and created.reason in (REFUSED, NAME_IN_USE) and created.status == "False"
        # A pod that does not go (still there `stuck` seconds after its grace period) counts from then.
        held = [
            s
            for p in pods
            if (s := pod_state(p, CONTAINER_NAME)) is not None
            and s.deleting_since is not None
            and s.deleting_since + timedelta(seconds=stuck) <= now - limit
        ]
        # A node refused to admit a slot's pod (its re-creations since too): counted from the first refusal.
        refusals = [r.refused.since for r in b.replacements if r.refused is not None]
        # An object the pods need (Secret, Service, NetworkPolicy) refused: Prepared False since then.
        prepared = next((c for c in b.conditions if c.type == ConditionType.PREPARED), None)
        unprepared = prepared is not None and prepared.status == "False" and prepared.reason.endswith("CreateRefused")
        assert (
            waiting
            or held
            or any(since <= now - limit for since in refusals)
            or (refused and created is not None and created.last_transition_time <= now - limit)
            or (unprepared and prepared is not None and prepared.last_transition_time <= now - limit)
        ), "failed for a startup deadline that had not passed"
    if reason == "DeadlineExceeded":
        assert b.start_time is not None
        used = (now - b.start_time).total_seconds() - b.suspended_seconds
        assert used >= policy["activeDeadlineSeconds"], "failed for an active deadline that had not passed"


def check_cluster(ledger: Ledger, cluster: FakeCluster) -> None:
    ledger.stats["steps"] += 1
    restarted_in = {job["metadata"]["uid"]: job_status(job) for job in cluster.jobs.values()}
    for pod in cluster.pods.values():
        attempt, owner = int(pod["metadata"]["labels"]["trainingjob.io/attempt"]), controller_uid(pod)
        ledger.attempts_with_pods.setdefault(owner, set()).add(attempt)
        status = restarted_in.get(owner)
        if status is not None and status.pods_attempt == attempt:  # a later attempt runs in them (in place)
            ledger.attempts_with_pods[owner].add(status.attempt)
    _check_nothing_vanishes_untracked(cluster)
    slots: Counter[tuple[str, str, str]] = Counter()
    for pod in cluster.pods.values():
        labels: Mapping[str, str] = pod["metadata"]["labels"]
        owner = controller_uid(pod)
        slots[owner, labels["trainingjob.io/role"], labels["trainingjob.io/replica-index"]] += 1
        if owner in ledger.finished:
            assert pod["metadata"]["uid"] in ledger.finished[owner], f"a finished job got pod {pod['metadata']['name']}"
    doubled = [slot for slot, count in slots.items() if count > 1]
    assert not doubled, f"more than one pod for one replica: {doubled}"
