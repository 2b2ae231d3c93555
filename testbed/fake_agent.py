"""Rank 0's agent as the operator sees it, on a kwok pod's (loopback) IP: it tells the gang's state, answers the
readiness probe's path, and takes the operator's orders only when signed with the job's key (children/agent.py)."""

import contextlib
import hmac
import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from trainingjob.children.agent import AGENT_PORT, GANG_PATH, ORDER_PATH, READY_PATH, SIGNATURE_HEADER, signature


@dataclass
class FakeAgent:
    """What the agent says (`gang`, changed by the test) and the orders it took (signed ones) or refused."""

    key: bytes
    gang: dict[str, Any] = field(default_factory=dict)
    orders: list[int] = field(default_factory=list)
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, **gang: Any) -> None:
        with self.lock:
            self.gang = {**self.gang, **gang}

    def _order(self, body: bytes, signed: str) -> bool:
        with self.lock:
            if not hmac.compare_digest(signed, signature(self.key, "POST", ORDER_PATH, body)):
                self.refused += 1
                return False
            attempt = int(json.loads(body)["attempt"])
            self.orders.append(attempt)
            if attempt > int(self.gang.get("attempt", 0)):
                self.gang = {**self.gang, "attempt": attempt, "state": "starting", "running": 0, "failures": []}
            return True


@contextlib.contextmanager
def fake_agent(address: str, key: bytes, **gang: Any) -> Iterator[FakeAgent]:
    """The agent on address:AGENT_PORT until the block ends."""
    agent = FakeAgent(key, dict(gang))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with agent.lock:
                state = dict(agent.gang)
            if self.path == GANG_PATH:
                self._answer(200, json.dumps(state).encode())
            elif self.path == READY_PATH:
                self._answer(503 if state.get("state") == "failed" else 200, b"")
            else:
                self._answer(404, b"")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            taken = self.path == ORDER_PATH and agent._order(body, self.headers.get(SIGNATURE_HEADER, ""))
            self._answer(200 if taken else 401, b"")

        def _answer(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer((address, AGENT_PORT), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield agent
    finally:
        server.shutdown()
        server.server_close()
