"""Kubernetes' answers (and no answer at all) as the SDK's typed errors, read through the one mapping every
Kubernetes call shares (trainingjob.kube.answers)."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes.client import ApiException

from trainingjob.kube.answers import CALL_ERRORS, Answer, answer, from_status
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
    found = answer(error)
    if found is None or found.status is None:
        return f"HTTP {error.status}", {}
    return found.message, dict(found.body or {})


def typed_answer(found: Answer, what: str) -> TrainingJobError:
    """The SDK's error for the apiserver's answer about `what`."""
    status, reason = int(found.status or 0), found.reason or None
    if status == 404:
        return NotFound(f"{what} not found", status=404, reason=reason)
    if status in (400, 422):
        return Invalid(found.message, [FieldError(f, m) for f, m in found.causes], status=status, reason=reason)
    return for_status(status, found.message, reason)


def status_error(status: int, body: dict[str, Any], what: str) -> TrainingJobError:
    """The SDK's error for a Kubernetes Status (`body`) with HTTP `status` about `what`."""
    return typed_answer(from_status(status, body), what)


def typed(error: ApiException, what: str) -> TrainingJobError:
    """The SDK's error for a Kubernetes answer about `what`."""
    found = answer(error)
    return typed_answer(found if found is not None and found.status else from_status(0, {}), what)


@contextmanager
def answering(what: str) -> Iterator[None]:
    """Kubernetes' errors about `what`, no answer at all, and credentials that could not be refreshed (an exec
    plugin or a token provider failing in the middle of a request), as the SDK's errors."""
    try:
        yield
    except CALL_ERRORS as error:
        found = answer(error)
        if found is None:
            raise
        if found.status is not None:
            raise typed_answer(found, what) from None
        if found.reason == "NotConfigured":
            raise NotConfigured(f"the kubeconfig's credentials could not be refreshed: {found.message}") from None
        raise Unavailable(f"the Kubernetes API server is unreachable: {unreachable_reason(error)}") from None
