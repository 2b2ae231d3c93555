"""The operator's side of the operator <-> trainer contract: environment variable names and exit codes.

The trainer keeps its own copy (trainer-image/trainer/contract.py); neither side imports the other, and
tests/unit/test_contract.py checks that the two agree.
"""

from enum import IntEnum

# torch.distributed and torchrun variables, set on every rank so an unmodified torchrun script works.
MASTER_ADDR = "MASTER_ADDR"
MASTER_PORT = "MASTER_PORT"
WORLD_SIZE = "WORLD_SIZE"  # processes in the whole job: pods x processes per pod
RANK = "RANK"  # global rank of the pod's first process
LOCAL_RANK = "LOCAL_RANK"
NODE_RANK = "NODE_RANK"  # index of the pod among the job's DDP pods
PET_NNODES = "PET_NNODES"
PET_NPROC_PER_NODE = "PET_NPROC_PER_NODE"
PET_NODE_RANK = "PET_NODE_RANK"
PET_MASTER_ADDR = "PET_MASTER_ADDR"
PET_MASTER_PORT = "PET_MASTER_PORT"

# TrainingJob variables.
JOB_NAME = "TJ_JOB_NAME"
NAMESPACE = "TJ_NAMESPACE"
ATTEMPT = "TJ_ATTEMPT"  # 1 for the first attempt, N+1 after N whole-gang restarts
ROLE = "TJ_ROLE"  # "worker" or "ps"
REPLICA_INDEX = "TJ_REPLICA_INDEX"  # index of the pod within its role
NUM_WORKERS = "TJ_NUM_WORKERS"  # worker pods
MIN_WORKERS = "TJ_MIN_WORKERS"  # parameter-server mode: the workers the job must not end without
NUM_PS = "TJ_NUM_PS"  # parameter-server pods (0 in DDP mode)
PS_ADDRS = "TJ_PS_ADDRS"  # comma-separated host:port of every parameter server, in index order
NPROC_PER_POD = "TJ_NPROC_PER_POD"
DESIRED_WORLD_SIZE = "TJ_DESIRED_WORLD_SIZE"  # the job's full world (replicas x nproc): WORLD_SIZE is less when shrunk
CHECKPOINT_DIR = "TJ_CHECKPOINT_DIR"
CHECKPOINT_EVERY_STEPS = "TJ_CHECKPOINT_EVERY_STEPS"
CHECKPOINT_PACING = "TJ_CHECKPOINT_PACING"  # checkpoint.everySteps Auto's inputs (children/pacing.py)
CHECKPOINT_REQUEST_FILE = "TJ_CHECKPOINT_REQUEST_FILE"  # set by rank 0's agent for its trainer: a checkpoint asked for
CHECKPOINT_EVERY_SECONDS = "TJ_CHECKPOINT_EVERY_SECONDS"
CHECKPOINT_KEEP = "TJ_CHECKPOINT_KEEP"
REMOVE_CHECKPOINTS = "TJ_REMOVE_CHECKPOINTS"  # JSON list of "<job>/<uid>": a sweep's finished trials' folders
TRAINER_CONFIG = "TJ_TRAINER_CONFIG"  # JSON of spec.trainer (camelCase keys), for the built-in trainer
PROGRESS_PORT = "TJ_PROGRESS_PORT"  # rank 0 serves GET /progress (JSON) and /metrics (Prometheus) here
PROGRESS_FILE = "TJ_PROGRESS_FILE"  # rank 0 also rewrites this JSON file atomically on every report
MASTER_WAIT_SECONDS = "TJ_MASTER_WAIT_SECONDS"  # how long non-zero ranks wait for rank 0's port to open
JOB_KEY_FILE = "TJ_JOB_KEY_FILE"  # the job's key (a mounted Secret): parameter-server messages are signed with it
PAUSE_AT_STEP = "TJ_PAUSE_AT_STEP"  # local mode's --kill: the rank stops itself (SIGSTOP) after that step
IN_PLACE = "TJ_IN_PLACE"  # "1": the trainer's agent restarts a failed DDP trainer in its pod on order (POST /attempt)
AGENT_PORT = "TJ_AGENT_PORT"  # every agent's HTTP port (default 29401): GET /ready; on rank 0 also /gang, POST /attempt
AGENT_COORDINATOR = "TJ_AGENT_COORDINATOR"  # host:port of rank 0's agent (default $MASTER_ADDR:$TJ_AGENT_PORT)
IN_PLACE_WAIT_SECONDS = "TJ_IN_PLACE_WAIT_SECONDS"  # how long a failed pod's agent waits for an order, then exits
INCARNATION = "TJ_INCARNATION"  # parameter-server worker: 1 for its pod's first trainer, N+1 after N restarts in place
AGENT_ID = "TJ_AGENT_ID"  # parameter-server worker: its pod agent's random id (the servers fence by id and incarnation)
LISTEN_ADDRESS = (
    "TJ_LISTEN_ADDRESS"  # where the trainer's servers listen: every interface in a pod; local mode's 127.0.0.1
)

ALL_VARIABLES = frozenset(value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str))

SWEEPER_FLAG = "--remove-checkpoints"  # `python -m trainer --remove-checkpoints <sweep>`: a sweep's sweeper


class ExitCode(IntEnum):
    """What a trainer's exit code means to the operator."""

    SUCCEEDED = 0
    RETRYABLE = 75  # a transient failure: restart from the newest checkpoint
    PERMANENT = 78  # bad configuration: restarting cannot help
    PREEMPTED = 79  # stopped by SIGTERM after writing a final checkpoint


ROLE_WORKER = "worker"
ROLE_PS = "ps"
