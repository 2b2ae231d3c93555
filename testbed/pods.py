"""Make a pod on a kwok node end the way a test needs: an exit code, OOMKilled, evicted, or its node lost."""

import datetime
from typing import Any

from kubernetes import client


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _terminated_status(pod: client.V1Pod, exit_code: int, reason: str, message: str) -> dict[str, Any]:
    now = _now()
    return {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": [
            {"type": kind, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
            for kind in ("Ready", "ContainersReady")
        ],
        "containerStatuses": [
            {
                "name": container.name,
                "image": container.image,
                "imageID": container.image,
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": reason,
                        "message": message,
                        "finishedAt": now,
                    }
                },
            }
            for container in pod.spec.containers
        ],
    }


def finish_pod(
    core: client.CoreV1Api, namespace: str, name: str, exit_code: int, *, reason: str = "", message: str = ""
) -> client.V1Pod:
    """End every container of the pod with `exit_code` and `reason` (Completed or Error by default)."""
    pod = core.read_namespaced_pod(name, namespace)
    reason = reason or ("Completed" if exit_code == 0 else "Error")
    body = {"status": _terminated_status(pod, exit_code, reason, message)}
    return core.patch_namespaced_pod_status(name, namespace, body)


def oom_kill_pod(core: client.CoreV1Api, namespace: str, name: str) -> client.V1Pod:
    """The kernel's OOM killer ended the container: exit code 137, reason OOMKilled."""
    return finish_pod(core, namespace, name, 137, reason="OOMKilled", message="the container exceeded its memory limit")


def evict_pod_by_kubelet(core: client.CoreV1Api, namespace: str, name: str) -> client.V1Pod:
    """What the kubelet writes when node pressure evicts a pod: Failed, reason Evicted, DisruptionTarget."""
    pod = core.read_namespaced_pod(name, namespace)
    status = _terminated_status(pod, 137, "Error", "")
    message = "The node was low on resource: memory."
    status["reason"] = "Evicted"
    status["message"] = message
    status["conditions"].append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "TerminationByKubelet",
            "message": message,
            "lastTransitionTime": _now(),
        }
    )
    return core.patch_namespaced_pod_status(name, namespace, {"status": status})


def refuse_pod_on_its_node(
    core: client.CoreV1Api, namespace: str, name: str, reason: str, message: str
) -> client.V1Pod:
    """What a node's kubelet writes when it will not admit a pod the scheduler placed there (OutOfnvidia.com/gpu, a
    device plugin's UnexpectedAdmissionError): Failed with its reason, and no container ever started."""
    pod = core.read_namespaced_pod(name, namespace)
    waiting = [
        {"name": c.name, "image": c.image, "imageID": "", "ready": False, "restartCount": 0, "state": {"waiting": {}}}
        for c in pod.spec.containers
    ]
    status = {
        "phase": "Failed",
        "reason": reason,
        "message": message,
        "containerStatuses": [{"$patch": "replace"}, *waiting],
    }
    return core.patch_namespaced_pod_status(name, namespace, {"status": status})


def evict_pod(core: client.CoreV1Api, namespace: str, name: str) -> None:
    """Evict through the Eviction API, as a drain or preemption does: DisruptionTarget, then deletion."""
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
    core.create_namespaced_pod_eviction(name, namespace, eviction)


def remove_node(core: client.CoreV1Api, name: str) -> None:
    """Node loss: the node object goes; the pod garbage collector then deletes the pods bound to it."""
    core.delete_node(name)


def set_ready(core: client.CoreV1Api, namespace: str, name: str, ready: bool) -> client.V1Pod:
    """What the kubelet writes when the pod's readiness probe starts or stops passing: its Ready condition."""
    pod = core.read_namespaced_pod(name, namespace)
    value = "True" if ready else "False"
    conditions = [
        {"type": c.type, "status": value if c.type in ("Ready", "ContainersReady") else c.status}
        for c in pod.status.conditions or []
    ]
    return core.patch_namespaced_pod_status(name, namespace, {"status": {"conditions": conditions}})
