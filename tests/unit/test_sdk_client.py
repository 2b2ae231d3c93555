"""The SDK's Client over a fake transport: what `wait` raises and when (JobFailed, JobFinished, WaitTimeout only at
the deadline, an ended watch), which `until` it accepts, create_all checking every document first and saying what
it created before a refusal, and which cluster `connect` picks."""

import copy
from pathlib import Path
from typing import Any

import pytest
from tests.support.builders import job_manifest
from tests.support.fake_jobs import FakeJobs

from trainingjob.model import Phase, TrainingJob
from trainingjob_sdk import (
    Client,
    Conflict,
    Invalid,
    JobFailed,
    JobFinished,
    KubeJobs,
    RestJobs,
    TrainingJobError,
    Unavailable,
    WaitTimeout,
    connect,
)

pytestmark = pytest.mark.fast

Manifest = dict[str, Any]
Manifests = list[Manifest]  # a name for a class with a method called list


def phase(value: str, attempt: int = 1) -> Manifest:
    return {"phase": value, "attempt": attempt}


@pytest.mark.parametrize(
    ("statuses", "until", "options", "outcome"),
    [
        pytest.param([phase("Running"), phase("Succeeded")], None, {}, "Succeeded", id="finished by default"),
        pytest.param([phase("Running")], "Running", {}, "Running", id="a phase reached"),
        pytest.param([phase("Failed")], None, {}, JobFailed, id="failed, by default"),
        pytest.param([phase("Failed")], None, {"fail_on_failed": False}, "Failed", id="failed, allowed"),
        pytest.param([phase("Failed")], "Failed", {}, "Failed", id="failed, waited for"),
        pytest.param([phase("Failed")], "Running", {}, JobFailed, id="failed before running"),
        pytest.param([phase("Failed")], "Running", {"fail_on_failed": False}, JobFinished, id="failed, not raised"),
        pytest.param([phase("Succeeded")], "Running", {}, JobFinished, id="succeeded before running"),
        pytest.param([phase("Running")], None, {}, Unavailable, id="the watch ended, no deadline"),
        pytest.param([phase("Running")], None, {"timeout": 3600}, Unavailable, id="the watch ended early"),
        pytest.param([phase("Running")], None, {"timeout": 0}, WaitTimeout, id="the deadline passed"),
    ],
)
def test_what_wait_returns_or_raises(
    statuses: list[Manifest], until: str | None, options: dict[str, Any], outcome: str | type[Exception]
) -> None:
    client = Client(FakeJobs(job_manifest("a"), statuses=statuses))
    if isinstance(outcome, str):
        done = client.wait("a", until, **options)
        assert done.status is not None and done.status.phase.value == outcome
        return
    with pytest.raises(outcome) as raised:
        client.wait("a", until, **options)
    assert type(raised.value) is outcome
    if isinstance(raised.value, JobFinished | WaitTimeout):
        assert isinstance(raised.value.job, TrainingJob)


def test_job_failed_is_a_job_finished_and_both_say_why() -> None:
    client = Client(FakeJobs(job_manifest("a"), statuses=[phase("Succeeded")]))
    with pytest.raises(JobFinished, match=r"'a' finished \(Succeeded\) without reaching Running") as finished:
        client.wait("a", Phase.RUNNING)
    assert finished.value.reason == "Finished" and finished.value.status is None
    assert issubclass(JobFailed, JobFinished)


@pytest.mark.parametrize(
    "until",
    [pytest.param("succeeded", id="the wrong case"), pytest.param(["Running", "Done"], id="one of several"),
     pytest.param([], id="nothing"), pytest.param(5, id="a number")],
)  # fmt: skip
def test_until_must_name_a_phase_or_a_condition(until: Any) -> None:
    client = Client(FakeJobs(job_manifest("a")))
    with pytest.raises(Invalid, match=r"until: .* is none of Pending, Running, .*Succeeded") as refused:
        client.wait("a", until)
    assert [f.field for f in refused.value.fields] == ["until"] and refused.value.status is None


def test_a_predicate_is_named_by_what_or_in_words_never_as_a_function() -> None:
    client = Client(FakeJobs(job_manifest("a"), statuses=[phase("Running")]))
    with pytest.raises(WaitTimeout) as named:
        client.wait("a", lambda job: False, timeout=0, what="step 100")
    assert "did not reach step 100" in str(named.value)
    with pytest.raises(WaitTimeout) as unnamed:
        client.wait("a", lambda job: False, timeout=0)
    assert "<function" not in str(unnamed.value) and "the condition waited for" in str(unnamed.value)


def test_create_all_checks_every_document_before_creating_any() -> None:
    fake = FakeJobs()
    with pytest.raises(Invalid, match=r"document 2: metadata.namespace: 'other' is not 'team'"):
        Client(fake).create_all([job_manifest("a"), job_manifest("b", namespace="other")], "team")
    assert fake.created == []
    with pytest.raises(Invalid, match=r"jobs.yaml \(document 2\): metadata.namespace"):
        Client(fake).check_all([job_manifest("a"), job_manifest("b", namespace="other")], "team", where="jobs.yaml")


def test_create_all_takes_models_and_says_what_it_created_before_a_refusal() -> None:
    fake = FakeJobs()
    fake.refuse.add("b")
    models = [TrainingJob.from_manifest(job_manifest(name)) for name in ("a", "b", "c")]
    with pytest.raises(Conflict) as refused:
        Client(fake).create_all(models)
    assert [job.metadata.name for job in refused.value.created] == ["a"]
    assert fake.created == [("default", "a")]


class WithoutFailure(FakeJobs):
    """A custom transport written before Transport.failure was."""

    def __getattribute__(self, name: str) -> Any:
        if name == "failure":
            raise AttributeError(name)
        return super().__getattribute__(name)


class LikeRest(FakeJobs):
    """As the REST API: a job as read has no logTail; only failure() gives the failed rank's last lines."""

    def get(self, name: str, namespace: str | None = None) -> Manifest:
        job = copy.deepcopy(super().get(name, namespace))
        job["status"]["lastFailure"].pop("logTail", None)
        return job


@pytest.mark.parametrize("transport", [LikeRest, WithoutFailure], ids=["failure()", "no failure(): the job's status"])
def test_last_failure_comes_from_the_transport(transport: type[FakeJobs]) -> None:
    failure = {"pod": "a-worker-0-1", "attempt": 1, "failureClass": "OOMKilled", "reason": "OOMKilled",
               "time": "2026-01-01T00:00:00Z", "logTail": "boom\n"}  # fmt: skip
    client = Client(transport(job_manifest("a") | {"status": phase("Failed") | {"lastFailure": failure}}))
    found = client.last_failure("a")
    assert found is not None and found.log_tail == "boom\n"


@pytest.fixture
def picked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which transport connect made: 'kube' (with its kubeconfig) or 'rest' (with its server)."""
    made: list[str] = []
    monkeypatch.setattr(KubeJobs, "connect", classmethod(lambda cls, path, **_: made.append(f"kube {path}")))
    monkeypatch.setattr(RestJobs, "__init__", lambda self, server, *_, **__: made.append(f"rest {server}"))
    monkeypatch.setenv("TJCTL_SERVER", "http://from-env")
    monkeypatch.setenv("TJCTL_TOKEN", "t")
    return made


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param({}, "rest http://from-env", id="the environment"),
        pytest.param({"kubeconfig": "kc"}, "kube kc", id="a kubeconfig named wins over it"),
        pytest.param({"context": "c"}, "kube None", id="so does a context"),
        pytest.param({"server": "http://named"}, "rest http://named", id="a server named"),
    ],
)
def test_what_the_caller_names_wins_over_the_environment(
    picked: list[str], options: dict[str, Any], expected: str
) -> None:
    connect(**options)
    assert picked == [expected]


def test_a_server_and_a_kubeconfig_are_two_clusters(picked: list[str], tmp_path: Path) -> None:
    with pytest.raises(Invalid, match="give one of them"):
        connect(server="http://s", kubeconfig=tmp_path / "kc")
    assert picked == []


def test_errors_carry_nothing_created_unless_create_all_says_so() -> None:
    assert TrainingJobError("x").created == []
