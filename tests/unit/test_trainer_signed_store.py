"""The rendezvous store's signed values (trainer/signed_store.py), on a real TCPStore in this process: what a rank
with the job key sets, another rank with it reads back; what a stranger wrote, or a value moved to another key or
another attempt, or signed with another job's key, is refused naming the key."""

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from torch._C._distributed_c10d import PrefixStore, Store, TCPStore

from trainer.signed_store import ForgedStoreValueError, SignedStore

pytestmark = pytest.mark.fast
KEY, OTHER_KEY = b"k" * 32, b"o" * 32
TIMEOUT = timedelta(seconds=10)


@pytest.fixture
def server() -> TCPStore:
    return TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=TIMEOUT, wait_for_workers=False, multi_tenant=True)


def client(server: TCPStore) -> Any:
    """A plain client of the store, as a stranger would be (typed loosely: it takes bytes where stubs say str)."""
    return TCPStore("127.0.0.1", server.port, 1, is_master=False, timeout=TIMEOUT)


def rank(server: TCPStore, key: bytes = KEY, attempt: int = 1) -> SignedStore:
    return SignedStore(PrefixStore(f"attempt-{attempt}", client(server)), key, attempt)


def test_a_value_set_by_one_rank_reads_back_whole_at_another(server: TCPStore) -> None:
    rank(server).set("0//cpu//0/0", b"\x00address\xff")
    assert rank(server).get("0//cpu//0/0") == b"\x00address\xff"
    rank(server).set("text", "a string")
    assert rank(server).get("text") == b"a string"


def _stranger_writes(server: TCPStore) -> None:
    client(server).set("attempt-1/0//cpu//0/0", b"stranger's address")


def _moved_from_another_key(server: TCPStore) -> None:
    rank(server).set("0//cpu//0/1", b"rank 1's address")
    raw = client(server).get("attempt-1/0//cpu//0/1")
    client(server).set("attempt-1/0//cpu//0/0", raw)


def _replayed_from_another_attempt(server: TCPStore) -> None:
    rank(server, attempt=0).set("0//cpu//0/0", b"attempt 0's address")
    client(server).set("attempt-1/0//cpu//0/0", client(server).get("attempt-0/0//cpu//0/0"))


def _another_jobs_key(server: TCPStore) -> None:
    rank(server, key=OTHER_KEY).set("0//cpu//0/0", b"another job's address")


def _too_short(server: TCPStore) -> None:
    client(server).set("attempt-1/0//cpu//0/0", b"x")


@pytest.mark.parametrize(
    "forge",
    [_stranger_writes, _moved_from_another_key, _replayed_from_another_attempt, _another_jobs_key, _too_short],
    ids=["stranger", "moved-key", "other-attempt", "other-job-key", "shorter-than-a-tag"],
)
def test_a_value_not_signed_for_this_key_and_attempt_is_refused(
    server: TCPStore, forge: Callable[[TCPStore], None]
) -> None:
    forge(server)
    with pytest.raises(ForgedStoreValueError, match="'0//cpu//0/0'"):
        rank(server).get("0//cpu//0/0")


def test_compare_set_counters_and_waits_pass_through(server: TCPStore) -> None:
    store: Store = rank(server)
    assert store.compare_set("leader", "", "rank-0") == b"rank-0"
    assert store.compare_set("leader", "rank-3", "rank-1") == b"rank-0"  # not what it holds: unchanged
    assert store.compare_set("leader", "rank-0", "rank-1") == b"rank-1"
    assert rank(server).get("leader") == b"rank-1"
    assert store.add("arrived", 1) == 1 and rank(server).add("arrived", 1) == 2
    store.wait(["leader"], TIMEOUT)
    assert store.check(["leader"]) and not store.check(["nobody"])
    assert store.delete_key("leader") and not store.check(["leader"])
