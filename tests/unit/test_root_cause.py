"""Several ranks failing together: the status names the root cause (a rank that did not just lose a peer, then the
first to die) and the others as its consequences, in the last failure, its Event, the condition and the history the
timeline draws."""

from typing import Any

import pytest
from tests.support.builders import at, pods_of, running, step

from trainingjob.children import timeline
from trainingjob.children.agent import Gang, GangState, RankFailure
from trainingjob.model import Phase
from trainingjob.plan.failure import PEER_LOST_WAIT_SECONDS

pytestmark = pytest.mark.fast

LOST = "exited 75 because a peer was lost"


def _ended(code: int, second: float, reason: str = "") -> dict[str, Any]:
    return {"phase": "Failed", "exit_code": code, "finished": at(second), **({"reason": reason} if reason else {})}


@pytest.mark.parametrize(
    ("endings", "culprit", "code", "consequences"),
    [
        (
            {"job-worker-1-1": _ended(137, 10), "job-worker-0-1": _ended(75, 10)},
            "job-worker-1-1",
            137,
            f"worker-0 {LOST}",
        ),
        (
            {"job-worker-1-1": _ended(137, 10), "job-worker-0-1": _ended(75, 7)},
            "job-worker-1-1",
            137,
            f"worker-0 {LOST}",
        ),
        (
            {"job-worker-2-1": _ended(137, 12, "OOMKilled"), "job-worker-0-1": _ended(75, 10)}
            | {"job-worker-1-1": _ended(75, 10)},
            "job-worker-2-1",
            137,
            f"worker-0 and worker-1 {LOST}",
        ),
        (
            {"job-worker-0-1": _ended(75, 11), "job-worker-2-1": _ended(75, 10)},
            "job-worker-2-1",
            75,
            f"worker-0 {LOST}",
        ),
        ({"job-worker-1-1": _ended(137, 10)}, "job-worker-1-1", 137, ""),
    ],
    ids=["killed-and-peer-same-second", "peer-on-a-node-clock-behind", "oom-then-peers", "only-lost-peers", "alone"],
)
def test_the_root_cause_is_named_and_the_others_are_its_consequences(
    endings: dict[str, dict[str, Any]], culprit: str, code: int, consequences: str
) -> None:
    job = running(workers=3)
    job, result = step(job, pods_of(job, 1, endings), at(30))
    assert (
        job.status
        and job.status.phase == Phase.RESTARTING
        and job.status.restarts.retryable + job.status.restarts.oom == 1
    )
    last = job.status.last_failure
    assert last and (last.pod, last.exit_code, last.consequences) == (culprit, code, consequences)
    said = [e.message for e in result.events if e.reason in ("RetryableFailure", "OOMKilled")]
    assert len(said) == 1 and f"pod {culprit} exited with code {code}" in said[0] and consequences in said[0]
    assert job.status.history and job.status.history.failures[-1].consequences == consequences
    marks = [m.label for m in timeline.build(job.to_manifest(), [], at(31)).marks if m.kind == "failure"]
    assert marks == [
        f"{culprit}: {last.failure_class.value} exit {code} {last.reason}"
        + (f"; then {consequences}" if consequences else "")
    ]


def test_a_lost_peer_waits_a_moment_for_the_rank_that_died() -> None:
    job = running(workers=3)
    noticed = {"job-worker-0-1": _ended(75, 10)}
    job, result = step(job, pods_of(job, 1, noticed), at(12))
    assert job.status and job.status.attempt == 1 and job.status.last_failure is None
    assert result.requeue_after is not None and 0 < result.requeue_after <= PEER_LOST_WAIT_SECONDS - 2
    job, _ = step(job, pods_of(job, 1, noticed | {"job-worker-1-1": _ended(137, 10)}), at(13))
    assert job.status and job.status.attempt == 2 and job.status.last_failure
    assert (job.status.last_failure.pod, job.status.last_failure.consequences) == ("job-worker-1-1", f"worker-0 {LOST}")


@pytest.mark.parametrize(
    ("finished", "now"),
    [(10, 10 + PEER_LOST_WAIT_SECONDS), (40, 12)],
    ids=["waited-long-enough", "node-clock-ahead"],
)
def test_a_lost_peer_alone_is_the_cause_once_the_wait_is_over(finished: float, now: float) -> None:
    job = running(workers=3)
    job, _ = step(job, pods_of(job, 1, {"job-worker-0-1": _ended(75, finished)}), at(now))
    assert job.status and job.status.attempt == 2 and job.status.last_failure
    assert (job.status.last_failure.pod, job.status.last_failure.consequences) == ("job-worker-0-1", "")


def test_a_gang_restarting_in_place_names_the_rank_that_died_and_the_peer_that_noticed() -> None:
    job = running(workers=3)
    failures = (RankFailure(0, 75, at(11).timestamp()), RankFailure(2, 137, at(11).timestamp()))
    gang = Gang(attempt=1, state=GangState.FAILED, pods=3, running=0, failures=failures)
    job, result = step(job, pods_of(job, 1), at(12), gang=gang)
    assert job.status and job.status.in_place_restarts == 1 and job.status.last_failure
    last = job.status.last_failure
    assert (last.pod, last.exit_code, last.consequences) == ("job-worker-2-1", 137, f"worker-0 {LOST}")
    assert any(f"worker-0 {LOST}" in e.message for e in result.events if e.reason == "RetryableFailure")


def test_a_gang_whose_rank_0_lost_its_peer_waits_for_the_pod_that_died_then_restarts_once_with_new_pods() -> None:
    job = running(workers=3)
    gang = Gang(
        attempt=1, state=GangState.FAILED, pods=3, running=0, failures=(RankFailure(0, 75, at(11).timestamp()),)
    )
    job, result = step(job, pods_of(job, 1), at(12), gang=gang)
    assert job.status and job.status.attempt == 1 and job.status.in_place_restart is None and result.requeue_after
    died = {"job-worker-1-1": _ended(137, 11)}
    job, result = step(job, pods_of(job, 1, died), at(13), gang=gang)
    assert job.status and (job.status.attempt, job.status.in_place_restarts, job.status.restarts.retryable) == (2, 0, 1)
    last = job.status.last_failure
    assert last and (last.pod, last.exit_code, last.consequences) == ("job-worker-1-1", 137, f"worker-0 {LOST}")
    assert set(result.delete) == {"job-worker-0-1", "job-worker-1-1", "job-worker-2-1"}
