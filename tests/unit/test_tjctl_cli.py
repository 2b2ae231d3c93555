"""tjctl's command line without a cluster: flags before or after the command, --version, shell completion, the
--timeout and --for values, -o's formats, and each expected error as a line with its exit code."""

import io
import json
from datetime import UTC, datetime

import pytest
import yaml
from rich.console import Console
from tests.support.builders import job_manifest

import trainingjob
from tjctl import display, exits, follow, output
from tjctl.cli import build_parser, main
from trainingjob.model import TrainingJob
from trainingjob_sdk import (
    Conflict,
    FieldError,
    Forbidden,
    Invalid,
    JobFailed,
    JobFinished,
    NotConfigured,
    NotFound,
    Unauthorized,
    Unavailable,
    WaitTimeout,
)

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    "argv",
    [
        ["get", "foo", "-o", "json", "-n", "ns", "--server", "http://s", "--token", "t"],
        ["-o", "json", "-n", "ns", "--server", "http://s", "--token", "t", "get", "foo"],
        ["-o", "yaml", "-n", "other", "--server", "http://s", "get", "foo", "-n", "ns", "-o", "json", "--token", "t"],
    ],
    ids=["after", "before", "after-wins"],
)
def test_global_flags_go_before_or_after_the_command(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert (args.command, args.name, args.output, args.namespace, args.server, args.token) == (
        "get", "foo", "json", "ns", "http://s", "t",
    )  # fmt: skip


def test_flags_before_the_command_are_kept_when_not_repeated_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TJCTL_SERVER", "http://from-env")  # read by connect, where a kubeconfig or context wins
    args = build_parser().parse_args(["-n", "ns", "--context", "c", "list", "-A", "-l", "team=a"])
    assert (args.namespace, args.context, args.server, args.output) == ("ns", "c", None, None)
    assert (args.all_namespaces, args.selector) == (True, "team=a")


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"tjctl {trainingjob.__version__}\n"


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_prints_a_script_that_knows_the_commands_and_flags(
    shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    for word in ("submit", "logs", "wait", "--previous-attempt", "--all-namespaces", "--output"):
        assert word in script, word


def test_the_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    said = capsys.readouterr().out
    for code in ("0 ", "1 ", "2 ", "3 ", "4 ", "130"):
        assert f"\n  {code}" in said


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("600", 600), ("600s", 600), ("10m", 600), ("1h30m", 5400), ("2.5m", 150), ("1h", 3600), ("0.5", 0.5)],
)
def test_timeouts_as_people_write_them(text: str, seconds: float) -> None:
    assert follow.duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "10q", "m", "-5", "1m1h"])
def test_what_is_not_a_timeout(text: str) -> None:
    with pytest.raises(Exception, match="is not a duration"):
        follow.duration(text)


@pytest.mark.parametrize(
    ("text", "target"),
    [("Succeeded", "Succeeded"), ("failed", "Failed"), ("condition=Running", "Running"),
     ("phase=suspended", "Suspended"), ("Created", "Created")],
)  # fmt: skip
def test_what_wait_can_wait_for(text: str, target: str) -> None:
    assert follow.target(text) == target


def test_what_wait_cannot_wait_for() -> None:
    with pytest.raises(Exception, match="is none of"):
        follow.target("Done")


def _job() -> TrainingJob:
    manifest = job_manifest("a")
    manifest["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    return TrainingJob.from_manifest(manifest)


def _shown(jobs: list[TrainingJob], form: str, **options: bool) -> str:
    written = io.StringIO()
    console = Console(file=written, width=300)
    output.show_jobs(output.Ui(console, console), jobs, form, **options)
    return written.getvalue()


def test_each_output_format() -> None:
    job = _job()
    assert _shown([job, job], "name") == "trainingjob.trainingjob.io/a\ntrainingjob.trainingjob.io/a\n"
    assert json.loads(_shown([job], "json", one=True)) == job.to_manifest()
    listed = yaml.safe_load(_shown([job], "yaml"))
    assert (listed["apiVersion"], listed["kind"], listed["items"]) == ("v1", "List", [job.to_manifest()])
    header = _shown([job], "wide", all_namespaces=True).splitlines()[0].split()
    assert header[:2] == ["NAMESPACE", "NAME"] and header[-5:] == ["AGE", "LOSS", "CHECKPOINT", "FAILURE", "GOODPUT"]
    assert _shown([job], "table").splitlines()[0].split()[-1] == "AGE"


def test_get_shows_where_the_jobs_time_went_under_its_row() -> None:
    manifest = {
        **_job().to_manifest(),
        "status": {
            "phase": "Running",
            "goodput": {
                "ratio": 0.5,
                "wallSeconds": 90,
                "queuedSeconds": 45,
                "productiveSeconds": 45,
                "time": "2026-01-01T00:01:30Z",
            },
        },
    }
    job = TrainingJob.from_manifest(manifest)
    assert _shown([job], "table", one=True).splitlines()[-1] == "goodput: 0.5 | 1m30s: queued 45s, productive 45s"
    assert "goodput:" not in _shown([job, job], "table")  # a list has no lines under it


@pytest.mark.parametrize(
    ("status", "shown"),
    [
        ("True", "queued: Waiting in LocalQueue team-a for Kueue to admit the job."),
        ("False", None),
    ],
    ids=["held", "admitted"],
)
def test_get_says_why_kueue_holds_the_job_under_its_row(status: str, shown: str | None) -> None:
    queued = {"type": "Queued", "status": status, "reason": "WaitingForQuota",
              "lastTransitionTime": "2026-01-01T00:00:00Z",
              "message": "Waiting in LocalQueue team-a for Kueue to admit the job."}  # fmt: skip
    job = TrainingJob.from_manifest({**_job().to_manifest(), "status": {"phase": "Pending", "conditions": [queued]}})
    last = _shown([job], "table", one=True).splitlines()[-1]
    assert last == shown if shown else not last.startswith("queued:")


def test_get_says_how_often_the_job_checkpoints_and_why_under_its_row() -> None:
    pacing = {"auto": True, "intervalSeconds": 120.0, "reason": "Auto: every 120 s, Young/Daly: ..."}
    job = TrainingJob.from_manifest(
        {**_job().to_manifest(), "status": {"phase": "Running", "progress": {"step": 5, "checkpointPacing": pacing}}}
    )
    assert _shown([job], "table", one=True).splitlines()[-1] == "checkpoints: Auto: every 120 s, Young/Daly: ..."
    assert "checkpoints:" not in _shown([job, job], "table")


FAILED_JOB = TrainingJob.from_manifest(
    {**job_manifest("f"), "status": {"phase": "Failed", "lastFailure": {
        "pod": "f-worker-1-1", "attempt": 1, "failureClass": "OOMKilled", "reason": "OOMKilled",
        "time": "2026-01-01T00:00:00Z"}}}
)  # fmt: skip


@pytest.mark.parametrize(
    ("error", "code", "first"),
    [
        (NotFound('trainingjob "x" not found', status=404), 1, 'error from the server (NotFound): trainingjob "x"'),
        (Forbidden("no", status=403), 1, "error from the server (Forbidden): no"),
        (Unauthorized("who", status=401), 1, "error from the server (Unauthorized): who"),
        (Conflict("exists", status=409, reason="AlreadyExists"), 1, "error from the server (AlreadyExists): exists"),
        (JobFailed(FAILED_JOB), 1, "trainingjob 'f' failed: f-worker-1-1 OOMKilled"),
        (JobFinished("trainingjob 'f' finished (Failed) without reaching Running", FAILED_JOB), 1, "trainingjob 'f'"),
        (Invalid("the TrainingJob is invalid: spec", status=None), 2, "error: the TrainingJob is invalid"),
        (Invalid("file: cannot read\nit as YAML", status=None), 2, "error: file: cannot read it as YAML"),
        (exits.UsageError("--kill x: no"), 2, "error: --kill x: no"),
        (WaitTimeout("did not reach Running in 3 s"), 3, "did not reach Running in 3 s"),
        (NotConfigured("no cluster", reason="NoCluster"), 4, "error: no cluster (tjctl finds the cluster by"),
        (
            NotConfigured("the CA file x cannot be read", reason="InvalidCACert"),
            2,
            "error: the CA file x cannot be read",
        ),
        (NotConfigured("the REST API's URL 'x' must", reason="InvalidServerURL"), 2, "error: the REST API's URL 'x'"),
        (NotConfigured("the REST API at x answered 301", reason=None), 4, "error: the REST API at x answered 301"),
        (Unavailable("unreachable: cannot connect"), 4, "error: unreachable: cannot connect"),
        (Unavailable("overloaded", status=503), 4, "error from the server (ServiceUnavailable): overloaded"),
    ],
)
def test_each_error_is_a_line_and_an_exit_code(error: Exception, code: int, first: str) -> None:
    assert exits.exit_code(error) == code
    said = exits.lines(error)
    assert said[0].startswith(first) and len(said) == 1, said
    assert ("tjctl finds the cluster" in said[0]) is (getattr(error, "reason", None) == "NoCluster"), said


def test_an_invalid_job_names_each_field_on_a_line_of_its_own() -> None:
    fields = [FieldError("spec.workers.replicas", "must be >= 1"), FieldError("spec.mode", "DDP or ParameterServer")]
    invalid = Invalid("the TrainingJob is invalid: spec.mode, spec.workers.replicas", fields, status=422)
    assert exits.lines(invalid) == [
        "error from the server (Invalid): the TrainingJob is invalid: spec.mode, spec.workers.replicas",
        "  spec.workers.replicas: must be >= 1",
        "  spec.mode: DDP or ParameterServer",
    ]
    told = "x is invalid: spec.a: Invalid value: 3: must be less"
    said = Invalid(told, [FieldError("spec.a", "Invalid value: 3: must be less"), FieldError("", "and more")])
    assert exits.lines(said) == [f"error: {told}", "  and more"]  # the message says the first field already
    assert str(said) == f"{told}; and more" and str(invalid).count("must be >= 1") == 1  # the same fields


def test_the_age_of_a_job_as_kubectl_says_it() -> None:
    now = datetime(2026, 1, 10, tzinfo=UTC)
    cases = {0: "0s", 45: "45s", 119: "119s", 130: "2m10s", 600: "10m", 3 * 3600: "3h", 5 * 3600 + 180: "5h3m",
             47 * 3600: "47h", 2 * 86400: "2d", 3 * 86400 + 4 * 3600: "3d4h", 400 * 86400: "400d",
             (2 * 365 + 3) * 86400: "2y3d", 9 * 365 * 86400: "9y"}  # fmt: skip
    for seconds, said in cases.items():
        created = datetime.fromtimestamp(now.timestamp() - seconds, UTC).isoformat().replace("+00:00", "Z")
        assert display.age(created, now) == said, seconds
    assert display.age(None, now) == "<unknown>"
    assert display.age("2026-01-10T00:00:30Z", now) == "<invalid>"
