"""The node tier's storage: a default StorageClass whose claims are provisioned as local volumes on the node by our
provisioner (testbed/provisioner/provisioner.py, the `provisioner` image of scripts/build-images.sh), so a
claim as shipped in examples/ binds as on any cluster. The provisioner runs as a Deployment in kube-system with a
ServiceAccount that may only read claims and make and delete volumes."""

from pathlib import Path
from typing import Any

from kubernetes import client, utils

from testbed.node_images import BuiltImage
from testbed.processes import poll_until

STORAGE_CLASS = "standard"
PROVISIONER = "trainingjob.io/local-volume"
NAMESPACE = "kube-system"
NAME = "volume-provisioner"
RBAC = "rbac.authorization.k8s.io/v1"
_READY_TIMEOUT = 120.0


def manifests(image: BuiltImage, node: str, volumes: Path) -> list[dict[str, Any]]:
    """The StorageClass (the default), the provisioner's RBAC and its Deployment."""
    labels = {"app.kubernetes.io/name": NAME}
    rules = [
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "create", "delete"]},
    ]
    env = [
        {"name": "PROVISIONER", "value": PROVISIONER},
        {"name": "VOLUMES_DIR", "value": str(volumes)},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    container = {
        "name": "provisioner",
        "image": image.local_ref,
        "imagePullPolicy": "Never",
        "env": env,
        "volumeMounts": [{"name": "volumes", "mountPath": str(volumes)}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
    }
    pod = {
        "metadata": {"labels": labels},
        "spec": {
            "serviceAccountName": NAME,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [container],
            "volumes": [{"name": "volumes", "hostPath": {"path": str(volumes), "type": "DirectoryOrCreate"}}],
        },
    }
    subject = {"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}
    return [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": STORAGE_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": PROVISIONER,
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate",  # one node: a claim binds before any pod asks for it
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": NAMESPACE}},
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": NAME}, "rules": rules},
        {
            "apiVersion": RBAC,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [subject],
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": pod},
        },
    ]


def deploy(api: client.ApiClient, image: BuiltImage, node: str, volumes: Path) -> None:
    """Create the StorageClass and the provisioner's Deployment (wait_ready() waits for its pod)."""
    utils.create_from_yaml(api, yaml_objects=manifests(image, node, volumes))


def wait_ready(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)

    def available() -> bool:
        return bool(apps.read_namespaced_deployment_status(NAME, NAMESPACE).status.available_replicas)

    poll_until(available, timeout=_READY_TIMEOUT, interval=0.2, what=f"the {NAME} Deployment available")


def provisioned_folder(core: client.CoreV1Api, namespace: str, claim: str, timeout: float = 60) -> Path:
    """The node folder of a claim's volume, once the claim is Bound."""

    def bound() -> str | None:
        found = core.read_namespaced_persistent_volume_claim(claim, namespace)
        return str(found.spec.volume_name) if found.status.phase == "Bound" else None

    volume = poll_until(bound, timeout=timeout, what=f"claim {namespace}/{claim} to be Bound")
    return Path(core.read_persistent_volume(volume).spec.local.path)
