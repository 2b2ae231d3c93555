"""What a pass records after each wave of creations, decided without the cluster: the pods created are tracked by
UID (the history notes when), refusals go into the Created condition, and a refusal is announced once, not on every
pass that meets it."""

import pytest
from tests.support.builders import at, make_job, step

from trainingjob.model import TrainingJobStatus
from trainingjob.plan.waves import Refusal, after_wave, waves

QUOTA = 'pods "job-worker-1-1" is forbidden: exceeded quota: gpu'

pytestmark = pytest.mark.fast


def first_status() -> TrainingJobStatus:
    job, _ = step(make_job(), [], service=False)
    assert job.status is not None
    return job.status


def test_the_created_pods_are_tracked_and_nothing_is_announced() -> None:
    decided = after_wave(first_status(), {"job-worker-0-1": "uid-0", "job-worker-1-1": "uid-1"}, [], at(3), 1)
    assert [(t.name, t.uid, t.outcome) for t in decided.status.tracked_pods] == [
        ("job-worker-0-1", "uid-0", None),
        ("job-worker-1-1", "uid-1", None),
    ]
    assert decided.event is None
    history = decided.status.history
    assert history and history.attempts[-1].pods_time == at(3)  # as created, not when the next pass sees them


def test_a_refusal_is_recorded_and_announced_once() -> None:
    refusal = Refusal("job-worker-1-1", 403, QUOTA)
    first = after_wave(first_status(), {"job-worker-0-1": "uid-0"}, [refusal], at(0), 1)
    created = next(c for c in first.status.conditions if c.type == "Created")
    assert (created.status, created.reason) == ("False", "PodCreateRefused") and QUOTA in created.message
    assert first.event is not None and (first.event.type, first.event.reason) == ("Warning", "PodCreateRefused")
    assert "job-worker-1-1 was refused (403)" in first.event.message
    again = after_wave(first.status, {}, [refusal], at(10), 1)
    assert again.event is None and again.status.tracked_pods == first.status.tracked_pods


ALL = "All 2 pods of attempt 1 were created."
CREATED = {"job-worker-0-1": "uid-0", "job-worker-1-1": "uid-1"}


@pytest.mark.parametrize(
    ("all_created", "refusals", "says"),
    [
        pytest.param(ALL, [], ("True", "PodsCreated", ALL), id="every-pod-created"),
        pytest.param(None, [], ("False", "CreatingPods"), id="some-of-the-missing-pods"),
        pytest.param(ALL, [Refusal("job-worker-1-1", 403, QUOTA)], ("False", "PodCreateRefused"), id="refused"),
        pytest.param(
            ALL, [Refusal("job", 403, QUOTA, kind="Service")], ("False", "CreatingPods"), id="service-refused"
        ),
    ],
)
def test_the_record_says_created_when_the_waves_made_every_missing_pod(
    all_created: str | None, refusals: list[Refusal], says: tuple[str, ...]
) -> None:
    """As the next pass would say it, once it saw the pods; not when the plan created only some (the others wait
    for their backoff) or anything was refused."""
    decided = after_wave(first_status(), CREATED, refusals, at(3), 1, all_created=all_created)
    created = next(c for c in decided.status.conditions if c.type == "Created")
    assert (created.status, created.reason, created.message)[: len(says)] == says


def test_a_pod_found_by_its_name_alone_is_not_taken_for_created() -> None:
    """A create answered 409 gives no UID: the pod may be a namesake still going, so the next pass decides."""
    found = {"job-worker-0-1": "uid-0", "job-worker-1-1": ""}
    decided = after_wave(first_status(), found, [], at(3), 1, all_created=ALL)
    assert next(c for c in decided.status.conditions if c.type == "Created").status == "False"


def test_a_wave_that_did_nothing_changes_nothing() -> None:
    status = first_status()
    assert after_wave(status, {}, [], at(0), 1).status == status


@pytest.mark.parametrize(
    ("count", "sizes"),
    [
        pytest.param(0, [], id="none"),
        pytest.param(5, [5], id="fewer-than-a-wave"),
        pytest.param(47, [16, 31], id="the-last-takes-the-rest"),
        pytest.param(1024, [16, 32, 64, 128, 256, 528], id="a-1024-gang"),
    ],
)
def test_waves_double_in_size(count: int, sizes: list[int]) -> None:
    assert [len(w) for w in waves(list(range(count)))] == sizes
