"""Server-side dry runs of what the operator would create for a job: what the real apiserver refuses, and why; and
a ValidatingAdmissionPolicy that refuses every create of one resource in one namespace, as a quota or a webhook
would."""

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client
from testbed.processes import poll_until

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


def refusing_policy(name: str, group: str, resource: str, namespace: str) -> tuple[Manifest, Manifest]:
    """A ValidatingAdmissionPolicy refusing every create of `resource` in `namespace`, and its binding."""
    rule = {"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE"], "resources": [resource]}
    refusal = {"expression": "false", "message": f"{resource} are refused here", "reason": "Forbidden"}
    policy = {
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [rule]}, "validations": [refusal]},
    }
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    binding = {
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": {"namespaceSelector": selector}},
    }
    return policy, binding


@contextlib.contextmanager
def refusing_creates(
    api: client.ApiClient, name: str, group: str, resource: str, namespace: str, *, refused: Callable[[], bool]
) -> Iterator[Callable[[], None]]:
    """The policy in force (polled until `refused()` says a create is refused) until the block ends; yields a
    function that lifts it early (deletes the binding)."""
    admission = client.AdmissionregistrationV1Api(api)
    policy, binding = refusing_policy(name, group, resource, namespace)
    admission.create_validating_admission_policy(policy)
    admission.create_validating_admission_policy_binding(binding)

    def lift() -> None:
        try:
            admission.delete_validating_admission_policy_binding(name)
        except client.ApiException as error:
            if error.status != 404:
                raise

    try:
        poll_until(refused, timeout=30, what=f"{resource} refused")
        yield lift
    finally:
        lift()
        admission.delete_validating_admission_policy(name)
