"""Parameter-server workers fenced by incarnation (trainer.ps_fence): a server admits a worker's newer incarnation
or another agent's (a replacement pod), refuses an older incarnation of the same agent, and refuses every message
of a connection whose incarnation is no longer the worker's newest."""

import pytest

from trainer.ps_fence import Fence, Incarnation, hello_message, said
from trainer.ps_wire import ProtocolError

pytestmark = pytest.mark.fast

A1, A2, B1, NONE = Incarnation("a", 1), Incarnation("a", 2), Incarnation("b", 1), Incarnation()


@pytest.mark.parametrize(
    ("hellos", "admitted"),
    [
        pytest.param([A1, A2], [False, True], id="restart-in-place"),
        pytest.param([A1, A1], [False, False], id="second-connection-of-the-same-run"),
        pytest.param([A2, A1], [False, None], id="older-incarnation-refused"),
        pytest.param([A2, B1], [False, True], id="replacement-pod-takes-over"),
        pytest.param([NONE, NONE], [False, False], id="no-agent-as-before"),
        pytest.param([NONE, A1, NONE], [False, True, True], id="no-agent-is-never-fenced"),
    ],
)
def test_hellos(hellos: list[Incarnation], admitted: list[bool | None]) -> None:
    fence, seen = Fence(), list[bool | None]()
    for incarnation in hellos:
        try:
            seen.append(fence.admit(1, incarnation))
        except ProtocolError:
            seen.append(None)
    assert seen == admitted


def test_an_older_connection_is_refused_once_a_newer_incarnation_said_hello() -> None:
    fence = Fence()
    fence.admit(1, A1)
    fence.check(1, A1)
    fence.admit(0, B1)  # another worker's changes nothing for worker 1
    fence.check(1, A1)
    fence.admit(1, A2)
    fence.check(1, A2)
    with pytest.raises(ProtocolError, match="incarnation 1 of agent a is fenced off: incarnation 2 of agent a"):
        fence.check(1, A1)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param(hello_message(1, "", 7), NONE, id="no-agent-says-nothing"),
        pytest.param(hello_message(1, "a", 2), A2, id="agent"),
    ],
)
def test_what_a_hello_says(message: dict[str, object], expected: Incarnation) -> None:
    assert said(message) == expected


@pytest.mark.parametrize(
    "message",
    [
        pytest.param({"agent": 5}, id="agent-not-a-string"),
        pytest.param({"agent": "x" * 65}, id="agent-too-long"),
        pytest.param({"agent": "a", "incarnation": 0}, id="incarnation-0"),
        pytest.param({"agent": "a", "incarnation": "2"}, id="incarnation-not-an-integer"),
    ],
)
def test_a_malformed_hello_is_refused(message: dict[str, object]) -> None:
    with pytest.raises(ProtocolError):
        said(message)
