"""The real operator's metrics port on the cluster tier: a job's own series (from a real apiserver's job, its
creationTimestamp and status.history) with rank 0's progress, released when the job is deleted; /healthz; 404; and
/metrics only for a token allowed `get /metrics` (testbed.operator.scraper_token)."""

import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from testbed.harness import Harness, progress_endpoint
from testbed.operator import OperatorProcess
from testbed.processes import poll_until
from tests.support.builders import job_manifest

from trainingjob.model import GROUP, PLURAL, VERSION

pytestmark = pytest.mark.cluster
Series = dict[tuple[str, str], float]  # (metric, its labels but namespace and trainingjob) -> value


def get(operator: OperatorProcess, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """As a scraper allowed `get /metrics` (operator.scrape), or with these headers only."""
    if headers is None:
        return operator.scrape(path)
    request = urllib.request.Request(f"http://127.0.0.1:{operator.metrics_port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def job_series(operator: OperatorProcess, namespace: str, name: str) -> Series:
    status, text = get(operator, "/metrics")
    assert status == 200
    found: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = dict(sample.labels)
            if (labels.pop("namespace", None), labels.pop("trainingjob", None)) == (namespace, name):
                found[(sample.name, ",".join(f"{k}={v}" for k, v in sorted(labels.items())))] = sample.value
    return found


def test_a_jobs_series_follow_its_status_and_go_with_it(h: Harness, operator: OperatorProcess) -> None:
    h.create(job_manifest("watched", runPolicy={"backoffLimit": 4}))
    rank0 = h.wait_running_pods("watched", 2, attempt=1)[0]
    h.wait_phase("watched", "Running")  # the operator's view of the pods may lag the apiserver's: its phase too
    heartbeat = float(int(time.time()))
    report = {"step": 42, "loss": 0.25, "samplesPerSecond": 1000.0, "heartbeat": heartbeat, "totalSteps": 168}

    def reported() -> Series | None:
        found = job_series(operator, h.ns, "watched")
        return found if found.get(("trainingjob_job_step", "")) == 42 else None

    with progress_endpoint(rank0.status.pod_ip, report):
        series = poll_until(reported, timeout=30, what="step 42 in /metrics")
    assert series[("trainingjob_job_phase", "phase=Running")] == 1
    assert [key for key in series if key[0] == "trainingjob_job_phase"] == [("trainingjob_job_phase", "phase=Running")]
    assert series[("trainingjob_job_attempt", "")] == 1
    assert series[("trainingjob_job_backoff_limit", "")] == 4
    assert series[("trainingjob_job_restarts", "failure_class=oom")] == 0
    assert (series[("trainingjob_job_loss", "")], series[("trainingjob_job_total_steps", "")]) == (0.25, 168)
    assert series[("trainingjob_job_samples_per_second", "")] == 1000
    seen = series[("trainingjob_job_last_heartbeat_timestamp_seconds", "")]  # when the operator saw it, its clock
    assert heartbeat <= seen <= time.time()
    created_to_running = series[("trainingjob_job_time_to_running_seconds", "")]
    assert 0 <= series[("trainingjob_job_attempt_time_to_running_seconds", "")] <= created_to_running < 60

    h.custom.delete_namespaced_custom_object(GROUP, VERSION, h.ns, PLURAL, "watched")
    poll_until(lambda: job_series(operator, h.ns, "watched") == {}, timeout=30, what="the job's series released")


def test_the_port_answers_metrics_and_healthz_only(operator: OperatorProcess) -> None:
    poll_until(lambda: get(operator, "/healthz", headers={}) == (200, "ok\n"), timeout=30, what="/healthz 200")
    assert get(operator, "/")[0] == get(operator, "/debug")[0] == 404
    status, text = get(operator, "/metrics")
    assert status == 200 and "trainingjob_queue_depth" in text


def test_metrics_are_refused_to_strangers(operator: OperatorProcess) -> None:
    """The kubelet's probe needs no token; /metrics (every tenant's jobs) does: the real operator asks the apiserver."""
    for headers in ({}, {"Authorization": "Bearer forged"}):
        status, text = get(operator, "/metrics", headers=headers)
        assert status == 401 and "trainingjob_" not in text, text
