"""checkpoint.everySteps: Auto in real trainers: two DDP ranks save together at the paced interval and report it; a
parameter server paces its shard's saves the same way; rank 0's in-place agent hands an order's TJ_CHECKPOINT_PACING
to the next attempt and refuses a malformed one."""

import itertools
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from testbed.processes import free_port
from testbed.trainer_procs import (
    Pod,
    config_json,
    ddp_env,
    progress_of,
    ps_env,
    read_json,
    start_agent_gang,
    start_pod,
    start_role,
    wait_for,
)

from trainer.agent_http import request_json
from trainer.checkpoint_pacing import Interval, young_daly

pytestmark = pytest.mark.trainer

MIN_SECONDS, MAX_SECONDS = 0.3, 0.8
STEPS = 400
SLOW_STEPS = "0.01"  # seconds added to each step: the run lasts several intervals however fast the machine is
RUN_TIMEOUT = 120.0


def pacing(**fields: Any) -> str:
    """TJ_CHECKPOINT_PACING for Auto, with `fields` changed."""
    record = {"auto": True, "failures": 0, "runningSeconds": 0.0, "priorSeconds": 1e9}
    return json.dumps({**record, "minSeconds": MIN_SECONDS, "maxSeconds": MAX_SECONDS, **fields})


def saves(checkpoints: Path) -> list[tuple[int, float]]:
    """(step, the time its write completed) of every checkpoint kept, by step (one being replaced by a save of the
    same step while a trainer runs is left out: it is back at the next look)."""
    found = []
    for folder in checkpoints.glob("step-*"):
        try:
            marker = json.loads((folder / "COMPLETE").read_text())
        except FileNotFoundError:
            continue
        found.append((int(folder.name.removeprefix("step-")), float(marker["time"])))
    return sorted(found)


def test_ddp_ranks_save_together_at_the_paced_interval_and_report_it(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    config = config_json(workload="digits-mlp", steps=STEPS, batchSize=32, learningRate=0.1, seed=7)
    extra = {"TJ_CHECKPOINT_EVERY_STEPS": "", "TJ_CHECKPOINT_KEEP": "1000", "TJ_CHECKPOINT_PACING": pacing()}
    env = ddp_env(free_port(), 2, 2, 0, tmp_path, config=config, TJ_TEST_STEP_DELAY_SECONDS=SLOW_STEPS, **extra)
    pod = start_pod("auto", env, logs)
    pods.append(pod)
    assert pod.wait(RUN_TIMEOUT) == 0, pod.text()  # ranks that disagreed on a save would break a collective

    progress = progress_of(tmp_path)
    kept = saves(tmp_path / "checkpoints")
    assert len(kept) == progress["checkpointSaves"] == pod.text().count("checkpoint saved:"), "a save went missing"
    assert not list((tmp_path / "checkpoints").glob(".replaced-*")), "a step was saved twice"
    assert kept[-1][0] == STEPS  # the final save, not paced
    paced = [at for step, at in kept if step < STEPS]
    assert len(paced) >= 2, kept
    # Young/Daly's interval exceeds maxSeconds by far (a huge MTBF): after the first save, every gap is max's.
    gaps = [later - earlier for earlier, later in itertools.pairwise(paced)]
    assert min(gaps) >= MAX_SECONDS - 0.005, gaps

    report = progress["checkpointPacing"]
    assert (report["auto"], report["intervalSeconds"], report["optimalSeconds"], report["bound"]) == (
        True,
        MAX_SECONDS,
        MAX_SECONDS,
        "max",
    )
    save_seconds = progress["checkpointStallSeconds"] / progress["checkpointSaves"]
    assert report["saveSeconds"] == pytest.approx(save_seconds, abs=0.002)
    assert 1e9 <= report["mtbfSeconds"] <= 1e9 + RUN_TIMEOUT
    assert young_daly(save_seconds, report["mtbfSeconds"], MIN_SECONDS, MAX_SECONDS) == Interval(MAX_SECONDS, "max")


def at_least(count: int, kept: list[tuple[int, float]]) -> list[tuple[int, float]] | None:
    """`kept` once it holds `count` saves (for wait_for)."""
    return kept if len(kept) >= count else None


def test_a_parameter_server_saves_its_shard_at_the_paced_interval(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    """Its own interval: only the servers save in parameter-server mode, each on its own clock (no collective);
    worker 0 reports shard 0's pacing."""
    endless = config_json(workload="digits-mlp", steps=1_000_000, batchSize=32, learningRate=0.05)
    env = ps_env(tmp_path, shards=1, workers=1, config=endless, wait="60")
    env |= {"TJ_CHECKPOINT_EVERY_STEPS": "", "TJ_CHECKPOINT_KEEP": "1000", "TJ_CHECKPOINT_PACING": pacing()}
    server = start_role(pods, logs, env, "ps", 0)
    start_role(pods, logs, {**env, "TJ_TEST_STEP_DELAY_SECONDS": SLOW_STEPS}, "worker", 0)
    shard = tmp_path / "checkpoints" / "ps-0"
    kept = wait_for(lambda: at_least(4, saves(shard)), 90, "four paced saves")
    assert server.process.poll() is None, server.text()
    gaps = [later - earlier for (_, earlier), (_, later) in itertools.pairwise(kept)]
    # Young/Daly's interval exceeds maxSeconds by far (a huge MTBF): every gap is max's, never a fixed default.
    assert min(gaps) >= MAX_SECONDS - 0.005, gaps  # four saves within the wait: paced, not a default interval
    # Worker 0 reports for the job what the server told it: the interval in force and the stall it measured.
    report = wait_for(lambda: pacing_of(tmp_path / "progress.json", 1), 90, "worker 0 to report the pacing")
    assert (report["auto"], report["intervalSeconds"], report["bound"]) == (True, MAX_SECONDS, "max")
    assert 1e9 <= report["mtbfSeconds"] <= 1e9 + RUN_TIMEOUT


def trained(progress_file: Path, attempt: int) -> dict[str, Any] | None:
    """Rank 0's progress once `attempt` has trained a step, else None (for wait_for)."""
    progress = read_json(progress_file) or {}
    return progress if progress.get("attempt") == attempt and progress.get("step", 0) >= 1 else None


def pacing_of(progress_file: Path, attempt: int) -> dict[str, Any] | None:
    """Rank 0's checkpointPacing once `attempt` has measured a save, else None (for wait_for)."""
    progress = read_json(progress_file) or {}
    report = progress.get("checkpointPacing") or {}
    return report if progress.get("attempt") == attempt and report.get("saveSeconds") is not None else None


def test_an_order_paces_the_next_attempt_and_a_malformed_one_changes_nothing(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    directory = tmp_path / "job"
    endless = config_json(workload="digits-mlp", steps=1_000_000, batchSize=32, learningRate=0.1)
    gang = start_agent_gang(pods, logs, directory, 1, config=endless, TJ_CHECKPOINT_EVERY_STEPS="")
    progress_file = directory / "progress.json"
    first = wait_for(lambda: trained(progress_file, 1), 90, "attempt 1 to train")
    assert "checkpointPacing" not in first  # the pod's environment has no pacing
    status, child = request_json(gang.address(0), "GET", "/status")
    assert status == 200 and child is not None

    malformed = {"attempt": 2, "checkpointPacing": json.dumps({"auto": True})}
    status, body = request_json(gang.address(0), "POST", "/attempt", body=malformed, key=gang.key)
    assert status == 400 and body is not None and "field 'failures'" in body["error"], body
    assert request_json(gang.address(0), "GET", "/status") == (200, child), "the malformed order changed the pod"
    assert gang.pods[0].process.poll() is None

    ordered = pacing(failures=4, runningSeconds=1000.0, priorSeconds=4000.0)
    status, _ = request_json(
        gang.address(0), "POST", "/attempt", body={"attempt": 2, "checkpointPacing": ordered}, key=gang.key
    )
    assert status == 200
    report = wait_for(lambda: pacing_of(progress_file, 2), 90, "attempt 2 to measure a paced save")
    assert report["auto"] is True
    assert 250.0 <= report["mtbfSeconds"] <= 250.0 + RUN_TIMEOUT / 4  # (1000 + t) / 4: the job's own record
    assert MIN_SECONDS <= report["intervalSeconds"] <= MAX_SECONDS
    gang.pods[0].process.send_signal(signal.SIGTERM)
    assert gang.pods[0].wait(60) == 79, gang.pods[0].text()
