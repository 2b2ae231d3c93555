"""What the web dashboard reads: who the caller is, job summaries (a page, and a stream of changes), the cluster's
counts, what the caller may do to a job, and a job's pods. Only namespaces the caller may list trainingjobs in
are shown; summaries come from the job cache, computed once per job change."""

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from trainingjob.kube.reviews import Access, Caller
from trainingjob.model import GROUP, PLURAL, Phase
from trainingjob_api.dashboard_schemas import ClusterView, JobAccess, JobPodList, JobSummaryList, Whoami
from trainingjob_api.deps import (
    NAMESPACE_PATTERN,
    AppState,
    AuthenticatedCaller,
    CanListPods,
    Name,
    Namespace,
    State,
    Token,
    listable_namespaces,
    require,
    stream_guard,
)
from trainingjob_api.job_cache import CachedJob
from trainingjob_api.job_pods import pod_rows
from trainingjob_api.problems import ApiError, Problem
from trainingjob_api.routers.jobs import Continue, Limit, Selector, decode_continue, encode_continue
from trainingjob_api.selectors import SelectorError, parse
from trainingjob_api.streams import guarded, sse_ending
from trainingjob_api.summaries import cluster, page_body, select

router = APIRouter(prefix="/api/v1", tags=["dashboard"])
JSON = "application/json"
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": Problem} for code in (401, 403, 404, 422, 502, 503)}
STREAM_BACKLOG = 10_000  # changes a watcher may fall behind by before its stream is ended (it reconnects)
NamespaceFilter = Annotated[
    str | None,
    Query(pattern=NAMESPACE_PATTERN, max_length=63, description="Only this namespace (403 if the caller may not "
          "list trainingjobs there); every namespace the caller may list when unset."),
]  # fmt: skip
PhaseFilter = Annotated[Phase | None, Query(description="Only jobs in this phase.")]
Search = Annotated[str, Query(max_length=253, description="Only jobs whose name contains this text.")]


def _listable(state: AppState, caller: Caller, namespace: str | None) -> list[str]:
    """The namespaces to show: `namespace` (403 unless the caller may list jobs there), else every namespace with
    jobs that the caller may list jobs in."""
    if namespace is not None:
        require(state, caller, Access("list", GROUP, PLURAL, namespace))
        if not state.cache.serves(namespace):
            raise ApiError(404, "NotFound", f'namespace "{namespace}" is not served by this API (TJ_API_NAMESPACES)')
        return [namespace]
    return listable_namespaces(state, caller, PLURAL)


@router.get("/whoami", response_model=Whoami, responses=ERRORS, summary="The caller, as Kubernetes knows them")
def whoami(caller: AuthenticatedCaller) -> Whoami:
    return Whoami(username=caller.username, groups=list(caller.groups))


@router.get(
    "/jobsummaries",
    response_model=JobSummaryList,
    responses=ERRORS,
    summary="Summaries of the jobs of every namespace the caller may list (from the cache), with counts",
)
def job_summaries(
    caller: AuthenticatedCaller, state: State, *, namespace: NamespaceFilter = None, phase: PhaseFilter = None,
    selector: Selector = None, search: Search = "", limit: Limit = None, token: Continue = None,
) -> Response:  # fmt: skip
    if limit is not None and limit > state.settings.max_page_size:
        raise ApiError(422, "Invalid", f"limit: at most {state.settings.max_page_size}")
    after = decode_continue(token)
    try:
        found = state.cache.summaries(_listable(state, caller, namespace), parse(selector))
    except SelectorError as error:
        raise ApiError(422, "Invalid", f"labelSelector: {error}") from None
    page = select(found, phase=phase, search=search, after=after, limit=limit)
    following = encode_continue(page.items[-1].key) if page.more else None
    return Response(page_body(page, following), media_type=JSON)


@router.get(
    "/cluster",
    response_model=ClusterView,
    responses=ERRORS,
    summary="Jobs per phase, GPUs of running, pending and suspended jobs, recent failures (namespaces the caller "
    "may list)",
)
def cluster_view(caller: AuthenticatedCaller, state: State, namespace: NamespaceFilter = None) -> Response:
    found = state.cache.summaries(_listable(state, caller, namespace), parse(None))
    return Response(json.dumps(cluster(found)), media_type=JSON)


@router.get(
    "/namespaces/{namespace}/trainingjobs/{name}/access",
    response_model=JobAccess,
    responses=ERRORS,
    summary="What the caller may do to a job, by RBAC (to enable the dashboard's buttons)",
)
def job_access(namespace: Namespace, name: Name, caller: AuthenticatedCaller, state: State) -> JobAccess:
    if not state.cache.serves(namespace):
        raise ApiError(404, "NotFound", f'namespace "{namespace}" is not served by this API (TJ_API_NAMESPACES)')

    def may(verb: str, resource: str = PLURAL, group: str = GROUP, subresource: str = "", job: str = "") -> bool:
        return state.authorizer.allows(caller, Access(verb, group, resource, namespace, subresource, job))

    return JobAccess(
        get=may("get", job=name), patch=may("patch", job=name), delete=may("delete", job=name),
        logs=may("get", "pods", "", "log"), events=may("list", "events", ""), pods=may("list", "pods", ""),
    )  # fmt: skip


@router.get(
    "/namespaces/{namespace}/trainingjobs/{name}/pods",
    response_model=JobPodList,
    responses=ERRORS,
    summary="The job's pods still present, of every attempt, newest attempt first (needs list pods)",
)
def job_pods(namespace: Namespace, name: Name, _: CanListPods, state: State) -> Response:
    return Response(json.dumps({"items": pod_rows(state.jobs.pods(name, namespace))}), media_type=JSON)


class Rights:
    """Which namespaces a summary stream may show: checked when it starts, and once for each namespace that first
    appears while it runs."""

    def __init__(self, state: AppState, caller: Caller, namespace: str | None) -> None:
        self._state, self._caller, self.only = state, caller, namespace
        self._everywhere = namespace is None and state.authorizer.allows(caller, Access("list", GROUP, PLURAL, ""))
        self._known = dict.fromkeys(_listable(state, caller, namespace), True) if not self._everywhere else {}

    def forget(self) -> None:
        """Ask again, as the stream's re-check does: each namespace when its next change comes (blocking)."""
        self._everywhere = self.only is None and self._state.authorizer.allows(
            self._caller, Access("list", GROUP, PLURAL, "")
        )
        self._known = {}

    def wanted(self, namespace: str) -> bool:
        """Whether a change in `namespace` is worth queueing (cheap: the cache thread asks)."""
        return self.only in (None, namespace)

    async def allows(self, namespace: str) -> bool:
        if self._everywhere:
            return True
        if namespace not in self._known:
            access = Access("list", GROUP, PLURAL, namespace)
            self._known[namespace] = await run_in_threadpool(self._state.authorizer.allows, self._caller, access)
        return self._known[namespace]


@router.get(
    "/jobsummaries/watch",
    response_class=StreamingResponse,
    responses={**ERRORS, 200: {"content": {"text/event-stream": {}}, "description": "summary events"}},
    summary="A server-sent-events stream of job summaries: a `summary` event on every change of a job the caller "
    "may list, `deleted` when one goes",
)
async def watch_summaries(
    caller: AuthenticatedCaller, state: State, token: Token, namespace: NamespaceFilter = None
) -> StreamingResponse:
    rights = await run_in_threadpool(Rights, state, caller, namespace)
    queue: asyncio.Queue[tuple[str, CachedJob]] = asyncio.Queue(STREAM_BACKLOG)
    overflowed = asyncio.Event()  # the watcher fell too far behind: its stream ends, and it reconnects
    loop = asyncio.get_running_loop()

    def offer(change: tuple[str, CachedJob]) -> None:  # in the event loop
        try:
            queue.put_nowait(change)
        except asyncio.QueueFull:
            overflowed.set()

    def deliver(kind: str, job: CachedJob) -> None:  # in the cache's thread
        if rights.wanted(job.namespace):
            loop.call_soon_threadsafe(offer, (kind, job))

    release = state.stream_slots.take(caller.username)
    stop_listening = state.cache.listen(None, deliver)

    def undo() -> None:
        stop_listening()
        release()

    stream = _summary_events(queue, overflowed, rights, undo, state.settings.sse_keepalive_seconds)
    guard = stream_guard(state, token, caller)  # the token; the namespaces shown are asked again (rights.forget)
    guard.on_review = rights.forget
    stream = guarded(stream, guard, sse_ending)
    return StreamingResponse(stream, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def _summary_events(
    queue: "asyncio.Queue[tuple[str, CachedJob]]", overflowed: asyncio.Event, rights: Rights,
    undo: Callable[[], None], keepalive: float,
) -> AsyncIterator[bytes]:  # fmt: skip
    try:
        yield b": watching\n\n"  # the stream is open: its headers go now
        while not overflowed.is_set():
            try:
                kind, job = await asyncio.wait_for(queue.get(), keepalive)
            except TimeoutError:
                yield b": keepalive\n\n"
                continue
            if await rights.allows(job.namespace):
                yield _summary_event(kind, job)
    finally:
        undo()


def _summary_event(kind: str, job: CachedJob) -> bytes:
    if kind == "DELETED":
        data = json.dumps({"namespace": job.namespace, "name": job.name}).encode()
        return b"event: deleted\ndata: " + data + b"\n\n"
    return b"event: summary\ndata: " + job.summary.body + b"\n\n"
