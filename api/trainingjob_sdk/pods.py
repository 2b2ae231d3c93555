"""A job's pods by replica slot (pure functions over pods' JSON): which pod serves "worker-1" now, or in an
earlier attempt, and whether it has a log to read yet."""

import re
from typing import Any

from trainingjob.children.naming import ATTEMPT_LABEL, INDEX_LABEL, ROLE_LABEL, ROLES, Replica
from trainingjob_sdk.errors import FieldError, Invalid, NotFound

REPLICA_PATTERN = rf"^({'|'.join(ROLES)})-([0-9]{{1,5}})$"


def parse_replica(replica: str) -> Replica:
    """'worker-1' as a slot; Invalid naming `replica` otherwise."""
    found = re.fullmatch(REPLICA_PATTERN, replica)
    if found is None:
        message = f"replica {replica!r} is not <role>-<index> with role {' or '.join(ROLES)}, e.g. worker-0"
        raise Invalid(message, [FieldError("replica", message)], status=None)
    return Replica(found[1], int(found[2]))


def replica_selector(slot: Replica) -> str:
    return f"{ROLE_LABEL}={slot.role},{INDEX_LABEL}={slot.index}"


def attempt_of(pod: dict[str, Any]) -> int:
    value = str(((pod.get("metadata") or {}).get("labels") or {}).get(ATTEMPT_LABEL, ""))
    return int(value) if value.isdigit() and len(value) < 10 else 0


def pick(found: list[dict[str, Any]], job: str, replica: str, attempt: int | None) -> dict[str, Any]:
    """The pod of the newest attempt among `found` (one slot's pods), or the one of `attempt`."""
    if attempt is not None:
        found = [pod for pod in found if attempt_of(pod) == attempt]
    if not found:
        which = f" in attempt {attempt}" if attempt is not None else ""
        raise NotFound(
            f"a pod of replica {replica}{which} of {job} (not started yet, or cleaned up) not found", status=404
        )
    return max(found, key=attempt_of)


def check_has_logs(pod: dict[str, Any]) -> None:
    """NotFound (LogsNotAvailable) for a pod that has no node yet: the apiserver would answer with nothing."""
    if not (pod.get("spec") or {}).get("nodeName"):
        name, phase = pod["metadata"]["name"], (pod.get("status") or {}).get("phase")
        message = f'pod "{name}" has no logs yet: it is not scheduled to a node (phase {phase})'
        raise NotFound(message, status=404, reason="LogsNotAvailable")
