"""Namespaces on a control plane: one with its default ServiceAccount, one deleted and waited for, and a fresh one
named after a test."""

import re
import uuid
from collections.abc import Generator

from kubernetes import client

from testbed.controlplane import ControlPlane
from testbed.processes import poll_until


def create_namespace(core: client.CoreV1Api, name: str) -> None:
    """A namespace and its default ServiceAccount (pods are refused until it exists): no waiting for the
    controller-manager, on a plane that has one or not."""
    core.create_namespace({"metadata": {"name": name}})
    try:
        core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
    except client.ApiException as error:
        if error.status != 409:  # the controller-manager made it first
            raise


def delete_namespace(core: client.CoreV1Api, name: str, *, timeout: float) -> None:
    """Delete a namespace and wait until it is wholly gone (its objects too), failing after `timeout` seconds."""
    core.delete_namespace(name)

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except client.ApiException as error:
            if error.status == 404:
                return True
            raise
        return False

    poll_until(gone, timeout=timeout, interval=0.2, what=f"namespace {name} deleted")


def fresh_namespace(plane: ControlPlane, test_name: str) -> Generator[str, None, None]:
    """A namespace named after a test (a fixture yields from this), deleted when the generator is closed."""
    stem = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    with plane.api_client() as api:
        core = client.CoreV1Api(api)
        create_namespace(core, name)
        yield name
        core.delete_namespace(name)
