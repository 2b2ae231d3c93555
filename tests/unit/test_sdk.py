"""The SDK's pure parts: reading manifests, naming jobs for creation, picking a replica's pod, what `wait` waits
for, and which typed error an HTTP status is."""

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.support.builders import claim_manifest, job_manifest, sweep_manifest

from trainingjob.model import Phase, TrainingJob
from trainingjob_sdk import Conflict, Forbidden, Invalid, NotFound, TrainingJobError, Unauthorized, Unavailable
from trainingjob_sdk.client import lines, reached
from trainingjob_sdk.errors import FieldError, field_path, for_status
from trainingjob_sdk.manifests import as_job, create_body, documents, to_create
from trainingjob_sdk.pods import check_has_logs, parse_replica, pick
from trainingjob_sdk.sweeps import to_create as sweep_to_create

pytestmark = pytest.mark.fast

TWO = f"{json.dumps(job_manifest('a'))}\n---\n# a comment only\n---\n{json.dumps(job_manifest('b'))}\n"


@pytest.mark.parametrize(
    ("source", "names"),
    [
        pytest.param(job_manifest("dict"), ["dict"], id="a dict"),
        pytest.param(TrainingJob.from_manifest(job_manifest("model")), ["model"], id="a model"),
        pytest.param(json.dumps(job_manifest("text")), ["text"], id="JSON text"),
        pytest.param(json.dumps(job_manifest("bytes")).encode(), ["bytes"], id="bytes"),
        pytest.param(TWO, ["a", "b"], id="several documents, empty ones left out"),
    ],
)
def test_documents_come_from_every_kind_of_source(source: Any, names: list[str]) -> None:
    assert [d["metadata"]["name"] for d in documents(source)] == names


def test_documents_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "jobs.yaml").write_text(TWO)
    assert len(documents(tmp_path / "jobs.yaml")) == 2
    assert len(documents(str(tmp_path / "jobs.yaml"))) == 2  # a file name as a str
    with pytest.raises(Invalid, match=r"missing\.yaml: cannot read it: No such file or directory"):
        documents(tmp_path / "missing.yaml")


@pytest.mark.parametrize("name", ["JOB.YAML", "job.Json", " job.yml\n", "job.yaml "], ids=repr)
def test_a_file_name_in_any_case_with_spaces_around_it(tmp_path: Path, name: str) -> None:
    (tmp_path / name.strip()).write_text(json.dumps(job_manifest("from-file")))
    given = name.replace(name.strip(), str(tmp_path / name.strip()))  # the spaces around the whole path
    assert documents(given)[0]["metadata"]["name"] == "from-file"


@pytest.mark.parametrize("text", ["job.txt", "jobs/job", "42"])
def test_a_one_line_str_that_is_no_manifest_says_how_to_read_a_file(text: str) -> None:
    with pytest.raises(Invalid, match="is not a TrainingJob manifest; to read a file pass a Path or a name ending in"):
        documents(text)


def test_documents_from_a_list_of_models_and_dicts() -> None:
    model = TrainingJob.from_manifest(job_manifest("model"))
    assert [d["metadata"]["name"] for d in documents([model, job_manifest("dict")])] == ["model", "dict"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "holds no document", id="empty"),
        pytest.param("- a\n- b\n", "document 1 is not an object", id="a list"),
        pytest.param("a: [", "cannot read it as YAML", id="broken YAML"),
        pytest.param("a: &x 1\nb: *x\n", "anchors and aliases", id="an alias (bombs)"),
        pytest.param("a: 1\na: 2\n", "appears twice", id="a duplicate key"),
    ],
)
def test_unreadable_documents_say_why(text: str, message: str) -> None:
    with pytest.raises(Invalid, match=message):
        documents(text)


def _named(**metadata: Any) -> dict[str, Any]:
    return job_manifest("x") | {"metadata": metadata}


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        pytest.param(_named(), "metadata.name or metadata.generateName is required", id="no name"),
        pytest.param(_named(generateName="Bad_"), "metadata.generateName must be", id="a prefix that is no label"),
        pytest.param(_named(generateName="a" * 36), "at most 35", id="a prefix leaving no room"),
        pytest.param(job_manifest("x") | {"spec": {"workers": {"replicas": 0}}}, "spec.workers.replicas", id="bad"),
    ],
)
def test_jobs_to_create_are_named_and_valid(manifest: dict[str, Any], message: str) -> None:
    with pytest.raises(Invalid, match=message):
        to_create(manifest)


@pytest.mark.parametrize(
    ("check", "manifest", "said", "todo"),
    [
        pytest.param(to_create, claim_manifest(), "is a PersistentVolumeClaim, not a TrainingJob", "kubectl apply -f",
                     id="a claim"),
        pytest.param(to_create, claim_manifest() | {"kind": "Ingress"}, "is an Ingress, not a TrainingJob",
                     "kubectl apply -f", id="an Ingress"),
        pytest.param(to_create, sweep_manifest("s"), "is a TrainingSweep, not a TrainingJob", "tjctl sweep submit",
                     id="a sweep for a job"),
        pytest.param(sweep_to_create, job_manifest("j"), "is a TrainingJob, not a TrainingSweep", "tjctl submit",
                     id="a job for a sweep"),
    ],
)  # fmt: skip
def test_a_manifest_of_another_kind_says_what_it_is_and_what_to_do(
    check: Callable[[dict[str, Any], str], Any], manifest: dict[str, Any], said: str, todo: str
) -> None:
    with pytest.raises(Invalid) as refused:
        check(manifest, "jobs.yaml (document 1)")
    assert refused.value.message.startswith(f"jobs.yaml (document 1) {said}: ") and todo in refused.value.message
    assert refused.value.fields == [FieldError("kind", said)] and not refused.value.unsaid()  # said once


def test_a_generated_name_and_the_namespace_of_the_request() -> None:
    job = to_create(_named(generateName="sweep-"))
    body = create_body(job, "team")
    assert body["metadata"] == {"generateName": "sweep-", "namespace": "team"} and "status" not in body
    with pytest.raises(Invalid, match="'other' is not 'team'"):
        create_body(to_create(_named(name="x", namespace="other")), "team")


def test_invalid_names_each_field_it_was_given() -> None:
    error = Invalid("the TrainingJob is invalid", [FieldError("spec.workers.replicas", "must be at least 1")])
    assert str(error) == "the TrainingJob is invalid; spec.workers.replicas: must be at least 1"
    named = Invalid("the TrainingJob is invalid: spec.workers.replicas", error.fields)
    assert str(named) == "the TrainingJob is invalid: spec.workers.replicas; spec.workers.replicas: must be at least 1"


def test_an_invalid_job_found_before_sending_has_no_server_status() -> None:
    with pytest.raises(Invalid) as refused:
        to_create(job_manifest("x") | {"spec": {"workers": {"replicas": 0}}})
    assert refused.value.status is None and refused.value.fields[0].field == "spec.workers.replicas"


@pytest.mark.parametrize(
    ("location", "path"),
    [
        pytest.param(("spec", "workers", "env", 0, "name"), "spec.workers.env[0].name", id="fields and an index"),
        pytest.param(("spec", "function-after[check(), RoleSpec]", "x"), "spec.x", id="a validator's name"),
        pytest.param(("model-before[x]", "spec"), "spec", id="a model validator first"),
        pytest.param((0, "a"), "[0].a", id="an index first"),
        pytest.param((), "(the document)", id="the whole document"),
    ],
)
def test_field_paths_as_people_write_them(location: tuple[int | str, ...], path: str) -> None:
    assert field_path(location) == path


def test_a_stored_job_the_model_refuses_still_comes_back_with_its_status() -> None:
    raw = job_manifest("old") | {
        "spec": {"workers": {"replicas": "many"}},
        "status": {"phase": "Running", "attempt": "x"},
    }
    job = as_job(raw)
    assert job.metadata.name == "old" and job.status is not None and job.status.phase == Phase.RUNNING


def test_a_stored_job_the_model_refuses_keeps_its_manifest_and_is_logged_quietly(
    caplog: pytest.LogCaptureFixture, recwarn: pytest.WarningsRecorder
) -> None:
    raw = job_manifest("old") | {"spec": {"workers": {"replicas": "many"}}}
    with caplog.at_level(logging.DEBUG, logger="trainingjob_sdk"):
        job = as_job(raw)
    assert job.to_manifest() == raw and not recwarn.list
    assert [r.levelno for r in caplog.records] == [logging.DEBUG] and "does not fit the model" in caplog.text


def _pod(attempt: int, node: str | None = "n1") -> dict[str, Any]:
    labels = {"trainingjob.io/attempt": str(attempt)}
    return {"metadata": {"name": f"j-worker-0-{attempt}", "labels": labels}, "spec": {"nodeName": node}, "status": {}}


def test_the_pod_of_a_replica_is_the_newest_or_the_attempt_asked_for() -> None:
    found = [_pod(1), _pod(3), _pod(2)]
    assert pick(found, "job", "worker-0", None)["metadata"]["name"] == "j-worker-0-3"
    assert pick(found, "job", "worker-0", 2)["metadata"]["name"] == "j-worker-0-2"
    with pytest.raises(NotFound, match="in attempt 4"):
        pick(found, "job", "worker-0", 4)
    with pytest.raises(NotFound, match="replica worker-0 of job"):
        pick([], "job", "worker-0", None)
    with pytest.raises(NotFound, match="not scheduled"):
        check_has_logs(_pod(1, node=None))
    check_has_logs(_pod(1))


@pytest.mark.parametrize("replica", ["worker", "chief-0", "worker-x", "worker-123456", "ps--1", ""])
def test_replicas_are_role_dash_index(replica: str) -> None:
    with pytest.raises(Invalid, match="replica"):
        parse_replica(replica)


def test_replicas_parse() -> None:
    assert (parse_replica("ps-12").role, parse_replica("ps-12").index) == ("ps", 12)


def _job(phase: str | None, conditions: tuple[str, ...] = ()) -> TrainingJob:
    status: dict[str, Any] = {"phase": phase} if phase else {}
    now = "2026-11-23T00:00:00Z"
    status["conditions"] = [
        {"type": c, "status": "True", "lastTransitionTime": now, "reason": "R", "message": ""} for c in conditions
    ]
    return TrainingJob.from_manifest(job_manifest("x") | ({"status": status} if phase else {}))


@pytest.mark.parametrize(
    ("until", "job", "expected"),
    [
        pytest.param(None, _job("Succeeded"), True, id="finished by default"),
        pytest.param(None, _job("Failed"), True, id="failed is finished"),
        pytest.param(None, _job("Running"), False, id="running is not"),
        pytest.param(None, _job(None), False, id="no status yet"),
        pytest.param(Phase.RUNNING, _job("Running"), True, id="a phase"),
        pytest.param("Suspended", _job("Running"), False, id="another phase"),
        pytest.param(["Succeeded", "Suspended"], _job("Suspended"), True, id="any of several"),
        pytest.param("Created", _job("Pending", ("Created",)), True, id="a condition that is true"),
        pytest.param(lambda j: j.metadata.name == "x", _job(None), True, id="a predicate"),
    ],
)
def test_what_wait_waits_for(until: Any, job: TrainingJob, expected: bool) -> None:
    assert reached(until)(job) is expected


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        pytest.param(["a\nb", "c\n", "d"], ["a\n", "bc\n", "d"], id="split anywhere"),
        pytest.param(["", "\n\n"], ["\n", "\n"], id="empty lines"),
        pytest.param([], [], id="nothing"),
    ],
)
def test_logs_come_in_whole_lines(chunks: list[str], expected: list[str]) -> None:
    assert list(lines(chunks)) == expected


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        pytest.param(400, Invalid, id="400"),
        pytest.param(422, Invalid, id="422"),
        pytest.param(401, Unauthorized, id="401"),
        pytest.param(403, Forbidden, id="403"),
        pytest.param(404, NotFound, id="404"),
        pytest.param(409, Conflict, id="409"),
        pytest.param(429, Unavailable, id="429"),
        pytest.param(503, Unavailable, id="503"),
        pytest.param(418, TrainingJobError, id="anything else"),
    ],
)
def test_statuses_become_typed_errors(status: int, kind: type[TrainingJobError]) -> None:
    error = for_status(status, "why", "Reason")
    assert type(error) is kind and error.status == status and error.reason == "Reason"
