"""TrainingJobs through the Kubernetes API, as whoever the credentials name: a person's kubeconfig (the SDK,
tjctl) or the REST API's own ServiceAccount. Kubernetes' errors come out as the SDK's typed errors."""

import codecs
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client
from urllib3.exceptions import HTTPError

from trainingjob.children import timeline
from trainingjob.children.naming import CONTAINER_NAME, job_selector
from trainingjob.kube.client import NoCluster, connect
from trainingjob.kube.impersonation import Headers, Impersonating
from trainingjob.model import GROUP, KIND, PLURAL, VERSION
from trainingjob_sdk import pods
from trainingjob_sdk.errors import Conflict, NotConfigured, Unavailable, unreachable_reason
from trainingjob_sdk.jobs import FINISHED, Manifest, Manifests, describe_job, event_row
from trainingjob_sdk.kube_answers import answering, kubernetes_message, typed
from trainingjob_sdk.watching import JobWatch

__all__ = ["KubeJobs", "answering", "kubernetes_message", "typed"]  # the REST API reads Kubernetes' errors so too

PAGE = 500
NO_CLUSTER = "NoCluster"  # NotConfigured's reason when neither a kubeconfig nor a pod's account was found
SUSPEND_ATTEMPTS = 3
FOLLOW_READ_SECONDS = 7 * 24 * 3600.0


class KubeJobs:
    """The jobs of a cluster, with a default namespace; every request bounded by `timeout` seconds."""

    def __init__(self, api: Any, namespace: str = "default", timeout: float | None = None) -> None:
        self.api, self.namespace, self.timeout = api, namespace, timeout
        self.custom, self.core = client.CustomObjectsApi(api), client.CoreV1Api(api)

    @classmethod
    def connect(
        cls, kubeconfig: str | Path | None = None, *, context: str | None = None, namespace: str | None = None,
        timeout: float | None = 30.0,
    ) -> "KubeJobs":  # fmt: skip
        try:
            found = connect(kubeconfig, context=context)
        except NoCluster as error:
            raise NotConfigured(str(error), reason=None if error.kubeconfig else NO_CLUSTER) from None
        return cls(found.api, namespace or found.namespace, timeout)

    def close(self) -> None:
        self.api.close()

    def acting_as(self, headers: Headers) -> "KubeJobs":
        """These jobs through the same connections, every request made as the user `headers` impersonate (see
        trainingjob.kube.impersonation): the REST API's writes and log reads for its caller."""
        return KubeJobs(Impersonating(self.api, headers), self.namespace, self.timeout)

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    def create(self, body: Manifest, namespace: str | None = None) -> Manifest:
        ns, name = self._ns(namespace), body["metadata"].get("name") or body["metadata"].get("generateName", "")
        with answering(describe_job(ns, name)):
            created: Manifest = self.custom.create_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, body, field_validation="Strict", _request_timeout=self.timeout
            )
        return created

    def get(self, name: str, namespace: str | None = None) -> Manifest:
        ns = self._ns(namespace)
        with answering(describe_job(ns, name)):
            found: Manifest = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, name, _request_timeout=self.timeout
            )
        return found

    def list(
        self, namespace: str | None = None, selector: str | None = None, *, all_namespaces: bool = False
    ) -> Manifests:
        """Every matching job of the namespace (or of all), by namespace and name, read in pages."""
        items: Manifests = []
        token = None
        where = "trainingjobs" + ("" if all_namespaces else f' in namespace "{self._ns(namespace)}"')
        while True:
            options = {
                "label_selector": selector or "",
                "limit": PAGE,
                "_continue": token,
                "_request_timeout": self.timeout,
            }
            with answering(where):
                if all_namespaces:
                    page = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, **options)
                else:
                    page = self.custom.list_namespaced_custom_object(
                        GROUP, VERSION, self._ns(namespace), PLURAL, **options
                    )
            items += page.get("items", [])
            token = page["metadata"].get("continue")
            if not token:
                return sorted(items, key=lambda j: (j["metadata"].get("namespace", ""), j["metadata"]["name"]))

    def delete(self, name: str, namespace: str | None = None) -> None:
        ns = self._ns(namespace)
        with answering(describe_job(ns, name)):
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, name, propagation_policy="Background", _request_timeout=self.timeout
            )

    def set_suspend(self, name: str, suspend: bool, namespace: str | None = None) -> Manifest:
        """Patch spec.runPolicy.suspend unless the job is finished (Conflict JobFinished), on the version whose
        phase was read; read again when the operator updated it in between."""
        ns = self._ns(namespace)
        what = describe_job(ns, name)
        for _ in range(SUSPEND_ATTEMPTS):
            current = self.get(name, ns)
            phase = (current.get("status") or {}).get("phase")
            if phase in FINISHED:
                verb = "suspended" if suspend else "resumed"
                raise Conflict(
                    f"{what} is finished (phase {phase}): it cannot be {verb}", status=409, reason="JobFinished"
                )
            patch = {
                "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                "spec": {"runPolicy": {"suspend": suspend}},
            }
            try:
                with answering(what):
                    patched: Manifest = self.custom.patch_namespaced_custom_object(
                        GROUP,
                        VERSION,
                        ns,
                        PLURAL,
                        name,
                        patch,
                        field_validation="Strict",
                        _request_timeout=self.timeout,
                    )
            except Conflict:
                continue
            return patched
        raise Conflict(f"{what} kept changing while it was patched; try again", status=409)

    def watch(self, name: str, namespace: str | None = None, timeout: float | None = None) -> Iterator[Manifest]:
        """The job now, then every new version of it, until `timeout` seconds have passed (forever when None);
        NotFound once it is deleted. A dropped connection is watched again from where it was (see watching)."""
        ns = self._ns(namespace)
        return JobWatch(self.custom, lambda: self.get(name, ns), ns, name, self.timeout).follow(timeout)

    def failure(self, name: str, namespace: str | None = None) -> Manifest | None:
        """The job's status.lastFailure, with the failed rank's last log lines (logTail)."""
        failure = (self.get(name, namespace).get("status") or {}).get("lastFailure")
        return failure if isinstance(failure, dict) else None

    def events(self, name: str, namespace: str | None = None) -> Manifests:
        """The Kubernetes events about the job, oldest first."""
        ns = self._ns(namespace)
        with answering(f"the events of {describe_job(ns, name)}"):
            found = self.core.list_namespaced_event(
                ns, field_selector=f"involvedObject.kind={KIND},involvedObject.name={name}",
                _request_timeout=self.timeout,
            )  # fmt: skip
        raw = [self.api.sanitize_for_serialization(e) for e in found.items]
        rows = [
            event_row(e) for e in raw if str((e.get("involvedObject") or {}).get("apiVersion", "")).startswith(GROUP)
        ]
        return sorted(rows, key=lambda e: e.get("lastTimestamp") or e.get("firstTimestamp") or "")

    def pods(self, name: str, namespace: str | None = None, selector: str = "") -> Manifests:
        """The job's pods still present, as Kubernetes writes them (JSON, not read into the client's models: a
        large job's list costs a fraction), narrowed by `selector` when given."""
        ns = self._ns(namespace)
        with answering(f"the pods of {describe_job(ns, name)}"):
            response = self.core.list_namespaced_pod(
                ns, label_selector=",".join(filter(None, [job_selector(name), selector])), _preload_content=False,
                _request_timeout=self.timeout,
            )  # fmt: skip
            found: Manifests = json.loads(response.data).get("items") or []
        return found

    def replica_pod(
        self, name: str, replica: str, namespace: str | None = None, attempt: int | None = None
    ) -> Manifest:
        """The pod of one replica ("worker-0", "ps-1"): of the newest attempt present, or of `attempt`."""
        ns = self._ns(namespace)
        slot = pods.parse_replica(replica)
        return pods.pick(self.pods(name, ns, pods.replica_selector(slot)), describe_job(ns, name), replica, attempt)

    def logs(
        self, name: str, namespace: str | None = None, *, replica: str = "worker-0", follow: bool = False,
        tail: int | None = None, attempt: int | None = None,
    ) -> Iterator[str]:  # fmt: skip
        """The log of one replica's pod, as text as it comes."""
        pod = self.replica_pod(name, replica, namespace, attempt)
        pods.check_has_logs(pod)
        pod_name, ns = pod["metadata"]["name"], pod["metadata"]["namespace"]
        read = FOLLOW_READ_SECONDS if follow else self.timeout  # a followed log may be quiet for long
        bound = {"_request_timeout": (self.timeout, read)} if self.timeout else {}
        with answering(f'the logs of pod "{pod_name}"'):
            response = self.core.read_namespaced_pod_log(
                pod_name, ns, container=CONTAINER_NAME, follow=follow, tail_lines=tail, _preload_content=False, **bound
            )
        return _text(response)

    def timeline(
        self, name: str, namespace: str | None = None, *, chrome: bool = False, with_pods: bool = True
    ) -> Manifest:
        """The job's timeline as JSON, or as a Chrome trace; pod rows only `with_pods`."""
        job = self.get(name, namespace)
        found = [t for t in map(timeline.pod_times, self.pods(name, namespace)) if t] if with_pods else []
        built = timeline.build(job, found, datetime.now(UTC))
        return timeline.chrome_trace(built) if chrome else built.to_json()


def _text(response: Any) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        for chunk in response.stream(4096, decode_content=True):
            yield decoder.decode(chunk)
        yield decoder.decode(b"", final=True)
    except HTTPError as error:
        raise Unavailable(f"the log stream broke off: {unreachable_reason(error)}") from None
    finally:
        response.close()  # a log left unread must not go back to the pool
        response.release_conn()
