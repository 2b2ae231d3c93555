"""The Helm chart against the envtest tier's apiserver: every rendered object accepted, install then uninstall
(the CRD survives), and the REST API's identity under exactly the chart's RBAC."""

import json
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.helm import Helm
from testbed.processes import poll_until
from tests.support.builders import job_manifest
from tests.support.chart import MONITORING, VALUE_SETS, ChartIdentity, in_namespace

from trainingjob.kube.impersonation import SA_EXTRAS, Impersonating, impersonation_headers
from trainingjob.kube.reviews import Caller
from trainingjob.model import GROUP, PLURAL, VERSION

pytestmark = pytest.mark.envtest
Manifest = dict[str, Any]
MONITORING_STAND_INS = ("ServiceMonitor", "PrometheusRule")


def _stand_in_crd(kind: str) -> Manifest:
    """A minimal monitoring.coreos.com CRD that accepts any spec: the real ones are not installed here."""
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                        }
                    },
                }
            ],
        },
    }


def _served(dynamic: DynamicClient, kind: str) -> object:
    return dynamic.resources.get(api_version="monitoring.coreos.com/v1", kind=kind)


@pytest.fixture(scope="module")
def apiserver(envtest: ControlPlane) -> Iterator[client.ApiClient]:
    """The envtest admin, with the TrainingJob CRD and stand-in monitoring CRDs installed and established."""
    with envtest.api_client() as api:
        install_crd(api)
        extensions = client.ApiextensionsV1Api(api)
        for kind in MONITORING_STAND_INS:
            try:
                extensions.create_custom_resource_definition(_stand_in_crd(kind))
            except client.ApiException as error:
                if error.status != 409:
                    raise
        dynamic = DynamicClient(api)
        for kind in MONITORING_STAND_INS:
            poll_until(partial(_served, dynamic, kind), timeout=30, what=f"{kind} served")
        yield api


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_every_rendered_object_is_accepted_by_the_apiserver(
    helm: Helm, apiserver: client.ApiClient, envtest_ns: str, values: dict[str, str]
) -> None:
    """Server-side dry run with strict field validation: unknown or misplaced fields fail, not only bad YAML."""
    objects = helm.template(f"r{uuid.uuid4().hex[:6]}", envtest_ns, in_namespace(envtest_ns, values), include_crds=True)
    dynamic = DynamicClient(apiserver)
    for manifest in objects:
        resource = dynamic.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
        namespace = manifest["metadata"].get("namespace") if resource.namespaced else None
        try:
            dynamic.server_side_apply(
                resource,
                body=manifest,
                namespace=namespace,
                field_manager="test-chart",
                dry_run="All",
                query_params=[("fieldValidation", "Strict")],
            )
        except client.ApiException as error:
            pytest.fail(f"{manifest['kind']} {manifest['metadata']['name']} refused: {error.status} {error.body}")


def test_install_then_uninstall(
    helm: Helm, apiserver: client.ApiClient, envtest: ControlPlane, envtest_ns: str
) -> None:
    release = f"r{uuid.uuid4().hex[:6]}"
    notes = helm.install(release, envtest_ns, envtest.kubeconfig, MONITORING)
    assert "kubectl get tj" in notes and "kubectl apply" in notes
    expected = helm.template(release, envtest_ns, MONITORING)
    dynamic = DynamicClient(apiserver)

    def present(manifest: Manifest) -> bool:
        resource = dynamic.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
        namespace = manifest["metadata"].get("namespace") if resource.namespaced else None
        try:
            dynamic.get(resource, name=manifest["metadata"]["name"], namespace=namespace)
        except client.ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    assert len(expected) >= 12
    missing = [f"{m['kind']}/{m['metadata']['name']}" for m in expected if not present(m)]
    assert not missing
    assert client.ApiextensionsV1Api(apiserver).read_custom_resource_definition("trainingjobs.trainingjob.io")
    helm.uninstall(release, envtest_ns, envtest.kubeconfig)
    left = [f"{m['kind']}/{m['metadata']['name']}" for m in expected if present(m)]
    assert not left
    # the CRD (and so every user's TrainingJobs) survives an uninstall, as helm does for crds/
    assert client.ApiextensionsV1Api(apiserver).read_custom_resource_definition("trainingjobs.trainingjob.io")


def test_the_api_identity_can_authenticate_and_authorize_callers_but_not_read_secrets(
    envtest: ControlPlane, apiserver: client.ApiClient, helm: Helm, tmp_path: Path, envtest_ns: str
) -> None:
    identity = ChartIdentity(envtest, helm, tmp_path, templates=("templates/api.yaml",))
    try:
        with envtest.api_client(identity.kubeconfig) as api:
            review = client.V1TokenReview(spec=client.V1TokenReviewSpec(token="not-a-token"))
            assert client.AuthenticationV1Api(api).create_token_review(review).status.authenticated is not True
            access = client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user="alice",
                    resource_attributes=client.V1ResourceAttributes(
                        group="trainingjob.io", resource="trainingjobs", verb="create", namespace=envtest_ns
                    ),
                )
            )
            assert client.AuthorizationV1Api(api).create_subject_access_review(access).status.allowed is False
            custom = client.CustomObjectsApi(api)
            assert custom.list_namespaced_custom_object("trainingjob.io", "v1alpha1", envtest_ns, "trainingjobs")
            with pytest.raises(client.ApiException) as refused:
                client.CoreV1Api(api).list_namespaced_secret(envtest_ns)
            assert refused.value.status == 403
            writes_only_as_a_caller(api, apiserver, envtest_ns)
    finally:
        identity.remove()


def writes_only_as_a_caller(api: client.ApiClient, admin: client.ApiClient, namespace: str) -> None:
    """The chart's API identity may not create a job as itself, nor read a pod's log; it may as a caller who may
    (a ServiceAccount, with its groups, uid and pod extras), and not as one who may not."""
    job = job_manifest("as-a-caller")
    custom = partial(client.CustomObjectsApi(api).create_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL)
    with pytest.raises(client.ApiException) as itself:
        custom(job, dry_run="All")
    assert itself.value.status == 403
    with pytest.raises(client.ApiException) as logs:
        client.CoreV1Api(api).read_namespaced_pod_log("any", namespace)
    assert logs.value.status == 403 and "pods/log" in str(logs.value.body)
    rules = [client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=["create"])]
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role(namespace, client.V1Role(metadata={"name": "submitter"}, rules=rules))
    subject = client.RbacV1Subject(kind="ServiceAccount", name="submitter", namespace=namespace)
    ref = client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="submitter")
    binding = client.V1RoleBinding(metadata={"name": "submitter"}, role_ref=ref, subjects=[subject])
    rbac.create_namespaced_role_binding(namespace, binding)
    extra = tuple((key, ("x",)) for key in SA_EXTRAS)
    caller = Caller(f"system:serviceaccount:{namespace}:submitter", "u-1", ("system:serviceaccounts",), extra)
    as_caller = client.CustomObjectsApi(Impersonating(api, impersonation_headers(caller)))

    def created() -> bool:
        try:
            as_caller.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, job, dry_run="All")
        except client.ApiException as error:
            if error.status != 403:  # refused until the RoleBinding is in force; nothing else is expected
                raise
            return False
        return True

    poll_until(created, timeout=30.0, what="a create as the caller allowed")
    stranger = client.CustomObjectsApi(Impersonating(api, impersonation_headers(Caller("stranger"))))
    with pytest.raises(client.ApiException) as not_theirs:
        stranger.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, job, dry_run="All")
    assert not_theirs.value.status == 403
    assert 'User "stranger" cannot create' in json.loads(not_theirs.value.body)["message"]
