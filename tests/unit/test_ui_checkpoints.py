"""The dashboard lists only checkpoints that exist: of those the history saw, the ones the trainer last said
checkpoint.keep left on the volume (status.lastCheckpoint.kept). The page's own module runs under Node."""

import json
import shutil
import subprocess
from typing import Any

import pytest

from trainingjob_api.routers import ui

pytestmark = pytest.mark.fast


def _listed(job: dict[str, Any]) -> list[int]:
    """The steps the page's checkpoint table lists for `job`, newest first."""
    node = shutil.which("node")
    assert node is not None, "Node.js runs the dashboard's modules in this test"
    script = (
        f"import {{ existing }} from {json.dumps((ui.UI_DIR / 'js' / 'jobparts.js').as_uri())};"
        f"console.log(JSON.stringify(existing({json.dumps(job)}).map((c) => c.step)));"
    )
    done = subprocess.run(
        [node, "--input-type=module", "-e", script], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    steps: list[int] = json.loads(done.stdout)
    return steps


def _job(kept: list[int] | None, keep: int | None = None) -> dict[str, Any]:
    seen = [{"step": s, "path": f"/checkpoints/step-{s}", "time": "2026-01-01T00:00:00Z"} for s in (100, 200, 300, 400)]
    last = {**seen[-1], **({"kept": kept} if kept is not None else {})}
    spec = {"checkpoint": {"path": "/checkpoints", "keep": keep}} if keep is not None else {}
    return {"spec": spec, "status": {"lastCheckpoint": last, "history": {"checkpoints": seen}}}


@pytest.mark.parametrize(
    ("job", "steps"),
    [
        (_job([400, 300]), [400, 300]),
        (_job([400, 200]), [400, 200]),  # a save the operator missed between two reads is not listed either
        (_job(None, keep=2), [400, 300]),
        (_job(None), [400, 300, 200]),
    ],
    ids=["kept-by-the-trainer", "kept-with-a-gap", "older-trainer-keep-2", "older-trainer-default-keep"],
)
def test_the_dashboard_lists_only_checkpoints_that_exist(job: dict[str, Any], steps: list[int]) -> None:
    assert _listed(job) == steps
