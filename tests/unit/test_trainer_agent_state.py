"""The coordinator's gang state: attempts only move forward, replays change nothing, the first failure fails the
attempt, long polls answer on news, and the signature covers method, target and body."""

import threading

import pytest

from trainer.agent_auth import sign, signed_bytes, verify
from trainer.agent_state import FAILED, MAX_FAILURES, RUNNING, STARTING, SUCCEEDED, GangState

pytestmark = pytest.mark.fast

KEY = b"k" * 32


class Clock:
    """A settable clock for `since` and failure times."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_gang_runs_once_every_pod_started_each_counted_once() -> None:
    clock = Clock()
    gang = GangState(attempt=1, pods=2, clock=clock)
    clock.now = 1005.0
    assert gang.report(0, 1, "started") and gang.report(0, 1, "started")
    assert gang.snapshot()["state"] == STARTING and gang.snapshot()["running"] == 1
    assert gang.report(1, 1, "started")
    assert gang.snapshot() == {
        "attempt": 1,
        "state": RUNNING,
        "since": 1005.0,
        "pods": 2,
        "running": 2,
        "failures": [],
        "ordered": 1,
    }


def test_the_first_failure_fails_the_attempt_and_later_ones_are_listed() -> None:
    clock = Clock()
    gang = GangState(attempt=3, pods=12, clock=clock)
    assert not gang.report(1, 2, "failed", 137)  # another attempt's news: ignored
    assert gang.is_ready()
    assert gang.report(1, 3, "failed", 137)
    clock.now = 1001.0
    for rank in [1, *range(2, 12)]:
        gang.report(rank, 3, "failed", 75)
    snapshot = gang.snapshot()
    assert snapshot["state"] == FAILED and snapshot["since"] == 1000.0
    assert snapshot["failures"][0] == {"rank": 1, "exitCode": 137, "time": 1000.0}
    assert [failure["rank"] for failure in snapshot["failures"]] == list(range(1, 1 + MAX_FAILURES))
    assert gang.has_failed(3) and not gang.has_failed(2)
    assert not gang.is_ready()


def test_an_order_is_recorded_then_begun_and_replays_change_nothing() -> None:
    gang = GangState(attempt=1, pods=2)
    gang.report(1, 1, "failed", 137)
    assert gang.order(2)
    assert gang.is_ready()  # a newer attempt is ordered: the failure is being dealt with
    assert not gang.order(2) and not gang.order(1)
    assert (gang.attempt, gang.ordered) == (1, 2)
    gang.begin(2)
    snapshot = gang.snapshot()
    assert (snapshot["attempt"], snapshot["state"], snapshot["running"], snapshot["failures"]) == (2, STARTING, 0, [])
    gang.begin(2)
    gang.begin(1)
    assert not gang.order(2)
    assert gang.snapshot() == snapshot
    assert not gang.report(1, 1, "failed", 1)  # a late report of attempt 1


def test_success_needs_every_pod_and_is_not_undone() -> None:
    gang = GangState(attempt=1, pods=2)
    gang.report(0, 1, "succeeded")
    assert gang.snapshot()["state"] == STARTING
    gang.report(1, 1, "succeeded")
    gang.report(1, 1, "failed", 1)
    assert gang.snapshot()["state"] == SUCCEEDED and gang.is_ready()


@pytest.mark.parametrize(
    ("rank", "event"), [(2, "failed"), (-1, "failed"), (0, "exploded")], ids=["rank-too-big", "negative", "event"]
)
def test_reports_about_no_rank_or_no_event_are_ignored(rank: int, event: str) -> None:
    gang = GangState(attempt=1, pods=2)
    assert not gang.report(rank, 1, event, 1)
    assert gang.snapshot()["state"] == STARTING


def test_a_long_poll_answers_on_a_failure_or_a_newer_attempt_not_before() -> None:
    gang = GangState(attempt=1, pods=2)
    assert gang.wait_next(1, False, timeout=0.05) == {"attempt": 1, "state": STARTING}
    answers: list[dict[str, object]] = []
    waiter = threading.Thread(target=lambda: answers.append(gang.wait_next(1, False, timeout=30)))
    waiter.start()
    gang.report(0, 1, "failed", 75)
    waiter.join(timeout=30)
    assert answers == [{"attempt": 1, "state": FAILED}]
    assert gang.wait_next(1, True, timeout=0.05) == {"attempt": 1, "state": FAILED}  # known: waits out the timeout
    waiter = threading.Thread(target=lambda: answers.append(gang.wait_next(1, True, timeout=30)))
    waiter.start()
    gang.order(2)
    assert not gang.wait_begun(2, timeout=0.01)
    gang.begin(2)
    waiter.join(timeout=30)
    assert answers[-1] == {"attempt": 2, "state": STARTING}
    assert gang.wait_begun(2, timeout=0.01)


def test_closing_answers_every_long_poll() -> None:
    gang = GangState(attempt=1, pods=2)
    answers: list[dict[str, object]] = []
    waiter = threading.Thread(target=lambda: answers.append(gang.wait_next(1, False, timeout=30)))
    waiter.start()
    gang.close()
    waiter.join(timeout=30)
    assert answers == [{"attempt": 1, "state": STARTING}]


def test_the_signature_covers_method_target_and_body() -> None:
    body = b'{"attempt": 2}'
    assert signed_bytes("post", "/attempt", body) == b'POST\n/attempt\n{"attempt": 2}'
    signature = sign(KEY, "POST", "/attempt", body)
    # The same as `printf 'POST\n/attempt\n{"attempt": 2}' | openssl dgst -sha256 -hmac kkkk...` (32 k's): the bytes
    # the operator's side must sign.
    assert signature == "65ece3b46151698db4a61c00163277210e5639ace44fda2ebc8f53f5d1e0de3c"
    assert verify(KEY, "POST", "/attempt", body, signature)
    assert verify(KEY, "POST", "/attempt", body, signature.upper() + " ")
    assert not verify(KEY, "POST", "/attempt", b'{"attempt": 3}', signature)
    assert not verify(KEY, "POST", "/report", body, signature)
    assert not verify(KEY, "GET", "/attempt", body, signature)
    assert not verify(b"x" * 32, "POST", "/attempt", body, signature)
    assert not verify(KEY, "POST", "/attempt", body, None)
    assert not verify(KEY, "POST", "/attempt", body, "")
    assert not verify(KEY, "POST", "/attempt", body, "é" * 64)
