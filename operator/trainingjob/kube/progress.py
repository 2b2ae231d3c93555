"""Reading rank 0's progress: its last words once it has exited (the termination message), else its progress
endpoint over HTTP, bounded in bytes and in time. A pod is untrusted: one that answers slowly, endlessly or not
at all (or drips its headers) holds a read two seconds at most (and the operator reads outside its reconciles,
kube/pod_reads.py), and what it says is parsed as untrusted input."""

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


def last_words(pod: Manifest) -> Report | None:
    """Rank 0's report once it has exited (its termination message), read without asking the pod anything."""
    final = final_report(pod)
    return parse_report(final) if final is not None else None


def ask_progress(address: str) -> Report:
    """Rank 0's progress endpoint, if it answers in time."""
    body = read_bounded(address, PROGRESS_PORT, "/progress", MAX_REPORT_BYTES, PROGRESS_SECONDS)
    return parse_report(body) if body is not None else (None, None)
