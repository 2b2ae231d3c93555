"""The envtest tier is real: the pinned apiserver version, RBAC for client-certificate users, ServiceAccount tokens
through TokenReview and SubjectAccessReview."""

from pathlib import Path

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.processes import poll_until

pytestmark = pytest.mark.envtest


def test_apiserver_reports_the_pinned_version(envtest: ControlPlane) -> None:
    with envtest.api_client() as api:
        version = client.VersionApi(api).get_code()
    pinned = (Path(__file__).parents[2] / "scripts" / "controlplane.env").read_text()
    assert f"KUBERNETES_VERSION={version.git_version}\n" in pinned


def test_unprivileged_user_is_refused_until_rbac_grants(envtest: ControlPlane, envtest_ns: str) -> None:
    alice = envtest.user_kubeconfig("alice")
    with envtest.api_client(alice) as api:
        with pytest.raises(client.ApiException) as refused:
            client.CoreV1Api(api).list_namespaced_pod(envtest_ns)
        assert refused.value.status == 403
        # A Role of our own: the aggregated "view" ClusterRole is filled in by the controller-manager only.
        role = client.V1Role(
            metadata=client.V1ObjectMeta(name="pod-reader"),
            rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get", "list"])],
        )
        binding = client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="alice-reads-pods"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="pod-reader"),
            subjects=[client.RbacV1Subject(kind="User", name="alice", api_group="rbac.authorization.k8s.io")],
        )
        with envtest.api_client() as admin:
            rbac = client.RbacAuthorizationV1Api(admin)
            rbac.create_namespaced_role(envtest_ns, role)
            rbac.create_namespaced_role_binding(envtest_ns, binding)
        poll_until(
            lambda: client.CoreV1Api(api).list_namespaced_pod(envtest_ns),
            timeout=10,
            what="alice to be allowed to list pods",
        )
        with pytest.raises(client.ApiException) as still_refused:
            client.CoreV1Api(api).list_namespaced_pod("default")
        assert still_refused.value.status == 403


def test_service_account_token_passes_token_review(envtest: ControlPlane, envtest_ns: str) -> None:
    with envtest.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_service_account(
            envtest_ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="bot"))
        )
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
        )
        token = core.create_namespaced_service_account_token("bot", envtest_ns, request).status.token
        review = client.AuthenticationV1Api(api).create_token_review(
            client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        )
        assert review.status.authenticated is True
        assert review.status.user.username == f"system:serviceaccount:{envtest_ns}:bot"
        forged = client.AuthenticationV1Api(api).create_token_review(
            client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token[:-4] + "AAAA"))
        )
        assert not forged.status.authenticated
        access = client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(
                user=review.status.user.username,
                groups=review.status.user.groups,
                resource_attributes=client.V1ResourceAttributes(namespace=envtest_ns, verb="list", resource="pods"),
            )
        )
        assert client.AuthorizationV1Api(api).create_subject_access_review(access).status.allowed is False
