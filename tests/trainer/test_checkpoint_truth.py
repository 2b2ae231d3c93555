"""What rank 0 says of its checkpoints is what is on the volume: a SIGTERM's final checkpoint is the last one, with
the steps keep-last-K left beside it; the next attempt says from its start which checkpoint it resumed from (the
status is right even when the operator never read the last words of the attempt before)."""

import signal
from pathlib import Path
from typing import Any

import pytest
from testbed.trainer_procs import Pod, config_json, ps_env, read_json, single_pod_env, start_pod, start_role, wait_for

pytestmark = pytest.mark.trainer


def _on_volume(checkpoints: Path) -> list[int]:
    """The steps of the complete checkpoints in the folder, newest first."""
    found = [int(p.name[5:]) for p in checkpoints.glob("step-*") if (p / "COMPLETE").is_file()]
    return sorted(found, reverse=True)


def _resumed(progress: Path) -> dict[str, Any] | None:
    """Attempt 2's report once it has said which checkpoint it resumed from (its first write may come before)."""
    report = read_json(progress)
    return report if report and report.get("attempt") == 2 and "lastCheckpointStep" in report else None


def _stopped(pod: Pod, progress: Path) -> dict[str, Any]:
    pod.process.send_signal(signal.SIGTERM)
    assert pod.wait(60) == 79, pod.text()
    final = read_json(progress)
    assert final is not None and final["exitCode"] == 79
    return final


def test_a_suspended_rank_says_its_final_checkpoint_and_the_next_attempt_where_it_resumed(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    config = config_json(workload="digits-mlp", steps=1_000_000, batchSize=16, learningRate=0.05)
    progress, checkpoints = tmp_path / "progress.json", tmp_path / "checkpoints"
    first = start_pod(
        "first", single_pod_env(tmp_path, config, TJ_CHECKPOINT_EVERY_STEPS="10", TJ_CHECKPOINT_KEEP="2"), logs
    )
    pods.append(first)
    wait_for(lambda: (read_json(progress) or {}).get("step", 0) >= 35, 120, "three periodic checkpoints")
    final = _stopped(first, progress)
    step = final["lastCheckpointStep"]
    assert step >= 35 and final["checkpointsKept"] == _on_volume(checkpoints) and len(final["checkpointsKept"]) == 2
    assert final["checkpointsKept"][0] == step

    env = single_pod_env(tmp_path, config, TJ_ATTEMPT="2", TJ_CHECKPOINT_EVERY_STEPS="", TJ_CHECKPOINT_KEEP="2")
    second = start_pod("second", env, logs)
    pods.append(second)
    started = wait_for(lambda: _resumed(progress), 120, "attempt 2's report of its checkpoint")
    assert (started["resumedFromStep"], started["lastCheckpointStep"]) == (step, step)
    assert started["checkpointsKept"] == _on_volume(checkpoints) == final["checkpointsKept"]
    wait_for(lambda: (read_json(progress) or {}).get("step", 0) > step, 120, "attempt 2 to train")
    again = _stopped(second, progress)
    assert again["lastCheckpointStep"] > step and again["checkpointsKept"] == [again["lastCheckpointStep"], step]


def test_parameter_server_checkpoints_are_reported_by_worker_0_and_named_by_the_jobs_step(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    """Two workers push to one shard: its version runs about twice as fast as the job's step, and the folders, the
    report and the next attempt's start all count the job's steps."""
    config = config_json(workload="digits-mlp", steps=1_000_000, batchSize=16, learningRate=0.05, stalenessBound=4)
    progress, shard = tmp_path / "progress.json", tmp_path / "checkpoints" / "ps-0"
    saving = {"TJ_CHECKPOINT_EVERY_STEPS": "20", "TJ_CHECKPOINT_KEEP": "2"}
    env = {**ps_env(tmp_path, shards=1, workers=2, config=config, wait="60"), **saving}
    first = [start_role(pods, logs, env, role, index) for role, index in (("ps", 0), ("worker", 0), ("worker", 1))]
    said = wait_for(
        lambda: (r := read_json(progress)) and r.get("step", 0) >= 40 and "lastCheckpointStep" in r and r,
        120,
        "a reported checkpoint",
    )
    assert said["lastCheckpointStep"] <= said["step"] and said["checkpointsKept"][0] == said["lastCheckpointStep"]
    for pod in first:
        pod.process.send_signal(signal.SIGTERM)
    assert [pod.wait(60) for pod in first] == [79, 79, 79], "\n".join(pod.text() for pod in first)
    newest = _on_volume(shard)
    assert newest and newest[0] <= read_json(progress)["step"]  # type: ignore[index]

    env = {**ps_env(tmp_path, shards=1, workers=2, config=config, wait="60"), "TJ_ATTEMPT": "2"}
    [start_role(pods, logs, env, role, index) for role, index in (("ps", 0), ("worker", 0), ("worker", 1))]
    started = wait_for(lambda: _resumed(progress), 120, "attempt 2's report of its checkpoint")
    assert (started["resumedFromStep"], started["lastCheckpointStep"]) == (newest[0], newest[0])
    assert started["checkpointsKept"] == newest


def _shard_steps(checkpoints: Path, shards: int) -> list[list[int]]:
    return [_on_volume(checkpoints / f"ps-{shard}") for shard in range(shards)]


@pytest.mark.parametrize("bound", [4, 0], ids=["asynchronous", "synchronous"])
def test_a_suspended_parameter_server_job_reports_its_final_checkpoint_and_resumes_from_it(
    pods: list[Pod], logs: Path, tmp_path: Path, bound: int
) -> None:
    """At a SIGTERM every shard writes a final checkpoint at worker 0's next step, worker 0's last report names it
    (as DDP's rank 0 does), and the next attempt resumes every shard and worker 0 from that same step."""
    config = config_json(workload="digits-mlp", steps=1_000_000, batchSize=16, learningRate=0.05, stalenessBound=bound)
    progress, checkpoints = tmp_path / "progress.json", tmp_path / "checkpoints"
    env = {**ps_env(tmp_path, shards=2, workers=2, config=config, wait="60"), "TJ_CHECKPOINT_KEEP": "2"}
    env["TJ_CHECKPOINT_EVERY_STEPS"] = "1000000"  # no periodic one: only the final checkpoint can be reported
    first = [start_role(pods, logs, env, role, i) for role, i in (("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1))]
    wait_for(lambda: (read_json(progress) or {}).get("step", 0) >= 30, 120, "worker 0 to train")
    for pod in first:
        pod.process.send_signal(signal.SIGTERM)
    assert [pod.wait(60) for pod in first] == [79] * 4, "\n".join(pod.text() for pod in first)
    final = read_json(progress)
    assert final is not None and final["exitCode"] == 79
    step = final.get("lastCheckpointStep")
    assert step is not None and step >= 30, final
    assert _shard_steps(checkpoints, 2) == [[step], [step]]  # every shard's final checkpoint, complete, one step
    assert final["checkpointsKept"] == [step]

    env["TJ_ATTEMPT"] = "2"
    [start_role(pods, logs, env, role, i) for role, i in (("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1))]
    started = wait_for(lambda: _resumed(progress), 120, "attempt 2's report of its checkpoint")
    assert (started["resumedFromStep"], started["lastCheckpointStep"]) == (step, step)


def test_workers_told_to_stop_after_their_servers_went_exit_as_preempted(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    """A suspend's SIGTERMs come in any order: workers whose server stopped first wait to reconnect, and their own
    SIGTERM then ends them as preempted (79) at once, not as a lost server once the wait deadline is out."""
    config = config_json(workload="digits-mlp", steps=1_000_000, batchSize=16, learningRate=0.05, stalenessBound=4)
    env = ps_env(tmp_path, shards=1, workers=2, config=config, wait="120")
    server, *workers = [start_role(pods, logs, env, role, i) for role, i in (("ps", 0), ("worker", 0), ("worker", 1))]
    wait_for(lambda: (read_json(tmp_path / "progress.json") or {}).get("step", 0) >= 10, 120, "worker 0 to train")
    server.process.send_signal(signal.SIGTERM)
    assert server.wait(60) == 79, server.text()
    wait_for(lambda: all("waiting up to" in w.text() for w in workers), 60, "the workers to wait for their server")
    for worker in workers:
        worker.process.send_signal(signal.SIGTERM)
    assert [worker.wait(20) for worker in workers] == [79, 79], "\n".join(w.text() for w in workers)
