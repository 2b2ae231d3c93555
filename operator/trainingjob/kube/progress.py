"""Reading rank 0's progress: its last words once it has exited (the termination message), else its progress
endpoint over HTTP, bounded in bytes and in time. A pod is untrusted: one that answers slowly, endlessly or not
at all (or drips its headers) costs a reconcile two seconds at most, and what it says is parsed as untrusted
input."""

from trainingjob.children.progress_report import MAX_REPORT_BYTES, Report, final_report, parse_report
from trainingjob.children.specs import PROGRESS_PORT
from trainingjob.kube.pod_http import exchange
from trainingjob.kube.ports import Manifest

PROGRESS_SECONDS = 2.0


def read_bounded(host: str, port: int, path: str, limit: int, seconds: float) -> bytes | None:
    """GET http://host:port/path: its body when the pod answers 200 with at most `limit` bytes within `seconds` in
    all, else None."""
    answer = exchange(host, port, "GET", path, limit=limit, seconds=seconds)
    return answer.body if answer is not None and answer.status == 200 else None


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
