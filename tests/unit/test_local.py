"""Local mode without torch: the same reconcile and planner over pods that are local processes, here tiny Python
programs whose exit codes follow the attempt, so restarts, permanent failures and parameter-server
replacements are exercised in a few seconds."""

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.support.builders import job_manifest

from trainingjob.local.capacity import Capacity
from trainingjob.local.cluster import run_local
from trainingjob.model import Phase, tracked
from trainingjob.settings import DEFAULT_TRAINER_IMAGE

pytestmark = pytest.mark.fast

# Exits 75 in attempt 1 and succeeds after: a rank that crashes once.
CRASH_ONCE = "import os, sys; sys.exit(75 if os.environ['TJ_ATTEMPT'] == '1' else 0)"


def python(code: str) -> dict[str, Any]:
    return {"replicas": 2, "command": ["python", "-c", code]}


def test_a_rank_that_crashes_once_restarts_the_gang_and_succeeds(tmp_path: Path) -> None:
    events: list[str] = []
    manifest = job_manifest("local", workers=python(CRASH_ONCE), trainer=None)
    status, _ = run_local(manifest, tmp_path, on_event=lambda e: events.append(e.reason))
    assert status is not None and status.phase == Phase.SUCCEEDED and status.attempt == 2
    assert status.restarts.retryable == 1 and status.last_failure and status.last_failure.exit_code == 75
    assert events[:2] == ["JobCreated", "RetryableFailure"] and events[-1] == "JobSucceeded"


def test_a_local_runs_servers_listen_on_loopback_only(tmp_path: Path) -> None:
    listens = "import os, sys; sys.exit(0 if os.environ.get('TJ_LISTEN_ADDRESS') == '127.0.0.1' else 78)"
    status, _ = run_local(job_manifest("local", workers=python(listens), trainer=None), tmp_path, on_event=print)
    assert status is not None and status.phase == Phase.SUCCEEDED


def test_a_permanent_exit_fails_without_a_restart(tmp_path: Path) -> None:
    manifest = job_manifest("local", workers=python("import sys; sys.exit(78)"), trainer=None)
    status, _ = run_local(manifest, tmp_path, on_event=lambda e: None)
    assert status is not None and status.phase == Phase.FAILED and status.attempt == 1
    assert next(c for c in status.conditions if c.type == "Failed").reason == "PermanentFailure"


def test_a_role_without_an_image_runs_the_default_one_as_on_a_cluster(tmp_path: Path) -> None:
    manifest = job_manifest("local", workers={"replicas": 1, "command": ["python", "-c", "pass"]}, trainer=None)
    status, cluster = run_local(manifest, tmp_path, on_event=lambda e: None)
    assert status is not None and status.phase == Phase.SUCCEEDED
    assert status.default_image == DEFAULT_TRAINER_IMAGE
    assert [p.manifest["spec"]["containers"][0]["image"] for p in cluster.pods.values()] == [DEFAULT_TRAINER_IMAGE]


@pytest.mark.parametrize(
    "workers",
    [
        pytest.param({"envFrom": [{"configMapRef": {"name": "settings"}}]}, id="env-from"),
        pytest.param({"initContainers": [{"name": "fetch", "image": "busybox:1.36"}]}, id="init-container"),
        pytest.param({"sidecars": [{"name": "shipper", "image": "fluent/fluent-bit:3.1"}]}, id="sidecar"),
    ],
)
def test_what_local_mode_cannot_run_is_refused_by_name(tmp_path: Path, workers: dict[str, Any]) -> None:
    manifest = job_manifest("local", workers=python("pass") | workers, trainer=None)
    with pytest.raises(ValueError, match="no envFrom, initContainers or sidecars"):
        run_local(manifest, tmp_path, on_event=lambda e: None)


def test_a_progress_report_left_by_an_earlier_run_in_the_work_folder_is_not_read_as_the_new_pods(
    tmp_path: Path,
) -> None:
    stale = tmp_path / "logs" / "local-worker-0-1.progress.json"
    stale.parent.mkdir(parents=True)
    stale.write_text('{"step": 999, "metrics": {"accuracy": 0.5}, "metricsStep": 999}')
    manifest = job_manifest("local", workers={"replicas": 1, "command": ["python", "-c", "pass"]}, trainer=None)
    steps: list[int] = []
    status, _ = run_local(manifest, tmp_path, on_status=lambda s: steps.append(s.progress.step if s.progress else 0))
    assert status is not None and status.phase == Phase.SUCCEEDED
    assert 999 not in steps and not stale.exists()


def _interrupted_run(tmp_path: Path, started: list[subprocess.Popen[bytes]]) -> list[int]:
    """Run two sleeping pods with Ctrl-C delivered as in a terminal (the test raises it); expect the run to stop
    with a KeyboardInterrupt; the pids of `started` that outlived it (all are killed after)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a background shell's SIGINT is ignored
    try:
        manifest = job_manifest("local", workers=python("import time; time.sleep(600)"), trainer=None)
        with pytest.raises(KeyboardInterrupt):
            run_local(manifest, tmp_path, on_event=lambda e: None)
    finally:
        signal.signal(signal.SIGINT, previous)
        left = [process.pid for process in started if process.poll() is None]
        for process in started:
            process.kill()
            process.wait()
    return left


def test_a_ctrl_c_while_a_pod_starts_still_stops_that_pods_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C lands just after a pod's process was forked: the run stops once the pass ends, and that process with
    it (it is on the record before the interrupt is raised), as with every other pod the pass started."""
    started: list[subprocess.Popen[bytes]] = []

    def popen_then_interrupt(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(real_popen(*args, **kwargs))
        signal.raise_signal(signal.SIGINT)
        return started[-1]

    real_popen = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", popen_then_interrupt)
    left = _interrupted_run(tmp_path, started)
    assert len(started) == 2 and not left, f"the pods' processes {left} outlived the run"  # the pass ended: both


def test_a_ctrl_c_while_the_status_is_written_stops_the_run_after_that_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C lands while the status is serialized (inside pydantic, which wraps an exception raised in its callbacks
    in an error of its own): the run stops with a KeyboardInterrupt, which tjctl reports as interrupted, after the
    pass ends, and no pod's process outlives it."""
    real_packed, real_popen = tracked.packed, subprocess.Popen
    packed: list[dict[str, Any]] = []
    started: list[subprocess.Popen[bytes]] = []

    def packed_then_interrupt(status: dict[str, Any]) -> dict[str, Any]:
        packed.append(status)
        if len(packed) == 1:
            signal.raise_signal(signal.SIGINT)
        return real_packed(status)

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(tracked, "packed", packed_then_interrupt)
    left = _interrupted_run(tmp_path, started)
    assert packed and started, "no pod started, or no status was serialized: the test no longer reaches its point"
    assert not left, f"the pods' processes {left} outlived the run"


# Trains (exits 0) only in a gang of two; in a larger one it waits for ranks that never come, as a rendezvous would.
TWO_OR_WAIT = "import os, sys, time; os.environ['WORLD_SIZE'] == '2' or time.sleep(60) or sys.exit(1)"


def test_with_room_for_two_workers_an_elastic_job_of_four_shrinks_to_two_and_succeeds(tmp_path: Path) -> None:
    events: list[str] = []
    workers = {**python(TWO_OR_WAIT), "replicas": 4, "minReplicas": 2}
    manifest = job_manifest("local", workers=workers, trainer=None)
    status, _ = run_local(manifest, tmp_path, on_event=lambda e: events.append(e.reason), capacity=Capacity(((0, 2),)))
    assert status is not None and status.phase == Phase.SUCCEEDED, status
    assert (status.attempt, status.restarts.total) == (2, 0)
    assert status.scale is not None and (status.scale.workers, status.scale.reason) == ("2/4", "CapacityLost")
    assert "Resized" in events
