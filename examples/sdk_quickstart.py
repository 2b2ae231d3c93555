"""Submit a job, wait for it, print its metrics: the SDK from a notebook or a script (pip install trainingjob).
Usage: python examples/sdk_quickstart.py [MANIFEST]  (default examples/digits-ddp.yaml, whose checkpoint claim,
examples/digits-ddp-checkpoints.yaml, must exist in the namespace first)."""

import sys

from trainingjob_sdk import connect

client = connect()  # your kubeconfig and its namespace; or the REST API: TJCTL_SERVER and TJCTL_TOKEN
job = client.create(sys.argv[1] if len(sys.argv) > 1 else "examples/digits-ddp.yaml")
print(f"submitted {job.metadata.name} to {client.namespace}")
done = client.wait(str(job.metadata.name), timeout=1800)  # JobFailed if it fails, WaitTimeout if it takes longer
result = done.status.result if done.status else None
print(f"succeeded in attempt {done.status.attempt if done.status else '?'}: {result.metrics if result else {}}")
