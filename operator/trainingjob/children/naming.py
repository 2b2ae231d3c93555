"""Names, labels and selectors of a job's children: deterministic, so a restarted operator finds them all."""

from dataclasses import dataclass

from trainingjob.children.contract import ROLE_PS, ROLE_WORKER

LABEL_PREFIX = "trainingjob.io"
JOB_LABEL = f"{LABEL_PREFIX}/job-name"
ROLE_LABEL = f"{LABEL_PREFIX}/role"
INDEX_LABEL = f"{LABEL_PREFIX}/replica-index"
ATTEMPT_LABEL = f"{LABEL_PREFIX}/attempt"
RANK_LABEL = f"{LABEL_PREFIX}/rank"  # the DDP node rank of a worker; absent on parameter servers
MIN_AVAILABLE_ANNOTATION = f"{LABEL_PREFIX}/min-available"
# What gang schedulers read: scheduler-plugins' coscheduling and Volcano.
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
# Kueue's keys for pods it manages itself. A queued job is Kueue's as a whole (its Workload, children/workload.py),
# so its pods carry none of them: a role may not set them either, or Kueue's pod integration would gate its pods.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
# The keys the operator sets on pods besides its own trainingjob.io/ ones (and Kueue's, which it keeps off them): a
# role may not set them, and the job's labels do not pass them on to its pods.
OPERATOR_LABELS = (POD_GROUP_LABEL, KUEUE_QUEUE_LABEL, KUEUE_POD_GROUP_LABEL)
OPERATOR_ANNOTATIONS = (VOLCANO_GROUP_ANNOTATION, KUEUE_GROUP_COUNT_ANNOTATION)
CONTAINER_NAME = "trainer"
# Every pod is created with this finalizer, removed only once the job's status records how the pod ended (or that
# the attempt no longer needs it): a pod can run, fail and be deleted before the operator has seen it, but it cannot
# vanish unseen, so no failure goes uncounted (README, "Counted exactly once").
TRACKING_FINALIZER = f"{LABEL_PREFIX}/tracked"
# The scheduling gate of the same name held the pods of operators before the finalizer: such a pod is released from
# it once its UID is in the job's status (plan/tracking.py).
TRACKING_GATE = TRACKING_FINALIZER
ROLES = (ROLE_WORKER, ROLE_PS)


@dataclass(frozen=True, order=True)
class Replica:
    """One pod slot of a job: a role and an index within it."""

    role: str
    index: int

    def hostname(self, job: str) -> str:
        """The stable host name of this slot, the same in every attempt."""
        return f"{job}-{self.role}-{self.index}"

    def pod_name(self, job: str, attempt: int) -> str:
        return f"{self.hostname(job)}-{attempt}"

    def address(self, job: str, namespace: str) -> str:
        """The slot's DNS name through the job's headless Service."""
        return f"{self.hostname(job)}.{service_name(job)}.{namespace}.svc"


def service_name(job: str) -> str:
    return job


def job_selector(job: str) -> str:
    """The label selector of every pod the job owns."""
    return f"{JOB_LABEL}={job}"


def operator_owned(key: str, owned: tuple[str, ...]) -> bool:
    """Whether a pod label or annotation key is the operator's: under trainingjob.io/, or one of `owned`."""
    return key.startswith(f"{LABEL_PREFIX}/") or key in owned


def pod_labels(job: str, replica: Replica, attempt: int) -> dict[str, str]:
    labels = {
        JOB_LABEL: job,
        ROLE_LABEL: replica.role,
        INDEX_LABEL: str(replica.index),
        ATTEMPT_LABEL: str(attempt),
        POD_GROUP_LABEL: job,
    }
    if replica.role == ROLE_WORKER:
        labels[RANK_LABEL] = str(replica.index)
    return labels
