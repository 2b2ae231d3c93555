"""A fresh namespace per test, named after the test, with its default ServiceAccount, deleted afterwards."""

import re
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from tests.support.controlplane import ControlPlane


def create_namespace(core: client.CoreV1Api, name: str) -> None:
    """A namespace and its default ServiceAccount (pods are refused until it exists): no waiting for the
    controller-manager, on a plane that has one or not."""
    core.create_namespace({"metadata": {"name": name}})
    try:
        core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
    except client.ApiException as error:
        if error.status != 409:  # the controller-manager made it first
            raise


def fresh_namespace(plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    with plane.api_client() as api:
        core = client.CoreV1Api(api)
        create_namespace(core, name)
        yield name
        core.delete_namespace(name)
