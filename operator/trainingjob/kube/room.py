"""Room for a shrunk elastic job's workers, read from the apiserver: the nodes, and the unfinished pods bound to
them (every namespace's: they hold the nodes' resources). Read only for a job that runs shrunk, once its resize
interval is over (reconcile/job.py); the count is children/room.py's. Without the right to list them (a chart
installed without it) the job does not grow, and the operator says so once."""

import json
import logging
from typing import Any

from kubernetes import client

from trainingjob.children.room import spare_pods
from trainingjob.kube.ports import Manifest
from trainingjob.kube.resources import TIMEOUT

log = logging.getLogger(__name__)
BOUND_UNFINISHED = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


class NodeRoom:
    """Nodes and pods through `api`."""

    def __init__(self, api: Any) -> None:
        self.core = client.CoreV1Api(api)
        self._refused = False

    def spare(self, pod: Manifest, at_most: int) -> int:
        """How many more pods like `pod` fit on the nodes now, at most `at_most`; 0 when they cannot be read."""
        try:
            nodes = self.core.list_node(_preload_content=False, _request_timeout=TIMEOUT)
            pods = self.core.list_pod_for_all_namespaces(
                field_selector=BOUND_UNFINISHED, _preload_content=False, _request_timeout=TIMEOUT
            )
        except client.ApiException as error:
            if error.status not in (401, 403):
                raise
            if not self._refused:
                log.warning("cannot list nodes or pods (%s): shrunk elastic jobs do not grow back", error.status)
            self._refused = True
            return 0
        return spare_pods(json.loads(nodes.data)["items"], json.loads(pods.data)["items"], pod, at_most)
