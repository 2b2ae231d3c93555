"""The watches of a FakeCluster as the operator's informers see them: every change recorded in order, with a
resourceVersion, and delivered to the operator's stores only when the test says, so the stores can lag the
cluster by any number of events, kind by kind; and the relist that follows a 410 Gone. The kinds watched are
attributes of the cluster and of the stores of the same name (a job's: jobs, pods, services; a sweep's: sweeps,
trials)."""

import pickle
from dataclasses import dataclass, field
from typing import Any

from trainingjob.runtime.memory import Stores
from trainingjob.runtime.store import Store

Manifest = dict[str, Any]
KINDS = ("jobs", "pods", "services")


def clone(manifest: Manifest) -> Manifest:
    """A deep copy of an object made of plain data (a pickle's round trip: several times faster than copy.deepcopy,
    which the model-based tests spent half their time in)."""
    copied: Manifest = pickle.loads(pickle.dumps(manifest, pickle.HIGHEST_PROTOCOL))
    return copied


@dataclass
class FakeWatch:
    cluster: Any  # a fake cluster: its objects by kind (attributes named as the kinds), version(), on_written
    stores: Stores = field(default_factory=Stores)
    kinds: tuple[str, ...] = KINDS
    pending: dict[str, list[tuple[str, Manifest]]] = field(default_factory=dict)
    _seen: dict[str, dict[tuple[str, str], Manifest]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cluster.on_written = self.stores.saw
        if hasattr(self.cluster, "watches"):  # a cluster that tells its watches of each write as it happens
            self.cluster.watches.append(self.record)
        for kind in self.kinds:
            self.pending[kind], self._seen[kind] = [], {}
        for kind in self.kinds:
            self.relist(kind)

    def close(self) -> None:
        """The operator that held these stores is gone: its watch stops recording."""
        if hasattr(self.cluster, "watches"):
            self.cluster.watches.remove(self.record)

    def _objects(self, kind: str) -> dict[tuple[str, str], Manifest]:
        found: dict[tuple[str, str], Manifest] = getattr(self.cluster, kind)
        return found

    def _store(self, kind: str) -> Store:
        found: Store = getattr(self.stores, kind)
        return found

    def record(self) -> None:
        """Turn what changed since the last record into watch events; a change no write of the operator's made
        (a kubelet's, a user's) gets its resourceVersion here."""
        for kind in self.kinds:
            seen, objects, events = self._seen[kind], self._objects(kind), []
            for key in sorted(set(seen) | set(objects)):
                old, new = seen.get(key), objects.get(key)
                if old is not None and (new is None or old["metadata"]["uid"] != new["metadata"]["uid"]):
                    gone = {**old, "metadata": {**old["metadata"], "resourceVersion": self.cluster.version()}}
                    events.append(("DELETED", gone))
                    del seen[key]
                    old = None
                if new is not None and new != old:
                    if old is not None and old["metadata"]["resourceVersion"] == new["metadata"]["resourceVersion"]:
                        new["metadata"]["resourceVersion"] = self.cluster.version()
                    seen[key] = clone(new)  # the cluster changes its objects in place; stores never do
                    events.append(("ADDED" if old is None else "MODIFIED", seen[key]))
            self.pending[kind] += sorted(events, key=lambda e: int(e[1]["metadata"]["resourceVersion"]))

    def deliver(self, kind: str, count: int | None = None) -> None:
        """The first `count` pending events of one kind (all of them by default) reach the store."""
        self.record()
        events = self.pending[kind]
        taken = len(events) if count is None else min(count, len(events))
        self.pending[kind] = events[taken:]
        for event, manifest in events[:taken]:
            self._store(kind).apply(event, manifest)

    def deliver_all(self) -> None:
        for kind in self.kinds:
            self.deliver(kind)

    def relist(self, kind: str) -> None:
        """The watch could not resume: list everything now and start again from there."""
        self.record()
        self.pending[kind] = []
        version = self.cluster.version()
        self._store(kind).replace([clone(m) for m in self._objects(kind).values()], version)
