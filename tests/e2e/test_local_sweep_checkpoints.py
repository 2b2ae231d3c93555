"""Local mode for sweeps removes the finished trials' checkpoint folders as a cluster does: each trial checkpoints
to <workdir>/<job name>/<job uid>, and each new trial's rank 0 (the real trainer) removes the folders of the
finished trials but the best (keepBestCheckpoints: 1) as it starts; the sweep's status says which went. Once every
trial has finished, the sweeper (a job that trains nothing) removes the last ones: only the best's folder stays."""

from pathlib import Path
from typing import Any

import pytest
from tests.support.builders import job_manifest, sweep_manifest

from trainingjob.local.sweep import LocalSweep
from trainingjob.model.sweep_status import SweeperPhase, SweepPhase

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
    best = status.best_trial
    assert best is not None
    # Trial 2 started once 0 and 1 had finished: it removed the worse one's folder; the sweeper removed the rest.
    assert sorted(p.name for p in folders[best.number].iterdir() if p.name.startswith("step-")), best
    gone = [t.number for t in status.trials if t.checkpoint_removed]
    assert gone == [n for n in range(3) if n != best.number], status.trials
    assert not [n for n in gone if folders[n].exists()]
    assert status.checkpoints_removed == 2
    sweeper = status.sweeper
    assert sweeper is not None and sweeper.phase == SweeperPhase.SUCCEEDED, sweeper
    assert status.counts.started == 3 and len(status.trials) == 3  # the sweeper is not a trial
    # It trained nothing: no checkpoint folder of its own (no checkpoint, no metrics history), only its logs.
    assert sorted(p.name for p in (tmp_path / sweeper.job_name).iterdir() if p.is_dir()) == ["logs"]
