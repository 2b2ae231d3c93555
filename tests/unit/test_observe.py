"""Observation: only the job's own pods count, and nothing a pod or kubelet writes can reach the status unbounded."""

from typing import Any

import pytest
from tests.support.builders import JOB_UID, make_job, pod, seen

from trainingjob.children.naming import Replica
from trainingjob.children.observe import REASON_LENGTH, PodState, bounded, observe, pod_state
from trainingjob.model import FailureClass
from trainingjob.plan.classify import classify

pytestmark = pytest.mark.fast


def test_pods_of_a_namesake_are_foreign_not_ours() -> None:
    job = make_job()
    ours = pod(make_job(), Replica("worker", 0), 1)
    theirs = pod(job, Replica("worker", 1), 1, owner="deleted-job-uid", uid="old")
    observed = seen([ours, theirs])
    assert [p.name for p in observed.pods] == ["job-worker-0-1"] and observed.foreign == ("job-worker-1-1",)


def test_a_service_of_a_namesake_is_not_the_jobs() -> None:
    theirs = {"metadata": {"ownerReferences": [{"uid": "deleted-job-uid", "controller": True}]}}
    assert not observe([], "trainer", job_uid=JOB_UID, service=theirs).service_exists
    assert seen([], service=True).service_exists


@pytest.mark.parametrize(
    "status",
    [
        {"phase": "Failed", "reason": "OutOfnvidia.com/gpu" * 100, "message": "m" * 100_000},
        {
            "phase": "Bogus",
            "conditions": "not a list",
            "containerStatuses": [None, 7, {"name": "trainer", "state": []}],
            "initContainerStatuses": [None, {"name": 7, "state": {"terminated": 3, "waiting": {"reason": 4}}}],
        },
        {"phase": "Failed", "containerStatuses": [{"name": "trainer", "state": {"terminated": {"exitCode": 10**12}}}]},
        {"phase": None, "reason": 42, "message": ["x"]},
        {"phase": "Pending", "containerStatuses": [{"name": "trainer", "state": 7}]},
    ],
    ids=["huge-strings", "wrong-shapes", "impossible-exit-code", "wrong-types", "state-not-an-object"],
)
def test_hostile_pod_statuses_are_read_without_raising_and_bounded(status: dict[str, object]) -> None:
    manifest = pod(make_job(), Replica("worker", 0), 1)
    manifest["status"] = status
    state = pod_state(manifest, "trainer")
    assert state is not None and len(state.reason) <= REASON_LENGTH and len(state.message) <= 1024
    assert state.exit_code is None or -1 <= state.exit_code <= 255


def test_bounded_drops_control_characters_and_keeps_newlines() -> None:
    assert bounded("a\x00b\x1bc\nd", 10) == "abc\nd" and bounded(None, 5) == "" and bounded("x" * 9, 3) == "xxx"


def test_pods_without_our_labels_are_not_read() -> None:
    manifest = pod(make_job(), Replica("worker", 0), 1)
    manifest["metadata"]["labels"]["trainingjob.io/replica-index"] = "-1"
    assert pod_state(manifest, "trainer") is None


def _initializing(*init_statuses: dict[str, Any], trainer: dict[str, Any] | None = None) -> PodState:
    manifest = pod(make_job(), Replica("worker", 0), 1, phase="Pending")
    waiting = {"waiting": {"reason": "PodInitializing"}}
    manifest["status"]["initContainerStatuses"] = list(init_statuses)
    manifest["status"]["containerStatuses"] = [{"name": "trainer", "state": trainer or waiting}]
    state = pod_state(manifest, "trainer")
    assert state is not None
    return state


def test_a_failed_init_container_is_the_pods_failure_without_an_exit_code_of_the_trainer() -> None:
    failed = {"name": "fetch", "state": {"terminated": {"exitCode": 78, "reason": "Error", "message": "no data"}}}
    state = _initializing({"name": "shipper", "state": {"running": {}}}, failed)
    assert (state.reason, state.message, state.exit_code) == (
        "Init:Error",
        "container fetch exited with code 78: no data",
        None,
    )
    assert classify(state, make_job().spec.run_policy) == FailureClass.RETRYABLE


@pytest.mark.parametrize(
    ("init", "waiting"),
    [
        pytest.param(
            {"name": "fetch", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling"}}},
            "Init:ImagePullBackOff: container fetch: Back-off pulling",
            id="init-image-missing",
        ),
        pytest.param({"name": "fetch", "state": {"running": {}}}, "PodInitializing", id="init-running"),
        pytest.param({"name": "fetch", "state": {"terminated": {"exitCode": 0}}}, "PodInitializing", id="init-done"),
        pytest.param({"name": "fetch", "state": "hostile"}, "PodInitializing", id="hostile"),
    ],
)
def test_a_pod_waiting_on_its_init_containers_says_which_and_why(init: dict[str, Any], waiting: str) -> None:
    assert _initializing(init).waiting == waiting


def test_a_running_trainer_is_not_blamed_on_a_sidecar() -> None:
    crashing = {"name": "shipper", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    state = _initializing(crashing, trainer={"running": {}})
    assert (state.waiting, state.reason) == ("", "")


def _with_trainer(
    phase: str, trainer: dict[str, Any], last: dict[str, Any] | None = None, sidecar: str = "running"
) -> PodState:
    manifest = pod(make_job(), Replica("worker", 0), 1, phase=phase)
    shipper = {"name": "istio-proxy", "state": {sidecar: {}}}
    ours = {"name": "trainer", "state": trainer, **({"lastState": last} if last else {})}
    manifest["status"]["containerStatuses"] = [shipper, ours]
    state = pod_state(manifest, "trainer")
    assert state is not None
    return state


ENDED_0, ENDED_1 = {"terminated": {"exitCode": 0}}, {"terminated": {"exitCode": 1, "reason": "Error"}}


@pytest.mark.parametrize(
    ("phase", "trainer", "last", "seen_as", "held_up"),
    [
        pytest.param("Running", ENDED_0, None, "Succeeded", True, id="trainer done, sidecar running"),
        pytest.param("Running", ENDED_1, None, "Failed", True, id="trainer failed, sidecar running"),
        pytest.param("Running", {"running": {}}, None, "Running", False, id="trainer running"),
        pytest.param("Running", {"running": {}}, ENDED_1, "Running", False, id="an earlier run is no verdict"),
        pytest.param("Failed", ENDED_0, None, "Failed", False, id="the kubelet's verdict stands"),
        pytest.param("Pending", {"waiting": {"reason": "ContainerCreating"}}, None, "Pending", False, id="waiting"),
        pytest.param("Running", {"terminated": "hostile"}, None, "Running", False, id="hostile"),
    ],
)
def test_the_trainer_container_decides_whatever_a_sidecar_does(
    phase: str, trainer: dict[str, Any], last: dict[str, Any] | None, seen_as: str, held_up: bool
) -> None:
    state = _with_trainer(phase, trainer, last)
    unfinished = seen_as in {"Running", "Pending"}
    assert (state.phase, state.held_up, state.holds_its_node) == (seen_as, held_up, held_up or unfinished)


def test_a_pod_whose_containers_all_ended_is_not_held_up_while_the_kubelet_tears_it_down() -> None:
    state = _with_trainer("Running", ENDED_0, sidecar="terminated")
    assert (state.phase, state.held_up, state.holds_its_node) == ("Succeeded", False, False)


REPORT = '{"step": 6221, "attempt": 2, "finished": false}'


@pytest.mark.parametrize(
    ("said", "code", "message"),
    [
        pytest.param(REPORT, 137, "the trainer exited with code 137 after step 6221", id="the trainer's last report"),
        pytest.param('{"attempt": 1}', 1, "the trainer exited with code 1", id="a report without a step"),
        pytest.param('{"step": true}', 1, "the trainer exited with code 1", id="a hostile step"),
        pytest.param("{not json", 1, "{not json", id="braces, not json"),
        pytest.param("CUDA out of memory", 1, "CUDA out of memory", id="a message in words"),
        pytest.param("[1, 2]", 1, "[1, 2]", id="json, not an object"),
    ],
)  # fmt: skip
def test_the_trainers_last_report_is_said_in_words(said: str, code: int, message: str) -> None:
    manifest = pod(make_job(), Replica("worker", 1), 1, phase="Failed")
    ended = {"terminated": {"exitCode": code, "reason": "Error", "message": said}}
    manifest["status"]["containerStatuses"] = [{"name": "trainer", "state": ended}]
    state = pod_state(manifest, "trainer")
    assert state is not None and state.message == message


@pytest.mark.parametrize(
    ("metadata", "finalizers", "no_grace_left"),
    [
        pytest.param({}, (), False, id="none"),
        pytest.param({"finalizers": ["a.io/x", "b.io/y"]}, ("a.io/x", "b.io/y"), False, id="two"),
        pytest.param({"finalizers": "a.io/x"}, (), False, id="not-a-list"),
        pytest.param(
            {"finalizers": [f"f.io/{i}" for i in range(20)]},
            tuple(f"f.io/{i}" for i in range(8)),
            False,
            id="first-eight",
        ),
        pytest.param({"finalizers": ["x" * 999, 7]}, ("x" * 253,), False, id="bounded"),
        pytest.param({"deletionGracePeriodSeconds": 0}, (), True, id="no-grace-left"),
        pytest.param({"deletionGracePeriodSeconds": 30}, (), False, id="grace-left"),
    ],
)
def test_what_keeps_a_pod_is_read_and_bounded(
    metadata: dict[str, Any], finalizers: tuple[str, ...], no_grace_left: bool
) -> None:
    manifest = pod(make_job(), Replica("worker", 0), 1)
    del manifest["metadata"]["finalizers"]  # the tracking finalizer the operator creates it with
    manifest["metadata"].update(metadata)
    state = pod_state(manifest, "trainer")
    assert state is not None and (state.finalizers, state.no_grace_left) == (finalizers, no_grace_left)
