"""The REST API's request metrics take their label values from closed sets: requests with invented HTTP methods and
paths, as anyone may send them without a token, add no series (they had taken /metrics from 839 bytes to 48 MB)."""

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from trainingjob_api.metrics import ApiMetrics, MetricsMiddleware

pytestmark = pytest.mark.fast


def app_with_metrics() -> tuple[TestClient, ApiMetrics]:
    app, metrics = FastAPI(), ApiMetrics()

    @app.get("/api/v1/things/{name}")
    def thing(name: str) -> dict[str, str]:
        return {"name": name}

    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return TestClient(app), metrics


def label_values(metrics: ApiMetrics, label: str) -> set[str]:
    return {
        sample.labels[label]
        for family in metrics.registry.collect()
        if family.name == "trainingjob_api_requests"
        for sample in family.samples
        if label in sample.labels
    }


def test_invented_methods_and_paths_share_one_series_each() -> None:
    client, metrics = app_with_metrics()
    for index in range(50):
        client.request(f"X{'Y' * 200}{index}", f"/invented/{index}")
        client.get(f"/api/v1/things/{index}")
    assert label_values(metrics, "method") == {"GET", "other"}
    assert label_values(metrics, "route") == {"/api/v1/things/{name}", "unmatched"}
    series = [s for f in metrics.registry.collect() if f.name == "trainingjob_api_requests" for s in f.samples]
    assert len(series) <= 2 * 4, series  # {GET, other} x (its _total and _created), a status or two each


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_the_methods_of_http_keep_their_name(method: str) -> None:
    client, metrics = app_with_metrics()
    client.request(method, "/api/v1/things/a")
    assert label_values(metrics, "method") == {method}
