"""The dashboard's pure views: a job's summary (GPUs from its spec, defensive reads of a stored object), a page of
summaries with its counts, the cluster's counts, and the summary listeners of the job cache."""

import json
from types import SimpleNamespace
from typing import Any, cast

import pytest
from tests.support.builders import job_manifest

from trainingjob_api.dashboard_schemas import ClusterView, JobSummary, JobSummaryList
from trainingjob_api.job_cache import CachedJob, JobCache
from trainingjob_api.settings import ApiSettings
from trainingjob_api.summaries import Summary, cluster, page_body, role_gpus, select, summarize

NO_KUBE = cast(Any, SimpleNamespace(api=None, timeout=5.0))  # no Kubernetes: the cache is never started
pytestmark = pytest.mark.fast

Manifest = dict[str, Any]


def stored(name: str = "job", namespace: str = "team", status: Manifest | None = None, **options: Any) -> Manifest:
    """A job as the API returns it: a manifest with its namespace, creation time and status."""
    manifest = job_manifest(name, namespace=namespace, **options)
    manifest["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    if status is not None:
        manifest["status"] = status
    return manifest


def gpu(limits: Any = None, requests: Any = None) -> Manifest:
    resources = {k: {"nvidia.com/gpu": v} for k, v in (("limits", limits), ("requests", requests)) if v is not None}
    return {"resources": resources}


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        ({"replicas": 4}, 0),
        ({"replicas": 4, **gpu(limits=2)}, 8),
        ({"replicas": 3, **gpu(limits="1")}, 3),
        ({**gpu(limits="2")}, 2),
        ({"replicas": 2, **gpu(requests=1)}, 2),
        ({"replicas": 2, **gpu(limits=4, requests=1)}, 8),
        ({"replicas": 2, "resources": {"limits": {"cpu": "8", "memory": "16Gi"}}}, 0),
        ({"replicas": 2, **gpu(limits="1k")}, 2000),
        ({"replicas": 2, **gpu(limits="1e999999999")}, 0),
        ({"replicas": 2, **gpu(limits="lots")}, 0),
        ({"replicas": 2, **gpu(limits=True)}, 0),
        ({"replicas": 2, **gpu(limits=[1])}, 0),
        ({"replicas": "2", **gpu(limits=1)}, 1),
        ({"replicas": -2, **gpu(limits=1)}, 0),
        ({"replicas": 2, "resources": "big"}, 0),
        (None, 0),
        ("workers", 0),
    ],
    ids=[
        "no-gpus", "limits-times-replicas", "string-quantity", "default-one-replica", "request-only",
        "limit-wins-over-request", "cpu-and-memory-only", "si-suffix", "absurd-exponent", "not-a-quantity",
        "boolean", "list", "replicas-not-a-number", "replicas-negative", "resources-not-a-map", "no-role",
        "role-not-a-map",
    ],
)  # fmt: skip
def test_gpus_of_a_role(role: Any, expected: int) -> None:
    assert role_gpus(role) == expected


def test_a_job_summary_reads_spec_and_status() -> None:
    status = {
        "phase": "Running", "attempt": 3, "restarts": {"retryable": 1, "oom": 1},
        "progress": {"step": 40, "totalSteps": 100, "percent": 40.0, "loss": 0.5, "samplesPerSecond": 1200.5,
                     "estimatedCompletionTime": "2026-01-01T01:00:00Z"},
        "lastFailure": {"pod": "ps-job-worker-1-2", "attempt": 2, "failureClass": "OOMKilled", "reason": "OOMKilled",
                        "time": "2026-01-01T00:30:00Z"},
    }  # fmt: skip
    manifest = stored(
        "ps-job", mode="ParameterServer", workers={"replicas": 3, **gpu(limits=2)}, servers=2, labels={"team": "nlp"},
        status=status,
    )  # fmt: skip
    summary = summarize(manifest)
    assert summary.fields == {
        "namespace": "team", "name": "ps-job", "labels": {"team": "nlp"}, "created": "2026-01-01T00:00:00Z",
        "phase": "Running", "attempt": 3, "restarts": {"retryable": 1, "oom": 1, "disruption": 0, "stalled": 0},
        "mode": "ParameterServer", "workers": 3, "parameterServers": 2, "gpus": 6, "step": 40, "totalSteps": 100,
        "percent": 40.0, "loss": 0.5, "samplesPerSecond": 1200.5, "eta": "2026-01-01T01:00:00Z",
        "reason": "OOMKilled", "completed": None,
    }  # fmt: skip
    assert json.loads(summary.body) == summary.fields
    assert JobSummary.model_validate_json(summary.body).model_dump(by_alias=True) == summary.fields
    assert summary.failure == {
        "namespace": "team", "name": "ps-job", "time": "2026-01-01T00:30:00Z", "failureClass": "OOMKilled",
        "reason": "OOMKilled", "pod": "ps-job-worker-1-2",
    }  # fmt: skip


@pytest.mark.parametrize(
    "status",
    [
        None,
        "Running",
        {"phase": "Exploded", "attempt": "three", "restarts": [1], "progress": "far"},
        {"phase": ["Running"], "attempt": True, "progress": {"loss": float("nan"), "percent": 10**400}},
        {"progress": {"step": -1.5, "loss": float("inf"), "estimatedCompletionTime": 7}, "lastFailure": "oops"},
    ],
    ids=["no-status", "status-not-a-map", "wrong-types", "unhashable-phase-nan-huge", "odd-progress"],
)
def test_a_stored_job_the_model_rejects_still_summarizes(status: Any) -> None:
    manifest = stored("odd")
    manifest["status"] = status
    summary = summarize(manifest)
    assert summary.phase == "Pending"
    assert summary.fields["attempt"] == 0
    assert summary.failure is None
    JobSummary.model_validate_json(summary.body)  # valid JSON of the documented shape: no NaN, no infinity


def summaries(*jobs: tuple[str, str, str]) -> list[Summary]:
    """Summaries of (namespace, name, phase), in key order as the cache gives them."""
    return [summarize(stored(name, namespace, {"phase": phase})) for namespace, name, phase in sorted(jobs)]


JOBS = summaries(
    ("a", "bert-1", "Running"), ("a", "bert-2", "Failed"), ("a", "gpt-1", "Running"),
    ("b", "bert-3", "Pending"), ("b", "resnet", "Running"), ("c", "bert-4", "Succeeded"),
)  # fmt: skip


@pytest.mark.parametrize(
    ("options", "names", "more", "total", "phases"),
    [
        ({}, ["a/bert-1", "a/bert-2", "a/gpt-1", "b/bert-3", "b/resnet", "c/bert-4"], False, 6,
         {"Running": 3, "Failed": 1, "Pending": 1, "Succeeded": 1}),
        ({"limit": 2}, ["a/bert-1", "a/bert-2"], True, 6, {"Running": 3, "Failed": 1, "Pending": 1, "Succeeded": 1}),
        ({"limit": 2, "after": ("a", "bert-2")}, ["a/gpt-1", "b/bert-3"], True, 6, {"Running": 3}),
        ({"limit": 2, "after": ("b", "bert-3")}, ["b/resnet", "c/bert-4"], False, 6, {"Running": 3}),
        ({"limit": 5, "after": ("c", "bert-4")}, [], False, 6, {"Running": 3}),
        ({"phase": "Running"}, ["a/bert-1", "a/gpt-1", "b/resnet"], False, 3, {"Running": 3, "Failed": 1}),
        ({"phase": "Running", "limit": 1, "after": ("a", "bert-1")}, ["a/gpt-1"], True, 3, {"Running": 3}),
        ({"search": "bert"}, ["a/bert-1", "a/bert-2", "b/bert-3", "c/bert-4"], False, 4,
         {"Running": 1, "Failed": 1, "Pending": 1, "Succeeded": 1}),
        ({"search": "bert", "phase": "Restarting"}, [], False, 0, {"Restarting": 0, "Running": 1}),
        ({"search": "nothing-like-it"}, [], False, 0, {"Running": 0}),
        ({"limit": 6}, ["a/bert-1", "a/bert-2", "a/gpt-1", "b/bert-3", "b/resnet", "c/bert-4"], False, 6, {}),
    ],
    ids=[
        "everything", "first-page", "middle-page", "last-page", "past-the-end", "phase", "phase-paged", "search",
        "search-and-phase-none", "search-none", "limit-exactly-all",
    ],
)  # fmt: skip
def test_select_pages_and_counts(
    options: dict[str, Any], names: list[str], more: bool, total: int, phases: dict[str, int]
) -> None:
    page = select(JOBS, **{"phase": None, "search": "", "after": None, "limit": None, **options})
    assert ["/".join(s.key) for s in page.items] == names
    assert (page.more, page.total) == (more, total)
    assert set(page.phases) == {"Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed"}
    assert page.phases.items() >= phases.items()


def test_a_page_body_is_the_documented_list() -> None:
    page = select(JOBS, phase=None, search="", after=None, limit=2)
    document = JobSummaryList.model_validate_json(page_body(page, "token"))
    assert [item.name for item in document.items] == ["bert-1", "bert-2"]
    assert (document.continue_, document.total, document.phases["Running"]) == ("token", 6, 3)
    assert json.loads(page_body(select([], phase=None, search="", after=None, limit=None), None)) == {
        "items": [], "continue": None, "total": 0, "phases": dict.fromkeys(page.phases, 0),
    }  # fmt: skip


def failing(name: str, phase: str, time: str | None, gpus: int = 1) -> Summary:
    status: Manifest = {"phase": phase}
    if time is not None:
        status["lastFailure"] = {"pod": f"{name}-worker-0-1", "attempt": 1, "failureClass": "Retryable",
                                 "reason": "Error", "time": time}  # fmt: skip
    return summarize(stored(name, status=status, workers={"replicas": 1, **gpu(limits=gpus)}))


def test_cluster_counts_gpus_by_state_and_the_newest_failures() -> None:
    jobs = [
        failing("running", "Running", None, gpus=8), failing("restarting", "Restarting", "2026-01-02T00:00:00Z", 2),
        failing("pending", "Pending", None, gpus=4), failing("suspended", "Suspended", None, gpus=3),
        failing("done", "Succeeded", None, gpus=16), failing("failed", "Failed", "2026-01-03T00:00:00+00:00", 5),
        failing("odd-time", "Running", "yesterday", gpus=1),
        *(failing(f"old-{i:02d}", "Failed", f"2025-12-{i + 1:02d}T00:00:00Z") for i in range(25)),
    ]  # fmt: skip
    view = cluster(jobs)
    ClusterView.model_validate(view)
    assert view["jobs"] == 32
    assert view["gpus"] == {"running": 9, "pending": 6, "suspended": 3}
    assert view["phases"] == {"Pending": 1, "Running": 2, "Restarting": 1, "Suspended": 1, "Succeeded": 1,
                              "Failed": 26}  # fmt: skip
    names = [f["name"] for f in view["recentFailures"]]
    assert names[:4] == ["failed", "restarting", "old-24", "old-23"]
    assert len(names) == 20
    assert "odd-time" not in names  # a time that is not one sorts last


def cached(name: str, phase: str, heartbeat: str = "", namespace: str = "team") -> CachedJob:
    status: Manifest = {"phase": phase, "progress": {"step": 1, "lastHeartbeatTime": heartbeat or None}}
    return CachedJob.from_raw(stored(name, namespace, status))


def test_the_cache_tells_every_job_listeners_of_summary_changes_only() -> None:
    cache = JobCache(NO_KUBE, ApiSettings())  # no Kubernetes: the watch thread is never started
    heard: list[tuple[str, str, str]] = []
    undo = cache.listen(None, lambda kind, job: heard.append((kind, job.name, job.summary.phase)))
    cache._apply("ADDED", cached("a", "Pending"))
    cache._apply("MODIFIED", cached("a", "Running"))
    cache._apply("MODIFIED", cached("a", "Running", heartbeat="2026-01-01T00:00:05Z"))  # not in the summary
    cache._apply("ADDED", cached("b", "Pending", namespace="other"))
    cache._apply("DELETED", cached("a", "Running"))
    cache._apply("DELETED", cached("never-seen", "Running"))
    undo()
    cache._apply("MODIFIED", cached("b", "Running", namespace="other"))
    assert heard == [
        ("ADDED", "a", "Pending"), ("MODIFIED", "a", "Running"), ("ADDED", "b", "Pending"), ("DELETED", "a", "Running"),
    ]  # fmt: skip
    assert cache.get("other", "b") is not None
    assert cache.get("other", "b").summary.phase == "Running"  # type: ignore[union-attr]
