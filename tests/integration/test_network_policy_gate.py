"""A job's pods are not created while the apiserver refuses its NetworkPolicy: its ranks would listen on rendezvous,
parameter-server and progress ports that any pod of the cluster could reach. The Created condition names the
refused policy; once the policy is accepted, the pods are created and run."""

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.harness import Harness, condition
from testbed.processes import poll_until
from tests.support.builders import job_manifest

pytestmark = pytest.mark.cluster


@pytest.fixture
def refusing_policies(cluster: ControlPlane, cluster_ns: str) -> Iterator[str]:
    """A ValidatingAdmissionPolicy that refuses every NetworkPolicy in the test's namespace (as an admission
    webhook or a missing RBAC rule would); yields its binding's name, which the test may delete."""
    name = f"no-netpol-{uuid.uuid4().hex[:6]}"
    policy = {
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["networking.k8s.io"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["networkpolicies"],
                    }
                ]
            },
            "validations": [
                {"expression": "false", "message": "NetworkPolicies are refused here", "reason": "Forbidden"}
            ],
        },
    }
    binding = {
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": cluster_ns}}},
        },
    }
    with cluster.api_client() as api:
        admission = client.AdmissionregistrationV1Api(api)
        admission.create_validating_admission_policy(policy)
        admission.create_validating_admission_policy_binding(binding)
        try:
            yield name
        finally:
            try:
                admission.delete_validating_admission_policy_binding(name)
            except client.ApiException as error:
                if error.status != 404:
                    raise
            admission.delete_validating_admission_policy(name)


def _probe_refused(cluster: ControlPlane, namespace: str) -> bool:
    """Whether the policy is in force yet: a dry-run NetworkPolicy is refused."""
    probe = {"metadata": {"name": "probe"}, "spec": {"podSelector": {}}}
    with cluster.api_client() as api:
        try:
            client.NetworkingV1Api(api).create_namespaced_network_policy(namespace, probe, dry_run="All")
        except client.ApiException as error:
            return bool(error.status == 403)
    return False


def test_no_pod_runs_unguarded_while_the_network_policy_is_refused(
    h: Harness, cluster: ControlPlane, refusing_policies: str
) -> None:
    poll_until(lambda: _probe_refused(cluster, h.ns), timeout=30, what="NetworkPolicies refused")
    h.create(job_manifest("guarded"))
    refused = h.wait(
        "guarded",
        lambda job: any(
            c["type"] == "Created" and "NetworkPolicies are refused here" in c.get("message", "")
            for c in (job.get("status") or {}).get("conditions", [])
        ),
        "the Created condition naming the refused policy",
    )
    assert "guarded-ingress-" in condition(refused, "Created")["message"]
    assert h.pods("guarded") == []  # the pass that was refused created no pod
    with cluster.api_client() as api:
        client.AdmissionregistrationV1Api(api).delete_validating_admission_policy_binding(refusing_policies)
    h.wait_running_pods("guarded", 2, attempt=1)
    with cluster.api_client() as api:
        policies = client.NetworkingV1Api(api).list_namespaced_network_policy(h.ns).items
    assert [p.metadata.name for p in policies if p.metadata.name.startswith("guarded-ingress-")]
