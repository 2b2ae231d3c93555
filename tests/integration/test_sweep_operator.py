"""Sweeps on the cluster tier with the real operator: trials become TrainingJobs the sweep controls, their pods run
on kwok nodes, each rank 0 ends with the trainer's termination message (its final metrics), and the sweep ranks
the trials and succeeds (and the operator's metrics say so); a sweep the model refuses fails, naming the field; the
trial after a finished one is told to remove its checkpoint folder, and the sweeper the last ones."""

import json
import time
import uuid
from functools import partial
from typing import Any

import pytest
from kubernetes.client import ApiException
from prometheus_client.parser import text_string_to_metric_families
from testbed.harness import Harness
from testbed.operator import OperatorProcess
from testbed.processes import poll_until
from tests.support.admission import refusing_creates
from tests.support.builders import claim_manifest, job_manifest, sweep_manifest
from tests.support.trials import BATCH, finish_trial

from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob.model.sweep import SWEEP_PLURAL
from trainingjob.sweep.checkpoints import REMOVE_ANNOTATION

pytestmark = pytest.mark.cluster
Manifest = dict[str, Any]


def _create(h: Harness, manifest: Manifest) -> None:
    h.custom.create_namespaced_custom_object(GROUP, VERSION, h.ns, SWEEP_PLURAL, manifest)


def _sweep(h: Harness, name: str) -> Manifest:
    found: Manifest = h.custom.get_namespaced_custom_object(GROUP, VERSION, h.ns, SWEEP_PLURAL, name)
    return found


def _wait_sweep(h: Harness, name: str, check: Any, what: str, timeout: float = 90) -> Manifest:
    def ready() -> Manifest | None:
        sweep = _sweep(h, name)
        return sweep if check(sweep.get("status") or {}) else None

    found: Manifest = poll_until(ready, timeout=timeout, what=what)
    return found


def _job_or_none(h: Harness, name: str) -> Manifest | None:
    try:
        return h.job(name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def _sweep_series(operator: OperatorProcess, namespace: str, sweep: str) -> dict[tuple[str, str], float]:
    """The sweep's samples on the operator's /metrics: (metric, its other labels) -> value."""
    status, text = operator.scrape()
    assert status == 200, text
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = dict(sample.labels)
            if (labels.pop("namespace", None), labels.pop("trainingsweep", None)) == (namespace, sweep):
                found[(sample.name, ",".join(f"{k}={v}" for k, v in sorted(labels.items())))] = sample.value
    return found


def test_a_grid_sweep_runs_its_trials_as_jobs_and_names_the_best(h: Harness, operator: OperatorProcess) -> None:
    manifest = sweep_manifest("grid", parameters=BATCH, search={"algorithm": "Grid"}, maxTrials=5, parallelism=2)
    manifest["spec"]["template"]["spec"]["workers"] = {"replicas": 1}
    _create(h, manifest)
    started = _wait_sweep(h, "grid", lambda s: len(s.get("trials", [])) == 2, "two trials recorded")
    assert [t["parameters"] for t in started["status"]["trials"]] == [{"batch": 16}, {"batch": 32}]  # the grid
    for number, batch in enumerate((16, 32)):  # the status names a trial before its job is created
        name = f"grid-{number}"
        job = poll_until(partial(_job_or_none, h, name), timeout=30, what=f"the job {name}")
        assert job["spec"]["trainer"]["batchSize"] == batch
        assert job["metadata"]["labels"]["trainingjob.io/trial"] == str(number)
        (owner,) = job["metadata"]["ownerReferences"]
        assert owner["kind"] == "TrainingSweep" and owner["uid"] == started["metadata"]["uid"]
    finish_trial(h, "grid-0", 0.91)
    finish_trial(h, "grid-1", 0.95)
    done = _wait_sweep(h, "grid", lambda s: s.get("phase") == "Succeeded", "the sweep succeeded")
    status = done["status"]
    assert status["bestTrial"]["jobName"] == "grid-1" and status["bestTrial"]["objective"] == 0.95
    assert status["counts"]["succeeded"] == 2 and len(status["trials"]) == 2  # a grid of two runs two trials
    assert [t["objective"] for t in status["trials"]] == [0.91, 0.95]
    # The operator's metrics say the same (polled: the status is written before the metrics are set).
    wanted = {("trainingjob_sweep_trials", "phase=Succeeded"): 2.0,
              ("trainingjob_sweep_best_objective", "metric=accuracy"): 0.95}  # fmt: skip
    poll_until(lambda: wanted.items() <= _sweep_series(operator, h.ns, "grid").items(), timeout=30, what="metrics")


def test_a_sweep_whose_parameter_the_job_would_refuse_fails_naming_it(h: Harness) -> None:
    """The CRD cannot see it (it would take CEL over the job's own rules); the operator's model does."""
    bad = [{"name": "lr", "path": "trainer.learningRate", "type": "Float", "min": 0.5, "max": 50.0}]
    _create(h, sweep_manifest("bad", parameters=bad))
    failed = _wait_sweep(h, "bad", lambda s: s.get("phase") == "Failed", "the invalid sweep failed")
    (condition,) = failed["status"]["conditions"]
    assert condition["reason"] == "InvalidSpec" and "parameters.0" in condition["message"]
    assert "less than or equal to 10" in condition["message"]
    assert not failed["status"].get("trials") and not h.pods("bad-0")  # no trial started


def _one_trial_waiting(h: Harness, name: str, reason: str) -> Manifest:
    """A sweep of one trial, once its trial waits for its job for `reason`: that trial."""
    manifest = sweep_manifest(name, parameters=BATCH, search={"algorithm": "Grid"}, maxTrials=1, parallelism=1)
    manifest["spec"]["template"]["spec"]["workers"] = {"replicas": 1}
    _create(h, manifest)
    waiting = _wait_sweep(h, name, lambda s: s.get("trials") and s["trials"][0].get("reason") == reason, reason)
    (trial,) = waiting["status"]["trials"]
    return dict(trial)


def test_a_refused_trial_job_says_why_then_runs_once_accepted(h: Harness, operator: OperatorProcess) -> None:
    api = h.custom.api_client

    def refused() -> bool:
        try:
            h.custom.create_namespaced_custom_object(GROUP, VERSION, h.ns, PLURAL, job_manifest("probe"), dry_run="All")
        except ApiException as error:
            return bool(error.status == 403)
        return False

    name = f"no-trainingjobs-{uuid.uuid4().hex[:6]}"
    with refusing_creates(api, name, GROUP, PLURAL, h.ns, refused=refused) as lift:
        trial = _one_trial_waiting(h, "held", "JobCreateRefused")
        assert trial["phase"] == "Pending" and "trainingjobs are refused here" in trial["message"], trial
        lift()
        poll_until(partial(_job_or_none, h, "held-0"), timeout=60, what="the trial's job, once accepted")
    running = _wait_sweep(h, "held", lambda s: "reason" not in s["trials"][0], "the wait forgotten")
    assert running["status"]["trials"][0].get("waitingSince") is None


def test_a_trial_whose_name_a_users_own_job_holds_says_so_and_leaves_it_alone(
    h: Harness, operator: OperatorProcess
) -> None:
    """A TrainingJob of the trial's name without the sweep's label (the trials' list does not show it): the trial
    says the name is taken (before: it waited for ever, in silence), and the user's job is left as it was."""
    h.custom.create_namespaced_custom_object(GROUP, VERSION, h.ns, PLURAL, job_manifest("mine-0"))
    trial = _one_trial_waiting(h, "mine", "JobNameTaken")
    assert trial["phase"] == "Pending" and "mine-0 exists and is not this sweep's" in trial["message"], trial
    users = h.job("mine-0")
    assert not users["metadata"].get("ownerReferences") and not users["spec"].get("runPolicy", {}).get("suspend")


def test_the_trial_after_a_finished_one_is_told_to_remove_its_checkpoint_folder(
    h: Harness, operator: OperatorProcess
) -> None:
    """On a shared checkpoint volume the next trial's job names the finished trial's folder (<job>/<uid>) in its
    annotation, and its rank 0's pod gets the list; the sweep keeps none here (keepBestCheckpoints: 0)."""
    manifest = sweep_manifest("ckpt", parameters=BATCH, search={"algorithm": "Grid"}, maxTrials=2, parallelism=1)
    template = manifest["spec"]["template"]["spec"]
    template["workers"] = {"replicas": 1, "terminationGracePeriodSeconds": 0}
    template["checkpoint"] = {"volume": {"persistentVolumeClaim": {"claimName": "sweep-checkpoints"}}, "everySteps": 10}
    manifest["spec"]["keepBestCheckpoints"] = 0
    _create(h, manifest)
    seen = _wait_sweep(h, "ckpt", lambda s: s.get("trials") and s["trials"][0].get("jobUid"), "trial 0's job seen")
    uid = seen["status"]["trials"][0]["jobUid"]
    first = h.job("ckpt-0")
    assert first["metadata"]["uid"] == uid and REMOVE_ANNOTATION not in first["metadata"]["annotations"]
    h.custom.delete_namespaced_custom_object(GROUP, VERSION, h.ns, PLURAL, "ckpt-0")  # its trial fails: finished
    second = poll_until(partial(_job_or_none, h, "ckpt-1"), timeout=60, what="the next trial's job")
    assert json.loads(second["metadata"]["annotations"][REMOVE_ANNOTATION]) == [f"ckpt-0/{uid}"]

    def rank0_env() -> dict[str, str] | None:
        pods = [p for p in h.pods("ckpt-1") if p.metadata.name.startswith("ckpt-1-worker-0-")]
        return {e.name: e.value for e in pods[0].spec.containers[0].env} if pods else None

    env = poll_until(rank0_env, timeout=60, what="the next trial's rank 0 pod")
    assert json.loads(env["TJ_REMOVE_CHECKPOINTS"]) == [f"ckpt-0/{uid}"]


def _claim(h: Harness, name: str, request: pytest.FixtureRequest) -> None:
    """A PersistentVolumeClaim of `name` and a volume made for it (the controller-manager binds them); the volume
    goes with the test."""
    volume = f"{h.ns}-{name}"[:63]
    spec = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
            "hostPath": {"path": "/tmp/unused"}, "persistentVolumeReclaimPolicy": "Retain"}  # fmt: skip
    h.core.create_persistent_volume({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
                                     "spec": spec})  # fmt: skip
    request.addfinalizer(lambda: h.core.delete_persistent_volume(volume))
    claim = claim_manifest(name)
    claim["spec"].update(storageClassName="", volumeName=volume)
    h.core.create_namespaced_persistent_volume_claim(h.ns, claim)


def test_a_finished_sweep_makes_a_sweeper_for_the_last_folders_and_ends_once_it_reports(
    h: Harness, operator: OperatorProcess, request: pytest.FixtureRequest
) -> None:
    """Once every trial has finished, the folders no trial followed to remove (here the last trial's; the best's
    stays) go to the sweeper, a job of one small worker running the trainer's sweeper mode, never a trial; the
    sweep ends once it has reported them gone, and its job is deleted."""
    _claim(h, "sweep-checkpoints", request)  # the trials' pods must be scheduled: a claim bound to a volume
    manifest = sweep_manifest("last", parameters=BATCH, search={"algorithm": "Grid"}, maxTrials=2, parallelism=2)
    template = manifest["spec"]["template"]["spec"]
    template["workers"] = {"replicas": 1, "terminationGracePeriodSeconds": 0, "resources": {"limits": {"cpu": "2"}}}
    template["checkpoint"] = {"volume": {"persistentVolumeClaim": {"claimName": "sweep-checkpoints"}}, "everySteps": 10}
    _create(h, manifest)
    poll_until(partial(_job_or_none, h, "last-1"), timeout=60, what="both trials' jobs")
    finish_trial(h, "last-0", 0.95)
    finish_trial(h, "last-1", 0.91)  # the worse: its folder goes, the best's (keepBestCheckpoints: 1) stays
    sweeping = _wait_sweep(h, "last", lambda s: s.get("sweeper"), "the sweeper recorded")
    assert sweeping["status"]["phase"] == "Running", sweeping["status"]
    uid = sweeping["status"]["trials"][1]["jobUid"]
    assert sweeping["status"]["sweeper"]["folders"] == [f"last-1/{uid}"]
    job = poll_until(partial(_job_or_none, h, "last-sweeper"), timeout=60, what="the sweeper's job")
    assert json.loads(job["metadata"]["annotations"][REMOVE_ANNOTATION]) == [f"last-1/{uid}"]
    assert "trainingjob.io/trial" not in job["metadata"]["labels"] and "trainer" not in job["spec"]
    workers = job["spec"]["workers"]
    assert workers["replicas"] == 1 and workers["command"] == [
        "python",
        "-m",
        "trainer",
        "--remove-checkpoints",
        "last",
    ]
    (rank0,) = h.wait_running_pods("last-sweeper", 1, attempt=1)
    env = {e.name: e.value for e in rank0.spec.containers[0].env}
    assert json.loads(env["TJ_REMOVE_CHECKPOINTS"]) == [f"last-1/{uid}"]
    final = {"step": 0, "heartbeat": time.time(), "finished": True, "checkpointsCleared": [f"last-1/{uid}"]}
    h.finish(rank0.metadata.name, 0, message=json.dumps(final))
    done = _wait_sweep(h, "last", lambda s: s.get("phase") == "Succeeded", "the sweep ended")
    status = done["status"]
    assert status["sweeper"]["phase"] == "Succeeded" and status["checkpointsRemoved"] == 1
    assert [t.get("checkpointRemoved", False) for t in status["trials"]] == [False, True]
    assert status["counts"]["succeeded"] == 2 and len(status["trials"]) == 2  # the sweeper is no trial
    poll_until(lambda: _job_or_none(h, "last-sweeper") is None, timeout=60, what="the sweeper's job deleted")
