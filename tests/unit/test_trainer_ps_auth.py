"""Authenticated parameter-server frames, pure: keys, tampering, replays, limits, truncation."""

import asyncio
import secrets
from pathlib import Path
from unittest import mock

import pytest
import torch

from trainer import ps_wire
from trainer.failures import ConfigError
from trainer.ps_auth import HEADER, AuthenticationError, Session, new_nonce, read_job_key
from trainer.ps_wire import Message, decode, encode, read_message

pytestmark = pytest.mark.fast

KEY = secrets.token_bytes(32)
LIMIT = 1 << 16
MESSAGE: Message = {"op": "push", "worker": 1, "step": 3, "version": 2, "grads": {"w": torch.arange(4.0)}}


def connection(server_key: bytes = KEY, client_key: bytes = KEY, limit: int = LIMIT) -> tuple[Session, Session]:
    """Both ends of one connection: (server, worker)."""
    server_nonce, client_nonce = new_nonce(), new_nonce()
    server = Session.start(server_key, server_nonce, client_nonce, server=True, limit=limit)
    return server, Session.start(client_key, server_nonce, client_nonce, server=False, limit=limit)


def frame(sender: Session, message: Message = MESSAGE) -> bytes:
    payload = encode(message)
    return sender.seal(payload) + payload


def unframe(receiver: Session, data: bytes) -> Message:
    """What the receiver makes of `data`, the way ps_wire reads it: header first, then the payload."""
    length = receiver.open_header(data[: HEADER.size])
    return decode(receiver.open_body(data[HEADER.size : HEADER.size + length]))


def test_frames_round_trip_both_ways_in_order() -> None:
    server, worker = connection()
    for step in range(3):
        received = unframe(server, frame(worker, {**MESSAGE, "step": step}))
        assert received["step"] == step
        assert torch.equal(received["grads"]["w"], MESSAGE["grads"]["w"])
        assert unframe(worker, frame(server, {"op": "params", "version": step}))["version"] == step


def test_a_wrong_key_fails_at_the_header() -> None:
    server, worker = connection(client_key=secrets.token_bytes(32))
    with pytest.raises(AuthenticationError, match="header"):
        unframe(server, frame(worker))


@pytest.mark.parametrize(
    "position",
    [0, 7, 8, 39, 40, 71, HEADER.size, -1],
    ids=["length-high", "length-low", "head-tag", "head-tag-end", "body-tag", "body-tag-end", "payload", "last"],
)
def test_any_tampered_byte_is_refused_before_decoding(position: int) -> None:
    server, worker = connection()
    data = bytearray(frame(worker))
    data[position] ^= 0x01
    with mock.patch.object(torch, "load") as load, pytest.raises(AuthenticationError):
        unframe(server, bytes(data))
    load.assert_not_called()


def test_a_frame_replayed_on_its_own_connection_is_refused() -> None:
    server, worker = connection()
    recorded = frame(worker)
    unframe(server, recorded)
    with pytest.raises(AuthenticationError):
        unframe(server, recorded)


def test_a_frame_replayed_on_another_connection_is_refused() -> None:
    _, worker = connection()
    recorded = frame(worker)
    other_server, _ = connection()
    with pytest.raises(AuthenticationError):
        unframe(other_server, recorded)


def test_a_servers_frame_reflected_back_to_it_is_refused() -> None:
    server, _ = connection()
    with pytest.raises(AuthenticationError):
        unframe(server, frame(server))


def test_an_authentic_header_over_the_limit_is_refused() -> None:
    server, worker = connection(limit=100)
    with pytest.raises(AuthenticationError, match="over the 100-byte limit"):
        server.open_header(worker.seal(bytes(101)))


def read(data: bytes, session: Session) -> tuple[Message | Exception | None, int]:
    """What ps_wire.read_message makes of a stream holding `data` then EOF, and how many bytes it left unread."""

    async def run() -> tuple[Message | Exception | None, int]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        try:
            outcome: Message | Exception | None = await read_message(reader, session)
        except (ConnectionError, ValueError) as error:
            outcome = error
        return outcome, len(await reader.read())

    return asyncio.run(run())


@pytest.mark.parametrize("key", [KEY, secrets.token_bytes(32)], ids=["job-key", "wrong-key"])
def test_a_huge_length_header_is_refused_without_reading_the_payload(key: bytes) -> None:
    server, worker = connection(client_key=key)
    header = worker.seal(bytes(1 << 20))
    outcome, unread = read(header + bytes(1000), server)
    assert isinstance(outcome, AuthenticationError)
    assert unread == 1000


@pytest.mark.parametrize("cut", [1, HEADER.size - 1, HEADER.size, HEADER.size + 10], ids=str)
def test_a_truncated_frame_is_a_broken_connection(cut: int) -> None:
    server, worker = connection()
    outcome, _ = read(frame(worker)[:cut], server)
    assert isinstance(outcome, ConnectionError) and not isinstance(outcome, AuthenticationError)


def test_end_of_stream_between_frames_is_a_clean_close() -> None:
    server, worker = connection()
    assert read(b"", server) == (None, 0)
    message, unread = read(frame(worker), server)
    assert isinstance(message, dict) and message["step"] == 3 and unread == 0


def test_an_authentic_payload_that_is_no_message_is_a_protocol_error() -> None:
    server, worker = connection()
    payload = b"not a torch.save archive"
    with pytest.raises(ps_wire.ProtocolError):
        unframe(server, worker.seal(payload) + payload)


def test_the_frame_limit_follows_the_tensors() -> None:
    small = ps_wire.frame_limit({"w": torch.zeros(10)})
    big = ps_wire.frame_limit({"w": torch.zeros(1000)})
    assert big - small == 990 * 4
    assert len(encode({"op": "params", "params": {"w": torch.zeros(1000)}, "version": 1})) < big < 1 << 20


@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "cannot read"), (b"short", "holds 5 bytes")],
    ids=["missing", "short"],
)
def test_a_bad_key_file_is_a_config_error_naming_the_variable(
    tmp_path: Path, content: bytes | None, problem: str
) -> None:
    path = tmp_path / "key"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=problem) as caught:
        read_job_key(path)
    assert caught.value.field == "TJ_JOB_KEY_FILE"
    with pytest.raises(ConfigError):
        read_job_key(None)
    path.write_bytes(KEY)
    assert read_job_key(path) == KEY
