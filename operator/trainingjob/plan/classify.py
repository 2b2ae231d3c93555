"""Pure failure policy: classify a failed pod, pick an attempt's root cause, and decide restart or fail."""

from dataclasses import dataclass
from datetime import UTC, datetime

from trainingjob.children.contract import ExitCode
from trainingjob.children.observe import PodState
from trainingjob.model import FailureClass, LastFailure, RestartCounts, RestartPolicy, RunPolicy
from trainingjob.model.values import CONSEQUENCES_LENGTH

# Most telling first: a configuration error explains the rest; a preemption explains peers that then crashed.
_PRECEDENCE = (FailureClass.PERMANENT, FailureClass.DISRUPTION, FailureClass.OOM, FailureClass.RETRYABLE)
TRAINER_FAILED = "TrainerFailed"  # the trainer failed in a healthy pod (its agent said so: plan/in_place.py)
_COUNTER = {
    FailureClass.RETRYABLE: "retryable",
    FailureClass.OOM: "oom",
    FailureClass.DISRUPTION: "disruption",
    FailureClass.STALLED: "stalled",
}


def classify(pod: PodState, policy: RunPolicy) -> FailureClass:
    """Over its own limits is the job's doing (retryable); pushed out by the cluster is a disruption (as is a pod
    refused by a node's kubelet that had started: one that never did is plan/refused.py's, and no failure)."""
    if pod.over_own_limit:
        return FailureClass.RETRYABLE
    if pod.disrupted or pod.refused_by_node or pod.exit_code == ExitCode.PREEMPTED:
        return FailureClass.DISRUPTION
    if pod.reason == "OOMKilled":
        return FailureClass.OOM
    if pod.exit_code is not None and pod.exit_code in policy.effective_permanent_exit_codes:
        return FailureClass.PERMANENT
    return FailureClass.RETRYABLE


def peer_lost(pod: PodState) -> bool:
    """Whether the pod's trainer gave up on a lost peer: it exited RETRYABLE (75), what a rank exits when a peer died
    or the network broke under it. Among ranks that failed together it is a consequence, not the cause."""
    return pod.exit_code == ExitCode.RETRYABLE and not pod.disrupted


def root_cause(pods: list[PodState], policy: RunPolicy) -> tuple[FailureClass, PodState]:
    """The failure that explains an attempt's end: by class precedence, then a rank that did not just lose a peer,
    then the first to end (finishedAt), then replica."""
    latest = datetime.max.replace(tzinfo=UTC)
    ranked = sorted(
        pods,
        key=lambda p: (_PRECEDENCE.index(classify(p, policy)), peer_lost(p), p.finished_at or latest, p.replica),
    )
    return classify(ranked[0], policy), ranked[0]


def consequences(pods: list[PodState], culprit: PodState) -> str:
    """The other ranks that failed with the root cause, in words: 'worker-0 exited 75 because a peer was lost;
    worker-2 was disrupted (Evicted)'. Ranks that ended the same way are named together (the first few, then how
    many more), so a large gang's consequences stay one short sentence. "" when the culprit failed alone."""
    grouped: dict[str, list[str]] = {}
    for pod in sorted(pods, key=lambda p: p.replica):
        if pod != culprit:
            grouped.setdefault(_outcome(pod), []).append(f"{pod.replica.role}-{pod.replica.index}")
    return "; ".join(f"{_names(names)} {outcome}" for outcome, names in grouped.items())


def _outcome(pod: PodState) -> str:
    if peer_lost(pod):
        return f"exited {pod.exit_code} because a peer was lost"
    if pod.exit_code is not None:
        return f"exited {pod.exit_code}" + (f" ({pod.reason})" if pod.reason else "")
    return ("was disrupted" if pod.disrupted or pod.deleting else "failed") + (f" ({pod.reason})" if pod.reason else "")


def _names(names: list[str], shown: int = 5) -> str:
    if len(names) == 1:
        return names[0]
    if len(names) > shown:
        return f"{', '.join(names[:shown])} and {len(names) - shown} more"
    return f"{', '.join(names[:-1])} and {names[-1]}"


def with_consequences(what: str, others: str) -> str:
    """A failure's sentence fragment with the ranks that failed because of it."""
    return f"{what}, and then {others}" if others else what


def budget_used(restarts: RestartCounts) -> int:
    """Restarts that count against backoffLimit: the job's own failures."""
    return restarts.retryable + restarts.oom + restarts.stalled


def counted(restarts: RestartCounts, failure: FailureClass) -> RestartCounts:
    """Restart counts with one more restart of this class."""
    name = _COUNTER[failure]
    return restarts.model_copy(update={name: getattr(restarts, name) + 1})


@dataclass(frozen=True)
class Verdict:
    """Restart (with the reason) or fail the job (with the condition reason and message)."""

    restart: bool
    reason: str
    message: str


def decide(failure: FailureClass, restarts: RestartCounts, policy: RunPolicy, what: str) -> Verdict:
    """What to do after `failure`; `what` describes the failure in a sentence fragment."""
    if failure == FailureClass.PERMANENT:
        return Verdict(False, "PermanentFailure", f"{what}; the exit code is permanent, so the job is not restarted.")
    if failure == FailureClass.DISRUPTION:
        if restarts.disruption >= policy.disruption_limit:
            return Verdict(
                False,
                "DisruptionLimitExceeded",
                f"{what}; the job was disrupted {restarts.disruption} times, its disruptionLimit.",
            )
        return Verdict(True, "Disrupted", f"{what}; disruptions do not count against backoffLimit.")
    if policy.restart_policy == RestartPolicy.NEVER:
        return Verdict(False, "RestartPolicyNever", f"{what}; restartPolicy is Never.")
    if budget_used(restarts) >= policy.backoff_limit:
        return Verdict(
            False,
            "BackoffLimitExceeded",
            f"{what}; the job has restarted {budget_used(restarts)} times, its backoffLimit.",
        )
    reason = {FailureClass.OOM: "OOMKilled", FailureClass.STALLED: "Stalled"}.get(failure, "RetryableFailure")
    return Verdict(True, reason, f"{what}.")


def describe(pod: PodState) -> str:
    """A sentence fragment naming the pod and how it ended."""
    parts = [f"the trainer in pod {pod.name}" if pod.reason == TRAINER_FAILED else f"pod {pod.name}"]
    if pod.exit_code is not None:
        parts.append(f"exited with code {pod.exit_code}")
    elif pod.refused_by_node:
        parts.append(f"was refused by node {pod.node or '(unknown)'}")
    elif pod.disrupted or pod.deleting:
        parts.append("was disrupted")
    else:
        parts.append("failed")
    if pod.reason:
        parts.append(f"({pod.reason}{': ' + pod.message if pod.message else ''})")
    return " ".join(parts)


def last_failure(pod: PodState, failure: FailureClass, now: datetime, attempt: int, others: str = "") -> LastFailure:
    """The evidence kept in status: every field replaced, so nothing of an earlier failure lingers. `attempt` is the
    job's (a pod restarted in place runs a later attempt than the one it was created for); `others`: the ranks that
    failed because of it (consequences())."""
    return LastFailure(
        pod=pod.name,
        pod_uid=pod.uid or None,
        attempt=max(attempt, 1),
        failure_class=failure,
        exit_code=pod.exit_code,
        reason=pod.reason or ("Disrupted" if failure == FailureClass.DISRUPTION else "Error"),
        message=pod.message,
        log_tail=pod.log_tail,
        consequences=others[:CONSEQUENCES_LENGTH],
        time=now,
    )
