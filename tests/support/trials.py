"""A sweep's trials on the cluster tier: a two-value grid parameter, and a trial's rank ended as the trainer ends."""

import json
import time

from testbed.harness import Harness

BATCH = [{"name": "batch", "path": "trainer.batchSize", "type": "Categorical", "values": [16, 32]}]


def finish_trial(h: Harness, job: str, accuracy: float) -> None:
    """The trial's one rank ends as the trainer does: exit 0 with its final report as the termination message."""
    try:
        (rank0,) = h.wait_running_pods(job, 1, attempt=1)
    except TimeoutError:
        print(h.operator.log_tail(), h.job(job).get("status"), [p.status.phase for p in h.pods(job)])
        raise
    final = {"step": 100, "heartbeat": time.time(), "totalSteps": 100, "finished": True,
             "metrics": {"accuracy": accuracy}, "metricsStep": 100}  # fmt: skip
    h.finish(rank0.metadata.name, 0, message=json.dumps(final))
