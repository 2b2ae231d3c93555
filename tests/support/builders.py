"""Test builders, in one place: jobs, pods in any state, what the operator observes, and one planning step."""

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from trainingjob.children.naming import CONTAINER_NAME, TRACKING_GATE, Replica
from trainingjob.children.observe import Observed, observe
from trainingjob.children.specs import pod_manifest, replicas
from trainingjob.model import API_VERSION, KIND, TrackedPod, TrainingJob, TrainingJobStatus
from trainingjob.model.sweep import SWEEP_KIND, TrainingSweep
from trainingjob.plan import Plan, Settings, plan
from trainingjob.sweep.plan import SweepPlan
from trainingjob.sweep.plan import plan as plan_sweep
from trainingjob.sweep.trial_jobs import trial_manifest
from trainingjob.sweep.trials import Child, child

T0 = datetime(2026, 1, 1, tzinfo=UTC)
JOB_UID = "job-uid"
SETTINGS = Settings(backoff_base_seconds=10, backoff_max_seconds=300, terminating_timeout_seconds=60)
Manifest = dict[str, Any]
BUILT_IN_TRAINER: Manifest = {"steps": 100}


def at(seconds: float) -> datetime:
    """T0 plus some seconds: the tests' clock."""
    return T0 + timedelta(seconds=seconds)


def job_manifest(
    name: str = "job",
    *,
    mode: str = "DDP",
    workers: int | Manifest = 2,
    servers: int = 0,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    trainer: Manifest | None = BUILT_IN_TRAINER,
    **spec: Any,
) -> Manifest:
    """A TrainingJob as a user submits it; `spec` keys (camelCase) are merged into the spec. trainer=None: the
    workers run their own command."""
    body: Manifest = {
        "mode": mode,
        "workers": copy.deepcopy(workers) if isinstance(workers, dict) else {"replicas": workers},
    }
    if trainer is not None:
        body["trainer"] = copy.deepcopy(trainer)
    if servers:
        body["parameterServers"] = {"replicas": servers}
    body.update(copy.deepcopy(spec))
    metadata: Manifest = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": body}


def tracked_records(status: Manifest | None) -> list[TrackedPod]:
    """A stored status's records of the attempt's pods, those written as name ranges among them (UID empty)."""
    keys = ("trackedPods", "trackedPodRanges")
    return TrainingJobStatus.model_validate({k: v for k, v in (status or {}).items() if k in keys and v}).tracked_pods


def claim_manifest(name: str = "checkpoints") -> Manifest:
    """A PersistentVolumeClaim, as a job's file may hold beside the job."""
    spec = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec}


def make_job(name: str = "job", *, namespace: str = "ns", uid: str = JOB_UID, **options: Any) -> TrainingJob:
    """A TrainingJob model as the apiserver stores it; run-policy fields may be given directly (backoffLimit=1)."""
    policy_fields = {"restartPolicy", "permanentExitCodes", "backoffLimit", "disruptionLimit", "suspend"}
    policy_fields |= {"activeDeadlineSeconds", "startupDeadlineSeconds", "progressDeadlineSeconds"}
    policy_fields |= {"ttlSecondsAfterFinished", "cleanPodPolicy"}
    policy = {k: options.pop(k) for k in list(options) if k in policy_fields}
    if policy:
        options["runPolicy"] = {**options.get("runPolicy", {}), **policy}
    manifest = job_manifest(name, namespace=namespace, **options)
    manifest["metadata"].update(uid=uid, generation=1, resourceVersion="1")
    return TrainingJob.model_validate(manifest)


def with_policy(job: TrainingJob, **policy: Any) -> TrainingJob:
    """The job with run-policy fields changed (snake_case), as a user's edit would."""
    run_policy = job.spec.run_policy.model_copy(update=policy)
    return job.model_copy(update={"spec": job.spec.model_copy(update={"run_policy": run_policy})})


def pod(
    job: TrainingJob,
    replica: Replica,
    attempt: int,
    phase: str = "Running",
    *,
    uid: str | None = None,
    created: datetime = T0,
    deleting: datetime | None = None,
    exit_code: int | None = None,
    reason: str = "",
    message: str = "",
    owner: str | None = None,
    gated: bool = False,
    node: str = "",
    finished: datetime | None = None,
    **status: Any,
) -> Manifest:
    """One pod of the job in any state, as the operator creates it (with the tracking finalizer), or `gated`: as an
    earlier operator did (held by the tracking gate, no finalizer). `reason` goes to the container's
    terminated state when there is an exit code, else to the pod's status (as the kubelet writes Evicted);
    `finished`: when the trainer container ended; `status` adds raw status fields."""
    manifest = pod_manifest(job, owner if owner is not None else JOB_UID, replica, attempt)
    if gated:  # an earlier operator's pod: held by the tracking gate, without the tracking finalizer
        manifest["spec"]["schedulingGates"] = [{"name": TRACKING_GATE}]
        del manifest["metadata"]["finalizers"]
    manifest["metadata"]["uid"] = uid or f"uid-{replica.role}-{replica.index}-{attempt}"
    manifest["metadata"]["creationTimestamp"] = created.isoformat()
    if deleting is not None:
        manifest["metadata"]["deletionTimestamp"] = deleting.isoformat()
    if node:
        manifest["spec"]["nodeName"] = node
    ready = "True" if phase == "Running" else "False"
    manifest["status"] = {"phase": phase, "conditions": [{"type": "Ready", "status": ready}], **status}
    if exit_code is not None:
        terminated = {"exitCode": exit_code, "reason": reason or ("Completed" if exit_code == 0 else "Error")}
        if message:
            terminated["message"] = message
        if finished is not None:
            terminated["finishedAt"] = finished.isoformat()
        manifest["status"]["containerStatuses"] = [{"name": CONTAINER_NAME, "state": {"terminated": terminated}}]
    elif reason:
        manifest["status"]["reason"] = reason
        if message:
            manifest["status"]["message"] = message
    return manifest


def pods_of(
    job: TrainingJob, attempt: int, overrides: dict[str, dict[str, Any]] | None = None, phase: str = "Running"
) -> list[Manifest]:
    """Every replica's pod in `phase`; `overrides` maps a pod name to pod() keyword arguments."""
    overrides = overrides or {}
    result = []
    for replica in replicas(job):
        name = replica.pod_name(str(job.metadata.name), attempt)
        fields = dict(overrides.get(name, {}))
        result.append(pod(job, replica, attempt, str(fields.pop("phase", phase)), **fields))
    return result


def without(pods: list[Manifest], *names: str) -> list[Manifest]:
    return [p for p in pods if p["metadata"]["name"] not in names]


def seen(pods: list[Manifest], *, service: bool = True, uid: str = JOB_UID, **extra: Any) -> Observed:
    """What the operator observes: the pods, the job's Service (when `service`), and e.g. progress=."""
    owned = {"metadata": {"ownerReferences": [{"uid": uid, "controller": True}]}}
    observed = observe(pods, CONTAINER_NAME, job_uid=uid, service=owned if service else None)
    return Observed(observed.pods, observed.service_exists, foreign=observed.foreign, **extra)


def step(
    job: TrainingJob,
    pods: list[Manifest],
    now: datetime = T0,
    *,
    service: bool = True,
    settings: Settings = SETTINGS,
    **extra: Any,
) -> tuple[TrainingJob, Plan]:
    """Plan once; return the job as it is with the planned status written and read back (as the operator reads it:
    records of pods that run or succeeded without their UIDs, model/tracked.py), and the plan."""
    result = plan(job, seen(pods, service=service, **extra), now, settings)
    return job.model_copy(update={"status": read_back(result.status)}), result


def read_back(status: TrainingJobStatus) -> TrainingJobStatus:
    """`status` as written to the apiserver and read again."""
    return TrainingJobStatus.model_validate(status.model_dump(mode="json", by_alias=True, exclude_none=True))


def running(**options: Any) -> TrainingJob:
    """A job (make_job options) whose first attempt is up: every pod created and running."""
    job, _ = step(make_job(**options), [])
    job, _ = step(job, pods_of(job, 1))
    return job


def created_names(result: Plan) -> list[str]:
    return [m["metadata"]["name"] for m in result.create if m["kind"] == "Pod"]


def condition(job: TrainingJob, kind: str) -> Any:
    """The job's condition of this type (a model), or None."""
    assert job.status is not None
    return next((c for c in job.status.conditions if c.type == kind), None)


# TrainingSweeps: a sweep over the digits trainer, its trials' jobs in any state, and one planning step.
SWEEP_UID = "sweep-uid"
SWEEP_PARAMETERS: list[Manifest] = [
    {"name": "lr", "path": "trainer.learningRate", "type": "Float", "min": 0.001, "max": 1.0, "log": True},
    {"name": "batch", "path": "trainer.batchSize", "type": "Categorical", "values": [16, 32, 64]},
]


def sweep_manifest(name: str = "sweep", *, parameters: list[Manifest] | None = None, **spec: Any) -> Manifest:
    """A TrainingSweep as a user submits it; `spec` keys (camelCase) are merged into its spec."""
    template = {"spec": job_manifest(trainer={"steps": 100, "evalEverySteps": 10})["spec"]}
    body: Manifest = {
        "template": template,
        "parameters": copy.deepcopy(parameters if parameters is not None else SWEEP_PARAMETERS),
        "objective": {"metric": "accuracy", "goal": "Maximize"},
        **copy.deepcopy(spec),
    }
    return {"apiVersion": API_VERSION, "kind": SWEEP_KIND, "metadata": {"name": name}, "spec": body}


def make_sweep(name: str = "sweep", *, uid: str = SWEEP_UID, **spec: Any) -> TrainingSweep:
    """A TrainingSweep model as the apiserver stores it."""
    manifest = sweep_manifest(name, **spec)
    manifest["metadata"].update(namespace="ns", uid=uid, generation=1, resourceVersion="1")
    return TrainingSweep.from_manifest(manifest)


def trial_job(
    sweep: TrainingSweep,
    number: int,
    phase: str = "Running",
    *,
    curve: dict[int, float] | None = None,
    final: float | None = None,
    owner: str = SWEEP_UID,
    suspended: bool = False,
) -> Child:
    """Trial `number`'s job as the store holds it: in `phase`, with evaluations of accuracy at the steps of `curve`
    and, once Succeeded, `final` as its final accuracy (none when unset)."""
    assert sweep.status is not None
    manifest = trial_manifest(sweep, sweep.status.trials[number])
    manifest["metadata"].update(uid=f"job-{number}", creationTimestamp=T0.isoformat())
    manifest["metadata"]["ownerReferences"][0]["uid"] = owner
    manifest["spec"].setdefault("runPolicy", {})["suspend"] = suspended
    evaluations = [{"step": s, "time": T0.isoformat(), "metrics": {"accuracy": v}} for s, v in (curve or {}).items()]
    status: Manifest = {"phase": phase, "history": {"evaluations": evaluations}}
    if final is not None:
        status["result"] = {"metrics": {"accuracy": final}, "metricsStep": 100}
    if phase == "Failed":
        status["conditions"] = [
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "worker-0 failed",
                "lastTransitionTime": T0.isoformat(),
            }
        ]
    return child({**manifest, "status": status})


def sweep_step(sweep: TrainingSweep, children: list[Child], now: datetime = T0) -> tuple[TrainingSweep, SweepPlan]:
    """Plan once; return the sweep with the planned status written, and the plan."""
    result = plan_sweep(sweep, {c.name: c for c in children}, now)
    return sweep.model_copy(update={"status": result.status}), result
