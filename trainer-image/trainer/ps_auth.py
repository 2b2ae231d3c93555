"""Authenticated parameter-server frames: HMAC-SHA256 under the job key, bound to one connection and position.

When a connection opens the worker sends a fresh random nonce and the server answers with its own: the only bytes
that ever go to a peer not yet proven to hold the key. The job key and both nonces give a session key, so each
side knows the session is new even if the other side is not genuine. Every frame is

    length (8 bytes) | head tag (32) | body tag (32) | payload (length bytes)

where head tag = HMAC(session key, direction | sequence number | "head" | length) and body tag = HMAC(session
key, direction | sequence number | "body" | payload). The head tag is checked, and the length against the
receiver's limit, before a single payload byte is read; the payload is decoded only once its tag matches. A frame
from another connection (other nonces), another position (sequence number) or the other direction never matches.
"""

import hashlib
import hmac
import secrets
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from trainer.contract import JOB_KEY_FILE
from trainer.failures import ConfigError

MIN_KEY_BYTES = 16
NONCE_BYTES = 32
HEADER = struct.Struct("!Q32s32s")
TO_SERVER, TO_CLIENT = b"worker->ps", b"ps->worker"
_SESSION_LABEL = b"trainingjob parameter-server session v1"

Payload = TypeVar("Payload", bytes, bytearray)


class AuthenticationError(ConnectionError):
    """The peer does not hold the job key, replayed or altered a frame, or sent one over the limit."""


def read_job_key(path: Path | None) -> bytes:
    """The job's key from the file the operator mounts; a missing, unreadable or short key is a ConfigError."""
    if path is None:
        raise ConfigError("environment", JOB_KEY_FILE, "is required in parameter-server mode")
    try:
        key = path.read_bytes()
    except OSError as error:
        raise ConfigError("environment", JOB_KEY_FILE, f"cannot read {path}: {error.strerror}") from None
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError("environment", JOB_KEY_FILE, f"{path} holds {len(key)} bytes, need at least {MIN_KEY_BYTES}")
    return key


def new_nonce() -> bytes:
    """This side's contribution to a fresh session."""
    return secrets.token_bytes(NONCE_BYTES)


@dataclass
class Session:
    """One connection's session key and sequence numbers, as seen from one side."""

    key: bytes = field(repr=False)
    sending: bytes
    receiving: bytes
    limit: int
    sent: int = 0
    received: int = 0
    _expected_body: bytes = field(default=b"", repr=False)

    @classmethod
    def start(cls, job_key: bytes, server_nonce: bytes, client_nonce: bytes, *, server: bool, limit: int) -> "Session":
        """The session both ends of one connection derive from the job key and the two nonces."""
        key = hmac.digest(job_key, _SESSION_LABEL + server_nonce + client_nonce, "sha256")
        sending, receiving = (TO_CLIENT, TO_SERVER) if server else (TO_SERVER, TO_CLIENT)
        return cls(key, sending, receiving, limit)

    def seal(self, payload: bytes) -> bytes:
        """The header that authenticates `payload` as this side's next frame."""
        head = self._tag(self.sending, self.sent, b"head", len(payload).to_bytes(8, "big"))
        body = self._tag(self.sending, self.sent, b"body", payload)
        self.sent += 1
        return HEADER.pack(len(payload), head, body)

    def open_header(self, header: bytes | bytearray) -> int:
        """The payload length the peer's next header announces, once its tag and the limit are checked."""
        length, head, body = HEADER.unpack(header)
        expected = self._tag(self.receiving, self.received, b"head", header[:8])
        if not hmac.compare_digest(head, expected):
            raise AuthenticationError("a frame header failed authentication")
        if length > self.limit:
            raise AuthenticationError(f"a frame of {length} bytes is over the {self.limit}-byte limit")
        self._expected_body = body
        return int(length)

    def open_body(self, payload: Payload) -> Payload:
        """`payload`, once it matches the tag of the header just opened."""
        expected = self._tag(self.receiving, self.received, b"body", payload)
        if not hmac.compare_digest(self._expected_body, expected):
            raise AuthenticationError("a frame body failed authentication")
        self.received += 1
        return payload

    def _tag(self, direction: bytes, sequence: int, part: bytes, data: bytes | bytearray) -> bytes:
        mac = hmac.new(self.key, direction + sequence.to_bytes(8, "big") + part, hashlib.sha256)
        mac.update(data)
        return mac.digest()
