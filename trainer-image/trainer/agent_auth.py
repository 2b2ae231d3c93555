"""Signed orders and reports between the operator and the in-place agents (trainer.agent): HMAC-SHA256 under the
job key (the file at TJ_JOB_KEY_FILE, the Secret the operator mounts into every pod).

A signed request carries the header

    X-TJ-Signature: <64 lower-case hex digits>

the HMAC-SHA256, keyed with the job key's bytes exactly as the file holds them, of the byte string

    METHOD + b"\\n" + TARGET + b"\\n" + BODY

where METHOD is the request method in upper case ("POST"), TARGET the request target exactly as it is sent on the
request line (the path and any query string: "/attempt"), both ASCII, and BODY the request body's bytes exactly as
sent (no re-serialising: the signer signs the bytes it sends). For example, with the key b"k" * 32 the order
`POST /attempt` with the body `{"attempt": 2}` is signed
65ece3b46151698db4a61c00163277210e5639ace44fda2ebc8f53f5d1e0de3c, as
`printf 'POST\n/attempt\n{"attempt": 2}' | openssl dgst -sha256 -hmac <the key>` also says.

There is no timestamp or nonce: a replayed order or report is harmless, because every one of them names an attempt
and the coordinator only ever moves its attempt forward (an order for an attempt it has reached changes nothing, a
report about another attempt is ignored, a rank is counted once per attempt). The operator's side computes the same
bytes; it keeps its own copy of these few lines rather than importing the trainer.
"""

import hashlib
import hmac

SIGNATURE_HEADER = "X-TJ-Signature"


def signed_bytes(method: str, target: str, body: bytes) -> bytes:
    """The exact bytes a signature covers."""
    return method.upper().encode("ascii") + b"\n" + target.encode("ascii") + b"\n" + body


def sign(key: bytes, method: str, target: str, body: bytes) -> str:
    """The X-TJ-Signature value of one request."""
    return hmac.new(key, signed_bytes(method, target, body), hashlib.sha256).hexdigest()


def verify(key: bytes, method: str, target: str, body: bytes, signature: str | None) -> bool:
    """Whether `signature` (the header's value, None when absent) signs this request under `key`."""
    if not signature:
        return False
    try:
        expected = sign(key, method, target, body)
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(expected.encode(), signature.strip().lower().encode("ascii", errors="replace"))
