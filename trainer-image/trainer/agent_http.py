"""The in-place agent's HTTP endpoint (every pod, on TJ_AGENT_PORT) and the client its followers use.

Every agent: GET /ready (200 {"ready": true} while it lives) and GET /status (this pod: rank, attempt, the pids of
its trainer child and warm spare). Rank 0's agent, the coordinator, also serves (trainer.agent_state holds the gang):

- GET /gang: {"attempt", "state", "since", "pods", "running", "failures": [{"rank", "exitCode", "time"}], "ordered"};
  GET /ready answers 503 {"ready": false} while the current attempt has failed and no newer one was ordered.
- POST /attempt {"attempt": M, "checkpointPacing": "<TJ_CHECKPOINT_PACING's JSON text>"}, signed: the operator's
  order (checkpointPacing optional: older operators leave it out; attempt M's trainer gets it as its
  TJ_CHECKPOINT_PACING). 200 with the /gang body once the gang is on M (or at once, unchanged, when M is not newer);
  202 with it if the coordinator has not begun M within 10 s; 400 naming the field for a malformed one. With
  "checkpointAfter": S, it asks attempt M, the one running, for a checkpoint newer than step S instead (its rank 0
  reads the request at the ranks' next agreement: trainer.checkpoint_request): 200 with the /gang body and
  "checkpointAsked" (false when M is not the attempt running).
- POST /report {"rank", "attempt", "event": "started" | "failed" | "succeeded", "exitCode"}, signed: another
  agent's news. 200 {"accepted": true | false} (false: not about the current attempt).
- GET /next?after=N[&failed=1]: a long poll (20 s at most) answering {"attempt", "state"} once the gang is past
  attempt N or, unless failed=1 says the caller knows it already, attempt N has failed.

Signatures are trainer.agent_auth's; a missing or wrong one is 401 and changes nothing. Bounds: request bodies at
most 4 KiB (413), a 10 s socket timeout per request, at most `max_connections` requests in flight (the one over
answers 503 at once); a malformed request is a 4xx, never a crash. Rank 0's agent serves the others on paths a
follower answers 404.
"""

import contextlib
import http.client
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from trainer.agent_auth import SIGNATURE_HEADER, sign, verify
from trainer.agent_state import EVENTS, GangState
from trainer.bounded_http import REQUEST_TIMEOUT_SECONDS, BoundedHandler, BoundedHTTPServer, discard_pending
from trainer.checkpoint_pacing import MAX_BYTES, parse_pacing
from trainer.failures import ConfigError

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 4096
MAX_REPLY_BYTES = 64 << 10
LONG_POLL_SECONDS = 20.0
ORDER_WAIT_SECONDS = 10.0


@dataclass(frozen=True)
class Endpoints:
    """What the handlers serve: the job key, this pod's status, the gang (coordinator only), the main loop's wake."""

    key: bytes
    status: Callable[[], dict[str, Any]]
    gang: GangState | None
    wake: Callable[[], None]
    ask_checkpoint: Callable[[int, int], bool] = lambda attempt, after_step: False
    long_poll_seconds: float = LONG_POLL_SECONDS
    order_wait_seconds: float = ORDER_WAIT_SECONDS


class BadRequestError(Exception):
    """Answer with this status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _integer(data: dict[str, Any], name: str, minimum: int, default: int | None = None) -> int:
    value = data.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value < 1 << 31:
        raise BadRequestError(400, f"{name!r} must be an integer >= {minimum}")
    return value


def _pacing(data: dict[str, Any]) -> str | None:
    """An order's checkpointPacing: None when absent, else TJ_CHECKPOINT_PACING's text, checked as the trainer
    will read it (a malformed one would fail the next attempt: it is refused here instead, changing nothing)."""
    text = data.get("checkpointPacing")
    if text is None:
        return None
    if not isinstance(text, str) or len(text.encode()) > MAX_BYTES:
        raise BadRequestError(400, f"'checkpointPacing' must be a JSON text of at most {MAX_BYTES} bytes")
    try:
        parse_pacing(text)
    except ConfigError as error:
        raise BadRequestError(400, f"'checkpointPacing': field '{error.field}': {error.problem}") from None
    return text


class _Handler(BoundedHandler):
    server: "AgentServer"
    error_message_format = '{"error": %(code)d}'
    error_content_type = "application/json"

    def do_GET(self) -> None:
        self._answer(self._get)

    def do_POST(self) -> None:
        self._answer(self._post)

    def _answer(self, route: Callable[[str], tuple[int, dict[str, Any]]]) -> None:
        try:
            status, body = route(urlsplit(self.path).path)
        except BadRequestError as error:
            status, body = error.status, {"error": str(error)}
        except Exception:
            log.exception("agent endpoint: %s %s failed", self.command, self.path[:200])
            status, body = 500, {"error": "internal error"}
        data = json.dumps(body).encode()
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def _gang(self) -> GangState:
        gang = self.server.endpoints.gang
        if gang is None:
            raise BadRequestError(404, "not the coordinator: rank 0's agent is")
        return gang

    def _get(self, path: str) -> tuple[int, dict[str, Any]]:
        endpoints = self.server.endpoints
        if path == "/ready":
            ready = endpoints.gang is None or endpoints.gang.is_ready()
            return (200 if ready else 503), {"ready": ready}
        if path == "/status":
            return 200, endpoints.status()
        if path == "/gang":
            return 200, self._gang().snapshot()
        if path == "/next":
            gang = self._gang()
            query = parse_qs(urlsplit(self.path).query)
            after = query.get("after", [""])[-1]
            if not after.isdigit() or len(after) > 9:
                raise BadRequestError(400, "'after' must be an attempt number")
            known = query.get("failed", ["0"])[-1] == "1"
            return 200, gang.wait_next(int(after), known, endpoints.long_poll_seconds)
        raise BadRequestError(404, "no such path")

    def _post(self, path: str) -> tuple[int, dict[str, Any]]:
        if path not in ("/attempt", "/report"):
            raise BadRequestError(404, "no such path")
        gang = self._gang()
        data = self._signed_json()
        if path == "/attempt":
            attempt, pacing = _integer(data, "attempt", 1), _pacing(data)
            if "checkpointAfter" in data:  # the attempt running now saves a checkpoint newer than that step
                asked = self.server.endpoints.ask_checkpoint(attempt, _integer(data, "checkpointAfter", 0))
                return 200, gang.snapshot() | {"checkpointAsked": asked}
            if gang.order(attempt, pacing):
                log.info("ordered: attempt %d (signed order from %s)", attempt, self.client_address[0])
                self.server.endpoints.wake()
                begun = gang.wait_begun(attempt, self.server.endpoints.order_wait_seconds)
                return (200 if begun else 202), gang.snapshot()
            return 200, gang.snapshot()
        event = data.get("event")
        if event not in EVENTS:
            raise BadRequestError(400, f"'event' must be one of {', '.join(EVENTS)}")
        rank, attempt = _integer(data, "rank", 0), _integer(data, "attempt", 1)
        accepted = gang.report(rank, attempt, str(event), _integer(data, "exitCode", 0, default=0))
        if accepted:
            self.server.endpoints.wake()
        return 200, {"accepted": accepted}

    def _signed_json(self) -> dict[str, Any]:
        """The body, once its length is within bounds and its signature checks out, as a JSON object."""
        raw = self.headers.get("Content-Length")
        if raw is None:
            raise BadRequestError(411, "Content-Length is required")
        if not raw.strip().isdigit():
            raise BadRequestError(400, "bad Content-Length")
        length = int(raw)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            discard_pending(self.connection)
            raise BadRequestError(413, f"bodies are at most {MAX_BODY_BYTES} bytes")
        body = self.rfile.read(length)
        if len(body) != length:
            raise BadRequestError(400, "body shorter than its Content-Length")
        if not verify(self.server.endpoints.key, self.command, self.path, body, self.headers.get(SIGNATURE_HEADER)):
            log.warning("agent endpoint: %s %s with a missing or wrong signature", self.command, self.path[:200])
            raise BadRequestError(401, f"missing or wrong {SIGNATURE_HEADER}")
        try:
            data = json.loads(body)
        except ValueError:
            raise BadRequestError(400, "the body is not JSON") from None
        if not isinstance(data, dict):
            raise BadRequestError(400, "the body must be a JSON object")
        return data

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("agent endpoint: " + format, *args)


class AgentServer(BoundedHTTPServer):
    """The agent's endpoint: a BoundedHTTPServer serving `endpoints`."""

    def __init__(self, port: int, endpoints: Endpoints, max_connections: int) -> None:
        self.endpoints = endpoints
        super().__init__(port, _Handler, max_connections)

    def start(self) -> "AgentServer":
        """Serve in a background thread."""
        threading.Thread(target=self.serve_forever, args=(0.1,), name="agent-http", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port."""
        self.shutdown()
        self.server_close()


def request_json(
    address: tuple[str, int],
    method: str,
    target: str,
    *,
    body: dict[str, Any] | None = None,
    key: bytes | None = None,
    timeout: float = REQUEST_TIMEOUT_SECONDS,
) -> tuple[int, dict[str, Any] | None]:
    """One request to an agent: (status, the JSON object answered or None); signed when a key is given. Raises
    OSError (and http.client's errors) when the agent cannot be reached."""
    data = json.dumps(body).encode() if body is not None else b""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if key is not None:
        headers[SIGNATURE_HEADER] = sign(key, method, target, data)
    connection = http.client.HTTPConnection(*address, timeout=timeout)
    try:
        connection.request(method, target, body=data if body is not None else None, headers=headers)
        response = connection.getresponse()
        reply = response.read(MAX_REPLY_BYTES)
    finally:
        connection.close()
    try:
        parsed = json.loads(reply)
    except ValueError:
        parsed = None
    return response.status, parsed if isinstance(parsed, dict) else None
