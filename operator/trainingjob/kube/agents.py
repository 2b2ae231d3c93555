"""Talking to rank 0's agent (children/agent.py): its account of the gang, read like its progress (bounded in
bytes and in time: a pod is untrusted), and the signed order to run an attempt. Also the operator's key, from
which every job's key is derived."""

import logging
import secrets
from pathlib import Path

from trainingjob.children.agent import (
    AGENT_PORT,
    GANG_PATH,
    MAX_GANG_BYTES,
    ORDER_PATH,
    SIGNATURE_HEADER,
    Gang,
    order_body,
    parse_gang,
    signature,
)
from trainingjob.kube.pod_http import exchange
from trainingjob.kube.ports import Manifest
from trainingjob.kube.progress import PROGRESS_SECONDS, read_bounded

log = logging.getLogger(__name__)
MIN_KEY_BYTES = 16
ORDER_SECONDS = 2.0


class OperatorKeyError(ValueError):
    """The operator's key file is missing, unreadable or too short."""


def operator_key(path: str) -> bytes:
    """The key in `path`; a fresh random one when `path` is empty (then only jobs started by this process can be
    told to restart in place)."""
    if not path:
        log.warning("no keyFile: drawing an operator key; jobs started before a restart re-create pods to restart")
        return secrets.token_bytes(32)
    try:
        key = Path(path).read_bytes().strip()
    except OSError as error:
        raise OperatorKeyError(f"keyFile {path}: {error.strerror}") from None
    if len(key) < MIN_KEY_BYTES:
        raise OperatorKeyError(f"keyFile {path}: {len(key)} bytes, at least {MIN_KEY_BYTES} needed")
    return key


def pod_address(pod: Manifest) -> str | None:
    """The pod's IP, where its agent listens on AGENT_PORT."""
    address = (pod.get("status") or {}).get("podIP")
    return address if isinstance(address, str) and address else None


def read_gang(address: str | None, port: int = AGENT_PORT) -> Gang | None:
    """Rank 0's agent's account of the gang, if it answers in time with something well-formed."""
    if address is None:
        return None
    body = read_bounded(address, port, GANG_PATH, MAX_GANG_BYTES, PROGRESS_SECONDS)
    return parse_gang(body) if body is not None else None


def send_order(
    address: str | None,
    key: bytes,
    attempt: int,
    port: int = AGENT_PORT,
    *,
    pacing: str | None = None,
    checkpoint_after: int | None = None,
) -> bool:
    """POST the signed order to run `attempt` (or, with `checkpoint_after`, to checkpoint the running one) to rank
    0's agent; True when it answered 200 in time."""
    if address is None:
        return False
    body = order_body(attempt, pacing, checkpoint_after)
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: signature(key, "POST", ORDER_PATH, body),
    }
    answer = exchange(address, port, "POST", ORDER_PATH, limit=1024, seconds=ORDER_SECONDS, body=body, headers=headers)
    if answer is None:
        log.warning("rank 0's agent at %s did not answer the order to run attempt %d in time", address, attempt)
        return False
    if answer.status != 200:
        log.warning(
            "rank 0's agent at %s refused the order to run attempt %d: HTTP %d", address, attempt, answer.status
        )
    return answer.status == 200
