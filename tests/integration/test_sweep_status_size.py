"""A sweep's status at size in a real kube-apiserver: thousands of finished trials (each with a message of the
longest kept) reach the status a few hundred at a time, and every reconcile writes a status the apiserver takes,
under 1 MiB, listing the newest finished trials and the best, summarising the rest, counting every one, and keeping
a record of every succeeded one for the learners."""

import json
from collections.abc import Iterator

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from tests.support.builders import T0, at, sweep_manifest

from trainingjob.generate import crd
from trainingjob.kube.resources import Resources
from trainingjob.kube.sweep_cluster import KubernetesSweeps
from trainingjob.kube.writes import Pacer
from trainingjob.model import GROUP, VERSION
from trainingjob.model.sweep import MAX_SWEEP_NAME_LENGTH, SWEEP_PLURAL, TrainingSweep
from trainingjob.model.sweep_status import MAX_TRIAL_MESSAGE, TrainingSweepStatus, Trial, TrialPhase
from trainingjob.reconcile.sweep import reconcile_sweep
from trainingjob.sweep.learned import unpacked
from trainingjob.sweep.plan import job_name
from trainingjob.sweep.summary import KEPT_FINISHED, STATUS_LIMIT_BYTES, total

pytestmark = pytest.mark.envtest
CHUNK, ROUNDS = 300, 7  # a chunk and the trials listed fit one write of the seed (the apiserver's 1.5 MiB)


def _finished(number: int) -> Trial:
    succeeded = number % 3 != 0
    return Trial(
        number=number,
        job_name=job_name("big", number),
        parameters={"lr": 0.001 + number / 10_000, "batch": 16},
        phase=TrialPhase.SUCCEEDED if succeeded else TrialPhase.FAILED,
        objective=(number % 997) / 1000 if succeeded else None,
        reason=None if succeeded else "JobFailed",
        message="" if succeeded else f"trial {number}: " + "x" * MAX_TRIAL_MESSAGE,
        start_time=T0,
        completion_time=T0,
    )


@pytest.fixture
def api(trainingjob_crd: ControlPlane) -> Iterator[client.ApiClient]:
    """A client of the envtest tier, with both CRDs installed."""
    with trainingjob_crd.api_client() as api:
        install_crd(api, crd.SWEEP)
        yield api


def test_thousands_of_finished_trials_keep_a_status_the_apiserver_takes(api: client.ApiClient, envtest_ns: str) -> None:
    custom = client.CustomObjectsApi(api)
    manifest = sweep_manifest("big", maxTrials=10_000, maxFailedTrials=10_000, suspend=True)
    custom.create_namespaced_custom_object(GROUP, VERSION, envtest_ns, SWEEP_PLURAL, manifest)
    sweeps = KubernetesSweeps(Resources(api, pacer=Pacer(4)))
    for round_number in range(ROUNDS):  # trials that finished since the last reconcile, as a seed writes them
        stored = custom.get_namespaced_custom_object(GROUP, VERSION, envtest_ns, SWEEP_PLURAL, "big")
        status = TrainingSweepStatus.model_validate(stored.get("status") or {}, by_alias=True)
        first = total(status)
        trials = [*status.trials, *map(_finished, range(first, first + CHUNK))]
        seeded = status.model_copy(update={"trials": trials}).model_dump(mode="json", by_alias=True, exclude_none=True)
        sweeps.write_sweep_status(envtest_ns, "big", stored["metadata"]["resourceVersion"], seeded)
        outcome = reconcile_sweep(sweeps, envtest_ns, "big", now=at(round_number))
        assert outcome.after is not None and len(outcome.after.trials) <= KEPT_FINISHED + 1
    stored = custom.get_namespaced_custom_object(GROUP, VERSION, envtest_ns, SWEEP_PLURAL, "big")
    written = stored["status"]
    assert len(json.dumps(written, separators=(",", ":"))) < STATUS_LIMIT_BYTES
    status = TrainingSweepStatus.model_validate(written, by_alias=True)
    started = ROUNDS * CHUNK
    assert total(status) == started and status.summarised is not None
    assert status.counts.failed == started // 3 and status.counts.succeeded == started - started // 3
    assert [t.number for t in status.trials if t.phase.is_finished][-KEPT_FINISHED:] == list(
        range(started - KEPT_FINISHED, started)
    )
    best = max((t for t in map(_finished, range(started)) if t.objective is not None), key=lambda t: t.objective or 0)
    assert status.best_trial is not None and status.best_trial.objective == best.objective
    assert status.best_trial.number in {t.number for t in status.trials}
    learned = unpacked(TrainingSweep.from_manifest(stored).spec, status.summarised.learned)  # what the learners see
    listed = {t.number for t in status.trials}
    succeeded = [t.number for t in map(_finished, range(started)) if t.objective is not None]
    assert sorted(t.number for t in learned) == [n for n in succeeded if n not in listed]  # a best displaced comes late


def test_the_apiserver_refuses_a_sweep_whose_last_trial_job_name_would_not_fit(
    api: client.ApiClient, envtest_ns: str
) -> None:
    custom = client.CustomObjectsApi(api)
    name = "s" * MAX_SWEEP_NAME_LENGTH
    custom.create_namespaced_custom_object(
        GROUP, VERSION, envtest_ns, SWEEP_PLURAL, sweep_manifest(name, maxTrials=1000)
    )
    manifest = sweep_manifest(name[:-1] + "t", maxTrials=1001)
    with pytest.raises(client.ApiException) as refused:
        custom.create_namespaced_custom_object(GROUP, VERSION, envtest_ns, SWEEP_PLURAL, manifest)
    assert refused.value.status == 422 and "shorten the name or lower maxTrials" in str(refused.value.body)
