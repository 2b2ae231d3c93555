"""The operator's order carries TJ_CHECKPOINT_PACING to rank 0's agent: a valid one reaches the next attempt's
child through its order line, a malformed one is refused (400, naming the field) and changes nothing."""

import contextlib
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from trainer.agent_http import AgentServer, Endpoints, request_json
from trainer.agent_procs import order_line
from trainer.agent_state import GangState
from trainer.spare import read_order

pytestmark = pytest.mark.fast

KEY = b"k" * 32
PACING = json.dumps(
    {"auto": True, "failures": 2, "runningSeconds": 60.0, "priorSeconds": 600.0, "minSeconds": 1.0, "maxSeconds": 9.0}
)


@contextlib.contextmanager
def coordinator() -> Iterator[tuple[tuple[str, int], GangState]]:
    """Rank 0's endpoint on a free loopback port; a wake begins what was ordered, as the agent's main loop would."""
    gang = GangState(attempt=1, pods=2)
    status = {"rank": 0, "attempt": 1, "child": 123, "spare": None, "waiting": False}
    endpoints = Endpoints(KEY, lambda: status, gang, lambda: gang.begin(gang.ordered), order_wait_seconds=5.0)
    server = AgentServer(0, endpoints, 8).start()
    try:
        yield ("127.0.0.1", server.port), gang
    finally:
        gang.close()
        server.stop()


def order(address: tuple[str, int], body: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
    return request_json(address, "POST", "/attempt", body=body, key=KEY)


def test_an_orders_pacing_is_kept_for_its_attempt_and_only_for_it() -> None:
    with coordinator() as (address, gang):
        status, body = order(address, {"attempt": 2, "checkpointPacing": PACING})
        assert status == 200 and body is not None and body["attempt"] == 2
        assert (gang.pacing_for(2), gang.pacing_for(1)) == (PACING, None)
        other = PACING.replace('"failures": 2', '"failures": 7')
        assert order(address, {"attempt": 2, "checkpointPacing": other})[0] == 200  # a replay: nothing changes
        assert gang.pacing_for(2) == PACING
        assert order(address, {"attempt": 3})[0] == 200  # an older operator's order: the pod's own variable stays
        assert (gang.attempt, gang.pacing_for(3), gang.pacing_for(2)) == (3, None, None)


@pytest.mark.parametrize(
    ("pacing", "named"),
    [
        pytest.param({"auto": True}, "'checkpointPacing' must be a JSON text", id="an-object-not-its-text"),
        pytest.param(PACING + " " * 1024, "at most 1024 bytes", id="over-1-KiB"),
        pytest.param("{not json", "field '(root)'", id="not-json"),
        pytest.param(PACING.replace('"minSeconds": 1.0', '"minSeconds": -1'), "field 'minSeconds'", id="negative"),
        pytest.param(PACING.replace('"failures": 2', '"failures": "2"'), "field 'failures'", id="wrong-type"),
        pytest.param(PACING.replace('"maxSeconds": 9.0', '"maxSeconds": 0.5'), "field 'minSeconds'", id="min>max"),
    ],
)
def test_a_malformed_pacing_is_refused_and_changes_nothing(pacing: object, named: str) -> None:
    with coordinator() as (address, gang):
        before = gang.snapshot()
        status, body = order(address, {"attempt": 2, "checkpointPacing": pacing})
        assert status == 400 and body is not None and named in body["error"], body
        assert (gang.snapshot(), gang.ordered, gang.pacing_for(2)) == (before, 1, None)
        assert order(address, {"attempt": 2, "checkpointPacing": PACING})[0] == 200  # the agent carries on
        assert (gang.attempt, gang.pacing_for(2)) == (2, PACING)


def test_the_order_line_hands_the_pacing_to_the_child() -> None:
    attempt, env = read_order(io.BytesIO(order_line(4, {"TJ_CHECKPOINT_PACING": PACING}))) or (0, {})
    assert (attempt, env) == (4, {"TJ_CHECKPOINT_PACING": PACING, "TJ_ATTEMPT": "4"})
