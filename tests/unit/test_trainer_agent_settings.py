"""The in-place agent's variables: on only for workers (DDP or parameter-server) with TJ_IN_PLACE=1, defaults
that find rank 0's agent, and a ConfigError naming a bad variable (the job key is required: orders are signed)."""

from pathlib import Path

import pytest

from trainer.agent import DEFAULT_PORT, DEFAULT_WAIT_SECONDS, is_enabled, read_settings
from trainer.env import read_env
from trainer.failures import ConfigError

pytestmark = pytest.mark.fast


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    """A DDP pod's variables (rank 1 of 2) with the agent on and a job key."""
    key = tmp_path / "job.key"
    key.write_bytes(b"k" * 32)
    return {
        "TJ_IN_PLACE": "1",
        "MASTER_ADDR": "job-worker-0.job",
        "WORLD_SIZE": "2",
        "RANK": "1",
        "NODE_RANK": "1",
        "TJ_NUM_WORKERS": "2",
        "TJ_JOB_KEY_FILE": str(key),
    }


def test_defaults_reach_rank_0s_agent_on_the_default_port(environ: dict[str, str]) -> None:
    settings = read_settings(environ, read_env(environ))
    assert settings.port == DEFAULT_PORT == 29401
    assert settings.coordinator == ("job-worker-0.job", DEFAULT_PORT)
    assert settings.wait_seconds == DEFAULT_WAIT_SECONDS == 120.0
    assert settings.key == b"k" * 32 and settings.warm_spare and settings.zygote


def test_the_variables_are_read(environ: dict[str, str]) -> None:
    environ |= {"TJ_AGENT_PORT": "0", "TJ_AGENT_COORDINATOR": "10.0.0.7:8000", "TJ_IN_PLACE_WAIT_SECONDS": "2.5"}
    settings = read_settings(environ, read_env(environ))
    assert (settings.port, settings.coordinator, settings.wait_seconds) == (0, ("10.0.0.7", 8000), 2.5)
    assert not read_settings(environ | {"TJ_TEST_NO_SPARE": "1"}, read_env(environ)).warm_spare
    assert not read_settings(environ | {"TJ_TEST_NO_ZYGOTE": "1"}, read_env(environ)).zygote


@pytest.mark.parametrize(
    ("changes", "variable"),
    [
        ({"TJ_AGENT_PORT": "http"}, "TJ_AGENT_PORT"),
        ({"TJ_AGENT_PORT": "70000"}, "TJ_AGENT_PORT"),
        ({"TJ_AGENT_PORT": "0"}, "TJ_AGENT_COORDINATOR"),
        ({"TJ_AGENT_COORDINATOR": "no-port"}, "TJ_AGENT_COORDINATOR"),
        ({"TJ_IN_PLACE_WAIT_SECONDS": "0"}, "TJ_IN_PLACE_WAIT_SECONDS"),
        ({"TJ_IN_PLACE_WAIT_SECONDS": "inf"}, "TJ_IN_PLACE_WAIT_SECONDS"),
        ({"TJ_IN_PLACE_WAIT_SECONDS": "soon"}, "TJ_IN_PLACE_WAIT_SECONDS"),
        ({"TJ_JOB_KEY_FILE": ""}, "TJ_JOB_KEY_FILE"),
        ({"TJ_JOB_KEY_FILE": "/nonexistent/job.key"}, "TJ_JOB_KEY_FILE"),
    ],
)
def test_a_bad_variable_is_a_config_error_naming_it(
    environ: dict[str, str], changes: dict[str, str], variable: str
) -> None:
    environ |= changes
    with pytest.raises(ConfigError) as raised:
        read_settings(environ, read_env(environ))
    assert raised.value.field == variable


def test_the_agent_is_on_only_for_workers_that_ask_for_it(environ: dict[str, str]) -> None:
    assert is_enabled(environ, read_env(environ))
    assert not is_enabled(environ | {"TJ_IN_PLACE": "0"}, read_env(environ))
    assert not is_enabled({k: v for k, v in environ.items() if k != "TJ_IN_PLACE"}, read_env(environ))
    ps_worker = environ | {"TJ_NUM_PS": "1", "TJ_PS_ADDRS": "ps-0:2222", "TJ_REPLICA_INDEX": "1"}
    assert is_enabled(ps_worker, read_env(ps_worker))  # a gang of one: it restarts in place
    server = ps_worker | {"TJ_ROLE": "ps", "TJ_REPLICA_INDEX": "0"}
    assert not is_enabled(server, read_env(server))  # its state is the model: replaced, never restarted in place


def test_a_parameter_server_worker_needs_no_coordinator(environ: dict[str, str]) -> None:
    ps_worker = environ | {"TJ_NUM_PS": "1", "TJ_PS_ADDRS": "ps-0:2222", "TJ_AGENT_PORT": "0", "TJ_INCARNATION": "3"}
    env = read_env(ps_worker)
    assert read_settings(ps_worker, env).port == 0 and env.incarnation == 3
