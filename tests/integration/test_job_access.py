"""Each job's key Secret and NetworkPolicy, made by the real operator on the cluster tier: created with the first
pods, mounted into every pod, owned by the job (gone with it), and never shared with a namesake."""

import base64

import pytest
from kubernetes import client
from testbed.harness import Harness
from testbed.processes import poll_until
from tests.support.builders import job_manifest

from trainingjob.children.access import KEY_BYTES, KEY_MOUNT_PATH
from trainingjob.children.naming import JOB_LABEL

pytestmark = pytest.mark.cluster


def secrets_of(h: Harness, job: str) -> list[client.V1Secret]:
    return list(h.core.list_namespaced_secret(h.ns, label_selector=f"{JOB_LABEL}={job}").items)


def policies_of(h: Harness, job: str) -> list[client.V1NetworkPolicy]:
    networking = client.NetworkingV1Api(h.core.api_client)
    return list(networking.list_namespaced_network_policy(h.ns, label_selector=f"{JOB_LABEL}={job}").items)


def test_a_job_gets_its_own_key_and_policy_and_they_go_with_it(h: Harness) -> None:
    h.create(job_manifest("guarded", mode="ParameterServer", workers=2, servers=1))
    pods = h.wait_running_pods("guarded", 3, attempt=1)
    uid = h.job("guarded")["metadata"]["uid"]
    [secret], [policy] = secrets_of(h, "guarded"), policies_of(h, "guarded")
    assert len(base64.b64decode(secret.data["key"])) == KEY_BYTES and secret.immutable
    for owned in (secret, policy):
        assert [(o.uid, o.controller) for o in owned.metadata.owner_references] == [(uid, True)]
    for pod in pods:
        volume = next(v for v in pod.spec.volumes if v.secret is not None)
        assert volume.secret.secret_name == secret.metadata.name
        assert any(m.mount_path == KEY_MOUNT_PATH for m in pod.spec.containers[0].volume_mounts)
    assert policy.spec.pod_selector.match_labels == {JOB_LABEL: "guarded"}
    assert policy.spec.policy_types == ["Ingress"]
    assert policy.spec.ingress[0]._from[0].pod_selector.match_labels == {JOB_LABEL: "guarded"}
    first_key = secret.data["key"]
    h.custom.delete_namespaced_custom_object("trainingjob.io", "v1alpha1", h.ns, "trainingjobs", "guarded")
    h.wait_gone("guarded", "the job deleted")
    poll_until(
        lambda: not secrets_of(h, "guarded") and not policies_of(h, "guarded"),
        timeout=60,
        what="the key and the policy collected with their job",
    )
    h.create(job_manifest("guarded", mode="ParameterServer", workers=2, servers=1))
    h.wait_running_pods("guarded", 3, attempt=1)
    [again] = secrets_of(h, "guarded")
    assert again.data["key"] != first_key and again.metadata.name != secret.metadata.name
