"""The TrainingJob SDK: submit, watch and manage TrainingJobs from Python, through the Kubernetes API (a
kubeconfig, or the pod's ServiceAccount) or the project's REST API (a URL and a token).

    from trainingjob_sdk import connect
    client = connect()                                   # ~/.kube/config, or TJCTL_SERVER + TJCTL_TOKEN
    job = client.create("examples/digits-ddp.yaml")      # a file, YAML text, a dict or a TrainingJob
    done = client.wait(job.metadata.name, timeout=600)   # JobFailed, JobFinished, WaitTimeout
    print(done.status.result.metrics)
"""

from trainingjob.model import Phase, TrainingJob, TrainingJobStatus
from trainingjob.model.sweep import TrainingSweep
from trainingjob_sdk.client import Client, Transport, connect, reached
from trainingjob_sdk.errors import (
    Conflict,
    FieldError,
    Forbidden,
    Invalid,
    JobFailed,
    JobFinished,
    NotConfigured,
    NotFound,
    TrainingJobError,
    Unauthorized,
    Unavailable,
    WaitTimeout,
)
from trainingjob_sdk.jobs import JobEvent
from trainingjob_sdk.kube import KubeJobs
from trainingjob_sdk.rest import RestJobs
from trainingjob_sdk.sweeps import Sweeps

__all__ = [
    "Client",
    "Conflict",
    "FieldError",
    "Forbidden",
    "Invalid",
    "JobEvent",
    "JobFailed",
    "JobFinished",
    "KubeJobs",
    "NotConfigured",
    "NotFound",
    "Phase",
    "RestJobs",
    "Sweeps",
    "TrainingJob",
    "TrainingJobError",
    "TrainingJobStatus",
    "TrainingSweep",
    "Transport",
    "Unauthorized",
    "Unavailable",
    "WaitTimeout",
    "connect",
    "reached",
]
