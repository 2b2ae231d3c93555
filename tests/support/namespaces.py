"""A fresh namespace per test, named after the test, with its default ServiceAccount, deleted afterwards."""

import re
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from tests.support.controlplane import ControlPlane


def fresh_namespace(plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    with plane.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        try:
            core.create_namespaced_service_account(
                name, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="default"))
            )
        except client.ApiException as error:
            if error.status != 409:  # the controller-manager made it first
                raise
        yield name
        core.delete_namespace(name)
