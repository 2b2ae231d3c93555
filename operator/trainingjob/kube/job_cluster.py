"""The Cluster port on the apiserver: a job, its pods and Service, and every write a job's reconcile makes. 409 on
a create and 404 on a delete mean "already done"; a delete goes only to the object it was decided on (its UID).
What the apiserver answers to each write (the job's status, pods, the Service) goes to `on_written`, so the
runtime's stores never lag the operator's own writes. The parallel writes of all reconciles share one pace
(kube.writes), and each call sends at most `window` of its own at once."""

import base64
import logging
import secrets
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from typing import Any

import orjson
from kubernetes import client

from trainingjob.children.access import KEY_FILE
from trainingjob.children.agent import Gang, job_key
from trainingjob.children.naming import TRACKING_FINALIZER, TRACKING_GATE, job_selector, service_name
from trainingjob.children.progress_report import Report
from trainingjob.kube.agents import pod_address, read_gang, send_order
from trainingjob.kube.answers import answer, namespace_terminating, status_of
from trainingjob.kube.direct import STRATEGIC_MERGE_PATCH, pod_path
from trainingjob.kube.pod_reads import PodReads
from trainingjob.kube.ports import Created, Manifest
from trainingjob.kube.progress import PROGRESS_SECONDS, ask_progress, last_words
from trainingjob.kube.resources import TIMEOUT, Resources, delete_options, deleted, not_patched
from trainingjob.kube.writes import Pacer, windowed
from trainingjob.model import GROUP, KIND, PLURAL, VERSION
from trainingjob.plan import Event
from trainingjob.plan.waves import Refusal

log = logging.getLogger(__name__)
GANG_WAIT_SECONDS = PROGRESS_SECONDS + 1.0  # the exchange's deadline, and a second for the pool to start it


def with_job_key(secret: Manifest, operator: bytes) -> Manifest:
    """The job's key Secret with its key: derived from the operator's key and the job's UID (its owner), never
    logged, never read back."""
    uid = str(secret["metadata"]["ownerReferences"][0]["uid"])
    return {**secret, "data": {KEY_FILE: base64.b64encode(job_key(operator, uid)).decode()}}


class KubernetesCluster:
    """Cluster on the apiserver, through `resources` (which paces writes and passes on what was written)."""

    def __init__(
        self,
        api: Any,
        resources: Resources | None = None,
        *,
        read_progress: bool = False,
        window: int = 16,
        operator_key: bytes | None = None,
    ) -> None:
        self.core, self.networking = client.CoreV1Api(api), client.NetworkingV1Api(api)
        self.operator_key = operator_key or secrets.token_bytes(32)  # each job's key derives from it
        self.resources = resources or Resources(api, pacer=Pacer(window))
        self.direct = self.resources.direct  # the hot writes: pods created, deleted, released
        self.read_progress, self.window = read_progress, window
        self.pool = ThreadPoolExecutor(max_workers=window, thread_name_prefix="tj-write")
        self.pod_reads = PodReads()

    def read_job(self, namespace: str, name: str) -> Manifest | None:
        return self.resources.read(PLURAL, namespace, name)

    def list_pods(self, namespace: str, job: str) -> list[Manifest]:
        response = self.core.list_namespaced_pod(
            namespace, label_selector=job_selector(job), _preload_content=False, _request_timeout=TIMEOUT
        )
        items: list[Manifest] = orjson.loads(response.data)["items"]
        return items

    def read_service(self, namespace: str, job: str) -> Manifest | None:
        try:
            response = self.core.read_namespaced_service(
                service_name(job), namespace, _preload_content=False, _request_timeout=TIMEOUT
            )
        except client.ApiException as error:
            if status_of(error) != 404:
                raise
            return None
        found: Manifest = orjson.loads(response.data)
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
        """Rank 0's last words, or its progress endpoint's answer when it comes in time (kube/pod_reads.py)."""
        nothing: Report = (None, None)
        final, address = last_words(pod), pod_address(pod)
        if final is not None:
            return final
        if not self.read_progress or address is None:
            return nothing
        uid = str(pod["metadata"].get("uid", ""))
        return self.pod_reads.read(f"{uid}/progress", partial(ask_progress, address), nothing)

    def departed(self, namespace: str, pod: str) -> tuple[str, Report] | None:
        return None  # no memory of deleted pods here: the runtime's cached cluster keeps their last words

    def gang(self, pod: Manifest) -> Gang | None:
        """Rank 0's agent's account of the gang, waited for as long as its exchange may take, unless the pod is
        backed off for answering slowly."""
        uid, address = str(pod["metadata"].get("uid", "")), pod_address(pod)
        return self.pod_reads.read(f"{uid}/gang", partial(read_gang, address), None, wait=GANG_WAIT_SECONDS)

    def order(self, pod: Manifest, job_uid: str, attempt: int, pacing: str | None = None) -> bool:
        return send_order(pod_address(pod), job_key(self.operator_key, job_uid), attempt, pacing=pacing)

    def ask_checkpoint(self, pod: Manifest, job_uid: str, attempt: int, after_step: int) -> bool:
        key = job_key(self.operator_key, job_uid)
        return send_order(pod_address(pod), key, attempt, checkpoint_after=after_step)

    def write_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        return self.resources.write_status(PLURAL, namespace, name, resource_version, patch)

    def create(self, namespace: str, manifests: Sequence[Manifest]) -> Created:
        """Create all at once, in parallel (the key, policy and Service before the pods): a large gang starts
        together, not pod by pod. No pod is created while one of the others is refused (the reconcile sends them
        first anyway): without its key a pod never starts, without its policy its ranks would listen on ports
        anyone could reach, without the Service they cannot find each other."""
        others = [m for m in manifests if m["kind"] != "Pod"]
        results = windowed(self.pool, lambda m: self._create_one(namespace, m), others, self.window)
        held = any(isinstance(r, Refusal) for r in results)
        pods = [] if held else [m for m in manifests if m["kind"] == "Pod"]
        results += windowed(self.pool, lambda m: self._create_one(namespace, m), pods, self.window)
        created = {r[0]: r[1] for r in results if isinstance(r, tuple) and r[1]}
        return Created(created, [r for r in results if isinstance(r, Refusal)])

    def _create_one(self, namespace: str, manifest: Manifest) -> tuple[str, str] | Refusal:
        """(name, UID) of a created pod, (name, "") of anything else created or of anything already there (a pod
        too: the next pass sees it), or the apiserver's refusal; no answer, a 429 past the pace's deadline or a 5xx
        is raised (the reconcile is retried)."""
        name, kind = manifest["metadata"]["name"], manifest["kind"]
        try:
            if kind != "Pod":
                self._create_other(namespace, manifest)
                return name, ""
            response = self.resources.paced(lambda: self.direct.send("POST", pod_path(namespace), manifest))
        except client.ApiException as error:
            found = answer(error)
            if found is None or found.transient:
                raise
            if found.status == 409:  # ours from an earlier pass (or a namesake the GC is removing): it exists, so
                log.debug("%s %s/%s exists already", kind, namespace, name)  # the next pass sees it and decides
                return name, ""
            return Refusal(name, int(found.status or 0), found.message, kind)
        pod: Manifest = orjson.loads(response.data)
        self.resources.on_written(pod)
        return name, str(pod["metadata"]["uid"])

    def _create_other(self, namespace: str, manifest: Manifest) -> None:
        """The job's Service, key Secret (its key drawn here) or NetworkPolicy."""
        paced, kind = self.resources.paced, manifest["kind"]
        if kind == "Secret":
            body = with_job_key(manifest, self.operator_key)
            paced(lambda: self.core.create_namespaced_secret(namespace, body, _request_timeout=TIMEOUT))
        elif kind == "NetworkPolicy":
            create_policy = self.networking.create_namespaced_network_policy
            paced(lambda: create_policy(namespace, manifest, _request_timeout=TIMEOUT))
        else:
            response = paced(
                lambda: self.core.create_namespaced_service(
                    namespace, manifest, _preload_content=False, _request_timeout=TIMEOUT
                )
            )
            self.resources.on_written(orjson.loads(response.data))

    def delete_pods(self, namespace: str, pods: Mapping[str, str], *, force: bool = False) -> None:
        """Delete each pod (name -> the UID it was observed with): a namesake created since is left alone."""
        grace: dict[str, Any] = {"gracePeriodSeconds": 0} if force else {}

        def delete(name: str) -> Any:
            return self.direct.send("DELETE", pod_path(namespace, name), delete_options(pods[name], **grace))

        self._each_pod(list(pods), delete, lambda error, name: deleted(error, f"pod {namespace}/{name}"))

    def release_pods(self, namespace: str, pods: Mapping[str, str]) -> None:
        """Remove the tracking finalizer from each pod (name -> the UID it was observed with; the patch names the
        UID, so the apiserver refuses it for a namesake: the field is immutable); one being deleted then goes."""

        def release(name: str) -> Any:
            patch = {"metadata": {"uid": pods[name], "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}}
            return self.direct.send("PATCH", pod_path(namespace, name), patch, content_type=STRATEGIC_MERGE_PATCH)

        self._each_pod(list(pods), release, lambda error, name: not_patched(error, f"pod {namespace}/{name}"))

    def ungate(self, namespace: str, pods: Mapping[str, str]) -> None:
        """Remove the tracking gate of an earlier operator's pods: they may now be scheduled. Each patch names the UID
        the pod was decided on (name -> UID), so a pod deleted and created again under its name since is left gated:
        the apiserver refuses to change a pod's UID (422), and a pod gone answers 404; both are left to the next
        pass."""
        gate = {"schedulingGates": [{"$patch": "delete", "name": TRACKING_GATE}]}

        def ungate(name: str) -> Any:
            patch = {"metadata": {"uid": pods[name]}, "spec": gate}
            return self.direct.send("PATCH", pod_path(namespace, name), patch, content_type=STRATEGIC_MERGE_PATCH)

        self._each_pod(list(pods), ungate, lambda error, name: not_patched(error, f"pod {namespace}/{name}"))

    def _each_pod(self, names: Sequence[str], write: Any, failed: Callable[[client.ApiException, str], None]) -> None:
        """One paced write per pod, in parallel; `failed` judges a refused one; what was written goes on."""

        def one(name: str) -> None:
            try:
                response = self.resources.paced(lambda: write(name))
            except client.ApiException as error:
                failed(error, name)
                return
            self.resources.on_written(orjson.loads(response.data))

        windowed(self.pool, one, names, self.window)

    def delete_job(self, namespace: str, name: str, uid: str, resource_version: str | None = None) -> None:
        self.resources.delete(PLURAL, namespace, name, uid, resource_version)

    def emit(self, job: Manifest, events: Sequence[Event]) -> None:
        """Record each event about the job; best effort (an event that cannot be written is logged)."""
        metadata = job["metadata"]
        for event in events:
            try:
                self.core.create_namespaced_event(
                    metadata["namespace"], _event_body(metadata, event), _request_timeout=TIMEOUT
                )
            except client.ApiException as error:
                if namespace_terminating(error):
                    log.debug("event %s not recorded: its namespace is being deleted", event.reason)
                else:
                    log.warning("could not record event %s: %s", event.reason, error.reason)


def _event_body(metadata: Manifest, event: Event) -> Manifest:
    now = datetime.now(UTC).isoformat()
    return {
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
