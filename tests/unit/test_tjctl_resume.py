"""`tjctl resume --wait` says where the running attempt resumed from, as its trainer said (the newest complete
checkpoint on the volume), not the checkpoint the status named when it was suspended."""

from typing import Any

import pytest

from tjctl.commands import _said
from trainingjob.model import TrainingJob

pytestmark = pytest.mark.fast


def _job(suspend: bool, phase: str, **status: Any) -> TrainingJob:
    manifest = {
        "apiVersion": "trainingjob.io/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "paused", "namespace": "ns"},
        "spec": {"workers": {"replicas": 1}, "trainer": {"steps": 10000}, "runPolicy": {"suspend": suspend}},
        "status": {"phase": phase, "attempt": 2, **status},
    }
    return TrainingJob.from_manifest(manifest)


SAVED = {"lastCheckpoint": {"step": 6000, "path": "/c/step-6000", "time": "2026-01-01T00:00:00Z"}}


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (
            {**SAVED, "progress": {"step": 6230, "attempt": 2, "resumedFromStep": 6221}},
            "from the checkpoint at step 6221",
        ),
        ({**SAVED, "progress": {"step": 6221, "attempt": 1, "resumedFromStep": 0}}, "running again (phase Running)"),
        (SAVED, "running again (phase Running)"),
    ],
    ids=["the-attempt-said", "an-earlier-attempts-report", "not-said-yet"],
)
def test_resume_wait_says_where_the_attempt_resumed(status: dict[str, Any], said: str) -> None:
    before, after = _job(True, "Suspended"), _job(False, "Running", **status)
    text = _said(before, after, suspend=False, waited=True)
    assert said in text and "6000" not in text
