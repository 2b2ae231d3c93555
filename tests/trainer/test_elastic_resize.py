"""An elastic job resumed at a smaller world size through the real entry point (gloo ranks on this machine): the
global batch, the data order and the learning-rate schedule carry on as if the job had never shrunk."""

import json
from pathlib import Path

import pytest
import torch
from testbed.trainer_procs import Pod, config_json, load_model_state, progress_of, start_gang

pytestmark = pytest.mark.trainer

RUN_TIMEOUT = 120.0
SAMPLES, BATCH, ACCUMULATION, EPOCHS = 512, 8, 2, 2
EVERY, KILL_AT = 5, 7  # checkpoints every 5 steps; rank 1 is SIGKILLed after step 7: the job resumes from step 5


def config(seen: Path) -> str:
    seen.mkdir(parents=True, exist_ok=True)
    user = {"samples": SAMPLES, "seenDir": str(seen)}
    return config_json(
        entrypoint="tests/trainer/indexed_recipe.py:build",
        config=user,
        epochs=EPOCHS,
        batchSize=BATCH,
        gradientAccumulationSteps=ACCUMULATION,
        seed=5,
    )


def micro_batches(seen: Path, attempt: int, rank: int) -> list[list[int]]:
    """The sample indices of every micro-batch one rank of one attempt trained on, in order."""
    lines = (seen / f"attempt-{attempt}-rank-{rank}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def per_step(seen: Path, attempt: int, world: int, share: int, steps: int) -> list[set[int]]:
    """The samples of the first `steps` steps of one attempt: every rank's `share` of each step together."""
    flat = [[i for batch in micro_batches(seen, attempt, rank) for i in batch] for rank in range(world)]
    assert all(len(samples) >= steps * share for samples in flat), [len(samples) for samples in flat]
    return [{i for samples in flat for i in samples[s * share : (s + 1) * share]} for s in range(steps)]


def trained(seen: Path, attempt: int, rank: int) -> int:
    """How many samples one rank of one attempt trained on."""
    return sum(len(batch) for batch in micro_batches(seen, attempt, rank))


def run(pods: list[Pod], logs: Path, directory: Path, world: int, *, seen: Path, **extra: str) -> list[int]:
    gang = start_gang(
        pods, logs, directory, world, 1, config=config(seen), TJ_CHECKPOINT_EVERY_STEPS=str(EVERY), **extra
    )
    return [pod.wait(RUN_TIMEOUT) for pod in gang]


@pytest.mark.parametrize(("full", "smaller"), [(2, 1), (4, 2)], ids=["2-to-1", "4-to-2"])
def test_a_job_resumed_on_fewer_ranks_keeps_its_batch_data_order_and_schedule(
    pods: list[Pod], logs: Path, tmp_path: Path, full: int, smaller: int
) -> None:
    global_batch, total = BATCH * ACCUMULATION * full, EPOCHS * SAMPLES // (BATCH * ACCUMULATION * full)
    steps_per_epoch = total // EPOCHS
    reference_seen = tmp_path / "reference-seen"
    assert run(pods, logs, tmp_path / "reference", full, seen=reference_seen) == [0] * full
    reference = per_step(reference_seen, 1, full, global_batch // full, total)

    seen, directory = tmp_path / "seen", tmp_path / "elastic"
    killed = run(pods, logs, directory, full, seen=seen, TJ_TEST_KILL_AT_STEP=str(KILL_AT), TJ_TEST_KILL_RANK="1")
    assert killed[1] == -9 and progress_of(directory)["lastCheckpointStep"] == EVERY, killed
    resumed = run(pods, logs, directory, smaller, seen=seen, TJ_ATTEMPT="2", TJ_DESIRED_WORLD_SIZE=str(full))
    assert resumed == [0] * smaller, "\n".join(pod.text() for pod in pods[-smaller:])
    progress = progress_of(directory)
    assert (progress["resumedFromStep"], progress["step"]) == (EVERY, total)

    share = global_batch // smaller  # each rank's part of a step: more micro-batches than at the full world
    assert [trained(seen, 2, rank) for rank in range(smaller)] == [(total - EVERY) * share] * smaller
    assert all(len(batch) <= BATCH for rank in range(smaller) for batch in micro_batches(seen, 2, rank))
    steps = per_step(seen, 1, full, global_batch // full, EVERY) + per_step(seen, 2, smaller, share, total - EVERY)
    assert [len(step) for step in steps] == [global_batch] * total
    assert steps == reference, "a step trained on other samples than the unresized run's"
    epoch = [i for step in steps[:steps_per_epoch] for i in step]
    assert sorted(epoch) == list(range(SAMPLES)), "a sample of the resized epoch was seen twice or skipped"

    final = f"step-{total}"
    shrunk, unresized = (load_model_state(path / "checkpoints" / final) for path in (directory, tmp_path / "reference"))
    for name, tensor in unresized.items():
        assert torch.allclose(shrunk[name], tensor, atol=1e-5), f"{name} differs from the unresized run's"
