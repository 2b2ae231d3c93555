"""The model-based test's checks of the tracking finalizer (issue 30), once a job has settled in a quiet cluster:
the operator lets go of its pods (every pod is created with the finalizer, so one the operator never lets go of
would stay for ever once deleted, and a job deleted with foreground propagation would never go), and no failure of
the attempt the job still runs vanished uncounted (what the finalizer is for: a kubelet that removed it, as the
cluster tier's kwok once did, let a pod evicted before the operator recorded it go unseen, and the operator made it
again in the same attempt)."""

from collections.abc import Set
from typing import Any

from tests.support.fake_cluster import FakeCluster
from tests.support.job_status import job_status
from tests.support.model_invariants import Ledger

from trainingjob.children.naming import CONTAINER_NAME, JOB_LABEL
from trainingjob.children.observe import controller_uid, holds_tracking_finalizer, pod_state
from trainingjob.model import Phase

Manifest = dict[str, Any]


def held_for_nothing(cluster: FakeCluster, namespace: str, name: str) -> list[str]:
    """The pods of job `name` (by label) that the tracking finalizer holds though nothing needs them: being deleted,
    of an earlier attempt, of a job that is gone (or a namesake's), finished or suspended."""
    job = cluster.jobs.get((namespace, name))
    status = job_status(job or {})
    stopped = status.phase.is_terminal or status.phase == Phase.SUSPENDED
    held = []
    for (ns, pod_name), pod in sorted(cluster.pods.items()):
        if ns != namespace or pod["metadata"]["labels"].get(JOB_LABEL) != name or not holds_tracking_finalizer(pod):
            continue
        state = pod_state(pod, CONTAINER_NAME)
        ours = job is not None and controller_uid(pod) == job["metadata"]["uid"]
        current = state is not None and state.attempt == status.current_pods_attempt and not state.deleting
        if not (ours and current and not stopped):
            held.append(pod_name)
    return held


def check_let_go(cluster: FakeCluster, namespace: str, name: str) -> None:
    held = held_for_nothing(cluster, namespace, name)
    assert not held, f"the tracking finalizer still holds {held} of job {name}, which nothing needs"


def failures_lost(
    ledger: Ledger, cluster: FakeCluster, namespace: str, name: str, refused: Set[str] = frozenset()
) -> list[str]:
    """The pods of the attempt job `name` still runs that the model made fail (or evicted, deleted, lost) and that
    are gone without the operator ever counting them; none when the job has finished or is suspended. A pod its
    node `refused` is no failure to count (plan/refused.py: its slot is made again alone, uncounted)."""
    job = cluster.jobs.get((namespace, name))
    if job is None:
        return []
    status = job_status(job)
    if status.phase.is_terminal or status.phase == Phase.SUSPENDED:
        return []
    uid, present = job["metadata"]["uid"], {p["metadata"]["uid"] for p in cluster.pods.values()}
    uncounted = ledger.eligible.get(uid, set()) - ledger.counted.get(uid, set()) - present - refused
    return sorted(u for u in uncounted if cluster.born.get(u) == str(status.current_pods_attempt))


def check_counted(
    ledger: Ledger, cluster: FakeCluster, namespace: str, name: str, refused: Set[str] = frozenset()
) -> None:
    lost = failures_lost(ledger, cluster, namespace, name, refused)
    assert not lost, f"failures of job {name}'s attempt that vanished uncounted: {lost}"
