"""The trainer's reading of the operator's environment, and how local ranks' exit codes combine."""

import pytest

from trainer.contract import ExitCode
from trainer.env import read_env
from trainer.failures import ConfigError, combine_exit_codes
from trainer.launcher import local_rank_env

pytestmark = pytest.mark.fast


def test_ranks_follow_node_rank_and_local_rank() -> None:
    pod = {"NODE_RANK": "1", "TJ_NPROC_PER_POD": "2", "WORLD_SIZE": "4", "RANK": "2", "MASTER_ADDR": "m"}
    env = read_env(pod)
    children = [local_rank_env(env, pod, local) for local in range(2)]
    assert [(child["RANK"], child["LOCAL_RANK"], child["WORLD_SIZE"]) for child in children] == [
        ("2", "0", "4"),
        ("3", "1", "4"),
    ]
    assert read_env(children[1]).rank == 3


def test_torchrun_variables_are_enough() -> None:
    env = read_env({"PET_NNODES": "2", "PET_NPROC_PER_NODE": "3", "PET_NODE_RANK": "1", "PET_MASTER_PORT": "1"})
    assert (env.world_size, env.rank, env.master_port) == (6, 3, 1)


@pytest.mark.parametrize(
    ("variables", "desired"),
    [({"WORLD_SIZE": "4"}, 4), ({"WORLD_SIZE": "2", "TJ_DESIRED_WORLD_SIZE": "4"}, 4)],
    ids=["the-world-unless-told", "an-elastic-job-shrunk"],
)
def test_the_desired_world_size_is_the_jobs_full_size(variables: dict[str, str], desired: int) -> None:
    env = read_env(variables)
    assert (env.desired_world_size, env.world_size) == (desired, int(variables["WORLD_SIZE"]))


@pytest.mark.parametrize(
    ("variables", "field"),
    [
        ({"TJ_ROLE": "chief"}, "TJ_ROLE"),
        ({"TJ_NPROC_PER_POD": "0"}, "TJ_NPROC_PER_POD"),
        ({"TJ_NUM_PS": "2", "TJ_PS_ADDRS": "a:1"}, "TJ_PS_ADDRS"),
        ({"TJ_NUM_PS": "1", "TJ_PS_ADDRS": "a"}, "TJ_PS_ADDRS"),
        ({"TJ_CHECKPOINT_EVERY_SECONDS": "-1"}, "TJ_CHECKPOINT_EVERY_SECONDS"),
        ({"NODE_RANK": "2", "WORLD_SIZE": "2"}, "WORLD_SIZE"),
        ({"TJ_NUM_PS": "1", "TJ_PS_ADDRS": "a:1"}, "TJ_JOB_KEY_FILE"),
        ({"TJ_ROLE": "ps", "TJ_PS_ADDRS": "a:1", "TJ_JOB_KEY_FILE": " "}, "TJ_JOB_KEY_FILE"),
        ({"WORLD_SIZE": "2", "TJ_DESIRED_WORLD_SIZE": "1"}, "TJ_DESIRED_WORLD_SIZE"),
    ],
    ids=[
        "role",
        "nproc",
        "ps-count",
        "ps-port",
        "seconds",
        "rank-outside-world",
        "ps-worker-key",
        "ps-key",
        "desired-world-below-world",
    ],
)
def test_bad_variables_are_named(variables: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read_env(variables)
    assert caught.value.field == field


def test_the_job_key_file_is_read_and_only_parameter_server_jobs_need_it() -> None:
    ps = read_env({"TJ_NUM_PS": "1", "TJ_PS_ADDRS": "a:1", "TJ_JOB_KEY_FILE": "/keys/job"})
    assert str(ps.job_key_file) == "/keys/job"
    assert read_env({"WORLD_SIZE": "2"}).job_key_file is None


@pytest.mark.parametrize(
    ("codes", "preempted", "combined"),
    [
        ([0, 0], False, ExitCode.SUCCEEDED),
        ([79, 79], True, ExitCode.PREEMPTED),
        ([79, -9], True, ExitCode.RETRYABLE),
        ([0, 1], False, ExitCode.RETRYABLE),
        ([78, -15], False, ExitCode.PERMANENT),
    ],
    ids=["all-done", "preempted", "killed-while-preempting", "crash", "config-wins"],
)
def test_combine_exit_codes(codes: list[int], preempted: bool, combined: ExitCode) -> None:
    assert combine_exit_codes(codes, preempted) == combined
