"""A queued job's Kueue Workload on the apiserver: read once per reconcile (with the ResourceFlavors its admission
names, and whether this cluster serves Workloads at all), and the one write the plan asks for (create, delete,
activate or deactivate, move to another queue, release the quota reservation after an eviction, set PodsReady,
mark Finished). Pure decisions are in children/workload.py and
plan/queue.py; this file only reads and writes. Writes are paced like every other write."""

import logging
import time
from datetime import datetime
from typing import Any

from kubernetes import client

from trainingjob.children.workload import (
    GROUP,
    VERSION,
    Act,
    QueueState,
    WorkloadAction,
    finish_patch,
    flavor_names,
    pods_ready_patch,
    queue_state,
    release_patch,
    spec_patch,
    workload_manifest,
    workload_name,
)
from trainingjob.kube.answers import namespace_terminating, status_of
from trainingjob.kube.ports import Manifest
from trainingjob.kube.resources import TIMEOUT, Resources
from trainingjob.model import TrainingJob

log = logging.getLogger(__name__)
PLURAL = "workloads"
SERVED_SECONDS = (3600.0, 30.0)  # how long discovery's answer is used: served, not served (Kueue may come)
FLAVOR_SECONDS = 60.0  # a ResourceFlavor read is used this long (admitted jobs read their Workload every 15 s)


class KubeQueues:
    """Workloads and ResourceFlavors through `api`; writes paced by `resources`' pacer."""

    def __init__(self, api: Any, resources: Resources) -> None:
        self.custom, self.scheduling = client.CustomObjectsApi(api), client.SchedulingV1Api(api)
        self.apis, self.resources = client.ApisApi(api), resources
        self._served: tuple[float, bool] = (float("-inf"), False)  # when discovery was asked, and its answer
        self._flavors: dict[str, tuple[float, Manifest]] = {}  # name -> (monotonic time read, the flavor)

    def served(self) -> bool:
        """Whether this cluster serves Kueue's Workloads (discovery, asked again after a while)."""
        asked, served = self._served
        if time.monotonic() - asked < SERVED_SECONDS[0 if served else 1]:
            return served
        groups = self.apis.get_api_versions(_request_timeout=TIMEOUT).groups or []
        served = any(g.name == GROUP and any(v.version == VERSION for v in g.versions) for g in groups)
        self._served = (time.monotonic(), served)
        return served

    def _get(self, namespace: str, name: str) -> Manifest | None:
        try:
            found: Manifest = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _request_timeout=TIMEOUT
            )
        except client.ApiException as error:
            if status_of(error) == 404:
                return None
            raise
        return found

    def _flavor(self, name: str) -> Manifest:
        read, flavor = self._flavors.get(name, (float("-inf"), {}))
        if time.monotonic() - read < FLAVOR_SECONDS:
            return flavor
        flavor = self._read_flavor(name)
        self._flavors[name] = (time.monotonic(), flavor)
        return flavor

    def _read_flavor(self, name: str) -> Manifest:
        try:
            found: Manifest = self.custom.get_cluster_custom_object(
                GROUP, VERSION, "resourceflavors", name, _request_timeout=TIMEOUT
            )
        except client.ApiException as error:
            if status_of(error) == 404:
                return {}
            raise
        return found

    def read(self, namespace: str, job: str, uid: str) -> QueueState:
        """The job's Workload as it is now; QueueState(served=False) when this cluster has no Kueue."""
        workload = self._get(namespace, workload_name(job, uid))
        if workload is None and not self.served():
            return QueueState(served=False)
        flavors = {name: self._flavor(name) for name in flavor_names(workload or {})}
        return queue_state(workload, flavors)

    def _priority(self, job: TrainingJob) -> tuple[str, int] | None:
        scheduling = job.spec.scheduling
        name = job.spec.workers.priority_class_name or (scheduling.priority_class_name if scheduling else None)
        if not name:
            return None
        try:
            found = self.scheduling.read_priority_class(name, _request_timeout=TIMEOUT)
        except client.ApiException as error:
            if status_of(error) == 404:
                return None  # the pods will be refused for it; the Workload goes without a priority
            raise
        return name, int(found.value)

    def apply(self, job: TrainingJob, action: WorkloadAction, now: datetime) -> None:
        """Do what the plan asked on the job's Workload. A Workload changed meanwhile (409) is left to the next
        reconcile, which reads it again."""
        namespace, name = str(job.metadata.namespace), str(job.metadata.name)
        uid = str(getattr(job.metadata, "uid", "") or "")
        if action.act == Act.CREATE:
            queue = job.spec.scheduling.queue_name if job.spec.scheduling else None
            self._create(namespace, workload_manifest(job, uid, str(queue), self._priority(job)))
            return
        workload = self._get(namespace, workload_name(name, uid))
        if workload is None:
            return
        if action.act == Act.LEAVE:
            self._delete(namespace, workload)
        elif action.act in SPEC_ACTS:
            self._patch(namespace, workload["metadata"]["name"], _spec_change(job, workload, action.act))
        else:
            self._patch(namespace, workload["metadata"]["name"], _status_change(workload, action, now), status=True)
        log.info("%s/%s: Kueue Workload %s: %s", namespace, name, workload["metadata"]["name"], action.act.value)

    def _create(self, namespace: str, manifest: Manifest) -> None:
        try:
            self.resources.paced(
                lambda: self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, manifest, _request_timeout=TIMEOUT
                )
            )
        except client.ApiException as error:
            if namespace_terminating(error):
                log.debug("%s: no Workload made: the namespace is being deleted", namespace)
                return  # its Workload went first as the namespace goes; the job goes next
            if status_of(error) != 409:
                raise
        log.info("%s: created Kueue Workload %s", namespace, manifest["metadata"]["name"])

    def _patch(self, namespace: str, name: str, patch: Manifest, *, status: bool = False) -> None:
        """A merge patch of the Workload (or its status); one changed meanwhile (409) or gone is left alone. One
        Kueue's webhook refuses (a queue change it no longer allows) is logged: the next reconcile reads again."""
        write = (
            self.custom.patch_namespaced_custom_object_status if status else self.custom.patch_namespaced_custom_object
        )
        try:
            self.resources.paced(
                lambda: write(
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    name,
                    patch,
                    _content_type="application/merge-patch+json",
                    _request_timeout=TIMEOUT,
                )
            )
        except client.ApiException as error:
            if status_of(error) == 422 or status_of(error) == 400:
                log.warning("%s: Kueue refused the change of Workload %s: %s", namespace, name, error.body)
            elif status_of(error) not in (404, 409):
                raise

    def _delete(self, namespace: str, workload: Manifest) -> None:
        """The Workload deleted, only the one read (its UID); Kueue frees its quota."""
        name, uid = workload["metadata"]["name"], workload["metadata"]["uid"]
        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid))
        try:
            self.resources.paced(
                lambda: self.custom.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name, body=body, _request_timeout=TIMEOUT
                )
            )
        except client.ApiException as error:
            if status_of(error) not in (404, 409):
                raise


SPEC_ACTS = (Act.ACTIVATE, Act.DEACTIVATE, Act.MOVE)


def _spec_change(job: TrainingJob, workload: Manifest, act: Act) -> Manifest:
    if act == Act.MOVE:
        return spec_patch(workload, queueName=job.spec.scheduling.queue_name if job.spec.scheduling else None)
    return spec_patch(workload, active=act == Act.ACTIVATE)


def _status_change(workload: Manifest, action: WorkloadAction, now: datetime) -> Manifest:
    if action.act == Act.RELEASE:
        return release_patch(workload, now)
    if action.act == Act.PODS_READY:
        return pods_ready_patch(workload, action.succeeded, action.reason, now)
    return finish_patch(workload, action.succeeded, action.message, now)
