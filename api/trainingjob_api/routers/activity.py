"""What happens to a job: its Kubernetes events, the logs of its pods, a server-sent-events stream of its status.
Kubernetes is asked through trainingjob_sdk's KubeJobs (state.jobs); only the log bytes are relayed here, by an async
client that holds no thread per stream."""

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

import httpx
from fastapi import APIRouter, Query
from fastapi.responses import Response, StreamingResponse
from kubernetes.client import ApiException
from starlette.concurrency import run_in_threadpool

from trainingjob.children.contract import ROLE_PS, ROLE_WORKER
from trainingjob.children.naming import CONTAINER_NAME
from trainingjob.kube.impersonation import Headers
from trainingjob.kube.reviews import Access
from trainingjob.model import GROUP, PLURAL
from trainingjob_api.deps import (
    AppState,
    CanGet,
    CanGetLogs,
    CanListEvents,
    CanWatch,
    Name,
    Namespace,
    State,
    Token,
    acting_headers,
    stream_guard,
)
from trainingjob_api.job_cache import CachedJob
from trainingjob_api.logs import LogStream
from trainingjob_api.problems import ApiError, Problem, from_sdk
from trainingjob_api.schemas import JobEventList
from trainingjob_api.streams import guarded, no_ending, sse_ending
from trainingjob_sdk import pods
from trainingjob_sdk.jobs import JobEvent
from trainingjob_sdk.kube import kubernetes_message, typed

router = APIRouter(prefix="/api/v1", tags=["observe"])
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": Problem} for code in (401, 403, 404, 422, 502, 503)}
LOG_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/plain": {}}, "description": "The log, streamed."},
    429: {"model": Problem, "description": "the caller, or all callers together, follow as many logs as allowed"},
}
Replica = Annotated[
    str,
    Query(
        pattern=pods.REPLICA_PATTERN,
        description=f"The pod slot, as <role>-<index>: {ROLE_WORKER}-0, {ROLE_PS}-1, ...",
    ),
]
Attempt = Annotated[
    int | None,
    Query(ge=1, description="The pod of this attempt (404 once it is gone); of the newest attempt present when unset."),
]
TailLines = Annotated[
    int | None,
    Query(alias="tailLines", ge=0, le=100_000, description="Only the last lines; 0: none, then what follows."),
]


@router.get(
    "/namespaces/{namespace}/trainingjobs/{name}/events",
    response_model=JobEventList,
    responses=ERRORS,
    summary="The Kubernetes events about a job, oldest first",
)
def job_events(namespace: Namespace, name: Name, _: CanListEvents, state: State) -> JobEventList:
    return JobEventList(items=[JobEvent.model_validate(row) for row in state.jobs.events(name, namespace)])


@router.get(
    "/namespaces/{namespace}/trainingjobs/{name}/failure",
    responses=ERRORS,
    summary="The job's last failure with the failed rank's last log lines (needs get pods/log as well)",
)
def job_failure(namespace: Namespace, name: Name, _: CanGet, __: CanGetLogs, state: State) -> dict[str, Any]:
    return {"lastFailure": (state.jobs.get(name, namespace).get("status") or {}).get("lastFailure")}


TimelineFormat = Annotated[
    str, Query(pattern="^(json|chrome)$", description="json, or chrome: a Chrome trace (chrome://tracing, Perfetto)")
]


@router.get(
    "/namespaces/{namespace}/trainingjobs/{name}/timeline",
    responses={**ERRORS, 200: {"description": "The timeline as JSON, or a Chrome trace with format=chrome"}},
    summary="Where the job's time went: attempts, pods, failures, checkpoints on a time axis (or a Chrome trace)",
)
def job_timeline(
    namespace: Namespace, name: Name, caller: CanGet, state: State, format: TimelineFormat = "json"
) -> Response:
    """Pods get rows of their own only for a caller who may list pods in the namespace."""
    may_list_pods = state.authorizer.allows(caller, Access("list", "", "pods", namespace))
    found = state.jobs.timeline(name, namespace, chrome=format == "chrome", with_pods=may_list_pods)
    if format == "chrome":
        disposition = f'attachment; filename="{name}-timeline.json"'
        return Response(json.dumps(found), media_type="application/json", headers={"Content-Disposition": disposition})
    return Response(json.dumps(found), media_type="application/json")


@router.get(
    "/namespaces/{namespace}/trainingjobs/{name}/logs",
    response_class=StreamingResponse,
    responses={**ERRORS, **LOG_RESPONSES},
    summary="The log of one replica's pod in the job's current attempt (or in `attempt` while its pod is there)",
)
async def job_logs(
    namespace: Namespace, name: Name, caller: CanGetLogs, state: State, token: Token, *,
    replica: Replica = f"{ROLE_WORKER}-0",
    follow: bool = False, tail_lines: TailLines = None, attempt: Attempt = None,
) -> StreamingResponse:  # fmt: skip
    release = state.stream_slots.take(caller.username) if follow else lambda: None
    try:
        found = await run_in_threadpool(state.jobs.replica_pod, name, replica, namespace, attempt)
        pods.check_has_logs(found)  # the apiserver answers "no content" for a pod that has no node yet
        params: dict[str, str | int] = {"container": CONTAINER_NAME, "follow": str(follow).lower()}
        if tail_lines is not None:
            params["tailLines"] = tail_lines
        where = found["metadata"]["namespace"], found["metadata"]["name"]
        upstream = await _open_log(state, *where, params, acting_headers(caller))
    except BaseException:
        release()
        raise
    if not follow:
        return LogStream(upstream, release)
    guard = stream_guard(state, token, caller, Access("get", "", "pods", namespace, "log"))
    return LogStream(upstream, release, lambda chunks: guarded(chunks, guard, no_ending))


async def _open_log(
    state: AppState, namespace: str, pod: str, params: dict[str, str | int], acting: Headers
) -> httpx.Response:
    upstream = await state.pod_logs.open(namespace, pod, params, acting)
    if upstream.status_code >= 400:
        raise await _log_error(upstream, pod, dict(acting).get("Impersonate-User", ""))
    return upstream


async def _log_error(upstream: httpx.Response, pod: str, caller: str) -> ApiError:
    try:
        body = (await upstream.aread())[:65536].decode(errors="replace")
    finally:
        await upstream.aclose()
    error = ApiException(status=upstream.status_code, reason=upstream.reason_phrase, body=body)
    what = f'the logs of pod "{pod}"'
    if error.status in (400, 404):  # no node or kubelet yet, container not started: Kubernetes says which
        reason, _ = kubernetes_message(error)
        return ApiError(502, "LogsUnavailable", f"{what} are not available from Kubernetes: {reason}")
    return from_sdk(typed(error, what), what, caller)


@router.get(
    "/namespaces/{namespace}/trainingjobs/{name}/watch",
    response_class=StreamingResponse,
    responses={**ERRORS, 200: {"content": {"text/event-stream": {}}, "description": "status events"}},
    summary="A server-sent-events stream of the job: one `status` event now and on every status change",
)
async def watch_job(
    namespace: Namespace, name: Name, caller: CanWatch, state: State, token: Token
) -> StreamingResponse:
    queue: asyncio.Queue[tuple[str, CachedJob]] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    def deliver(kind: str, job: CachedJob) -> None:  # called in the cache's thread
        loop.call_soon_threadsafe(queue.put_nowait, (kind, job))

    release = state.stream_slots.take(caller.username)
    stop_listening = state.cache.listen((namespace, name), deliver)

    def undo() -> None:
        stop_listening()
        release()

    try:
        current = state.cache.get(namespace, name)
        if current is None:
            current = CachedJob.from_raw(await asyncio.to_thread(state.jobs.get, name, namespace))
    except BaseException:
        undo()
        raise
    stream = _status_events(queue, current, undo, state.settings.sse_keepalive_seconds)
    guard = stream_guard(state, token, caller, Access("watch", GROUP, PLURAL, namespace, name=name))
    stream = guarded(stream, guard, sse_ending)
    return StreamingResponse(stream, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _sse(event: str, job: CachedJob) -> bytes:
    return f"event: {event}\ndata: ".encode() + job.body + b"\n\n"


async def _status_events(
    queue: "asyncio.Queue[tuple[str, CachedJob]]", current: CachedJob, undo: Callable[[], None], keepalive: float
) -> AsyncIterator[bytes]:
    try:
        last = current.status
        yield _sse("status", current)
        while True:
            try:
                kind, job = await asyncio.wait_for(queue.get(), keepalive)
            except TimeoutError:
                yield b": keepalive\n\n"
                continue
            if kind == "DELETED":
                yield _sse("deleted", job)
                return
            if job.status != last:
                last = job.status
                yield _sse("status", job)
    finally:
        undo()
