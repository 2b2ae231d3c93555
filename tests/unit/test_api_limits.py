"""What one caller may ask of the REST API: a token bucket of requests per user (429 with Retry-After beyond),
and a bound on the SubjectAccessReviews one list across namespaces may ask."""

import pytest
from tests.support.api_app import JOBS, served
from tests.support.builders import job_manifest

from trainingjob_api.limits import Bucket, CallerRates, take
from trainingjob_api.problems import ApiError
from trainingjob_api.settings import ApiSettings

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("bucket", "now", "after", "wait"),
    [
        pytest.param(Bucket(5, 0), 0, Bucket(4, 0), 0, id="tokens left: one taken"),
        pytest.param(Bucket(0, 0), 0, Bucket(0, 0), 0.5, id="empty: wait for one at 2/s"),
        pytest.param(Bucket(0, 0), 0.25, Bucket(0.5, 0.25), 0.25, id="half refilled: wait for the rest"),
        pytest.param(Bucket(0, 0), 1, Bucket(1, 1), 0, id="refilled by the rate"),
        pytest.param(Bucket(9, 0), 100, Bucket(9, 100), 0, id="never above the burst"),
        pytest.param(Bucket(3, 5), 4, Bucket(2, 4), 0, id="a clock that goes back adds nothing"),
    ],
)
def test_a_request_takes_a_token_or_says_how_long_to_wait(
    bucket: Bucket, now: float, after: Bucket, wait: float
) -> None:
    assert take(bucket, now, rate=2, burst=10) == (after, wait)


def refused(rates: CallerRates, username: str) -> ApiError:
    with pytest.raises(ApiError) as raised:
        rates.take(username)
    return raised.value


def test_each_caller_has_a_bucket_of_their_own() -> None:
    now = [0.0]
    rates = CallerRates(rate=0.5, burst=2, clock=lambda: now[0])
    rates.take("alice")
    rates.take("alice")
    error = refused(rates, "alice")
    assert (error.problem.status, error.headers) == (429, {"Retry-After": "2"})
    assert 'user "alice"' in error.problem.message
    rates.take("bob")  # alice's burst is not bob's
    now[0] = 2.0
    rates.take("alice")  # one token back after 1/rate seconds
    assert refused(rates, "alice").headers == {"Retry-After": "2"}


def test_the_least_recent_caller_is_forgotten_beyond_the_size() -> None:
    rates = CallerRates(rate=1e-9, burst=1, size=2, clock=lambda: 0.0)
    for user in ("alice", "bob", "carol"):  # alice's bucket is dropped for carol's
        rates.take(user)
    refused(rates, "carol")
    rates.take("alice")


def test_the_api_answers_429_with_retry_after_once_a_caller_is_over_the_burst() -> None:
    with served(settings=ApiSettings(rate_per_second=1e-6, rate_burst=3)) as api:
        statuses = [api.get(JOBS).status_code for _ in range(4)]
        response = api.get(JOBS)
        other = api.get(JOBS, headers={"Authorization": "Bearer reader-token"})
    assert statuses == [200, 200, 200, 429]
    assert response.status_code == 429 and int(response.headers["Retry-After"]) >= 1
    assert response.json()["reason"] == "TooManyRequests"
    assert other.status_code == 200


NAMESPACES = ["team-a", "team-b", "team-c"]


@pytest.mark.parametrize(
    ("path", "most", "token", "status"),
    [
        pytest.param("/api/v1/trainingjobs", 3, "reader-token", 200, id="jobs: as many as may be checked"),
        pytest.param("/api/v1/trainingjobs", 2, "reader-token", 422, id="jobs: more than may be checked"),
        pytest.param("/api/v1/jobsummaries", 2, "reader-token", 422, id="summaries: more than may be checked"),
        pytest.param("/api/v1/cluster", 2, "reader-token", 422, id="cluster: more than may be checked"),
        pytest.param("/api/v1/trainingsweeps", 2, "reader-token", 422, id="sweeps: more than may be checked"),
        pytest.param("/api/v1/jobsummaries?namespace=team-a", 1, "reader-token", 200, id="summaries: one namespace"),
        pytest.param("/api/v1/trainingjobs", 1, "writer-token", 200, id="everywhere: one review, no bound"),
    ],
)
def test_a_list_across_namespaces_checks_a_bounded_number_of_them(
    path: str, most: int, token: str, status: int
) -> None:
    with served(settings=ApiSettings(max_access_checks=most)) as api:
        for namespace in NAMESPACES:
            assert api.post(f"/api/v1/namespaces/{namespace}/trainingjobs", json=job_manifest("a")).status_code == 201
        rules = api.app.state.trainingjob.authorizer  # type: ignore[attr-defined]
        rules.everywhere = False  # the reader may list in each namespace, not at the cluster scope
        response = api.get(path, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == status, response.text
    if status == 422:
        assert "TJ_API_MAX_ACCESS_CHECKS" in response.json()["message"]
