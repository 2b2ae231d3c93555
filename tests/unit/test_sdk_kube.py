"""The SDK's Kubernetes transport without a cluster: the watch past 410 Gone, failing ERROR events and dropped
connections (from the last resourceVersion, pausing while it keeps failing), kubeconfigs that cannot be read, and
credentials that cannot be refreshed, as typed errors."""

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.config import ConfigException
from tests.support.builders import job_manifest
from urllib3.exceptions import ProtocolError, ReadTimeoutError

from trainingjob_sdk import Forbidden, NotConfigured, NotFound, Unavailable, deadline
from trainingjob_sdk.kube import KubeJobs

pytestmark = pytest.mark.fast

Manifest = dict[str, Any]
Event = Manifest | Exception  # an event of a WATCH stream, or the error that breaks it off


def job(version: int, phase: str = "Running") -> Manifest:
    manifest = job_manifest("a", namespace="default") | {"status": {"phase": phase, "attempt": 1}}
    manifest["metadata"]["resourceVersion"] = str(version)
    return manifest


def error(code: int) -> Manifest:
    return {"type": "ERROR", "object": {"kind": "Status", "code": code, "reason": "Why", "message": f"{code}!"}}


class Stream:
    """A WATCH response: each event a line, or an exception where the connection breaks off."""

    def __init__(self, events: list[Event]) -> None:
        self.events, self.closed = events, False

    def __iter__(self) -> Iterator[bytes]:
        for each in self.events:
            if isinstance(each, Exception):
                raise each
            yield (json.dumps(each) + "\n").encode()

    def close(self) -> None:
        self.closed = True

    def release_conn(self) -> None:
        pass


class Custom:
    """CustomObjectsApi for one job: GET answers the next of `gets` (the last again), each WATCH the next of
    `watches` (the last again); what was asked is kept."""

    def __init__(self, gets: list[Manifest | Exception], watches: list[list[Event]]) -> None:
        self.gets, self.watches = gets, watches
        self.got = 0
        self.versions: list[str] = []

    def get_namespaced_custom_object(self, *_: Any, **__: Any) -> Manifest:
        self.got += 1
        found = self.gets[min(self.got, len(self.gets)) - 1]
        if isinstance(found, Exception):
            raise found
        return found

    def list_namespaced_custom_object(self, *_: Any, resource_version: str, **__: Any) -> Stream:
        self.versions.append(resource_version)
        return Stream(self.watches[min(len(self.versions), len(self.watches)) - 1])


def kube(custom: Custom) -> KubeJobs:
    jobs = KubeJobs.__new__(KubeJobs)
    jobs.namespace, jobs.timeout, jobs.custom = "default", 1.0, custom
    return jobs


def phases(jobs: KubeJobs, timeout: float | None) -> list[str]:
    return [found["status"]["phase"] for found in jobs.watch("a", timeout=timeout)]


def versions_to_the_end(jobs: KubeJobs) -> list[str]:
    """The resourceVersions the watch yields until the job has Succeeded."""
    seen = []
    for found in jobs.watch("a", timeout=30):
        seen.append(found["metadata"]["resourceVersion"])
        if found["status"]["phase"] == "Succeeded":
            return seen
    raise AssertionError(f"the watch ended at {seen}")


def test_gone_reads_the_job_again_and_watches_from_its_new_version() -> None:
    custom = Custom([job(1), job(5)], [[error(410)], [{"type": "MODIFIED", "object": job(6, "Succeeded")}], []])
    assert versions_to_the_end(kube(custom)) == ["1", "5", "6"] and custom.versions == ["1", "5"]


def test_a_failing_watch_is_asked_again_after_pauses_not_at_once() -> None:
    custom = Custom([job(1)], [[error(500)]])
    started = time.monotonic()
    assert phases(kube(custom), timeout=1.2) == ["Running"]
    assert time.monotonic() - started >= 1.2 and 2 <= len(custom.versions) <= 4, custom.versions


@pytest.mark.parametrize(
    ("code", "kind"),
    [pytest.param(403, Forbidden, id="forbidden"), pytest.param(404, NotFound, id="not found")],
)
def test_an_error_event_that_retrying_cannot_mend_is_raised(code: int, kind: type[Exception]) -> None:
    custom = Custom([job(1)], [[error(code)]])
    with pytest.raises(kind):
        phases(kube(custom), timeout=30)
    assert custom.versions == ["1"]


@pytest.mark.parametrize(
    "broken",
    [pytest.param(ProtocolError("Connection broken: IncompleteRead"), id="dropped"),
     pytest.param(ReadTimeoutError(None, "", "Read timed out."), id="read timed out")],  # type: ignore[arg-type]
)  # fmt: skip
def test_a_dropped_watch_goes_on_from_the_last_version(broken: Exception) -> None:
    custom = Custom(
        [job(1)],
        [[{"type": "MODIFIED", "object": job(8)}, broken], [{"type": "MODIFIED", "object": job(9, "Succeeded")}]],
    )
    assert versions_to_the_end(kube(custom)) == ["1", "8", "9"] and custom.versions == ["1", "8"]


def test_an_outage_that_lasts_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadline, "LONGEST_OUTAGE", 0.6)
    custom = Custom([job(1)], [[ProtocolError("Connection broken")]])
    with pytest.raises(Unavailable, match="unreachable: the connection was lost"):
        phases(kube(custom), timeout=None)
    assert len(custom.versions) >= 2


def test_a_deleted_job_ends_the_watch_with_not_found() -> None:
    custom = Custom([job(1)], [[{"type": "DELETED", "object": job(2)}]])
    with pytest.raises(NotFound, match="was deleted"):
        phases(kube(custom), timeout=30)


def test_credentials_that_cannot_be_refreshed_are_not_configured() -> None:
    custom = Custom([ConfigException("exec: process returned 1. token expired")], [])
    with pytest.raises(NotConfigured, match="credentials could not be refreshed: exec: process returned 1"):
        kube(custom).get("a")


def test_the_failure_of_a_job_is_its_status_last_failure() -> None:
    failure = {"pod": "a-worker-0-1", "reason": "OOMKilled"}
    assert kube(Custom([job(1) | {"status": {"lastFailure": failure}}], [])).failure("a") == failure
    assert kube(Custom([job(1)], [])).failure("a") is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("apiVersion: v1\n: : [\n", id="broken YAML"),
        pytest.param("- a\n- b\n", id="a list"),
        pytest.param("clusters: 5\ncontexts: 5\ncurrent-context: x\n", id="numbers for lists"),
        pytest.param("contexts: [{}]\ncurrent-context: x\n", id="a context without a name"),
    ],
)
def test_a_kubeconfig_that_cannot_be_read_is_not_configured(tmp_path: Path, text: str) -> None:
    (tmp_path / "kubeconfig").write_text(text)
    with pytest.raises(NotConfigured, match=r"the kubeconfig .*kubeconfig cannot be used: "):
        KubeJobs.connect(tmp_path / "kubeconfig")


def test_bookmarks_that_end_their_streams_at_once_do_not_make_a_hot_loop() -> None:
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "7"}}}
    custom = Custom([job(1)], [[bookmark]])
    assert phases(kube(custom), timeout=1.2) == ["Running"]
    assert 2 <= len(custom.versions) <= 4, len(custom.versions)


class Clock:
    """time for deadline: monotonic seconds that pass only by sleeping or by `now` being set."""

    def __init__(self) -> None:
        self.now, self.slept = 0.0, list[float]()

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    made = Clock()
    monkeypatch.setattr(deadline, "time", made)
    return made


def test_an_answer_between_failures_ends_the_outage(clock: Clock) -> None:
    retry, failed = deadline.Retry(deadline.Deadline(None)), Unavailable("down")
    clock.now = 50.0
    assert retry.again(failed)
    clock.now = 55.0
    retry.answered()  # a WATCH that worked
    clock.now = 110.0
    assert retry.again(failed)  # 55 s since the answer, not 110 since the first failure
    clock.now = 115.0
    with pytest.raises(Unavailable):
        retry.again(failed)


@pytest.mark.parametrize(
    ("lived", "pauses"),
    [pytest.param(0.0, [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 8.0], id="streams that end at once: growing pauses"),
     pytest.param(deadline.SETTLED, [0.0] * 7, id="streams that lasted: again at once")],
)  # fmt: skip
def test_the_pause_before_the_next_stream_depends_on_how_long_the_last_one_lasted(
    clock: Clock, lived: float, pauses: list[float]
) -> None:
    retry = deadline.Retry(deadline.Deadline(None))
    for _ in pauses:
        clock.now += lived
        retry.answered()  # however much each stream sent
        retry.again()
    assert clock.slept == pauses
