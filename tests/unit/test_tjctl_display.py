"""What tjctl shows of a job's progress: the percent done, the time left from the estimated completion time (as
the API gives it, or garbage), a Succeeded job's result in one line, the loss in significant digits, and where its
time went (status.goodput, and a timeline's totals)."""

import io
from datetime import timedelta

import pytest
from rich.console import Console
from tests.support.builders import T0, at, job_manifest

from tjctl import display
from trainingjob.model import CheckpointStatus, TrainingResult

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("estimate", "expected"),
    [
        pytest.param(at(42), "42s", id="seconds"),
        pytest.param(at(250), "4m10s", id="minutes"),
        pytest.param(at(3 * 3600 + 5 * 60 + 59), "3h05m", id="hours"),
        pytest.param(at(2 * 86400 + 3 * 3600), "2d03h", id="days"),
        pytest.param(at(-30), "0s", id="overdue"),
        pytest.param((T0 + timedelta(seconds=90)).isoformat().replace("+00:00", "Z"), "1m30s", id="rfc3339-text"),
        pytest.param("soon", "", id="not-a-time"),
        pytest.param("2026-01-01T00:10:00", "", id="no-zone"),
        pytest.param(None, "", id="none"),
        pytest.param(7, "", id="a-number"),
    ],
)
def test_time_left(estimate: object, expected: str) -> None:
    assert display.time_left(estimate, T0) == expected


def test_a_result_in_one_line() -> None:
    outcome = TrainingResult(
        step=1000,
        metrics={"loss": 0.11, "accuracy": 0.97},
        metrics_step=1000,
        duration_seconds=52,
        checkpoint=CheckpointStatus(step=1000, path="/c/step-1000", time=T0),
    )
    assert (
        display.result(outcome)
        == "accuracy 0.9700, loss 0.1100 (step 1000) | 1000 steps in 52 s | checkpoint /c/step-1000"
    )
    assert display.result(TrainingResult(duration_seconds=7)) == "7 s"


def _job(status: object) -> dict[str, object]:
    return {**job_manifest("run"), "status": status}


def test_the_table_shows_percent_and_time_left_and_get_the_result() -> None:
    status = {
        "phase": "Running",
        "progress": {"step": 300, "percent": 30, "estimatedCompletionTime": "2026-01-01T00:04:10Z"},
        "result": {"metrics": {"accuracy": 0.97}, "durationSeconds": 5},
    }
    console = Console(width=200, record=True)
    console.print(display.table([_job(status)], T0))
    header, row = console.export_text().splitlines()
    cells = dict(zip(header.split(), row.split(), strict=True))
    assert (cells["STEP"], cells["PROGRESS"], cells["ETA"]) == ("300", "30%", "4m10s")
    assert display.result_of(_job(status)) == "accuracy 0.9700 | 5 s"


@pytest.mark.parametrize(
    "status",
    [
        pytest.param({"progress": {"percent": "30", "estimatedCompletionTime": 7}}, id="wrong-types"),
        pytest.param({"result": {"metrics": {"a b": "x"}}}, id="unreadable-result"),
        pytest.param(None, id="no-status"),
    ],
)
def test_an_odd_status_shows_blanks(status: object) -> None:
    console = Console(width=200, record=True)
    console.print(display.table([_job(status)], T0))
    assert "%" not in console.export_text()
    assert display.result_of(_job(status)) == ""


def test_the_wide_tables_loss_keeps_three_significant_digits() -> None:
    job = {"metadata": {"name": "a"}, "status": {"phase": "Running", "progress": {"step": 9, "loss": 3.2e-5}}}
    shown = Console(file=io.StringIO(), width=300)
    shown.print(display.table([job], T0, wide=True))
    assert "3.2e-05" in shown.file.getvalue()  # type: ignore[attr-defined]


GOODPUT = {"ratio": 0.275, "wallSeconds": 40, "queuedSeconds": 2, "startupSeconds": 3, "productiveSeconds": 11,
           "recoverySeconds": 12, "redoneSeconds": 12, "time": "2026-01-01T00:00:40Z"}  # fmt: skip


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        pytest.param(GOODPUT, "0.275 | 40s: queued 2s, startup 3s, productive 11s, recovery 12s, redone 12s",
                     id="the-worked-example"),
        pytest.param({**GOODPUT, "ratio": None, "productiveSeconds": 0, "checkpointStallSeconds": 90,
                      "suspendedSeconds": 3600, "wallSeconds": 3718},
                     "unknown | 1h01m: queued 2s, startup 3s, checkpoint stall 1m30s, recovery 12s, redone 12s, "
                     "suspended 1h00m", id="unknown-ratio-long-parts"),
        pytest.param({**GOODPUT, "wallSeconds": -1}, "", id="unreadable"),
        pytest.param("0.3", "", id="not-a-map"),
        pytest.param(None, "", id="none"),
    ],
)  # fmt: skip
def test_goodput_in_one_line(found: object, expected: str) -> None:
    assert display.goodput(found) == expected


def test_the_wide_table_shows_goodput_and_get_shows_where_the_time_went() -> None:
    job = _job({"phase": "Running", "goodput": GOODPUT})
    console = Console(width=300, record=True)
    console.print(display.table([job], T0, wide=True))
    header, row = console.export_text().splitlines()
    assert (header.split()[-1], row.split()[-1]) == ("GOODPUT", "0.275")
    assert display.goodput_of(job).startswith("0.275 | 40s: queued 2s")
    assert display.goodput_of(_job({"phase": "Running"})) == ""


def test_a_timeline_shows_its_totals_under_it() -> None:
    found = {"namespace": "ns", "name": "run", "start": T0.isoformat(), "rows": [{"id": "job", "label": "job"}],
             "spans": [], "marks": [], "totals": GOODPUT}  # fmt: skip
    console = Console(width=200, record=True)
    console.print(display.timeline(found))
    assert (
        console.export_text().splitlines()[-1]
        == "goodput: 0.275 | 40s: queued 2s, startup 3s, productive 11s, recovery 12s, redone 12s"
    )
