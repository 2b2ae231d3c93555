"""No pod of a job is created before the objects it needs exist: its key Secret (every pod mounts it), its Service
(the ranks find each other through it) and its NetworkPolicy (without it, its ranks would listen on ports any pod of
the cluster could reach). While the apiserver refuses one (here a ValidatingAdmissionPolicy, as a webhook, a quota
or a missing RBAC rule would), the Prepared condition names it and quotes the apiserver, one Event says so (not one
per retry), and no pod exists; once it is accepted, the pods are created and run."""

import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.harness import Harness, condition
from tests.support.admission import refusing_creates
from tests.support.builders import job_manifest

pytestmark = pytest.mark.cluster

Manifest = dict[str, Any]
# What each object is, to a policy (group, resource) and to the operator (kind, and how its name starts).
OBJECTS = {
    "Secret": ("", "secrets", "gated-key-"),
    "Service": ("", "services", "gated"),
    "NetworkPolicy": ("networking.k8s.io", "networkpolicies", "gated-ingress-"),
}
PROBES: dict[str, Manifest] = {
    "Secret": {"metadata": {"name": "probe"}},
    "Service": {"metadata": {"name": "probe"}, "spec": {"ports": [{"port": 80}]}},
    "NetworkPolicy": {"metadata": {"name": "probe"}, "spec": {"podSelector": {}}},
}


@pytest.fixture(params=list(OBJECTS), ids=[kind.lower() for kind in OBJECTS])
def refused(request: pytest.FixtureRequest, cluster: ControlPlane, cluster_ns: str) -> Iterator[tuple[str, str]]:
    """The kind of object refused in the test's namespace, and the policy's binding, which the test may delete."""
    kind: str = request.param
    group, resource, _ = OBJECTS[kind]
    name = f"no-{resource}-{uuid.uuid4().hex[:6]}"
    with cluster.api_client() as api:
        probe = partial(_probe_refused, api, kind, cluster_ns)
        with refusing_creates(api, name, group, resource, cluster_ns, refused=probe):
            yield kind, name


def _probe_refused(api: client.ApiClient, kind: str, namespace: str) -> bool:
    """Whether the policy is in force yet: a dry-run create of the kind is refused."""
    core, networking = client.CoreV1Api(api), client.NetworkingV1Api(api)
    create = {
        "Secret": core.create_namespaced_secret,
        "Service": core.create_namespaced_service,
        "NetworkPolicy": networking.create_namespaced_network_policy,
    }[kind]
    try:
        create(namespace, PROBES[kind], dry_run="All")
    except client.ApiException as error:
        return bool(error.status == 403)
    return False


def _prepared(job: Manifest) -> Manifest:
    return next((c for c in (job.get("status") or {}).get("conditions", []) if c["type"] == "Prepared"), {})


def _events(h: Harness, name: str, reason: str) -> int:
    items = h.core.list_namespaced_event(h.ns, field_selector=f"involvedObject.name={name}").items
    return sum(e.reason == reason for e in items)


def test_no_pod_is_created_while_an_object_it_needs_is_refused(
    h: Harness, cluster: ControlPlane, refused: tuple[str, str]
) -> None:
    kind, binding = refused
    _, resource, prefix = OBJECTS[kind]
    h.create(job_manifest("gated"))
    first = h.wait(
        "gated",
        lambda job: f"{resource} are refused here" in _prepared(job).get("message", ""),
        "the Prepared condition quoting the apiserver",
    )
    said = _prepared(first)
    assert (said["status"], said["reason"]) == ("False", f"{kind}CreateRefused")
    assert f"{kind} {prefix}" in said["message"]
    probed = said["lastProbeTime"]
    retried = h.wait(
        "gated",
        lambda job: _prepared(job).get("lastProbeTime", probed) > probed,
        "the refused object tried again",
    )
    assert h.pods("gated") == []  # no pass created a pod
    assert condition(retried, "Running")["status"] == "False"
    assert _events(h, "gated", f"{kind}CreateRefused") == 1  # once for the cause, not once per retry
    with cluster.api_client() as api:
        client.AdmissionregistrationV1Api(api).delete_validating_admission_policy_binding(binding)
    h.wait_running_pods("gated", 2, attempt=1)
    running = h.wait_phase("gated", "Running")
    assert _prepared(running)["status"] == "True"


@pytest.mark.parametrize("kind", ["Secret", "NetworkPolicy"], ids=["secret", "networkpolicy"])
def test_objects_created_once_do_not_hold_a_restart_when_their_kind_is_refused_later(
    h: Harness, cluster: ControlPlane, cluster_ns: str, kind: str
) -> None:
    """A namespace at its quota of Secrets (or NetworkPolicies, or under a policy that refuses their creation)
    refuses every create of that kind, even of a name that exists: admission runs before the apiserver finds the
    name taken. A job whose key and policy exist restarts without creating them again."""
    group, resource, _ = OBJECTS[kind]
    h.create(job_manifest("again"))
    h.wait_running_pods("again", 2, attempt=1)
    assert _prepared(h.wait_phase("again", "Running"))["status"] == "True"
    name = f"no-{resource}-{uuid.uuid4().hex[:6]}"
    with cluster.api_client() as api:
        probe = partial(_probe_refused, api, kind, cluster_ns)
        with refusing_creates(api, name, group, resource, cluster_ns, refused=probe):
            h.core.delete_namespaced_pod(h.pods("again")[1].metadata.name, h.ns)  # a disruption: the gang restarts
            h.wait_running_pods("again", 2, attempt=2)
            running = h.wait_phase("again", "Running")
    assert _prepared(running)["status"] == "True"
    assert _events(h, "again", f"{kind}CreateRefused") == 0
