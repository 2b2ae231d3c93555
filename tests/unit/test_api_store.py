"""The REST API's job cache: pages in order, label selectors through the label index, updates and deletes."""

import json
from types import SimpleNamespace
from typing import Any, cast

import pytest

from trainingjob_api.job_cache import CachedJob, JobCache
from trainingjob_api.selectors import parse
from trainingjob_api.settings import ApiSettings

NO_KUBE = cast(Any, SimpleNamespace(api=None, timeout=5.0))  # no Kubernetes: the cache is never started

pytestmark = pytest.mark.fast


def job(namespace: str, name: str, **labels: str) -> CachedJob:
    return CachedJob(namespace, name, labels, None, json.dumps({"name": name}).encode())


def cache_with(*jobs: CachedJob) -> JobCache:
    cache = JobCache(NO_KUBE, ApiSettings())  # no Kubernetes: the watch thread is never started
    for each in jobs:
        cache._apply("ADDED", each)  # what the watch thread does
    return cache


def names(found: list[CachedJob]) -> list[str]:
    return [f"{j.namespace}/{j.name}" for j in found]


def test_selectors_use_the_index_and_keep_the_page_order() -> None:
    cache = cache_with(
        job("b", "x", shard="1"),
        job("a", "z", shard="1"),
        job("a", "y", shard="2"),
        job("a", "w", shard="1", tier="gpu"),
    )
    everything = cache.page(["a", "b"], parse(None), None, None)
    assert names(everything) == ["a/w", "a/y", "a/z", "b/x"]
    assert names(cache.page(["a", "b"], parse("shard=1"), None, None)) == ["a/w", "a/z", "b/x"]
    assert names(cache.page(["a", "b"], parse("shard in (1,2),tier=gpu"), None, None)) == ["a/w"]
    assert names(cache.page(["a", "b"], parse("shard=1,!tier"), ("a", "w"), 1)) == ["a/z", "b/x"]
    assert names(cache.page(["b"], parse("shard=3"), None, None)) == []


def test_relabelled_and_deleted_jobs_leave_the_index() -> None:
    cache = cache_with(job("a", "x", shard="1"))
    cache._apply("MODIFIED", job("a", "x", shard="2"))
    assert names(cache.page(["a"], parse("shard=1"), None, None)) == []
    assert names(cache.page(["a"], parse("shard=2"), None, None)) == ["a/x"]
    cache._apply("DELETED", job("a", "x", shard="2"))
    assert names(cache.page(["a"], parse("shard=2"), None, None)) == []
    assert len(cache) == 0


def test_a_cache_for_some_namespaces_serves_those_only() -> None:
    everywhere = JobCache(NO_KUBE, ApiSettings())
    scoped = JobCache(NO_KUBE, ApiSettings(namespaces=["team-a"]))
    assert everywhere.serves("team-b") and scoped.serves("team-a") and not scoped.serves("team-b")


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "kube-node-lease"])
def test_the_clusters_own_namespaces_are_not_served_unless_asked_for(namespace: str) -> None:
    assert not JobCache(NO_KUBE, ApiSettings()).serves(namespace)
    assert JobCache(NO_KUBE, ApiSettings(excluded_namespaces=[])).serves(namespace)
    assert JobCache(NO_KUBE, ApiSettings(namespaces=[namespace])).serves(namespace)
