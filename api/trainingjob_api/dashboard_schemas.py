"""The shapes of the dashboard's read endpoints (routers/dashboard.py), for the OpenAPI document; camelCase on the
wire. The summaries themselves are built as plain JSON by summaries.py, once per job change."""

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class View(BaseModel):
    """camelCase on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True)


class Whoami(View):
    """The caller as Kubernetes authenticated their token."""

    username: str
    groups: list[str]


class Restarts(View):
    """Restarts so far, per failure class."""

    retryable: int = 0
    oom: int = 0
    disruption: int = 0
    stalled: int = 0


class JobSummary(View):
    """One job as the dashboard's list shows it."""

    namespace: str
    name: str
    labels: dict[str, str]
    created: str | None = None
    """metadata.creationTimestamp."""
    phase: str
    """Pending, Running, Restarting, Suspended, Succeeded or Failed (Pending before the operator wrote one)."""
    attempt: int = 0
    restarts: Restarts
    mode: str
    """DDP or ParameterServer."""
    workers: int
    parameter_servers: int = 0
    gpus: int = 0
    """nvidia.com/gpu of one pod (limits, else requests) times the replicas, workers and parameter servers."""
    step: int | None = None
    total_steps: int | None = None
    percent: float | None = None
    loss: float | None = None
    samples_per_second: float | None = None
    eta: str | None = None
    """progress.estimatedCompletionTime."""
    reason: str | None = None
    """The failure class of the last failure (status.lastFailure.failureClass)."""
    completed: str | None = None
    """status.completionTime: when it reached Succeeded or Failed."""


class JobSummaryList(View):
    """A page of job summaries, sorted by namespace and name."""

    items: list[JobSummary]
    continue_: str | None = Field(default=None, alias="continue")
    """Pass as `continue` to get the next page; null on the last page."""
    total: int
    """Every job that matches the filters, on every page."""
    phases: dict[str, int]
    """Jobs per phase among the matches of namespace, labelSelector and search (the phase filter not applied)."""


class GpuCounts(View):
    """nvidia.com/gpu requested by jobs, by what they are doing."""

    running: int
    """By Running jobs."""
    pending: int
    """By Pending and Restarting jobs: wanted, not all running (queued, or between attempts)."""
    suspended: int
    """By Suspended jobs: released now, wanted again on resume."""


class RecentFailure(View):
    """The last failure of one job."""

    namespace: str
    name: str
    time: str | None = None
    failure_class: str | None = None
    reason: str | None = None
    pod: str | None = None


class ClusterView(View):
    """The jobs of the namespaces the caller may list, counted."""

    jobs: int
    phases: dict[str, int]
    gpus: GpuCounts
    recent_failures: list[RecentFailure]
    """The newest last failures, one per job, newest first (at most 20)."""


class JobAccess(View):
    """What the caller may do to one job, as Kubernetes RBAC answers."""

    get: bool
    patch: bool
    """Suspend and resume."""
    delete: bool
    logs: bool
    """get pods/log: the logs and the last failure's log tail."""
    events: bool
    """list events."""
    pods: bool
    """list pods: the job's pods and its timeline."""


class JobPod(View):
    """One pod of a job."""

    name: str
    role: str | None = None
    index: int | None = None
    attempt: int | None = None
    phase: str | None = None
    ready: bool = False
    node: str | None = None
    created: str | None = None
    started: str | None = None
    finished: str | None = None
    reason: str | None = None
    """Why the trainer container waits or ended (e.g. ContainerCreating, OOMKilled), or the pod's (Evicted)."""
    exit_code: int | None = None
    restarts: int = 0


class JobPodList(View):
    """The pods of a job still present, newest attempt first, then by role and index."""

    items: list[JobPod]
