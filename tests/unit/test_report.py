"""Rank 0's progress report is untrusted input: anything a pod answers is read without raising, or dropped."""

import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest

from trainingjob.children.progress_report import MAX_REPORT_BYTES, final_report, parse_report, progress_from_report
from trainingjob.model.status import MAX_METRICS

pytestmark = pytest.mark.fast

HEARTBEAT = 1767225600  # 2026-01-01T00:00:00Z


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
        b'{"step": 1' + b"0" * 400 + b"}",
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
        "step-too-large-for-a-float",
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


@pytest.mark.parametrize(
    ("said", "finished"),
    [(True, True), (False, None), ("yes", None), (1, None), (None, None)],
    ids=["finished", "not-yet", "text", "a-number", "absent"],
)
def test_only_a_literal_true_says_the_trainer_finished(said: object, finished: bool | None) -> None:
    progress, _ = progress_from_report({"step": 7} | ({} if said is None else {"finished": said}))
    assert progress is not None and progress.finished is finished


def test_a_report_of_the_run_becomes_its_total_estimate_and_metrics() -> None:
    report = {
        "step": 300,
        "heartbeat": HEARTBEAT,
        "totalSteps": 1000,
        "etaSeconds": 90.5,
        "metrics": {"accuracy": 0.97, "val/loss": 0.11, "top_5": 1},
        "metricsStep": 250,
        "finished": False,
    }
    progress, _ = parse_report(json.dumps(report).encode())
    assert progress and progress.total_steps == 1000 and progress.metrics_step == 250
    assert progress.estimated_completion_time == datetime(2026, 1, 1, 0, 1, 30, 500000, tzinfo=UTC)
    assert progress.metrics == {"accuracy": 0.97, "val/loss": 0.11, "top_5": 1.0}
    assert progress.percent is None  # the operator's figure, not the trainer's


def _with(**fields: Any) -> dict[str, Any]:
    return {"step": 7, "heartbeat": HEARTBEAT, **fields}


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


@pytest.mark.parametrize(
    ("report", "kept"),
    [
        pytest.param(_with(totalSteps=-1), {}, id="negative-total"),
        pytest.param(_with(totalSteps=2.0**60), {}, id="huge-total"),
        pytest.param(_with(totalSteps="100"), {}, id="text-total"),
        pytest.param(_with(etaSeconds=math.inf), {}, id="infinite-eta"),
        pytest.param(_with(etaSeconds=-5), {}, id="negative-eta"),
        pytest.param(_with(etaSeconds=1e300), {}, id="eta-past-year-3000"),
        pytest.param(_with(etaSeconds=True), {}, id="bool-eta"),
        pytest.param({"step": 7, "etaSeconds": 60}, {}, id="eta-without-heartbeat"),
        pytest.param(_with(heartbeat=1e300, etaSeconds=60), {}, id="eta-after-a-bad-heartbeat"),
        pytest.param(_with(metrics=[1, 2]), {}, id="metrics-not-a-map"),
        pytest.param(_with(metrics={}, metricsStep=3), {}, id="no-metrics-no-metrics-step"),
        pytest.param(_with(metrics={"acc": 0.9}, metricsStep=-3), {"metrics": {"acc": 0.9}}, id="negative-step"),
        pytest.param(
            _with(metrics={"nan": math.nan, "inf": -math.inf, "ok": 1.5}), {"metrics": {"ok": 1.5}}, id="non-finite"
        ),
        pytest.param(
            _with(metrics={"t": "0.9", "b": True, "n": None, "d": {"x": 1}, "l": [1], "ok": 2}),
            {"metrics": {"ok": 2.0}},
            id="not-numbers",
        ),
        pytest.param(_with(metrics={"big": 10**400, "ok": 2}), {"metrics": {"ok": 2.0}}, id="too-large-for-a-float"),
        pytest.param(
            _with(metrics={"1st": 1, "a b": 2, "a\n": 3, "": 4, "x" * 64: 5, "\u00e9": 6, "x" * 63: 7}),
            {"metrics": {"x" * 63: 7.0}},
            id="bad-names",
        ),
        pytest.param(
            _with(metrics={f"m{i:02}": i for i in range(40)}),
            {"metrics": {f"m{i:02}": float(i) for i in range(MAX_METRICS)}},
            id="too-many-kept-first-by-name",
        ),
        pytest.param(_with(checkpointStallSeconds=12.5), {"checkpoint_stall_seconds": 12.5}, id="stall"),
        pytest.param(_with(checkpointStallSeconds=0.0117226), {"checkpoint_stall_seconds": 0.012}, id="in-ms"),
        pytest.param(_with(checkpointStallSeconds=-1), {}, id="negative-stall"),
        pytest.param(_with(checkpointStallSeconds=math.nan), {}, id="nan-stall"),
        pytest.param(_with(checkpointStallSeconds=1e12), {}, id="stall-past-ten-years"),
        pytest.param(_with(checkpointStallSeconds="3"), {}, id="text-stall"),
        pytest.param(_with(firstStepTime=HEARTBEAT - 5), {"first_step_time": _at(HEARTBEAT - 5)}, id="first-step"),
        pytest.param(_with(firstStepTime=1e300), {}, id="first-step-past-year-3000"),
        pytest.param(_with(firstStepTime=True), {}, id="bool-first-step"),
        pytest.param(_with(resumedFromStep=40), {"resumed_from_step": 40}, id="resumed"),
        pytest.param(_with(resumedFromStep=-40), {}, id="negative-resumed"),
    ],
)
def test_hostile_run_fields_are_dropped_or_clamped(report: dict[str, Any], kept: dict[str, Any]) -> None:
    progress, _ = parse_report(json.dumps(report).encode())
    assert progress is not None and progress.step == 7
    fields = ["total_steps", "estimated_completion_time", "metrics", "metrics_step", "first_step_time"]
    fields += ["checkpoint_stall_seconds", "resumed_from_step"]
    assert {name: value for name in fields if (value := getattr(progress, name)) is not None} == kept


def _pod_with(state: object, container: str = "trainer") -> dict[str, object]:
    return {"status": {"containerStatuses": [{"name": container, "state": state}]}}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (_pod_with({"terminated": {"exitCode": 0, "message": '{"step": 3}'}}), b'{"step": 3}'),
        (_pod_with({"running": {}}), None),
        (_pod_with({"terminated": {"exitCode": 137}}), None),
        (_pod_with({"terminated": {"exitCode": 0, "message": '{"step": 3}'}}, "log-shipper"), None),
        (_pod_with({"terminated": {"message": 7}}), None),
        (_pod_with({"terminated": "text"}), None),
        (_pod_with(None), None),
        ({"status": {"containerStatuses": "x"}}, None),
        ({"status": None}, None),
        ([], None),
    ],
    ids=[
        "said",
        "running",
        "silent",
        "a-sidecar-said",
        "not-text",
        "bad-terminated",
        "no-state",
        "bad-list",
        "no-status",
        "not-a-pod",
    ],
)
def test_final_report_is_the_exited_containers_message_or_nothing(pod: object, expected: bytes | None) -> None:
    assert final_report(pod) == expected


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        ([40, 30], [40, 30]),
        ([30, 40, 40], [40, 30]),
        ([30, 20], None),
        (list(range(40, 7, -1)), None),
        ([40, True], None),
        ([40, -1], None),
        ("40,30", None),
        ([], None),
    ],
    ids=["newest-first", "sorted-once", "without-the-last", "too-many", "a-bool", "negative", "not-a-list", "empty"],
)
def test_the_checkpoints_kept_on_the_volume_are_read_or_left_out(said: object, kept: list[int] | None) -> None:
    report = {"step": 42, "lastCheckpointStep": 40, "lastCheckpointPath": "/c/step-40", "lastCheckpointTime": HEARTBEAT}
    _, checkpoint = progress_from_report({**report, "checkpointsKept": said})
    assert checkpoint is not None and checkpoint.step == 40 and checkpoint.kept == kept
