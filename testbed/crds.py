"""Our generated CRDs installed on a control plane, and a bare plane made ready for jobs."""

from typing import Any

from kubernetes import client

from testbed.namespaces import create_namespace
from testbed.processes import poll_until
from trainingjob.generate import crd

_ESTABLISH_TIMEOUT = 60.0


def is_established(extensions: client.ApiextensionsV1Api, name: str) -> bool:
    found = extensions.read_custom_resource_definition(name)
    conditions = found.status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def apply_crd(extensions: client.ApiextensionsV1Api, manifest: dict[str, Any]) -> str:
    """Create a CRD, or replace the one of its name; its name."""
    name = str(manifest["metadata"]["name"])
    try:
        extensions.create_custom_resource_definition(manifest)
    except client.ApiException as error:
        if error.status != 409:
            raise
        current = extensions.read_custom_resource_definition(name)
        manifest["metadata"]["resourceVersion"] = current.metadata.resource_version
        extensions.replace_custom_resource_definition(name, manifest)
    return name


def install_crd(api: client.ApiClient, resource: crd.Resource = crd.JOB) -> None:
    """Create or replace a generated CRD (TrainingJob's unless told) and wait until the apiserver serves it."""
    extensions = client.ApiextensionsV1Api(api)
    name = apply_crd(extensions, crd.crd(resource))
    poll_until(lambda: is_established(extensions, name), timeout=_ESTABLISH_TIMEOUT, what=f"{name} Established")


def prepare_bare_plane(api: client.ApiClient, namespace: str) -> None:
    """A plane of a test's own without a controller-manager: the CRD, a namespace and the ServiceAccount that
    the controller-manager would have made in it."""
    install_crd(api)
    create_namespace(client.CoreV1Api(api), namespace)
