"""Deletes name the object they were decided on, against the envtest apiserver: a job or pod deleted and created
again under the same name just before the operator's delete goes out is left alone (the apiserver answers the
UID precondition with 409, and the release of its tracking finalizer, which names the UID, with 422), a pod an
earlier operator left at the tracking gate and created again is not released from it by a patch decided on its
predecessor (the patch names the UID), and a pod create answered 409 AlreadyExists is no refusal."""

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.pods import finish_pod
from tests.support.builders import job_manifest

from trainingjob.children.naming import JOB_LABEL, TRACKING_FINALIZER, TRACKING_GATE
from trainingjob.kube.job_cluster import KubernetesCluster
from trainingjob.kube.resources import Resources
from trainingjob.kube.sweep_cluster import KubernetesSweeps
from trainingjob.kube.writes import Pacer
from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob.plan import Settings
from trainingjob.reconcile.job import reconcile

pytestmark = pytest.mark.envtest
Manifest = dict[str, Any]


class RacedCluster(KubernetesCluster):
    """The apiserver's cluster where `race` runs just before each delete of the operator goes out: a user
    deleting an object and creating it again under its name."""

    def __init__(self, api: client.ApiClient, race: Callable[[], None]) -> None:
        super().__init__(api)
        self.race = race

    def delete_pods(self, namespace: str, pods: Mapping[str, str], *, force: bool = False) -> None:
        self.race()
        super().delete_pods(namespace, pods, force=force)

    def delete_job(self, namespace: str, name: str, uid: str, resource_version: str | None = None) -> None:
        self.race()
        super().delete_job(namespace, name, uid, resource_version)


def _pass(cluster: KubernetesCluster, namespace: str, name: str) -> None:
    reconcile(cluster, namespace, name, now=datetime.now(UTC), settings=Settings())


class Namesakes:
    """What a user does between the operator's decision and its delete: deletes an object and creates it again
    under the same name (a new UID). `made` holds the UIDs of the objects created so."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.custom, self.core, self.namespace = client.CustomObjectsApi(api), client.CoreV1Api(api), namespace
        self.made: list[str] = []

    def job(self, manifest: Manifest) -> Callable[[], None]:
        def race() -> None:
            name, ns = manifest["metadata"]["name"], self.namespace
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
            made = self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, manifest)
            self.made.append(made["metadata"]["uid"])

        return race

    def pod(self, name: str) -> Callable[[], None]:
        """The pod was never scheduled: it goes at once, once the user has removed its finalizers too. The pod made
        again holds the tracking finalizer as the old one did."""

        def race() -> None:
            old = self.core.api_client.sanitize_for_serialization(self.core.read_namespaced_pod(name, self.namespace))
            self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
            self.core.patch_namespaced_pod(name, self.namespace, {"metadata": {"finalizers": None}})
            kept = ("name", "labels", "annotations", "ownerReferences", "finalizers")
            body = {**old, "metadata": {k: v for k, v in old["metadata"].items() if k in kept}}
            body.pop("status", None)
            self.made.append(self.core.create_namespaced_pod(self.namespace, body).metadata.uid)

        return race


def _finish_all(core: client.CoreV1Api, namespace: str, job: str) -> list[str]:
    pods = sorted(
        p.metadata.name for p in core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}={job}").items
    )
    for pod in pods:
        finish_pod(core, namespace, pod, 0)
    return pods


def test_a_job_created_again_just_before_its_ttl_delete_goes_out_survives(
    trainingjob_crd: ControlPlane, envtest_ns: str
) -> None:
    manifest = job_manifest("ttl", workers=1, runPolicy={"ttlSecondsAfterFinished": 0})
    with trainingjob_crd.api_client() as api:
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        custom.create_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, manifest)
        namesakes = Namesakes(api, envtest_ns)
        cluster = RacedCluster(api, namesakes.job(manifest))
        _pass(cluster, envtest_ns, "ttl")  # creates the pod
        assert _finish_all(core, envtest_ns, "ttl")
        _pass(cluster, envtest_ns, "ttl")  # Succeeded, and the TTL of 0 has passed: the job's delete
        assert namesakes.made, "the reconcile never went to delete the finished job"
        job = custom.get_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, "ttl")
        assert job["metadata"]["uid"] == namesakes.made[-1]
        assert not job["metadata"].get("deletionTimestamp")


def test_a_pod_created_again_just_before_its_delete_goes_out_is_left_alone(
    trainingjob_crd: ControlPlane, envtest_ns: str
) -> None:
    with trainingjob_crd.api_client() as api:
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        manifest = job_manifest("clean", workers=2, runPolicy={"cleanPodPolicy": "All"})
        custom.create_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, manifest)
        namesakes = Namesakes(api, envtest_ns)
        cluster = KubernetesCluster(api)
        _pass(cluster, envtest_ns, "clean")
        first, second = _finish_all(core, envtest_ns, "clean")
        _pass(RacedCluster(api, namesakes.pod(first)), envtest_ns, "clean")  # Succeeded: cleanPodPolicy All
        assert namesakes.made, "the reconcile never went to delete the finished job's pods"
        survivor = core.read_namespaced_pod(first, envtest_ns)
        assert survivor.metadata.uid == namesakes.made[-1] and survivor.metadata.deletion_timestamp is None
        assert survivor.metadata.finalizers == [TRACKING_FINALIZER], "the release reached the namesake"
        with pytest.raises(client.ApiException) as gone:  # the pod it was decided on (never scheduled) went, let go of
            core.read_namespaced_pod(second, envtest_ns)
        assert gone.value.status == 404
        core.patch_namespaced_pod(first, envtest_ns, {"metadata": {"finalizers": None}})


def test_a_trial_job_created_again_is_not_deleted_by_the_sweeps_delete(
    trainingjob_crd: ControlPlane, envtest_ns: str
) -> None:
    manifest = job_manifest("trial", workers=1)
    with trainingjob_crd.api_client() as api:
        custom = client.CustomObjectsApi(api)
        old = custom.create_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, manifest)["metadata"]["uid"]
        namesakes = Namesakes(api, envtest_ns)
        namesakes.job(manifest)()
        sweeps = KubernetesSweeps(Resources(api, pacer=Pacer(4)))
        sweeps.delete_job(envtest_ns, "trial", old)
        assert (
            custom.get_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, "trial")["metadata"]["uid"]
            == (namesakes.made[-1])
        )
        sweeps.delete_job(envtest_ns, "trial", namesakes.made[-1])
        with pytest.raises(client.ApiException) as gone:
            custom.get_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, "trial")
        assert gone.value.status == 404


def test_a_pod_create_answered_already_exists_is_no_refusal(trainingjob_crd: ControlPlane, envtest_ns: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "twice"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    with trainingjob_crd.api_client() as api:
        cluster = KubernetesCluster(api)
        first = cluster.create(envtest_ns, [pod])
        assert list(first.pods) == ["twice"] and not first.refusals
        again = cluster.create(envtest_ns, [pod])
        assert not again.refusals and not again.pods  # the pod exists: the next pass sees it


def test_a_pod_created_again_just_before_its_ungate_stays_gated(trainingjob_crd: ControlPlane, envtest_ns: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gated"},
        "spec": {"schedulingGates": [{"name": TRACKING_GATE}], "containers": [{"name": "main", "image": "busybox"}]},
    }
    with trainingjob_crd.api_client() as api:
        core, cluster = client.CoreV1Api(api), KubernetesCluster(api)
        old = core.create_namespaced_pod(envtest_ns, pod).metadata.uid
        core.delete_namespaced_pod("gated", envtest_ns, grace_period_seconds=0)  # never scheduled: gone at once
        new = core.create_namespaced_pod(envtest_ns, pod).metadata.uid
        cluster.ungate(envtest_ns, {"gated": old})  # decided on the pod before: the apiserver refuses its UID
        gates = core.read_namespaced_pod("gated", envtest_ns).spec.scheduling_gates
        assert [g.name for g in gates or []] == [TRACKING_GATE]
        cluster.ungate(envtest_ns, {"gated": new})
        assert not core.read_namespaced_pod("gated", envtest_ns).spec.scheduling_gates
        cluster.ungate(envtest_ns, {"gone": new})  # a pod gone is no error
