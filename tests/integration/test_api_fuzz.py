"""Fuzz every operation of the REST API's OpenAPI document with schemathesis: no input makes it answer 5xx."""

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from tests.integration.test_api import World, admin, api_server, world  # noqa: F401  (fixtures)

pytestmark = pytest.mark.envtest

EXAMPLES_PER_OPERATION = 25
# Streams never end by themselves; their behaviour is tested in test_api.py.
STREAMS = ("/watch", "/logs")


def test_no_input_makes_the_api_fail(world: World) -> None:  # noqa: F811
    document = world.writer.get("/openapi.json").json()
    schema = schemathesis.openapi.from_dict(document)
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    operations = [operation for operation in operations if not operation.path.endswith(STREAMS)]
    assert len(operations) >= 9
    token = world.writer.headers["Authorization"]
    for operation in operations:
        check(operation, str(world.writer.base_url).rstrip("/"), token)


def check(operation: Any, base_url: str, token: str) -> None:
    @given(case=operation.as_strategy(), authorized=st.booleans())
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any, authorized: bool) -> None:
        headers = {"Authorization": token} if authorized else {}
        case.call_and_validate(base_url=base_url, headers=headers, checks=[not_a_server_error], timeout=10)

    run()
