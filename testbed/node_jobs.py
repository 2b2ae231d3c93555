"""Jobs on the node tier: the examples as shipped, checkpoint claims on local volumes, and what rank 0 says."""

import json
import re
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from testbed.examples import EXAMPLES
from testbed.harness import Harness
from testbed.node import NodeTier
from testbed.node_cluster import local_volume
from testbed.node_storage import provisioned_folder
from testbed.processes import poll_until
from trainingjob.children.naming import ATTEMPT_LABEL, INDEX_LABEL, ROLE_LABEL
from trainingjob.children.specs import PROGRESS_PORT

_RESUMED = re.compile(r"resuming from checkpoint \S+ \(step (\d+)\)")


def example(name: str) -> list[dict[str, Any]]:
    """The documents of examples/<name> as shipped."""
    return [doc for doc in yaml.safe_load_all((EXAMPLES / name).read_text()) if doc]


def claim_on_local_volume(tier: NodeTier, namespace: str, claim: str) -> Path:
    """A root-owned local PersistentVolume and a claim `claim` bound to it by name (no StorageClass), for tests
    that need the volume as a fresh disk would be. Returns the volume's folder."""
    volume = f"pv-{uuid.uuid4().hex[:10]}"
    folder = local_volume(tier, volume)
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": volume,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    with tier.api_client() as api:
        client.CoreV1Api(api).create_namespaced_persistent_volume_claim(namespace, body)
    return folder


def apply_claim(h: Harness, manifest: str) -> Path:
    """The claim of examples/<manifest> as shipped, provisioned by the default StorageClass; its volume's folder."""
    claim = example(manifest)[0]
    h.core.create_namespaced_persistent_volume_claim(h.ns, claim)
    return provisioned_folder(h.core, h.ns, claim["metadata"]["name"])


def pod_of(h: Harness, job: str, role: str, index: int, attempt: int) -> Any:
    for pod in h.core.list_namespaced_pod(h.ns, label_selector=f"trainingjob.io/job-name={job}").items:
        labels = pod.metadata.labels
        if (labels[ROLE_LABEL], labels[INDEX_LABEL], labels[ATTEMPT_LABEL]) == (role, str(index), str(attempt)):
            return pod
    raise LookupError(f"no {role}-{index} pod of {job} attempt {attempt}")


def log_of(h: Harness, pod: Any) -> str:
    return str(h.core.read_namespaced_pod_log(pod.metadata.name, h.ns))


def progress(h: Harness, job: str, attempt: int, pods_attempt: int | None = None) -> dict[str, Any] | None:
    """Rank 0's own report of `attempt`, read from its pod IP as the operator reads it, in the pods made for
    `pods_attempt` (the attempt's own by default; an earlier one's after a restart in place); None while it has
    none."""
    try:
        pod = pod_of(h, job, "worker", 0, pods_attempt or attempt)
    except LookupError:
        return None
    if not pod.status.pod_ip:
        return None
    try:
        with urllib.request.urlopen(f"http://{pod.status.pod_ip}:{PROGRESS_PORT}/progress", timeout=1) as answer:
            report: dict[str, Any] = json.loads(answer.read())
    except OSError:
        if pods_attempt is None:
            raise
        return None  # between two attempts in the same pod nothing serves the port
    return report if report.get("attempt", attempt) == attempt else None


def at_step(
    h: Harness, job: str, attempt: int, step: int, timeout: float = 600, *, pods_attempt: int | None = None
) -> dict[str, Any]:
    """Rank 0's report once it has done `step` steps in `attempt` (polled every 50 ms); `pods_attempt` as in
    progress()."""

    def reached() -> dict[str, Any] | None:
        report = progress(h, job, attempt, pods_attempt)
        return report if report and report.get("step", 0) >= step else None

    return poll_until(reached, timeout=timeout, interval=0.05, what=f"{job} attempt {attempt} at step {step}")


def last_step(h: Harness, job: str, attempt: int, quiet_seconds: float = 1.0) -> int:
    """The last step rank 0 of `attempt` reports before it stops (after a peer died its next all-reduce fails)."""
    last, moved_at, deadline = 0, time.monotonic(), time.monotonic() + 60
    while time.monotonic() < min(deadline, moved_at + quiet_seconds):
        try:
            report = progress(h, job, attempt)
        except (OSError, LookupError):
            break
        if report is None:
            break
        if report["step"] != last:
            last, moved_at = int(report["step"]), time.monotonic()
        time.sleep(0.05)
    return last


def checkpoint_steps(folder: Path) -> list[int]:
    """The steps of the complete checkpoints on a volume (folders `<job>/<uid>/step-N`), oldest first."""
    return sorted(int(path.name.split("-", 1)[1]) for path in folder.glob("*/*/step-*") if path.is_dir())


def resumed_steps(log: str) -> list[int]:
    """The checkpoint steps a rank says it resumed from, in order (none when it started from scratch)."""
    return [int(step) for step in _RESUMED.findall(log)]


def result_accuracy(status: dict[str, Any]) -> float:
    """The accuracy of the final evaluation, from the status of a job that succeeded (status.result.metrics)."""
    metrics = (status.get("result") or {}).get("metrics") or {}
    if "accuracy" not in metrics:
        raise AssertionError(f"status.result has no accuracy: {status.get('result')}")
    return float(metrics["accuracy"])
