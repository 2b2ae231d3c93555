"""Tenancy guard rails: the chart's ValidatingAdmissionPolicy, in a real apiserver, refuses TrainingJobs (and
TrainingSweeps' trial templates) that ask for a hostPath outside the allowed prefixes, a volume source the cluster
does not allow, a ServiceAccount not on the list, root, capabilities, unconfined profiles, the control plane, a
system priority or another job's key, naming the field; every example and honest near miss passes the defaults."""

import json
import tempfile
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.examples import JOB_EXAMPLES
from testbed.helm import Helm
from testbed.namespaces import fresh_namespace
from testbed.processes import poll_until
from tests.support.builders import sweep_manifest
from tests.support.corpus_hostile import HONEST, HOSTILE, PREFIXED
from tests.support.corpus_trainingjob import Case, checkpoint, command_job, job, with_value

from trainingjob.generate import crd
from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob.model.sweep import SWEEP_KIND, SWEEP_PLURAL

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
    mount = {"name": volume["name"], "mountPath": "/data", "readOnly": True}
    return command_job(volumes=[volume], volumeMounts=[mount])


class Policies:
    """The chart's policy, once per set of values (the test's), each bound to a namespace of its own; a job is judged
    by a dry-run create there. Kept for the module: the apiserver takes a few seconds to put a new policy in force,
    which, paid by each of the 64 tests, was 6 minutes of the suite."""

    def __init__(self, plane: ControlPlane, api: client.ApiClient) -> None:
        self.plane, self.api = plane, api
        self.admission, self.jobs = client.AdmissionregistrationV1Api(api), client.CustomObjectsApi(api)
        self.verdicts: dict[tuple[tuple[str, str], ...], Verdict] = {}
        self.namespaces: list[Generator[str, None, None]] = []
        self.made: list[tuple[str, str]] = []  # (policy, binding) names

    def __call__(self, values: dict[str, str]) -> Verdict:
        key = tuple(sorted(values.items()))
        if key not in self.verdicts:
            self.verdicts[key] = self._in_force(values, len(self.verdicts))
        return self.verdicts[key]

    def _in_force(self, values: dict[str, str], number: int) -> Verdict:
        namespaces = fresh_namespace(self.plane, f"tenancy-policy-{number}")
        namespace = next(namespaces)
        self.namespaces.append(namespaces)
        with tempfile.TemporaryDirectory(prefix="tj-helm-") as home:
            rendered = Helm(Path(home)).template(
                f"t{uuid.uuid4().hex[:6]}", "tj-system", values, show_only=["templates/tenancy-policy.yaml"]
            )
        policy, binding = rendered
        binding["spec"]["matchResources"] = {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
        }
        self.admission.create_validating_admission_policy(policy)
        self.admission.create_validating_admission_policy_binding(binding)
        self.made.append((policy["metadata"]["name"], binding["metadata"]["name"]))

        def verdict(manifest: dict[str, Any]) -> str | None:
            try:
                plural = SWEEP_PLURAL if manifest["kind"] == SWEEP_KIND else PLURAL
                self.jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, manifest, dry_run="All")
            except client.ApiException as error:
                return str(json.loads(error.body)["message"])
            return None

        probe = with_volume({"name": "probe", "hostPath": {"path": "/etc"}})  # refused by every setting
        poll_until(lambda: verdict(probe) is not None, timeout=30, what="the policy in force")
        return verdict

    def close(self) -> None:
        for policy, binding in self.made:
            self.admission.delete_validating_admission_policy_binding(binding)
            self.admission.delete_validating_admission_policy(policy)
        for namespaces in self.namespaces:
            namespaces.close()


@pytest.fixture(scope="module")
def policies(envtest: ControlPlane) -> Iterator[Policies]:
    with envtest.api_client() as api:
        install_crd(api)
        install_crd(api, crd.SWEEP)
        made = Policies(envtest, api)
        try:
            yield made
        finally:
            made.close()


@pytest.fixture
def admission(policies: Policies, request: pytest.FixtureRequest) -> Verdict:
    """A verdict function for the chart's policy with the test's values (none: the defaults): None when a dry-run
    create of the job is admitted, else the apiserver's message."""
    return policies(getattr(request, "param", {}))


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


def _judged(admission: Verdict, case: Case) -> None:
    said = admission(case.manifest)
    if case.field is None:
        assert said is None, said
    else:  # refused by the policy (not the CRD), naming the field
        assert said is not None and "denied request" in said and f"{case.field}:" in said, said


@pytest.mark.parametrize("case", HOSTILE + HONEST, ids=[c.id for c in HOSTILE + HONEST])
def test_the_default_policy_refuses_what_would_reach_beyond_the_jobs_pods(admission: Verdict, case: Case) -> None:
    _judged(admission, case)


@pytest.mark.parametrize("admission", [{"tenancy.hostPathPrefixes": "{/mnt/datasets/}"}], indirect=True, ids=["data"])
@pytest.mark.parametrize("case", PREFIXED, ids=[c.id for c in PREFIXED])
def test_host_paths_stay_under_their_prefix_and_read_only(admission: Verdict, case: Case) -> None:
    _judged(admission, case)


LOOSE = {
    "tenancy.allowRoot": "true",
    "tenancy.capabilities": "{NET_BIND_SERVICE,IPC_LOCK}",
    "tenancy.secrets": "{hf-token}",
}


@pytest.mark.parametrize("admission", [LOOSE], indirect=True, ids=["loose"])
@pytest.mark.parametrize(
    ("manifest", "field"),
    [
        pytest.param(HOSTILE[0].manifest, None, id="root-allowed"),
        pytest.param(command_job(securityContext={"addCapabilities": ["IPC_LOCK"]}), None, id="listed-capability"),
        pytest.param(
            command_job(securityContext={"addCapabilities": ["SYS_ADMIN"]}),
            "spec.workers.securityContext.addCapabilities",
            id="unlisted-capability",
        ),
        pytest.param(command_job(envFrom=[{"secretRef": {"name": "hf-token"}}]), None, id="listed-secret"),
        pytest.param(command_job(envFrom=[{"secretRef": {"name": "wandb"}}]), "spec.workers.env", id="unlisted-secret"),
    ],
)
def test_the_settings_loosen_one_thing_each(admission: Verdict, manifest: dict[str, Any], field: str | None) -> None:
    _judged(admission, Case("loose", manifest, field))


def test_a_sweeps_trial_template_is_judged_at_its_own_path(admission: Verdict) -> None:
    hostile = sweep_manifest()
    hostile["spec"]["template"]["spec"]["workers"]["securityContext"] = {"addCapabilities": ["SYS_ADMIN"]}
    said = admission(hostile)
    assert said is not None and "spec.template.spec.workers.securityContext.addCapabilities:" in said, said
    assert admission(sweep_manifest()) is None
