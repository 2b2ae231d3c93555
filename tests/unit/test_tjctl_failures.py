"""tjctl where things go wrong, without a cluster (a fake transport, or none reachable): each is one line on stderr
with its exit code and no traceback; a file it cannot write, a server URL or CA file it cannot use, a kubeconfig it
cannot read, a job the model refuses, a submit refused before anything is created, a reader that goes away."""

import io
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from tests.support.builders import claim_manifest, job_manifest
from tests.support.cli import REPO, tjctl_env
from tests.support.fake_jobs import FakeJobs

from tjctl import cli, commands, output
from trainingjob_sdk import Client, Conflict, NotConfigured, NotFound, RestJobs, TrainingJob

pytestmark = pytest.mark.fast

Said = tuple[int, str, str]  # the exit code, stdout, stderr


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Said:
    code = cli.main(argv)
    said = capsys.readouterr()
    return code, said.out, said.err


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeJobs:
    """The cluster tjctl talks to: a fake transport with job "a", and one the model refuses ("old")."""
    old = job_manifest("old") | {"status": {"phase": "Running", "attempt": 1}}
    old["spec"]["workers"]["replicas"] = "lots"
    jobs = FakeJobs(job_manifest("a"), old)
    monkeypatch.setattr(cli, "connect", lambda **_: Client(jobs))
    return jobs


def one_line(said: Said, code: int, *words: str) -> None:
    assert said[0] == code, said
    assert len(said[2].strip().splitlines()) == 1 and "Traceback" not in said[2], said[2]
    for word in words:
        assert word in said[2], said[2]


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        pytest.param(["--server", "http://[::1"], 2, "must start with http:// or https://", id="an invalid URL"),
        pytest.param(["--server", "127.0.0.1:1"], 2, "must start with http:// or https://", id="no scheme"),
        pytest.param(["--cacert", "{tmp}/missing.pem"], 2, "missing.pem cannot be read", id="no CA file"),
        pytest.param(["--cacert", "{tmp}/text.pem"], 2, "text.pem holds no PEM certificate", id="a CA file not PEM"),
        pytest.param(
            ["--token", "tök"], 2, "--token (or $TJCTL_TOKEN) must be printable ASCII", id="a non-ASCII token"
        ),
        pytest.param(
            ["--token", "t\n"], 2, "--token (or $TJCTL_TOKEN) must be printable ASCII", id="a token with a newline"
        ),
        pytest.param(["--kubeconfig", "{tmp}/kc"], 2, "--server names the REST API", id="a server and a kubeconfig"),
    ],
)
def test_a_server_tjctl_cannot_use(
    argv: list[str], code: int, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "text.pem").write_text("hello\n")
    server = [] if "--server" in argv else ["--server", "https://api.test"]
    given = [each.replace("{tmp}", str(tmp_path)) for each in argv]
    token = [] if "--token" in argv else ["--token", "t"]
    said = run([*server, *given, *token, "get", "a"], capsys)
    one_line(said, code, words)
    assert "tjctl finds the cluster" not in said[2]


@pytest.mark.parametrize(
    "text", [pytest.param("apiVersion: v1\n: : [\n", id="broken YAML"), pytest.param("- a\n", id="a list")]
)
def test_a_kubeconfig_named_wins_over_the_environment_and_must_be_readable(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TJCTL_SERVER", "https://from-env.test")
    monkeypatch.setenv("TJCTL_TOKEN", "t")
    (tmp_path / "kc").write_text(text)
    one_line(run(["--kubeconfig", str(tmp_path / "kc"), "list"], capsys), 4, "kc cannot be used")


def test_a_chrome_trace_to_a_folder_that_does_not_exist(fake: FakeJobs, capsys: pytest.CaptureFixture[str]) -> None:
    said = run(["timeline", "a", "--chrome", "/nonexistent/x.json"], capsys)
    one_line(said, 2, "error: /nonexistent/x.json: No such file or directory")


@pytest.mark.parametrize("form", ["yaml", "json"])
def test_a_job_the_model_refuses_prints_as_stored(
    form: str, fake: FakeJobs, capsys: pytest.CaptureFixture[str], recwarn: pytest.WarningsRecorder
) -> None:
    code, out, err = run(["get", "old", "-o", form], capsys)
    assert code == 0 and yaml.safe_load(out) == fake.jobs["old"], err
    assert not recwarn.list, [str(w.message) for w in recwarn.list]


def test_a_job_the_model_refuses_suspends(fake: FakeJobs, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["suspend", "old"], capsys)
    assert code == 0 and out.strip() == "trainingjob.trainingjob.io/old suspended: its pods checkpoint and stop", err
    assert fake.jobs["old"]["spec"]["runPolicy"]["suspend"] is True


def test_submit_checks_every_document_before_it_creates_any(
    fake: FakeJobs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump_all([job_manifest("b"), job_manifest("c", namespace="other")]))
    said = run(["submit", str(tmp_path / "jobs.yaml"), "-n", "team"], capsys)
    one_line(said, 2, "error: ", "jobs.yaml (document 2): metadata.namespace: 'other' is not 'team'")
    assert fake.created == []


def test_submit_of_a_file_with_a_claim_names_the_document_that_is_no_job(
    fake: FakeJobs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump_all([claim_manifest(), job_manifest("b"), job_manifest("c")]))
    said = run(["submit", str(tmp_path / "jobs.yaml")], capsys)
    one_line(said, 2, "jobs.yaml (document 1) is a PersistentVolumeClaim, not a TrainingJob: ", "kubectl apply -f")
    assert "spec.accessModes" not in said[2] and fake.created == []


def test_an_invalid_manifest_is_an_error_of_tjctl_not_from_the_server(
    fake: FakeJobs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = job_manifest("b")
    broken["spec"]["workers"]["replicas"] = -1
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(broken))
    code, _, err = run(["submit", str(tmp_path / "job.yaml")], capsys)
    assert code == 2 and err.startswith("error: ") and "from the server" not in err, err
    assert "\n  spec.workers.replicas: Input should be greater than or equal to 1" in err


def test_what_was_created_before_an_error_is_printed_first(
    fake: FakeJobs, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = Conflict('"c" exists', status=409, reason="AlreadyExists")
    refused.created = [TrainingJob.from_manifest(job_manifest("b"))]

    def submit(*_: Any) -> int:
        raise refused

    monkeypatch.setattr(commands, "submit", submit)
    code, out, err = run(["submit", "jobs.yaml"], capsys)
    assert (code, out) == (1, "trainingjob.trainingjob.io/b created\n") and "(AlreadyExists)" in err


@pytest.mark.parametrize(
    ("server", "warned"),
    [("http://api.example:8000", True), ("http://127.0.0.1:8000", False), ("https://api.example", False)],
)
def test_a_token_sent_unencrypted_is_warned_about(
    server: str, warned: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = httpx.MockTransport(lambda request: httpx.Response(200, json=job_manifest("a")))
    monkeypatch.setattr(cli, "connect", lambda **_: Client(RestJobs(server, "t", transport=answer)))
    code, out, err = run(["--server", server, "--token", "t", "get", "a", "-o", "name"], capsys)
    assert code == 0 and out == "trainingjob.trainingjob.io/a\n"
    assert (f"warning: the token is sent unencrypted to {server}" in err) is warned, err


@pytest.mark.parametrize(
    "flags",
    [["--tail", "-1"], ["--tail", "x"], ["--attempt", "0"], ["--attempt", "-2"]],
    ids=["tail negative", "tail no number", "attempt 0", "attempt negative"],
)
def test_log_counts_are_whole_numbers(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["logs", "a", *flags])
    assert done.value.code == 2 and "is not a whole number of" in capsys.readouterr().err


def test_the_kept_lines_of_a_gone_attempt_with_tail_zero_are_none(
    fake: FakeJobs, capsys: pytest.CaptureFixture[str]
) -> None:
    failure = {"pod": "a-worker-0-1", "attempt": 1, "failureClass": "OOMKilled", "reason": "OOMKilled",
               "time": "2026-01-01T00:00:00Z", "logTail": "one\ntwo"}  # fmt: skip
    fake.jobs["a"]["status"] = {"phase": "Running", "attempt": 2, "lastFailure": failure}

    def gone(*_: Any, **__: Any) -> Any:
        raise NotFound("no pod of attempt 1", status=404)

    fake.logs = gone  # type: ignore[method-assign]
    assert run(["logs", "a", "--attempt", "1", "--tail", "0"], capsys)[:2] == (0, "")
    assert run(["logs", "a", "--attempt", "1", "--tail", "5"], capsys)[:2] == (0, "one\ntwo\n")


READER_GONE = textwrap.dedent("""\
    import sys
    from tests.support.builders import claim_manifest, job_manifest
    from tests.support.fake_jobs import FakeJobs
    from tjctl import cli
    from trainingjob_sdk import Client
    cli.connect = lambda **_: Client(FakeJobs(*(job_manifest(f"job-{n}") for n in range(50))))
    sys.exit(cli.main(sys.argv[1:]))
    """)


@pytest.mark.parametrize("argv", [["list"], ["get", "job-1"], ["list", "-o", "yaml"]], ids=["table", "get", "yaml"])
def test_a_reader_that_went_away_is_exit_141_without_a_traceback(argv: list[str]) -> None:
    reader, writer = os.pipe()
    os.close(reader)  # as `tjctl list | head -0`: nobody reads
    try:
        done = subprocess.run(
            [sys.executable, "-c", READER_GONE, *argv], cwd=REPO, env=tjctl_env(), stdout=writer,
            stderr=subprocess.PIPE, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(writer)
    assert done.returncode == 141 and done.stderr == "", done.stderr


class Broken:
    """A stream whose reader went away."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        raise BrokenPipeError

    def flush(self) -> None:
        raise BrokenPipeError

    def isatty(self) -> bool:
        return False


def test_an_error_whose_reader_went_away_is_exit_141(monkeypatch: pytest.MonkeyPatch) -> None:
    ui = output.Ui(output.PipedConsole(file=io.StringIO()), output.PipedConsole(file=Broken()))  # type: ignore[arg-type]
    monkeypatch.setattr(output.Ui, "create", classmethod(lambda cls: ui))
    monkeypatch.setattr(cli, "connect", lambda **_: (_ for _ in ()).throw(NotConfigured("no cluster")))
    assert cli.main(["get", "a"]) == 141  # the error line cannot be written


def test_a_log_stdout_cannot_encode_is_written_with_replacements(
    fake: FakeJobs, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    ui = output.Ui(output.PipedConsole(file=out), output.PipedConsole(file=io.StringIO()))
    monkeypatch.setattr(output.Ui, "create", classmethod(lambda cls: ui))
    monkeypatch.setattr(fake, "logs", lambda *_, **__: iter(["héllo wörld\n"]), raising=False)
    assert cli.main(["logs", "a"]) == 0
    assert out.buffer.getvalue() == b"h?llo w?rld\n"


def test_what_libraries_log_is_one_line_of_tjctls(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def connect(**_: Any) -> Client:
        logging.getLogger().error("exec: process returned 1.\nStderr: token expired")
        raise NotConfigured("the kubeconfig's credentials could not be refreshed")

    monkeypatch.setattr(cli, "connect", connect)
    code, _, err = run(["get", "a"], capsys)
    assert code == 4 and err.splitlines()[0] == "warning: exec: process returned 1. Stderr: token expired", err
