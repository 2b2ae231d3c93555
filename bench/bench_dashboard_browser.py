"""Page load of the dashboard's jobs view with 5,000 jobs, in headless Chromium (Debian's chromium and
chromium-driver): the time from navigation to the first rows on screen, against a baseline measured side by side in
the same browser from the same server: a trivial static page with one table row. Each load starts with an empty
browser cache. Also the server time of the page's GET /jobsummaries as the browser saw it (Resource Timing)."""

import os
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.api_world import prepare, serve
from kubernetes import client
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.support.ui import WebDriverWait
from testbed.chromium import start_chromium
from testbed.controlplane import ControlPlane, running

from trainingjob.model import GROUP, KIND, PLURAL, VERSION

JOBS = int(os.environ.get("TJ_BENCH_JOBS", "5000"))
NAMESPACES = 10
ROUNDS = 15
FIRST_ROWS = "#jobs-rows tr"
# Set before any script of the page runs (CDP): records when the first row appears, in ms since navigation.
WATCH_ROWS = """
new MutationObserver((_, observer) => {
  if (document.querySelector(%r)) { window.__firstRows = performance.now(); observer.disconnect(); }
}).observe(document, {childList: true, subtree: true});
"""
BASELINE = """<!doctype html><html><head><meta charset="utf-8"><title>baseline</title>
<link rel="stylesheet" href="style.css"></head><body><table><tbody id="jobs-rows"><tr><td>one row</td></tr>
</tbody></table></body></html>"""


def manifest(index: int) -> dict[str, Any]:
    labels = {"shard": str(index % 100)}
    spec = {"workers": {"replicas": 4}, "trainer": {"steps": 1000}}
    metadata = {"name": f"job-{index:05d}", "labels": labels}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": metadata, "spec": spec}


def status(index: int, now: str) -> dict[str, Any]:
    """A job Running with progress, as the operator would leave it, so each row has every column to draw."""
    step = index % 1000
    return {"phase": "Running", "attempt": 1 + index % 3, "startTime": now,
            "restarts": {"retryable": index % 3, "oom": 0, "disruption": index % 2, "stalled": 0},
            "progress": {"step": step, "loss": 1.0 / (1 + step), "totalSteps": 1000, "percent": step // 10,
                         "lastHeartbeatTime": now}}  # fmt: skip


def populate(plane: ControlPlane, count: int) -> None:
    local = threading.local()
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def create(index: int) -> None:
        if not hasattr(local, "jobs"):
            local.jobs = client.CustomObjectsApi(plane.api_client())
        namespace, name = f"bench-{index % NAMESPACES}", f"job-{index:05d}"
        local.jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, manifest(index))
        body = {"status": status(index, now)}
        local.jobs.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, body)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(count)))


def first_rows(chrome: webdriver.Chrome, url: str) -> tuple[float, float | None]:
    """Load `url` with an empty cache: ms to the first row, and the server time of GET /jobsummaries if made."""
    chrome.execute_cdp_cmd("Network.clearBrowserCache", {})
    chrome.get("about:blank")
    chrome.get(url)
    waiting = WebDriverWait(chrome, 60, poll_frequency=0.05)
    try:
        shown = waiting.until(lambda d: d.execute_script("return window.__firstRows"))
    except TimeoutException as error:
        page = chrome.find_element("tag name", "body").text[-2000:]
        raise RuntimeError(f"no rows on {url} within 60 s; the page says:\n{page}") from error
    timing = chrome.execute_script(
        "const e = performance.getEntriesByType('resource').find(r => r.name.includes('/jobsummaries?'));"
        "return e ? e.responseStart - e.requestStart : null;"
    )
    return float(shown), (float(timing) if timing is not None else None)


def signed_in(chrome: webdriver.Chrome, url: str, token: str) -> None:
    """The token in the tab's sessionStorage for the API's origin, set from a page that runs no script of ours."""
    chrome.get(f"{url}/healthz")
    chrome.execute_script("sessionStorage.setItem('trainingjob.token', arguments[0])", token)


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(chrome: webdriver.Chrome, url: str) -> None:
    dashboard: list[float] = []
    baseline: list[float] = []
    server: list[float] = []
    rows = 0
    for _ in range(ROUNDS):  # interleaved, so both see the same machine load
        shown, summaries = first_rows(chrome, f"{url}/ui/#/jobs")
        rows = len(chrome.find_elements("css selector", FIRST_ROWS))
        dashboard.append(shown)
        server.extend([summaries] if summaries is not None else [])
        baseline.append(first_rows(chrome, f"{url}/baseline/")[0])
    print(f"jobs view with {JOBS} jobs ({rows} rows on the first page), {ROUNDS} cold loads each, time to first rows:")
    for label, samples in (("dashboard /ui/#/jobs", dashboard), ("baseline static page", baseline)):
        print(f"  {label:24s} p50 {statistics.median(samples):7.1f} ms   p90 {quantile(samples, 0.9):7.1f} ms")
    ratio = statistics.median(dashboard) / statistics.median(baseline)
    print(f"  ratio dashboard/baseline p50 {ratio:6.1f}x")
    if server:
        print(f"  GET /jobsummaries as the browser saw it: p50 {statistics.median(server):.1f} ms, "
              f"max {max(server):.1f} ms")  # fmt: skip


def main() -> None:
    with running(cluster=False, prefix="tj-bench-ui-") as plane, tempfile.TemporaryDirectory() as scratch:
        token = prepare(plane, NAMESPACES)
        start = time.perf_counter()
        populate(plane, JOBS)
        print(f"created {JOBS} Running TrainingJobs in {NAMESPACES} namespaces in {time.perf_counter() - start:.1f} s")
        baseline = Path(scratch) / "baseline"
        baseline.mkdir()
        (baseline / "index.html").write_text(BASELINE)
        (baseline / "style.css").write_text("body { font: 14px sans-serif; }\n")
        chrome = start_chromium(Path(scratch) / "downloads")
        chrome.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH_ROWS % FIRST_ROWS})
        try:
            with serve(plane, JOBS, token, {"/baseline": baseline}) as url:
                signed_in(chrome, url, token)
                measure(chrome, url)
        finally:
            chrome.quit()


if __name__ == "__main__":
    main()
