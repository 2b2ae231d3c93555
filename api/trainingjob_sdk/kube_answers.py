"""Kubernetes' answers (and no answer at all) as the SDK's typed errors."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes.client import ApiException
from kubernetes.config import ConfigException
from urllib3.exceptions import HTTPError

from trainingjob_sdk.errors import (
    FieldError,
    Invalid,
    NotConfigured,
    NotFound,
    TrainingJobError,
    Unavailable,
    for_status,
    unreachable_reason,
)


def kubernetes_message(error: ApiException) -> tuple[str, dict[str, Any]]:
    """The apiserver's own message in an error, and its whole Status body."""
    try:
        body = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        body = {}
    body = body if isinstance(body, dict) else {}
    return str(body.get("message") or f"HTTP {error.status}"), body


def status_error(status: int, body: dict[str, Any], what: str) -> TrainingJobError:
    """The SDK's error for a Kubernetes Status (`body`) with HTTP `status` about `what`."""
    message, reason = str(body.get("message") or f"HTTP {status}"), body.get("reason")
    if status == 404:
        return NotFound(f"{what} not found", status=404, reason=reason)
    if status in (400, 422):
        causes = (body.get("details") or {}).get("causes") or []
        fields = [FieldError(str(c.get("field", "")), str(c.get("message", ""))) for c in causes]
        return Invalid(message, fields, status=status, reason=reason)
    return for_status(status, message, reason)


def typed(error: ApiException, what: str) -> TrainingJobError:
    """The SDK's error for a Kubernetes answer about `what`."""
    _, body = kubernetes_message(error)
    return status_error(int(error.status or 0), body, what)


@contextmanager
def answering(what: str) -> Iterator[None]:
    """Kubernetes' errors about `what`, no answer at all, and credentials that could not be refreshed (an exec
    plugin or a token provider failing in the middle of a request), as the SDK's errors."""
    try:
        yield
    except ApiException as error:
        raise typed(error, what) from None
    except HTTPError as error:
        raise Unavailable(f"the Kubernetes API server is unreachable: {unreachable_reason(error)}") from None
    except ConfigException as error:
        message = " ".join(str(error).split())
        raise NotConfigured(f"the kubeconfig's credentials could not be refreshed: {message}") from None
