"""The only Kubernetes I/O of the operator: a small Cluster protocol and its implementation on the API."""

import base64
import http.client
import json
import logging
import secrets
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar

from kubernetes import client

from trainingjob.children.access import KEY_BYTES, KEY_FILE
from trainingjob.children.naming import TRACKING_GATE, job_selector, service_name
from trainingjob.children.progress_report import MAX_REPORT_BYTES, Report, final_report, parse_report
from trainingjob.children.specs import PROGRESS_PORT
from trainingjob.kube.ports import Conflict, Created, Gone
from trainingjob.model import GROUP, KIND, PLURAL, VERSION
from trainingjob.model.sweep import SWEEP_PLURAL
from trainingjob.plan import Event
from trainingjob.plan.creation import Refusal
from trainingjob.runtime.writes import Pacer, Throttled, windowed
from trainingjob.sweep.trials import SWEEP_LABEL

log = logging.getLogger(__name__)
Manifest = dict[str, Any]
T = TypeVar("T")
TIMEOUT = (5, 30)  # connect, read: a hung apiserver connection must not hold a reconcile for ever
PROGRESS_SECONDS = 2.0


def _ignore(status: int, error: client.ApiException) -> None:
    if error.status != status:
        raise error


def _message(error: client.ApiException) -> str:
    """The apiserver's own message from an error response, or its reason."""
    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)
    except (ValueError, AttributeError):
        return str(error.reason)


def read_bounded(host: str, port: int, path: str, limit: int, seconds: float) -> bytes | None:
    """GET http://host:port/path, at most `limit` bytes within `seconds` in all, or None: a pod that answers
    slowly, endlessly or not at all costs a reconcile two seconds at most."""
    deadline = time.monotonic() + seconds
    connection = http.client.HTTPConnection(host, port, timeout=seconds)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        if response.status != 200:
            return None
        body = b""
        while len(body) <= limit:
            if connection.sock is not None:
                connection.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            chunk = response.read1(min(16384, limit + 1 - len(body)))
            if not chunk:
                return body
            body += chunk
            if time.monotonic() > deadline:
                return None
        return None
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def _ignore_written(_: Manifest) -> None:
    pass


def _retry_after(error: client.ApiException) -> float | None:
    try:
        return float(str((error.headers or {}).get("Retry-After")))
    except ValueError:
        return None


class KubernetesCluster:
    """reconcile.Cluster on a real API server; 409 on create and 404 on delete mean "already done". What the
    apiserver answers to each write (the job, pods and Services as written) goes to `on_written`. The parallel
    writes of all reconciles share `pacer`, and each call sends at most `parallelism` of its own at once."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        read_progress: bool = False,
        parallelism: int = 16,
        on_written: Callable[[Manifest], None] = _ignore_written,
        pacer: Pacer | None = None,
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.networking = client.NetworkingV1Api(api)
        self.read_progress = read_progress
        self.pool = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="tj-write")
        self.on_written = on_written
        self.pacer, self.window = pacer or Pacer(parallelism), parallelism

    def _paced(self, write: Callable[[], T]) -> T:
        """One write within the shared limit: a 429 is waited out and the write sent again, until the pacer's
        deadline; then the 429 is raised as it came."""

        def attempt() -> T:
            try:
                return write()
            except client.ApiException as error:
                if error.status == 429:
                    raise Throttled(_retry_after(error), error) from error
                raise

        try:
            return self.pacer.call(attempt)
        except Throttled as throttled:
            raise throttled.answer or throttled from None

    def read_job(self, namespace: str, name: str) -> Manifest | None:
        return self._read(PLURAL, namespace, name)

    def _read(self, plural: str, namespace: str, name: str) -> Manifest | None:
        """One of our resources, or None when it is gone."""
        try:
            found: Manifest = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, _request_timeout=TIMEOUT
            )
        except client.ApiException as error:
            _ignore(404, error)
            return None
        return found

    def list_pods(self, namespace: str, job: str) -> list[Manifest]:
        response = self.core.list_namespaced_pod(
            namespace, label_selector=job_selector(job), _preload_content=False, _request_timeout=TIMEOUT
        )
        items: list[Manifest] = json.loads(response.data)["items"]
        return items

    def read_service(self, namespace: str, job: str) -> Manifest | None:
        try:
            response = self.core.read_namespaced_service(
                service_name(job), namespace, _preload_content=False, _request_timeout=TIMEOUT
            )
        except client.ApiException as error:
            _ignore(404, error)
            return None
        found: Manifest = json.loads(response.data)
        return found

    def log_tail(self, namespace: str, pod: str, lines: int) -> str:
        try:
            text = self.core.read_namespaced_pod_log(
                pod, namespace, tail_lines=lines, limit_bytes=16384, _request_timeout=5
            )
        except Exception as error:  # logs are evidence, not a reason to stop reconciling
            log.info("no log for pod %s/%s: %s", namespace, pod, error)
            return ""
        return text if isinstance(text, str) else ""

    def progress(self, pod: Manifest) -> Report:
        """Rank 0's report: its last words once it has exited, else its progress endpoint when reading it is on
        and it answers in time."""
        final = final_report(pod)
        if final is not None:
            return parse_report(final)
        address = (pod.get("status") or {}).get("podIP")
        if not self.read_progress or not isinstance(address, str) or not address:
            return None, None
        body = read_bounded(address, PROGRESS_PORT, "/progress", MAX_REPORT_BYTES, PROGRESS_SECONDS)
        return parse_report(body) if body is not None else (None, None)

    def write_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        return self._write_status(PLURAL, namespace, name, resource_version, patch)

    def _write_status(self, plural: str, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        """A merge patch of the status subresource, guarded by the version it was planned from."""
        body = {"metadata": {"resourceVersion": resource_version}, "status": patch}
        try:
            written = self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, plural, name, body, _request_timeout=TIMEOUT
            )
        except client.ApiException as error:
            if error.status == 404:
                raise Gone(f"{namespace}/{name}") from error
            if error.status == 409:
                raise Conflict(f"{namespace}/{name}") from error
            raise
        self.on_written(written)
        return str(written["metadata"]["resourceVersion"])

    def create(self, namespace: str, manifests: Sequence[Manifest]) -> Created:
        """Create all at once, in parallel: a large gang starts together, not pod by pod."""

        def create_one(manifest: Manifest) -> tuple[str, str] | Refusal:
            name = manifest["metadata"]["name"]
            try:
                if manifest["kind"] != "Pod":
                    self._create_other(namespace, manifest)
                    return name, ""
                response = self._paced(
                    lambda: self.core.create_namespaced_pod(
                        namespace, manifest, _preload_content=False, _request_timeout=TIMEOUT
                    )
                )
            except client.ApiException as error:
                if manifest["kind"] != "Pod" and error.status == 409:
                    return name, ""  # ours from an earlier pass (or a namesake's Service the GC is removing)
                if error.status is None or error.status >= 500 or error.status == 429:
                    raise
                return Refusal(name, int(error.status), _message(error))
            pod: Manifest = json.loads(response.data)
            self.on_written(pod)
            return name, str(pod["metadata"]["uid"])

        others = [m for m in manifests if m["kind"] != "Pod"]  # the key and the policy exist before the pods
        results = windowed(self.pool, create_one, others, self.window)
        results += windowed(self.pool, create_one, [m for m in manifests if m["kind"] == "Pod"], self.window)
        pods = {r[0]: r[1] for r in results if isinstance(r, tuple) and r[1]}
        return Created(pods, [r for r in results if isinstance(r, Refusal)])

    def _create_other(self, namespace: str, manifest: Manifest) -> None:
        """The job's Service, key Secret (its key drawn here, never logged or read back) or NetworkPolicy."""
        kind = manifest["kind"]
        if kind == "Secret":
            body = {**manifest, "data": {KEY_FILE: base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}}
            self._paced(lambda: self.core.create_namespaced_secret(namespace, body, _request_timeout=TIMEOUT))
        elif kind == "NetworkPolicy":
            self._paced(
                lambda: self.networking.create_namespaced_network_policy(namespace, manifest, _request_timeout=TIMEOUT)
            )
        else:
            response = self._paced(
                lambda: self.core.create_namespaced_service(
                    namespace, manifest, _preload_content=False, _request_timeout=TIMEOUT
                )
            )
            self.on_written(json.loads(response.data))

    def delete_pods(self, namespace: str, names: Sequence[str], *, force: bool = False) -> None:
        def delete_one(name: str) -> None:
            try:
                response = self._paced(
                    lambda: self.core.delete_namespaced_pod(
                        name,
                        namespace,
                        grace_period_seconds=0 if force else None,
                        _preload_content=False,
                        _request_timeout=TIMEOUT,
                    )
                )
            except client.ApiException as error:
                _ignore(404, error)
                return
            self.on_written(json.loads(response.data))

        windowed(self.pool, delete_one, names, self.window)

    def ungate(self, namespace: str, names: Sequence[str]) -> None:
        """Remove the tracking gate: the pods may now be scheduled."""
        patch = {"spec": {"schedulingGates": [{"$patch": "delete", "name": TRACKING_GATE}]}}

        def ungate_one(name: str) -> None:
            try:
                response = self._paced(
                    lambda: self.core.patch_namespaced_pod(
                        name, namespace, patch, _preload_content=False, _request_timeout=TIMEOUT
                    )
                )
            except client.ApiException as error:
                _ignore(404, error)
                return
            self.on_written(json.loads(response.data))

        windowed(self.pool, ungate_one, names, self.window)

    # -- sweeps (sweep.reconcile.SweepCluster) -----------------------------------------------------------------

    def read_sweep(self, namespace: str, name: str) -> Manifest | None:
        return self._read(SWEEP_PLURAL, namespace, name)

    def list_trial_jobs(self, namespace: str, sweep: str) -> list[Manifest]:
        found = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, label_selector=f"{SWEEP_LABEL}={sweep}", _request_timeout=TIMEOUT
        )
        items: list[Manifest] = found["items"]
        return items

    def write_sweep_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        return self._write_status(SWEEP_PLURAL, namespace, name, resource_version, patch)

    def create_job(self, namespace: str, manifest: Manifest) -> None:
        """A trial's TrainingJob; one of that name already there is taken as created (the sweep's own from an
        earlier pass, or a namesake the planner will not adopt). Not passed to on_written: the job's watch event
        is what wakes its reconcile."""
        try:
            self._paced(
                lambda: self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, manifest, _request_timeout=TIMEOUT
                )
            )
        except client.ApiException as error:
            _ignore(409, error)

    def suspend_job(self, namespace: str, name: str) -> None:
        """Suspend a trial's job (its pods go, the job and its history stay); as create_job, not passed on."""
        patch = {"spec": {"runPolicy": {"suspend": True}}}
        try:
            self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                patch,
                _content_type="application/merge-patch+json",
                _request_timeout=TIMEOUT,
            )
        except client.ApiException as error:
            _ignore(404, error)

    def delete_job(self, namespace: str, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, propagation_policy="Background", _request_timeout=TIMEOUT
            )
        except client.ApiException as error:
            _ignore(404, error)

    def emit(self, job: Manifest, events: Sequence[Event]) -> None:
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
                self.core.create_namespaced_event(metadata["namespace"], body, _request_timeout=TIMEOUT)
            except client.ApiException as error:  # events are best effort
                if error.status == 403 and "being terminated" in str(error.body or ""):
                    log.debug("event %s not recorded: its namespace is being deleted", event.reason)
                else:
                    log.warning("could not record event %s: %s", event.reason, error.reason)
