"""Pods secure by default: every pod the operator would create for the examples, or for a job using every pod
field (init containers, sidecars, envFrom, ...), passes Pod Security "restricted" in the real apiserver
(server-side dry run), and loosening a role's or a container's securityContext is what gets a pod refused."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.examples import JOB_EXAMPLES
from tests.support.admission import dry_run_refusals
from tests.support.corpus_trainingjob import job, pod_fields_job, sidecar, with_value

from trainingjob.children.naming import INDEX_LABEL, ROLE_LABEL
from trainingjob.children.specs import pod_manifest, replicas, service_manifest
from trainingjob.model import TrainingJob

pytestmark = pytest.mark.envtest

UID = "00000000-0000-0000-0000-000000000001"


@pytest.fixture
def restricted(envtest: ControlPlane, envtest_ns: str) -> Iterator[client.CoreV1Api]:
    """The test's namespace, enforcing Pod Security "restricted"."""
    with envtest.api_client() as api:
        core = client.CoreV1Api(api)
        core.patch_namespace(envtest_ns, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
        yield core


@pytest.fixture
def runtime_class(envtest: ControlPlane) -> Iterator[str]:
    """The RuntimeClass pod_fields_job() names: admission refuses a pod whose RuntimeClass does not exist."""
    with envtest.api_client() as api:
        node = client.NodeV1Api(api)
        name = pod_fields_job()["spec"]["workers"]["runtimeClassName"]
        node.create_runtime_class({"metadata": {"name": name}, "handler": name})
        try:
            yield name
        finally:
            node.delete_runtime_class(name)


def refusals(core: client.CoreV1Api, namespace: str, manifest: dict[str, Any]) -> list[str]:
    """What the apiserver says, on a dry run, to each pod and the Service of the job; [] when all pass."""
    job = TrainingJob.model_validate(manifest | {"metadata": {**manifest["metadata"], "namespace": namespace}})
    children = [pod_manifest(job, UID, replica, 1) for replica in replicas(job)] + [service_manifest(job, UID)]
    return [f"{_slot(child)}: {said}" for child, said in dry_run_refusals(core.api_client, namespace, children)]


def _slot(child: dict[str, Any]) -> str:
    labels = child["metadata"].get("labels") or {}
    return f"{labels[ROLE_LABEL]}-{labels[INDEX_LABEL]}" if child["kind"] == "Pod" else "service"


@pytest.mark.parametrize("example", JOB_EXAMPLES, ids=[e.stem for e in JOB_EXAMPLES])
def test_every_examples_pods_pass_restricted(restricted: client.CoreV1Api, envtest_ns: str, example: Path) -> None:
    assert refusals(restricted, envtest_ns, yaml.safe_load(example.read_text())) == []


@pytest.mark.parametrize(
    ("loosened", "violation"),
    [
        pytest.param({"runAsUser": 0, "runAsNonRoot": False}, "runAsNonRoot", id="root"),
        pytest.param({"addCapabilities": ["IPC_LOCK"]}, "IPC_LOCK", id="capability"),
        pytest.param({"allowPrivilegeEscalation": True}, "allowPrivilegeEscalation", id="escalation"),
        pytest.param({"seccompProfile": "Unconfined"}, "seccompProfile", id="unconfined"),
    ],
)
def test_loosening_a_role_is_what_restricted_refuses(
    restricted: client.CoreV1Api, envtest_ns: str, loosened: dict[str, Any], violation: str
) -> None:
    manifest = with_value(job(), "spec.workers.securityContext", loosened)
    said = refusals(restricted, envtest_ns, manifest)
    assert len(said) == 2 and all("violates PodSecurity" in s and violation in s for s in said), said


def test_each_role_is_loosened_on_its_own(restricted: client.CoreV1Api, envtest_ns: str) -> None:
    manifest = job(mode="ParameterServer", parameterServers={"replicas": 1}, workers={"replicas": 2})
    manifest = with_value(manifest, "spec.parameterServers.securityContext", {"addCapabilities": ["IPC_LOCK"]})
    said = refusals(restricted, envtest_ns, manifest)
    assert [s.split(":")[0] for s in said] == ["ps-0"], said


def test_a_job_using_every_pod_field_gets_pods_that_pass_restricted(
    restricted: client.CoreV1Api, envtest_ns: str, runtime_class: str
) -> None:
    assert refusals(restricted, envtest_ns, pod_fields_job()) == []


def test_a_sidecar_running_as_root_is_what_restricted_refuses(
    restricted: client.CoreV1Api, envtest_ns: str, runtime_class: str
) -> None:
    root = sidecar(name="rooted", securityContext={"runAsUser": 0, "runAsNonRoot": False})
    said = refusals(restricted, envtest_ns, pod_fields_job(sidecars=[root]))
    assert len(said) == 2 and all("violates PodSecurity" in s and 'container "rooted"' in s for s in said), said
