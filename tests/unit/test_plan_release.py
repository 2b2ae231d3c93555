"""Letting go of pods (plan/release.py): a pod's tracking finalizer goes only once the status written first no longer
needs the pod, at once for the pods the plan deletes, and for a gone job's pods as they are deleted."""

from typing import Any

import pytest
from tests.support.builders import T0, at, make_job, pod, pods_of, running, step, with_policy

from trainingjob.children.naming import Replica
from trainingjob.model import PodOutcome
from trainingjob.plan.release import orphans

pytestmark = pytest.mark.fast

W0, W1 = "job-worker-0-1", "job-worker-1-1"


@pytest.mark.parametrize(
    ("overrides", "let_go"),
    [
        pytest.param({}, [], id="running-kept"),
        pytest.param({W1: {"phase": "Pending"}}, [], id="pending-kept"),
        pytest.param({W1: {"phase": "Failed", "exit_code": 1}}, [W0, W1], id="failed-restart-lets-all-go"),
        pytest.param({W1: {"phase": "Succeeded", "exit_code": 0}}, [W1], id="succeeded-recorded"),
        pytest.param(
            {W0: {"phase": "Succeeded", "exit_code": 0}, W1: {"phase": "Succeeded", "exit_code": 0}},
            [W0, W1],
            id="all-succeeded-job-finished",
        ),
        pytest.param({W1: {"deleting": T0}}, [W0, W1], id="deleted-by-someone-counted-then-let-go"),
    ],
)
def test_a_pod_is_let_go_of_once_the_status_records_how_it_ended(overrides: dict[str, Any], let_go: list[str]) -> None:
    job = running()
    _, result = step(job, pods_of(job, 1, overrides), at(5))
    assert sorted(result.release) == let_go


def test_a_failure_awaiting_its_root_cause_keeps_its_pod() -> None:
    """A rank that exited 75 (a peer was lost) while the others run: the failure is not counted yet, so its pod may
    not go."""
    job = running(workers=3)
    finished = at(4)
    pods = pods_of(job, 1, {W1: {"phase": "Failed", "exit_code": 75, "finished": finished}})
    after, result = step(job, pods, at(5))
    assert after.status is not None and job.status is not None
    assert after.status.restarts == job.status.restarts and result.requeue_after is not None
    assert result.release == ()


def test_a_parameter_server_worker_replaced_alone_is_let_go_of_with_its_delete() -> None:
    job = running(mode="ParameterServer", servers=1)
    failed = pods_of(job, 1, {W1: {"phase": "Failed", "exit_code": 1}})
    after, result = step(job, failed, at(5))
    assert after.status is not None
    assert {t.uid: t.outcome for t in after.status.tracked_pods}["uid-worker-1-1"] == PodOutcome.FAILED
    assert result.delete == (W1,) and result.release == (W1,)


def test_an_untracked_pod_that_ended_is_kept_until_the_pass_that_records_it() -> None:
    """Created, its answer lost, and failed before the operator saw it: the status does not name it yet."""
    job, _ = step(make_job(), [])
    pods = pods_of(job, 1, {W1: {"phase": "Failed", "exit_code": 1}})
    assert job.status is not None and not job.status.tracked_pods
    after, result = step(job, pods, at(5))
    assert after.status is not None and after.status.restarts.retryable == 1 and W1 in result.release


def test_a_suspended_job_lets_go_of_its_pods() -> None:
    job = with_policy(running(), suspend=True)
    _, result = step(job, pods_of(job, 1, {W1: {"deleting": T0}}), at(5))
    assert result.delete == (W0,) and sorted(result.release) == [W0, W1]


def test_an_earlier_operators_pods_have_no_finalizer_to_let_go_of() -> None:
    job = running()
    pods = pods_of(job, 1, {W1: {"phase": "Failed", "exit_code": 1, "gated": True}})
    del pods[0]["metadata"]["finalizers"]
    _, result = step(job, pods, at(5))
    assert result.delete == (W0, W1) and result.release == ()


@pytest.mark.parametrize(
    ("job_uid", "deleting", "owner", "let_go"),
    [
        pytest.param(None, True, None, ["job-worker-0-1"], id="job-gone-pod-deleted"),
        pytest.param(None, False, None, [], id="job-gone-pod-not-yet-deleted"),
        pytest.param("job-uid", True, None, [], id="the-jobs-own-pod-is-the-plans"),
        pytest.param("new-uid", True, None, ["job-worker-0-1"], id="a-namesakes-pod"),
        pytest.param("job-uid", True, "other", ["job-worker-0-1"], id="owned-by-another"),
    ],
)
def test_orphans_are_let_go_of_once_deleted(
    job_uid: str | None, deleting: bool, owner: str | None, let_go: list[str]
) -> None:
    manifest = pod(make_job(), Replica("worker", 0), 1, deleting=T0 if deleting else None, owner=owner)
    assert sorted(orphans([manifest], job_uid)) == let_go


def test_a_pod_without_the_finalizer_is_no_orphan_to_let_go_of() -> None:
    manifest = pod(make_job(), Replica("worker", 0), 1, deleting=T0)
    del manifest["metadata"]["finalizers"]
    assert orphans([manifest], None) == {}
