"""The one thing a kubelet does for the kwok nodes that kwok cannot be trusted with: confirm the deletion of a pod
being deleted (delete it again with no grace left, as a kubelet does once the pod's containers have stopped),
naming the pod's UID. Finalizers are left to their owners, as a kubelet leaves them.

Why not kwok's own delete stage: it deletes by name alone, and under load its deletes lag behind the events that
asked for them. One that arrived after its pod was gone deleted the pod created since under the same name: in the
chaos test, the replacement of a parameter-server worker the operator had just created under the worker's name,
which the operator then rightly counted as a disruption nobody caused. A kubelet's delete names the UID, so the
apiserver refuses it for a namesake (409), and so does this one's.

A pod in a terminal phase needs no confirmation: the apiserver deletes it with no grace itself. Pods on a node
without kwok's annotation (a node no kubelet serves, in a test) are left alone, as kwok leaves them. A confirmation
the apiserver did not take (429, 5xx, no answer) is tried again until it is, or until the pod is gone."""

import logging
import queue
import threading
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client

from testbed.kwok import NODE_ANNOTATION
from trainingjob.kube.watch import Informer, Source

log = logging.getLogger(__name__)
Manifest = dict[str, Any]
WORKERS = 8  # confirmations in flight at once: a gang of thousands deleted together is confirmed in seconds
RETRY = (0.2, 2.0)  # first and longest delay before a confirmation is tried again
TIMEOUT = (5, 30)  # connect, read


@dataclass(frozen=True)
class Ask:
    """One pod's deletion to confirm."""

    namespace: str
    name: str
    uid: str
    node: str

    @staticmethod
    def of(pod: Manifest) -> "Ask":
        metadata, node = pod["metadata"], str(pod["spec"]["nodeName"])
        return Ask(str(metadata["namespace"]), str(metadata["name"]), str(metadata["uid"]), node)


def needs_confirming(pod: Manifest) -> bool:
    """A pod whose deletion was asked with grace left, still waiting for its kubelet to confirm it."""
    metadata = pod.get("metadata") or {}
    if not metadata.get("deletionTimestamp") or metadata.get("deletionGracePeriodSeconds") == 0:
        return False
    return bool((pod.get("spec") or {}).get("nodeName"))


class DeletionConfirmer:
    """Watches every pod and confirms, by UID, the deletion of each one on a kwok node, from WORKERS threads;
    owns `api`, closed by stop()."""

    def __init__(self, api: client.ApiClient, workers: int = WORKERS) -> None:
        self.api, self.core = api, client.CoreV1Api(api)
        self._asks: queue.Queue[Ask | None] = queue.Queue()
        self._pending: set[str] = set()  # the UIDs asked and not yet done with
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._workers = [
            threading.Thread(target=self._work, name="confirm deletions", daemon=True) for _ in range(workers)
        ]
        self.nodes = KwokNodes()
        self.informers = (
            Informer(api, Source("nodes", "/api/v1/nodes"), self.nodes),
            Informer(api, Source("pods", "/api/v1/pods"), self, keep=_kept),
        )

    def start(self) -> None:
        for worker in self._workers:
            worker.start()
        for informer in self.informers:
            informer.start()

    def stop(self) -> None:
        self._stopping.set()
        for informer in self.informers:
            informer.stop()
        for _ in self._workers:
            self._asks.put(None)
        for worker in self._workers:
            worker.join(timeout=TIMEOUT[0] + TIMEOUT[1])
        self.api.close()

    def replace(self, items: list[Manifest | None], version: str) -> None:
        for pod in items:
            if pod is not None:
                self._ask(Ask.of(pod))

    def apply(self, kind: str, item: Manifest) -> None:
        if kind != "DELETED" and needs_confirming(item):
            self._ask(Ask.of(item))

    def confirm(self, ask: Ask) -> bool | None:
        """Delete the pod with no grace left, if it is still the pod of its UID (a namesake is refused: 409) and
        its node is kwok's: True when the apiserver took it, False when there is nothing to confirm, None when it
        did not answer (try again)."""
        try:
            if not self._on_kwok_node(ask):
                return False
            this_pod = client.V1Preconditions(uid=ask.uid)
            options = client.V1DeleteOptions(grace_period_seconds=0, preconditions=this_pod)
            self.core.delete_namespaced_pod(
                ask.name, ask.namespace, body=options, _preload_content=False, _request_timeout=TIMEOUT
            )
        except client.ApiException as error:
            if error.status in (404, 409):  # its node or the pod gone, or the name a namesake's: nothing to confirm
                return False
            log.warning("confirming the deletion of pod %s/%s: %s", ask.namespace, ask.name, error)
            return None
        except urllib3.exceptions.HTTPError as error:
            log.warning("confirming the deletion of pod %s/%s: %s", ask.namespace, ask.name, error)
            return None
        return True

    def _on_kwok_node(self, ask: Ask) -> bool:
        """Whether the pod's node is kwok's: as the node watch last said, else (a node it has yet to deliver) as the
        apiserver says now."""
        known = self.nodes.kwok.get(ask.node)
        if known is None:
            node = self.core.read_node(ask.node, _request_timeout=TIMEOUT)
            known = kwok_managed(self.core.api_client.sanitize_for_serialization(node))
        return known

    def _ask(self, ask: Ask) -> None:
        with self._lock:
            if ask.uid in self._pending:
                return
            self._pending.add(ask.uid)
        self._asks.put(ask)

    def _work(self) -> None:
        while (ask := self._asks.get()) is not None:
            tries = 0
            while self.confirm(ask) is None and not self._stopping.is_set():
                tries += 1
                self._stopping.wait(min(RETRY[0] * 2 ** min(tries - 1, 10), RETRY[1]))
            with self._lock:
                self._pending.discard(ask.uid)


def kwok_managed(node: Manifest) -> bool:
    """Whether kwok runs the node's pods: it carries kwok's annotation (testbed/kwok.py)."""
    return ((node.get("metadata") or {}).get("annotations") or {}).get(NODE_ANNOTATION) == "fake"


class KwokNodes:
    """Which nodes are kwok's, by name, kept by a node watch (a node deleted is forgotten)."""

    def __init__(self) -> None:
        self.kwok: dict[str, bool] = {}

    def replace(self, items: list[Manifest], version: str) -> None:
        self.kwok = {str(node["metadata"]["name"]): kwok_managed(node) for node in items}

    def apply(self, kind: str, item: Manifest) -> None:
        name = str(item["metadata"]["name"])
        if kind == "DELETED":
            self.kwok.pop(name, None)
        else:
            self.kwok[name] = kwok_managed(item)


def _kept(pod: Manifest) -> Manifest | None:
    """What a list keeps: the pods to confirm (the others are dropped page by page)."""
    return pod if needs_confirming(pod) else None
