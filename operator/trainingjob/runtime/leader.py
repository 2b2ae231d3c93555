"""Leader election on a coordination.k8s.io Lease, as Kubernetes' own controllers do: one operator acts; the
others watch the Lease and take over when the leader stops renewing it (at once when it releases it).

A candidate judges expiry by its own clock, from the moment it last saw the Lease change (so clocks of
different machines never need to agree). The leader stops acting when it could not renew for two thirds of
the lease, before any standby may take over."""

import asyncio
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from trainingjob.kube.answers import CALL_ERRORS, answer, status_of

log = logging.getLogger(__name__)
TIMEOUT = (2, 5)


def _micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def existing_lease_namespace(api: client.CoordinationV1Api, name: str) -> str | None:
    """The namespace of a Lease of this name, if exactly one exists and this identity may list Leases: how an
    operator run outside the cluster (a stray `make run-operator`) finds the installed one's Lease."""
    try:
        found = api.list_lease_for_all_namespaces(field_selector=f"metadata.name={name}", _request_timeout=TIMEOUT)
    except CALL_ERRORS:
        return None
    namespaces = {lease.metadata.namespace for lease in found.items}
    return namespaces.pop() if len(namespaces) == 1 else None


class LeaderElector:
    def __init__(
        self,
        api: client.CoordinationV1Api,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        find_namespace: Callable[[], str] | None = None,
    ) -> None:
        self.api, self.namespace, self.name, self.identity = api, namespace, name, identity
        # How the namespace was found, when it was found rather than configured (an installed operator's Lease):
        # asked again when a Lease cannot be created there (the namespace was deleted, or is being deleted).
        self.find_namespace = find_namespace
        self.lease_seconds = lease_seconds
        self.clock = clock
        self._seen: tuple[Any, ...] | None = None  # the Lease's holder and renew time, as last read
        self._seen_at = 0.0
        self._renewed_at: float | None = None
        self._last_error = ""

    def is_leader(self) -> bool:
        """Leading, and renewed recently enough that no standby can have taken over."""
        return self._renewed_at is not None and self.clock() - self._renewed_at < self.lease_seconds * 2 / 3

    def try_once(self) -> bool:
        """Acquire or renew the Lease if it is free, expired or ours; True while this operator leads."""
        try:
            response = self.api.read_namespaced_lease(
                self.name, self.namespace, _preload_content=False, _request_timeout=TIMEOUT
            )
        except CALL_ERRORS as error:
            return self._write(None) if status_of(error) == 404 else self._failed(error)
        return self._write(json.loads(response.data))

    def _write(self, lease: dict[str, Any] | None) -> bool:
        now = self.clock()
        spec = (lease or {}).get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        seen = (holder, spec.get("renewTime"), spec.get("leaseTransitions"))
        if seen != self._seen:
            self._seen, self._seen_at = seen, now
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        if holder and holder != self.identity and now - self._seen_at < duration:
            self._renewed_at = None
            return False
        stamp = _micro_time(datetime.now(UTC))
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                **spec,
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(int(self.lease_seconds), 1),
                "renewTime": stamp,
            },
        }
        if holder != self.identity:
            body["spec"]["acquireTime"] = stamp
            body["spec"]["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if lease else 0)
        try:
            if lease is None:
                self.api.create_namespaced_lease(self.namespace, body, _request_timeout=TIMEOUT)
            else:
                body["metadata"]["resourceVersion"] = lease["metadata"]["resourceVersion"]
                self.api.replace_namespaced_lease(self.name, self.namespace, body, _request_timeout=TIMEOUT)
        except CALL_ERRORS as error:
            if lease is None and self.find_namespace is not None and status_of(error) in (403, 404):
                self._find_namespace_again()
            return self._failed(error)  # 409: another candidate won this round
        if holder != self.identity:
            log.info("leading as %s (Lease %s/%s)", self.identity, self.namespace, self.name)
        self._renewed_at, self._last_error = now, ""
        return True

    def _find_namespace_again(self) -> None:
        assert self.find_namespace is not None
        found = self.find_namespace()
        if found != self.namespace:
            log.warning("no Lease can be made in namespace %s (gone?): leasing in %s", self.namespace, found)
            self.namespace, self._seen = found, None

    def _failed(self, error: Exception) -> bool:
        found = answer(error)
        status = found.status if found is not None else None
        said = f"{status or ''} {found.message if found is not None else error}".strip()
        if status != 409 and said != self._last_error:
            log.warning("Lease %s/%s: %s", self.namespace, self.name, said)  # e.g. 403: RBAC lacks leases
        self._last_error = said
        was = self._renewed_at is not None
        if not self.is_leader():
            self._renewed_at = None
            if was:
                log.warning("lost the Lease %s/%s: %s", self.namespace, self.name, error)
        return self.is_leader()

    def release(self) -> None:
        """Give the Lease up so a standby takes over at once (on a clean shutdown)."""
        if self._renewed_at is None:
            return
        self._renewed_at = None
        try:
            response = self.api.read_namespaced_lease(
                self.name, self.namespace, _preload_content=False, _request_timeout=TIMEOUT
            )
            lease = json.loads(response.data)
            if lease["spec"].get("holderIdentity") != self.identity:
                return
            lease["spec"].update(holderIdentity=None, leaseDurationSeconds=1, renewTime=_micro_time(datetime.now(UTC)))
            self.api.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=TIMEOUT)
        except CALL_ERRORS as error:
            log.warning("could not release the Lease %s/%s: %s", self.namespace, self.name, error)
            return
        log.info("released the Lease %s/%s", self.namespace, self.name)


async def lead(
    elector: LeaderElector,
    gate: asyncio.Event,
    every: float,
    *,
    on_won: Callable[[], None] = lambda: None,
    on_lost: Callable[[], None] = lambda: None,
    may_open: Callable[[], bool] = lambda: True,
) -> None:
    """Keep trying to lead; open the gate while leading (after `on_won`) unless `may_open` says no (the operator is
    stepping down), close it as soon as leadership may be lost (then `on_lost`: the new leader reports on the
    jobs). Called once the stores are synced."""
    while True:
        try:
            leading = await asyncio.to_thread(elector.try_once)
        except Exception:  # never let the election loop die: a dead loop would keep the gate as it was
            log.exception("leader election failed; retrying")
            leading = elector.is_leader()
        if leading and not gate.is_set() and may_open():
            on_won()
            gate.set()
        elif not leading and gate.is_set():
            log.warning("not leading any more: reconciles stop until the Lease is held again")
            gate.clear()
            on_lost()
        await asyncio.sleep(every)
