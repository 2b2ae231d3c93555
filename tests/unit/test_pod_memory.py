"""children/pod_memory.py: a job's pods read once per version. What it answers is what pod_state answers, for a
pod whose version it has read, has not, has no version, or belongs to another job; and it keeps only the pods of
each job's last observation."""

from collections.abc import Callable
from typing import Any

import pytest
from tests.support.builders import make_job, pod, pods_of

from trainingjob.children import pod_memory
from trainingjob.children.naming import CONTAINER_NAME, Replica
from trainingjob.children.observe import PodState, observe, pod_state
from trainingjob.children.pod_memory import PodMemory

pytestmark = pytest.mark.fast
GANG, OTHER = ("ns", "job"), ("ns", "other")
JOB = make_job(workers=4)
Manifest = dict[str, Any]


def versioned(manifest: Manifest, version: str) -> Manifest:
    manifest["metadata"]["resourceVersion"] = version
    return manifest


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the pods pod_memory actually read (through pod_state)."""
    names: list[str] = []

    def counted(manifest: Manifest, container: str, log_tail: str = "") -> PodState | None:
        names.append(str(manifest["metadata"]["name"]))
        return pod_state(manifest, container, log_tail)

    monkeypatch.setattr(pod_memory, "pod_state", counted)
    return names


def observed(memory: PodMemory, job: tuple[str, str], pods: list[Manifest]) -> tuple[PodState, ...]:
    read: Callable[[Any, str], PodState | None] = memory.reader(job)
    return observe(pods, CONTAINER_NAME, job_uid=str(JOB.metadata.uid), service=None, read=read).pods


def test_a_pod_is_read_again_only_when_its_version_changes(reads: list[str]) -> None:
    memory, pods = PodMemory(), [versioned(p, "10") for p in pods_of(JOB, 1)]
    first = observed(memory, GANG, pods)
    assert first == observe(pods, CONTAINER_NAME, job_uid=str(JOB.metadata.uid), service=None).pods
    assert len(reads) == 4
    failed = versioned(pod(JOB, Replica("worker", 2), 1, "Failed", exit_code=1), "11")
    pods[2] = failed
    again = observed(memory, GANG, pods)
    assert reads[4:] == [failed["metadata"]["name"]], "only the changed pod is read again"
    assert again == observe(pods, CONTAINER_NAME, job_uid=str(JOB.metadata.uid), service=None).pods
    assert [p.phase.value for p in again] == ["Running", "Running", "Failed", "Running"]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda p: p["metadata"].pop("resourceVersion"), id="no-version"),
        pytest.param(lambda p: p["metadata"].update(uid="a-new-pod"), id="same-version-other-uid"),
    ],
)
def test_a_pod_without_a_version_or_of_another_uid_is_read(reads: list[str], change: Callable[[Manifest], Any]) -> None:
    memory, pods = PodMemory(), [versioned(p, "10") for p in pods_of(JOB, 1)]
    observed(memory, GANG, pods)
    change(pods[0])
    pods[0]["status"]["phase"] = "Pending"
    assert observed(memory, GANG, pods)[0].phase.value == "Pending"
    assert reads.count(pods[0]["metadata"]["name"]) == 2


def test_each_job_remembers_its_last_observation_alone_and_a_gone_job_nothing() -> None:
    memory, pods = PodMemory(), [versioned(p, "10") for p in pods_of(JOB, 1)]
    observed(memory, GANG, pods)
    observed(memory, OTHER, pods[:1])
    assert len(memory) == 5
    observed(memory, GANG, pods[:2])  # two of its pods went
    assert len(memory) == 3
    memory.forget(GANG)
    assert len(memory) == 1


def test_a_pod_without_a_version_is_never_remembered(reads: list[str]) -> None:
    """A manifest not as the apiserver wrote it (no resourceVersion) may change under the same (empty) version."""
    memory, pods = PodMemory(), pods_of(JOB, 1)
    observed(memory, GANG, pods)
    pods[1]["status"]["phase"] = "Failed"
    assert observed(memory, GANG, pods)[1].phase.value == "Failed"
    assert len(reads) == 8 and len(memory) == 0


def test_a_lost_lease_forgets_everything() -> None:
    memory = PodMemory()
    observed(memory, GANG, [versioned(p, "10") for p in pods_of(JOB, 1)])
    memory.clear()
    assert len(memory) == 0
