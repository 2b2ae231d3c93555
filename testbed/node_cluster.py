"""What node-tier tests do to the cluster: install the chart from our images, make local volumes, read the
operator's log from its pod, and hurt a container the way a machine would (SIGKILL, SIGSTOP)."""

import json
import os
import signal
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from testbed import node_config as cfg
from testbed.helm import Helm
from testbed.node import NodeTier
from testbed.processes import poll_until
from trainingjob.children.agent import AGENT_PORT
from trainingjob.local.pod import process_tree

SYSTEM_NAMESPACE = "trainingjob-system"
RELEASE = "trainingjob"  # as the README installs it: `helm status trainingjob -n trainingjob-system` works
_INSTALL_TIMEOUT = 180.0


def chart_values(tier: NodeTier) -> dict[str, str]:
    """The chart's values for our images, imported into the node (never pulled), and quick retries for tests."""
    operator, api = tier.image("operator"), tier.image("api")
    return {
        "operator.image.repository": operator.public_ref.rsplit(":", 1)[0],
        "operator.image.tag": operator.key,
        "operator.image.pullPolicy": "Never",
        "operator.settings.backoffBaseSeconds": "1",
        "operator.settings.backoffMaxSeconds": "5",
        # Progress is read at each reconcile: every 5 s here, so a test sees step and loss move.
        "operator.settings.resyncSeconds": "5",
        "api.image.repository": api.public_ref.rsplit(":", 1)[0],
        "api.image.tag": api.key,
        "api.image.pullPolicy": "Never",
    }


def install_chart(tier: NodeTier, helm_home: Path, values: dict[str, str] | None = None) -> None:
    """`helm install` into trainingjob-system, then wait until the operator and the API answer their probes."""
    with tier.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=SYSTEM_NAMESPACE)))
        helm = Helm(helm_home)
        helm.install(RELEASE, SYSTEM_NAMESPACE, tier.plane.kubeconfig, {**chart_values(tier), **(values or {})})
        apps = client.AppsV1Api(api)

        def available() -> bool:
            deployments = apps.list_namespaced_deployment(SYSTEM_NAMESPACE).items
            return bool(deployments) and all(
                (d.status.available_replicas or 0) >= (d.spec.replicas or 1) for d in deployments
            )

        try:
            poll_until(available, timeout=_INSTALL_TIMEOUT, interval=0.5, what="the chart's Deployments available")
        except TimeoutError as error:
            raise AssertionError(f"{error}\n{system_pods_report(core)}") from error


def system_pods_report(core: client.CoreV1Api) -> str:
    lines = []
    for pod in core.list_namespaced_pod(SYSTEM_NAMESPACE).items:
        lines.append(f"{pod.metadata.name}: {pod.status.phase} {pod.status.container_statuses}")
        lines.append(_pod_log(core, SYSTEM_NAMESPACE, pod.metadata.name, 30))
    return "\n".join(lines)


def _pod_log(core: client.CoreV1Api, namespace: str, name: str, lines: int) -> str:
    try:
        return str(core.read_namespaced_pod_log(name, namespace, tail_lines=lines))
    except client.ApiException as error:
        return f"(no log: {error.reason})"


@dataclass
class OperatorPodLog:
    """The in-cluster operator's log, for failure messages."""

    core: client.CoreV1Api

    def log_tail(self) -> str:
        pods = self.core.list_namespaced_pod(SYSTEM_NAMESPACE, label_selector="app.kubernetes.io/component=operator")
        return "\n".join(_pod_log(self.core, SYSTEM_NAMESPACE, p.metadata.name, 60) for p in pods.items)


def local_volume(tier: NodeTier, name: str, capacity: str = "1Gi") -> Path:
    """A static local PersistentVolume on the node, its folder root-owned (0755) as a fresh disk would be."""
    folder = tier.paths.volumes / name
    folder.mkdir(parents=True, mode=0o755)
    os.chown(folder, 0, 0)
    selector = {"key": "kubernetes.io/hostname", "operator": "In", "values": [cfg.NODE_NAME]}
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": capacity},
            "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "local": {"path": str(folder)},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [selector]}]}},
        },
    }
    with tier.api_client() as api:
        client.CoreV1Api(api).create_persistent_volume(volume)
    return folder


def container_id(pod: Any) -> str:
    """The containerd id of the pod's (first) container, from its status."""
    statuses = pod.status.container_statuses or []
    if not statuses or not statuses[0].container_id:
        raise LookupError(f"pod {pod.metadata.name} has no started container")
    return str(statuses[0].container_id).split("://", 1)[1]


def signal_container(tier: NodeTier, pod: Any, signum: signal.Signals) -> int:
    """Send `signum` to the container's first process from outside (as the kernel or a person would)."""
    pid = signal_container_pid(tier, pod)
    os.kill(pid, signum)
    return pid


def signal_container_pid(tier: NodeTier, pod: Any) -> int:
    """The host pid of the pod's container's first process, once it runs (a pod of a gang may still be starting its
    container when rank 0 already trains)."""
    with tier.api_client() as api:
        core = client.CoreV1Api(api)

        def running() -> Any:
            current = core.read_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
            statuses = current.status.container_statuses or []
            return current if statuses and statuses[0].state.running else None

        try:
            pod = poll_until(running, timeout=120, what=f"{pod.metadata.name}'s container to run")
        except TimeoutError as error:
            current = core.read_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
            raise AssertionError(f"{error}: {current.status.phase} {current.status.container_statuses}") from error
    return tier.containerd.task_pid(container_id(pod))


def signal_trainer(tier: NodeTier, pod: Any, signum: signal.Signals) -> int:
    """Send `signum` to the trainer process inside the pod, not to its first process (the agent, which then restarts
    the trainer in place when told): the child its agent names on GET /status, found on the host by its pid in the
    container's pid namespace."""
    agent = signal_container_pid(tier, pod)
    with urllib.request.urlopen(f"http://{pod.status.pod_ip}:{AGENT_PORT}/status", timeout=2) as answer:
        child = json.loads(answer.read())["child"]
    if not isinstance(child, int):
        raise AssertionError(f"{pod.metadata.name}'s agent runs no trainer: {child}")
    for host_pid in process_tree(agent)[1:]:
        if _namespace_pid(host_pid) == child:
            os.kill(host_pid, signum)
            return host_pid
    raise AssertionError(f"no process of {pod.metadata.name} (agent {agent}) has pid {child} in its namespace")


def _namespace_pid(host_pid: int) -> int | None:
    """The process's pid in its own (innermost) pid namespace, from the NSpid line of /proc/<pid>/status."""
    try:
        for line in Path(f"/proc/{host_pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return None


def kubectl(tier: NodeTier, *args: str) -> str:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(tier.plane.kubeconfig), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done.stdout
