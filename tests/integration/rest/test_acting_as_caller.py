"""The REST API acts as its caller: Kubernetes takes each write (and each log read) for the person who asked, so
RBAC, admission policies and the audit log see them. The API's own identity here has the chart's rights, which
include no write on jobs: every write that succeeds in this suite went out impersonating its caller."""

import ssl
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.processes import poll_until
from tests.support.rest_api import TIMEOUT, Api, World, create, grant, jobs_path, manifest, service_account

from trainingjob.kube.impersonation import Impersonating, impersonation_headers
from trainingjob.kube.reviews import Caller
from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob_sdk.rest import SAME_SITE

pytestmark = pytest.mark.envtest


def writer_of(world: World) -> str:
    return f"system:serviceaccount:{world.home}:writer"


def test_the_api_itself_may_not_write_jobs(world: World, api_server: Api, trainingjob_crd: ControlPlane) -> None:
    refused = httpx.post(
        f"{trainingjob_crd.server_url}{jobs_path(world.home).replace('/api/v1', f'/apis/{GROUP}/{VERSION}')}",
        json=manifest("as-itself"), headers={"Authorization": f"Bearer {api_server.server_token}"},
        verify=ssl.create_default_context(cafile=str(trainingjob_crd.pki.cert)), timeout=TIMEOUT,
    )  # fmt: skip
    assert refused.status_code == 403, refused.text
    assert f'cannot create resource "{PLURAL}"' in refused.json()["message"]


def audited(plane: ControlPlane, name: str, verb: str) -> Callable[[], dict[str, Any] | None]:
    def find() -> dict[str, Any] | None:
        for event in plane.audit_events():
            ref = event.get("objectRef") or {}
            done = event.get("stage") == "ResponseComplete"
            if done and ref.get("resource") == PLURAL and ref.get("name") == name and event.get("verb") == verb:
                return event
        return None

    return find


def test_the_audit_log_names_the_caller_of_each_write(world: World, trainingjob_crd: ControlPlane) -> None:
    create(world, "audited")
    assert world.writer.post(jobs_path(world.home, "audited") + "/suspend").status_code == 200
    assert world.writer.delete(jobs_path(world.home, "audited")).status_code == 200
    for verb in ("create", "patch", "delete"):
        event = poll_until(audited(trainingjob_crd, "audited", verb), timeout=TIMEOUT, what=f"the {verb} audited")
        assert event["impersonatedUser"]["username"] == writer_of(world), event
        assert f"system:serviceaccounts:{world.home}" in event["impersonatedUser"]["groups"], event
        api = event["user"]["username"]
        assert api.startswith("system:serviceaccount:tj-api-system-") and api.endswith(":trainingjob-api"), event
        assert event["responseStatus"]["code"] < 300, event


@pytest.fixture
def caller_policy(trainingjob_crd: ControlPlane, world: World, admin: client.ApiClient) -> Iterator[None]:
    """A ValidatingAdmissionPolicy of the home namespace that refuses TrainingJobs its writer creates, naming the
    user it saw; ready once a dry-run create as the writer is refused."""
    name = f"not-the-writer-{uuid.uuid4().hex[:6]}"
    rule = {"apiGroups": [GROUP], "apiVersions": [VERSION], "operations": ["CREATE"], "resources": [PLURAL]}
    validation = {
        "expression": f"request.userInfo.username != '{writer_of(world)}'",
        "messageExpression": "'no jobs from ' + request.userInfo.username + ' here'",
    }
    policy = {"metadata": {"name": name}, "spec": {"matchConstraints": {"resourceRules": [rule]},
                                                   "validations": [validation]}}  # fmt: skip
    where = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": world.home}}}
    binding = {"metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"],
                                                    "matchResources": where}}  # fmt: skip
    admission = client.AdmissionregistrationV1Api(admin)
    admission.create_validating_admission_policy(policy)
    admission.create_validating_admission_policy_binding(binding)
    as_writer = client.CustomObjectsApi(Impersonating(admin, impersonation_headers(Caller(writer_of(world)))))

    def refused() -> bool:
        try:
            as_writer.create_namespaced_custom_object(
                GROUP, VERSION, world.home, PLURAL, manifest("probe"), dry_run="All"
            )
        except client.ApiException as error:
            return "no jobs from" in str(error.body)
        return False

    try:
        poll_until(refused, timeout=TIMEOUT, what="the admission policy in force")
        yield
    finally:
        admission.delete_validating_admission_policy_binding(name)
        admission.delete_validating_admission_policy(name)


@pytest.mark.usefixtures("caller_policy")
def test_admission_policies_judge_the_caller(world: World) -> None:
    refused = world.writer.post(jobs_path(world.home), json=manifest("judged"))
    assert refused.status_code in (403, 422), refused.text
    assert f"no jobs from {writer_of(world)} here" in refused.json()["message"]
    assert world.writer.get(jobs_path(world.home, "judged")).status_code == 404


def test_kubernetes_refusing_the_caller_is_told_to_them(world: World, api_server: Api, admin: client.ApiClient) -> None:
    """A caller allowed to patch a job but not to read it: the API's own check passes (suspend is a patch), and
    Kubernetes refuses the read that suspending starts with, as the caller; they are told so, as a 403."""
    create(world, "half-allowed")
    patch_only = [client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=["patch"])]
    grant(admin, "patcher", (world.home, "patcher"), patch_only, namespace=world.home)
    token = service_account(admin, world.home, "patcher")
    patcher_name = f"system:serviceaccount:{world.home}:patcher"
    attributes = client.V1ResourceAttributes(group=GROUP, resource=PLURAL, verb="patch", namespace=world.home)
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(user=patcher_name, resource_attributes=attributes)
    )
    reviews = client.AuthorizationV1Api(admin)
    poll_until(
        lambda: reviews.create_subject_access_review(review).status.allowed,
        timeout=TIMEOUT, what="the patcher's RoleBinding in force",
    )  # fmt: skip
    headers = {"Authorization": f"Bearer {token}", **SAME_SITE}
    with httpx.Client(base_url=api_server.url, timeout=TIMEOUT, headers=headers) as patcher:
        refused = patcher.post(jobs_path(world.home, "half-allowed") + "/suspend")
    assert refused.status_code == 403, refused.text
    assert f'User "{patcher_name}" cannot get' in refused.json()["message"]
