"""The job cache: TrainingJobs in every namespace, or in each served namespace (TJ_API_NAMESPACES), kept by the same
list/watch loop as the operator's stores (kube.watch.Informer: one thread per scope, a relist after 410 Gone),
answering reads from memory. Eventually consistent: it trails the apiserver by the watch's latency."""

import json
import logging
import threading
from bisect import bisect_right, insort
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from trainingjob.kube.watch import Informer, Source
from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob_api.kube import Kube
from trainingjob_api.schemas import public_manifest
from trainingjob_api.selectors import Operator, Selector
from trainingjob_api.settings import ApiSettings
from trainingjob_api.summaries import Summary, summarize

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (namespace, name)
Listener = Callable[[str, "CachedJob"], None]


@dataclass(frozen=True)
class CachedJob:
    """One job as last seen: its labels, status and the JSON the API returns for it, serialized once, and its
    dashboard summary, computed once (from_raw does it, in the cache's thread)."""

    namespace: str
    name: str
    labels: dict[str, str]
    status: dict[str, Any] | None
    body: bytes

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> "CachedJob":
        manifest = public_manifest(raw)
        meta = manifest["metadata"]
        body = json.dumps(manifest, separators=(",", ":")).encode()
        job = cls(meta["namespace"], meta["name"], dict(meta.get("labels") or {}), manifest.get("status"), body)
        job.__dict__["summary"] = summarize(manifest)  # what the cached property would compute, from the dict at hand
        return job

    @cached_property
    def summary(self) -> Summary:
        return summarize(json.loads(self.body))


def _summary_event(previous: CachedJob | None, kind: str, job: CachedJob) -> bool:
    """Whether the listeners to every job hear of a change: a job added or deleted, or its summary changed."""
    if previous is None:
        return kind != "DELETED"
    return kind == "DELETED" or previous.summary.body != job.summary.body


def _source(namespace: str | None) -> Source:
    scope = f"/namespaces/{namespace}" if namespace else ""
    return Source("trainingjobs", f"/apis/{GROUP}/{VERSION}{scope}/{PLURAL}")


@dataclass(frozen=True)
class _Scope:
    """The informer's Sink for one scope (every namespace: None): what it reads goes into the cache."""

    cache: "JobCache"
    namespace: str | None

    def replace(self, items: list[CachedJob], version: str) -> None:
        jobs = {(j.namespace, j.name): j for j in items}
        self.cache._replace_all(self.namespace, jobs)

    def apply(self, kind: str, item: dict[str, Any]) -> None:
        self.cache._apply(kind, CachedJob.from_raw(item))


class AllOf:
    """Set when each of the events is: the cache is synced (or current) when every scope is."""

    def __init__(self, events: list[threading.Event]) -> None:
        self._events = events

    def is_set(self) -> bool:
        return all(event.is_set() for event in self._events)


class JobCache:
    """Every TrainingJob of the cluster (or of the served namespaces), kept current by LIST + WATCH in daemon
    threads, one per scope."""

    def __init__(self, kube: Kube, settings: ApiSettings, on_change: Callable[[], None] = lambda: None) -> None:
        self._on_change = on_change
        self._jobs: dict[str, dict[str, CachedJob]] = {}
        self._names: dict[str, list[str]] = {}  # sorted names per namespace, for pages
        self._by_label: dict[tuple[str, str], set[Key]] = {}  # (label key, value) -> jobs, for selectors
        self._lock = threading.Lock()
        self._listeners: dict[Key | None, set[Listener]] = {}  # None: listens to every job
        self.served = tuple(settings.namespaces)
        self.excluded = frozenset() if self.served else frozenset(settings.excluded_namespaces)
        self._informers = [self._informer(kube, settings, namespace) for namespace in self.served or [None]]
        self.synced = AllOf([informer.synced for informer in self._informers])
        self.current = AllOf([informer.current for informer in self._informers])  # cleared while a watch is down
        self.relists = 0

    def _informer(self, kube: Kube, settings: ApiSettings, namespace: str | None) -> Informer:
        return Informer(
            kube.api,
            _source(namespace),
            _Scope(self, namespace),
            page=settings.list_page_size,
            watch_seconds=settings.watch_timeout_seconds,
            connect_timeout=kube.timeout,
            keep=CachedJob.from_raw,  # a page's jobs are made bytes before the next is read
        )

    @property
    def resource_version(self) -> str:
        """The resourceVersion of the one LIST + WATCH; "" when there is one per namespace (none covers all)."""
        return self._informers[0].version if len(self._informers) == 1 else ""

    def serves(self, namespace: str) -> bool:
        return namespace in self.served if self.served else namespace not in self.excluded

    def start(self) -> None:
        for informer in self._informers:
            informer.start()

    def stop(self) -> None:
        for informer in self._informers:
            informer.stop(timeout=0)  # its thread is a daemon: nothing waits on it

    def __len__(self) -> int:
        with self._lock:
            return sum(len(names) for names in self._names.values())

    def get(self, namespace: str, name: str) -> CachedJob | None:
        with self._lock:
            return self._jobs.get(namespace, {}).get(name)

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted(ns for ns, names in self._names.items() if names and ns not in self.excluded)

    def page(self, namespaces: list[str], selector: Selector, after: Key | None, limit: int | None) -> list[CachedJob]:
        """Up to `limit` + 1 matching jobs after `after`, by namespace and name (the extra one says "more")."""
        candidates = self._candidates(selector)
        found: list[CachedJob] = []
        for namespace in sorted(namespaces):
            if after is not None and namespace < after[0]:
                continue
            for job in self._after(namespace, after, candidates):
                if selector.matches(job.labels):
                    found.append(job)
                    if limit is not None and len(found) > limit:
                        return found
        return found

    def summaries(self, namespaces: list[str], selector: Selector) -> list[Summary]:
        """The summaries of every matching job of `namespaces`, by namespace and name."""
        candidates = self._candidates(selector)
        found: list[Summary] = []
        with self._lock:
            for namespace in sorted(namespaces):
                jobs, names = self._jobs.get(namespace, {}), self._names.get(namespace, [])
                if candidates is not None:
                    names = sorted(name for ns, name in candidates if ns == namespace)
                matching = [jobs[name] for name in names if name in jobs]  # a candidate may have gone since
                found += [job.summary for job in matching if not selector.requirements or selector.matches(job.labels)]
        return found

    def _candidates(self, selector: Selector) -> set[Key] | None:
        """The jobs an `in` (or `=`) requirement allows, from the label index; None when no term narrows."""
        narrowing = next((r for r in selector.requirements if r.operator == Operator.IN), None)
        if narrowing is None:
            return None
        with self._lock:
            return set().union(*(self._by_label.get((narrowing.key, value), set()) for value in narrowing.values))

    def _after(self, namespace: str, after: Key | None, candidates: set[Key] | None) -> Iterator[CachedJob]:
        with self._lock:
            names = self._names.get(namespace, [])
            if candidates is not None:
                names = sorted(name for ns, name in candidates if ns == namespace)
            start = bisect_right(names, after[1]) if after is not None and after[0] == namespace else 0
            jobs = self._jobs.get(namespace, {})
            batch = [jobs[name] for name in names[start:] if name in jobs]
        yield from batch

    def listen(self, key: Key | None, listener: Listener) -> Callable[[], None]:
        """Call `listener(event_type, job)` on every change of one job, or (key None) on every change of any job's
        summary and every deletion (from the cache thread); returns undo."""
        with self._lock:
            self._listeners.setdefault(key, set()).add(listener)

        def undo() -> None:
            with self._lock:
                self._listeners.get(key, set()).discard(listener)

        return undo

    def _replace_all(self, namespace: str | None, items: dict[Key, CachedJob]) -> None:
        """A whole list of one scope: what is not in it is deleted, what changed is applied."""
        with self._lock:
            old = {
                (ns, name): job
                for ns, jobs in self._jobs.items()
                if namespace in (None, ns)
                for name, job in jobs.items()
            }
            self.relists += 1
        for key in old.keys() - items.keys():
            self._apply("DELETED", old[key])
        for key, job in items.items():
            if old.get(key) != job:
                self._apply("ADDED" if key not in old else "MODIFIED", job)

    def _index(self, job: CachedJob, add: bool) -> None:
        for label in job.labels.items():
            keys = self._by_label.setdefault(label, set())
            if add:
                keys.add((job.namespace, job.name))
            else:
                keys.discard((job.namespace, job.name))

    def _apply(self, kind: str, job: CachedJob) -> None:
        with self._lock:
            jobs = self._jobs.setdefault(job.namespace, {})
            names = self._names.setdefault(job.namespace, [])
            previous = jobs.get(job.name)
            if previous is not None:
                self._index(previous, add=False)
            if kind != "DELETED":
                self._index(job, add=True)
            if kind == "DELETED":
                if jobs.pop(job.name, None) is not None:
                    names.remove(job.name)
            elif job.name not in jobs:
                jobs[job.name] = job
                insort(names, job.name)
            else:
                jobs[job.name] = job
            listeners = list(self._listeners.get((job.namespace, job.name), ()))
            if _summary_event(previous, kind, job):
                listeners += self._listeners.get(None, ())
        for listener in listeners:
            listener(kind, job)
        self._on_change()
