"""Who may talk to a job's pods: the job's key Secret (the parameter servers authenticate every message with it)
and its NetworkPolicy (only the job's own pods, and the operator on the progress and agent ports, reach them). Pure
builders; the key itself is drawn by the cluster client when it creates the Secret."""

from typing import Any

from trainingjob.children.naming import JOB_LABEL
from trainingjob.model.volumes import KEY_VOLUME_NAME, RESERVED_MOUNT_ROOT

KEY_MOUNT_PATH = f"{RESERVED_MOUNT_ROOT}/key"
KEY_FILE = "key"
KEY_BYTES = 32
NAMESPACE_LABEL = "kubernetes.io/metadata.name"


def _named(job: str, what: str, uid: str) -> str:
    """Named after the job's UID too: a job re-created under its name never takes its namesake's key or policy
    (which the garbage collector is about to remove) for its own."""
    return f"{job}-{what}-{uid.replace('-', '')[:12]}"


def key_secret_name(job: str, uid: str) -> str:
    return _named(job, "key", uid)


def _metadata(name: str, job: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "labels": {JOB_LABEL: job}, "ownerReferences": [owner]}


def key_secret_manifest(job: str, uid: str, owner: dict[str, Any]) -> dict[str, Any]:
    """The job's key Secret, without its key: the cluster client fills data.key in at creation."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(key_secret_name(job, uid), job, owner),
        "type": "Opaque",
        "immutable": True,
    }


def key_volume(job: str, uid: str) -> dict[str, Any]:
    """The Secret as a volume readable by the pod's fsGroup only (mode 0440)."""
    return {"name": KEY_VOLUME_NAME, "secret": {"secretName": key_secret_name(job, uid), "defaultMode": 0o440}}


def key_mount() -> dict[str, Any]:
    return {"name": KEY_VOLUME_NAME, "mountPath": KEY_MOUNT_PATH, "readOnly": True}


def network_policy_manifest(
    job: str, uid: str, owner: dict[str, Any], operator_ports: tuple[int, ...], operator_namespace: str | None
) -> dict[str, Any]:
    """Ingress to the job's pods from its own pods on any port, and from the operator's namespace on the progress
    and agent ports; everything else is dropped (by a CNI that enforces NetworkPolicy). Egress is left alone."""
    peers: list[dict[str, Any]] = [{"from": [{"podSelector": {"matchLabels": {JOB_LABEL: job}}}]}]
    if operator_namespace:
        operator = {"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: operator_namespace}}}
        peers.append({"from": [operator], "ports": [{"protocol": "TCP", "port": port} for port in operator_ports]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(_named(job, "ingress", uid), job, owner),
        "spec": {"podSelector": {"matchLabels": {JOB_LABEL: job}}, "policyTypes": ["Ingress"], "ingress": peers},
    }
