"""The operator's memory of the cluster: the five kinds of object it lists and watches (sources), the Store each
fills, and the Sink that wakes the reconciles of the jobs or sweeps a change touched."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainingjob.children.naming import JOB_LABEL
from trainingjob.children.observe import essentials
from trainingjob.kube.watch import PAGE, Informer, Source
from trainingjob.model import GROUP, KIND, PLURAL, VERSION
from trainingjob.model.sweep import SWEEP_KIND, SWEEP_PLURAL
from trainingjob.runtime.last_words import LastWords
from trainingjob.runtime.store import Kept, Key, Manifest, Store
from trainingjob.sweep.trials import SWEEP_LABEL


def sources(namespace: str) -> tuple[Source, ...]:
    """In one namespace or ("") in all: the jobs, and the pods and Services that carry a job label; the sweeps, and
    the jobs that carry a sweep label (their trials). In the order of Stores.all."""
    scope = f"/namespaces/{namespace}" if namespace else ""
    return (
        Source("trainingjobs", f"/apis/{GROUP}/{VERSION}{scope}/{PLURAL}"),
        Source("pods", f"/api/v1{scope}/pods", JOB_LABEL),
        Source("services", f"/api/v1{scope}/services", JOB_LABEL),
        Source("trainingsweeps", f"/apis/{GROUP}/{VERSION}{scope}/{SWEEP_PLURAL}"),
        Source("trials", f"/apis/{GROUP}/{VERSION}{scope}/{PLURAL}", SWEEP_LABEL),
    )


def trial_head(manifest: Manifest) -> Manifest:
    """What a sweep reads of a finished trial's job (sweep.trials.child, not parsing it): which job it is, whose,
    and since when; about 1 KiB as Python objects, where the whole job, unpacked, is tens."""
    metadata = manifest.get("metadata") or {}
    kept = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp")
    owners = [o for o in metadata.get("ownerReferences") or [] if o.get("controller")]
    head = {k: metadata[k] for k in kept if k in metadata}
    return {"metadata": {**head, "ownerReferences": owners} if owners else head}


def _own_name(manifest: Manifest) -> str | None:
    return str(manifest["metadata"]["name"])


def _label(key: str) -> Callable[[Manifest], str | None]:
    def value(manifest: Manifest) -> str | None:
        found = (manifest["metadata"].get("labels") or {}).get(key)
        return str(found) if found else None

    return value


_job_label, _sweep_label = _label(JOB_LABEL), _label(SWEEP_LABEL)


@dataclass
class Stores:
    """The operator's memory of the cluster: jobs by name, pods and Services by their job label; sweeps by name,
    and their trials' jobs by their sweep label. Jobs are kept packed (compact JSON, read back on each read): a job
    at the size budget costs 130 KiB so, about 800 KiB as Python objects (bench/bench_sizes.py)."""

    jobs: Store = field(default_factory=lambda: Store(_own_name, packed=True))
    pods: Store = field(default_factory=lambda: Store(_job_label, keep=essentials))
    services: Store = field(default_factory=lambda: Store(_job_label))
    sweeps: Store = field(default_factory=lambda: Store(_own_name))
    trials: Store = field(default_factory=lambda: Store(_sweep_label, packed=True, head=trial_head))
    last_words: LastWords = field(default_factory=LastWords)  # of the pods seen deleted

    def __post_init__(self) -> None:
        self.pods.on_deleted = self.last_words.heard

    def saw(self, manifest: Manifest) -> None:
        """Take in what the apiserver answered to a write: a job's status, a pod, a Service or a sweep's status.
        (Not the jobs a sweep creates or suspends: their watch events must wake the jobs' reconciles, and a store
        that already holds a version takes its event as no change.)"""
        kinds = {KIND: self.jobs, "Pod": self.pods, "Service": self.services, SWEEP_KIND: self.sweeps}
        store = kinds.get(str(manifest.get("kind")))
        if store is not None:
            store.saw(manifest)

    @property
    def all(self) -> tuple[Store, ...]:
        """The stores in the order of sources()."""
        return self.jobs, self.pods, self.services, self.sweeps, self.trials

    def wait_synced(self, timeout: float) -> bool:
        """Whether the stores jobs are reconciled from hold a whole list (before that, a missing pod would look
        vanished), waiting up to `timeout` seconds for each. Sweeps have their own (sweeps_synced): a cluster
        without the TrainingSweep CRD still runs jobs."""
        return all(store.wait_synced(timeout) for store in (self.jobs, self.pods, self.services))

    @property
    def sweeps_synced(self) -> bool:
        return self.sweeps.synced and self.trials.synced


@dataclass(frozen=True)
class Waking:
    """A Store as an informer's Sink: what changed in it wakes the reconciles of the jobs (or sweeps) it touched."""

    store: Store
    wake: Callable[[set[Key]], None]

    def replace(self, items: list[Manifest | Kept], version: str) -> None:
        self._woken(self.store.replace(items, version))

    def apply(self, kind: str, item: Manifest) -> None:
        self._woken(self.store.apply(kind, item))

    def _woken(self, changed: set[Key]) -> None:
        if changed:
            self.wake(changed)


# A packed store's list comes in pages this small: each page is parsed whole (20 jobs at the size budget, about
# 30 MB of objects with their managedFields), then packed before the next is read. Big pages of big jobs left the
# operator's memory scattered (bench/bench_sizes.py).
PACKED_PAGE = 20


def store_informer(
    api: Any, source: Source, store: Store, wake: Callable[[set[Key]], None],
    on_relist: Callable[[str], None] = lambda _: None,
) -> Informer:  # fmt: skip
    """The informer that keeps `store` in step with `source` and wakes the reconciles of what changed."""
    page = PACKED_PAGE if store.packed else PAGE
    return Informer(api, source, Waking(store, wake), on_relist=on_relist, page=page, keep=store.kept)
