"""pod_state remembered between one job's reconciles. A reconcile reads every pod of its job, but between two
reconciles of a large gang few pods change: a gang of 10,240 coming up is reconciled again and again while its pods
start, and reading each pod again was most of each pass. The apiserver gives every change of a pod a new
resourceVersion, so a pod whose UID and resourceVersion were read before reads the same again.

Each job keeps only what its last observation read (the pods it no longer has are forgotten with it), and a job
that is gone is forgotten whole. One job is never reconciled twice at once (runtime/queue.py), so each job's
memory has one reader at a time."""

from collections.abc import Mapping
from typing import Any

from trainingjob.children.observe import PodState, Read, pod_state

Key = tuple[str, str]  # namespace, job name


class PodMemory:
    def __init__(self) -> None:
        self._jobs: dict[Key, dict[tuple[str, str], tuple[str, PodState | None]]] = {}

    def reader(self, job: Key) -> Read:
        """A pod_state for one observation of `job`: what it reads replaces the job's memory."""
        known: dict[tuple[str, str], tuple[str, PodState | None]] = self._jobs.get(job, {})
        seen = self._jobs[job] = {}

        def read(pod: Mapping[str, Any], container: str) -> PodState | None:
            metadata = pod.get("metadata") or {}
            uid, version = str(metadata.get("uid") or ""), str(metadata.get("resourceVersion") or "")
            if not uid or not version:  # not as the apiserver wrote it: read, never remembered
                return pod_state(pod, container)
            remembered = known.get((uid, container))
            state = remembered[1] if remembered is not None and remembered[0] == version else pod_state(pod, container)
            seen[uid, container] = (version, state)
            return state

        return read

    def forget(self, job: Key) -> None:
        self._jobs.pop(job, None)

    def clear(self) -> None:
        """Forget every job (a lost Lease: a standby may not lead again for long, and jobs go meanwhile)."""
        self._jobs.clear()

    def __len__(self) -> int:
        """The pods remembered, of every job."""
        return sum(len(pods) for pods in list(self._jobs.values()))  # a copy: other jobs' reconciles add to it
