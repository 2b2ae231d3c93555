"""A transport for the SDK's Client that holds jobs in memory (what `tjctl` and the SDK's tests drive)."""

import copy
from collections.abc import Iterator
from typing import Any

from trainingjob_sdk import Conflict

Manifest = dict[str, Any]
Manifests = list[Manifest]  # a name for a class with a method called list


class FakeJobs:
    """A transport holding jobs in memory; `watch` yields the job, then it with each of `statuses`, then ends."""

    namespace = "default"

    def __init__(self, *jobs: Manifest, statuses: list[Manifest] | None = None) -> None:
        self.jobs = {job["metadata"]["name"]: copy.deepcopy(job) for job in jobs}
        self.statuses = statuses or []
        self.created: list[tuple[str, str]] = []
        self.refuse: set[str] = set()

    def create(self, body: Manifest, namespace: str | None = None) -> Manifest:
        name = body["metadata"]["name"]
        if name in self.jobs or name in self.refuse:
            raise Conflict(f"{name} exists", status=409, reason="AlreadyExists")
        self.created.append((namespace or self.namespace, name))
        self.jobs[name] = copy.deepcopy(body)
        return self.jobs[name]

    def get(self, name: str, namespace: str | None = None) -> Manifest:
        return self.jobs[name]

    def list(
        self, namespace: str | None = None, selector: str | None = None, *, all_namespaces: bool = False
    ) -> Manifests:
        return list(self.jobs.values())

    def delete(self, name: str, namespace: str | None = None) -> None:
        self.jobs.pop(name)

    def set_suspend(self, name: str, suspend: bool, namespace: str | None = None) -> Manifest:
        job = self.jobs[name]
        job["spec"].setdefault("runPolicy", {})["suspend"] = suspend
        return job

    def watch(self, name: str, namespace: str | None = None, timeout: float | None = None) -> Iterator[Manifest]:
        yield self.jobs[name]
        for status in self.statuses:
            yield self.jobs[name] | {"status": status}

    def events(self, name: str, namespace: str | None = None) -> Manifests:
        return []

    def failure(self, name: str, namespace: str | None = None) -> Manifest | None:
        return (self.jobs[name].get("status") or {}).get("lastFailure")

    def logs(self, name: str, namespace: str | None = None, **options: Any) -> Iterator[str]:
        return iter(["line\n"])

    def timeline(self, name: str, namespace: str | None = None, *, chrome: bool = False) -> Manifest:
        return {}

    def close(self) -> None:
        pass
