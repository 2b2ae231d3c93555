"""The status's record of the attempt's pods on the wire (model/tracked.py): pods that only run or succeeded, their
names the only ones of their kind, are written as name ranges without their UIDs; every other record stays whole;
a status read back gives the planner the same pods; ranges no operator wrote are refused, naming the field."""

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from trainingjob.model import PodOutcome, TrackedPod, TrainingJobStatus
from trainingjob.model.tracked import MAX_TRACKED, Stored, indices, runs, stored

pytestmark = pytest.mark.fast
T0 = datetime(2026, 1, 1, tzinfo=UTC)
JOB = "j" * 40


def _uid(i: int) -> str:
    return f"{i:08x}-0000-4000-8000-000000000000"


def _wire(status: TrainingJobStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def _read(status: TrainingJobStatus) -> TrainingJobStatus:
    return TrainingJobStatus.model_validate(json.loads(json.dumps(_wire(status))))


def test_a_gang_of_ten_thousand_running_pods_is_written_in_a_few_dozen_bytes() -> None:
    pods = [TrackedPod(name=f"{JOB}-worker-{i}-999", uid=_uid(i)) for i in range(10_240)]
    wire = _wire(TrainingJobStatus(tracked_pods=pods))
    assert wire["trackedPods"] == [{"name": f"{JOB}-worker-0-999", "uid": _uid(0)}]  # rank 0's keeps its UID
    assert wire["trackedPodRanges"] == [{"prefix": f"{JOB}-worker-", "suffix": "-999", "indices": "1-10239"}]
    assert len(json.dumps(wire["trackedPodRanges"])) < 120
    back = _read(TrainingJobStatus(tracked_pods=pods)).tracked_pods
    assert [t.name for t in back] == sorted(t.name for t in pods) and {t.uid for t in back} == {"", _uid(0)}


SAYS_MORE = {
    "failed": {"outcome": PodOutcome.FAILED},
    "first-finish": {"outcome": PodOutcome.SUCCEEDED, "finished_at": T0},
    "incarnation": {"incarnation": 2},
    "restarting": {"incarnation": 2, "restarting_since": T0},
}


@pytest.mark.parametrize("extra", list(SAYS_MORE.values()), ids=list(SAYS_MORE))
def test_a_record_that_says_more_than_run_or_succeeded_stays_whole_with_its_uid(extra: dict[str, object]) -> None:
    pods = [TrackedPod(name=f"job-worker-{i}-1", uid=_uid(i)) for i in range(1, 5)]
    pods[1] = pods[1].model_copy(update=extra)
    back = _read(TrainingJobStatus(tracked_pods=pods)).tracked_pods
    assert [t for t in back if t.uid] == [pods[1]]
    assert sorted(t.name for t in back if not t.uid) == ["job-worker-1-1", "job-worker-3-1", "job-worker-4-1"]


def test_two_records_of_one_name_keep_their_uids() -> None:
    """A counted failure still there and its slot's new pod: the name alone would not tell them apart."""
    failed = TrackedPod(name="job-worker-1-1", uid=_uid(1), outcome=PodOutcome.FAILED)
    again = TrackedPod(name="job-worker-1-1", uid=_uid(2))
    back = _read(TrainingJobStatus(tracked_pods=[failed, again, TrackedPod(name="job-worker-2-1", uid=_uid(0))]))
    assert [t for t in back.tracked_pods if t.uid] == [failed, again]


def test_succeeded_and_running_pods_are_separate_ranges_and_odd_names_stay_whole() -> None:
    pods = [
        *(TrackedPod(name=f"job-worker-{i}-1", uid=_uid(i), outcome=PodOutcome.SUCCEEDED) for i in (0, 1, 2, 5)),
        *(TrackedPod(name=f"job-worker-{i}-1", uid=_uid(i)) for i in (3, 4)),
        TrackedPod(name="job-ps-0-1", uid=_uid(9)),
        TrackedPod(name="job-ps-1-1", uid=_uid(10)),
        TrackedPod(name="job-worker-07-1", uid=_uid(7)),  # no index an operator writes: kept as it is
    ]
    wire = _wire(TrainingJobStatus(tracked_pods=pods))
    assert wire["trackedPodRanges"] == [
        {"prefix": "job-ps-", "suffix": "-1", "indices": "1"},
        {"prefix": "job-worker-", "suffix": "-1", "indices": "3-4"},
        {"prefix": "job-worker-", "suffix": "-1", "indices": "1-2,5", "outcome": "Succeeded"},
    ]
    assert sorted(t["name"] for t in wire["trackedPods"]) == ["job-ps-0-1", "job-worker-0-1", "job-worker-07-1"]


def test_a_status_written_before_the_ranges_reads_as_it_did() -> None:
    """An operator upgraded under a running job: every record whole, as the earlier version wrote them."""
    written = {"trackedPods": [{"name": f"job-worker-{i}-1", "uid": _uid(i)} for i in range(3)]}
    status = TrainingJobStatus.model_validate(written)
    assert [(t.name, t.uid) for t in status.tracked_pods] == [(f"job-worker-{i}-1", _uid(i)) for i in range(3)]
    assert stored(written) == Stored(frozenset({_uid(0), _uid(1), _uid(2)}), frozenset(), frozenset())


HOSTILE = {
    "descending": "5-2",
    "overlapping": "0-4,3-6",
    "unordered": "4,2",
    "too-many": f"0-{MAX_TRACKED}",
    "huge": "0-999999999999",
}


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_ranges_no_operator_wrote_are_refused_naming_the_field_without_expanding_them(text: str) -> None:
    ranges = [{"prefix": "job-worker-", "suffix": "-1", "indices": "0"}]
    ranges.append({"prefix": "job-worker-", "suffix": "-2", "indices": text})
    with pytest.raises(ValidationError, match=r"trackedPodRanges\[1\]"):
        TrainingJobStatus.model_validate({"trackedPodRanges": ranges})
    one = frozenset({"job-worker-0-1"})
    assert stored({"trackedPodRanges": ranges}) == Stored(frozenset(), one, one)


def test_more_ranges_than_an_operator_writes_are_refused() -> None:
    ranges = [{"prefix": f"job-r{i}-", "suffix": "-1", "indices": "1"} for i in range(65)]
    with pytest.raises(ValidationError, match="trackedPodRanges: at most 64 ranges, not 65"):
        TrainingJobStatus.model_validate({"trackedPodRanges": ranges})


def test_a_status_with_no_range_writes_no_ranges_field() -> None:
    """An operator of an earlier version refuses a field it does not know: none is written when none is needed."""
    assert "trackedPodRanges" not in _wire(TrainingJobStatus(tracked_pods=[TrackedPod(name="job-worker-0-1", uid="u")]))


def test_a_name_written_twice_without_a_uid_is_refused() -> None:
    written = {
        "trackedPods": [{"name": "job-worker-0-1", "uid": ""}],
        "trackedPodRanges": [{"prefix": "job-worker-", "suffix": "-1", "indices": "0-1"}],
    }
    with pytest.raises(ValidationError, match="duplicate name: job-worker-0-1"):
        TrainingJobStatus.model_validate(written)


def test_the_cache_reads_running_pods_by_uid_and_the_names_recorded_without_one() -> None:
    status = TrainingJobStatus(
        tracked_pods=[
            TrackedPod(name="job-worker-0-1", uid=_uid(0), incarnation=2),
            TrackedPod(name="job-worker-1-1", uid=_uid(1), outcome=PodOutcome.FAILED),
            TrackedPod(name="job-worker-2-1", uid=_uid(2)),
            TrackedPod(name="job-worker-3-1", uid=_uid(3), outcome=PodOutcome.SUCCEEDED),
        ]
    )
    named = frozenset({"job-worker-2-1", "job-worker-3-1"})
    assert stored(_wire(status)) == Stored(frozenset({_uid(0)}), frozenset({"job-worker-2-1"}), named)


@given(st.sets(st.integers(0, 300), max_size=60))
def test_runs_and_indices_are_inverse(numbers: set[int]) -> None:
    assert indices(runs(numbers)) == sorted(numbers) if numbers else runs(numbers) == ""


RECORD = st.builds(
    TrackedPod,
    name=st.builds("job-{}-{}-{}".format, st.sampled_from(["worker", "ps"]), st.integers(0, 40), st.integers(1, 3)),
    uid=st.uuids().map(str),
    outcome=st.sampled_from([None, None, PodOutcome.SUCCEEDED, PodOutcome.FAILED]),
    incarnation=st.sampled_from([None, None, None, 3]),
)


@given(st.lists(RECORD, max_size=40, unique_by=lambda t: t.uid))
def test_a_status_read_back_names_the_same_pods_and_loses_only_the_uids_a_name_replaces(
    records: list[TrackedPod],
) -> None:
    records.sort(key=lambda t: (t.name, t.uid))
    back = _read(TrainingJobStatus(tracked_pods=records)).tracked_pods
    names = [t.name for t in records]
    assert [t.model_copy(update={"uid": ""}) for t in back] == [t.model_copy(update={"uid": ""}) for t in records]
    for before, after in zip(records, back, strict=True):
        index = before.name.split("-")[2]
        alone = names.count(before.name) == 1 and index != "0"
        bare = alone and before.incarnation is None and before.outcome != PodOutcome.FAILED
        assert after.uid == ("" if bare else before.uid), (before, after)
