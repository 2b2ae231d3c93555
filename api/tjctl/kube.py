"""tjctl's cluster commands, straight to the Kubernetes API with a kubeconfig."""

from datetime import UTC, datetime
from typing import Any

from kubernetes import client, config

from trainingjob import timeline
from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob.naming import INDEX_LABEL, ROLE_LABEL, job_selector

Manifest = dict[str, Any]


class Kube:
    """TrainingJobs in one namespace of the cluster a kubeconfig points at."""

    def __init__(self, kubeconfig: str | None, namespace: str | None) -> None:
        api = config.new_client_from_config(config_file=kubeconfig)
        self.custom, self.core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        if namespace:
            self.namespace = namespace
        else:
            _, context = config.list_kube_config_contexts(config_file=kubeconfig)
            self.namespace = context.get("context", {}).get("namespace") or "default"

    def submit(self, manifest: Manifest) -> Manifest:
        created: Manifest = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, manifest, field_validation="Strict"
        )
        return created

    def list(self) -> list[Manifest]:
        found: Manifest = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)
        return list(found["items"])

    def get(self, name: str) -> Manifest:
        found: Manifest = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        return found

    def delete(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)

    def set_suspend(self, name: str, suspend: bool) -> Manifest:
        patch = {"spec": {"runPolicy": {"suspend": suspend}}}
        found: Manifest = self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, name, patch
        )
        return found

    def logs(self, name: str, replica: str, tail: int | None) -> str:
        """The log of one replica ("worker-0", "ps-1") in the job's current attempt."""
        role, _, index = replica.rpartition("-")
        selector = f"{job_selector(name)},{ROLE_LABEL}={role},{INDEX_LABEL}={index}"
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        if not pods:
            raise LookupError(f"job {name} has no pod for replica {replica}")
        newest = max(pods, key=lambda p: int(p.metadata.labels["trainingjob.io/attempt"]))
        text: str = self.core.read_namespaced_pod_log(newest.metadata.name, self.namespace, tail_lines=tail)
        return text

    def timeline(self, name: str, chrome: bool) -> Manifest:
        """The job's timeline as JSON, or as a Chrome trace."""
        job = self.get(name)
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=job_selector(name)).items
        manifests = [self.core.api_client.sanitize_for_serialization(pod) for pod in pods]
        found = timeline.build(job, [t for t in map(timeline.pod_times, manifests) if t], datetime.now(UTC))
        return timeline.chrome_trace(found) if chrome else found.to_json()
