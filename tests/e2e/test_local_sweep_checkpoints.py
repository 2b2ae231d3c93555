"""Local mode for sweeps removes the finished trials' checkpoint folders as a cluster does: each trial checkpoints
to <workdir>/<job name>/<job uid>, and each new trial's rank 0 (the real trainer) removes the folders of the
finished trials but the best (keepBestCheckpoints: 1) as it starts; the sweep's status says which went. The last
trial's folder stays: no trial follows it."""

from pathlib import Path
from typing import Any

import pytest
from tests.support.builders import job_manifest, sweep_manifest

from trainingjob.local.sweep import LocalSweep
from trainingjob.model.sweep_status import SweepPhase

pytestmark = pytest.mark.e2e

RATES = [{"name": "lr", "path": "trainer.learningRate", "type": "Categorical", "values": [0.01, 1e-5, 0.003]}]


def _sweep() -> dict[str, Any]:
    template = job_manifest(workers={"replicas": 1}, trainer={"steps": 100, "evalEverySteps": 50, "batchSize": 64})
    spec = template["spec"]
    spec["trainer"]["optimizer"] = "adam"
    spec["workers"]["terminationGracePeriodSeconds"] = 0
    spec["checkpoint"] = {"volume": {"persistentVolumeClaim": {"claimName": "checkpoints"}}, "everySteps": 50}
    return sweep_manifest(
        "ckpt-sweep",
        parameters=RATES,
        template={"spec": spec},
        search={"algorithm": "Grid"},
        maxTrials=3,
        parallelism=1,
        keepBestCheckpoints=1,
    )


def test_a_local_sweep_removes_the_finished_trials_checkpoints_but_the_best(tmp_path: Path) -> None:
    sweep = LocalSweep(_sweep(), tmp_path)
    status = sweep.run(on_status=lambda status: None)
    assert status is not None and status.phase == SweepPhase.SUCCEEDED, status
    folders = {t.number: tmp_path / t.job_name / str(t.job_uid) for t in status.trials}
    # Trial 2 started once 0 and 1 had finished: it removed the worse one's folder, keeping the better one's.
    better, worse = sorted(status.trials[:2], key=lambda t: -float(t.objective or 0.0))
    assert worse.checkpoint_removed and not folders[worse.number].exists(), worse
    for kept in (better.number, 2):  # the best then, and the last (nothing followed it)
        assert sorted(p.name for p in folders[kept].iterdir() if p.name.startswith("step-")), kept
    assert status.checkpoints_removed == 1
    assert [t.number for t in status.trials if t.checkpoint_removed] == [worse.number]
