"""Watch-fed memory of one kind of object, indexed by the job each belongs to: what a reconcile reads instead of
the apiserver.

An informer (kube.watch) fills it (a list, then a watch from the list's resourceVersion; a relist after 410
Gone), and the operator's own writes go through it as the apiserver answered them, so a reconcile never reads an
older version
of what it has just written. An older version never replaces a newer one, and an object seen deleted stays
deleted (its UID is remembered for a while), whichever order a watch event and a write's answer arrive in.

Readers get the stored mappings themselves, not copies: nothing may change them. Every update replaces an
object whole, so what a reader holds is a consistent snapshot of one version. A store made with `packed` keeps
each object as compact JSON instead (a TrainingJob's many small parts cost several times their bytes as Python
objects) and gives every reader a fresh copy; with `head` it also keeps a small part of each unpacked, which
of_job gives instead of the whole object for the names a reader does not need whole.
"""

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

Manifest = dict[str, Any]
Key = tuple[str, str]  # namespace, name
TOMBSTONE_SECONDS = 600.0


def newer(version: str, than: str) -> bool:
    """Whether resourceVersion `version` is later than `than`. The apiserver's versions are etcd revisions, which
    grow; versions that are not numbers are compared only for equality (a different one counts as newer)."""
    if version.isdigit() and than.isdigit():
        return int(version) > int(than)
    return version != than


def without_managed_fields(manifest: Manifest) -> Manifest:
    """The object less metadata.managedFields, which nothing reads and which is often its largest part."""
    metadata = manifest.get("metadata") or {}
    if "managedFields" not in metadata:
        return manifest
    return {**manifest, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}


@dataclass(frozen=True, slots=True)
class Kept:
    """One object as a store keeps it (Store.kept): what it needs to compare and index it, and the object, trimmed
    and, in a packed store, as JSON."""

    key: Key
    uid: str
    version: str
    job: str | None
    value: Manifest | bytes
    head: Manifest | None = None  # a small part of it, unpacked (Store's `head`)

    def manifest(self) -> Manifest:
        if isinstance(self.value, bytes):
            found: Manifest = orjson.loads(self.value)
            return found
        return self.value


def _identity(manifest: Mapping[str, Any]) -> tuple[Key, str, str]:
    metadata = manifest.get("metadata") or {}
    key = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
    return key, str(metadata.get("uid") or ""), str(metadata.get("resourceVersion") or "")


class Store:
    """The objects of one kind: by namespace and name, and by the job they belong to (`job_of` names it, or None
    for an object of no job). `keep` trims what is stored to what the operator reads; `packed` keeps it as JSON."""

    def __init__(
        self,
        job_of: Callable[[Manifest], str | None],
        *,
        keep: Callable[[Manifest], Manifest] = without_managed_fields,
        packed: bool = False,
        head: Callable[[Manifest], Manifest] | None = None,
        tombstone_seconds: float = TOMBSTONE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        on_deleted: Callable[[Manifest], None] | None = None,
    ) -> None:
        self._job_of, self._keep, self._packed, self._head = job_of, keep, packed, head
        self.on_deleted = on_deleted  # given each DELETED event's object: the object's final state
        self._objects: dict[Key, Kept] = {}
        self._by_job: dict[Key, dict[str, Kept]] = {}
        self._gone: OrderedDict[str, float] = OrderedDict()  # UID -> when it was seen deleted
        self._tombstone_seconds, self._clock = tombstone_seconds, clock
        self._lock = threading.Lock()
        self._synced = threading.Event()

    # -- reads ---------------------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> Manifest | None:
        entry = self._objects.get((namespace, name))
        return None if entry is None else entry.manifest()

    def of_job(self, namespace: str, job: str, whole: Collection[str] | None = None) -> list[Manifest]:
        """The objects of `job`; given `whole`, those not named in it as their head alone (where kept)."""
        with self._lock:
            found = sorted(self._by_job.get((namespace, job), {}).items())
        return [
            entry.head if whole is not None and entry.head is not None and name not in whole else entry.manifest()
            for name, entry in found
        ]

    @property
    def packed(self) -> bool:
        return self._packed

    def seen_deleted(self, uid: str) -> bool:
        return uid in self._gone

    def __len__(self) -> int:
        return len(self._objects)

    @property
    def synced(self) -> bool:
        """Whether a whole list has been read in: before that, an absent object says nothing."""
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    # -- updates (each returns the jobs whose objects changed) -----------------------------------------------

    def apply(self, kind: str, manifest: Manifest) -> set[Key]:
        """One watch event: ADDED, MODIFIED or DELETED."""
        with self._lock:
            if kind == "DELETED":
                return self._delete(manifest)
            return self._put(manifest)

    def saw(self, manifest: Manifest) -> set[Key]:
        """What the apiserver answered to one of the operator's own writes."""
        with self._lock:
            return self._put(manifest)

    def kept(self, manifest: Manifest) -> Kept:
        """The object as this store keeps it: an informer makes each listed page so before it reads the next, so
        the page's parsed objects are gone before the next page's are made."""
        key, uid, version = _identity(manifest)
        trimmed = self._keep(manifest)
        value = orjson.dumps(trimmed) if self._packed else trimmed
        head = self._head(trimmed) if self._head is not None else None
        return Kept(key, uid, version, self._job_of(trimmed), value, head)

    def replace(self, manifests: Iterable[Manifest | Kept], version: str) -> set[Key]:
        """A whole list, read at `version`: objects not in it are gone, unless written after it was read."""
        listed = {entry.key: entry for entry in map(self._as_kept, manifests)}
        with self._lock:
            changed: set[Key] = set()
            for key, old in list(self._objects.items()):
                if key not in listed and not newer(old.version, version):
                    changed |= self._gone_from_list(key, old)
            for manifest in listed.values():
                changed |= self._put(manifest)
        self._synced.set()
        return changed

    def _as_kept(self, item: Manifest | Kept) -> Kept:
        return item if isinstance(item, Kept) else self.kept(item)

    def _put(self, item: Manifest | Kept) -> set[Key]:
        key, uid, version = (item.key, item.uid, item.version) if isinstance(item, Kept) else _identity(item)
        if uid in self._gone:
            return set()  # an answer that arrived after the watch said the object was deleted
        old = self._objects.get(key)
        if old is not None and not newer(version, old.version):
            return set()  # nothing to trim or pack
        entry = self._as_kept(item)
        job = entry.job
        changed = self._unindex(key, old) if old is not None else set()
        self._objects[key] = entry
        if job is not None:
            self._by_job.setdefault((key[0], job), {})[key[1]] = entry
            changed.add((key[0], job))
        return changed

    def _delete(self, manifest: Manifest) -> set[Key]:
        if self.on_deleted is not None:
            self.on_deleted(manifest)
        key, uid, _ = _identity(manifest)
        old = self._objects.get(key)
        if uid:
            self._bury(uid)
        if old is None or (uid and old.uid != uid):
            return set()  # not stored, or a namesake created after it is (a name is free only once it is gone)
        return self._drop(key, old)

    def _gone_from_list(self, key: Key, old: Kept) -> set[Key]:
        if old.uid:
            self._bury(old.uid)
        return self._drop(key, old)

    def _drop(self, key: Key, old: Kept) -> set[Key]:
        del self._objects[key]
        return self._unindex(key, old)

    def _unindex(self, key: Key, old: Kept) -> set[Key]:
        job = old.job
        if job is None:
            return set()
        members = self._by_job.get((key[0], job), {})
        members.pop(key[1], None)
        if not members:
            self._by_job.pop((key[0], job), None)
        return {(key[0], job)}

    def _bury(self, uid: str) -> None:
        now = self._clock()
        self._gone[uid] = now
        self._gone.move_to_end(uid)
        while self._gone:
            oldest, when = next(iter(self._gone.items()))
            if now - when <= self._tombstone_seconds:
                break
            del self._gone[oldest]
