"""The SweepCluster port on the apiserver: a sweep, its trials' TrainingJobs, and the writes a sweep's reconcile
makes. The trial jobs it creates or suspends are not passed to on_written: their watch events are what wake the
jobs' reconciles."""

from trainingjob.kube.answers import answer
from trainingjob.kube.ports import Manifest
from trainingjob.kube.resources import Resources
from trainingjob.model import PLURAL
from trainingjob.model.sweep import SWEEP_PLURAL
from trainingjob.sweep.creation import NAME_TAKEN_ANSWER
from trainingjob.sweep.trials import SWEEP_LABEL, controller_of


class KubernetesSweeps:
    def __init__(self, resources: Resources) -> None:
        self.resources = resources

    def read_sweep(self, namespace: str, name: str) -> Manifest | None:
        return self.resources.read(SWEEP_PLURAL, namespace, name)

    def list_trial_jobs(self, namespace: str, sweep: str) -> list[Manifest]:
        return self.resources.list(PLURAL, namespace, f"{SWEEP_LABEL}={sweep}")

    def write_sweep_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        return self.resources.write_status(SWEEP_PLURAL, namespace, name, resource_version, patch)

    def create_job(self, namespace: str, manifest: Manifest) -> str | None:
        """A trial's TrainingJob; one of that name already there is taken as created when it is the sweep's (from
        an earlier pass), and answered as taken when it is not (a job without the sweep's label, which the
        trials' list does not show: someone's own). A refusal (a quota, a webhook, a policy) is answered in the
        apiserver's words; an apiserver that did not answer is raised (the reconcile retries)."""
        try:
            if self.resources.create(PLURAL, namespace, manifest):
                return None
        except Exception as error:
            found = answer(error)
            if found is None or found.transient or found.status is None:
                raise
            return f"{found.status} {found.reason or 'Refused'}: {found.message}"
        there = self.resources.read(PLURAL, namespace, str(manifest["metadata"]["name"]))
        return None if there is None or controller_of(there) == controller_of(manifest) else NAME_TAKEN_ANSWER

    def suspend_job(self, namespace: str, name: str) -> None:
        """Suspend a trial's job (its pods go, the job and its history stay)."""
        self.resources.merge_patch(PLURAL, namespace, name, {"spec": {"runPolicy": {"suspend": True}}})

    def delete_job(self, namespace: str, name: str, uid: str) -> None:
        self.resources.delete(PLURAL, namespace, name, uid)
