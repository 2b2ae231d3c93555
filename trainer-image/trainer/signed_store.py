"""The c10d store with signed values: what one rank sets, the others take only if it carries the job key's tag.

DDP's ranks meet through rank 0's TCPStore: each writes where it can be reached (gloo) or the communicator's id
(NCCL), and the others read it. PyTorch does not authenticate the store: any client that reaches the port may
write any key. Wrapped here, every value set is followed by HMAC-SHA256(store key, attempt | key | value), where
the store key is derived from the job key (the Secret the operator mounts in every pod). A value a stranger wrote,
or one copied from another key or another attempt, fails its tag on `get` and the rank stops with a retryable
error naming the key: the rendezvous fails instead of connecting a rank to the stranger.

What it cannot do: `add` counters (the barriers') are incremented by the server and cannot be signed, and a
stranger can still delete or overwrite keys, so one inside the job's NetworkPolicy can stall a rendezvous, not
steer it.
"""

import hashlib
import hmac
from datetime import timedelta
from typing import Any

from torch._C._distributed_c10d import Store

TAG_BYTES = 32
_STORE_LABEL = b"trainingjob c10d store v1"


class ForgedStoreValueError(RuntimeError):
    """A value in the store that no holder of the job key wrote there, for this key and attempt."""


def store_key(job_key: bytes) -> bytes:
    """The key the store's tags are made with: the job key's, for this use only."""
    return hmac.new(job_key, _STORE_LABEL, hashlib.sha256).digest()


class SignedStore(Store):
    """`inner` with every value tagged on the way in and checked on the way out; counters pass through."""

    def __init__(self, inner: Store, job_key: bytes, attempt: int) -> None:
        super().__init__()
        # Typed loosely: the bindings take bytes values where their stubs say str.
        self._inner: Any = inner
        self._key, self._scope = store_key(job_key), f"attempt-{attempt}".encode()

    def _tag(self, key: str, value: bytes) -> bytes:
        message = b"\0".join((self._scope, key.encode(), value))
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def _signed(self, key: str, value: str | bytes) -> bytes:
        data = value.encode() if isinstance(value, str) else bytes(value)
        return data + self._tag(key, data)

    def _checked(self, key: str, raw: bytes) -> bytes:
        data, tag = raw[:-TAG_BYTES], raw[-TAG_BYTES:]
        if len(raw) < TAG_BYTES or not hmac.compare_digest(tag, self._tag(key, data)):
            raise ForgedStoreValueError(f"the rendezvous store's value of {key!r} is not signed with the job key")
        return data

    def set(self, key: str, value: str | bytes) -> None:
        self._inner.set(key, self._signed(key, value))

    def get(self, key: str) -> bytes:
        return self._checked(key, bytes(self._inner.get(key)))

    def compare_set(self, key: str, expected: str | bytes, desired: str | bytes) -> bytes:
        """Tags are deterministic, so the expected value's signed form is what the store holds."""
        signed_expected = self._signed(key, expected) if expected else b""
        current = self._inner.compare_set(key, signed_expected, self._signed(key, desired))
        return self._checked(key, bytes(current)) if current else b""

    def add(self, key: str, amount: int) -> int:
        return int(self._inner.add(key, amount))

    def wait(self, keys: list[str], timeout: timedelta | None = None) -> None:
        if timeout is None:
            self._inner.wait(keys)
        else:
            self._inner.wait(keys, timeout)

    def check(self, keys: list[str]) -> bool:
        return bool(self._inner.check(keys))

    def delete_key(self, key: str) -> bool:
        return bool(self._inner.delete_key(key))

    def num_keys(self) -> int:
        return int(self._inner.num_keys())

    def set_timeout(self, timeout: timedelta) -> None:
        self._inner.set_timeout(timeout)
