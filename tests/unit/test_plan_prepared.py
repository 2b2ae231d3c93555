"""The objects a job's pods need (its Service, key Secret and NetworkPolicy) before its pods: a refusal of one is a
Prepared condition of its own that names the object and quotes the apiserver, announced once per cause, retried
with a growing delay and counted by the startup deadline; a job whose Service is missing is never called Running."""

from typing import Any

import pytest
from tests.support.builders import at, condition, created_names, make_job, pods_of, step

from trainingjob.model import Phase, TrainingJob
from trainingjob.plan.waves import Refusal, after_wave

pytestmark = pytest.mark.fast

SECRET = Refusal("job-key-jobuid", 403, 'secrets "job-key-jobuid" is forbidden: exceeded quota: count', "Secret")
SERVICE = Refusal("job", 403, 'services "job" is forbidden: Services are refused here', "Service")
POLICY = Refusal("job-ingress-jobuid", 403, "NetworkPolicies are refused here", "NetworkPolicy")


def refused_once(refusal: Refusal, seconds: float = 0, *, job: TrainingJob | None = None) -> tuple[TrainingJob, Any]:
    """A new job whose first pass met `refusal` when it sent the objects its pods need (at `seconds`)."""
    if job is None:
        job, _ = step(make_job(), [], service=False)
    assert job.status is not None
    decided = after_wave(job.status, {}, [refusal], at(seconds), 1, prepared_sent=True)
    return job.model_copy(update={"status": decided.status}), decided.event


@pytest.mark.parametrize(
    ("refusal", "reason"),
    [
        pytest.param(SECRET, "SecretCreateRefused", id="key-secret"),
        pytest.param(SERVICE, "ServiceCreateRefused", id="service"),
        pytest.param(POLICY, "NetworkPolicyCreateRefused", id="network-policy"),
    ],
)
def test_a_refused_object_is_a_condition_of_its_own_naming_it_and_quoting_the_apiserver(
    refusal: Refusal, reason: str
) -> None:
    job, event = refused_once(refusal)
    prepared = condition(job, "Prepared")
    assert (prepared.status, prepared.reason) == ("False", reason)
    assert f"{refusal.kind} {refusal.name} was refused (403)" in prepared.message
    assert refusal.message in prepared.message
    assert event is not None and (event.type, event.reason) == ("Warning", reason)
    assert condition(job, "Created").reason == "CreatingPods"  # the pods' own condition does not flip


def test_a_refusal_is_announced_once_per_cause_not_on_every_retry() -> None:
    job, first = refused_once(SECRET)
    job, again = refused_once(SECRET, 10, job=job)
    assert first is not None and again is None
    job, other = refused_once(SERVICE, 30, job=job)
    assert other is not None and other.reason == "ServiceCreateRefused"
    assert job.status
    done = after_wave(job.status, {"job-worker-0-1": "u0"}, [], at(60), 1, prepared_sent=True)
    assert done.event is None and condition(job.model_copy(update={"status": done.status}), "Prepared").status == "True"


def test_no_pod_nor_object_is_sent_again_before_the_retry_delay_which_grows() -> None:
    job, _ = refused_once(SECRET)
    job, result = step(job, [], at(9), service=False)  # the base delay is 10 s
    assert not result.create and result.requeue_after == pytest.approx(1)
    job, result = step(job, [], at(10), service=False)
    assert [m["kind"] for m in result.create] == ["Service", "Secret", "NetworkPolicy", "Pod", "Pod"]
    job, _ = refused_once(SECRET, 30, job=job)  # refused for 30 s now: the next try waits 30 s
    job, result = step(job, [], at(59), service=False)
    assert not result.create
    job, result = step(job, [], at(60), service=False)
    assert created_names(result) == ["job-worker-0-1", "job-worker-1-1"]


def test_the_running_condition_says_what_the_pods_wait_for() -> None:
    job, _ = refused_once(SECRET)
    job, _ = step(job, [], at(1), service=False)
    running = condition(job, "Running")
    assert running.status == "False"
    assert "job-worker-0-1: not created: Creating Secret job-key-jobuid" in running.message


def test_a_refused_object_counts_against_the_startup_deadline() -> None:
    job, _ = step(make_job(startupDeadlineSeconds=60), [], service=False)
    job, _ = refused_once(SECRET, job=job)
    job, result = step(job, [], at(59), service=False)
    assert job.status and job.status.phase == Phase.PENDING
    job, result = step(job, [], at(60), service=False)
    assert job.status and job.status.phase == Phase.FAILED and not result.create
    failed = condition(job, "Failed")
    assert failed.reason == "StartupDeadlineExceeded" and "Secret job-key-jobuid was refused" in failed.message


def test_a_job_whose_service_is_missing_is_not_running_and_the_service_is_retried_with_the_delay() -> None:
    job, _ = step(make_job(), [], service=False)
    job, _ = step(job, pods_of(job, 1, phase="Pending"), at(1), service=False)
    job, _ = refused_once(SERVICE, 2, job=job)
    job, result = step(job, pods_of(job, 1), at(5), service=False)
    assert job.status and job.status.phase == Phase.PENDING and not result.create
    running = condition(job, "Running")
    assert (running.status, running.reason) == ("False", "ServiceMissing") and SERVICE.message in running.message
    assert result.requeue_after == pytest.approx(7)
    job, result = step(job, pods_of(job, 1), at(12), service=False)
    # not Prepared yet: what the pods need goes together (the key's name is the job's own), so that Prepared, once
    # recorded, says the key exists whatever was refused before
    assert [m["kind"] for m in result.create] == ["Service", "Secret", "NetworkPolicy"]
    job, _ = step(job, pods_of(job, 1), at(13))
    assert job.status and job.status.phase == Phase.RUNNING


@pytest.mark.parametrize(
    ("prepared", "kinds"),
    [
        pytest.param(True, ["Service"], id="prepared-sends-the-service-alone"),
        pytest.param(False, ["Service", "Secret", "NetworkPolicy"], id="not-prepared-sends-the-key-with-it"),
    ],
)
def test_a_missing_service_goes_with_the_key_until_the_job_is_prepared(prepared: bool, kinds: list[str]) -> None:
    job, _ = step(make_job(), [])
    if prepared:
        assert job.status
        job = job.model_copy(update={"status": after_wave(job.status, {}, [], at(0), 1, prepared_sent=True).status})
    job, result = step(job, pods_of(job, 1), at(1), service=False)
    assert [m["kind"] for m in result.create] == kinds


def test_a_running_job_that_loses_its_service_says_so() -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1), at(1))
    job, _ = refused_once(SERVICE, 2, job=job)
    job, _ = step(job, pods_of(job, 1), at(3), service=False)
    running = condition(job, "Running")
    assert running.reason == "ReplacingService" and "the job's Service is missing" in running.message


@pytest.mark.parametrize(
    ("prepared", "kinds"),
    [
        pytest.param(False, ["Secret", "NetworkPolicy", "Pod", "Pod"], id="refused-before-sent-again"),
        pytest.param(True, ["Pod", "Pod"], id="created-not-sent-again"),
    ],
)
def test_the_key_and_policy_are_sent_until_they_were_created(prepared: bool, kinds: list[str]) -> None:
    """A namespace at its Secret quota refuses a create even of a name that exists, so once the key and the policy
    were created the pods of later waves (restarts, replacements) go without them."""
    job, _ = refused_once(SECRET)
    assert job.status is not None
    if prepared:
        done = after_wave(job.status, {}, [], at(5), 1, prepared_sent=True)
        job = job.model_copy(update={"status": done.status})
    _, result = step(job, [], at(60))
    assert [m["kind"] for m in result.create] == kinds
