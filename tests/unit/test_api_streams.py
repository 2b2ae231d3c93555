"""The bound on followed log streams, and how an unreachable Kubernetes is put to the caller."""

import httpx
import pytest
import urllib3
from testbed.processes import free_port

from trainingjob_api.logs import StreamSlots
from trainingjob_api.problems import ApiError, unreachable

pytestmark = pytest.mark.fast


def refusal(slots: StreamSlots, caller: str) -> str:
    with pytest.raises(ApiError) as raised:
        slots.take(caller)
    assert raised.value.problem.status == 429
    return raised.value.problem.message


def test_each_caller_and_all_callers_are_bounded() -> None:
    slots = StreamSlots(per_caller=2, total=3)
    alice = [slots.take("alice"), slots.take("alice")]
    assert 'user "alice" holds 2 streams (followed logs, watches) already' in refusal(slots, "alice")
    bob = slots.take("bob")
    assert "3 streams (followed logs, watches) are open on this server already" in refusal(slots, "carol")
    assert slots.open == 3
    bob()
    carol = slots.take("carol")
    alice[0]()
    alice[0]()  # a release is counted once, however often it is called
    assert slots.open == 2
    alice.append(slots.take("alice"))
    assert 'user "alice"' in refusal(slots, "alice")
    for release in [*alice, carol]:
        release()
    assert slots.open == 0


def test_a_closed_port_is_503_cannot_connect() -> None:
    url = f"http://127.0.0.1:{free_port()}/readyz"
    with pytest.raises(urllib3.exceptions.HTTPError) as by_urllib3:
        urllib3.PoolManager().request("GET", url, retries=urllib3.Retry(0))
    with pytest.raises(httpx.TransportError) as by_httpx:
        httpx.get(url)
    for error in (by_urllib3.value, by_httpx.value):
        problem = unreachable(error).problem
        assert problem.status == 503
        assert problem.message == "the Kubernetes API server is unreachable: cannot connect (Connection refused)"
