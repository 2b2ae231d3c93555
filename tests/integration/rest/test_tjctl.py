"""tjctl through the REST API, as a ServiceAccount that may manage jobs in one namespace only."""

import json
from pathlib import Path

import pytest
from tests.e2e.test_local_mode import REPO, tjctl
from tests.support.rest_api import Api, World

pytestmark = pytest.mark.envtest


def test_tjctl_manages_jobs_through_the_rest_api(api_server: Api, world: World) -> None:
    token = str(world.writer.headers["Authorization"]).split()[1]
    rest = ("--server", api_server.url, "--token", token, "-n", world.home)
    example = str(REPO / "examples" / "digits-ddp.yaml")
    submitted = tjctl(*rest, "-o", "json", "submit", example)
    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)["metadata"]["namespace"] == world.home
    assert json.loads(tjctl(*rest, "-o", "json", "get", "digits-ddp").stdout)["spec"]["workers"]["replicas"] == 2
    assert json.loads(tjctl(*rest, "-o", "json", "suspend", "digits-ddp").stdout)["spec"]["runPolicy"]["suspend"]
    assert not json.loads(tjctl(*rest, "-o", "json", "resume", "digits-ddp").stdout)["spec"]["runPolicy"]["suspend"]
    elsewhere = tjctl("--server", api_server.url, "--token", token, "-n", world.other, "submit", example)
    assert elsewhere.returncode == 1 and "403" in elsewhere.stdout + elsewhere.stderr
    assert tjctl(*rest, "delete", "digits-ddp").returncode == 0
    missing = tjctl(*rest, "get", "digits-ddp")
    assert missing.returncode == 1 and "404" in missing.stdout + missing.stderr


def test_tjctl_refuses_a_server_without_a_token(tmp_path: Path) -> None:
    result = tjctl("--server", "http://127.0.0.1:9", "list")
    assert result.returncode == 2 and "--token" in result.stdout + result.stderr
