"""The SDK against a real apiserver, through both transports: the Kubernetes API with a ServiceAccount's
kubeconfig, and the REST API with the same account's token. The same calls, the same typed answers."""

import json
import textwrap
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.processes import free_port, poll_until
from testbed.silent_kubelet import pod_of
from tests.support.rest_api import (
    TIMEOUT,
    Clients,
    World,
    grant,
    manifest,
    token_kubeconfig,
    worker_failed,
)

from trainingjob.model import GROUP, PLURAL, VERSION, Phase, TrainingJob
from trainingjob_sdk import (
    Client,
    Conflict,
    Forbidden,
    Invalid,
    JobFailed,
    NotConfigured,
    NotFound,
    Unavailable,
    WaitTimeout,
)

pytestmark = pytest.mark.envtest


@pytest.fixture
def sdk(clients: Clients, world: World) -> Iterator[Client]:
    """The writer of the home namespace (and, for the kube transport, a reader of its pods)."""
    pods = [client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["list"])]
    grant(clients.admin, "sdk-pods", (world.home, "writer"), pods, namespace=world.home)
    with clients.of(world.home, "writer") as made:
        yield made


@pytest.fixture
def reader(clients: Clients, world: World) -> Iterator[Client]:
    """Who may only read jobs, through the same transport as `sdk`."""
    with clients.of(world.other, "reader") as made:
        yield made


def phase_of(job: TrainingJob) -> Phase | None:
    return job.status.phase if job.status else None


def set_status(admin: client.ApiClient, namespace: str, name: str, status: dict[str, object]) -> None:
    """Write the job's status as the operator would (the status subresource)."""
    client.CustomObjectsApi(admin).patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": status}
    )


def test_create_from_text_a_dict_and_a_model_then_get_list_and_delete(sdk: Client, world: World) -> None:
    text = textwrap.dedent(f"""\
        apiVersion: trainingjob.io/v1alpha1
        kind: TrainingJob
        metadata: {{generateName: sweep-, labels: {{team: vision}}}}
        spec: {{workers: {{replicas: 1}}, trainer: {{steps: 10}}}}
        ---
        {json.dumps(manifest("second", labels={"team": "audio"}))}
        """)
    generated, second = sdk.create_all(text)
    assert generated.metadata.name is not None and generated.metadata.name.startswith("sweep-")
    assert second.metadata.namespace == world.home and second.spec.workers.replicas == 2
    third = sdk.create(TrainingJob.from_manifest(manifest("third")))
    assert isinstance(sdk.get("third"), TrainingJob) and third.metadata.name == "third"

    def listed(selector: str | None) -> list[str]:
        return sorted(str(job.metadata.name) for job in sdk.list(selector=selector))

    poll_until(
        lambda: listed(None) == sorted([str(generated.metadata.name), "second", "third"]), timeout=TIMEOUT, what="jobs"
    )
    assert listed("team=vision") == [generated.metadata.name]
    assert listed("team in (vision,audio)") == sorted([str(generated.metadata.name), "second"])
    sdk.delete("third")
    poll_until(
        lambda: "third" not in listed(None), timeout=TIMEOUT, what="the deletion"
    )  # the API's cache trails a moment
    with pytest.raises(NotFound, match='"third"'):
        sdk.get("third")


def test_invalid_jobs_name_their_fields_before_sending(sdk: Client, world: World) -> None:
    broken = manifest("broken") | {"spec": {"workers": {"replicas": 0}}}
    with pytest.raises(Invalid) as before:
        sdk.create(broken)
    assert any(f.field == "spec.workers.replicas" for f in before.value.fields), before.value.fields
    with pytest.raises(Invalid, match=r"metadata\.name or metadata\.generateName"):
        sdk.create({k: v for k, v in manifest("x").items() if k != "metadata"})
    with pytest.raises(Invalid, match="expected one TrainingJob, found 2"):
        sdk.create(f"{json.dumps(manifest('a'))}\n---\n{json.dumps(manifest('b'))}")
    refused = manifest("owned")  # an owner without a uid: the model checks ownerReferences as Kubernetes does
    refused["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner"}]
    with pytest.raises(Invalid) as owned:
        sdk.create(refused)
    assert "metadata.ownerReferences[0].uid" in str(owned.value), owned.value
    with pytest.raises(Invalid, match="document 2"):  # nothing is created when one document is invalid
        sdk.create_all([manifest("fine"), broken])
    with pytest.raises(NotFound):
        sdk.get("fine")


def test_suspend_resume_and_a_finished_job(sdk: Client, admin: client.ApiClient, world: World) -> None:
    sdk.create(manifest("pausable"))
    assert sdk.suspend("pausable").spec.run_policy.suspend is True
    assert sdk.resume("pausable").spec.run_policy.suspend is False
    set_status(admin, world.home, "pausable", {"phase": "Succeeded"})
    with pytest.raises(Conflict) as finished:
        sdk.suspend("pausable")
    assert finished.value.reason == "JobFinished" and "finished (phase Succeeded)" in str(finished.value)


def test_wait_returns_when_the_job_gets_there_and_raises_otherwise(
    sdk: Client, admin: client.ApiClient, world: World
) -> None:
    for name in ("winner", "loser", "slow"):
        sdk.create(manifest(name))
    read, watch = threading.Event(), sdk.transport.watch

    def watching(*args: Any, **options: Any) -> Iterator[Any]:
        for job in watch(*args, **options):
            read.set()  # the job as it was, without a status: what follows must come through the watch
            yield job

    sdk.transport.watch = watching  # type: ignore[method-assign]
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(sdk.wait, "winner", timeout=TIMEOUT)
        poll_until(read.is_set, timeout=TIMEOUT, what="the waiter to have read the job")
        set_status(admin, world.home, "winner", {"phase": "Running"})
        set_status(admin, world.home, "winner", {"phase": "Succeeded", "attempt": 1})
        assert phase_of(waiting.result(TIMEOUT)) == Phase.SUCCEEDED
    set_status(admin, world.home, "loser", {"phase": "Failed"})
    with pytest.raises(JobFailed):
        sdk.wait("loser", "Succeeded", timeout=TIMEOUT)
    assert phase_of(sdk.wait("loser", "Failed", timeout=TIMEOUT)) == Phase.FAILED
    set_status(admin, world.home, "slow", {"phase": "Running"})
    with pytest.raises(WaitTimeout, match="phase Running") as late:
        sdk.wait("slow", timeout=1.5)
    assert late.value.job is not None
    assert phase_of(sdk.wait("slow", Phase.RUNNING, timeout=TIMEOUT)) == Phase.RUNNING


def test_watch_yields_each_status_and_ends_when_the_job_finishes(
    sdk: Client, admin: client.ApiClient, world: World
) -> None:
    sdk.create(manifest("watched"))
    seen: list[str] = []
    started = threading.Event()

    def follow() -> None:
        for job in sdk.watch("watched", timeout=TIMEOUT):
            started.set()
            seen.append(job.status.phase.value if job.status else "")

    with ThreadPoolExecutor(1) as pool:
        done = pool.submit(follow)
        poll_until(started.is_set, timeout=TIMEOUT, what="the watch")
        for phase in ("Pending", "Running", "Succeeded"):
            set_status(admin, world.home, "watched", {"phase": phase})
            poll_until(lambda p=phase: p in seen, timeout=TIMEOUT, what=f"the watch to see {phase}")  # type: ignore[misc]
        done.result(TIMEOUT)  # it ended by itself once the job finished
    assert seen[-1] == "Succeeded"


def test_events_timeline_and_logs(sdk: Client, admin: client.ApiClient, world: World, silent_node: str) -> None:
    job = sdk.create(manifest("observed"))
    worker_failed(admin, world.home, "observed", job.metadata.uid)
    worker_failed(admin, world.home, "other", None)  # about another job: not this one's
    [found] = sdk.events("observed")
    assert (found.reason, found.source) == ("WorkerFailed", "trainingjob-operator")
    assert sdk.timeline("observed")["rows"][0]["id"] == "job"
    assert sdk.timeline("observed", chrome=True)["traceEvents"]
    with pytest.raises(NotFound, match="replica worker-0"):
        list(sdk.logs("observed"))
    core = client.CoreV1Api(admin)
    core.create_namespaced_pod(world.home, pod_of("observed", attempt=1, node=silent_node))
    core.create_namespaced_pod(world.home, pod_of("observed", attempt=2))  # not scheduled: no logs yet
    with pytest.raises(NotFound, match="not scheduled"):
        list(sdk.logs("observed"))
    followed = sdk.logs("observed", attempt=1, follow=True)  # the silent kubelet says one line, then nothing
    assert next(followed) == "started\n"
    followed.close()
    with pytest.raises(NotFound, match="attempt 3"):
        list(sdk.logs("observed", attempt=3))
    with pytest.raises(Invalid, match="replica"):
        list(sdk.logs("observed", replica="chief-0"))


def test_a_reader_is_forbidden_to_write(sdk: Client, reader: Client) -> None:
    sdk.create(manifest("guarded"))
    poll_until(lambda: reader.get("guarded") is not None, timeout=TIMEOUT, what="the reader to see it")
    with pytest.raises(Forbidden):
        reader.delete("guarded")
    with pytest.raises(Forbidden):
        reader.create(manifest("intruder"))


def test_an_unreachable_or_unconfigured_cluster_is_said_so(
    trainingjob_crd: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    with Client.rest(closed, "token") as rest, pytest.raises(Unavailable, match="cannot connect") as down:
        rest.get("anything")
    assert down.value.status is None
    config = token_kubeconfig(tmp_path / "down.kubeconfig", trainingjob_crd, "token")
    config.write_text(config.read_text().replace(trainingjob_crd.server_url, closed.replace("http", "https")))
    with Client.kube(config) as kube, pytest.raises(Unavailable, match="unreachable"):
        kube.get("anything")
    with pytest.raises(NotConfigured):
        Client.kube(tmp_path / "missing.kubeconfig")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(NotConfigured, match="no cluster"):
        Client.kube()


def test_the_kube_transport_reads_the_context_namespace(trainingjob_crd: ControlPlane, tmp_path: Path) -> None:
    config = token_kubeconfig(tmp_path / "ns.kubeconfig", trainingjob_crd, "token")
    config.write_text(config.read_text().replace("user: api", f"user: api\n    namespace: team-{uuid.uuid4().hex[:4]}"))
    with Client.kube(config) as kube:
        assert kube.namespace.startswith("team-")
    with Client.kube(config, namespace="elsewhere") as kube:
        assert kube.namespace == "elsewhere"
