"""A sweep of thousands of trials in a status under 1 MiB: the status lists every unfinished trial, the best, the
pruned ones whose jobs still run, and the newest finished ones (at most KEPT_FINISHED, their JSON at most
TRIALS_BUDGET_BYTES); the older finished trials are counted in status.summarised (by phase, with their objectives'
least, greatest and mean), and what the learners need of them is kept there too, compactly (summarised.learned,
at most MAX_LEARNED: sweep/learned.py): early stopping and TPE learn from every finished trial. The status written
is checked against STATUS_LIMIT_BYTES first."""

import json
from collections.abc import Collection, Sequence

from trainingjob.model.sweep import TrainingSweepSpec
from trainingjob.model.sweep_status import SummarisedTrials, TrainingSweepStatus, Trial, TrialPhase
from trainingjob.sweep.learned import appended

KEPT_FINISHED = 100  # in full, for people: the learners read the others' records
TRIALS_BUDGET_BYTES = 256 * 1024
STATUS_LIMIT_BYTES = 1024 * 1024  # under etcd's 1.5 MiB request limit, with room for the rest of the object


def total(status: TrainingSweepStatus) -> int:
    """How many trials the sweep has started: those listed and those summarised (numbered from 0, none skipped)."""
    return len(status.trials) + (status.summarised.total if status.summarised else 0)


def _size(trial: Trial) -> int:
    return len(trial.model_dump_json(by_alias=True, exclude_none=True)) + 1


def compacted(
    spec: TrainingSweepSpec, trials: Sequence[Trial], summary: SummarisedTrials | None, keep: Collection[int]
) -> tuple[list[Trial], SummarisedTrials | None]:
    """The trials to list, and the summary with the finished ones left out added: the unfinished trials and those
    numbered in `keep` are always listed; then the finished ones, newest first, as many as KEPT_FINISHED and
    TRIALS_BUDGET_BYTES allow."""
    listed = {t.number for t in trials if not t.phase.is_finished or t.number in keep}
    budget = TRIALS_BUDGET_BYTES - sum(_size(t) for t in trials if t.number in listed)
    finished = sorted((t for t in trials if t.number not in listed), key=lambda t: t.number, reverse=True)
    for trial in finished[:KEPT_FINISHED]:
        budget -= _size(trial)
        if budget < 0:
            break
        listed.add(trial.number)
    left_out = [t for t in trials if t.number not in listed]
    if not left_out:
        return list(trials), summary
    return [t for t in trials if t.number in listed], summarised(spec, summary, left_out)


def summarised(spec: TrainingSweepSpec, summary: SummarisedTrials | None, trials: Sequence[Trial]) -> SummarisedTrials:
    """`summary` with `trials` (finished ones) counted in, and the learners' records of them added."""
    before = summary or SummarisedTrials()
    values = [t.objective for t in trials if t.objective is not None]
    objectives = before.objectives + len(values)
    mean = before.objective_mean
    if values:
        mean = ((before.objective_mean or 0.0) * before.objectives + sum(values)) / objectives
    return SummarisedTrials(
        succeeded=before.succeeded + sum(t.phase == TrialPhase.SUCCEEDED for t in trials),
        failed=before.failed + sum(t.phase == TrialPhase.FAILED for t in trials),
        pruned=before.pruned + sum(t.phase == TrialPhase.PRUNED for t in trials),
        objectives=objectives,
        objective_min=min([*values, *_known(before.objective_min)], default=None),
        objective_max=max([*values, *_known(before.objective_max)], default=None),
        objective_mean=mean,
        checkpoints_removed=before.checkpoints_removed + sum(bool(t.checkpoint_removed) for t in trials),
        learned=appended(spec, before.learned, trials),
    )


def _known(value: float | None) -> list[float]:
    return [] if value is None else [value]


def status_bytes(status: TrainingSweepStatus) -> int:
    """The size of the status as written (compact JSON)."""
    written = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    return len(json.dumps(written, separators=(",", ":")))
