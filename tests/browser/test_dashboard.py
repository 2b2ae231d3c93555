"""The web dashboard in headless Chromium against the REST API on the cluster tier (the real operator, kwok pods):
sign in with a token, the jobs, a job's progress, a restart on its timeline, suspend, and what callers with fewer
rights see; a sweep's trials ranked and plotted. Screenshots land in .artifacts/screenshots/ named after each test."""

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from selenium.webdriver.remote.webelement import WebElement
from testbed.harness import Harness, progress_endpoint
from testbed.processes import poll_until
from tests.support.builders import job_manifest, sweep_manifest
from tests.support.pages import Dashboard
from tests.support.rest_api import People
from tests.support.trials import BATCH, finish_trial

from trainingjob.model import API_VERSION, GROUP, KIND, PLURAL, VERSION
from trainingjob.model.sweep import SWEEP_PLURAL

pytestmark = pytest.mark.browser


def _user(namespace: str, account: str) -> str:
    return f"system:serviceaccount:{namespace}:{account}"


def test_a_person_signs_in_with_a_token_sees_their_jobs_live_and_signs_out(
    ui: Dashboard, h: Harness, people: People
) -> None:
    h.create(job_manifest("alpha", labels={"team": "a"}))
    h.create(job_manifest("beta", labels={"team": "b"}))
    ui.open()
    ui.wait(lambda _: ui.find("#login"), "the login form (no token yet)")
    ui.type("#token", "not-a-kubernetes-token")
    ui.click("#login-submit")
    ui.wait_text("#login-status", lambda text: "not accepted" in text, "a refused token said so")
    ui.screenshot("refused")
    ui.act("#token", lambda field: field.clear(), "clearing the token")
    assert ui.sign_in(people.writer) == _user(h.ns, "writer")
    assert people.writer not in ui.driver.current_url and ui.session_storage() == {"trainingjob.token": people.writer}
    both = {f"{h.ns}/alpha": "Running", f"{h.ns}/beta": "Running"}
    ui.wait_rows(lambda rows: rows == both, "both jobs Running (the watch moves them from Pending)", timeout=60)
    ui.screenshot("jobs")

    ui.type("#filter-labelSelector", "team=b")
    ui.wait_rows(lambda rows: list(rows) == [f"{h.ns}/beta"], "only the team=b job")
    h.create(job_manifest("gamma", labels={"team": "b"}))
    ui.wait_rows(lambda rows: f"{h.ns}/gamma" in rows, "a job created meanwhile shows up without a reload")
    assert f"{h.ns}/alpha" not in ui.job_rows()
    ui.wait_text("#jobs-summary", lambda text: text.startswith("2 jobs"), "the count of matching jobs")
    ui.screenshot("filtered")

    ui.click("#logout")
    ui.wait(lambda _: ui.find("#login"), "the login form after logging out")
    assert ui.session_storage() == {}
    assert ui.console_errors() == []


def test_behind_an_authenticating_proxy_no_sign_in_is_asked(ui: Dashboard, h: Harness, people: People) -> None:
    h.create(job_manifest("proxied"))
    # What a proxy in front of the API does: every request arrives with the person's token, the page holds none.
    ui.driver.execute_cdp_cmd("Network.enable", {})
    ui.driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Bearer {people.reader}"}})
    try:
        ui.open()
        assert ui.wait_text("#username", bool, "the user named without a sign-in") == _user(h.ns, "reader")
        ui.wait_rows(lambda rows: f"{h.ns}/proxied" in rows, "the jobs listed")
        assert not ui.all("#login") and not ui.read(lambda: ui.find("#logout").is_displayed(), "the logout button")
        assert ui.session_storage() == {}
        ui.screenshot("proxied")
    finally:
        ui.driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {}})
    assert ui.console_errors() == []


def test_a_job_page_follows_progress_and_shows_a_restart_on_the_timeline(
    ui: Dashboard, h: Harness, people: People
) -> None:
    h.create(job_manifest("curves"))
    rank0, rank1 = h.wait_running_pods("curves", 2, attempt=1)
    report: dict[str, Any] = {"step": 10, "loss": 2.5, "heartbeat": time.time(), "totalSteps": 100,
                              "samplesPerSecond": 100.0, "etaSeconds": 900,
                              "firstStepTime": time.time() - 5}  # fmt: skip
    with progress_endpoint(rank0.status.pod_ip, report):
        ui.sign_in(people.writer)
        ui.open(f"/jobs/{h.ns}/curves")
        ui.wait_text("#job-step", lambda text: text == "10 / 100", "step 10 of 100", timeout=60)
        ui.screenshot("step-10")
        now = time.time()
        report.update(step=60, loss=1.25, heartbeat=now, samplesPerSecond=120.0, etaSeconds=300,
                      metrics={"accuracy": 0.75}, metricsStep=60, lastCheckpointStep=50,
                      lastCheckpointPath="/checkpoints/step-50", lastCheckpointTime=now,
                      checkpointPacing={"auto": True, "intervalSeconds": 42.0, "optimalSeconds": 42.0,
                                        "saveSeconds": 0.15, "mtbfSeconds": 5880.0})  # fmt: skip
        ui.wait_text("#job-step", lambda text: text == "60 / 100", "the progress moving to step 60", timeout=60)
        ui.wait_text("#job-loss", lambda text: text == "1.25", "the new loss")
        ui.wait(lambda _: len(_points(ui, "#chart-loss polyline")) >= 2, "a loss curve of two points or more")
        ui.wait(lambda _: ui.all("#chart-metric-0 polyline"), "the accuracy curve")
        ui.wait_text("#job-checkpoints", lambda text: "/checkpoints/step-50" in text, "the checkpoint listed")
        ui.wait_text("#job-pacing", lambda text: text.startswith("Auto: every 42 s"), "how often it checkpoints, why")
        ui.wait(lambda _: ui.all("#timeline-svg circle.mark-checkpoint"), "the checkpoint on the timeline")
        ui.wait_text("#job-goodput", lambda text: "productive" in text, "where its time went, training included")
        ui.wait(lambda _: ui.all("#job-goodput .gp-productive"), "the productive part of the goodput bar")
        ui.wait_text("#timeline-totals", lambda text: text.startswith("goodput "), "the timeline's totals")
        ui.screenshot("step-60")

        h.finish(rank1.metadata.name, 75)
        ui.wait(lambda _: ui.all("#timeline-svg .mark-failure.fc-retryable"), "a retryable failure on the timeline")
        ui.wait(lambda _: ui.all('#timeline-svg [data-row="attempt-2"]'), "attempt 2 on the timeline", timeout=60)
        ui.wait_text("#job-restarts", lambda text: "retryable 1" in text, "the restart counted")
        ui.wait_text("#job-failure", lambda text: rank1.metadata.name in text, "the last failure named")
        ui.wait(lambda _: ui.all("#job-pods tbody tr"), "the pods listed")
        ui.screenshot("restarted")

    ui.click("#trace-download")
    saved = poll_until(lambda: _download(ui.downloads, f"{h.ns}-curves.trace.json"), timeout=30, what="the trace")
    assert any(event.get("ph") == "X" for event in json.loads(saved.read_text())["traceEvents"])
    assert ui.console_errors() == []


def test_suspend_and_resume_from_the_job_page_change_its_phase(ui: Dashboard, h: Harness, people: People) -> None:
    h.create(job_manifest("pausable"))
    h.wait_running_pods("pausable", 2, attempt=1)
    _event(h, "pausable", "<img src=x onerror=\"document.title='owned'\">")
    ui.sign_in(people.writer)
    ui.open(f"/jobs/{h.ns}/pausable")
    ui.wait_text("#job-phase-badge", lambda text: text == "Running", "the job Running")
    ui.wait_text("#job-history", lambda text: "<img src=x" in text, "a hostile event message shown as text")
    assert ui.driver.title == "TrainingJobs" and not ui.all("#job-history img")
    assert not ui.enabled("#action-resume")
    ui.wait(lambda _: ui.find("#action-suspend").is_enabled(), "suspend enabled")
    ui.click("#action-suspend")
    ui.wait_text("#job-phase-badge", lambda text: text == "Suspended", "the phase changed to Suspended", timeout=60)
    ui.screenshot("suspended")
    assert not ui.enabled("#action-suspend")
    ui.wait(lambda _: ui.find("#action-resume").is_enabled(), "resume enabled")
    ui.click("#action-resume")
    ui.wait_text("#job-phase-badge", lambda text: text == "Running", "Running again after resuming", timeout=60)
    ui.wait_text("#job-attempt", lambda text: text == "2", "resumed as attempt 2")
    assert ui.console_errors() == []


def test_a_read_only_caller_sees_no_enabled_buttons(ui: Dashboard, h: Harness, people: People) -> None:
    h.create(job_manifest("readonly"))
    h.wait_running_pods("readonly", 2, attempt=1)
    assert ui.sign_in(people.reader) == _user(h.ns, "reader")
    ui.wait_rows(lambda rows: rows == {f"{h.ns}/readonly": "Running"}, "the job listed for a reader")
    ui.click(f'#jobs-rows tr[data-key="{h.ns}/readonly"] a')
    ui.wait_text("#job-phase-badge", lambda text: text == "Running", "the job page")
    # The page redraws its buttons on every watch event: read them all from one drawing, never keep the elements.
    buttons = ui.wait_values("#job-actions button", _button, bool, "the action buttons")
    assert [text for text, _, _ in buttons] == ["Suspend", "Resume", "Delete"]
    assert not [text for text, enabled, _ in buttons if enabled]
    titles = [title for _, _, title in buttons]
    assert all("You may not" in title for title in titles), titles
    assert "may not patch" in titles[0] and "may not delete" in titles[2]
    assert "needs get pods/log" in ui.text("#panel-logs") and not ui.all("#logs-show")
    ui.screenshot("read-only")
    assert ui.console_errors() == []


def test_a_caller_without_rights_in_a_namespace_sees_none_of_its_jobs(
    ui: Dashboard, h: Harness, people: People, admin: client.ApiClient
) -> None:
    h.create(job_manifest("hidden"))
    visible = job_manifest("visible", namespace=people.elsewhere)
    client.CustomObjectsApi(admin).create_namespaced_custom_object(GROUP, VERSION, people.elsewhere, PLURAL, visible)
    ui.sign_in(people.outsider)
    ui.wait_rows(lambda rows: f"{people.elsewhere}/visible" in rows, "the job the outsider may see")
    assert list(ui.job_rows()) == [f"{people.elsewhere}/visible"]
    ui.type("#filter-namespace", h.ns)
    ui.wait_text("#jobs-status", lambda text: "cannot list" in text, "a refusal for the other namespace")
    assert ui.job_rows() == {}
    ui.screenshot("refused-namespace")
    ui.open(f"/jobs/{h.ns}/hidden")
    ui.wait_text("#view", lambda text: "cannot get" in text, "the job page refused")
    assert not ui.all("#job-facts")
    ui.open("/cluster")
    ui.wait(lambda _: ui.find('#cluster-phases [data-label="Running"]'), "the cluster view")
    counted = ui.values("#cluster-phases [data-count]", lambda bar: int(str(bar.get_attribute("data-count"))))
    assert sum(counted) == 1, counted  # "visible" alone: the hidden job is in no count either
    assert "hidden" not in ui.text("#cluster")


def test_the_cluster_view_counts_gpus_phases_and_failures(ui: Dashboard, h: Harness, people: People) -> None:
    h.create(job_manifest("gpus", workers={"replicas": 2, "resources": {"limits": {"nvidia.com/gpu": 1}}}))
    h.create(job_manifest("broken"))
    h.finish(h.wait_running_pods("broken", 2, attempt=1)[0].metadata.name, 78)
    h.wait_phase("broken", "Failed")
    h.wait_running_pods("gpus", 2, attempt=1)
    ui.sign_in(people.writer)
    ui.click('#nav a[data-view="cluster"]')
    ui.wait(lambda _: _count(ui, "#cluster-gpus", "Running") == 2, "2 GPUs requested by running jobs", timeout=60)
    ui.wait(lambda _: _count(ui, "#cluster-phases", "Failed") == 1, "1 failed job")
    ui.wait_text("#cluster-failures", lambda text: f"{h.ns}/broken" in text and "Permanent" in text, "the failure")
    ui.screenshot("cluster")
    ui.click("#cluster-failures a")
    ui.wait_text("#job-phase-badge", lambda text: text == "Failed", "the failed job's page")
    ui.wait_text("#job-failure", lambda text: "exit code 78" in text, "its last failure")
    assert ui.console_errors() == []


def test_a_sweeps_trials_are_listed_ranked_and_plotted(ui: Dashboard, h: Harness, people: People) -> None:
    manifest = sweep_manifest("grid", parameters=BATCH, search={"algorithm": "Grid"}, maxTrials=2, parallelism=2)
    manifest["spec"]["template"]["spec"]["workers"] = {"replicas": 1}
    h.custom.create_namespaced_custom_object(GROUP, VERSION, h.ns, SWEEP_PLURAL, manifest)
    finish_trial(h, "grid-0", 0.91)
    finish_trial(h, "grid-1", 0.95)
    ui.sign_in(people.writer)
    ui.click('#nav a[data-view="sweeps"]')
    listed = f"{h.ns}/grid"
    ui.wait_text("#sweeps-table", lambda text: listed in text and "accuracy 0.95 (trial 1)" in text, "the sweep")
    ui.click("#sweeps-table a")
    ui.wait(lambda _: len(ui.all("#sweep-plot circle.pt")) == 2, "both trials plotted")
    assert ui.values("#sweep-trials tbody tr", lambda row: row.get_attribute("data-trial")) == ["1", "0"]  # best first
    assert ui.text("#sweep-best") == "Best: accuracy 0.95 (trial 1) with batch=32"
    assert ui.values("#sweep-plot circle.pt", lambda c: c.get_attribute("data-phase")) == ["Succeeded", "Succeeded"]
    ui.screenshot("sweep")
    assert ui.console_errors() == []


def _button(button: WebElement) -> tuple[str, bool, str]:
    return str(button.text), bool(button.is_enabled()), str(button.get_attribute("title"))


def _points(ui: Dashboard, css: str) -> list[str]:
    found = ui.all(css)
    return str(found[0].get_attribute("points") or "").split() if found else []


def _count(ui: Dashboard, chart: str, label: str) -> int:
    return int(str(ui.find(f'{chart} [data-label^="{label}"]').get_attribute("data-count")))


def _download(folder: Path, name: str) -> Path | None:
    path = folder / name
    return path if path.is_file() and path.stat().st_size > 0 else None


def _event(h: Harness, job: str, message: str) -> None:
    """A Kubernetes event about the job whose message is HTML: the page must show it as text."""
    involved = client.V1ObjectReference(api_version=API_VERSION, kind=KIND, name=job, namespace=h.ns)
    stamp = client.V1ObjectMeta(name=f"{job}.hostile", namespace=h.ns)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    event = client.CoreV1Event(involved_object=involved, metadata=stamp, message=message, reason="Hostile",
                               type="Warning", first_timestamp=now, last_timestamp=now)  # fmt: skip
    h.core.create_namespaced_event(h.ns, event)
