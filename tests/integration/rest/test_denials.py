"""Every route of the REST API refuses a caller without the matching right: the table is the routers' own routes,
so a route added without a permission check fails here. The caller is the `writer` of conftest.py's world, who may do
anything in its home namespace and nothing in the other one."""

import pytest
from fastapi.routing import APIRoute
from tests.support.rest_api import World, manifest

from trainingjob_api.routers import activity, jobs

pytestmark = pytest.mark.envtest
NAMESPACED = "/api/v1/namespaces/{namespace}/"
ROUTES = sorted(
    (method, route.path)
    for route in [*jobs.router.routes, *activity.router.routes]
    if isinstance(route, APIRoute) and route.path.startswith(NAMESPACED)
    for method in route.methods or ()
)


def test_the_table_holds_every_namespaced_route() -> None:
    assert len(ROUTES) >= 10, ROUTES  # create, list, get, delete, suspend, resume, failure, events, logs, watch


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p.removeprefix(NAMESPACED)}" for m, p in ROUTES])
def test_a_caller_without_the_right_is_refused(world: World, method: str, path: str) -> None:
    url = path.format(namespace=world.other, name="someone-elses")
    body = manifest("someone-elses") if method == "POST" and path.endswith("trainingjobs") else None
    response = world.writer.request(method, url, json=body)
    assert response.status_code == 403, response.text
    assert world.other in response.json()["message"]
