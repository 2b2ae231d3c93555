"""What happens to a job: its Kubernetes events, the logs of its pods, a server-sent-events stream of its status."""

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import httpx
from fastapi import APIRouter, Query
from fastapi.responses import Response, StreamingResponse
from kubernetes.client import ApiException
from starlette.concurrency import run_in_threadpool

from trainingjob import timeline
from trainingjob.contract import ROLE_PS, ROLE_WORKER
from trainingjob.model import GROUP, KIND
from trainingjob.naming import ATTEMPT_LABEL, CONTAINER_NAME, INDEX_LABEL, JOB_LABEL, ROLE_LABEL, job_selector
from trainingjob_api.auth import Access
from trainingjob_api.deps import (
    AppState,
    CanGet,
    CanGetLogs,
    CanListEvents,
    CanWatch,
    Name,
    Namespace,
    State,
    describe_job,
    read_job,
)
from trainingjob_api.errors import ApiError, Problem, from_kubernetes, kubernetes_message, not_found
from trainingjob_api.logs import LogStream
from trainingjob_api.schemas import JobEvent, JobEventList
from trainingjob_api.store import CachedJob

router = APIRouter(prefix="/api/v1", tags=["observe"])
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": Problem} for code in (401, 403, 404, 422, 502, 503)}
LOG_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/plain": {}}, "description": "The log, streamed."},
    429: {"model": Problem, "description": "the caller, or all callers together, follow as many logs as allowed"},
}
Replica = Annotated[
    str,
    Query(
        pattern=rf"^({ROLE_WORKER}|{ROLE_PS})-[0-9]{{1,5}}$",
        description=f"The pod slot, as <role>-<index>: {ROLE_WORKER}-0, {ROLE_PS}-1, ...",
    ),
]


@router.get(
    "/namespaces/{namespace}/trainingjobs/{name}/events",
    response_model=JobEventList,
    responses=ERRORS,
    summary="The Kubernetes events about a job, oldest first",
)
def job_events(namespace: Namespace, name: Name, _: CanListEvents, state: State) -> JobEventList:
    selector = f"involvedObject.kind={KIND},involvedObject.name={name}"
    try:
        found = state.kube.core.list_namespaced_event(
            namespace, field_selector=selector, _request_timeout=state.kube.timeout
        )
    except ApiException as error:
        raise from_kubernetes(error, f"the events of {describe_job(namespace, name)}") from None
    events = [_event(e) for e in found.items if (e.involved_object.api_version or "").startswith(GROUP)]
    return JobEventList(items=sorted(events, key=lambda e: e.last_timestamp or e.first_timestamp or ""))


@router.get(
    "/namespaces/{namespace}/trainingjobs/{name}/failure",
    responses=ERRORS,
    summary="The job's last failure with the failed rank's last log lines (needs get pods/log as well)",
)
def job_failure(namespace: Namespace, name: Name, _: CanGet, __: CanGetLogs, state: State) -> dict[str, Any]:
    return {"lastFailure": (read_job(state, namespace, name).get("status") or {}).get("lastFailure")}


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
    job = read_job(state, namespace, name)
    pods: list[timeline.PodTimes] = []
    if state.authorizer.allows(caller, Access("list", "", "pods", namespace)):
        try:
            found = state.kube.core.list_namespaced_pod(
                namespace, label_selector=job_selector(name), _request_timeout=state.kube.timeout
            )
        except ApiException as error:
            raise from_kubernetes(error, f"the pods of {describe_job(namespace, name)}") from None
        manifests = [state.kube.api.sanitize_for_serialization(pod) for pod in found.items]
        pods = [times for times in map(timeline.pod_times, manifests) if times is not None]
    built = timeline.build(job, pods, datetime.now(UTC))
    if format == "chrome":
        disposition = f'attachment; filename="{name}-timeline.json"'
        body = json.dumps(timeline.chrome_trace(built))
        return Response(body, media_type="application/json", headers={"Content-Disposition": disposition})
    return Response(json.dumps(built.to_json()), media_type="application/json")


def _event(event: Any) -> JobEvent:
    def stamp(value: Any) -> str | None:
        return value.isoformat() if value is not None else None

    source = event.reporting_component or (event.source.component if event.source else None)
    return JobEvent(
        type=event.type,
        reason=event.reason,
        message=event.message,
        count=event.count,
        first_timestamp=stamp(event.first_timestamp or event.event_time),
        last_timestamp=stamp(event.last_timestamp or event.event_time),
        source=source,
    )


def _current_pod(state: AppState, namespace: str, name: str, replica: str) -> Any:
    role, index = replica.rsplit("-", 1)
    selector = f"{JOB_LABEL}={name},{ROLE_LABEL}={role},{INDEX_LABEL}={int(index)}"
    try:
        pods = state.kube.core.list_namespaced_pod(
            namespace, label_selector=selector, _request_timeout=state.kube.timeout
        )
    except ApiException as error:
        raise from_kubernetes(error, f"the pods of {describe_job(namespace, name)}") from None
    if not pods.items:
        raise not_found(
            f"a pod of replica {replica} of {describe_job(namespace, name)} (not started yet, or cleaned up)"
        )
    return max(pods.items, key=lambda pod: int((pod.metadata.labels or {}).get(ATTEMPT_LABEL, "0")))


@router.get(
    "/namespaces/{namespace}/trainingjobs/{name}/logs",
    response_class=StreamingResponse,
    responses={**ERRORS, **LOG_RESPONSES},
    summary="The log of one replica's pod in the job's current attempt, streamed",
)
async def job_logs(
    namespace: Namespace, name: Name, caller: CanGetLogs, state: State, *, replica: Replica = f"{ROLE_WORKER}-0",
    follow: bool = False, tail_lines: Annotated[int | None, Query(alias="tailLines", ge=1, le=100_000)] = None,
) -> StreamingResponse:  # fmt: skip
    release = state.stream_slots.take(caller.username) if follow else lambda: None
    try:
        found = await run_in_threadpool(_current_pod, state, namespace, name, replica)
        params: dict[str, str | int] = {"container": CONTAINER_NAME, "follow": str(follow).lower()}
        if tail_lines is not None:
            params["tailLines"] = tail_lines
        upstream = await _open_log(state, found, params)
    except BaseException:
        release()
        raise
    return LogStream(upstream, release)


async def _open_log(state: AppState, found: Any, params: dict[str, str | int]) -> httpx.Response:
    pod = str(found.metadata.name)
    if not found.spec.node_name:  # the apiserver answers "no content" for a pod that has no node yet
        phase = found.status.phase if found.status else None
        message = f'pod "{pod}" has no logs yet: it is not scheduled to a node (phase {phase})'
        raise ApiError(404, "LogsNotAvailable", message)
    upstream = await state.pod_logs.open(found.metadata.namespace, pod, params)
    if upstream.status_code >= 400:
        raise await _log_error(upstream, pod)
    return upstream


async def _log_error(upstream: httpx.Response, pod: str) -> ApiError:
    try:
        body = (await upstream.aread())[:65536].decode(errors="replace")
    finally:
        await upstream.aclose()
    error = ApiException(status=upstream.status_code, reason=upstream.reason_phrase, body=body)
    if error.status in (400, 404):  # no node or kubelet yet, container not started: Kubernetes says which
        reason = kubernetes_message(error)
        return ApiError(502, "LogsUnavailable", f'the logs of pod "{pod}" are not available from Kubernetes: {reason}')
    return from_kubernetes(error, f'the logs of pod "{pod}"')


@router.get(
    "/namespaces/{namespace}/trainingjobs/{name}/watch",
    response_class=StreamingResponse,
    responses={**ERRORS, 200: {"content": {"text/event-stream": {}}, "description": "status events"}},
    summary="A server-sent-events stream of the job: one `status` event now and on every status change",
)
async def watch_job(namespace: Namespace, name: Name, caller: CanWatch, state: State) -> StreamingResponse:
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
            current = CachedJob.from_raw(await asyncio.to_thread(read_job, state, namespace, name))
    except BaseException:
        undo()
        raise
    stream = _status_events(queue, current, undo, state.settings.sse_keepalive_seconds)
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
