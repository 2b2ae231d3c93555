"""Reading rank 0's progress: its last words once it has exited (the termination message), else its progress
endpoint over HTTP, bounded in bytes and in time. A pod is untrusted: one that answers slowly, endlessly or not
at all costs a reconcile two seconds at most, and what it says is parsed as untrusted input."""

import http.client
import time

from trainingjob.children.progress_report import MAX_REPORT_BYTES, Report, final_report, parse_report
from trainingjob.children.specs import PROGRESS_PORT
from trainingjob.kube.ports import Manifest

PROGRESS_SECONDS = 2.0


def read_bounded(host: str, port: int, path: str, limit: int, seconds: float) -> bytes | None:
    """GET http://host:port/path, at most `limit` bytes within `seconds` in all, or None."""
    deadline = time.monotonic() + seconds
    connection = http.client.HTTPConnection(host, port, timeout=seconds)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        if response.status != 200:
            return None
        body = b""
        while len(body) <= limit:
            if connection.sock is not None:
                connection.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            chunk = response.read1(min(16384, limit + 1 - len(body)))
            if not chunk:
                return body
            body += chunk
            if time.monotonic() > deadline:
                return None
        return None
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def read_progress(pod: Manifest, *, ask: bool) -> Report:
    """Rank 0's report: its last words once it has exited, else (when `ask`) its progress endpoint if it answers
    in time."""
    final = final_report(pod)
    if final is not None:
        return parse_report(final)
    address = (pod.get("status") or {}).get("podIP")
    if not ask or not isinstance(address, str) or not address:
        return None, None
    body = read_bounded(address, PROGRESS_PORT, "/progress", MAX_REPORT_BYTES, PROGRESS_SECONDS)
    return parse_report(body) if body is not None else (None, None)
