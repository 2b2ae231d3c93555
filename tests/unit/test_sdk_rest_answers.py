"""The SDK's REST transport on answers it cannot use: JSON of the wrong shape, a redirect, a body that is no JSON,
a broken gzip, a bad URL or CA file, each a typed error; and what it asks for a log."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.support.builders import job_manifest
from tests.support.fake_rest import Chunks, Handler, rest

from trainingjob_sdk import NotConfigured, TrainingJobError, Unavailable
from trainingjob_sdk.manifests import as_job
from trainingjob_sdk.rest import RestJobs

pytestmark = pytest.mark.fast


def job_calls() -> list[Any]:
    return [
        pytest.param(lambda jobs: jobs.get("a"), id="get"),
        pytest.param(lambda jobs: jobs.list(), id="list"),
        pytest.param(lambda jobs: jobs.set_suspend("a", True), id="suspend"),
        pytest.param(lambda jobs: jobs.events("a"), id="events"),
        pytest.param(lambda jobs: jobs.pods("a"), id="pods"),
    ]


def json_answer(body: Any) -> httpx.Response:
    return httpx.Response(200, content=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


SHAPES = [pytest.param([], id="[]"), pytest.param("x", id="a string"), pytest.param(None, id="null")]


@pytest.mark.parametrize("body", [*SHAPES, pytest.param({}, id="{}")])
@pytest.mark.parametrize("call", job_calls())
def test_answers_of_the_wrong_shape_are_bad_responses(call: Callable[[RestJobs], Any], body: Any) -> None:
    with pytest.raises(TrainingJobError) as raised:
        call(rest(lambda request: json_answer(body)))
    assert raised.value.reason == "BadResponse"


@pytest.mark.parametrize("body", SHAPES)
@pytest.mark.parametrize(
    "call",
    [pytest.param(lambda jobs: jobs.timeline("a"), id="timeline"),
     pytest.param(lambda jobs: jobs.failure("a"), id="failure")],
)  # fmt: skip
def test_objects_of_the_wrong_shape_are_bad_responses(call: Callable[[RestJobs], Any], body: Any) -> None:
    with pytest.raises(TrainingJobError) as raised:
        call(rest(lambda request: json_answer(body)))
    assert raised.value.reason == "BadResponse"


@pytest.mark.parametrize(
    ("items", "words"),
    [pytest.param([1], "items are not JSON objects", id="not objects"),
     pytest.param([{"metadata": {}}], "a job without metadata.name", id="no name"),
     pytest.param([{"metadata": {"name": ""}}], "a job without metadata.name", id="an empty name")],
)  # fmt: skip
def test_listed_jobs_are_objects_with_names(items: list[Any], words: str) -> None:
    with pytest.raises(TrainingJobError, match=words) as raised:
        rest(lambda request: httpx.Response(200, json={"items": items})).list()
    assert raised.value.reason == "BadResponse"


@pytest.mark.parametrize("raw", SHAPES)
def test_as_job_refuses_what_is_no_mapping(raw: Any) -> None:
    with pytest.raises(TrainingJobError, match="not a JSON object") as raised:
        as_job(raw)
    assert raised.value.reason == "BadResponse"


def redirect(location: str | None) -> Handler:
    headers = {"Location": location} if location else {}
    return lambda request: httpx.Response(301, headers=headers)


def gzip_broken(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, headers={"Content-Encoding": "gzip"}, content=b"not gzip at all")


@pytest.mark.parametrize(
    ("handler", "kind", "words"),
    [
        pytest.param(
            redirect("https://api.test/api/v1/namespaces/default/trainingjobs/a"), NotConfigured,
            "answered 301 Moved Permanently: it points to https://api.test: use that URL", id="a redirect",
        ),
        pytest.param(redirect(None), NotConfigured, "does not say where to", id="a redirect to nowhere"),
        pytest.param(
            lambda request: httpx.Response(200, html="<html>hello</html>"), TrainingJobError,
            "answered 200 with text/html; charset=utf-8, not JSON", id="HTML",
        ),
        pytest.param(gzip_broken, TrainingJobError, "cannot be decoded", id="a broken gzip"),
    ],
)  # fmt: skip
def test_answers_the_sdk_cannot_use_are_typed_errors(handler: Handler, kind: type[Exception], words: str) -> None:
    with pytest.raises(kind, match=words) as raised:
        rest(handler).get("a")
    assert type(raised.value) is kind


@pytest.mark.parametrize(
    "server",
    ["http://[::1", "127.0.0.1:8000", "localhost:8000", "ftp://api.test", "http://"],
    ids=["an invalid URL", "no scheme", "a host taken for a scheme", "another scheme", "no host"],
)
def test_a_server_url_must_be_http_or_https(server: str) -> None:
    with pytest.raises(NotConfigured, match="must start with http:// or https://"):
        RestJobs(server, "token")


def test_a_ca_file_must_exist_and_hold_certificates(tmp_path: Path) -> None:
    with pytest.raises(NotConfigured, match=r"missing\.pem cannot be read: No such file or directory"):
        RestJobs("https://api.test", "token", cacert=tmp_path / "missing.pem")
    (tmp_path / "text.pem").write_text("hello\n")
    with pytest.raises(NotConfigured, match=r"text\.pem holds no PEM certificate"):
        RestJobs("https://api.test", "token", cacert=tmp_path / "text.pem")


@pytest.mark.parametrize(
    ("server", "unencrypted"),
    [("http://127.0.0.1:8000", False), ("http://localhost:8000", False), ("http://[::1]:8000", False),
     ("http://api.example:8000", True), ("https://api.example", False)],
)  # fmt: skip
def test_which_servers_get_the_token_unencrypted(server: str, unencrypted: bool) -> None:
    assert RestJobs(server, "token").unencrypted is unencrypted


def test_logs_are_asked_uncompressed_and_tail_zero_is_sent() -> None:
    asked: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return httpx.Response(200, text="")

    assert list(rest(answer).logs("a", tail=0)) == [""]
    assert asked[0].headers["accept-encoding"] == "identity" and asked[0].url.params["tailLines"] == "0"


def test_a_log_error_whose_body_breaks_off_is_unavailable() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, stream=Chunks(b'{"mess', then=httpx.ReadError("reset")))

    with pytest.raises(Unavailable, match="connection was lost"):
        rest(answer).logs("a")


@pytest.mark.parametrize("token", ["tök", "abc\ndef", "tab\there"], ids=["non-ascii", "newline", "tab"])
def test_a_token_must_be_printable_ascii(token: str) -> None:
    with pytest.raises(NotConfigured, match="printable ASCII") as refused:
        RestJobs("https://api.example", token)
    assert refused.value.reason == "InvalidToken"


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda jobs: jobs.create(job_manifest("a")), id="create"),
        pytest.param(lambda jobs: jobs.set_suspend("a", True), id="suspend"),
        pytest.param(lambda jobs: jobs.set_suspend("a", False), id="resume"),
        pytest.param(lambda jobs: jobs.delete("a"), id="delete"),
    ],
)
def test_every_write_says_it_comes_from_a_client_not_a_form(call: Callable[[RestJobs], object]) -> None:
    """The API refuses a write without X-Requested-With (trainingjob_api.writes): tjctl's go through here too."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=job_manifest("a"))

    call(rest(answer))
    (request,) = sent
    assert request.headers.get("X-Requested-With"), dict(request.headers)
    assert request.headers.get("Content-Type") in (None, "application/json")
