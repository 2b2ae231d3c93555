"""The trainer's side of the operator <-> trainer contract: environment variable names and exit codes.

The operator keeps its own copy (operator/trainingjob/children/contract.py); neither side imports the other, and
tests/unit/test_contract.py checks that the two agree.
"""

from enum import IntEnum

MASTER_ADDR = "MASTER_ADDR"
MASTER_PORT = "MASTER_PORT"
WORLD_SIZE = "WORLD_SIZE"
RANK = "RANK"
LOCAL_RANK = "LOCAL_RANK"
NODE_RANK = "NODE_RANK"
PET_NNODES = "PET_NNODES"
PET_NPROC_PER_NODE = "PET_NPROC_PER_NODE"
PET_NODE_RANK = "PET_NODE_RANK"
PET_MASTER_ADDR = "PET_MASTER_ADDR"
PET_MASTER_PORT = "PET_MASTER_PORT"

JOB_NAME = "TJ_JOB_NAME"
NAMESPACE = "TJ_NAMESPACE"
ATTEMPT = "TJ_ATTEMPT"
ROLE = "TJ_ROLE"
REPLICA_INDEX = "TJ_REPLICA_INDEX"
NUM_WORKERS = "TJ_NUM_WORKERS"
MIN_WORKERS = "TJ_MIN_WORKERS"  # parameter-server mode: the workers the job must not end without
NUM_PS = "TJ_NUM_PS"
PS_ADDRS = "TJ_PS_ADDRS"
NPROC_PER_POD = "TJ_NPROC_PER_POD"
DESIRED_WORLD_SIZE = "TJ_DESIRED_WORLD_SIZE"  # the job's full world (replicas x nproc): WORLD_SIZE is less when shrunk
CHECKPOINT_DIR = "TJ_CHECKPOINT_DIR"
CHECKPOINT_EVERY_STEPS = "TJ_CHECKPOINT_EVERY_STEPS"
CHECKPOINT_EVERY_SECONDS = "TJ_CHECKPOINT_EVERY_SECONDS"
CHECKPOINT_KEEP = "TJ_CHECKPOINT_KEEP"
REMOVE_CHECKPOINTS = "TJ_REMOVE_CHECKPOINTS"  # JSON list of "<job>/<uid>": a sweep's finished trials' folders
CHECKPOINT_PACING = "TJ_CHECKPOINT_PACING"  # JSON: what paces everySteps: Auto
CHECKPOINT_REQUEST_FILE = "TJ_CHECKPOINT_REQUEST_FILE"  # set by the agent: where it writes a checkpoint request
TRAINER_CONFIG = "TJ_TRAINER_CONFIG"
PROGRESS_PORT = "TJ_PROGRESS_PORT"
PROGRESS_FILE = "TJ_PROGRESS_FILE"
MASTER_WAIT_SECONDS = "TJ_MASTER_WAIT_SECONDS"
JOB_KEY_FILE = "TJ_JOB_KEY_FILE"  # the job's key (a mounted Secret): parameter-server messages are signed with it
PAUSE_AT_STEP = "TJ_PAUSE_AT_STEP"  # local mode's --kill: the rank stops itself (SIGSTOP) after that step
IN_PLACE = "TJ_IN_PLACE"  # "1": PID 1 is an agent that restarts a failed DDP trainer in the same pod when ordered to
AGENT_PORT = "TJ_AGENT_PORT"  # the agent's HTTP port (default 29401; 0: any free port, logged)
AGENT_COORDINATOR = "TJ_AGENT_COORDINATOR"  # host:port of rank 0's agent (default $MASTER_ADDR:$TJ_AGENT_PORT)
IN_PLACE_WAIT_SECONDS = "TJ_IN_PLACE_WAIT_SECONDS"  # how long a failed pod's agent waits for an order (default 120)
INCARNATION = "TJ_INCARNATION"  # parameter-server worker: 1 for its pod's first trainer, N+1 after N restarts in place
AGENT_ID = "TJ_AGENT_ID"  # parameter-server worker: its pod agent's random id (the servers fence by id and incarnation)
LISTEN_ADDRESS = (
    "TJ_LISTEN_ADDRESS"  # where the trainer's servers listen: every interface in a pod; local mode's 127.0.0.1
)

ALL_VARIABLES = frozenset(value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str))

SWEEPER_FLAG = "--remove-checkpoints"  # `python -m trainer --remove-checkpoints <sweep>`: a sweep's sweeper

ROLE_WORKER = "worker"
ROLE_PS = "ps"


class ExitCode(IntEnum):
    """The trainer's exit codes, as the operator classifies them."""

    SUCCEEDED = 0
    RETRYABLE = 75
    PERMANENT = 78
    PREEMPTED = 79
