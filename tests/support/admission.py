"""Server-side dry runs of what the operator would create for a job: what the real apiserver refuses, and why."""

import json
from typing import Any

from kubernetes import client

Manifest = dict[str, Any]


def dry_run_refusals(api: client.ApiClient, namespace: str, children: list[Manifest]) -> list[tuple[Manifest, str]]:
    """Each child (Pod, Service, Secret, NetworkPolicy) the apiserver would refuse, with its message."""
    core, networking = client.CoreV1Api(api), client.NetworkingV1Api(api)
    creators = {
        "Pod": core.create_namespaced_pod,
        "Service": core.create_namespaced_service,
        "Secret": core.create_namespaced_secret,
        "NetworkPolicy": networking.create_namespaced_network_policy,
    }
    refused = []
    for child in children:
        try:
            creators[child["kind"]](namespace, child, dry_run="All")
        except client.ApiException as error:
            if error.status not in (400, 403, 422):  # 403: refused by an admission plugin
                raise
            refused.append((child, str(json.loads(error.body).get("message", error.body))))
    return refused
