"""The only Kubernetes I/O of the operator: a small Cluster protocol and its implementation on the API."""

import json
import logging
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from trainingjob.manifests import PROGRESS_PORT
from trainingjob.model import GROUP, KIND, PLURAL, VERSION, CheckpointStatus, Progress
from trainingjob.naming import job_selector, service_name
from trainingjob.observe import progress_from_report
from trainingjob.plan import Event

log = logging.getLogger(__name__)
Manifest = dict[str, Any]


def _ignore(status: int, error: client.ApiException) -> None:
    if error.status != status:
        raise error


class KubernetesCluster:
    """reconcile.Cluster on a real API server; 409 on create and 404 on delete mean "already done"."""

    def __init__(self, api: client.ApiClient, *, read_progress: bool = False, parallelism: int = 16) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.read_progress = read_progress
        self.pool = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="tj-write")

    def read_job(self, namespace: str, name: str) -> Manifest | None:
        try:
            job: Manifest = self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except client.ApiException as error:
            _ignore(404, error)
            return None
        return job

    def list_pods(self, namespace: str, job: str) -> list[Manifest]:
        response = self.core.list_namespaced_pod(namespace, label_selector=job_selector(job), _preload_content=False)
        items: list[Manifest] = json.loads(response.data)["items"]
        return items

    def service_exists(self, namespace: str, job: str) -> bool:
        try:
            self.core.read_namespaced_service(service_name(job), namespace, _preload_content=False)
        except client.ApiException as error:
            _ignore(404, error)
            return False
        return True

    def log_tail(self, namespace: str, pod: str, lines: int) -> str:
        try:
            text: str = self.core.read_namespaced_pod_log(pod, namespace, tail_lines=lines, _request_timeout=5)
        except Exception as error:  # logs are evidence, not a reason to stop reconciling
            log.info("no log for pod %s/%s: %s", namespace, pod, error)
            return ""
        return text

    def progress(self, pod: Manifest) -> tuple[Progress | None, CheckpointStatus | None]:
        """Rank 0's report from its progress endpoint, when reading it is on and it answers."""
        address = (pod.get("status") or {}).get("podIP")
        if not self.read_progress or not address:
            return None, None
        try:
            with urllib.request.urlopen(f"http://{address}:{PROGRESS_PORT}/progress", timeout=2) as response:
                report = json.loads(response.read())
        except (OSError, ValueError) as error:
            log.debug("no progress from %s: %s", address, error)
            return None, None
        return progress_from_report(report)

    def write_status(self, namespace: str, name: str, resource_version: str, status: Manifest) -> None:
        body = {"metadata": {"resourceVersion": resource_version}, "status": status}
        self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, body)

    def create(self, namespace: str, manifests: list[Manifest]) -> None:
        """Create all at once, in parallel: a large gang starts together, not pod by pod."""

        def create_one(manifest: Manifest) -> None:
            try:
                if manifest["kind"] == "Service":
                    self.core.create_namespaced_service(namespace, manifest)
                else:
                    self.core.create_namespaced_pod(namespace, manifest)
            except client.ApiException as error:
                _ignore(409, error)

        list(self.pool.map(create_one, manifests))

    def delete_pods(self, namespace: str, names: list[str]) -> None:
        def delete_one(name: str) -> None:
            try:
                self.core.delete_namespaced_pod(name, namespace)
            except client.ApiException as error:
                _ignore(404, error)

        list(self.pool.map(delete_one, names))

    def delete_job(self, namespace: str, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, propagation_policy="Background"
            )
        except client.ApiException as error:
            _ignore(404, error)

    def emit(self, job: Manifest, events: list[Event]) -> None:
        metadata = job["metadata"]
        now = datetime.now(UTC).isoformat()
        for event in events:
            body = {
                "metadata": {"name": f"{metadata['name']}.{uuid.uuid4().hex[:16]}"},
                "involvedObject": {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": KIND,
                    "name": metadata["name"],
                    "namespace": metadata["namespace"],
                    "uid": metadata["uid"],
                    "resourceVersion": metadata.get("resourceVersion"),
                },
                "type": event.type,
                "reason": event.reason,
                "message": event.message[:1024],
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
                "source": {"component": "trainingjob-operator"},
                "reportingComponent": "trainingjob-operator",
            }
            try:
                self.core.create_namespaced_event(metadata["namespace"], body)
            except client.ApiException as error:  # events are best effort
                log.warning("could not record event %s: %s", event.reason, error.reason)
