"""Rank 0's progress report is untrusted input: anything a pod answers is read without raising, or dropped."""

import math

import pytest

from trainingjob.report import MAX_REPORT_BYTES, final_report, parse_report, progress_from_report


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b"null",
        b'"text"',
        b'{"step": 1e400}',
        b'{"step": -5}',
        b'{"step": "7"}',
        b'{"step": true}',
        b'{"step": 99999999999999999999999}',
        b"[" * 100_000,
        b"\xff\xfe",
        b"{",
        b" " * (MAX_REPORT_BYTES + 1),
    ],
    ids=[
        "list",
        "null",
        "string",
        "infinite-step",
        "negative-step",
        "string-step",
        "bool-step",
        "huge-step",
        "deep-nesting",
        "not-utf8",
        "truncated",
        "too-large",
    ],
)
def test_garbage_reports_are_dropped(body: bytes) -> None:
    assert parse_report(body) == (None, None)


def test_a_good_report_becomes_progress_and_a_checkpoint() -> None:
    progress, checkpoint = parse_report(
        b'{"step": 42, "loss": 0.25, "samplesPerSecond": 1000.0, "heartbeat": 1767225600, "attempt": 3,'
        b' "lastCheckpointStep": 40, "lastCheckpointPath": "/c/step-40", "lastCheckpointTime": 1767225590}'
    )
    assert progress and progress.step == 42 and progress.loss == 0.25 and progress.attempt == 3
    assert progress.last_heartbeat_time and progress.last_heartbeat_time.year == 2026
    assert checkpoint and checkpoint.step == 40 and checkpoint.path == "/c/step-40"


@pytest.mark.parametrize(
    "fields",
    [{"loss": math.nan}, {"loss": "low"}, {"samplesPerSecond": -1.0}, {"heartbeat": 1e300}, {"attempt": -1}],
    ids=["nan-loss", "text-loss", "negative-rate", "heartbeat-past-year-3000", "negative-attempt"],
)
def test_bad_optional_fields_are_left_out_not_fatal(fields: dict[str, object]) -> None:
    progress, _ = progress_from_report({"step": 7, **fields})
    assert progress is not None and progress.step == 7
    dumped = progress.model_dump()
    assert all(value is None or not isinstance(value, float) or math.isfinite(value) for value in dumped.values())


def _pod_with(state: object) -> dict[str, object]:
    return {"status": {"containerStatuses": [{"name": "trainer", "state": state}]}}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (_pod_with({"terminated": {"exitCode": 0, "message": '{"step": 3}'}}), b'{"step": 3}'),
        (_pod_with({"running": {}}), None),
        (_pod_with({"terminated": {"exitCode": 137}}), None),
        (_pod_with({"terminated": {"message": 7}}), None),
        (_pod_with({"terminated": "text"}), None),
        (_pod_with(None), None),
        ({"status": {"containerStatuses": "x"}}, None),
        ({"status": None}, None),
        ([], None),
    ],
    ids=["said", "running", "silent", "not-text", "bad-terminated", "no-state", "bad-list", "no-status", "not-a-pod"],
)
def test_final_report_is_the_exited_containers_message_or_nothing(pod: object, expected: bytes | None) -> None:
    assert final_report(pod) == expected
