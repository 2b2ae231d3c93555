"""The restart backoff doubles within a crash loop (failures in a row that saved nothing) and starts again from the
base after an attempt that moved the newest checkpoint forward."""

from typing import Any

import pytest
from tests.support.builders import SETTINGS, T0, make_job

from trainingjob.children.observe import Observed
from trainingjob.model import TrainingJobStatus
from trainingjob.plan.backoff import backoff_seconds, failures_in_a_row, in_place_backoff_seconds
from trainingjob.plan.types import Context

pytestmark = pytest.mark.fast


def attempt(number: int, resumed: int | None, outcome: str | None = "Failed") -> dict[str, Any]:
    record: dict[str, Any] = {"attempt": number, "startTime": T0.isoformat(), "resumedFromStep": resumed}
    return record | ({"outcome": outcome, "endTime": T0.isoformat()} if outcome else {})


def status(records: list[dict[str, Any]], failed: int, newest: int | None, restarts: int = 0) -> TrainingJobStatus:
    """A job whose attempt `failed` failed last, with `records` in its history and `newest` its newest checkpoint."""
    fields: dict[str, Any] = {
        "attempt": records[-1]["attempt"] if records else failed + 1,
        "history": {"attempts": records},
        "restarts": {"retryable": restarts},
        "lastFailure": {
            "pod": "job-worker-1", "attempt": failed, "failureClass": "Retryable", "reason": "Error",
            "time": T0.isoformat(),
        },
    }  # fmt: skip
    if newest is not None:
        fields["lastCheckpoint"] = {"step": newest, "path": f"/ckpt/step-{newest}", "time": T0.isoformat()}
    return TrainingJobStatus.model_validate(fields)


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        pytest.param(status([attempt(1, None, None)], 1, 100), 1, id="the-first-failure"),
        pytest.param(
            status([attempt(1, None), attempt(2, 100), attempt(3, 200), attempt(4, 300, None)], 4, 400),
            1,
            id="each-attempt-saved-before-it-failed: the base every time",
        ),
        pytest.param(
            status([attempt(1, None), attempt(2, 100), attempt(3, 100), attempt(4, 100, None)], 4, 100),
            4,
            id="a-crash-loop-that-saves-nothing-doubles",
        ),
        pytest.param(
            status([attempt(1, None), attempt(2, 100), attempt(3, 100, None)], 3, 100),
            3,
            id="the-loop-began-with-a-failure-that-had-saved",
        ),
        pytest.param(
            status([attempt(1, None), attempt(2, 100, "Suspended"), attempt(3, 100), attempt(4, 100)], 4, 100),
            2,
            id="a-suspension-ends-the-loop",
        ),
        pytest.param(
            status([attempt(1, None), attempt(2, None), attempt(3, None, None)], 3, None),
            3,
            id="without-checkpoints-every-failure-counts",
        ),
        pytest.param(
            status([attempt(1, None), attempt(2, 100), attempt(3, 200, None)], 2, 200),
            1,
            id="read-after-the-next-attempt-began: its resume point says what the failed one saved",
        ),
        pytest.param(status([], 1, None, restarts=5), 5, id="no-history-of-it: the restarts so far"),
    ],
)
def test_failures_in_a_row(job: TrainingJobStatus, expected: int) -> None:
    assert failures_in_a_row(job) == expected


def test_the_delay_doubles_in_the_loop_up_to_the_maximum() -> None:
    ctx = Context(make_job(), Observed(()), T0, SETTINGS)
    loop = [attempt(1, None), *(attempt(n, 100) for n in range(2, 8)), attempt(8, 100, None)]
    delays = [backoff_seconds(ctx, status(loop[:n], n, 100)) for n in range(1, 9)]
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]
    productive = [attempt(1, None), attempt(2, 100), attempt(3, 200, None)]
    assert backoff_seconds(ctx, status(productive, 3, 300, restarts=7)) == SETTINGS.backoff_base_seconds


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        pytest.param(status([attempt(1, None, None)], 1, 100), 0, id="the-first-attempt-saved: at once"),
        pytest.param(status([attempt(1, None, None)], 1, None), 10, id="the-first-attempt-saved-nothing: the base"),
        pytest.param(
            status([attempt(1, None), attempt(2, 100), attempt(3, 200, None)], 3, 300), 0, id="each-attempt-saved"
        ),
        pytest.param(
            status([attempt(1, None), attempt(2, 100), attempt(3, 100, None)], 3, 100),
            40,
            id="a-crash-loop-after-a-save: doubles as before",
        ),
        pytest.param(
            status([attempt(1, None), attempt(2, 100), attempt(3, 200, None)], 2, 200),
            0,
            id="read-after-the-next-attempt-began: its resume point says the failed one saved",
        ),
        pytest.param(
            status([attempt(1, None), attempt(2, 100), attempt(3, 100)], 2, 100), 20, id="resumed-where-it-began"
        ),
        pytest.param(status([], 1, 100, restarts=1), 10, id="no-history-of-it: the backoff"),
    ],
)
def test_a_restart_in_place_after_an_attempt_that_saved_waits_for_nothing(
    job: TrainingJobStatus, expected: int
) -> None:
    ctx = Context(make_job(), Observed(()), T0, SETTINGS)
    assert in_place_backoff_seconds(ctx, job) == expected
