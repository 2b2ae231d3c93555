"""What each trainer said as its pod went, kept a while after the pod is gone.

The kubelet writes a pod's final status (the trainer's termination message: its last progress report, a suspended
rank's final checkpoint among it) and deletes the pod a moment later, in one pass. A reconcile woken by the first
often runs after the second: the pod is no longer in the store, and its last words would be lost with it. The
watch's DELETED event holds the pod's final state: its trainer's last words are kept from it, by pod name and UID,
for the reconcile to read (reconcile/job.py, Cluster.departed)."""

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.naming import INDEX_LABEL, ROLE_LABEL
from trainingjob.children.progress_report import final_report
from trainingjob.runtime.store import TOMBSTONE_SECONDS, Manifest

MAX_KEPT = 1024  # pods whose last words are kept at most (each at most the 4 KiB Kubernetes keeps)


class LastWords:
    """The termination messages of rank 0's pods seen deleted (only rank 0 reports), for `seconds`, at most `limit`
    of them."""

    def __init__(
        self, seconds: float = TOMBSTONE_SECONDS, limit: int = MAX_KEPT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._seconds, self._limit, self._clock = seconds, limit, clock
        self._said: OrderedDict[tuple[str, str], tuple[str, bytes, float]] = OrderedDict()
        self._lock = threading.Lock()

    def heard(self, pod: Manifest) -> None:
        """A pod's final state (a DELETED event's object): its trainer's last words are kept, if it said any."""
        metadata = pod.get("metadata") or {}
        labels = metadata.get("labels") or {}
        if labels.get(ROLE_LABEL) != ROLE_WORKER or labels.get(INDEX_LABEL) != "0" or not metadata.get("name"):
            return
        said = final_report(pod)
        if said is None:
            return
        key = (str(metadata.get("namespace") or ""), str(metadata["name"]))
        with self._lock:
            now = self._clock()
            self._said[key] = (str(metadata.get("uid") or ""), said, now)
            self._said.move_to_end(key)
            while self._said and (
                len(self._said) > self._limit or now - next(iter(self._said.values()))[2] > self._seconds
            ):
                self._said.popitem(last=False)

    def of(self, namespace: str, name: str) -> tuple[str, bytes] | None:
        """(UID, last words) of the pod of that name seen deleted within `seconds`; None otherwise."""
        with self._lock:
            found = self._said.get((namespace, name))
        if found is None or self._clock() - found[2] > self._seconds:
            return None
        return found[0], found[1]
