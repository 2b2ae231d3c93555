"""`tjctl sweep run` end to end on the shipped example, as written: real trainer processes as trials, TPE choosing
their parameters, the median rule stopping weak ones, the best above 0.97 accuracy."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import REPO, tjctl

pytestmark = pytest.mark.e2e

SUMMARY = re.compile(
    r"Succeeded: (\d+) trials in \S+: (\d+) succeeded, (\d+) pruned, (\d+) failed\. "
    r"Best: trial (\d+) \(digits-sweep-\d+\), accuracy (0\.\d+) with lr=\S+, batch=\d+, optimizer=\w+"
)


STEPS = 1000  # the example's


def _report(work: Path, trial: int) -> dict[str, Any]:
    job = f"digits-sweep-{trial}"
    return dict(json.loads((work / job / "logs" / f"{job}-worker-0-1.progress.json").read_text()))


def test_the_digits_sweep_finds_above_97_percent_and_stops_weak_trials_early(tmp_path: Path) -> None:
    work = tmp_path / "work"
    result = tjctl("sweep", "run", "examples/digits-sweep.yaml", "--workdir", str(work), timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    found = SUMMARY.search(output)
    assert found, output
    trials, succeeded, pruned, failed, _, best = (float(group) for group in found.groups())
    assert trials == 12 and succeeded + pruned == 12 and failed == 0, output
    assert best > 0.97, output
    assert pruned >= 1, output
    stopped = [int(n) for n in re.findall(r"trial (\d+) Pruned: accuracy \S+ at step \d+ trailed", output)]
    assert len(stopped) == pruned, output
    reports = [_report(work, number) for number in stopped]
    # A pruned trial's trainer is stopped (SIGTERM) where the rule caught it, unless it finished first.
    early = [r["step"] for r in reports if r.get("exitCode") == 79 and r["step"] < STEPS]
    assert early, reports
    assert (REPO / "examples" / "digits-sweep.yaml").read_text().count("kind: TrainingSweep") == 1
