"""People's rights: the chart's ClusterRoles aggregate into the built-in view, edit and admin roles, so a user
bound to `view` reads TrainingJobs and one bound to `edit` creates them (the controller-manager aggregates)."""

import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.helm import Helm
from testbed.processes import poll_until

pytestmark = pytest.mark.cluster


@pytest.fixture
def user_roles(cluster: ControlPlane) -> Iterator[client.ApiClient]:
    """The chart's user roles installed cluster-wide, removed after the test."""
    with tempfile.TemporaryDirectory(prefix="tj-helm-") as home:
        objects = Helm(Path(home)).template(
            f"roles-{uuid.uuid4().hex[:6]}", "tj-system", show_only=["templates/user-roles.yaml"]
        )
    with cluster.api_client() as api:
        roles = client.RbacAuthorizationV1Api(api)
        for role in objects:
            roles.create_cluster_role(role)
        try:
            yield api
        finally:
            for role in objects:
                roles.delete_cluster_role(role["metadata"]["name"])


def allowed(api: client.ApiClient, user: str, namespace: str, verb: str, resource: str = "trainingjobs") -> bool:
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=user,
            resource_attributes=client.V1ResourceAttributes(
                group="trainingjob.io", resource=resource, verb=verb, namespace=namespace
            ),
        )
    )
    return bool(client.AuthorizationV1Api(api).create_subject_access_review(review).status.allowed)


def bind(api: client.ApiClient, namespace: str, user: str, cluster_role: str) -> None:
    binding = {
        "metadata": {"name": f"{user}-{cluster_role}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(namespace, binding)


def test_view_reads_jobs_and_edit_also_writes_them(user_roles: client.ApiClient, cluster_ns: str) -> None:
    api = user_roles
    bind(api, cluster_ns, "viewer", "view")
    bind(api, cluster_ns, "editor", "edit")
    poll_until(
        lambda: allowed(api, "viewer", cluster_ns, "list") and allowed(api, "editor", cluster_ns, "create"),
        timeout=60,
        what="the chart's roles aggregated into view and edit",
    )
    assert allowed(api, "viewer", cluster_ns, "get", "trainingjobs/status")
    assert not allowed(api, "viewer", cluster_ns, "create") and not allowed(api, "viewer", cluster_ns, "delete")
    assert allowed(api, "editor", cluster_ns, "delete") and allowed(api, "editor", cluster_ns, "watch")
    assert not allowed(api, "editor", "kube-system", "create")  # a RoleBinding grants its namespace only
    assert not allowed(api, "stranger", cluster_ns, "list")
