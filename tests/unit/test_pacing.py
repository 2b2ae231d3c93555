"""checkpoint.everySteps Auto, the operator's half: what each attempt's trainer is told (the job's restarts and
running time, the prior, the bounds) in new pods and in orders to restart in place, and how rank 0's report of the
interval it chose reaches the status, with its reason, as untrusted input."""

import json
from datetime import timedelta
from typing import Any

import pytest
from tests.support.builders import SETTINGS, T0, job_manifest, make_job
from tests.support.fake_cluster import FakeCluster

from trainingjob.children import contract
from trainingjob.children.agent import Gang, GangState, RankFailure
from trainingjob.children.naming import Replica
from trainingjob.children.pacing import pacing_variable, reason, span
from trainingjob.children.progress_report import pacing_status, progress_from_report
from trainingjob.children.specs import pod_manifest
from trainingjob.model import TrainingJobStatus
from trainingjob.model.status import CheckpointPacing
from trainingjob.reconcile.job import reconcile

pytestmark = pytest.mark.fast

AUTO = {"volume": {"emptyDir": {}}, "everySteps": "Auto"}
FIXED = {"volume": {"emptyDir": {}}, "everySteps": 100}
BOUNDS = (5.0, 3600.0)


def status(**fields: Any) -> TrainingJobStatus:
    return TrainingJobStatus.model_validate(fields)


def goodput(wall: int, queued: int = 0, suspended: int = 0) -> dict[str, Any]:
    return {"wallSeconds": wall, "queuedSeconds": queued, "suspendedSeconds": suspended, "time": T0.isoformat()}


@pytest.mark.parametrize(
    ("checkpoint", "record", "expected"),
    [
        pytest.param(None, {}, None, id="no-checkpoint-volume"),
        pytest.param(AUTO, {}, {"auto": True, "failures": 0, "runningSeconds": 0.0}, id="young-job"),
        pytest.param(
            AUTO,
            {"restarts": {"retryable": 2, "oom": 1, "disruption": 3, "stalled": 1}, "goodput": goodput(900, 100, 200)},
            {"auto": True, "failures": 7, "runningSeconds": 600.0},
            id="every-kind-of-restart-and-running-time-only",
        ),
        pytest.param(FIXED, {"restarts": {"retryable": 1}}, {"auto": False, "failures": 1}, id="fixed-interval"),
    ],
)
def test_the_trainer_is_told_the_jobs_record(checkpoint: Any, record: Any, expected: Any) -> None:
    job = make_job(checkpoint=checkpoint) if checkpoint else make_job()
    text = pacing_variable(job.spec.checkpoint, status(**record), 21600.0, BOUNDS)
    if expected is None:
        assert text is None
        return
    told = json.loads(text or "")
    assert told | expected == told, "the record as told"
    assert (told["priorSeconds"], told["minSeconds"], told["maxSeconds"]) == (21600.0, *BOUNDS)


def test_auto_pods_carry_the_pacing_and_no_fixed_interval() -> None:
    job = make_job(checkpoint=AUTO)
    pod = pod_manifest(job, "uid", Replica("worker", 0), 1, pacing='{"auto":true}')
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env[contract.CHECKPOINT_PACING] == '{"auto":true}'
    assert contract.CHECKPOINT_EVERY_STEPS not in env and contract.CHECKPOINT_EVERY_SECONDS not in env


def _restarted_in_place(cluster: FakeCluster) -> str:
    """Start a two-rank Auto job, fail rank 1's trainer, let the backoff pass: the order goes out."""
    now = T0
    cluster.submit(job_manifest(namespace="ns", checkpoint=AUTO))
    reconcile(cluster, "ns", "job", now=now, settings=SETTINGS)
    for key in list(cluster.pods):
        cluster.run(*key)
    reconcile(cluster, "ns", "job", now=now, settings=SETTINGS)
    rank0 = "job-worker-0-1"
    cluster.gangs[rank0] = Gang(1, GangState.FAILED, 2, 1, (RankFailure(1, 137, now.timestamp()),))
    cluster.pods[("ns", rank0)]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]  # as its probe says
    for seconds in (1, 1 + SETTINGS.backoff_base_seconds + 0.1):
        reconcile(cluster, "ns", "job", now=now + timedelta(seconds=seconds), settings=SETTINGS)
    return rank0


def test_pods_and_an_order_in_place_tell_the_trainer_the_restarts_so_far() -> None:
    cluster = FakeCluster(clock=lambda: T0)
    rank0 = _restarted_in_place(cluster)
    env = {e["name"]: e.get("value") for e in cluster.pods[("ns", rank0)]["spec"]["containers"][0]["env"]}
    assert json.loads(env[contract.CHECKPOINT_PACING])["failures"] == 0, "the first attempt's pods: no failure yet"
    assert cluster.orders == [(rank0, 2)]
    told = json.loads(cluster.order_pacing[2] or "")
    assert (told["auto"], told["failures"]) == (True, 1), "attempt 2 knows of the failure before it"


def test_rank_0s_report_reaches_the_status_with_its_reason() -> None:
    report = {"step": 40, "checkpointPacing": {
        "auto": True, "intervalSeconds": 120.0, "optimalSeconds": 120.0, "saveSeconds": 0.5, "mtbfSeconds": 14400.0,
        "bound": None,
    }}  # fmt: skip
    progress, _ = progress_from_report(report)
    pacing = progress.checkpoint_pacing if progress else None
    assert pacing is not None and (pacing.auto, pacing.interval_seconds, pacing.mtbf_seconds) == (True, 120.0, 14400.0)
    assert pacing.reason == "Auto: every 120 s, Young/Daly: sqrt(2 x 0.5 s per save x 4.0 h between failures) = 120 s"


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("fast", id="not-an-object"),
        pytest.param({"intervalSeconds": 5}, id="without-auto"),
        pytest.param({"auto": "yes"}, id="auto-not-a-boolean"),
    ],
)
def test_a_malformed_pacing_report_is_left_out(raw: Any) -> None:
    progress, _ = progress_from_report({"step": 3, "checkpointPacing": raw})
    assert progress is not None and progress.step == 3 and progress.checkpoint_pacing is None


def test_hostile_numbers_in_a_pacing_report_are_dropped_one_by_one() -> None:
    pacing = pacing_status({
        "auto": True, "intervalSeconds": -1, "optimalSeconds": float("nan"), "saveSeconds": True,
        "mtbfSeconds": 1e300, "bound": "sideways",
    })  # fmt: skip
    assert pacing is not None
    assert (pacing.interval_seconds, pacing.optimal_seconds, pacing.save_seconds, pacing.mtbf_seconds) == (None,) * 4
    assert pacing.bound is None and pacing.reason.startswith("Auto: the first checkpoint measures")


@pytest.mark.parametrize(
    ("pacing", "expected"),
    [
        pytest.param(
            {"auto": True, "interval_seconds": 5.0},
            "Auto: the first checkpoint after 5.0 s measures what a save stalls training",
            id="auto-before-a-save",
        ),
        pytest.param(
            {"auto": True, "interval_seconds": 5.0, "optimal_seconds": 5.0, "save_seconds": 0.01, "mtbf_seconds": 60,
             "bound": "min"},
            "Auto: every 5.0 s, the operator's minimum; Young/Daly gives"
            " sqrt(2 x 0.01 s per save x 60 s between failures) = 1.1 s",
            id="held-at-the-minimum",
        ),
        pytest.param(
            {"auto": False, "optimal_seconds": 600.0, "save_seconds": 2.0, "mtbf_seconds": 90000},
            "fixed interval; Auto would checkpoint every 10.0 min: sqrt(2 x 2.0 s per save x 25.0 h between failures)"
            " = 10.0 min",
            id="fixed-shows-autos-choice",
        ),
        pytest.param(
            {"auto": False},
            "fixed interval; what Auto would choose shows after the first save",
            id="fixed-before-a-save",
        ),
    ],
)  # fmt: skip
def test_the_reason_says_the_interval_and_why(pacing: dict[str, Any], expected: str) -> None:
    assert reason(CheckpointPacing(**pacing)) == expected


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.042, "0.042 s"), (3.25, "3.2 s"), (42.4, "42 s"), (1800, "30.0 min"), (22000, "6.1 h")],
    ids=["subsecond", "seconds", "tens-of-seconds", "minutes", "hours"],
)
def test_spans_read_as_people_write_them(seconds: float, text: str) -> None:
    assert span(seconds) == text
