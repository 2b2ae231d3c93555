"""Tenancy guard rails: the chart's ValidatingAdmissionPolicy, in a real apiserver, refuses TrainingJobs that ask
for a hostPath outside the allowed prefixes, a volume source the cluster does not allow, or a ServiceAccount not
on the list, naming the field; every example passes with the defaults."""

import json
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.examples import JOB_EXAMPLES
from testbed.helm import Helm
from testbed.processes import poll_until
from tests.support.corpus_trainingjob import checkpoint, command_job, job, with_value

from trainingjob.model import GROUP, PLURAL, VERSION

pytestmark = pytest.mark.envtest

HOST_PATH = {"name": "data", "hostPath": {"path": "/mnt/datasets/imagenet"}}
NFS = {"name": "share", "nfs": {"server": "nfs.example.com", "path": "/exports"}}
STRICT = {
    "tenancy.hostPathPrefixes": "{/mnt/datasets/}",
    "tenancy.volumeTypes": "{persistentVolumeClaim,emptyDir,configMap,secret}",
    "tenancy.serviceAccounts": "{default,trainer}",
}
Verdict = Callable[[dict[str, Any]], str | None]


def with_volume(volume: dict[str, Any]) -> dict[str, Any]:
    mount = {"name": volume["name"], "mountPath": "/data"}
    return command_job(volumes=[volume], volumeMounts=[mount])


@pytest.fixture
def admission(envtest: ControlPlane, envtest_ns: str, request: pytest.FixtureRequest) -> Iterator[Verdict]:
    """The chart's policy (with the test's values) bound to the test's namespace only; a verdict function that
    dry-runs a job there: None when admitted, else the apiserver's message."""
    values: dict[str, str] = getattr(request, "param", {})
    with tempfile.TemporaryDirectory(prefix="tj-helm-") as home:
        rendered = Helm(Path(home)).template(
            f"t{uuid.uuid4().hex[:6]}", "tj-system", values, show_only=["templates/tenancy-policy.yaml"]
        )
    policy, binding = rendered
    binding["spec"]["matchResources"] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": envtest_ns}}
    }
    with envtest.api_client() as api:
        install_crd(api)
        admission = client.AdmissionregistrationV1Api(api)
        admission.create_validating_admission_policy(policy)
        admission.create_validating_admission_policy_binding(binding)
        jobs = client.CustomObjectsApi(api)

        def verdict(manifest: dict[str, Any]) -> str | None:
            try:
                jobs.create_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, manifest, dry_run="All")
            except client.ApiException as error:
                return str(json.loads(error.body)["message"])
            return None

        try:
            probe = with_volume({"name": "probe", "hostPath": {"path": "/etc"}})  # refused by every setting
            poll_until(lambda: verdict(probe) is not None, timeout=30, what="the policy in force")
            yield verdict
        finally:
            admission.delete_validating_admission_policy_binding(binding["metadata"]["name"])
            admission.delete_validating_admission_policy(policy["metadata"]["name"])


@pytest.mark.parametrize("example", JOB_EXAMPLES, ids=[e.stem for e in JOB_EXAMPLES])
def test_every_example_passes_the_default_policy(admission: Verdict, example: Path) -> None:
    assert admission(yaml.safe_load(example.read_text())) is None


def test_the_default_policy_refuses_any_host_path_naming_the_field(admission: Verdict) -> None:
    said = admission(with_volume(HOST_PATH))
    assert said is not None and "spec.workers.volumes" in said and "hostPath under: none" in said
    said = admission(job(checkpoint=checkpoint(volume={"hostPath": {"path": "/mnt/ckpt"}})))
    assert said is not None and "spec.checkpoint.volume" in said
    assert admission(with_volume(NFS)) is None


@pytest.mark.parametrize("admission", [STRICT], indirect=True, ids=["strict"])
@pytest.mark.parametrize(
    ("manifest", "field"),
    [
        pytest.param(with_volume(HOST_PATH), None, id="host-path-under-a-prefix"),
        pytest.param(
            with_volume({"name": "d", "hostPath": {"path": "/mnt/datasets-x"}}),
            "spec.workers.volumes",
            id="host-path-beside-the-prefix",
        ),
        pytest.param(with_volume(NFS), "spec.workers.volumes", id="nfs-not-allowed"),
        pytest.param(job(workers={"replicas": 1, "serviceAccountName": "trainer"}), None, id="allowed-account"),
        pytest.param(
            job(workers={"replicas": 1, "serviceAccountName": "cluster-admin-sa"}),
            "spec.workers.serviceAccountName",
            id="other-account",
        ),
        pytest.param(
            with_value(
                job(mode="ParameterServer", parameterServers={"replicas": 1}),
                "spec.parameterServers.serviceAccountName",
                "root-sa",
            ),
            "spec.parameterServers.serviceAccountName",
            id="ps-account",
        ),
    ],
)
def test_a_strict_policy_bounds_volumes_and_accounts(
    admission: Verdict, manifest: dict[str, Any], field: str | None
) -> None:
    said = admission(manifest)
    if field is None:
        assert said is None
    else:
        assert said is not None and field in said, said
